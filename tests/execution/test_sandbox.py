"""Containment: the sandbox a worker enters and each run's limits (a pool run as an unprivileged
user: test_sandbox_nonroot.py; hostile programs: test_harness_redteam.py)."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from precisecoder.execution import ExecutionPool, Job, Limits
from precisecoder.execution import sandbox as sandbox_lib

ADD = "def add(a, b):\n  return a + b\n"
WRONG_ADD = "def add(a, b):\n  return a - b\n"
CALL = {"kind": "call", "entry_point": "add", "cases": [{"args": [2, 3], "expected": 5}]}
ASSERT = {"kind": "assert", "code": "assert add(2, 3) == 5\n"}
UNITTEST = {"kind": "unittest", "code": (
    "import unittest\n"
    "class Add(unittest.TestCase):\n"
    "  def test_add(self):\n    self.assertEqual(add(2, 3), 5)\n")}
IO = {"kind": "io", "cases": [{"stdin": "2 3\n", "stdout": "5\n"}]}
IO_PROGRAM = "a, b = map(int, input().split())\nprint(a + b)\n"
FAST = Limits(timeout_s=60.0)


@pytest.mark.parametrize("mode", ["userns", "plain"])
def test_weaker_sandbox_modes_still_run_every_kind(mode):
  programs = [(ADD, CALL), (ADD, ASSERT), (ADD, UNITTEST), (IO_PROGRAM, IO),
              (WRONG_ADD, CALL), ("import os\nos._exit(0)\n", ASSERT)]
  with ExecutionPool(workers=1, sandbox=mode) as pool:
    results = pool.run([Job(program, tests, FAST) for program, tests in programs])
    assert pool.stats()["sandbox"] == mode
  assert [r.passed for r in results] == [True, True, True, True, False, False], results


# In a fresh interpreter: Sandbox.create scrubs the environment of the process that calls it.
_CHILD_LIMITS = textwrap.dedent("""
    import json, os, resource, sys
    from precisecoder.execution import sandbox
    box = sandbox.Sandbox.create("plain")
    run_dir = box.make_run_dir()
    read_end, write_end = os.pipe()
    pid = box.fork()
    if pid == 0:
      box.enter_child({"memory_mb": 512, "cpu_s": 3, "max_file_bytes": 4096,
                       "max_open_files": 64, "max_processes": 256}, keep_fds=[write_end])
      seen = {"cwd": os.getcwd(), "home": os.environ["HOME"], "env": sorted(os.environ),
              "limits": [resource.getrlimit(r)[0] for r in (
                  resource.RLIMIT_AS, resource.RLIMIT_CPU, resource.RLIMIT_FSIZE,
                  resource.RLIMIT_NOFILE, resource.RLIMIT_CORE)],
              "session": os.getsid(0) == os.getpid()}
      os.write(write_end, json.dumps(seen).encode())
      os._exit(0)
    os.close(write_end)
    seen = json.loads(os.read(read_end, 1 << 16))
    os.waitpid(pid, 0)
    box.kill_run(pid)
    box.remove_run_dir(run_dir)
    seen["run_dir"], seen["left"] = run_dir, os.path.exists(run_dir)
    print(json.dumps(seen))
""")


def test_a_run_enters_its_limits_directory_and_environment():
  out = subprocess.run([sys.executable, "-c", _CHILD_LIMITS], capture_output=True, text=True,
                       timeout=120, check=True)
  seen = json.loads(out.stdout)
  assert seen["cwd"] == seen["home"] == seen["run_dir"] and not seen["left"]
  assert seen["limits"] == [512 << 20, 3, 4096, 64, 0]
  assert seen["session"]
  assert set(seen["env"]) == {*sandbox_lib._CHILD_ENV, "HOME", "TMPDIR", "PWD"}  # pylint: disable=protected-access


def test_outermost_keeps_only_directories_not_inside_another(tmp_path):
  (tmp_path / "a" / "b").mkdir(parents=True)
  (tmp_path / "c").mkdir()
  paths = [str(tmp_path / "a"), str(tmp_path / "a" / "b"), str(tmp_path / "c"),
           str(tmp_path / "missing")]
  assert sandbox_lib._outermost(paths) == sorted(  # pylint: disable=protected-access
      [os.path.realpath(tmp_path / "a"), os.path.realpath(tmp_path / "c")])


def test_links_on_the_way_follow_chains_of_links(tmp_path):
  (tmp_path / "real").mkdir()
  os.symlink(tmp_path / "real", tmp_path / "middle")
  os.symlink(tmp_path / "middle", tmp_path / "venv")
  links = sandbox_lib._links_on_the_way([str(tmp_path / "venv")])  # pylint: disable=protected-access
  assert links[str(tmp_path / "venv")] == str(tmp_path / "middle")
  assert links[str(tmp_path / "middle")] == str(tmp_path / "real")
