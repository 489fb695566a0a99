"""Runs share nothing: a run learns nothing from the runs of its worker before it.

Each test runs a probe program, a program that writes through every channel it can reach (or is
stopped early by the pool), then the probe again, on a pool of one worker: what the probe
observes must not depend on what ran before it. The probes are distinct programs (the pool runs a
duplicated job once) that observe the same things.
"""

import contextlib
import json
import os
import textwrap

import pytest

from precisecoder.execution import ExecutionPool, Job, Limits, Status

PATIENT = Limits(timeout_s=60.0)
CALL = {"kind": "call", "entry_point": "observe", "cases": [{"args": [], "expected": "-"}]}

# Shared by both programs: System V IPC, POSIX message queues and the kernel's key calls, through
# ctypes (x86_64 and aarch64 system call numbers).
_LIBRARY = textwrap.dedent("""
    import ctypes, os, platform
    libc = ctypes.CDLL(None, use_errno=True)
    KEY = 0x5EC7E7
    IPC_CREAT, IPC_RMID, IPC_PRIVATE = 0o1000, 0, 0
    ADD_KEY, KEYCTL = {"x86_64": (248, 250), "aarch64": (217, 219)}[platform.machine()]
    USER_KEYRING, USER_SESSION_KEYRING, SESSION_KEYRING = -4, -5, -3
    KEYCTL_READ, KEYCTL_GET_PERSISTENT, KEYCTL_JOIN, KEYCTL_DESCRIBE = 11, 22, 1, 6
    libc.mq_open.restype = ctypes.c_int
    libc.syscall.restype = ctypes.c_long
    FOLDERS = ('/tmp', '/var/tmp', '/dev/shm', os.path.expanduser('~'))

    def keyring(ring):
      '''The keys a keyring holds (type and description: serials are random), or the error that
      reading it gave.'''
      serials = (ctypes.c_int32 * 1024)()
      n = libc.syscall(KEYCTL, KEYCTL_READ, ctypes.c_long(ring), serials, 4096)
      if n < 0:
        return 'errno %d' % ctypes.get_errno()
      keys = []
      for serial in serials[:n // 4]:
        text = ctypes.create_string_buffer(1024)
        libc.syscall(KEYCTL, KEYCTL_DESCRIBE, serial, text, 1024)
        fields = text.value.decode().split(';')
        keys.append(fields[0] + ' ' + fields[-1])
      return sorted(keys)

    def persistent():
      ring = libc.syscall(KEYCTL, KEYCTL_GET_PERSISTENT, -1, USER_KEYRING)
      return keyring(ring) if ring >= 0 else 'errno %d' % ctypes.get_errno()
    """)

WRITER = _LIBRARY + textwrap.dedent("""
    def write_everything(marks):
      for _ in range(marks):  # System V objects: existing ones, and their id counters
        libc.shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0o600)
        libc.semget(IPC_PRIVATE, 1, IPC_CREAT | 0o600)
        libc.msgget(IPC_PRIVATE, IPC_CREAT | 0o600)
      libc.shmget(KEY, 4096, IPC_CREAT | 0o666)
      libc.semget(KEY, 1, IPC_CREAT | 0o666)
      libc.msgget(KEY, IPC_CREAT | 0o666)
      libc.mq_open(b'/leak', os.O_CREAT | os.O_RDWR, 0o666, None)
      for ring in (USER_KEYRING, USER_SESSION_KEYRING):
        libc.syscall(ADD_KEY, b'user', b'leak', b'1', 1, ring)
      ring = libc.syscall(KEYCTL, KEYCTL_GET_PERSISTENT, -1, USER_KEYRING)
      if ring >= 0:
        libc.syscall(ADD_KEY, b'user', b'leak', b'1', 1, ctypes.c_long(ring))
      libc.syscall(KEYCTL, KEYCTL_JOIN, b'leak')  # a named session keyring
      for folder in FOLDERS:  # files, and the inode numbers of the file systems
        for i in range(marks):
          with open(os.path.join(folder, 'leak%d' % i), 'w') as f:
            f.write('x')
          os.unlink(os.path.join(folder, 'leak%d' % i))
        with open(os.path.join(folder, 'left'), 'w') as f:
          f.write('1')
        try:
          os.close(os.open(folder, os.O_TMPFILE | os.O_WRONLY))  # an inode with no name
        except OSError:
          pass
      for _ in range(marks):  # PID numbers
        pid = os.fork()
        if pid == 0:
          os._exit(0)
        os.waitpid(pid, 0)
      if os.fork() == 0:  # a daemon, left running
        os.setsid()
        import time
        time.sleep(3600)

    write_everything(7)

    def observe():
      return 'wrote'
    """)

PROBE = _LIBRARY + textwrap.dedent("""
    import json
    def observe():  # probe #NUMBER
      seen = {}
      seen['sysv keys'] = [libc.shmget(KEY, 0, 0), libc.semget(KEY, 0, 0), libc.msgget(KEY, 0, 0)]
      fresh = [libc.shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0o600),
               libc.semget(IPC_PRIVATE, 1, IPC_CREAT | 0o600),
               libc.msgget(IPC_PRIVATE, IPC_CREAT | 0o600)]
      seen['sysv ids'] = fresh
      libc.shmctl(fresh[0], IPC_RMID, None)
      libc.semctl(fresh[1], 0, IPC_RMID)
      libc.msgctl(fresh[2], IPC_RMID, None)
      libc.mq_open(b'/leak', os.O_RDONLY)  # fails once the queue is not there
      seen['mqueue'] = ctypes.get_errno()
      seen['keyrings'] = [keyring(USER_KEYRING), keyring(USER_SESSION_KEYRING),
                          keyring(SESSION_KEYRING), persistent()]
      seen['files'] = {folder: sorted(os.listdir(folder)) for folder in FOLDERS}
      inodes = {}
      for folder in FOLDERS:
        with open(os.path.join(folder, 'probe'), 'w') as f:
          inodes[folder] = os.fstat(f.fileno()).st_ino
      seen['inodes'] = inodes
      seen['pid'] = os.getpid()
      pid = os.fork()
      if pid == 0:
        os._exit(0)
      os.waitpid(pid, 0)
      seen['child pid'] = pid
      with open('/proc/loadavg') as f:
        seen['last pid'] = f.read().split()[-1]
      seen['processes'] = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())
      seen['worker visible'] = os.path.exists('/proc/1/stat')
      seen['cgroups'] = os.listdir('/sys/fs/cgroup') if os.path.isdir('/sys/fs/cgroup') else []
      return json.dumps(seen, sort_keys=True)
    """)


def _probe(number: int) -> Job:
  return Job(PROBE.replace("NUMBER", str(number)), CALL, PATIENT)


def _observed(result) -> dict:
  assert result.status is Status.FAIL and isinstance(result.got, str), (result.detail, result.got)
  return json.loads(result.got)


@contextlib.contextmanager
def _pool(mode: str):
  """A one-worker pool in `mode`, started with a harmless job, or a skip where it fell back to
  "plain": there the writer's daemon would outlive its run, and its files stay on the host."""
  with ExecutionPool(workers=1, sandbox=mode) as pool:
    pool.execute([Job("def observe():\n  return '-'\n", CALL, PATIENT)])
    if pool.stats()["sandbox"] == "plain":
      pytest.skip("no namespaces on this host: runs share the host's /tmp and IPC")
    yield pool


@pytest.mark.parametrize("mode", ["auto", "userns"])
def test_a_run_observes_nothing_an_earlier_run_wrote(mode):
  with _pool(mode) as pool:
    results = pool.execute([_probe(1), Job(WRITER, CALL, PATIENT), _probe(2)])
  assert results[1].got == "wrote", (results[1].detail, results[1].got)
  before, after = _observed(results[0]), _observed(results[2])
  assert after["sysv keys"] == [-1, -1, -1]
  # Nothing the writer left (files named `leak*`, `left`), whatever the folders show of the
  # host (the interpreter's folder bound back in where a venv lies under /tmp).
  assert after["mqueue"] != 0 and after["files"] == before["files"]
  assert not {
    name for names in after["files"].values() for name in names if name.startswith(("leak", "left"))
  }
  assert after["cgroups"] == []  # their counters (memory high-water mark, CPU time) are not shown
  # hidepid spares the group it names (root's, the only one a "userns" worker can name): a
  # "userns" pool started by root, as here, shows its runs the worker.
  assert not after["worker visible"] or (mode == "userns" and os.getgid() == 0)
  # Every other observation (ids, inode numbers, PIDs, keyrings) as if nothing ran between.
  assert {k: v for k, v in after.items() if before[k] != v} == {}, before


def test_an_early_stop_leaves_later_runs_nothing_to_observe():
  """The pool stops a run that failed a check at the worker's next tick; what a later run can
  observe is the same whether the run before it was stopped or ran to its end."""
  stopped = "def add(a, b):\n  if a == 2:\n    while True:\n      pass\n  return a + b\n"
  checks = {"kind": "assert", "code": "assert add(1, 1) == 3\nassert add(2, 3) == 5\n"}
  passes = {"kind": "assert", "code": "assert add(1, 1) == 2\n"}
  with _pool("auto") as pool:
    results = pool.execute(
      [
        _probe(1),
        Job(stopped, checks, PATIENT),
        _probe(2),
        Job("def add(a, b):\n  return a + b\n", passes, PATIENT),
        _probe(3),
      ]
    )
    stats = pool.stats()
  assert results[1].status is Status.FAIL and results[3].status is Status.PASS
  assert stats["stopped"] == 1, stats  # the one that would loop for ever
  first, after_stop, after_end = (_observed(results[i]) for i in (0, 2, 4))
  assert after_stop == after_end == first


def test_a_runs_processes_see_one_another_in_proc():
  """/proc hides the worker (hidepid): not a run's own processes from each other."""
  program = textwrap.dedent("""
      import os, subprocess
      def observe():
        child = subprocess.Popen(['sleep', '30'])
        try:
          with open('/proc/%d/stat' % child.pid) as f:
            return [f.read().split()[1], os.getppid(), os.path.exists('/proc/1')]
        finally:
          child.kill()
          child.wait()
      """)
  with _pool("auto") as pool:
    result = pool.execute([Job(program, CALL, PATIENT)])[0]
  assert result.got == ["(sleep)", 1, False], (result.detail, result.got)


def test_the_kernel_key_calls_are_refused_as_on_a_kernel_without_keys():
  """A uid's keyrings outlive its runs (every run of a worker has its uid): runs cannot reach them
  at all."""
  program = _LIBRARY + textwrap.dedent("""
      def observe():
        found = []
        for call in (lambda: libc.syscall(ADD_KEY, b'user', b'leak', b'1', 1, USER_KEYRING),
                     lambda: libc.syscall(KEYCTL, KEYCTL_GET_PERSISTENT, -1, USER_KEYRING)):
          found.append([call(), ctypes.get_errno()])
        return found
      """)
  with _pool("auto") as pool:
    result = pool.execute([Job(program, CALL, PATIENT)])[0]
  assert result.got == [[-1, 38], [-1, 38]], (result.detail, result.got)  # ENOSYS
