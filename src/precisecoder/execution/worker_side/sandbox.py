"""Containment for one worker and for each run it forks (Linux, stdlib only).

A worker calls `Sandbox.create()` once. That picks the strongest mode the
host allows and says which:

  "root"       we are root: the worker gets its own mount, network and IPC
               namespaces (every mount read-only, loopback only) and is PID 1
               of a PID namespace that holds its runs; each run drops to a
               per-worker unprivileged uid with no_new_privs.
  "userns"     unprivileged user namespaces: the same namespaces, but the run
               keeps our uid (inside a nested user namespace without
               capabilities over ours), so the read-only mounts are what
               protects files.
  "plain"      no namespaces: new session, rlimits, and a kill of the whole
               process group; a setsid daemon can escape this mode.

In "root" and "userns" each run starts from state no earlier run touched but
the worker's network namespace and kernel-global counters
(`Sandbox.fork`): mount and IPC namespaces of its own, with fresh tmpfs
mounted (not emptied) on /tmp, /var/tmp, /dev/shm and the runs' home, ended
once it is over, and the PID numbers of the worker's namespace started
over; /proc hides the worker (hidepid). In every mode the
kernel's key calls are refused (`_refuse_kernel_keys`).

Every mode applies the rlimits, the private working directory, the scrubbed
environment and the fd hygiene of `enter_child`.
"""

from __future__ import annotations

import ctypes
import dataclasses
import errno
import fcntl
import os
import resource
import signal
import socket
import struct
import sys

_CLONE_NEWNS = 0x00020000
_CLONE_NEWIPC = 0x08000000
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
_MS_NOATIME, _MS_NODIRATIME, _MS_RELATIME, _ST_RELATIME = 1024, 2048, 1 << 21, 4096
_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_SET_NO_NEW_PRIVS = 38
MODES = ("auto", "userns", "plain")
_RUN_UID_BASE = 1_000_000  # + the worker's host pid: unique among live workers, no account has it
_MOUNT_FLAGS = {"nosuid": _MS_NOSUID, "nodev": _MS_NODEV, "noexec": _MS_NOEXEC}
# What a run's file system shows (`_private_root`), besides the interpreter and its import path.
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
_DEVICES = ("null", "zero", "full", "random", "urandom")
WRITABLE_DIRS = ("/tmp", "/var/tmp", "/dev/shm")  # world-writable, a fresh tmpfs for every run
_RUNS_DIR = "/home"  # holds the run's working directory, its HOME: /home/run
_TMPFS_SIZE, _TMPFS_INODES = "256m", 16384  # each; RLIMIT_FSIZE caps a file at 16 MiB
_TMPFS_FLAGS = _MS_NOSUID | _MS_NODEV
_MNT_DETACH = 2
_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}  # system call numbers: glibc has no wrapper
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC  # never through a link
_CHILD_ENV = {
  "PATH": "/usr/local/bin:/usr/bin:/bin",
  "LANG": "C.UTF-8",
  "PYTHONHASHSEED": "0",
  "OMP_NUM_THREADS": "1",
  "OPENBLAS_NUM_THREADS": "1",
  "MKL_NUM_THREADS": "1",
}

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
  if result != 0:
    code = ctypes.get_errno()
    raise OSError(code, f"{what}: {os.strerror(code)}")


def _unshare(flags: int) -> None:
  _check(_libc.unshare(ctypes.c_int(flags)), "unshare")


def _mount(
  source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None
) -> None:
  encode = lambda s: None if s is None else s.encode()
  _check(
    _libc.mount(
      encode(source), encode(target), encode(fstype), ctypes.c_ulong(flags), encode(data)
    ),
    f"mount {target}",
  )


def _prctl(option: int, value: int) -> None:
  _check(
    _libc.prctl(
      ctypes.c_int(option),
      ctypes.c_ulong(value),
      ctypes.c_ulong(0),
      ctypes.c_ulong(0),
      ctypes.c_ulong(0),
    ),
    "prctl",
  )


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


def _python_paths() -> list[str]:
  """The interpreter, its prefixes and import path: what every run must still reach."""
  return [
    sys.base_prefix,
    sys.prefix,
    os.path.dirname(sys.executable),
    os.path.dirname(os.path.realpath(sys.executable)),
  ] + [p for p in sys.path if p and os.path.isdir(p)]


def _links_on_the_way(paths) -> dict[str, str]:
  """{link: target} for every symbolic link among the leading parts of `paths`, and of the
  links' targets in turn: a venv reached through a link (`.venv -> /elsewhere/venv`, or a chain
  of them) keeps the name its interpreter knows it by, and its sys.path entries, after only the
  real paths are bound."""
  links: dict[str, str] = {}
  todo = [os.path.abspath(p) for p in paths]
  while todo:
    here = "/"
    for part in todo.pop().strip("/").split("/"):
      here = os.path.join(here, part)
      if os.path.islink(here) and here not in links:
        links[here] = os.readlink(here)
        todo.append(os.path.normpath(os.path.join(os.path.dirname(here), links[here])))
  return links


def _outermost(paths) -> list[str]:
  """The real paths of the existing directories among `paths`, none inside another."""
  found = {os.path.realpath(p) for p in paths if os.path.isdir(p)} - {"/"}
  return sorted(p for p in found if not any(p.startswith(q + os.sep) for q in found if q != "/"))


def _private_root() -> None:
  """Makes this mount namespace's root a tmpfs that shows only what runs need.

  Read-only: the system directories (`_SYSTEM_DIRS`: programs, shared libraries, /etc), the
  interpreter and its import path (of this package, only what the worker imports: the
  execution package), a /sys of its own (`_fresh_sysfs`), and a /dev of the common device
  nodes. Writable: /tmp, /var/tmp and /dev/shm (world-writable tmpfs) and the runs' home
  (`_RUNS_DIR`), over which each run gets fresh ones of its own (`Sandbox.fork`).
  Everything else -- the home directories, the working trees, the task files, their expected
  outputs and gold programs -- is not there. Then /proc is the host's until the worker, PID 1
  of its own PID namespace, mounts its own (`_with_pid_namespaces`).
  """
  _mount(None, "/", None, _MS_REC | _MS_PRIVATE)
  binds = _outermost([*_SYSTEM_DIRS, *_python_paths()])
  # /bin -> usr/bin; a venv through a link
  links = _links_on_the_way([*_SYSTEM_DIRS, *_python_paths()])
  handles = {p: os.open(p, os.O_PATH | os.O_CLOEXEC) for p in binds}
  devices = {
    d: os.open(f"/dev/{d}", os.O_PATH | os.O_CLOEXEC)
    for d in _DEVICES
    if os.path.exists(f"/dev/{d}")
  }
  virtual = {d: os.open(d, os.O_PATH | os.O_CLOEXEC) for d in ("/proc", "/sys")}
  package = os.path.realpath(__file__)  # precisecoder/execution/worker_side/sandbox.py
  for _ in range(3):
    package = os.path.dirname(package)  # at the end, precisecoder/
  inside = {
    name: os.open(os.path.join(package, name), os.O_PATH | os.O_CLOEXEC)
    for name in ("__init__.py", "execution")
  }
  root = "/tmp"  # the new root is mounted over it (in this namespace only), then pivoted to
  _mount("tmpfs", root, "tmpfs", _MS_NOSUID, "mode=0755,size=4m")
  for point, options in _fresh_tmpfs():
    os.makedirs(root + point, exist_ok=True)
    _mount("tmpfs", root + point, "tmpfs", _TMPFS_FLAGS, options)
  for path, handle in [*handles.items(), *virtual.items()]:  # after: a venv may be under /tmp
    if path == "/sys" and _fresh_sysfs(root + path):
      continue
    _bind(handle, root + path, recursive=True)
  for link, target in sorted(links.items()):  # a link's parents first
    if not os.path.lexists(root + link):
      os.makedirs(os.path.dirname(root + link), exist_ok=True)
      os.symlink(target, root + link)
  os.makedirs(root + "/dev", exist_ok=True)
  for name, handle in devices.items():
    _bind(handle, f"{root}/dev/{name}", recursive=False)
  for name, target in (
    ("fd", "/proc/self/fd"),
    ("stdin", "/proc/self/fd/0"),
    ("stdout", "/proc/self/fd/1"),
    ("stderr", "/proc/self/fd/2"),
  ):
    os.symlink(target, f"{root}/dev/{name}")
  if os.path.isdir(root + package):
    # This package's other modules and files (task sets shipped as package data) are not the
    # runs' business: only what the worker imports is shown.
    _mount("tmpfs", root + package, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=0755,size=1m")
    for name, handle in inside.items():
      _bind(handle, f"{root}{package}/{name}", recursive=True)
  for handle in [*handles.values(), *devices.values(), *virtual.values(), *inside.values()]:
    os.close(handle)
  os.chdir(root)
  _pivot_root(".", ".")  # the old root now lies under the new one: detach it
  _check(_libc.umount2(b".", ctypes.c_int(_MNT_DETACH)), "umount2")
  os.chdir("/")
  _make_read_only(writable={_RUNS_DIR, *WRITABLE_DIRS})


def _fresh_sysfs(target: str) -> bool:
  """Mounts a sysfs of this network namespace on `target` (made here); False where that is not
  allowed. Not the host's /sys with what is mounted below it: the counters of the cgroups the pool
  runs in (its memory high-water mark, its CPU time) would keep what a run did for the runs after
  it, the host's network devices count their packets, and debugfs or tracing are no run's
  business."""
  os.makedirs(target, exist_ok=True)
  try:
    _mount("sysfs", target, "sysfs", _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
    return True
  except OSError:
    return False


def _fresh_tmpfs() -> list[tuple[str, str]]:
  """(mount point, tmpfs options) of the folders a run may write: the runs' home, then
  WRITABLE_DIRS."""
  return [
    (point, f"mode={mode},size={_TMPFS_SIZE},nr_inodes={_TMPFS_INODES}")
    for point, mode in ((_RUNS_DIR, "0711"), *((t, "1777") for t in WRITABLE_DIRS))
  ]


def _bind(handle: int, target: str, recursive: bool) -> None:
  """Binds the file or folder open as O_PATH `handle` onto `target` (made here, empty)."""
  if os.path.isdir(f"/proc/self/fd/{handle}"):
    os.makedirs(target, mode=0o755, exist_ok=True)
  else:
    os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
    with open(target, "w"):
      pass
  _mount(f"/proc/self/fd/{handle}", target, None, _MS_BIND | (_MS_REC if recursive else 0))


def _pivot_root(new_root: str, put_old: str) -> None:
  number = _PIVOT_ROOT.get(os.uname().machine)
  if number is None:
    raise OSError(errno.ENOSYS, f"pivot_root: unknown system call number on {os.uname().machine}")
  _check(_libc.syscall(ctypes.c_long(number), new_root.encode(), put_old.encode()), "pivot_root")


def _make_read_only(writable: set[str]) -> None:
  """Remounts every mount read-only but the `writable` tmpfs (not what is bound below them: a
  venv under /tmp) and the pseudo file systems below /proc, with the flags the kernel locks on
  each (nosuid, nodev, noexec)."""
  for point, flags in _mount_points():
    if point in writable or point == "/proc" or point.startswith("/proc/"):
      continue
    try:
      _mount(None, point, None, _MS_BIND | _MS_REMOUNT | _MS_RDONLY | flags)
    except OSError as e:
      if e.errno not in (errno.EACCES, errno.EPERM, errno.ENOENT, errno.EINVAL):
        raise


def _loopback_up() -> None:
  """Brings up this network namespace's loopback interface: a run may serve and reach itself
  (a test that starts a local server), but nothing outside the namespace."""
  with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
    request = struct.pack("16sH22x", b"lo", 0)
    flags = struct.unpack("16sH22x", fcntl.ioctl(s, _SIOCGIFFLAGS, request))[1]
    fcntl.ioctl(s, _SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | _IFF_UP))


def _write(path: str, text: str) -> None:
  with open(path, "w") as f:
    f.write(text)


class CleanupFailed(RuntimeError):
  """What a run left could not be removed or undone (files, the worker's lowered priority): the
  next run would find it, so the worker stops."""


@dataclasses.dataclass
class Sandbox:
  """How this worker contains its runs (see the module docstring)."""

  mode: str  # "root" | "userns" | "plain"
  run_uid: int | None  # the uid runs drop to ("root" mode only), this worker's alone
  runs_dir: str  # holds `run_dir`
  note: str = ""  # why a weaker mode was chosen
  # Each run gets fresh tmpfs on WRITABLE_DIRS and `runs_dir` in mount and IPC namespaces of
  # its own ("root", "userns"), instead of the worker emptying shared ones after it ("plain").
  private_tmp: bool = False
  is_init: bool = False  # PID 1 of a private PID namespace that holds every run
  # `runs_dir` when it was made for this worker on the host's file system ("plain"): the pool
  # removes it once the worker has exited.
  scratch: str | None = None
  # The working directory of every run, made afresh for each (`make_run_dir`, `enter_child`).
  run_dir: str = dataclasses.field(init=False)

  def __post_init__(self):
    self.run_dir = os.path.join(self.runs_dir, "run")
    # What a run mounts (`_make_run_namespaces`), encoded once: (target, options).
    self._fresh = [(point.encode(), options.encode()) for point, options in _fresh_tmpfs()]
    # What the worker's own WRITABLE_DIRS held when it started (a venv under /tmp: links, and
    # folders holding the interpreter's mounts), shown again, read-only, in each run's fresh
    # tmpfs: (path, link target or None, the flags its mount keeps).
    self._kept: list[tuple[str, str | None, int]] = []
    self._last_pid = -1  # /proc/sys/kernel/ns_last_pid of our PID namespace, open for writing
    self._own_namespaces: list[tuple[int, int]] = []  # (fd, type): our mount and IPC namespaces
    # Where the runs' namespaces end (`_hold_run_namespaces`): the process that waits for us.
    self._holder: socket.socket | None = None

  @classmethod
  def create(cls, strongest: str = "auto") -> "Sandbox":
    """Contains this worker in the strongest mode available, capped at `strongest`
    (tests use the weaker modes), and gives it the environment its runs inherit."""
    sandbox = cls._strongest(strongest)
    if sandbox.private_tmp:
      sandbox._keep_what_writable_dirs_hold()
      sandbox._own_namespaces = [
        (os.open(path, _NS_OPEN), kind) for path, kind in _RUN_NAMESPACE_PATHS
      ]
    if sandbox.is_init:
      try:
        sandbox._last_pid = os.open("/proc/sys/kernel/ns_last_pid", os.O_WRONLY | os.O_CLOEXEC)
      except OSError as e:
        sandbox.note = "; ".join(
          filter(None, [sandbox.note, f"PID numbers cannot be started over for each run ({e})"])
        )
    _scrub_environment(sandbox.run_dir)
    if sandbox.mode == "root":
      os.setgroups([])  # runs inherit no supplementary groups
    _prctl(_PR_SET_NO_NEW_PRIVS, 1)  # inherited by every run: setuid binaries cannot give root back
    try:
      _refuse_kernel_keys()
    except OSError as e:
      sandbox.note = "; ".join(
        filter(
          None,
          [
            sandbox.note,
            f"the kernel's key calls stay open to runs ({e}): a uid's keyrings outlive its runs",
          ],
        )
      )
    _first_for_the_oom_killer()
    return sandbox

  def _keep_what_writable_dirs_hold(self) -> None:
    for folder in WRITABLE_DIRS:
      for name in os.listdir(folder):
        path = os.path.join(folder, name)
        if os.path.islink(path):
          self._kept.append((path, os.readlink(path), 0))
        else:
          flags = os.statvfs(path).f_flag  # ST_* equal the MS_* flags, but relatime
          locked = flags & (_MS_NOSUID | _MS_NODEV | _MS_NOEXEC | _MS_NOATIME | _MS_NODIRATIME)
          self._kept.append((path, None, locked | (_MS_RELATIME if flags & _ST_RELATIME else 0)))

  @classmethod
  def _strongest(cls, strongest: str) -> "Sandbox":
    if strongest not in MODES:
      raise ValueError(f"sandbox mode must be one of {MODES}, not {strongest!r}")
    notes = [] if strongest == "auto" else [f"capped at {strongest!r}"]
    if os.geteuid() != 0:
      notes.append("not root: runs keep this user's uid, and only read-only mounts guard its files")
    if os.geteuid() == 0 and strongest == "auto":
      try:
        _unshare(_CLONE_NEWNS | _CLONE_NEWNET | _CLONE_NEWIPC)
        _private_root()
        _loopback_up()
        sandbox = cls("root", _RUN_UID_BASE + os.getpid(), _RUNS_DIR, private_tmp=True)
        return sandbox._with_pid_namespaces(notes)
      except OSError as e:
        notes.append(f"root namespaces unavailable ({e})")
    try:
      if strongest == "plain":
        raise OSError(errno.EPERM, "not requested")
      uid, gid = os.geteuid(), os.getegid()
      _unshare(_CLONE_NEWUSER | _CLONE_NEWNS | _CLONE_NEWNET | _CLONE_NEWIPC)
      _write("/proc/self/setgroups", "deny")
      _write("/proc/self/uid_map", f"0 {uid} 1")
      _write("/proc/self/gid_map", f"0 {gid} 1")
      _private_root()
      _loopback_up()
      _prctl(_PR_SET_DUMPABLE, 0)  # a run with our uid must not ptrace or read us
      sandbox = cls("userns", None, _RUNS_DIR, note="; ".join(notes), private_tmp=True)
      return sandbox._with_pid_namespaces(notes)
    except OSError as e:
      notes.append(f"user namespaces unavailable ({e})")
    runs_dir = _make_private_dir("/tmp", "precisecoder-runs-")
    return cls(
      "plain",
      None,
      runs_dir,
      scratch=runs_dir,
      note="; ".join(notes) + "; runs are contained by rlimits and process groups only",
    )

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
    holder, self._holder = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid:
      self._holder.close()
      os.closerange(0, holder.fileno())  # the worker alone holds the protocol pipes
      os.closerange(holder.fileno() + 1, _max_fd())
      _hold_run_namespaces(holder)
      _, status = os.waitpid(pid, 0)
      os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
    holder.close()
    set_parent_death_signal()
    self.is_init = os.getpid() == 1
    # This namespace's processes only (the pool's and the host's are not there to see), and of
    # those only what a process may ptrace (hidepid): a run sees its own processes, not the
    # worker, whose counters (CPU time, faults, context switches) record the runs before it.
    for options in ("hidepid=invisible", "hidepid=2"):  # the name, then a kernel before 5.8's
      try:
        _mount("proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, options)
        break
      except OSError as e:
        failed = e
    else:
      notes.append(f"a private /proc could not be mounted ({failed}): runs see the host's")
    self.note = "; ".join(notes)
    return self

  def fork(self) -> int:
    """Forks a run, in mount and IPC namespaces made for it (`_make_run_namespaces`).

    As PID 1 of the runs' namespace, where the run before has been reaped with everything it
    started, we first set the namespace's last PID back to ours: every run's processes get the
    same PIDs (2, 3, ...) whatever the runs before it started.

    The run's namespaces are made here, before the fork, and handed to the process outside our
    PID namespace that waits for us (`_hold_run_namespaces`), which keeps them until the next
    run's come: a mount namespace's end waits for an RCU grace period, which on a loaded host
    takes milliseconds, and it is waited for there while the next run works, not by the run's
    exit, which the worker would wait for.
    """
    held = []
    if self.private_tmp:
      try:
        held = self._make_run_namespaces()
      except OSError:
        self._return_to_own_namespaces()
        raise
    if self._last_pid >= 0:
      _pwrite(self._last_pid, b"1", 0)
    pid = _fork()
    if pid == 0 or not held:  # the child closes its copies of `held` with its other fds
      return pid
    self._return_to_own_namespaces()
    if self._holder is not None:
      try:
        _send_fds(self._holder, [b"n"], held)
      except OSError:
        # The process that waits for us has gone (killed): its death signal ends this worker
        # in a moment. Until then the run goes on; it is not the sandbox failing the job.
        pass
    for fd in held:  # without a holder, the run's last process ends them
      _close(fd)
    return pid

  def _return_to_own_namespaces(self) -> None:
    try:
      for fd, kind in self._own_namespaces:
        _check(_setns(fd, kind), "setns")
    except OSError as e:  # a worker left in a run's namespaces would hand them on
      raise CleanupFailed(f"could not return to the worker's namespaces: {e}") from e

  def make_run_dir(self) -> str:
    """`run_dir`, the same path for every run of this worker; the worker's environment (HOME,
    TMPDIR, PWD) names it once instead of each child rewriting its environment. Where runs mount
    their own home (`private_tmp`), the child makes it there (`enter_child`); else it is made
    here afresh and empty.
    """
    if self.private_tmp:
      return self.run_dir
    try:
      os.mkdir(self.run_dir, 0o700)
    except FileExistsError:  # a run whose clean-up failed: nothing it left survives
      self.remove_run_dir(self.run_dir)
      os.mkdir(self.run_dir, 0o700)
    return self.run_dir

  def clean_writable(self) -> None:
    """Empties what a "plain" run could write besides its own directory (gone by now:
    `remove_run_dir`): the folder that holds it. Other modes' runs wrote only into tmpfs of
    their own mount namespace, ended once the run is over: nothing is left to empty."""
    if not self.private_tmp:
      self._empty(self.runs_dir)

  @staticmethod
  def _empty(folder: str) -> None:
    for name in os.listdir(folder):
      remove_tree(os.path.join(folder, name))
    left = os.listdir(folder)
    if left:
      raise CleanupFailed(f"could not empty {folder} after a run: {sorted(left)[:3]}")

  def remove_run_dir(self, path: str) -> None:
    if self.private_tmp:  # the run's own tmpfs: gone with its mount namespace
      return
    try:
      os.rmdir(path)  # the common case: the run left nothing behind
    except OSError:
      remove_tree(path)
      if os.path.lexists(path):
        raise CleanupFailed(f"could not remove the run directory {path}") from None

  def kill_run(self, pid: int) -> None:
    """Kills a run and everything it started, and reaps them all."""
    # As PID 1, every other process in our namespace belongs to this run.
    targets = ((os.kill, -1),) if self.is_init else ((os.kill, pid), (os.killpg, pid))
    signalled = False
    for kill, target in targets:
      try:
        kill(target, signal.SIGKILL)
        signalled = True
      except (ProcessLookupError, PermissionError):
        pass
    while signalled:  # a zombie is signalled too: nothing signalled, nothing left to reap
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
    for name, value in (
      (_RLIMIT_AS, int(limits["memory_mb"]) << 20),
      (_RLIMIT_CPU, int(limits["cpu_s"])),
      (_RLIMIT_FSIZE, int(limits["max_file_bytes"])),
      (_RLIMIT_NOFILE, int(limits["max_open_files"])),
      (_RLIMIT_NPROC, int(limits["max_processes"])),
      (_RLIMIT_CORE, 0),
    ):
      _setrlimit(name, (value, value))
    if self.mode == "root":
      _setresgid(self.run_uid, self.run_uid, self.run_uid)
      _setresuid(self.run_uid, self.run_uid, self.run_uid)
      # The new uid made the run undumpable: its /proc files root's, and, /proc showing a process
      # only what it may ptrace (hidepid), its processes hidden from one another.
      _prctl(_PR_SET_DUMPABLE, 1)
    elif self.mode == "userns":
      _unshare(_CLONE_NEWUSER)  # no capabilities over the worker's mounts or processes
      _prctl(_PR_SET_DUMPABLE, 1)  # the worker is not (its runs must not read it): they are

  def _make_run_namespaces(self) -> list[int]:
    """Moves this worker into new mount and IPC namespaces for the run it forks next, with fresh
    tmpfs on the folders a run may write and its working directory in them: it finds nothing an
    earlier run left (files, inode numbers, System V objects, POSIX message queues), and what it
    leaves ends with them. Returns them, open (`fork` closes them after the next run's fork)."""
    _unshare(_CLONE_NEWNS | _CLONE_NEWIPC)
    # Opened in this namespace: a mount of another cannot be bound here.
    kept = [
      (path, link, flags, None if link else os.open(path, os.O_PATH | os.O_CLOEXEC))
      for path, link, flags in self._kept
    ]
    for target, options in self._fresh:
      _check(_mount_raw(b"tmpfs", target, b"tmpfs", _TMPFS_FLAGS, options), "mount")
    for path, link, flags, handle in kept:
      if link is not None:
        os.symlink(link, path)
      else:
        _bind(handle, path, recursive=True)
        os.close(handle)
        _mount(None, path, None, _MS_BIND | _MS_REMOUNT | _MS_RDONLY | flags)
    _mkdir(self.run_dir, 0o700)
    if self.run_uid is not None:
      _chown(self.run_dir, self.run_uid, self.run_uid)
    return [_open(path, _NS_OPEN) for path, _ in _RUN_NAMESPACE_PATHS]


def _hold_run_namespaces(holder: socket.socket) -> None:
  """In the process that waits for the worker: holds each run's namespaces (`Sandbox.fork`) until
  the next run's arrive, by when that run is over and its processes reaped, and then ends them
  here, off the worker's way. Returns once the worker has gone."""
  held: list[int] = []
  while True:
    try:
      _, fds, _, _ = socket.recv_fds(holder, 16, 8)
    except OSError:
      fds = []
    for fd in held:
      os.close(fd)
    held = fds
    if not fds:
      return


_mount_raw = _libc["mount"]  # a function of its own: `_mount` passes other types
_mount_raw.argtypes = (
  ctypes.c_char_p,
  ctypes.c_char_p,
  ctypes.c_char_p,
  ctypes.c_ulong,
  ctypes.c_char_p,
)
_fork, _pwrite, _mkdir, _chown = os.fork, os.pwrite, os.mkdir, os.chown
_open, _close, _setns, _NS_OPEN = os.open, os.close, _libc.setns, os.O_RDONLY | os.O_CLOEXEC
_send_fds = socket.send_fds
_RUN_NAMESPACES = (("mnt", _CLONE_NEWNS), ("ipc", _CLONE_NEWIPC))
_RUN_NAMESPACE_PATHS = [(f"/proc/self/ns/{name}", kind) for name, kind in _RUN_NAMESPACES]


_setsid, _closerange, _chdir = os.setsid, os.closerange, os.chdir
_setresgid, _setresuid, _setrlimit = os.setresgid, os.setresuid, resource.setrlimit
_SIGKILL = signal.SIGKILL
_RLIMIT_AS, _RLIMIT_CPU = resource.RLIMIT_AS, resource.RLIMIT_CPU
_RLIMIT_FSIZE, _RLIMIT_NOFILE = resource.RLIMIT_FSIZE, resource.RLIMIT_NOFILE
_RLIMIT_NPROC, _RLIMIT_CORE = resource.RLIMIT_NPROC, resource.RLIMIT_CORE


def remove_tree(path: str) -> None:
  """Removes `path` and everything below it, never following a link, however deep or wide: a
  run may leave a tree deeper than Python's recursion limit (shutil.rmtree recurses) or than
  PATH_MAX. One directory is open at a time, reached from the one above it, and each is listed
  once. What cannot be removed stays (callers check). No process of the run is alive by now to
  move directories about."""
  try:
    fd = os.open(path, _DIRECTORY)
  except OSError:  # a file or a link (or nothing): removed as such
    _unlink_quietly(path)
    return
  entered: list[str] = []  # the directories below `path` we are in, outermost first
  pending: list[list[str]] = []  # per level: its subdirectories still to remove
  try:
    pending.append(_remove_files(fd))
    while True:
      if pending[-1]:
        name = pending[-1].pop()
        try:
          below = os.open(name, _DIRECTORY, dir_fd=fd)
        except OSError:  # left as it is
          continue
        os.close(fd)
        fd = below
        entered.append(name)
        pending.append(_remove_files(fd))
      elif entered:  # this one is empty (or holds what cannot go): back up, remove it
        above = os.open("..", _DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = above
        pending.pop()
        try:
          os.rmdir(entered.pop(), dir_fd=fd)
        except OSError:
          pass
      else:
        break
  finally:
    os.close(fd)
  try:
    os.rmdir(path)
  except OSError:
    pass


def _remove_files(fd: int) -> list[str]:
  """Unlinks every entry of the directory open as `fd` but its subdirectories; returns those."""
  subdirectories = []
  try:
    with os.scandir(fd) as entries:
      for entry in entries:
        if entry.is_dir(follow_symlinks=False):
          subdirectories.append(entry.name)
        else:
          _unlink_quietly(entry.name, fd)
  except OSError:  # unreadable: left as it is (callers check)
    pass
  return subdirectories


def _unlink_quietly(name: str, dir_fd: int | None = None) -> None:
  try:
    os.unlink(name, dir_fd=dir_fd)
  except OSError:
    pass


def _refuse_kernel_keys() -> None:
  """Makes add_key, request_key and keyctl fail with ENOSYS in this worker and every run it forks
  (a seccomp filter, inherited and never lifted), as on a kernel built without keys.

  The keyrings a process can keep keys in beyond its own life (its uid's user, user session and
  persistent keyrings; named keyrings) belong to the uid in its user namespace, which every run
  of a worker shares: keys are how one run could leave the next a message that no mount or IPC
  namespace holds. Nothing a run needs uses them, and a user namespace per run, which would
  also separate them, costs every run. System calls of another ABI (x32, i386 through int 0x80)
  are refused the same way: they would reach the same calls by other numbers.
  """
  arch, numbers = _KEY_CALLS.get(os.uname().machine, (None, ()))
  if arch is None:
    raise OSError(errno.ENOSYS, f"no seccomp filter for {os.uname().machine}")
  refuse, allow = _SECCOMP_RET_ERRNO | errno.ENOSYS, _SECCOMP_RET_ALLOW
  program = [
    (_BPF_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
    (_BPF_JEQ_K, 1, 0, arch),
    (_BPF_RET_K, 0, 0, refuse),
    (_BPF_LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
    (_BPF_JGE_K, 1 + len(numbers), 0, _X32_SYSCALL_BIT),
    *((_BPF_JEQ_K, len(numbers) - i, 0, number) for i, number in enumerate(numbers)),
    (_BPF_RET_K, 0, 0, allow),
    (_BPF_RET_K, 0, 0, refuse),
  ]
  filters = (_SockFilter * len(program))(*program)
  fprog = _SockFprog(len(program), filters)
  _check(
    _libc.prctl(
      ctypes.c_int(_PR_SET_SECCOMP),
      ctypes.c_ulong(_SECCOMP_MODE_FILTER),
      ctypes.byref(fprog),
      ctypes.c_ulong(0),
      ctypes.c_ulong(0),
    ),
    "seccomp",
  )


class _SockFilter(ctypes.Structure):
  _fields_ = [
    ("code", ctypes.c_uint16),
    ("jt", ctypes.c_uint8),
    ("jf", ctypes.c_uint8),
    ("k", ctypes.c_uint32),
  ]


class _SockFprog(ctypes.Structure):
  _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_SockFilter))]


_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2
_BPF_LD_W_ABS, _BPF_JEQ_K, _BPF_JGE_K, _BPF_RET_K = 0x20, 0x15, 0x35, 0x06
_SECCOMP_RET_ALLOW, _SECCOMP_RET_ERRNO = 0x7FFF0000, 0x00050000
_X32_SYSCALL_BIT = 0x40000000
# AUDIT_ARCH_* and the numbers of add_key, request_key and keyctl
_KEY_CALLS = {"x86_64": (0xC000003E, (248, 249, 250)), "aarch64": (0xC00000B7, (217, 218, 219))}


def _first_for_the_oom_killer() -> None:
  """Makes this worker, and so every run it forks, the first process the kernel's OOM killer
  picks: the rlimits bound each process of a run, not their sum (64 processes of 1 GiB), and a
  run must not get the trainer killed. Raising one's own score needs no privilege; no run can
  lower it again (that takes CAP_SYS_RESOURCE). A killed worker is replaced by the pool."""
  try:
    with open("/proc/self/oom_score_adj", "w") as f:
      f.write("1000")
  except OSError:
    pass  # no /proc: the rlimits are all there is


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


def _max_fd() -> int:
  return 2**31 - 1  # closerange clips to the real table
