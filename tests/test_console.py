"""Library chatter is off by default on every JAX command, and `--verbose` brings it back."""

import logging
import os
import subprocess
import sys

import pytest

from precisecoder import console


def _record(path, level, msg="m"):
  return logging.LogRecord("absl", level, path, 1, msg, (), None)


def test_library_info_and_harmless_warnings_are_dropped_others_kept():
  quiet = console.QuietLibraries()
  orbax = "/x/site-packages/orbax/checkpoint/_src/metadata/checkpoint.py"
  assert not quiet.filter(_record(orbax, logging.INFO))
  assert not quiet.filter(_record(orbax, logging.WARNING, "Metadata file does not exist: %s"))
  assert quiet.filter(_record(orbax, logging.WARNING, "something the user should see"))
  assert quiet.filter(_record(orbax, logging.ERROR, "Metadata file does not exist: %s"))
  assert not quiet.filter(
    _record(
      "/x/site-packages/jax/_src/xla_bridge.py",
      logging.INFO,
      "Unable to initialize backend 'tpu': ...",
    )
  )
  assert quiet.filter(_record("/work/src/precisecoder/train/metrics.py", logging.INFO))


# What evaluate and export do: JAX starts its backends, Orbax reads a checkpoint written without
# its metadata file.
_SCRIPT = """
import logging, pathlib, sys, tempfile
logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
from precisecoder import console
console.quiet_libraries("--verbose" in sys.argv)
import jax, numpy as np, orbax.checkpoint as ocp
jax.devices()
path = pathlib.Path(tempfile.mkdtemp()) / "params"
with ocp.StandardCheckpointer() as saver:
  saver.save(path, {"w": np.zeros(2)})
ocp.StandardCheckpointer().restore(path)
from orbax.checkpoint._src.metadata import checkpoint as orbax_metadata
orbax_metadata.metadata_store(enable_write=False).read(path / "_NO_METADATA")
logging.getLogger("precisecoder.evaluate").info("ours")
"""


@pytest.mark.parametrize("verbose", [False, True])
def test_a_command_process_is_quiet_unless_verbose(verbose):
  env = {
    k: v for k, v in os.environ.items() if k not in (console.LIBRARY_LOGS_ENV, "JAX_PLATFORMS")
  }  # JAX tries every backend
  out = subprocess.run(
    [sys.executable, "-c", _SCRIPT] + (["--verbose"] if verbose else []),
    capture_output=True,
    text=True,
    env=env,
    timeout=300,
    check=True,
  )
  lines = out.stderr.splitlines()
  assert "INFO ours" in lines
  assert (
    [l for l in lines if not l.startswith("INFO ours")] == []
    if not verbose
    else (len(lines) > 10 and any("Metadata file does not exist" in l for l in lines))
  ), out.stderr
