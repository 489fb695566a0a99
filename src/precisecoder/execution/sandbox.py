"""Containment for one worker and for each run it forks (Linux, stdlib only).

A worker calls `Sandbox.create()` once. That picks the strongest mode the
host allows and says which:

  "root"       we are root: the worker gets its own mount and network
               namespaces (every mount read-only, fresh root-owned tmpfs on
               /tmp, /var/tmp and /dev/shm, loopback down) and each run gets
               a new PID namespace and drops to a per-worker unprivileged uid
               with no_new_privs.
  "userns"     unprivileged user namespaces: the same namespaces, but the run
               keeps our uid (inside a nested user namespace without
               capabilities), so the read-only mounts are what protects files.
  "plain"      no namespaces: new session, rlimits, and a kill of the whole
               process group; a setsid daemon can escape this mode.

Every mode applies the rlimits, the private working directory, the scrubbed
environment and the fd hygiene of `enter_child`.
"""

from __future__ import annotations

import ctypes
import dataclasses
import errno
import os
import resource
import shutil
import signal
import sys

_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWPID = 0x20000000
_CLONE_NEWNET = 0x40000000
_MS_RDONLY = 1
_MS_NOSUID = 2
_MS_NODEV = 4
_MS_NOEXEC = 8
_MS_REMOUNT = 32
_MS_BIND = 4096
_MS_REC = 16384
_MS_PRIVATE = 1 << 18
_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_SET_NO_NEW_PRIVS = 38
MODES = ("auto", "userns", "plain")
_RUN_UID_BASE = 1_000_000  # + the worker's host pid: unique among live workers, no account has it
_MOUNT_FLAGS = {"nosuid": _MS_NOSUID, "nodev": _MS_NODEV, "noexec": _MS_NOEXEC}
_VIRTUAL_FS = ("/proc", "/sys", "/dev")  # pseudo file systems: left as they are
_PRIVATE_TMPFS = ("/tmp", "/var/tmp", "/dev/shm")
_CHILD_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0",
              "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
  if result != 0:
    code = ctypes.get_errno()
    raise OSError(code, f"{what}: {os.strerror(code)}")


def _unshare(flags: int) -> None:
  _check(_libc.unshare(ctypes.c_int(flags)), "unshare")


def _mount(source: str | None, target: str, fstype: str | None, flags: int,
           data: str | None = None) -> None:
  encode = lambda s: None if s is None else s.encode()
  _check(_libc.mount(encode(source), encode(target), encode(fstype), ctypes.c_ulong(flags),
                     encode(data)), f"mount {target}")


def _prctl(option: int, value: int) -> None:
  _check(_libc.prctl(ctypes.c_int(option), ctypes.c_ulong(value), ctypes.c_ulong(0),
                     ctypes.c_ulong(0), ctypes.c_ulong(0)), "prctl")


def _mount_points() -> list[tuple[str, int]]:
  """(mount point, lockable flags) of this mount namespace, parents first."""
  points = []
  with open("/proc/self/mountinfo") as f:
    for line in f:
      fields = line.split()
      point = fields[4].replace("\\040", " ")
      flags = sum(_MOUNT_FLAGS.get(option, 0) for option in fields[5].split(","))
      points.append((point, flags))
  return points


def _blocked_ancestor(path: str) -> str | None:
  """The highest ancestor of `path` that other users cannot traverse (e.g. /root), if any."""
  parts = os.path.realpath(path).split(os.sep)[1:]
  for depth in range(1, len(parts)):
    ancestor = os.sep + os.path.join(*parts[:depth])
    if not os.stat(ancestor).st_mode & 0o001:
      return ancestor
  return None


def _expose(paths: list[str]) -> None:
  """Makes `paths` reachable for an unprivileged run even below a private directory.

  The interpreter may live under /root (pyenv): the private ancestor is
  covered with an empty tmpfs and only `paths` are bound back into it, so a
  run sees the interpreter and its libraries and nothing else of that home.
  """
  by_ancestor: dict[str, list[str]] = {}
  for path in {os.path.realpath(p) for p in paths}:
    ancestor = _blocked_ancestor(path)
    if ancestor is not None and os.path.isdir(path):
      by_ancestor.setdefault(ancestor, []).append(path)
  for ancestor, inner in sorted(by_ancestor.items()):
    inner = [p for p in inner if not any(p.startswith(q + os.sep) for q in inner)]
    handles = {path: os.open(path, os.O_PATH | os.O_CLOEXEC) for path in inner}
    _mount("tmpfs", ancestor, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=0755,size=1m")
    for path, handle in handles.items():
      os.makedirs(path, mode=0o755, exist_ok=True)
      _mount(f"/proc/self/fd/{handle}", path, None, _MS_BIND | _MS_REC)
      os.close(handle)


def _python_paths() -> list[str]:
  """The interpreter, its prefixes and import path: what every run must still reach."""
  return ([sys.base_prefix, sys.prefix, os.path.dirname(sys.executable),
           os.path.dirname(os.path.realpath(sys.executable))]
          + [p for p in sys.path if p and os.path.isdir(p)])


def _open_paths_below(points: tuple[str, ...], paths: list[str]) -> dict[str, int]:
  """O_PATH handles of the outermost `paths` that lie below one of `points`.

  Opened before a private tmpfs hides `points`, so that they can be bound back
  (read-only) into it: a checkout or virtualenv under /tmp must stay importable.
  """
  below = {os.path.abspath(p) for p in paths
           if os.path.isdir(p) and any(os.path.abspath(p).startswith(t + os.sep) for t in points)}
  outermost = [p for p in below if not any(p.startswith(q + os.sep) for q in below)]
  return {p: os.open(p, os.O_PATH | os.O_CLOEXEC) for p in outermost}


def _make_filesystem_read_only() -> None:
  """Remounts every real mount read-only and hides the world-writable directories."""
  _mount(None, "/", None, _MS_REC | _MS_PRIVATE)
  if os.geteuid() == 0:  # runs drop to another uid: they must still reach Python
    _expose(_python_paths())
  kept = _open_paths_below(_PRIVATE_TMPFS, _python_paths())
  for point, flags in _mount_points():
    if any(point == v or point.startswith(v + "/") for v in _VIRTUAL_FS):
      continue
    try:
      _mount(None, point, None, _MS_BIND | _MS_REMOUNT | _MS_RDONLY | flags)
    except OSError as e:
      if e.errno not in (errno.EACCES, errno.EPERM, errno.ENOENT, errno.EINVAL):
        raise
  for point in _PRIVATE_TMPFS:  # root-owned and 0755: a run cannot leave files there
    if os.path.isdir(point):
      _mount("tmpfs", point, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=0755,size=64m")
  for path, handle in sorted(kept.items()):  # e.g. a checkout and its venv under /tmp
    os.makedirs(path, mode=0o755, exist_ok=True)
    _mount(f"/proc/self/fd/{handle}", path, None, _MS_BIND | _MS_REC)
    _mount(None, path, None, _MS_BIND | _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)
    os.close(handle)


def _write(path: str, text: str) -> None:
  with open(path, "w") as f:
    f.write(text)


@dataclasses.dataclass
class Sandbox:
  """How this worker contains its runs (see the module docstring)."""

  mode: str  # "root" | "userns" | "plain"
  run_uid: int | None  # the uid runs drop to ("root" mode only), this worker's alone
  runs_dir: str  # holds `run_dir`
  note: str = ""  # why a weaker mode was chosen
  is_init: bool = False  # PID 1 of a private PID namespace that holds every run
  # The working directory of every run, made afresh for each (`make_run_dir`).
  run_dir: str = dataclasses.field(init=False)

  def __post_init__(self):
    self.run_dir = os.path.join(self.runs_dir, "run")

  @classmethod
  def create(cls, strongest: str = "auto") -> "Sandbox":
    """Contains this worker in the strongest mode available, capped at `strongest`
    (tests use the weaker modes), and gives it the environment its runs inherit."""
    sandbox = cls._strongest(strongest)
    _scrub_environment(sandbox.run_dir)
    if sandbox.mode == "root":
      os.setgroups([])  # runs inherit no supplementary groups
    _prctl(_PR_SET_NO_NEW_PRIVS, 1)  # inherited by every run: setuid binaries cannot give root back
    return sandbox

  @classmethod
  def _strongest(cls, strongest: str) -> "Sandbox":
    if strongest not in MODES:
      raise ValueError(f"sandbox mode must be one of {MODES}, not {strongest!r}")
    notes = [] if strongest == "auto" else [f"capped at {strongest!r}"]
    if os.geteuid() != 0:
      notes.append("not root: runs keep this user's uid, and only read-only mounts guard its files")
    if os.geteuid() == 0 and strongest == "auto":
      try:
        _unshare(_CLONE_NEWNS | _CLONE_NEWNET)
        _make_filesystem_read_only()
        sandbox = cls("root", _RUN_UID_BASE + os.getpid(), _make_runs_dir())
        return sandbox._with_pid_namespaces(notes)
      except OSError as e:
        notes.append(f"root namespaces unavailable ({e})")
    try:
      if strongest == "plain":
        raise OSError(errno.EPERM, "not requested")
      uid, gid = os.geteuid(), os.getegid()
      _unshare(_CLONE_NEWUSER | _CLONE_NEWNS | _CLONE_NEWNET)
      _write("/proc/self/setgroups", "deny")
      _write("/proc/self/uid_map", f"0 {uid} 1")
      _write("/proc/self/gid_map", f"0 {gid} 1")
      _make_filesystem_read_only()
      _prctl(_PR_SET_DUMPABLE, 0)  # a run with our uid must not ptrace or read us
      sandbox = cls("userns", None, _make_runs_dir(), note="; ".join(notes))
      return sandbox._with_pid_namespaces(notes)
    except OSError as e:
      notes.append(f"user namespaces unavailable ({e})")
    return cls("plain", None, _make_private_dir("/tmp", "precisecoder-runs-"),
               note="; ".join(notes) + "; runs are contained by rlimits and process groups only")

  def _with_pid_namespaces(self, notes: list[str]) -> "Sandbox":
    """Makes this worker PID 1 of a new PID namespace that holds all of its runs.

    The process that called us stays outside, waits, and exits with the
    worker's status; as PID 1 the worker can then kill everything a run left
    behind (daemons included) with one kill(-1) and reap it.
    """
    try:
      _unshare(_CLONE_NEWPID)
    except OSError as e:
      notes.append(f"PID namespaces unavailable ({e}): orphans are killed by process group")
      self.note = "; ".join(notes)
      return self
    pid = os.fork()
    if pid:
      os.closerange(0, _max_fd())  # the worker alone holds the protocol pipes
      _, status = os.waitpid(pid, 0)
      os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
    set_parent_death_signal()
    self.is_init = os.getpid() == 1
    self.note = "; ".join(notes)
    return self

  def fork(self) -> int:
    return os.fork()

  def make_run_dir(self) -> str:
    """Creates `run_dir` afresh and empty: one path for every run of this worker.

    Runs follow one another, so one path serves them all, and the worker's own
    environment (HOME, TMPDIR, PWD) can name it once instead of each child
    rewriting its environment.
    """
    try:
      os.mkdir(self.run_dir, 0o700)
    except FileExistsError:  # a run whose clean-up failed: nothing it left survives
      self.remove_run_dir(self.run_dir)
      os.mkdir(self.run_dir, 0o700)
    if self.run_uid is not None:
      os.chown(self.run_dir, self.run_uid, self.run_uid)
    return self.run_dir

  def remove_run_dir(self, path: str) -> None:
    try:
      os.rmdir(path)  # the common case: the run left nothing behind
    except OSError:
      shutil.rmtree(path, ignore_errors=True)
      if os.path.lexists(path):
        raise RuntimeError(f"could not remove the run directory {path}")

  def kill_run(self, pid: int) -> None:
    """Kills a run and everything it started, and reaps them all."""
    # As PID 1, every other process in our namespace belongs to this run.
    targets = ((os.kill, -1),) if self.is_init else ((os.kill, pid), (os.killpg, pid))
    for kill, target in targets:
      try:
        kill(target, signal.SIGKILL)
      except (ProcessLookupError, PermissionError):
        pass
    while True:
      try:
        os.waitpid(-1, 0)
      except ChildProcessError:
        return

  def enter_child(self, limits: dict, keep_fds: list[int]) -> None:
    """In the forked child: applies every containment step. Raises on failure.

    The environment was scrubbed once for the whole worker (`_scrub_environment`). The calls
    are bound at import (`_setsid`, ...): a child runs this once, so a module attribute read
    here would miss CPython's type-attribute cache in every run, and copy the pages it writes.
    """
    _setsid()
    if not self.is_init:  # as PID 1, the worker's death kills the whole namespace anyway
      _prctl(_PR_SET_PDEATHSIG, _SIGKILL)
    low = 3
    for fd in sorted(keep_fds) + [_max_fd()]:
      _closerange(low, fd)  # close_range(2) underneath: one system call
      low = fd + 1
    _chdir(self.run_dir)
    for name, value in ((_RLIMIT_AS, int(limits["memory_mb"]) << 20),
                        (_RLIMIT_CPU, int(limits["cpu_s"])),
                        (_RLIMIT_FSIZE, int(limits["max_file_bytes"])),
                        (_RLIMIT_NOFILE, int(limits["max_open_files"])),
                        (_RLIMIT_NPROC, int(limits["max_processes"])),
                        (_RLIMIT_CORE, 0)):
      _setrlimit(name, (value, value))
    if self.mode == "root":
      _setresgid(self.run_uid, self.run_uid, self.run_uid)
      _setresuid(self.run_uid, self.run_uid, self.run_uid)
    elif self.mode == "userns":
      _unshare(_CLONE_NEWUSER)  # no capabilities over the worker's mounts or processes


_setsid, _closerange, _chdir = os.setsid, os.closerange, os.chdir
_setresgid, _setresuid, _setrlimit = os.setresgid, os.setresuid, resource.setrlimit
_SIGKILL = signal.SIGKILL
_RLIMIT_AS, _RLIMIT_CPU = resource.RLIMIT_AS, resource.RLIMIT_CPU
_RLIMIT_FSIZE, _RLIMIT_NOFILE = resource.RLIMIT_FSIZE, resource.RLIMIT_NOFILE
_RLIMIT_NPROC, _RLIMIT_CORE = resource.RLIMIT_NPROC, resource.RLIMIT_CORE


def _scrub_environment(run_dir: str) -> None:
  """Gives this worker the exact environment its runs get; children inherit it as is."""
  os.environ.clear()
  os.environ.update(_CHILD_ENV, HOME=run_dir, TMPDIR=run_dir, PWD=run_dir)
  # A run that imports tempfile finds its directory in TMPDIR. The worker does not import
  # tempfile, which imports random: random reseeds itself after every fork (worker.py).


def set_parent_death_signal() -> None:
  """SIGKILL this process when its parent dies (a worker must not outlive its pool)."""
  _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _make_private_dir(parent: str, prefix: str) -> str:
  """A new directory only this user can enter, as tempfile.mkdtemp makes (without importing it)."""
  while True:
    path = os.path.join(parent, prefix + os.urandom(6).hex())
    try:
      os.mkdir(path, 0o700)
      return path
    except FileExistsError:
      continue


def _make_runs_dir() -> str:
  path = "/tmp/precisecoder-runs"  # on the private tmpfs
  os.makedirs(path, mode=0o711, exist_ok=True)
  return path


def _max_fd() -> int:
  return 2**31 - 1  # closerange clips to the real table
