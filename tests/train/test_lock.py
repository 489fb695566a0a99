"""One run per workdir: flock on a local folder (released by the kernel when its holder dies),
a heartbeat object in a bucket (taken over once its heartbeat is stale)."""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from conftest import read_only_folder

from precisecoder.train import lock as lock_lib
from precisecoder.train.workdir import Workdir

_HOLD = """
import sys
from precisecoder.train.workdir import Workdir
lock = Workdir(sys.argv[1]).lock()
lock.acquire()
print("held", flush=True)
sys.stdin.read()  # holds the lock until killed (or stdin closes)
"""


def test_a_local_workdir_has_one_holder_named_in_the_refusal(tmp_path):
  first = Workdir(str(tmp_path / "run")).lock()
  first.acquire()
  holder = json.loads((tmp_path / "run" / "lock").read_text())
  assert holder["pid"] == os.getpid() and holder["host"] == socket.gethostname()
  with pytest.raises(lock_lib.WorkdirError) as refused:
    Workdir(str(tmp_path / "run")).lock().acquire()
  message = str(refused.value)
  assert message.startswith(f"--workdir={tmp_path / 'run'} is in use by another run: ")
  assert f"host {socket.gethostname()}, pid {os.getpid()}, started {holder['started']}" in message
  first.release()
  assert not (tmp_path / "run" / "lock").exists()
  again = Workdir(str(tmp_path / "run")).lock()
  again.acquire()  # free once released
  again.release()


def test_a_killed_holder_does_not_block_the_workdir(tmp_path):
  """SIGKILL leaves the lock file behind; the kernel has dropped the lock itself."""
  process = subprocess.Popen(
    [sys.executable, "-c", _HOLD, str(tmp_path)],
    stdin=subprocess.PIPE,
    stdout=subprocess.PIPE,
    text=True,
  )
  try:
    assert process.stdout.readline() == "held\n"
    with pytest.raises(lock_lib.WorkdirError, match=f"pid {process.pid}, started"):
      Workdir(str(tmp_path)).lock().acquire()
  finally:
    process.send_signal(signal.SIGKILL)
    process.wait()
  assert json.loads((tmp_path / "lock").read_text())["pid"] == process.pid  # left behind
  lock = Workdir(str(tmp_path)).lock()
  lock.acquire()
  assert json.loads((tmp_path / "lock").read_text())["pid"] == os.getpid()
  lock.release()


def _bucket_lock(bucket, **kwargs):
  """A bucket lock on a local folder standing in for gs:// (the same epath calls)."""
  workdir = Workdir(str(bucket), mirrored=True, local_root=str(bucket.parent / "mirror"))
  return lock_lib.BucketLock(workdir.remote / lock_lib.LOCK_NAME, str(bucket), **kwargs)


def test_a_bucket_lock_refuses_while_its_heartbeat_is_fresh_and_is_taken_over_when_stale(tmp_path):
  first = _bucket_lock(tmp_path / "bucket", heartbeat_s=3600)
  first.acquire()
  with pytest.raises(
    lock_lib.WorkdirError,
    match=r"in use by another run: host .*; its last "
    r"heartbeat was \d+ s ago \(a lock is taken over once it has none "
    r"for 300 s\)",
  ):
    _bucket_lock(tmp_path / "bucket").acquire()
  # The holder died (its heartbeat stopped) on another host 10 minutes ago.
  record = dict(first.record, host="another-host", heartbeat=time.time() - 600)
  (tmp_path / "bucket" / "lock").write_text(json.dumps(record))
  second = _bucket_lock(tmp_path / "bucket", heartbeat_s=3600)
  second.acquire()
  first.beat()  # the first run's next heartbeat sees the new holder ...
  with pytest.raises(lock_lib.WorkdirError, match="another run took over this workdir"):
    first.check()  # ... and the run stops at its next step
  first.release()  # leaves the new holder's lock alone
  assert json.loads((tmp_path / "bucket" / "lock").read_text())["token"] == (second.record["token"])
  second.beat()
  second.check()
  second.release()
  assert not (tmp_path / "bucket" / "lock").exists()


def test_a_bucket_lock_of_a_dead_process_on_this_host_is_taken_over_at_once(tmp_path):
  process = subprocess.run(
    [sys.executable, "-c", "import os; print(os.getpid())"],
    capture_output=True,
    text=True,
    check=True,
  )
  dead = dict(lock_lib.holder_record(), pid=int(process.stdout))  # fresh heartbeat, gone
  (tmp_path / "bucket").mkdir()
  (tmp_path / "bucket" / "lock").write_text(json.dumps(dead))
  lock = _bucket_lock(tmp_path / "bucket", heartbeat_s=3600)
  lock.acquire()
  assert json.loads((tmp_path / "bucket" / "lock").read_text())["pid"] == os.getpid()
  lock.release()


def test_a_workdir_that_takes_no_files_is_one_line(tmp_path):
  folder = read_only_folder(tmp_path)
  with pytest.raises(
    lock_lib.WorkdirError,
    match=f"--workdir={folder}: cannot write its lock file {folder / 'lock'} ",
  ):
    Workdir(str(folder)).lock().acquire()
