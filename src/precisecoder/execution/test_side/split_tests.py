"""The test process of a split run: runs the test code where the program never runs.

Called in the run's sandboxed child for an assert or unittest job sent with "split"
(docs/sandbox.md, "Split runs"). This process imports what the tests import, makes itself
non-dumpable (a process of its uid can then neither trace it nor read its memory or fds), keeps no
writable directory on its import path, and starts the program's process (`split_program`), a
fresh interpreter that never held the tests nor the pool's channel (`program_boot`). The test
code then runs here, in a namespace of its own with the program's top-level names as data, as
this process's own library modules and classes, or as references (`bridge.Remote`); every check
runs here, on data our decoder built (`codec`). The records it writes are the harness's
(`harness.Channel`), so the pool judges them as it judges any run (`verdicts.judge`).
"""

from __future__ import annotations

import _signal
import _socket
import builtins
import ctypes
import dis
import functools
import importlib
import os
import stat
import sys
import types
import unittest
from typing import Any

from precisecoder.execution.shared import bridge
from precisecoder.execution.program_side import program_boot
from precisecoder.execution.program_side import split_program

_PR_GET_DUMPABLE, _PR_SET_DUMPABLE = 3, 4
_CHANNEL_FD = 3  # worker.CHANNEL_FD: the program's process must not hold it
# Bound, typed and called once here in the worker: a run's first ctypes call would otherwise build
# the function object and its converters in every run.
_prctl = ctypes.CDLL(None, use_errno=True).prctl
_prctl.argtypes = (ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong)
_prctl.restype = ctypes.c_int
_prctl(_PR_GET_DUMPABLE, 0, 0, 0, 0)
_MAX_FD = 1 << 16


# pyplot's functions that act on its current figure: the program's or the tests' own, whichever
# is current (`_Pyplot`). pyplot's own functions (`plot`, `subplot`, `title`) reach the current
# figure through these, by its module's globals.
_PYPLOT_CURRENT = ("gcf", "gca", "gci", "clf", "cla", "savefig", "show", "draw")


class _Pyplot:
  """The tests' pyplot in a split run. The figures the tests make (`figure`, `subplots`) are this
  process's own: a reference plot they draw is drawn by their matplotlib, never the program's
  (which may have patched its `Axes.bar`), and its data never reach the program. The program's
  figures stay in its process; the calls that name pyplot's current figure go to the program's
  pyplot unless the tests made or chose a figure of their own since they last asked the program
  anything (as in one interpreter, where the last figure made is current). Closing, listing and
  looking up figures by number or label covers both sides."""

  def __init__(self, end: bridge.Endpoint, pyplot: types.ModuleType):
    self.end = end
    names = (*_PYPLOT_CURRENT, "figure", "sca", "close", "get_fignums", "get_figlabels")
    self.own = {name: getattr(pyplot, name) for name in (*names, "fignum_exists")}
    self.remote: Any = None
    self.functions: dict[str, Any] = {}
    self.made_at = -1  # `end.requests` when the tests last made or chose a figure of their own
    for name in _PYPLOT_CURRENT:
      setattr(pyplot, name, functools.partial(self.current, name))
    for name in ("figure", "sca", "close", "get_fignums", "get_figlabels", "fignum_exists"):
      setattr(pyplot, name, getattr(self, name))

  def theirs(self, name: str):
    function = self.functions.get(name)
    if function is None:
      if self.remote is None:
        self.remote = self.end.request("module", None, "matplotlib.pyplot")
      function = self.functions[name] = getattr(self.remote, name)
    return function

  def ours_current(self) -> bool:
    return self.made_at == self.end.requests and bool(self.own["get_fignums"]())

  def current(self, name: str, *args, **kwargs):
    if self.ours_current():
      return self.own[name](*args, **kwargs)
    return self.theirs(name)(*args, **kwargs)

  def figure(self, *args, **kwargs):
    if args and bridge.is_remote(args[0]):  # `plt.figure(fig)` of the program's figure
      self.made_at = -1
      return self.theirs("figure")(*args, **kwargs)
    made = self.own["figure"](*args, **kwargs)
    self.made_at = self.end.requests
    return made

  def sca(self, ax):
    if bridge.is_remote(ax):
      self.made_at = -1
      return self.theirs("sca")(ax)
    chosen = self.own["sca"](ax)
    self.made_at = self.end.requests
    return chosen

  def close(self, fig=None):
    if fig is None:
      return self.current("close")
    if isinstance(fig, str) and fig == "all":
      self.own["close"]("all")
      return self.theirs("close")("all")
    if bridge.is_remote(fig):
      return self.theirs("close")(fig)
    if not isinstance(fig, (int, str)) or self.fignum_exists(fig, theirs=False):
      return self.own["close"](fig)
    return self.theirs("close")(fig)

  def get_fignums(self):
    # each side numbers its own figures: the same number may stand for one of each
    return sorted([*self.theirs("get_fignums")(), *self.own["get_fignums"]()])

  def get_figlabels(self):
    return [*self.theirs("get_figlabels")(), *self.own["get_figlabels"]()]

  def fignum_exists(self, num, theirs: bool = True) -> bool:
    if self.own["fignum_exists"](num):
      return True
    return bool(theirs and self.theirs("fignum_exists")(num))


def _share_pyplot(end: bridge.Endpoint) -> None:
  """Makes this process's pyplot the tests' (`_Pyplot`), once it is loaded: by the tests'
  imports, or by a name of the program's that the test process binds to it (`plt`)."""
  pyplot = sys.modules.get("matplotlib.pyplot")
  if pyplot is not None and end.pyplot is None:
    end.pyplot = _Pyplot(end, pyplot)


class _Patches:
  """The tests' active `unittest.mock` patches, as they enter and leave (this process's
  `_patch.__enter__`/`__exit__` are wrapped while the tests run)."""

  def __init__(self):
    self.active: list[tuple[Any, Any]] = []
    self.installed = False
    self.logs: list[tuple[Any, str, int]] = []  # active assertLogs: (context, logger, level)
    self.logs_installed = False
    self.catching: list[Any] = []  # the tests' active warnings.catch_warnings contexts
    self.dicts: list[Any] = []  # dicts a `patch.dict` changed since the last request

  def install(self) -> None:
    """Wraps unittest.mock's patches, once the tests have loaded it (importing it costs runs that
    never mock more than their program's whole run: it imports asyncio)."""
    mock = sys.modules.get("unittest.mock")
    if self.installed or mock is None:
      return
    self.installed = True
    patches, patch_class = self, mock._patch  # pylint: disable=protected-access
    enter_patch, exit_patch = patch_class.__enter__, patch_class.__exit__

    def enter(patcher):
      new = enter_patch(patcher)
      patches.active.append((patcher, new))
      return new

    def leave(patcher, *exc_info):
      patches.active[:] = [(p, n) for p, n in patches.active if p is not patcher]
      return exit_patch(patcher, *exc_info)

    patch_class.__enter__, patch_class.__exit__ = enter, leave
    dict_class = mock._patch_dict  # pylint: disable=protected-access
    patch_dict, unpatch_dict = dict_class._patch_dict, dict_class._unpatch_dict

    def patched(patcher):
      patch_dict(patcher)
      patches.dicts.append(patcher.in_dict)

    def unpatched(patcher):
      unpatch_dict(patcher)
      patches.dicts.append(patcher.in_dict)

    dict_class._patch_dict, dict_class._unpatch_dict = patched, unpatched

  def install_logs(self) -> None:
    """Wraps unittest's assertLogs and assertNoLogs, which load its log-watching context when
    first called: that context is wrapped then (`_watch_logs`)."""
    patches = self
    for name in ("assertLogs", "assertNoLogs"):
      original = getattr(unittest.TestCase, name, None)
      if original is None:
        continue

      def method(case, *args, _original=original, **kwargs):
        context = _original(case, *args, **kwargs)
        patches.watch_logs()
        return context

      setattr(unittest.TestCase, name, method)

  def install_warnings(self) -> None:
    """Wraps `warnings.catch_warnings` (assertWarns enters one): while the tests are inside one,
    the program's warnings come here (`_warning`) and meet the tests' filters and records."""
    import warnings  # pylint: disable=import-outside-toplevel

    patches, context = self, warnings.catch_warnings
    enter_catch, exit_catch = context.__enter__, context.__exit__

    def enter(catch):
      entered = enter_catch(catch)
      patches.catching.append(catch)
      return entered

    def leave(catch, *exc_info):
      patches.catching[:] = [c for c in patches.catching if c is not catch]
      return exit_catch(catch, *exc_info)

    context.__enter__, context.__exit__ = enter, leave

  def watch_logs(self) -> None:
    """Wraps unittest's assertLogs context, so that the program's process watches the same
    loggers (`split_program.ProgramSide._logs`) and sends their records here (`_log_record`)."""
    watching = sys.modules.get("unittest._log")
    if self.logs_installed or watching is None:
      return
    self.logs_installed = True
    patches, context = self, watching._AssertLogsContext  # pylint: disable=protected-access
    enter_logs, exit_logs = context.__enter__, context.__exit__

    def enter(watch):
      watcher = enter_logs(watch)
      patches.logs.append(
        (watch, watch.logger.name if watch.logger.name != "root" else "", watch.level)
      )
      return watcher

    def leave(watch, *exc_info):
      patches.logs[:] = [entry for entry in patches.logs if entry[0] is not watch]
      return exit_logs(watch, *exc_info)

    context.__enter__, context.__exit__ = enter, leave

  def described(self) -> list:
    return [(id(patcher), patcher.target, patcher.attribute, new) for patcher, new in self.active]

  def key(self) -> tuple:
    return tuple((id(patcher), id(new)) for patcher, new in self.active)


_STREAMS = ("stdin", "stdout", "stderr")
_RECORD_FIELDS = {"name": str, "msg": str, "levelno": int, "levelname": str, "lineno": int}
_RECORD_FIELDS.update(pathname=str, filename=str, module=str, funcName=str, created=float)


def _warning(text: Any, names: Any, filename: Any, lineno: Any) -> None:
  """A warning of the program's, while the tests catch warnings (assertWarns): issued here
  again, of this process's class of its names (the program's own stand in, `bridge._stand_in`),
  so that the tests' filters and records meet it."""
  import warnings  # pylint: disable=import-outside-toplevel

  if type(text) is not str or type(filename) is not str or type(lineno) is not int:
    raise TypeError("a warning is text, a file name and a line")
  category = bridge._stand_in(names) or next(  # pylint: disable=protected-access
    (c for c in bridge._named_classes(names) if isinstance(c, type) and issubclass(c, Warning)),  # pylint: disable=protected-access
    UserWarning,
  )
  if not issubclass(category, Warning):
    category = UserWarning
  warnings.warn_explicit(text, category, filename, lineno)


def _log_record(fields: Any) -> None:
  """A log record of the program's process, for a logger the tests watch (assertLogs): made here
  from its data (`logging.makeLogRecord`) and handled by this process's logger of its name."""
  import logging  # pylint: disable=import-outside-toplevel

  if type(fields) is not dict:
    raise TypeError("a log record is a dict")
  record = {k: v for k, v in fields.items() if type(v) is _RECORD_FIELDS.get(k, type(None))}
  if type(record.get("name")) is not str or type(record.get("levelno")) is not int:
    raise TypeError("a log record names its logger and level")
  made = logging.makeLogRecord(record)
  logging.getLogger(None if made.name == "root" else made.name).handle(made)


# What the tests' namespace shares with the program by name (`_State._provide`).
_PROVIDED = (type, types.FunctionType, types.BuiltinFunctionType, types.ModuleType)


class _State:
  """What goes to the program's process with each request, when it changed (`apply_state` there),
  and what comes back."""

  def __init__(self, patches: _Patches):
    self.patches = patches
    self.sent: dict[str, Any] = {}
    self.space: dict = {}  # the tests' namespace, once made
    self.wanted: list[str] = []  # the names the program refers to but does not define
    self.provided: dict[str, int] = {}
    # This process's standard streams before the tests ran: where the tests put others in their
    # place (`redirect_stdout`, `sys.stdout = buffer`), the program's print goes to those.
    self.given: dict[str, Any] = {}  # the program's names as the tests' namespace got them
    self.streams = {name: getattr(sys, name) for name in _STREAMS}
    self.replay, _REPLAY[:] = list(_REPLAY), []  # with the first request: before the program loads
    self.sent_streams: dict[str, Any] = dict.fromkeys(_STREAMS)

  def _provide(self) -> dict:
    """The tests' names the program refers to (a node class the tests define), as they appear or
    change: they go to the program as references, as one namespace would have shared them. Only
    classes, functions and modules: the tests' data and instances (a table of cases and their
    expected values) would reach the program by reference, to be changed in place. The tests'
    TestCase classes never do."""
    given = {}
    for name in self.wanted:
      value = self.space.get(name, self.space)
      if (
        value is self.space
        or self.provided.get(name) == id(value)
        or (bridge.is_remote(value))
        or not isinstance(value, _PROVIDED)
        or (isinstance(value, type) and issubclass(value, unittest.TestCase))
      ):
        continue
      given[name] = value
      self.provided[name] = id(value)
    return given

  def _refresh(self, names: dict) -> None:
    """The program's top-level names it rebound or added to, in the tests' namespace, but those
    the tests bound themselves since (theirs win, as they ran later)."""
    missing = object()
    for name, value in names.items():
      if not _program_name(name):
        continue
      current = self.space.get(name, missing)
      if current is missing or current is self.given.get(name, missing):
        self.space[name] = self.given[name] = value

  def outgoing(self) -> dict | None:
    out = {}
    if self.replay:
      out["replay"], self.replay = self.replay, []
    self.patches.install()  # the tests may import unittest.mock late
    given = self._provide() if self.wanted else None
    if given:
      out["provide"] = given
    catching = bool(self.patches.catching)
    if catching != self.sent.get("warnings", False):
      out["warnings"] = self.sent["warnings"] = catching
    logs = [[name, level] for _, name, level in self.patches.logs]
    if logs != self.sent.get("logs", []):
      out["logs"] = self.sent["logs"] = logs
    if self.patches.dicts:  # `patch.dict` on a dict of the program's names: there too
      changed = {id(d) for d in self.patches.dicts}
      self.patches.dicts.clear()
      data = {n: dict(v) for n, v in self.given.items() if type(v) is dict and id(v) in changed}
      if data:
        out["dicts"] = data
    key = self.patches.key()
    if key != self.sent.get("patch_key"):
      out["patches"] = self.patches.described()
      self.sent["patch_key"] = key
    random = sys.modules.get("random")  # only where the tests use it: it reseeds on every fork
    if random is not None:
      now = random.getstate()
      if now != self.sent.get("random"):
        self.sent["random"] = now
        out["random"] = split_program.pack_random(now)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
      now = numpy.random.get_state(legacy=True)
      last = self.sent.get("numpy")
      if last is None or not split_program._same_numpy_state(now, last):  # pylint: disable=protected-access
        out["numpy"] = self.sent["numpy"] = now
    environ = _environ_bytes()  # compared as bytes: os.environ decodes every item it lists
    if environ != self.sent.get("environ"):
      self.sent["environ"] = environ
      out["environ"] = dict(os.environ)
    cwd = os.getcwd()
    if cwd != self.sent.get("cwd"):
      out["cwd"] = self.sent["cwd"] = cwd
    if sys.argv != self.sent.get("argv"):  # a command line the tests give the program's main
      out["argv"] = self.sent["argv"] = list(sys.argv)
    for name in _STREAMS:
      stream = getattr(sys, name)
      stream = None if stream is self.streams[name] else stream
      if stream is not self.sent_streams[name]:
        out.setdefault("streams", {})[name] = self.sent_streams[name] = stream
    return out or None

  def incoming(self, state: Any) -> None:
    """The program's generator states, adopted where draws alone made them from the state last
    sent or from the seed the program gave (repeated here): the tests draw on where the program
    stopped, as in one interpreter (BigCodeBench/93's tests draw their data after the program
    seeded numpy). A state it set otherwise stays its own: through it the program would choose
    all the tests draw next (their random inputs)."""
    if type(state) is not dict:
      return
    if type(state.get("globals")) is dict and self.space:
      self._refresh(state["globals"])
    random = sys.modules.get("random")
    if random is not None and type(state.get("random")) is tuple:
      start = _seeded(state.get("random_seed"), random.Random, lambda g: g.getstate())
      drawn = _drawn_python(start or self.sent.get("random"), state["random"])
      if drawn is not None:
        random.setstate(drawn)
        self.sent["random"] = drawn
    numpy = sys.modules.get("numpy")
    if numpy is not None and type(state.get("numpy")) is tuple:
      start = _seeded(
        state.get("numpy_seed"), numpy.random.RandomState, lambda g: g.get_state(legacy=True)
      )
      drawn = _drawn_numpy(numpy, start or self.sent.get("numpy"), state["numpy"])
      if drawn is not None:
        numpy.random.set_state(drawn)
        self.sent["numpy"] = numpy.random.get_state(legacy=True)


# How many of the Mersenne Twister's 624-word blocks one call of the program may draw for its
# generator's state to be recognised as drawn (31 million words; the walk costs ~5 us a block).
_MAX_BLOCKS = 50_000
_WORDS = 624


def _seeded(given: Any, make, read) -> Any:
  """The state of a generator of ours (`make()`, read with `read`) once seeded as the program
  seeded its own (`given`: (args, kwargs) of numbers, text or bytes, or lists or arrays of
  numbers), or None."""
  if type(given) is not tuple or len(given) != 2:
    return None
  args, kwargs = given
  if type(args) is not tuple or type(kwargs) is not dict or len(args) + len(kwargs) > 2:
    return None
  for value in [*args, *kwargs.values()]:
    kind = type(value)
    if kind not in (int, float, str, bytes, bytearray, list, tuple) and kind.__name__ != "ndarray":
      return None
  try:
    generator = make()
    generator.seed(*args, **kwargs)
    return read(generator)
  except Exception:  # pylint: disable=broad-except
    return None


def _tempered(word: int) -> int:
  """The Mersenne Twister's output for a word of its state."""
  word ^= word >> 11
  word ^= (word << 7) & 0x9D2C5680
  word ^= (word << 15) & 0xEFC60000
  return word ^ (word >> 18)


def _reached(start: list, end: list, skip, matcher) -> bool:
  """Whether drawing leads from generator position `start` ([words, index]) to `end`: the same
  block, or a later one, which the walk meets within `_MAX_BLOCKS` (`skip(n)` draws n words;
  `matcher(outputs)()` draws a block and tells whether it gave those outputs)."""
  (words, index), (target, at) = start, end
  if words == target:
    return index <= at
  if not 1 <= at <= _WORDS:
    return False
  skip(_WORDS - index)  # to the end of the block the program started in
  next_block_is_end = matcher([_tempered(w) for w in target])
  return any(next_block_is_end() for _ in range(_MAX_BLOCKS))


def _drawn_python(before: Any, after: Any) -> tuple | None:
  """`random`'s state `after`, where draws alone lead to it from `before` (its cached Gaussian
  dropped: a value the program could set); else None."""
  import random  # pylint: disable=import-outside-toplevel

  try:
    version, words, _ = after
    if type(words) is not tuple or len(words) != _WORDS + 1 or before[0] != version:
      return None
    if not all(type(w) is int and 0 <= w < 1 << 32 for w in words):
      return None
    walker = random.Random()
    walker.setstate((before[0], before[1], None))
  except (TypeError, ValueError, IndexError):
    return None

  def matcher(outputs: list):  # getrandbits: a block's outputs as one int, low word first
    wanted = sum(o << (32 * i) for i, o in enumerate(outputs))
    return lambda: walker.getrandbits(32 * _WORDS) == wanted

  start, end = [before[1][:_WORDS], before[1][_WORDS]], [words[:_WORDS], words[_WORDS]]
  skip = lambda n: n and walker.getrandbits(32 * n)  # noqa: E731
  return (version, words, None) if _reached(start, end, skip, matcher) else None


def _drawn_numpy(numpy, before: Any, after: Any) -> tuple | None:
  """numpy's legacy global state `after`, where draws alone lead to it from `before` (its cached
  Gaussian dropped); else None."""
  try:
    name, keys, position = after[:3]
    keys = numpy.asarray(keys, dtype=numpy.uint32)
    if keys.shape != (_WORDS,) or type(position) is not int or name != before[0]:
      return None
    walker = numpy.random.MT19937()
    walker.state = {"bit_generator": name, "state": {"key": before[1], "pos": before[2]}}
  except (TypeError, ValueError, IndexError, KeyError):
    return None

  def matcher(outputs: list):
    wanted = numpy.array(outputs, dtype=numpy.uint64)
    return lambda: numpy.array_equal(walker.random_raw(_WORDS), wanted)

  start = [before[1].tolist(), before[2]]
  skip = lambda n: walker.random_raw(n)  # noqa: E731
  reached = _reached(start, [keys.tolist(), position], skip, matcher)
  return (name, keys, position, 0, 0.0) if reached else None


_SCRATCH = ("/tmp", "/var/tmp", "/dev/shm")


def _places(paths) -> tuple[str, ...]:
  return tuple(os.path.realpath(p) + os.sep for p in paths if p and p != "/")


_SCRATCH_PLACES = _places(_SCRATCH)


@functools.lru_cache(maxsize=4)
def _resolved(path: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
  """Each import path entry with its real path, worked out once in the worker (the run's import
  path is the worker's): resolving them is most of sealing a run otherwise."""
  return tuple((entry, os.path.realpath(entry) + os.sep) for entry in path)


_resolved(tuple(sys.path))


def _environ_bytes() -> dict:
  data = getattr(os.environ, "_data", None)
  return dict(data) if type(data) is dict else dict(os.environ)


@functools.lru_cache(maxsize=8)
def _real_place(path: str) -> str:
  """A folder's real path, as a prefix. Cached: a run's home is its worker's run directory, the
  same path for every run (`sandbox`), and resolving it in each run costs more than the rest of
  the seal."""
  return os.path.realpath(path) + os.sep


def _writable_places() -> tuple[str, ...]:
  """Where a run may write: its home and working directory, and the shared scratch folders."""
  cwd, home = os.getcwd(), os.path.expanduser("~")  # getcwd gives a real path
  places = [cwd + os.sep] if cwd != "/" else []
  if home and home != "/":
    places.append(_real_place(home))
  return (*places, *_SCRATCH_PLACES)


def read_only_path(path: list[str]) -> list[str]:
  """The import path entries the program can neither write to nor create."""
  places = _writable_places()
  root = os.getuid() == 0  # (root: the dropped-uid modes differ)
  return [
    entry
    for entry, real in _resolved(tuple(path))
    if entry
    and os.path.isabs(entry)
    and all(
      _out_of_reach(real, place)
      for place in places
      if real.startswith(place) or (entry + os.sep).startswith(place)
    )
    and os.path.isdir(entry)
    and (root or not os.access(entry, os.W_OK))
  ]


def _out_of_reach(real: str, place: str) -> bool:
  """Whether a folder below a scratch place the run may write is out of its reach all the same:
  on a read-only mount whose mount point, and every folder above it up to `place`, the run can
  neither write, rename nor remove (a venv under /tmp, which the sandbox shows again, read-only,
  in every run's fresh /tmp). A run's own home and working directory never qualify."""
  if place not in _SCRATCH_PLACES or not real.startswith(place):
    return False
  uid, parent = os.getuid(), place.rstrip(os.sep)
  for name in real[len(place) :].rstrip(os.sep).split(os.sep):
    folder = os.path.join(parent, name)
    try:
      info, above = os.lstat(folder), os.stat(parent)
      if os.path.ismount(folder):  # a mount point cannot be renamed or removed (EBUSY)
        return bool(os.statvfs(real).f_flag & os.ST_RDONLY)
      # Renaming it takes writing its parent, and in a sticky parent owning it too.
      renames = os.access(parent, os.W_OK) and not (
        above.st_mode & stat.S_ISVTX and info.st_uid != uid
      )
      if renames or info.st_uid == uid or os.access(folder, os.W_OK):
        return False
    except OSError:
      return False
    parent = folder
  return False


_DROPPED_FINDERS: list = []


def _seal() -> None:
  """This process, before the program's exists: non-dumpable, no writable import path, SIGINT
  fatal (the program could otherwise raise KeyboardInterrupt inside a test)."""
  if _prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
    raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")
  os.set_inheritable(_CHANNEL_FD, False)  # no program a test starts (os.system) holds it
  kept = read_only_path(sys.path)
  for entry in sys.path:  # the finders of the entries dropped, kept alive: freeing costs more
    if entry not in kept:
      _DROPPED_FINDERS.append(sys.path_importer_cache.pop(entry, None))
  sys.path[:] = kept
  _signal.signal(_signal.SIGINT, _signal.SIG_DFL)


def _import_quietly(names) -> None:
  for name in names:
    try:
      importlib.import_module(name)
    except BaseException:  # pylint: disable=broad-except
      pass


def seal(plan) -> None:
  """Before the program's process exists: what the tests import, loaded; this process sealed."""
  _import_quietly(plan.test_imports)
  _seal()


_STORES = frozenset({"STORE_NAME", "STORE_GLOBAL", "DELETE_NAME", "DELETE_GLOBAL"})
_SKIPPED = frozenset({"EXTENDED_ARG", "NOP", "CACHE"})
_GLOBAL_STORES = frozenset({dis.opmap["STORE_GLOBAL"], dis.opmap["DELETE_GLOBAL"]})


def _import_bindings(code: types.CodeType) -> dict[str, set]:
  """How the program's top-level code binds each global name: `("from", module, attribute)` for
  `from module import attribute [as name]`, `("module", imported, bound)` for `import a.b`
  (binds a) and `import a.b as c` (binds a.b), or None for anything else (an assignment, a def,
  a relative or starred import, a nested function's `global`). Read from the bytecode; a form it
  does not know is None."""
  bindings: dict[str, set] = {}
  ops = [i for i in dis.get_instructions(code) if i.opname not in _SKIPPED]
  for at, op in enumerate(ops):
    if op.opname not in _STORES:
      continue
    how = None
    head = ops[at - 3 : at] if at >= 3 else []
    if len(head) == 3 and head[-1].opname == "IMPORT_NAME" and head[0].argval == 0:
      module = head[-1].argval
      if head[1].argval is None:  # import a.b: binds a
        how = ("module", module, module.split(".")[0])
    elif ops[at - 1].opname == "IMPORT_FROM":
      start = at - 1
      while start > 0 and ops[start].opname in ("IMPORT_FROM", "SWAP", "POP_TOP", *_STORES):
        start -= 1  # back over `from m import a, b` (or `import a.b.c as d`) to its IMPORT_NAME
      head = ops[start - 2 : start + 1] if start >= 2 else []
      attribute = ops[at - 1].argval
      if len(head) == 3 and head[-1].opname == "IMPORT_NAME" and head[0].argval == 0:
        module = head[-1].argval
        if type(head[1].argval) is tuple:  # from m import a
          how = ("from", module, attribute)
        elif module.endswith("." + attribute) and not any(
          o.opname in _STORES for o in ops[start + 1 : at]
        ):
          how = ("module", module, module)  # import a.b as c, import a.b.c as d
    bindings.setdefault(op.argval, set()).add(how)
  stack = [c for c in code.co_consts if isinstance(c, types.CodeType)]
  while stack:  # functions and classes that assign a global
    nested = stack.pop()
    stack.extend(c for c in nested.co_consts if isinstance(c, types.CodeType))
    if not _GLOBAL_STORES.intersection(nested.co_code[::2]):  # most code: no need to decode it
      continue
    for op in dis.get_instructions(nested):
      if op.opname in ("STORE_GLOBAL", "DELETE_GLOBAL"):
        bindings.setdefault(op.argval, set()).add(None)
  return bindings


def _program_code(job: dict, plan) -> types.CodeType:
  return plan.program if plan.program is not None else compile(job["program"], "p", "exec")


def _text_bound(hows: set | None, name: str) -> Any:
  """The library object the program's text binds `name` to at its top level (`_import_bindings`
  of our own compile of it: never the program's word), imported here from the read-only import
  path; `_UNBOUND` where no one import binds it, or where the import names it otherwise than its
  library does (`from pickle import loads as decode`, `from unittest.mock import ANY as COLUMNS`:
  the tests would call a deserialiser, or compare with an object equal to anything, by a name the
  program chose). A module may take any name (`import numpy as np`)."""
  if not hows or len(hows) != 1:
    return _UNBOUND
  how = next(iter(hows))
  if how is None or how[1].startswith(split_program.PROGRAM_MODULE):
    return _UNBOUND
  try:
    module = importlib.import_module(how[1])
    if how[0] != "from":
      return sys.modules[how[2]]
    value = getattr(module, how[2], _UNBOUND)
    if value is _UNBOUND:
      value = importlib.import_module(f"{how[1]}.{how[2]}")
  except BaseException:  # pylint: disable=broad-except
    return _UNBOUND
  return value if how[2] == name or isinstance(value, types.ModuleType) else _UNBOUND


_UNBOUND = object()
# What a program's name never stands for as this process's own (`add_program_names`).
_FUNCTIONS = (
  types.FunctionType,
  types.BuiltinFunctionType,
  types.MethodType,
  types.MethodWrapperType,
  types.WrapperDescriptorType,
  types.MethodDescriptorType,
  types.ClassMethodDescriptorType,
  functools.partial,
)


@functools.lru_cache(maxsize=1)
def _code_names(code: types.CodeType | None) -> frozenset[str]:
  """The names the test code (nested code included) may look up."""
  names, stack = set(), [code] if code is not None else []
  while stack:
    current = stack.pop()
    names.update(current.co_names)
    stack.extend(c for c in current.co_consts if isinstance(c, types.CodeType))
  return frozenset(names)


def bind_library_names(job: dict, plan, space: dict) -> bool:
  """Whether the names the tests' top level takes from the program are all library names the
  program imports (`from django.conf import settings`); if so, binds each in `space` to this
  process's own, as the import gives it, so that the top level can run before the program's
  process exists: what it sets up in libraries (`settings.configure()`) is then there for the
  program too, as in one interpreter. Importing them is what naming them does anyway
  (`add_program_names`); nothing of the program runs here."""
  _BOUND.clear()
  try:
    bindings = _import_bindings(_program_code(job, plan))
  except BaseException:  # pylint: disable=broad-except
    return False
  found = {}
  for name in plan.tests_top_names:
    hows = bindings.get(name)
    value = _text_bound(hows, name)
    if value is _UNBOUND:
      return False
    found[name] = (value, next(iter(hows)))
  space.update({name: value for name, (value, _) in found.items()})
  _BOUND.clear()
  _BOUND.update(found)
  return True


# The library objects `bind_library_names` bound last, by name: (object, how the program imports
# it); and the set-up calls the tests' top level made into libraries (`run_top_level`), for the
# program's process to repeat before the program loads (`split_program.replay`).
_BOUND: dict[str, tuple[Any, tuple]] = {}
_REPLAY: list[tuple] = []


def run_top_level(job: dict, code: types.CodeType, space: dict) -> None:
  """Runs the tests' top level before the program's process exists (`bind_library_names` said it
  may), noting its set-up calls into libraries (`run_top_level` is where they are found:
  `_setup_code`) for the program's process to repeat before the program loads
  (`split_program.replay`): what they set up there (`settings.configure(DEBUG=True)`) is then
  there for the program too, as it was for a program forked from this process."""
  setup = _setup_code(job["tests"]["code"], code) if _discards_a_call(code) else None
  log: list[tuple] = []
  if setup is not None:
    code, roots = setup
    space[_SETUP_NAME] = _setup_call(roots, log)
  try:
    exec(code, space)  # pylint: disable=exec-used
  finally:
    space.pop(_SETUP_NAME, None)
    _BOUND.clear()
    _REPLAY[:] = log


_SETUP_NAME = "__precisecoder_setup__"


def _discards_a_call(code: types.CodeType) -> bool:
  """Whether the top level (not its functions or classes) calls something and drops the result:
  a quick look at its bytecode, before any parsing."""
  previous = None
  for op in dis.get_instructions(code):
    if op.opname == "POP_TOP" and previous == "CALL":
      return True
    previous = op.opname
  return False


def _setup_code(source: str, compiled: types.CodeType) -> tuple[types.CodeType, dict] | None:
  """The tests' code with each top-level set-up call (a statement that calls a library object
  reached from an imported name and drops the result: `settings.configure(...)`,
  `matplotlib.use('Agg')`; at the top level or in its `if`, `try` and `with` blocks, never in a
  function or class) made a call of `__precisecoder_setup__`, and how each root name is imported
  (`_import_bindings`'s form). None where there is none."""
  import ast  # pylint: disable=import-outside-toplevel

  try:
    tree = ast.parse(source, compiled.co_filename)
  except SyntaxError:
    return None
  roots = {name: how for name, (_, how) in _BOUND.items()}
  statements, top, found = list(tree.body), [], False
  while statements:  # the top level's statements, those in its if, try and with blocks too
    node = statements.pop(0)
    top.append(node)
    if isinstance(node, (ast.If, ast.Try, ast.With, ast.ExceptHandler)):
      for field in ("body", "orelse", "handlers", "finalbody"):
        statements.extend(getattr(node, field, []))
  for node in top:
    if isinstance(node, ast.Import):
      for alias in node.names:
        module = alias.name if alias.asname else alias.name.split(".")[0]
        roots[alias.asname or module] = ("module", module, module)
    elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
      for alias in node.names:
        roots[alias.asname or alias.name] = ("from", node.module, alias.name)
  for node in top:
    call = node.value if isinstance(node, ast.Expr) else None
    if not isinstance(call, ast.Call):
      continue
    chain = _dotted_chain(call.func)
    if chain is None or chain[0] not in roots:
      continue
    head = [ast.Name(chain[0], ast.Load()), ast.Constant(chain[0]), ast.Constant(tuple(chain[1:]))]
    call.func, call.args = ast.Name(_SETUP_NAME, ast.Load()), head + call.args
    found = True
  if not found:
    return None
  ast.fix_missing_locations(tree)
  code = compile(tree, compiled.co_filename, "exec", dont_inherit=True, optimize=0)
  return code, roots


def _dotted_chain(node) -> list[str] | None:
  parts = []
  while type(node).__name__ == "Attribute":
    parts.append(node.attr)
    node = node.value
  return [node.id, *reversed(parts)] if type(node).__name__ == "Name" else None


def _setup_call(roots: dict, log: list):
  """What a set-up call becomes: the call itself, noted (root's import, attribute names, its
  arguments) where its arguments are data alone."""

  def setup(root: Any, name: str, path: tuple, *args, **kwargs) -> None:
    target = root
    for attribute in path:
      target = getattr(target, attribute)
    target(*args, **kwargs)
    if _plain(args) and _plain(kwargs):
      log.append((roots[name], list(path), "call", args, kwargs))

  return setup


_PLAIN_ATOMS = (type(None), bool, int, float, complex, str, bytes)


def _plain(value: Any, depth: int = 0) -> bool:
  """Whether `value` is data alone: what a replayed call may carry to the program's process."""
  kind = type(value)
  if kind in _PLAIN_ATOMS:
    return True
  if depth > 8:
    return False
  if kind in (list, tuple, set, frozenset):
    return all(_plain(v, depth + 1) for v in value)
  if kind is dict:
    return all(_plain(k, depth + 1) and _plain(v, depth + 1) for k, v in value.items())
  return False


def start(job: dict, plan) -> bridge.Endpoint:
  """Starts the program's process and loads the program there; returns this side's endpoint (its
  `names`: the program's top-level names for the tests).

  The program's process is a fresh interpreter (`program_boot`), never a fork of this one: a fork
  would hold the compiled tests and every page this process read them into, and a program could
  run the tests itself against a spy to learn each expected value they compute. The child closes
  every fd but 0-2 and its end of the socket, then execs; this process stays non-dumpable
  (`_seal`), so the program's process cannot read it either."""
  ours, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM)
  keep = theirs.fileno()
  command, env = program_boot.command(keep), program_boot.environment(os.environ)
  pid = os.fork()
  if pid == 0:  # becomes the program's process: nothing of this image survives the exec
    try:
      os.closerange(3, keep)
      os.closerange(keep + 1, _MAX_FD)
      os.set_inheritable(keep, True)
      os.execve(command[0], command, env)
    finally:
      os._exit(1)  # pylint: disable=protected-access
  theirs.close()
  _PROGRAM_PID[:] = [pid]
  ours.sendall(boot_message(job, plan))
  patches = _Patches()
  state = _State(patches)
  end = bridge.Endpoint(ours, bridge.test_side_policy)
  end.before_request = state.outgoing
  end.on_state = state.incoming
  end.handlers.update(log=_log_record, warn=_warning)
  patches.install_logs()
  patches.install_warnings()
  loaded = end.request("load")
  end.resolving = False  # from here on, what the program hands over is data or a reference
  names, wanted = loaded if type(loaded) is tuple and len(loaded) == 2 else ({}, [])
  end.names = names if type(names) is dict else {}
  state.wanted = [name for name in wanted if type(name) is str] if type(wanted) is list else []
  end.state = state
  _share_pyplot(end)
  patches.install()
  return end


def boot_message(job: dict, plan) -> bytes:
  """What the program's process starts from (`program_boot.BOOT_FIELDS`): the program, this
  process's sealed import path, and the names of the library modules the tests import that
  loaded here. Nothing of the tests' code or data."""
  loaded = [name for name in plan.test_imports if name in sys.modules and not _harness_module(name)]
  return program_boot.encode(
    {
      "program": job.get("program"),
      "code": job.get("code"),
      "path": list(sys.path),
      "imports": loaded,
    }
  )


def _harness_module(name: str) -> bool:
  """unittest and its submodules: the tests' harness, whose import changes no other library (a
  program that uses it imports it): not loaded in every program's process, where it would be
  most of the start's cost."""
  return name == "unittest" or name.startswith("unittest.")


def namespace() -> dict:
  """The tests' namespace: a module of the program's name here (so that `patch(__name__ + '.f')`
  reaches the program's module)."""
  module = types.ModuleType(split_program.PROGRAM_MODULE)
  sys.modules[split_program.PROGRAM_MODULE] = module
  space = module.__dict__
  space["__builtins__"] = builtins
  return space


def add_program_names(end: bridge.Endpoint, space: dict, job: dict, plan) -> None:
  """The program's names as data, libraries or references, but those the tests bound (they ran
  after the program in one interpreter, so theirs win) and those of builtins: the program's
  process leaves those out, but that is the program's word, and a `sorted` or `len` of its own
  would answer the tests' checks (`sorted(result) == sorted(expected)`).

  A name is this process's own library module, class or object only where the program's text
  binds it so (`_text_bound`): what the program's process says a reference is (its module and
  qualified name, set by hand on a class of its own) is its word, and the tests would run the
  library's code here on what the program made (a claimed `pickle.Unpickler`, a claimed
  `unittest.mock.ANY`). Never a function, even imported under its own name: the name may be the
  entry point the tests call on what the program made (`from jsonpickle import decode`, for a
  task whose tests check `decode(encode(x))`), and a library's evaluator would then run here.
  A reference that claims nothing of a library stays one."""
  bindings = None
  for name, value in end.names.items():
    if not _program_name(name) or name in space:
      continue
    claim = end.claims.get(id(value)) if bridge.is_remote(value) else None
    if (
      claim is not None
      and not claim[2][0].startswith(split_program.PROGRAM_MODULE)
      # an object only if the tests name it: binding it imports its library here
      and (claim[1] != "object" or name in _code_names(plan.tests))
    ):
      if bindings is None:
        try:
          bindings = _import_bindings(_program_code(job, plan))
        except BaseException:  # pylint: disable=broad-except
          bindings = {}
      bound = _text_bound(bindings.get(name), name)
      if bound is not _UNBOUND and not isinstance(bound, _FUNCTIONS):
        value = bound
    space[name] = end.state.given[name] = value
  end.claims.clear()
  end.state.space = space
  _share_pyplot(end)


def _program_name(name: Any) -> bool:
  """Whether the tests' namespace may take `name` from the program: never a dunder, nor a
  builtin's name, as this process's builtins have it (the program's process may say otherwise:
  with `len` of its own there, the tests' `len(result)` would be the program's answer)."""
  return type(name) is str and not name.startswith("__") and not hasattr(builtins, name)


def run_unittest_classes(channel, space: dict, classes, describe) -> None:
  """Runs each TestCase class's tests here (setUp, test, tearDown by hand, as the harness does)."""
  for class_name in classes:
    case_class = space.get(class_name)
    if not (isinstance(case_class, type) and issubclass(case_class, unittest.TestCase)):
      channel.send({"test": class_name, "outcome": "error", "detail": "not a TestCase"}, True)
      continue
    try:
      case_class.setUpClass()
      class_error = None
    except BaseException as e:  # pylint: disable=broad-except
      class_error = describe(e)
    for method in sorted(
      name
      for name in dir(case_class)
      if name.startswith("test") and callable(getattr(case_class, name))
    ):
      name = f"{class_name}.{method}"
      if class_error is not None:
        channel.send({"test": name, "outcome": "error", "detail": class_error}, True)
        continue
      outcome, detail = _run_one(case_class, method, describe)
      channel.send({"test": name, "outcome": outcome, "detail": detail}, True)
    try:
      case_class.tearDownClass()
    except BaseException:  # pylint: disable=broad-except
      pass


def _run_one(case_class: type, method: str, describe) -> tuple[str, str]:
  try:
    test = case_class(method)
    test.setUp()
    try:
      getattr(test, method)()
    finally:
      test.tearDown()
      test.doCleanups()
    return "ok", ""
  except unittest.SkipTest as e:
    return "skip", str(e)[:200]
  except AssertionError as e:
    return "fail", describe(e)
  except MemoryError:
    return "error", "MemoryError"
  except BaseException as e:  # pylint: disable=broad-except
    return "error", describe(e)


_PROGRAM_PID: list[int] = []


def check_program(end: bridge.Endpoint) -> None:
  """Raises where the program's process ended before the tests did (a crash, `os._exit`, a
  broken channel), whatever the tests made of it: one interpreter would have died with it."""
  gone = end.closed
  if not gone and _PROGRAM_PID:
    try:
      gone = os.waitpid(_PROGRAM_PID[0], os.WNOHANG)[0] != 0
    except ChildProcessError:
      gone = True
  if gone:
    raise bridge.ChannelBroken("the program's process ended before the tests did")


def finish(end: bridge.Endpoint) -> None:
  end.close()
