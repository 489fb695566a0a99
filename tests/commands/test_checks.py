"""The argument and path checks every command shares (commands/checks.py), called directly:
argument types refuse bad values with a message naming them, output checks make nothing and
refuse inputs and files, atomic_output leaves neither a half file nor a temporary one and
refuses a second writer (commands/outputs.py: its lock, and the partial rows a killed command
keeps), and parse_with_overrides passes only `--config.` overrides through. The commands' use of
them: tests/test_cli.py and each command's tests."""

import argparse
import os
import subprocess
import sys

import pytest

from precisecoder.commands import checks


@pytest.mark.parametrize(
  "check, text, message",
  [
    (checks.positive_int, "0", "must be a positive integer, got 0"),
    (checks.positive_int, "1.5", "not an integer: '1.5'"),
    (checks.non_negative_int, "-1", "must not be negative, got -1"),
    (checks.positive_float, "nan", "must be a positive number, got nan"),
    (checks.positive_float, "inf", "must be a positive number, got inf"),
    (checks.fraction, "nan", "must be in [0, 1], got nan"),
    (checks.fraction, "1.01", "must be in [0, 1], got 1.01"),
    (checks.fraction, "half", "not a number: 'half'"),
    (checks.python, "no-such-python-here", "no such executable: 'no-such-python-here'"),
  ],
)
def test_argument_types_refuse_bad_values_naming_them(check, text, message):
  with pytest.raises(argparse.ArgumentTypeError) as e:
    check(text)
  assert str(e.value) == message


def test_argument_types_accept_their_bounds():
  assert checks.positive_int("1") == 1 and checks.non_negative_int("0") == 0
  assert checks.fraction("0") == 0.0 and checks.fraction("1") == 1.0
  assert checks.positive_float("1e-9") == 1e-9


def test_output_checks_make_nothing_and_refuse_inputs_and_files(tmp_path):
  tasks = tmp_path / "tasks.jsonl"
  tasks.write_text("{}\n")
  deep = tmp_path / "a" / "b" / "out.jsonl"
  assert checks.output_file(str(deep)) == deep
  assert not (tmp_path / "a").exists()  # checked by making it, then removed again
  with pytest.raises(checks.InputError, match=r"^--output .*tasks.jsonl: is the --tasks file"):
    checks.output_file(str(tasks), inputs=[("--tasks", str(tasks))])
  with pytest.raises(checks.InputError, match="is a folder; give a file name"):
    checks.output_file(str(tmp_path))
  with pytest.raises(checks.InputError, match=r"cannot make folder .*: .*tasks.jsonl is a file"):
    checks.output_file(str(tasks / "out.jsonl"))
  with pytest.raises(checks.InputError, match="exists and is not a folder"):
    checks.output_folder(str(tasks), flag="--workdir")
  assert checks.output_folder(str(tmp_path / "new"), make=False) == tmp_path / "new"
  assert not (tmp_path / "new").exists()
  assert checks.output_folder(str(tmp_path / "made")).is_dir()


def test_atomic_output_writes_whole_files_or_nothing(tmp_path):
  path = tmp_path / "sub" / "out.txt"
  with checks.atomic_output(path) as f:
    f.write("done\n")
  assert path.read_text() == "done\n"
  with pytest.raises(KeyboardInterrupt), checks.atomic_output(path) as f:
    f.write("half")
    raise KeyboardInterrupt
  assert path.read_text() == "done\n"  # the earlier file stands
  assert sorted(p.name for p in path.parent.iterdir()) == ["out.txt"]


def test_parse_with_overrides_passes_only_config_overrides(capsys):
  parser = checks.command_parser("precisecoder x", lambda p: p.add_argument("--n", type=int))
  args, overrides = checks.parse_with_overrides(parser, ["--n", "3", "--config.rl.lr=0.1"])
  assert args.n == 3 and overrides == ["--config.rl.lr=0.1"]
  with pytest.raises(SystemExit) as e:
    checks.parse_with_overrides(parser, ["--nope", "--config.a=1"])
  assert e.value.code == 2
  assert "unrecognized arguments: --nope" in capsys.readouterr().err


def test_atomic_output_writes_under_a_unique_name_and_refuses_a_second_writer(tmp_path):
  path = tmp_path / "out.jsonl"
  with checks.atomic_output(path) as f:
    f.write("first\n")
    names = sorted(p.name for p in tmp_path.iterdir())
    # Not OUT.tmp, which two commands would share: a name of its own, and the lock.
    assert "out.jsonl.tmp" not in names and "out.jsonl.lock" in names
    assert any(n.startswith(".out.jsonl.") and n.endswith(".tmp") for n in names)
    with pytest.raises(checks.InputError) as e, checks.atomic_output(path):
      pass
    assert str(e.value).startswith(f"--output {path}: another command is writing it (")
    assert f"pid {os.getpid()}" in str(e.value)
  assert path.read_text() == "first\n"
  assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl"]  # lock file removed


def test_a_killed_writer_leaves_the_output_free(tmp_path):
  """The lock is the kernel's: a writer killed with SIGKILL holds nothing."""
  path = tmp_path / "out.jsonl"
  holder = subprocess.Popen(
    [
      sys.executable,
      "-c",
      "import pathlib, sys\n"
      "from precisecoder.commands import outputs\n"
      f"outputs.OutputLock(pathlib.Path({str(path)!r})).acquire()\n"
      "print('held', flush=True)\nsys.stdin.read()\n",
    ],
    stdin=subprocess.PIPE,
    stdout=subprocess.PIPE,
    text=True,
  )
  try:
    assert holder.stdout.readline() == "held\n"
    with pytest.raises(checks.InputError, match=f"pid {holder.pid}, started"):
      with checks.atomic_output(path):
        pass
  finally:
    holder.kill()
    holder.wait()
  with checks.atomic_output(path) as f:
    f.write("after\n")
  assert path.read_text() == "after\n"


def test_resumable_rows_keep_the_whole_lines_of_a_killed_run(tmp_path, capsys):
  """A kill mid-write leaves a torn last line: it is dropped, the whole lines before it are
  kept; a file that is not a partial file is started over."""
  from precisecoder.commands import outputs

  path = tmp_path / "out.jsonl"
  partial = tmp_path / "out.jsonl.partial"
  key = {"tasks": "abc", "seed": (1, 2)}
  partial.write_text(
    '{"resume_key": {"tasks": "abc", "seed": [1, 2]}}\n{"n": 0}\n{"n": 1}\n{"n": 2, "tor'
  )
  with outputs.resumable_rows(path, key, "x") as rows:
    assert rows.kept == [{"n": 0}, {"n": 1}]
    rows.write([{"n": 2}])
  assert path.read_text() == '{"n": 0}\n{"n": 1}\n{"n": 2}\n' and not partial.exists()
  assert "x: resuming: 2 rows kept from an interrupted run" in capsys.readouterr().err
  partial.write_bytes(b"\xff\xfe garbage\n")
  with outputs.resumable_rows(path, key, "x") as rows:
    assert rows.kept == []
  assert "holds rows of another command (changed: its format); starting over" in (
    capsys.readouterr().err
  )
