"""Multi-host test launches: N JAX processes on this machine joined by a localhost coordinator
(set up as scripts/multihost_local.sh does), each running several `precisecoder train` runs in
turn, so that a suite starts its hosts (imports, jax.distributed, compiles) once, not per run.

The tests start a launch with `Launch`; each host runs this file:

  python tests/multihost_runs.py PLAN.json

PLAN.json: {"timeouts": multihost.initialize's arguments, "runs": [{"name", "args": the train
command's arguments, "copy": optional [workdir, new workdir] the primary host copies first}]}.
A host's log (FOLDER/logs/process_i.log) frames each run's lines with `== run NAME` and
`== run NAME exit STATUS`; a host stops at the first run that fails.
"""

import json
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

_SCRIPT = pathlib.Path(__file__).resolve()
_ROOT = _SCRIPT.parents[1]


class Launch:
  """`processes` hosts with `devices` CPU devices each, running `runs` ({"name", "args",
  "copy"}) in order; logs and the plan in `folder`."""

  def __init__(self, folder, processes, devices, runs, timeouts):
    self.folder = pathlib.Path(folder)
    self.names = [r["name"] for r in runs]
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
    if any(statuses):
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

  @staticmethod
  def _tails(logs):
    return "\n".join(f"== {host}\n{text[-6000:]}" for host, text in logs.items())


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


def main(plan_path):
  import jax  # pylint: disable=import-outside-toplevel
  from precisecoder import multihost  # pylint: disable=import-outside-toplevel

  plan = json.loads(pathlib.Path(plan_path).read_text())
  # Joined once here; each run's own `initialize` then finds the process joined.
  multihost.initialize(**plan["timeouts"])
  for run in plan["runs"]:
    name = run["name"]
    print(f"== run {name}", file=sys.stderr, flush=True)
    if run.get("copy"):
      source, target = run["copy"]
      if jax.process_index() == 0:
        shutil.copytree(source, target)
      multihost.barrier(f"copy for {name}", plan["timeouts"]["shutdown_timeout_s"])
    status = _train(run["args"])
    print(f"== run {name} exit {status}", file=sys.stderr, flush=True)
    if status:
      return status
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1]))
