"""Multi-host test launches: N JAX processes on this machine joined by a localhost coordinator
(set up as scripts/multihost_local.sh does), each running several `precisecoder train` runs in
turn, so that a suite starts its hosts (imports, jax.distributed, compiles) once, not per run.

The tests start a launch with `Launch`; each host runs this file:

  python tests/multihost_runs.py PLAN.json

PLAN.json: {"timeouts": multihost.initialize's arguments, "runs": [{"name", "args": the train
command's arguments, "copy": optional [workdir, new workdir] the primary host copies first,
"hooks": optional test hooks (`_hooks`)}]}.
A host's log (FOLDER/logs/process_i.log) frames each run's lines with `== run NAME` and
`== run NAME exit STATUS`; a host stops at the first run that fails. A launch whose last run
kills every host (the hook "kill") is made with `ends_killed=True`.
"""

import contextlib
import hashlib
import json
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

_SCRIPT = pathlib.Path(__file__).resolve()
_ROOT = _SCRIPT.parents[1]
# What a host may take to join, go silent or reach a barrier, on a loaded 2-core machine.
TIMEOUTS = dict(initialization_timeout_s=900, heartbeat_timeout_s=300, shutdown_timeout_s=1800)
RUN_TIMEOUT_S = 600  # per run of a launch


def config_flags(overrides):
  """`--config.SECTION.FIELD=VALUE` arguments from {section: {field: value}}."""
  return [f"--config.{s}.{k}={v}" for s, values in overrides.items() for k, v in values.items()]


class Launch:
  """`processes` hosts with `devices` CPU devices each, running `runs` ({"name", "args",
  "copy", "hooks"}) in order; logs and the plan in `folder`. `ends_killed`: the last run kills
  every host (SIGKILL), which then ends the launch as it should. `extra_env`: more of the
  hosts' environment."""

  def __init__(self, folder, processes, devices, runs, timeouts, ends_killed=False, extra_env=None):
    self.folder = pathlib.Path(folder)
    self.names = [r["name"] for r in runs]
    self.ends_killed = ends_killed
    self.error = None  # set by `wait`
    (self.folder / "logs").mkdir(parents=True)
    plan = self.folder / "plan.json"
    plan.write_text(json.dumps(dict(timeouts=timeouts, runs=runs), indent=1))
    with socket.socket() as s:
      s.bind(("localhost", 0))
      port = s.getsockname()[1]
    self.hosts = []
    for i in range(processes):
      env = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",  # the log keeps the order of events
        "JAX_PLATFORMS": "cpu",
        "JAX_COORDINATOR_ADDRESS": f"localhost:{port}",
        "JAX_NUM_PROCESSES": str(processes),
        "JAX_PROCESS_ID": str(i),
        "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices} "
        + os.environ.get("XLA_FLAGS", ""),
        **(extra_env or {}),
      }
      with open(self.folder / "logs" / f"process_{i}.log", "w") as log:
        # A session of its own: a host that hangs is killed with its reward pool's workers.
        self.hosts.append(
          subprocess.Popen(
            [sys.executable, str(_SCRIPT), str(plan)],
            cwd=_ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
          )
        )

  def running(self):
    return any(h.poll() is None for h in self.hosts)

  def send_signal(self, host, signum):
    self.hosts[host].send_signal(signum)

  def wait(self, timeout_s):
    """Waits for every host to end; sets `error`, a message naming what failed (with the hosts'
    logs), when one did not end with status 0. Hosts still running after `timeout_s`, or once
    another has failed (they would wait for it until their own timeouts), are killed."""
    deadline = time.monotonic() + timeout_s
    while self.running() and time.monotonic() < deadline and not any(h.poll() for h in self.hosts):
      time.sleep(0.5)
    killed = [i for i, host in enumerate(self.hosts) if host.poll() is None]
    for i in killed:
      os.killpg(self.hosts[i].pid, signal.SIGKILL)
      self.hosts[i].wait()
    statuses = [h.returncode for h in self.hosts]
    expected = [-signal.SIGKILL if self.ends_killed else 0] * len(statuses)
    if statuses != expected:
      note = (
        f" (killed: hosts {killed}, running after {timeout_s:.0f} s or another's failure)"
        if killed
        else ""
      )
      self.error = (
        f"launch {self.folder.name} ({', '.join(self.names)}) failed: host exit "
        f"statuses {statuses}{note}\n{self._tails(self.logs())}"
      )
    return self

  def logs(self):
    return {
      p.name: p.read_text(errors="replace") for p in sorted((self.folder / "logs").glob("*.log"))
    }

  def run_logs(self, name):
    """Each host's log lines of run `name`; an AssertionError naming the run (with the
    hosts' logs) unless the launch succeeded and every host ended that run with status 0."""
    logs = self.logs()
    found = {
      host: re.search(
        rf"^== run {re.escape(name)}\n(.*?)^== run {re.escape(name)} "
        r"exit (\S+)$",
        text,
        re.S | re.M,
      )
      for host, text in logs.items()
    }
    failed = {
      host: m.group(2) if m else "no end" for host, m in found.items() if not m or m.group(2) != "0"
    }
    assert not failed and self.error is None, (
      f"run {name!r}: {failed or 'ended'}; {self.error or self._tails(logs)}"
    )
    return {host: m.group(1) for host, m in found.items()}

  def killed_run_logs(self, name):
    """Each host's log lines of run `name`, the last, which killed every host at its "kill"
    step (an AssertionError with the hosts' logs unless it did)."""
    assert self.ends_killed and self.names[-1] == name, (name, self.names)
    logs = self.logs()
    found = {
      host: re.search(
        rf"^== run {re.escape(name)}\n(.*^== killing every host\n)", text, re.S | re.M
      )
      for host, text in logs.items()
    }
    assert all(found.values()) and self.error is None, (
      f"run {name!r} did not kill every host: {self.error or self._tails(logs)}"
    )
    return {host: m.group(1) for host, m in found.items()}

  @staticmethod
  def _tails(logs):
    return "\n".join(f"== {host}\n{text[-6000:]}" for host, text in logs.items())


def prompt_digest(prompt_ids):
  """A short digest of a host's rows of prompt ids: which prompts a step trained, in order."""
  import numpy as np  # pylint: disable=import-outside-toplevel

  ids = np.ascontiguousarray(prompt_ids, np.int32)
  return hashlib.sha256(str(ids.shape).encode() + ids.tobytes()).hexdigest()[:16]


def trained_prompts(log):
  """{step: prompt_digest} of the steps a host's log of one run says it trained."""
  return {int(s): d for s, d in re.findall(r"^== step (\d+) trained prompts (\w+)$", log, re.M)}


@contextlib.contextmanager
def _hooks(spec):
  """A run's test hooks, in place while it trains. Each host logs the prompts every step
  trains (`== step S trained prompts DIGEST`, `prompt_digest` of its rows) after the step's
  metrics; then, at step spec["signal"]["step"] (a dict: "step", "hosts", "group"), it sends
  itself SIGTERM (with "group": its whole process group, reward workers too, as a VM's
  shutdown does) if it is one of the "hosts"; at step spec["kill"], every host waits for the
  checkpoints it started, and once all are there, the primary SIGKILLs every host's process
  group, its own last: a pod lost at once after that step."""
  if not spec:
    yield
    return
  # pylint: disable=import-outside-toplevel
  import jax
  from precisecoder import multihost
  from precisecoder.train import checkpoint_writer, metrics, rollout

  trained, checkpointers = [], []
  real_write = metrics.MetricsWriter.write
  real_arrays = rollout.training_arrays
  real_save = checkpoint_writer.Checkpointer.save

  def training_arrays(batch, *args, **kwargs):
    trained.append(prompt_digest(batch.prompt_ids))
    return real_arrays(batch, *args, **kwargs)

  def save(self, *args, **kwargs):
    checkpointers.append(self)
    return real_save(self, *args, **kwargs)

  def write(self, step, values, **kwargs):
    real_write(self, step, values, **kwargs)
    if not trained:  # not a training step's metrics
      return
    print(f"== step {step} trained prompts {trained.pop()}", file=sys.stderr, flush=True)
    signal_at = spec.get("signal")
    if signal_at and step == signal_at["step"] and jax.process_index() in signal_at["hosts"]:
      if signal_at.get("group"):
        assert os.getpgrp() == os.getpid(), "a host leads its own process group (Launch)"
        os.killpg(os.getpgrp(), signal.SIGTERM)
      else:
        os.kill(os.getpid(), signal.SIGTERM)
    if step == spec.get("kill"):
      for checkpointer in checkpointers:
        checkpointer.wait()
      print("== killing every host", file=sys.stderr, flush=True)  # before it may be
      groups = multihost.allgather_json(os.getpgrp())  # every host has its checkpoints
      if multihost.is_primary():
        for group in reversed(groups):
          os.killpg(group, signal.SIGKILL)
      threading.Event().wait()  # the primary kills this host

  metrics.MetricsWriter.write = write
  rollout.training_arrays = training_arrays
  checkpoint_writer.Checkpointer.save = save
  try:
    yield
  finally:
    metrics.MetricsWriter.write = real_write
    rollout.training_arrays = real_arrays
    checkpoint_writer.Checkpointer.save = real_save


def _train(args):
  """`precisecoder train ARGS` in this process; its exit status."""
  from absl import flags  # pylint: disable=import-outside-toplevel
  from precisecoder.commands import train  # pylint: disable=import-outside-toplevel

  # absl keeps the last run's flags, and ml_collections, which defines a flag for each override
  # it reads (from sys.argv), refuses to define one twice: both start afresh.
  for name in [n for n in flags.FLAGS if n.startswith("config.")]:
    delattr(flags.FLAGS, name)
  flags.FLAGS.unparse_flags()
  sys.argv = [sys.argv[0], *args]
  try:
    train.main()
  except SystemExit as e:
    return e.code if isinstance(e.code, int) else int(e.code is not None)
  return 0


def _cache_on_every_host():
  """Lets every host write the persistent compilation cache, not only process 0.

  JAX writes it from process 0 alone (one cache on a filesystem all hosts share), but on CPU a
  program's cache key holds its host's topology, so host 1 never reads host 0's entries: without
  its own, host 1 compiled every program again in each run of a launch while host 0 loaded its
  copies, and host 0 waited at the first collective. The keys differ per host, so the hosts'
  entries share one folder without clashing. Uses JAX's private `_cache_write`; where a JAX
  release lacks it, hosts other than 0 compile as before (slower, nothing else changes)."""
  # pylint: disable=import-outside-toplevel,protected-access
  import jax
  from jax._src import compilation_cache, compiler, distributed

  real = getattr(compiler, "_cache_write", None)
  put = getattr(compilation_cache, "put_executable_and_time", None)
  if real is None or put is None:
    print("== JAX has no _cache_write: host 0 alone caches compiles", file=sys.stderr)
    return

  def write(cache_key, compile_time_s, module_name, backend, executable, host_callbacks):
    if distributed.global_state.process_id == 0:
      return real(cache_key, compile_time_s, module_name, backend, executable, host_callbacks)
    # What `_cache_write` checks besides the process: programs with host callbacks embed
    # this process's callbacks, and quick compiles are not worth an entry.
    if host_callbacks or compile_time_s < jax.config.jax_persistent_cache_min_compile_time_secs:
      return None
    return put(cache_key, module_name, executable, backend, int(compile_time_s))

  compiler._cache_write = write


def main(plan_path):
  import jax  # pylint: disable=import-outside-toplevel
  from precisecoder import multihost  # pylint: disable=import-outside-toplevel

  from precisecoder.commands import train  # noqa: F401  (imported before the runs start)

  _cache_on_every_host()
  plan = json.loads(pathlib.Path(plan_path).read_text())
  # Joined once here; each run's own `initialize` then finds the process joined.
  multihost.initialize(**plan["timeouts"])
  for run in plan["runs"]:
    name = run["name"]
    print(f"== run {name}", file=sys.stderr, flush=True)
    if run.get("copy") and jax.process_index() == 0:
      shutil.copytree(*run["copy"])
    # The hosts start each run together (imported already): on a loaded machine one can reach
    # the run's first collective more than gloo's 30 s after the other.
    multihost.barrier(f"start {name}", plan["timeouts"]["shutdown_timeout_s"])
    with _hooks(run.get("hooks")):
      status = _train(run["args"])
    print(f"== run {name} exit {status}", file=sys.stderr, flush=True)
    if status:
      return status
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1]))
