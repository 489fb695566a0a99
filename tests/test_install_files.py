"""The accelerator requirement files pin the same jax as requirements.txt, and are used."""

import importlib.metadata
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _pins(name: str) -> dict[str, str]:
  pins = {}
  for line in (ROOT / name).read_text().splitlines():
    match = re.fullmatch(
      r"([A-Za-z0-9_.-]+(?:\[[a-z0-9,-]+\])?)==(\S+)", line.split("#")[0].strip()
    )
    if match:
      pins[match.group(1)] = match.group(2)
  return pins


def test_accelerator_files_pin_the_cpu_stack_jax_version():
  base = _pins("requirements.txt")
  assert base["jax"] == base["jaxlib"]
  assert _pins("requirements-cuda.txt") == {"jax[cuda12]": base["jax"]}
  tpu = _pins("requirements-tpu.txt")
  assert tpu == {"jax[tpu]": base["jax"], "libtpu": tpu["libtpu"]}
  # ... and the libtpu that this jax's [tpu] extra asks for (e.g. libtpu==0.0.42.*).
  wanted = [r for r in importlib.metadata.requires("jax") if r.startswith("libtpu")]
  series = re.search(r"==\s*([0-9.]+?)\.?\*", wanted[0]).group(1)
  assert tpu["libtpu"].startswith(series + "."), (tpu["libtpu"], wanted)


def test_tpu_launch_installs_through_the_pinned_file():
  launch = (ROOT / "launch/tpu_vm.sh").read_text()
  assert "PRECISECODER_ACCELERATOR=tpu scripts/bootstrap.sh" in launch
  assert "pip install" not in launch  # nothing unpinned over the pinned jax
  assert "requirements-$ACCEL.txt" in (ROOT / "scripts/bootstrap.sh").read_text()


def test_tensorboard_is_pinned_and_installed_without_tensorflow():
  """The workdir's event files are documented to open in TensorBoard: it is installed with the
  stack, and what it pulls in is not TensorFlow."""
  base = _pins("requirements.txt")
  assert base["tensorboard"] == importlib.metadata.version("tensorboard")
  assert not [
    r
    for r in importlib.metadata.requires("tensorboard") or []
    if r.lower().startswith("tensorflow")
  ]
