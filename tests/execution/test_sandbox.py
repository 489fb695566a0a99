"""Containment: the sandbox a worker enters and each run's limits (a pool run as an unprivileged
user: test_sandbox_nonroot.py; hostile programs: test_harness_redteam.py)."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from precisecoder.execution import ExecutionPool, Job, Limits
from precisecoder.execution.worker_side import sandbox as sandbox_lib

ADD = "def add(a, b):\n  return a + b\n"
WRONG_ADD = "def add(a, b):\n  return a - b\n"
CALL = {"kind": "call", "entry_point": "add", "cases": [{"args": [2, 3], "expected": 5}]}
ASSERT = {"kind": "assert", "code": "assert add(2, 3) == 5\n"}
UNITTEST = {
  "kind": "unittest",
  "code": (
    "import unittest\n"
    "class Add(unittest.TestCase):\n"
    "  def test_add(self):\n    self.assertEqual(add(2, 3), 5)\n"
  ),
}
IO = {"kind": "io", "cases": [{"stdin": "2 3\n", "stdout": "5\n"}]}
IO_PROGRAM = "a, b = map(int, input().split())\nprint(a + b)\n"
FAST = Limits(timeout_s=60.0)


@pytest.mark.parametrize("mode", ["userns", "plain"])
def test_weaker_sandbox_modes_still_run_every_kind(mode):
  programs = [
    (ADD, CALL),
    (ADD, ASSERT),
    (ADD, UNITTEST),
    (IO_PROGRAM, IO),
    (WRONG_ADD, CALL),
    ("import os\nos._exit(0)\n", ASSERT),
  ]
  with ExecutionPool(workers=1, sandbox=mode) as pool:
    results = pool.execute([Job(program, tests, FAST) for program, tests in programs])
    assert pool.stats()["sandbox"] == mode
  assert [r.passed for r in results] == [True, True, True, True, False, False], results


def test_plain_workers_leave_no_folder_behind_when_closed_or_killed():
  """A "plain" worker runs in a folder it makes under the host's /tmp; the pool removes it once
  the worker has gone, whether it exited at close or was killed and replaced."""
  leaves_a_file = "open('left.txt', 'w').write('x')\n" + ADD
  with ExecutionPool(workers=1, sandbox="plain") as pool:
    assert pool.execute([Job(leaves_a_file, ASSERT, FAST)])[0].passed
    killed = pool._workers[0].scratch  # pylint: disable=protected-access
    assert killed.startswith("/tmp/precisecoder-runs-") and os.path.isdir(killed)
    pool._replace(pool._workers[0])  # pylint: disable=protected-access
    closed = pool._workers[0].scratch  # pylint: disable=protected-access
    assert not os.path.exists(killed) and os.path.isdir(closed)
    assert pool.execute([Job(leaves_a_file, ASSERT, FAST)])[0].passed
  assert not os.path.exists(closed)


# In a fresh interpreter: Sandbox.create scrubs the environment of the process that calls it.
_CHILD_LIMITS = textwrap.dedent("""
    import json, os, resource, sys
    from precisecoder.execution.worker_side import sandbox
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
  out = subprocess.run(
    [sys.executable, "-c", _CHILD_LIMITS], capture_output=True, text=True, timeout=120, check=True
  )
  seen = json.loads(out.stdout)
  assert seen["cwd"] == seen["home"] == seen["run_dir"] and not seen["left"]
  assert seen["limits"] == [512 << 20, 3, 4096, 64, 0]
  assert seen["session"]
  assert set(seen["env"]) == {*sandbox_lib._CHILD_ENV, "HOME", "TMPDIR", "PWD"}  # pylint: disable=protected-access


def test_outermost_keeps_only_directories_not_inside_another(tmp_path):
  (tmp_path / "a" / "b").mkdir(parents=True)
  (tmp_path / "c").mkdir()
  paths = [
    str(tmp_path / "a"),
    str(tmp_path / "a" / "b"),
    str(tmp_path / "c"),
    str(tmp_path / "missing"),
  ]
  assert sandbox_lib._outermost(paths) == sorted(  # pylint: disable=protected-access
    [os.path.realpath(tmp_path / "a"), os.path.realpath(tmp_path / "c")]
  )


def test_links_on_the_way_follow_chains_of_links(tmp_path):
  (tmp_path / "real").mkdir()
  os.symlink(tmp_path / "real", tmp_path / "middle")
  os.symlink(tmp_path / "middle", tmp_path / "venv")
  links = sandbox_lib._links_on_the_way([str(tmp_path / "venv")])  # pylint: disable=protected-access
  assert links[str(tmp_path / "venv")] == str(tmp_path / "middle")
  assert links[str(tmp_path / "middle")] == str(tmp_path / "real")


def _deep_tree(top, depth: int) -> None:
  """`depth` nested directories below `top`, each with a file, made one directory descriptor at
  a time (the path of the innermost is far longer than PATH_MAX)."""
  fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
  try:
    for _ in range(depth):
      os.mkdir("d", dir_fd=fd)
      inner = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
      os.close(fd)
      fd = inner
      os.close(os.open("f", os.O_WRONLY | os.O_CREAT, dir_fd=fd))
  finally:
    os.close(fd)


def test_remove_tree_removes_any_depth_and_never_follows_a_link(tmp_path):
  outside = tmp_path / "outside"
  outside.mkdir()
  (outside / "keep.txt").write_text("mine")
  top = tmp_path / "run"
  top.mkdir()
  _deep_tree(top, sys.getrecursionlimit() + 500)  # deeper than shutil.rmtree can go
  wide = top / "wide"
  for i in range(300):
    (wide / str(i) / "inner").mkdir(parents=True)
    (wide / str(i) / "inner" / "f").write_text("x")
  (top / "to_dir").symlink_to(outside)
  (top / "to_file").symlink_to(outside / "keep.txt")
  (top / "d" / "to_dir").symlink_to(outside)
  sandbox_lib.remove_tree(str(top))
  assert not os.path.lexists(top)
  assert (outside / "keep.txt").read_text() == "mine"
  link = tmp_path / "link"
  link.symlink_to(outside)
  sandbox_lib.remove_tree(str(link))  # a link itself is removed, not what it points to
  assert not os.path.lexists(link) and (outside / "keep.txt").exists()


def test_a_run_directory_that_cannot_be_removed_raises_cleanup_failed(tmp_path, monkeypatch):
  box = sandbox_lib.Sandbox("plain", None, str(tmp_path))
  run_dir = box.make_run_dir()
  (tmp_path / "run" / "left.txt").write_text("x")
  monkeypatch.setattr(sandbox_lib, "remove_tree", lambda path: None)  # as if it could not
  with pytest.raises(sandbox_lib.CleanupFailed, match="could not remove"):
    box.remove_run_dir(run_dir)


_WORKER_THAT_CANNOT_CLEAN = textwrap.dedent("""
    import sys
    from precisecoder.execution.worker_side import sandbox, worker
    cleaned = []
    remove = sandbox.Sandbox.remove_run_dir
    def fail_the_second(self, path):
      if cleaned:
        raise sandbox.CleanupFailed(f"could not remove the run directory {path}")
      cleaned.append(path)
      remove(self, path)
    sandbox.Sandbox.remove_run_dir = fail_the_second
    sys.exit(worker.main(["worker", "0", "plain", "-1"]))
""")


def test_a_worker_that_cannot_clean_up_after_a_run_exits_without_answering_it():
  """The run before it, in the same chunk, is answered: the pool reruns only the job whose
  clean-up failed."""
  from precisecoder.execution.parent import expectations  # pylint: disable=import-outside-toplevel
  from precisecoder.execution.shared import protocol
  from precisecoder.execution.worker_side import worker
  from precisecoder.execution.parent import pool as pool_module  # pylint: disable=import-outside-toplevel

  process = subprocess.Popen(
    [sys.executable, "-c", _WORKER_THAT_CANNOT_CLEAN],
    stdin=subprocess.PIPE,
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
  )
  try:
    assert protocol.read_message(process.stdout.fileno())["hello"] == "plain"
    child_tests, _ = expectations.split(CALL)
    limits = pool_module._limits_payload(FAST)  # pylint: disable=protected-access
    protocol.write_all(
      process.stdin.fileno(),
      protocol.encode(
        {
          "jobs": [
            {"id": i, "program": ADD, "tests": child_tests, "limits": limits} for i in (1, 2)
          ]
        }
      ),
    )
    status = process.wait(timeout=120)
    answered = protocol.read_message(process.stdout.fileno())
    assert answered["id"] == 1 and answered["runs"][0]["exit"] == 0, answered
    assert protocol.read_message(process.stdout.fileno()) is None  # no answer: the pool reruns
  finally:
    process.kill()
    process.stdin.close()
    process.stdout.close()
    stderr = process.stderr.read().decode()
    process.stderr.close()
  assert status == worker.EXIT_CLEANUP_FAILED and "could not remove the run directory" in stderr


def test_runs_are_the_first_processes_the_oom_killer_picks():
  """The rlimits bound each of a run's processes, not their sum: a run must not get the trainer
  killed when memory runs out."""
  program = "def add(a, b):\n  return int(open('/proc/self/oom_score_adj').read())\n"
  tests = {"kind": "call", "entry_point": "add", "cases": [{"args": [0, 0], "expected": 1000}]}
  with ExecutionPool(workers=1) as pool:
    result = pool.execute([Job(program, tests, FAST)])[0]
  assert result.passed, (result.detail, result.got)
  with open("/proc/self/oom_score_adj") as f:
    assert int(f.read()) < 1000  # the pool's own process (the trainer's) is left as it was
