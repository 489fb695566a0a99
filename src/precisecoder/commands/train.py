"""`precisecoder train --config=configs/X.py[:preset] --workdir=DIR [--config.a.b=v]`, also
`python -m precisecoder.train`.

Runs the trainer the config names (rl, sft or dpo). A workdir that holds a checkpoint resumes:
with a larger train.steps it trains on; with the same it says "finished at step N" and exits 0
(the report rewritten, nothing trained); a smaller one is refused (exit 2), and config.json
keeps the budget that was trained.
Once the workdir's metrics reach train.steps, the report is written to DIR/report.md (when
train.report; a run stopped earlier by train.stop_after or preemption gets it when resumed to
the end). A config file, preset, override or value that cannot work, a task file that is
empty or malformed, a step this machine's memory cannot hold (train/footprint.py), a workdir
that cannot be one, that another run holds (train/lock.py) or whose progress was made with
another config: each is one line naming it and exit status 2, before any model loads.
SIGTERM (preemption) saves a checkpoint of the step under way and exits 0; Ctrl-C does the
same and exits 130 with one line (a second Ctrl-C stops at once, exit 130): rerunning the same
command resumes.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
from collections.abc import Sequence
from typing import NoReturn

from absl import app, flags, logging
from ml_collections import config_flags

from precisecoder import console
from precisecoder.train import config as config_lib
from precisecoder.train.lock import WorkdirError

PASSTHROUGH = True  # absl parses the flags (`--config.a.b=v` overrides among them)

_CONFIG = config_flags.DEFINE_config_file(
  "config", None, "ml_collections config file, e.g. configs/precisecoder.py:local", lock_config=True
)
_WORKDIR = flags.DEFINE_string("workdir", None, "run directory (checkpoints, metrics, report)")
_VERBOSE = flags.DEFINE_bool("verbose", False, console.VERBOSE_HELP)
flags.mark_flags_as_required(["config", "workdir"])


def add_arguments(parser: argparse.ArgumentParser) -> None:
  """For --help only: absl parses the flags (defined above)."""
  parser.usage = (
    "%(prog)s --config=FILE[:PRESET] --workdir=DIR [--config.a.b=v ...]\n"
    "       python -m precisecoder.train (the same flags)"
  )
  parser.add_argument(
    "--config",
    metavar="FILE[:PRESET]",
    required=True,
    help="ml_collections config file and run preset, e.g. "
    "configs/precisecoder.py:local (run presets: "
    f"{', '.join(config_lib.RUN_PRESETS)})",
  )
  parser.add_argument(
    "--workdir",
    metavar="DIR",
    required=True,
    help="the run's folder (or gs://...): checkpoints, metrics, evaluations, "
    "report; a workdir holding a checkpoint resumes it",
  )
  parser.add_argument("--verbose", action="store_true", help=console.VERBOSE_HELP)
  parser.epilog = (
    "--config.a.b=v overrides any field of the config (e.g. "
    "--config.rl.lam=0.5 --config.train.steps=300); the resolved config is saved "
    "as DIR/config.json. Rerun on a workdir: a larger train.steps trains on, the "
    "same says 'finished at step N' (exit 0), a smaller one is refused. Ctrl-C "
    "saves the step under way and exits 130 (twice: at once)."
  )


def train(cfg, workdir: str) -> int:
  """Runs the trainer `cfg.trainer`, then the report when due; returns the exit status."""
  import jax

  from precisecoder import multihost
  from precisecoder.sampling import enable_compilation_cache

  enable_compilation_cache()
  # Several hosts: TPU pod metadata or JAX_COORDINATOR_ADDRESS, with the config's timeouts.
  multihost.initialize(**cfg.multihost)
  if jax.process_count() > 1:
    logging.info("host %d of %d", jax.process_index(), jax.process_count())
  _check_memory(cfg, jax.process_count(), jax.local_device_count())
  if cfg.trainer == "rl":
    from precisecoder.train import rl as trainer
  elif cfg.trainer == "sft":
    from precisecoder.train import sft as trainer
  elif cfg.trainer == "dpo":
    from precisecoder.train import dpo as trainer
  else:
    raise app.UsageError(f"config trainer={cfg.trainer!r}; known: {config_lib.TRAINERS}")
  # pylint: disable-next=import-outside-toplevel
  from precisecoder.experiments import base_model
  from precisecoder.train.workdir import Finished  # pylint: disable=import-outside-toplevel

  # model.checkpoint "base": the base policy's folder, built here on first use.
  checkpoint, seen = base_model.resolve(cfg)
  try:
    status = _interrupted_status(
      trainer.train(cfg, workdir, checkpoint=checkpoint, seen=seen), workdir
    )
  except Finished as e:  # nothing to train; the report is (re)written below
    print(e, flush=True)
    status = 0
  except WorkdirError as e:  # held by another run, written with another config, shortened
    _fail(str(e))
  if status == 0 and cfg.train.report and multihost.is_primary():
    write_report(cfg, workdir)
  # The other hosts wait for the report (minutes on a pod) here, within the config's shutdown
  # timeout, rather than in JAX's own shutdown barrier, which gives up after 5 minutes.
  multihost.barrier("end", cfg.multihost.shutdown_timeout_s)
  return status


def _interrupted_status(status: int, workdir: str) -> int:
  """130 with one line when a Ctrl-C stopped the trainer after a step (it saved a checkpoint
  of that step, as on SIGTERM); else `status`."""
  from precisecoder.train import checkpoint_writer, metrics, workdir as workdir_lib

  if status != 0 or not checkpoint_writer.interrupted():
    return status
  step = metrics.last_step(workdir_lib.Workdir(workdir).local)
  print(
    f"precisecoder train: interrupted: checkpoint of step {step} saved in {workdir}; "
    "rerun the same command to resume",
    file=sys.stderr,
    flush=True,
  )
  return 130


def _stopped_at_once(workdir: str) -> int:
  """A Ctrl-C before training began, or a second one during a step: one line, status 130."""
  print(
    f"precisecoder train: interrupted; {workdir} resumes from its last checkpoint when the "
    "same command is run again",
    file=sys.stderr,
    flush=True,
  )
  return 130


def _check_memory(cfg, hosts: int, devices: int) -> None:
  """The config's batches against this machine's memory, before the model loads."""
  # pylint: disable=import-outside-toplevel  # JAX and the model code only when a run starts
  from precisecoder.model import loading, memory
  from precisecoder.train import footprint

  try:
    footprint.check(cfg, hosts=hosts, devices=devices)
  except memory.BatchTooLarge as e:
    _fail(str(e))
  except loading.CheckpointError as e:
    _fail(f"config.model.checkpoint: {e}")


def write_report(cfg, workdir: str) -> pathlib.Path | None:
  """Writes the run's report once it has trained all `train.steps` (None before that)."""
  from precisecoder.analysis import report
  from precisecoder.train import metrics, workdir as workdir_lib

  folder = workdir_lib.Workdir(workdir)  # a bucket's files are in its local mirror
  if metrics.last_step(folder.local) < cfg.train.steps:
    return None
  path = report.write_report(folder.local)
  folder.sync()
  logging.info("report: %s", path)
  print(f"Report: {path}", flush=True)
  return path


def _fail(message: str) -> NoReturn:
  print(f"precisecoder train: error: {message}", file=sys.stderr)
  sys.exit(2)


def _check_config_flags(args: Sequence[str]) -> None:
  """The config file, its preset and every --config.* override, checked before absl parses
  them (ml_collections would raise a traceback, and name no flag)."""
  spec = None
  for i, arg in enumerate(args):
    if arg.startswith("--config="):
      spec = arg.split("=", 1)[1]
    elif arg == "--config" and i + 1 < len(args):
      spec = args[i + 1]
  if spec is None:
    return  # absl says that --config is required
  try:
    base = config_lib.load_file(spec)
  except config_lib.ConfigError as e:
    _fail(f"--config={spec}: {e}")
  for arg in args:
    if arg.startswith("--config."):
      problem = config_lib.unknown_field(base, arg.split("=", 1)[0][len("--config.") :])
      if problem:
        _fail(f"{arg}: unknown override: {problem}")


def _parse_flags(argv: list[str]) -> list[str]:
  _check_config_flags(argv[1:])
  try:
    return flags.FLAGS(argv)
  except flags.Error as e:  # a missing or unknown flag, an override value of the wrong type
    _fail(str(e))


def _check_task_files(cfg) -> None:
  """The config's task files, read once before anything loads: a malformed record or an empty
  file is one line naming the file, line and field."""
  from precisecoder import tasks as tasks_lib  # pylint: disable=import-outside-toplevel

  for field in ("task_file", "validation_file", "clean_file"):
    path = cfg.data[field]
    if path and "://" not in path:
      try:
        tasks_lib.load_tasks(path)
      except tasks_lib.TaskError as e:
        _fail(f"config.data.{field}: {e}")


def _workdir(path: str) -> str:
  try:
    pathlib.Path(path).mkdir(parents=True, exist_ok=True)
  except (FileExistsError, NotADirectoryError):
    _fail(f"--workdir={path}: is a file, or under one; a workdir is a folder")
  except OSError as e:
    _fail(f"--workdir={path}: cannot make it ({e.strerror or e})")
  return path


def _main(argv: Sequence[str]) -> int:
  if len(argv) > 1:
    _fail(f"unexpected arguments: {' '.join(argv[1:])}")
  cfg = _CONFIG.value
  try:
    config_lib.validate(cfg)
  except config_lib.ConfigError as e:
    _fail(str(e))
  _check_task_files(cfg)
  workdir = _workdir(_WORKDIR.value)
  logging.set_verbosity(logging.INFO)
  console.quiet_libraries(_VERBOSE.value)
  try:
    return train(cfg, workdir)
  except KeyboardInterrupt:
    return _stopped_at_once(workdir)


def main(argv: Sequence[str] | None = None) -> int:
  """Entry point; `argv` excludes the program name (None: sys.argv). Exits with the trainer's
  status (absl's app.run)."""
  args = sys.argv[1:] if argv is None else list(argv)
  if "-h" in args or "--help" in args:  # absl's own help names no flag of ours and exits 1
    from precisecoder.commands import checks  # pylint: disable=import-outside-toplevel

    checks.command_parser("precisecoder train", add_arguments).print_help()
    sys.exit(0)
  app.run(_main, argv=None if argv is None else [sys.argv[0], *argv], flags_parser=_parse_flags)
  return 0
