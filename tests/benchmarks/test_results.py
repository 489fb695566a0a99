"""A benchmark's --record rewrites its own block of RESULTS.md and nothing else."""

import argparse
import importlib.util
import os
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("benchmarks_results", ROOT / "benchmarks/results.py")
results = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(results)

_FILE = (
  "# Measured figures\n\nHand-written: 3.2 s, load 9.\n\n"
  "<!-- begin: bench_a.py -->\nold figures of a\n<!-- end: bench_a.py -->\n"
  "between the blocks \u2014 kept\r\n\n"
  "<!-- begin: bench_b.py -->\nold figures of b\n<!-- end: bench_b.py -->\ntrailing"
)


def test_replaces_only_its_own_block_byte_for_byte():
  new = results.replace_block(
    _FILE, "bench_a.py", "<!-- begin: bench_a.py -->\nNEW\n<!-- end: bench_a.py -->"
  )
  assert new == _FILE.replace("old figures of a", "NEW")
  # Run again: the same file, however many times it is recorded.
  assert (
    results.replace_block(
      new, "bench_a.py", "<!-- begin: bench_a.py -->\nNEW\n<!-- end: bench_a.py -->"
    )
    == new
  )


def test_a_script_without_a_block_appends_one_and_keeps_the_rest():
  block = "<!-- begin: bench_c.py -->\nc\n<!-- end: bench_c.py -->"
  new = results.replace_block(_FILE, "bench_c.py", block)
  assert new.startswith(_FILE) and new.endswith("\n\n" + block + "\n")
  assert results.replace_block("", "bench_c.py", block) == block + "\n"


def test_broken_markers_are_an_error_not_a_guess():
  with pytest.raises(ValueError, match="no <!-- end: bench_a.py -->"):
    results.replace_block("<!-- begin: bench_a.py -->\nx\n", "bench_a.py", "y")
  twice = _FILE + "\n<!-- begin: bench_a.py -->\n<!-- end: bench_a.py -->\n"
  with pytest.raises(ValueError, match="twice"):
    results.replace_block(twice, "bench_a.py", "y")


def _script(status=None, fail=False):
  """A benchmark's main as the scripts write it."""

  @results.recorded
  def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    results.add_record_flag(parser)
    args = parser.parse_args()
    print(f"| runner | programs/s |\n| pool | 281.5 | repeats {args.repeats}")
    if fail:
      raise RuntimeError("benchmark failed")
    return status

  return main


def test_record_writes_what_the_script_printed_with_date_commit_and_machine(
  tmp_path, monkeypatch, capsys
):
  target = tmp_path / "RESULTS.md"
  target.write_bytes(_FILE.encode())
  monkeypatch.setattr(results, "RESULTS", target)
  monkeypatch.setattr(sys, "argv", ["bench_b.py", "--repeats", "2", "--record"])
  main = _script()
  main.__wrapped__.__code__ = main.__wrapped__.__code__.replace(co_filename="/x/bench_b.py")
  assert main() is None
  assert "| pool | 281.5 | repeats 2" in capsys.readouterr().out  # still printed
  text = target.read_bytes().decode()  # bytes: read_text would hide a changed line ending
  head, rest = text.split("<!-- begin: bench_b.py -->")
  assert head == _FILE.split("<!-- begin: bench_b.py -->")[0]
  body, tail = rest.split("<!-- end: bench_b.py -->")
  assert tail == "\ntrailing"
  assert "| pool | 281.5 | repeats 2" in body and "old figures" not in body
  flat = " ".join(body.split())  # the facts are wrapped at 100 columns
  assert "Written by `python benchmarks/bench_b.py --repeats 2 --record` on 20" in flat
  for fact in (
    " UTC at commit ",
    f"Machine: {os.cpu_count()} CPUs (",
    "accelerator: ",
    "load average (1 / 5 / 15 min) ",
    " at the start, ",
    " at the end.",
  ):
    assert fact in flat, fact


@pytest.mark.parametrize(
  "argv, status, fail",
  [
    (["--record"], None, True),  # raised: a failed run
    (["--record"], 1, False),  # returned a failing status
    ([], None, False),  # no --record
  ],
  ids=["raised", "failing-status", "not-asked"],
)
def test_nothing_is_recorded_unless_asked_and_the_run_succeeded(
  tmp_path, monkeypatch, argv, status, fail
):
  target = tmp_path / "RESULTS.md"
  target.write_bytes(_FILE.encode())
  monkeypatch.setattr(results, "RESULTS", target)
  monkeypatch.setattr(sys, "argv", ["bench_a.py", *argv])
  main = _script(status, fail)
  if fail:
    with pytest.raises(RuntimeError):
      main()
  else:
    assert main() == status
  assert target.read_bytes() == _FILE.encode()


def test_record_flag_is_reset_between_runs(tmp_path, monkeypatch):
  """A second main in one process (a test, a notebook) records only if it is asked to."""
  target = tmp_path / "RESULTS.md"
  target.write_bytes(_FILE.encode())
  monkeypatch.setattr(results, "RESULTS", target)
  monkeypatch.setattr(sys, "argv", ["bench_a.py", "--record"])
  _script()()
  recorded_once = target.read_bytes()
  assert recorded_once != _FILE.encode()
  monkeypatch.setattr(sys, "argv", ["bench_a.py"])
  _script()()
  assert target.read_bytes() == recorded_once
