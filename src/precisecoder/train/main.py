"""`python -m precisecoder.train --config=configs/X.py[:preset] --workdir=DIR [--config.a.b=v]`.

Runs the trainer the config names (rl, sft or dpo). A workdir that holds a checkpoint resumes.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from absl import app, flags, logging
from ml_collections import config_flags

_CONFIG = config_flags.DEFINE_config_file(
    "config", None, "ml_collections config file, e.g. configs/precisecoder.py:local",
    lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "run directory (checkpoints, metrics, report)")
flags.mark_flags_as_required(["config", "workdir"])

TRAINERS = ("rl", "sft", "dpo")


def _multi_host() -> bool:
  hosts = os.environ.get("TPU_WORKER_HOSTNAMES", "")
  return "," in hosts or "JAX_COORDINATOR_ADDRESS" in os.environ


def run(cfg, workdir: str) -> int:
  """Dispatches to the trainer `cfg.trainer`; returns the exit status."""
  import jax

  from precisecoder.sampling import enable_compilation_cache

  enable_compilation_cache()
  if _multi_host():
    jax.distributed.initialize()  # coordinates from the TPU metadata / JAX_COORDINATOR_ADDRESS
  if jax.process_count() > 1:
    logging.info("host %d of %d", jax.process_index(), jax.process_count())
  if cfg.trainer == "rl":
    from precisecoder.train import rl
    return rl.train(cfg, workdir)
  if cfg.trainer == "sft":
    from precisecoder.train import sft
    return sft.train(cfg, workdir)
  if cfg.trainer == "dpo":
    from precisecoder.train import dpo
    return dpo.train(cfg, workdir)
  raise app.UsageError(f"config trainer={cfg.trainer!r}; known: {TRAINERS}")


def _main(argv: Sequence[str]) -> int:
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  logging.set_verbosity(logging.INFO)
  return run(_CONFIG.value, _WORKDIR.value)


def main(argv: Sequence[str] | None = None) -> None:
  """Entry point; `argv` excludes the program name (None: sys.argv)."""
  app.run(_main, argv=None if argv is None else [sys.argv[0], *argv])
