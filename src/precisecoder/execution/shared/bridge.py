"""The split run's two ends: messages over a socket, objects lent by reference, and `Remote`.

Each process holds an `Endpoint`. A value crosses as data (`codec`) when it is data, else the
sender lends it: it keeps the object in its table and sends an id; the receiver gets a `Remote`.
A Remote's calls, attribute reads, `len`, `iter`, `[]`, `bool`, `str` are requests to the lender;
its comparison, hashing and arithmetic are the Remote's own (identity; TypeError), so a lender
never receives what its object is compared with. While an endpoint waits for its answer it
serves the other's requests (a mock the program calls, a callback), so calls nest both ways.

What a lender lets the other side do with its objects is its `policy`: the test process lends
mocks and callbacks to the program under `test_side_policy` (calls, public attributes, protocol
methods; never a Mock's own API, so the program cannot erase what a mock recorded).
"""

from __future__ import annotations

import builtins
import collections
import contextvars
import struct
import sys
import types
from typing import Any, Callable

from precisecoder.execution.shared import codec as codec_lib

_HEADER = struct.Struct("!I")
_RECURSION = 20_000  # the recursion limit while a message is encoded or decoded
_type = type
_object_setattr = object.__setattr__
_object_getattribute = object.__getattribute__


_KINDS = ("module", "class", "function", "object", "attr", "error")  # what a reference names
_FROM_OTHER_SIDE = "_pc_raised_there"  # marks an error the other process raised (`Remote.__exit__`)


class ChannelBroken(BaseException):
  """The other process is gone or broke the protocol: the call that waited for it fails. Not an
  Exception: where the program's process dies (a crash, `os._exit`) one interpreter would have
  died, and a test's `assertRaises(Exception)` or `except Exception` must not take it for an
  error the program raised (`split_tests.check_program` fails the run)."""


class RemoteError(Exception):
  """An exception the other side raised, of a class this side does not share."""


def program_policy(obj: Any, op: str, name: str | None) -> bool:  # pylint: disable=unused-argument
  """The program process lends its objects for any use: they are its own."""
  return True


_MOCK_API: frozenset[str] = frozenset()


def test_side_lendable(obj: Any) -> bool:
  """What the test process lends the program: objects the tests made (mocks, their instances,
  callbacks, the classes and functions they define), never a module, a library's class or
  function, or a builtin: through those the program would run library code of its choosing here
  (`os.write` to the pool's channel)."""
  kind = _type(obj)
  if issubclass(
    kind,
    (
      types.ModuleType,
      types.BuiltinFunctionType,
      types.BuiltinMethodType,
      types.MethodWrapperType,
      types.WrapperDescriptorType,
      types.MethodDescriptorType,
      types.ClassMethodDescriptorType,
      types.GetSetDescriptorType,
      types.MemberDescriptorType,
    ),
  ):
    return False
  if issubclass(kind, type) or issubclass(kind, (types.FunctionType, types.MethodType)):
    function = getattr(obj, "__func__", obj)
    return getattr(function, "__module__", None) == _TESTS_MODULE
  return True


_TESTS_MODULE = "__precisecoder_program__"  # the tests' namespace module (split_tests.namespace)


def _test_case_class() -> type:
  """unittest's TestCase, where unittest is loaded (always in the test process, whose policy asks
  for it). Not imported here: the program's process loads this module at its start, and
  importing unittest there would be most of its start's cost."""
  return getattr(sys.modules.get("unittest"), "TestCase", types.ModuleType)


def test_side_policy(obj: Any, op: str, name: str | None) -> bool:
  """What the program may do with an object the test process lent it (a mock, a callback)."""
  if op == "getattr":
    if name is None or name.startswith("_"):
      return False
    mock = sys.modules.get("unittest.mock")
    if mock is not None and isinstance(obj, mock.NonCallableMock):
      global _MOCK_API  # pylint: disable=global-statement
      if not _MOCK_API:
        _MOCK_API = frozenset(
          name
          for cls in (mock.NonCallableMock, mock.CallableMixin, mock.MagicMixin)
          for name in dir(cls)
        )
      return name not in _MOCK_API
    return True
  if op == "setattr":  # in-place work on the tests' own plain objects (linked-list nodes)
    kind = type(obj)
    return (
      name is not None
      and not name.startswith("_")
      and not issubclass(kind, type)
      and not isinstance(obj, (types.ModuleType, _test_case_class()))
      and kind.__module__ not in ("unittest.mock", "builtins")
      and not callable(getattr(kind, name, None))
    )
  return op in (
    "call",
    "getitem",
    "len",
    "iter",
    "next",
    "bool",
    "str",
    "repr",
    "enter",
    "exit",
    "contains",
    "float",
    "int",
    "operator",
  )


class Endpoint:
  """One end of the socket: lends objects, makes requests, serves the other end's."""

  def __init__(
    self,
    sock,
    policy: Callable[[Any, str, str | None], bool],
    resolve_name: Callable[[str, Any], Any] | None = None,
  ):
    self._sock = sock
    self._policy = policy
    self._lent: dict[int, Any] = {}
    self._ids: dict[int, int] = {}  # id(obj) -> lent id: one id per object while lent
    self._resolve_name = resolve_name
    self._remotes: dict[int, Remote] = {}
    self.codec = codec_lib.Codec(self._make_ref, self._resolve_ref)
    self.before_request: Callable[[], Any] | None = None  # state to send with each request
    self.on_state: Callable[[Any], None] | None = None  # state that came back
    self.on_request_state: Callable[[Any], None] | None = None  # state sent with a request
    self.reply_state: Callable[[], Any] | None = None  # state to send back with each reply
    # Requests served by a function of this side, not on a lent object: the program process's
    # "load" (run the program) and "provide" (the tests' names the program refers to).
    self.handlers: dict[str, Callable[..., Any]] = {}
    self.resolving = True  # whether references by name become this side's own modules, classes
    # A side without `resolve_name` (the test process) resolves no name while decoding: it keeps
    # the names its references claim while `resolving` (id of the reference -> (reference, kind,
    # [module, qualname])), and judges them against the program's text (`split_tests`).
    self.claims: dict[int, tuple] = {}
    self.requests = 0  # how many this side has made (`split_tests._Pyplot`)
    self.pyplot: Any = None  # the tests' pyplot, once this process's (`split_tests._Pyplot`)
    self.closed = False
    # The test process's references to the program's objects, whose `__dict__` holds what the
    # tests wrote with `object.__setattr__` (it bypasses `Remote.__setattr__`): sent before the
    # next request (`_send_buffered`); their dicts apart, for a quick `any` before each request.
    self._buffered: list[Remote] = []
    self._buffers: list[dict] = []
    # The test process's `with` blocks on the program's objects, innermost last, each with the
    # library context variables it set here (`_set_context`), to be reset when it ends.
    self.contexts: list[tuple[Remote, list]] = []
    # The test process: lists, dicts and sets read from its plain objects (not a mock's) go to
    # the program by reference, so that it can change them in place.
    self._lend_containers = policy is test_side_policy
    # What this side lends; the rest it names only (reference 0: the other side may resolve the
    # name to its own module or class, and can do nothing else with it).
    self.lendable: Callable[[Any], bool] = (
      test_side_lendable if policy is test_side_policy else lambda obj: True
    )
    # Arithmetic on references: only the program's side forwards it (`Remote._pc_operator`).
    self.forward_operators = policy is program_policy
    self.codec.records = policy is program_policy
    if policy is test_side_policy:
      self.codec.epoch = lambda: self.requests

  # --- references ------------------------------------------------------------------------------

  def lend(self, obj: Any) -> int:
    key = id(obj)
    ref = self._ids.get(key)
    if ref is None:
      ref = len(self._lent) + 1
      self._lent[ref] = obj
      self._ids[key] = ref
    return ref

  def _make_ref(self, obj: Any) -> dict:
    if _type(obj) is ByName:  # a library module's attribute (django.conf.settings), by its name
      return {"r": [self.lend(obj.value), "attr", [obj.module, obj.attribute]]}
    if _type(obj) is ByReference:
      obj = obj.value
    elif _type(obj) is codec_lib.Record:  # a record of the other side: its object, home
      obj = _object_getattribute(obj, "_rec_obj")
    if issubclass(_type(obj), Remote) and _object_getattribute(obj, "_pc_end") is self:
      return {"h": _object_getattribute(obj, "_pc_id")}
    kind = _type(obj)
    if kind is types.ModuleType:
      what = "module"
      name = [obj.__name__, ""]
    elif issubclass(kind, type) and issubclass(obj, BaseException) and self.codec.records:
      # the program's exception class, with its classes' names: the test process makes a class
      # of its own for it (`_stand_in`), so that `assertRaises(BadInput)` catches it
      name = [_text(getattr(obj, "__module__", "")), _text(getattr(obj, "__qualname__", ""))]
      return {"r": [self.lend(obj), "error", name, _class_names(obj)]}
    else:
      what = "class" if issubclass(kind, type) else "object"
      if what == "object" and not self._lendable(obj) and callable(obj):
        what = "function"  # a library's function, by name: the other side uses its own
      named = obj if what != "object" else kind
      name = [_text(getattr(named, "__module__", "")), _text(getattr(named, "__qualname__", ""))]
      if what == "object" and self._lendable(kind):  # `type(head)(value)` makes one there
        return {"r": [self.lend(obj), what, name, self.lend(kind)]}
    return {"r": [self.lend(obj) if self._lendable(obj) else 0, what, name]}

  def _lendable(self, obj) -> bool:
    """`lendable`, or a method of an object this side lent (`node.neighbors.append`): reachable
    through it anyway."""
    if self.lendable(obj):
      return True
    owner = getattr(obj, "__self__", None) if callable(obj) else None
    return owner is not None and not isinstance(owner, types.ModuleType) and self._is_lent(owner)

  def _resolve_ref(self, tag: str, body: Any) -> Any:
    if tag == "h":  # our own object, back home
      if _type(body) is not int or body not in self._lent:
        raise codec_lib.DecodeError("unknown reference")
      return self._lent[body]
    if tag != "r" or _type(body) is not list or len(body) not in (3, 4):
      raise codec_lib.DecodeError("malformed reference")
    ref, what, name = body[:3]
    class_ref = body[3] if len(body) == 4 and _type(body[3]) is int else None
    if what == "error":  # the program's exception class: ours of its names, on the tests' side
      stand_in = None if self.forward_operators or len(body) != 4 else _stand_in(body[3])
      if stand_in is not None:
        return stand_in
      what = "class"
    if (
      _type(ref) is not int
      or ref < 0
      or what not in _KINDS
      or _type(name) is not list
      or len(name) != 2
      or not all(_type(n) is str for n in name)
    ):
      raise codec_lib.DecodeError("malformed reference")
    local = (
      self._resolve_name(what, name)
      if (self._resolve_name is not None and self.resolving)
      else None
    )
    if local is not None:
      return local
    remote = self._remotes.get(ref) if ref else None  # one per object: `is` holds as it does there
    if remote is None:
      kind, buffered, claimed = Remote, False, name
      if what == "attr":
        name = None
      elif what == "object":
        factory = self._remote(class_ref, "class", None) if class_ref is not None else None
        # the program's own classes' instances (a lazy settings object): not a library's
        buffered = not self.forward_operators and name[0].startswith(_TESTS_MODULE)
        kind = _remote_class(name[0], name[1], factory, buffered)
      remote = kind._pc_make(self, ref, name if what == "object" else None)  # pylint: disable=protected-access
      if self.resolving and self._resolve_name is None:
        self.claims[id(remote)] = (remote, what, claimed)
      if what == "class":  # its names, for `issubclass` (`Remote.__getattr__`)
        _object_setattr(remote, "_pc_name", name)
      if ref:
        self._remotes[ref] = remote
      if buffered:
        self._buffered.append(remote)
        self._buffers.append(_object_getattribute(remote, "__dict__"))
    return remote

  def _remote(self, ref: int, what: str, name) -> "Remote":
    remote = self._remotes.get(ref)
    if remote is None:
      remote = self._remotes[ref] = Remote._pc_make(self, ref, name)  # pylint: disable=protected-access
    return remote

  # --- messages --------------------------------------------------------------------------------

  def _send(self, message: tuple) -> None:
    self._write(self._encode(message))

  def _encode(self, message: tuple) -> bytes:
    limit = sys.getrecursionlimit()  # deep data (a chain of 300 tuples) is data too
    sys.setrecursionlimit(max(limit, _RECURSION))
    try:
      return self.codec.encode(message)
    finally:
      sys.setrecursionlimit(limit)

  def _write(self, data: bytes) -> None:
    try:
      self._sock.sendall(_HEADER.pack(len(data)) + data)
    except OSError as e:
      self.closed = True
      raise ChannelBroken(f"the other process is gone ({e})") from None

  def _receive(self) -> tuple:
    header = self._read(_HEADER.size)
    (size,) = _HEADER.unpack(header)
    if size > codec_lib.MAX_BYTES:
      self.closed = True
      raise ChannelBroken("message too large")
    data = self._read(size)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, _RECURSION))
    try:
      message = self.codec.decode(data)
    except (codec_lib.DecodeError, RecursionError, TypeError, ValueError, OverflowError) as e:
      raise ChannelBroken(f"malformed message: {e}"[:300]) from None
    finally:
      sys.setrecursionlimit(limit)
    if _type(message) is not tuple or not message or _type(message[0]) is not str:
      raise ChannelBroken("malformed message")
    return message

  def _read(self, size: int) -> bytes:
    chunks, left = [], size
    while left:
      try:
        chunk = self._sock.recv(min(left, 1 << 20))
      except OSError as e:
        chunk, _ = b"", e
      if not chunk:
        self.closed = True
        raise ChannelBroken("the other process is gone")
      chunks.append(chunk)
      left -= len(chunk)
    return b"".join(chunks)

  def request(self, op: str, target: Any = None, *fields: Any) -> Any:
    """Sends a request and serves the other end until its answer comes; returns the value or
    raises the error it reports."""
    if self.closed:
      raise ChannelBroken("the other process is gone")
    if any(self._buffers) and op != "objset":
      self._send_buffered()
    self.requests += 1
    state = self.before_request() if self.before_request is not None else None
    self._send(("q", op, target, state, *fields))
    while True:
      message = self._receive()
      if message[0] == "q":
        self._serve(message)
        continue
      if message[0] == "a" and len(message) == 3:
        if self.on_state is not None:
          self.on_state(message[2])
        return message[1]
      if message[0] == "e" and len(message) == 4:
        if self.on_state is not None:
          self.on_state(message[3])
        error = rebuild_error(message[1], message[2], stand_ins=not self.forward_operators)
        setattr(error, _FROM_OTHER_SIDE, True)
        raise error
      raise ChannelBroken("malformed answer")

  def _send_buffered(self) -> None:
    """What the tests wrote on the program's objects with `object.__setattr__` (a lazy object's
    own flag, set past its `__setattr__`), set there the same way."""
    for remote, written in zip(self._buffered, self._buffers):
      while written:
        name = next(iter(written))
        self.request("objset", remote, name, written.pop(name))

  def serve_until_closed(self) -> None:
    """The program process's loop: answers requests until the test process leaves."""
    while True:
      try:
        message = self._receive()
      except ChannelBroken:
        return
      if message[0] == "q":
        self._serve(message)
      elif message[0] == "bye":
        return

  def _serve(self, message: tuple) -> None:
    try:
      if len(message) < 4:
        raise ChannelBroken("malformed request")
      _, op, target, state, *fields = message
      if state is not None and self.on_request_state is not None:
        self.on_request_state(state)
      if op in self.handlers:
        value = self.handlers[op](*fields)
        self._answer(value)
        return
      if not self._is_lent(target):
        raise ChannelBroken("a request for an object this side did not lend")
      value = self._perform(op, target, fields)
    except BaseException as e:  # pylint: disable=broad-except
      if isinstance(e, ChannelBroken) and self.closed:
        raise
      self._send(("e", error_names(e), _error_args(e), self._reply_state()))
      return
    self._answer(value)

  def _answer(self, value) -> None:
    try:
      answer = self._encode(("a", value, self._reply_state()))
    except Exception as e:  # pylint: disable=broad-except
      self._send(("e", error_names(e), (f"the answer could not be sent: {e}"[:300],), None))
      return
    self._write(answer)

  def _is_lent(self, obj) -> bool:
    ref = self._ids.get(id(obj))
    return ref is not None and self._lent[ref] is obj

  def _reply_state(self):
    return self.reply_state() if self.reply_state is not None else None

  def _perform(self, op: str, target: Any, fields: list) -> Any:  # pylint: disable=too-many-return-statements
    name = fields[0] if fields and _type(fields[0]) is str else None
    if not self._policy(target, op, name):
      raise AttributeError(f"{op} {name or ''} is not allowed on this object")
    if op == "call":
      args, kwargs, mutable = fields
      before = self._trees(args, kwargs, mutable)
      result = target(*args, **kwargs)
      same = next((where for where in before if _argument(args, kwargs, where) is result), None)
      return (None if same is not None else result, self._changed(args, kwargs, before), same)
    if op == "getattr":
      value = getattr(target, name)
      if self._lend_containers and _type(value) in (list, dict, set) and not _is_mock(target):
        return ByReference(value)  # the program changes the tests' node's list in place
      return value
    if op == "setattr":
      setattr(target, name, fields[1])
      return None
    if op == "objset":  # object.__setattr__, as the tests called it (`_send_buffered`)
      _object_setattr(target, name, fields[1])
      return None
    if op == "delattr":
      delattr(target, name)
      return None
    if op == "getitem":
      return target[fields[0]]
    if op == "setitem":
      target[fields[0]] = fields[1]
      return None
    if op == "delitem":
      del target[fields[0]]
      return None
    if op == "contains":
      return fields[0] in target
    if op == "len":
      return len(target)
    if op == "iter":
      return iter(target)
    if op == "next":
      return next(target)
    if op == "bool":
      return bool(target)
    if op == "str":
      return str(target)
    if op == "repr":
      return repr(target)
    if op == "float":
      return float(target)
    if op == "int":
      return int(target)
    if op == "operator":
      method = getattr(_type(target), name, None) if name in _OPERATORS else None
      if method is None:
        raise TypeError(f"unsupported operand for {name}")
      return method(target, *fields[1:])
    if op == "signature":  # none where inspect has none: the caller falls back, as it would
      import inspect  # pylint: disable=import-outside-toplevel

      try:
        return inspect.signature(target)
      except (TypeError, ValueError):
        return None
    if op == "enter":
      if self._policy is not program_policy:
        return target.__enter__()
      before = contextvars.copy_context()
      value = target.__enter__()
      return value, _context_changes(before)
    if op == "exit":
      return target.__exit__(*fields)
    raise ValueError(f"unknown request {op!r:.20}")

  def _trees(self, args, kwargs, mutable) -> dict:
    """The encoded form of the mutable arguments, by position or keyword."""
    trees = {}
    for where in mutable if _type(mutable) is list else []:
      value = _argument(args, kwargs, where)
      try:
        trees[where] = self.codec.tree(value)
      except Exception:  # pylint: disable=broad-except
        pass
    return trees

  def _changed(self, args, kwargs, before: dict) -> dict:
    """The mutable arguments the call changed, to be copied back into the caller's originals:
    {position or keyword: new value}."""
    return {
      where: _argument(args, kwargs, where)
      for where, tree in before.items()
      if self._trees(args, kwargs, [where]).get(where) != tree
    }

  def close(self) -> None:
    if not self.closed:
      try:
        self._send(("bye",))
      except ChannelBroken:
        pass
    self.closed = True


def _text(value) -> str:
  return value if _type(value) is str else ""


def error_names(error: BaseException) -> list:
  """The error's classes, most derived first, by (module, qualified name)."""
  return [
    [_text(getattr(c, "__module__", "")), _text(getattr(c, "__qualname__", ""))]
    for c in _type(error).__mro__
  ]


def _error_args(error: BaseException) -> Any:
  args = error.args
  return (
    args if all(_type(a) in (str, int, float, bool, _type(None)) for a in args) else (str(error),)
  )


def rebuild_error(names: Any, args: Any, stand_ins: bool = False) -> BaseException:
  """An exception of this side's own class nearest to the other side's: a builtin or a loaded
  library's exception class, or (`stand_ins`: the test process) the class of ours standing for
  the program's own (`_stand_in`), made without running its __init__ (its args set as given).
  A program's `sys.exit()` is a SystemExit here too: `assertRaises(SystemExit)` holds on it,
  `assertRaises(Exception)` does not, as in one interpreter."""
  if _type(args) is not tuple:
    args = (str(args),)
  local = _stand_in(names) if stand_ins else None
  for cls in [local] if local is not None else _named_classes(names):
    if cls is None or not issubclass(cls, BaseException) or cls is BaseException:
      continue
    if cls in (SystemExit, KeyboardInterrupt, GeneratorExit):  # not an Exception here either
      return cls(*args)  # a builtin's own constructor: SystemExit's `code`
    try:
      error = cls.__new__(cls)
      error.args = args
      return error
    except Exception:  # pylint: disable=broad-except
      continue
  return RemoteError(*args)


def _named_classes(names: Any):
  for pair in names if _type(names) is list else []:
    if _type(pair) is list and len(pair) == 2:
      yield _named_class(*pair)


def _class_names(cls: type) -> list:
  """A class's classes, most derived first, by (module, qualified name)."""
  return [
    [_text(getattr(c, "__module__", "")), _text(getattr(c, "__qualname__", ""))]
    for c in cls.__mro__
  ]


# The test process's classes that stand for the program's exception classes, by their names.
_STAND_INS: dict[tuple[str, str], type] = {}
_MAX_STAND_INS = 1000


def _stand_in(names: Any) -> type | None:
  """The test process's exception class for the program's whose classes (most derived first)
  `names` gives: made here by our code (`type`) from names alone, deriving from the class of
  ours for the next of the program's classes named, else from the first loaded library's
  exception class named (an Exception, never SystemExit, KeyboardInterrupt, GeneratorExit), so
  that `assertRaises(BadInput)`, `except ValueError` and `isinstance` hold on what the program
  raises, as the program names it (as it names the class an object claims). None where the
  first class named is not the program's."""
  if _type(names) is not list or not names or len(names) > 64:
    return None
  pairs = [p for p in names if _type(p) is list and len(p) == 2 and all(_type(n) is str for n in p)]
  if (
    len(pairs) != len(names)
    or not pairs[0][0].startswith(_TESTS_MODULE)
    or max(len(pairs[0][0]), len(pairs[0][1])) > 200
  ):
    return None
  key = (pairs[0][0], pairs[0][1])
  made = _STAND_INS.get(key)
  if made is not None or len(_STAND_INS) >= _MAX_STAND_INS:
    return made
  base = Exception
  for at, (module, qualname) in enumerate(pairs[1:], 1):
    found = (
      _stand_in(pairs[at:]) if module.startswith(_TESTS_MODULE) else _named_class(module, qualname)
    )
    if isinstance(found, type) and issubclass(found, Exception):
      base = found
      break
  try:
    made = _type(key[1].rsplit(".", 1)[-1] or "Error", (base,), {"__qualname__": key[1]})
  except Exception:  # pylint: disable=broad-except
    made = _type("Error", (Exception,), {"__qualname__": key[1]})
  made.__module__ = key[0]
  _STAND_INS[key] = made
  return made


# Types of the interpreter that builtins does not name, that a reference may claim (`inspect.
# isgenerator`). Not functions or methods: inspect would then read their code.
_BUILTIN_TYPES = {
  t.__name__: t for t in (types.GeneratorType, types.CoroutineType, types.AsyncGeneratorType)
}


def _named_class(module: Any, qualname: Any) -> type | None:
  """A class of a module this process has loaded, by name; None if there is none."""
  if _type(module) is not str or _type(qualname) is not str:
    return None
  if module == "builtins" and qualname in _BUILTIN_TYPES:
    return _BUILTIN_TYPES[qualname]
  if module.startswith(_TESTS_MODULE):  # the program's: only an exception class stands in
    return _STAND_INS.get((module, qualname))
  holder = builtins if module == "builtins" else sys.modules.get(module)
  if holder is None:
    return None
  value = holder
  for part in qualname.split("."):
    if part == "<locals>":
      return None
    value = getattr(value, part, None)
  return value if isinstance(value, type) else None


_BINARY = (
  "add",
  "sub",
  "mul",
  "truediv",
  "floordiv",
  "mod",
  "pow",
  "matmul",
  "and",
  "or",
  "xor",
  "lshift",
  "rshift",
)
_OPERATORS = frozenset(
  [f"__{n}__" for n in _BINARY]
  + [f"__r{n}__" for n in _BINARY]
  + ["__neg__", "__pos__", "__abs__", "__invert__"]
)


class ByName:
  """A library module's attribute that is no module or class (django.conf.settings), sent with
  its name: the test process may take its own (`split_tests.add_program_names`)."""

  __slots__ = ("value", "module", "attribute")

  def __init__(self, value, module: str, attribute: str):
    self.value, self.module, self.attribute = value, module, attribute


class ByReference:
  """A value this side sends as a reference though it is data (`Endpoint._perform`)."""

  __slots__ = ("value",)

  def __init__(self, value):
    self.value = value


def _is_mock(obj) -> bool:
  mock = sys.modules.get("unittest.mock")
  return mock is not None and isinstance(obj, mock.NonCallableMock)


class Remote:
  """A reference to an object of the other process. See the module docstring."""

  __slots__ = ("_pc_end", "_pc_id", "_pc_class", "_pc_local", "_pc_name")
  _pc_factory = None  # a subclass's: a reference to the remote class, called by `type(ref)(...)`

  @classmethod
  def _pc_make(cls, end: Endpoint, ref: int, class_name: list | None) -> "Remote":
    self = object.__new__(cls)
    _object_setattr(self, "_pc_end", end)
    _object_setattr(self, "_pc_id", ref)
    _object_setattr(self, "_pc_class", class_name)
    _object_setattr(self, "_pc_local", None)
    _object_setattr(self, "_pc_name", None)
    return self

  def __new__(cls, *args, **kwargs):  # `type(ref)(...)`: an instance made by the remote class
    factory = cls._pc_factory
    if factory is None:
      raise TypeError("a reference is made by the bridge, not called")
    return factory(*args, **kwargs)

  def __init__(self, *args, **kwargs):  # made by `_pc_make` or, through `__new__`, remotely
    pass

  def _pc_ask(self, op: str, *fields):
    return _object_getattribute(self, "_pc_end").request(op, self, *fields)

  @property
  def __class__(self):  # isinstance(ref, plt.Axes): a loaded library's class, by name
    name = _object_getattribute(self, "_pc_class")
    cls = _named_class(*name) if name is not None else None
    return cls if cls is not None else Remote

  def __getattr__(self, name: str):
    if name.startswith("__") and name.endswith("__"):
      local = _object_getattribute(self, "_pc_local")
      if local is not None and name in local:
        return local[name]
      if name == "__bases__":
        return _bases(self._pc_ask("getattr", name))
      if name == "__signature__":  # inspect.signature: the program's, of its own object
        return self._pc_ask("signature")
      if name not in ("__name__", "__qualname__", "__doc__", "__module__"):
        raise AttributeError(name)
    return self._pc_ask("getattr", name)

  def __setattr__(self, name: str, value) -> None:
    if (
      name.startswith("__")
      and name.endswith("__")
      and (_object_getattribute(self, "_pc_end").forward_operators)
    ):
      # the program's side: metadata a library writes on what it wraps (pyplot sets a patched
      # show's __signature__) stays here
      local = _object_getattribute(self, "_pc_local")
      if local is None:
        local = {}
        _object_setattr(self, "_pc_local", local)
      local[name] = value
      return
    self._pc_ask("setattr", name, value)

  def __delattr__(self, name: str) -> None:
    self._pc_ask("delattr", name)

  def __call__(self, *args, **kwargs):
    end = _object_getattribute(self, "_pc_end")
    mutable = [where for where, value in [*enumerate(args), *kwargs.items()] if _mutable(value)]
    answer = end.request("call", self, args, kwargs, mutable)
    if _type(answer) is not tuple or len(answer) != 3 or _type(answer[1]) is not dict:
      raise ChannelBroken("malformed answer to a call")
    result, changed, same = answer
    for where, value in changed.items():
      _copy_into(_argument(args, kwargs, where), value)
    if same is not None:  # it returned an argument it was given (changed in place): the original
      return _argument(args, kwargs, same)
    return result

  def __getitem__(self, key):
    return self._pc_ask("getitem", key)

  def __setitem__(self, key, value) -> None:
    self._pc_ask("setitem", key, value)

  def __delitem__(self, key) -> None:
    self._pc_ask("delitem", key)

  def __len__(self) -> int:
    value = self._pc_ask("len")
    if _type(value) is not int:
      raise TypeError("len() of a remote object is not an int")
    return value

  def __iter__(self):
    return self._pc_ask("iter")

  def __next__(self):
    return self._pc_ask("next")

  def __contains__(self, item) -> bool:  # compared here, item by item: never sent
    return any(item is value or item == value for value in self)

  def __bool__(self) -> bool:
    value = self._pc_ask("bool")
    if _type(value) is not bool:
      raise TypeError("bool() of a remote object is not a bool")
    return value

  def __str__(self) -> str:
    value = self._pc_ask("str")
    return value if _type(value) is str else "<remote>"

  def __repr__(self) -> str:
    value = self._pc_ask("repr")
    return value if _type(value) is str else "<remote>"

  def __float__(self) -> float:
    value = self._pc_ask("float")
    if _type(value) is not float:
      raise TypeError("float() of a remote object is not a float")
    return value

  def __int__(self) -> int:
    value = self._pc_ask("int")
    if _type(value) is not int:
      raise TypeError("int() of a remote object is not an int")
    return value

  def __enter__(self):
    end = _object_getattribute(self, "_pc_end")
    answer = self._pc_ask("enter")
    if end.forward_operators:  # the program's side entering a test's object: a plain answer
      return answer
    if _type(answer) is not tuple or len(answer) != 2 or _type(answer[1]) is not list:
      raise ChannelBroken("malformed answer to a with")
    value, changes = answer
    end.contexts.append((self, _set_context(changes)))
    return value

  def __exit__(self, *exc_info):  # the exception stays here: it is not data
    end = _object_getattribute(self, "_pc_end")
    for at in range(len(end.contexts) - 1, -1, -1):
      if end.contexts[at][0] is self:
        for var, token in reversed(end.contexts.pop(at)[1]):
          var.reset(token)
        break
    suppress = self._pc_ask("exit", None, None, None)
    if end.forward_operators:  # the program's side
      return suppress
    # The tests' side: the program's object ends the block, but cannot decide that the tests'
    # own failure (a check that raised in the block) did not happen; an error the program raised
    # (through a request) is its to suppress.
    error = exc_info[1] if len(exc_info) > 1 else None
    return bool(suppress) and getattr(error, _FROM_OTHER_SIDE, False) is True

  def _pc_operator(self, name: str, *operands):
    """Arithmetic, forwarded only where the lender is the test process (a MagicMock the program
    squares); a test-side reference to the program's object has none: it would hand the program
    the value it is combined with."""
    end = _object_getattribute(self, "_pc_end")
    if not end.forward_operators:
      return NotImplemented
    return end.request("operator", self, name, *operands)

  __hash__ = object.__hash__

  def __eq__(self, other):  # identity: a comparison is never the other side's to decide
    return self is other

  def __ne__(self, other):
    return self is not other


class _Doc:
  """A remote object's `__doc__`: its own, asked for (a class's `__doc__` would hide it)."""

  def __get__(self, obj, owner=None):
    return None if obj is None else obj._pc_ask("getattr", "__doc__")  # pylint: disable=protected-access


def _bases(value) -> tuple:
  """A reference to a class's `__bases__`: the bases a loaded library names as its own classes,
  others as references, so that `issubclass(ref, http.server.BaseHTTPRequestHandler)` and
  `issubclass(ref, other_ref)` walk them (the program names the bases it claims, as it names the
  class an object claims for `isinstance`)."""
  if _type(value) is not tuple:
    raise TypeError("__bases__ of a remote class is not a tuple")
  bases = []
  for base in value:
    name = _object_getattribute(base, "_pc_name") if is_remote(base) else None
    local = _named_class(*name) if name is not None else None
    bases.append(local if local is not None else base)
  return tuple(bases)


_VAR_NAMES: dict[contextvars.ContextVar, tuple[str, str] | None] = {}


def _var_name(var: contextvars.ContextVar) -> tuple[str, str] | None:
  """The (module, attribute) under which a loaded library module holds `var`, if one does."""
  if var not in _VAR_NAMES:
    _VAR_NAMES[var] = next(
      (
        (module_name, attribute)
        for module_name, module in list(sys.modules.items())
        if _type(module_name) is str and not module_name.startswith(_TESTS_MODULE)
        for attribute, value in list(getattr(module, "__dict__", {}).items())
        if value is var and _type(attribute) is str
      ),
      None,
    )
  return _VAR_NAMES[var]


def _context_changes(before: contextvars.Context) -> list:
  """The program's side, after a `with` the tests entered on its object: the library context
  variables (Flask's request) its `__enter__` set, by name, with their values."""
  changes = []
  for var, value in contextvars.copy_context().items():
    if var not in before or before[var] is not value:
      name = _var_name(var)
      if name is not None:
        changes.append([name[0], name[1], value])
  return changes


def _set_context(changes: list) -> list:
  """The test process, entering a `with` on the program's object: sets its own library context
  variables of those names to what the program's `__enter__` set them to (data or references),
  as one interpreter's library would see them inside the block; returns their reset tokens."""
  tokens = []
  for change in changes:
    if _type(change) is not list or len(change) != 3:
      continue
    module, attribute, value = change
    holder = sys.modules.get(module) if _type(module) is str else None
    if holder is None or module.startswith(_TESTS_MODULE) or _type(attribute) is not str:
      continue
    var = getattr(holder, "__dict__", {}).get(attribute)
    if _type(var) is contextvars.ContextVar:
      tokens.append((var, var.set(value)))
  return tokens


_REMOTE_CLASSES: dict[tuple[str, str, int], type] = {}
# Made in the worker (`spare_classes`) for the classes most runs meet (the program's functions):
# a run's first object of such a class takes it instead of making one, which costs a run more than
# loading a small program (a new class writes pages all over the heap, each copied after the fork).
_SPARE_CLASSES: dict[tuple[str, str], type] = {}


def _remote_class(
  module: str, qualname: str, factory: "Remote | None", buffered: bool = False
) -> type:
  """A subclass of Remote of ours that bears the names of the remote object's class, so that
  `str(type(ax))` reads as it would there, and whose call makes an instance there (`factory`, a
  reference to that class); `buffered`: with a `__dict__` that holds what `object.__setattr__`
  writes until it is sent (`Endpoint._send_buffered`). It adds nothing else."""
  key = (module, qualname, id(factory), buffered)
  kind = _REMOTE_CLASSES.get(key)
  if kind is None:
    kind = _SPARE_CLASSES.pop((module, qualname), None) if not buffered else None
    if kind is None:
      kind = _new_remote_class(module, qualname, buffered)
    kind._pc_factory = factory  # pylint: disable=protected-access
    _REMOTE_CLASSES[key] = kind
  return kind


def _new_remote_class(module: str, qualname: str, buffered: bool = False) -> type:
  name = qualname.rsplit(".", 1)[-1] or "Remote"
  return _type(
    name,
    (Remote,),
    {
      "__slots__": ("__dict__",) if buffered else (),
      "__module__": module,
      "__qualname__": qualname or name,
      "_pc_factory": None,
      "__doc__": _Doc(),
    },
  )


def spare_classes(names=(("builtins", "function"), ("builtins", "method"))) -> None:
  """In the worker, before it forks runs: one unused class for each of `names`, and none of the
  classes made so far (the rehearsal's)."""
  _REMOTE_CLASSES.clear()
  _SPARE_CLASSES.clear()
  for module, qualname in names:
    _SPARE_CLASSES[module, qualname] = _new_remote_class(module, qualname)


def is_remote(value) -> bool:
  return issubclass(_type(value), Remote)


def _forwarding(name: str):
  def method(self, *operands):
    return self._pc_operator(name, *operands)  # pylint: disable=protected-access

  method.__name__ = name
  return method


for _operator in _OPERATORS:
  setattr(Remote, _operator, _forwarding(_operator))


def _argument(args, kwargs, where):
  if _type(where) is int:
    return args[where] if 0 <= where < len(args) else None
  return kwargs.get(where) if _type(kwargs) is dict else None


_DICTS = (dict, collections.OrderedDict, collections.Counter, collections.defaultdict)


def _mutable(value) -> bool:
  kind = _type(value)
  if kind in _DICTS or kind in (list, set, bytearray, collections.deque):
    return True
  module = getattr(kind, "__module__", "")
  return _type(module) is str and (
    (module.startswith("numpy") and kind.__name__ == "ndarray")
    or (module.startswith("pandas") and kind.__name__ in ("DataFrame", "Series"))
  )


def _copy_into(original, value) -> None:
  """Copies what the program made of a mutable argument back into the caller's original."""
  kind = _type(original)
  if kind is not _type(value):
    return
  if kind is list or kind is bytearray:
    original[:] = value
  elif kind in _DICTS:
    original.clear()
    if kind is collections.Counter:
      dict.update(original, value)  # Counter's own `update` adds counts
    else:
      original.update(value)  # an OrderedDict's keeps its order
  elif kind is set:
    original.clear()
    original.update(value)
  elif kind is collections.deque:
    original.clear()
    original.extend(value)
  elif kind.__name__ == "ndarray":
    if original.shape == value.shape:
      original[...] = value
  else:  # a DataFrame or Series: pandas' own in-place replacement
    original._update_inplace(value)  # pylint: disable=protected-access
