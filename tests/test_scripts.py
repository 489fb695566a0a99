"""scripts/main_job.sh takes the trainer's arguments (checked with --dry-run, which prints the
trainer's command line without installing or training anything)."""

import pathlib
import shlex
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _main_job(*args, cwd):
  return subprocess.run(
    [str(ROOT / "scripts" / "main_job.sh"), "--dry-run", *args],
    cwd=cwd,
    capture_output=True,
    text=True,
    check=False,
  )


@pytest.mark.parametrize(
  "args, workdir, overrides",
  [
    ((), "runs/main", []),
    (("--config.train.steps=2",), "runs/main", ["--config.train.steps=2"]),  # not a workdir
    (("--workdir=runs/x", "--config.rl.lam=0.5"), "runs/x", ["--config.rl.lam=0.5"]),
    (("--workdir", "runs/x"), "runs/x", []),
    (("runs/old-style", "--config.train.steps=8"), "runs/old-style", ["--config.train.steps=8"]),
    (("--config.train.steps=8", "runs/old-style"), "runs/old-style", ["--config.train.steps=8"]),
  ],
)
def test_main_job_parses_its_arguments_like_the_trainer(tmp_path, args, workdir, overrides):
  done = _main_job(*args, cwd=tmp_path)
  assert done.returncode == 0, done.stderr
  command = shlex.split(done.stdout)
  assert command[:3] == [str(ROOT / ".venv/bin/python"), "-m", "precisecoder.train"]
  assert command[3:] == [
    f"--config={ROOT}/configs/precisecoder.py:local",
    f"--workdir={workdir}",
    *overrides,
  ]  # relative to where it runs


@pytest.mark.parametrize(
  "args, message",
  [
    (("a", "b"), "two workdirs given: 'a' and 'b'"),
    (("--workdir=a", "b"), "two workdirs given: 'a' and 'b'"),
    (
      ("--config.train.steps", "3"),
      "--config.train.steps: give overrides as --config.train.steps=VALUE",
    ),
    (("--stpes=3",), "unknown argument --stpes=3"),
  ],
)
def test_main_job_refuses_what_it_cannot_read_in_one_line(tmp_path, args, message):
  done = _main_job(*args, cwd=tmp_path)
  assert done.returncode == 2 and not done.stdout
  assert done.stderr.startswith(f"scripts/main_job.sh: error: {message}")
  assert len(done.stderr.splitlines()) == 1


def test_main_job_help_exits_0():
  done = subprocess.run(
    [str(ROOT / "scripts" / "main_job.sh"), "--help"], capture_output=True, text=True, check=False
  )
  assert done.returncode == 0 and "--workdir=DIR" in done.stdout and "--dry-run" in done.stdout


def test_bootstrap_drops_pips_location_notices_and_keeps_its_real_messages():
  """What pip prints (stderr) goes through bootstrap.sh's filter; only the per-package notice
  about an index location without a folder for that package is dropped."""
  pip_says = (
    "\n".join(
      [
        "WARNING: Location 'file:///opt/pypi-more/simple/jax/' is ignored: it is neither a file "
        "nor a directory.",
        "WARNING: Retrying (Retry(total=4)) after connection broken",
        "WARNING: Location 'file:///opt/pypi/simple/torch/' is ignored: it is neither a file nor "
        "a directory.",
        "ERROR: Could not find a version that satisfies the requirement jax==99",
        "WARNING: Location 'x' is ignored: it is neither a file nor a directory. And more.",
      ]
    )
    + "\n"
  )
  done = subprocess.run(
    ["bash", "-c", f"source {ROOT / 'scripts' / 'bootstrap.sh'}; pip_filter"],
    input=pip_says,
    capture_output=True,
    text=True,
    check=False,
  )
  assert done.returncode == 0 and not done.stdout
  assert done.stderr.splitlines() == [
    "WARNING: Retrying (Retry(total=4)) after connection broken",
    "ERROR: Could not find a version that satisfies the requirement jax==99",
    "WARNING: Location 'x' is ignored: it is neither a file nor a directory. And more.",
  ]


def test_bootstrap_refuses_a_disk_too_full_for_the_stack(tmp_path):
  """Before creating a venv (bootstrap.sh also before updating .venv), bootstrap.sh and
  verl_env.sh compare the free space where they install with what the install needs, and say
  both figures in one line instead of letting pip fail partway."""

  def check(needed_mib):
    script = f"source {ROOT / 'scripts' / 'bootstrap.sh'}; "
    return subprocess.run(
      ["bash", "-c", script + f"check_space {tmp_path} {needed_mib} 'the stack'", "setup.sh"],
      capture_output=True,
      text=True,
      check=False,
    )

  roomy = check(1)
  assert roomy.returncode == 0 and not roomy.stderr
  full = check(2**40)  # more MiB than any disk has
  assert full.returncode == 1 and not full.stdout
  message = full.stderr.strip()
  assert len(message.splitlines()) == 1
  assert message.startswith("setup.sh: ") and f"free on {tmp_path}'s disk" in message
  assert f"the stack needs about {2**40} MiB" in message
  for script in ("bootstrap.sh", "verl_env.sh"):
    assert "check_space " in (ROOT / "scripts" / script).read_text()
