"""The split run's codec and bridge: data round trips, hostile byte streams build nothing, and a
reference never forwards a comparison (execution/shared/codec.py, execution/shared/bridge.py)."""

from __future__ import annotations

import collections
import datetime
import decimal
import fractions
import json
import socket
import struct
import threading
import unittest.mock
import zoneinfo

import pytest

from precisecoder.execution.shared import bridge
from precisecoder.execution.shared import codec as codec_lib


def _refuse(obj):
  raise TypeError(f"not data: {type(obj).__name__}")


def _no_refs(tag, body):
  raise codec_lib.DecodeError("no references here")


CODEC = codec_lib.Codec(_refuse, _no_refs)
Point = collections.namedtuple("Point", "x y")

VALUES = [
  None,
  True,
  False,
  0,
  -7,
  10**40,
  1.5,
  float("inf"),
  -0.0,
  "text \ud800",
  b"\x00\xff",
  bytearray(b"ab"),
  2 + 3j,
  [1, [2, (3, {4})]],
  (),
  {"a": 1, 2: [3]},
  frozenset({1, "x"}),
  range(1, 9, 2),
  slice(1, None, 2),
  Ellipsis,
  decimal.Decimal("1.10"),
  fractions.Fraction(-3, 7),
  datetime.date(2020, 2, 29),
  datetime.timedelta(1, 2, 3),
  datetime.datetime(2020, 1, 1, 12, tzinfo=zoneinfo.ZoneInfo("Europe/Paris")),
  datetime.datetime(2020, 1, 1, tzinfo=datetime.timezone(datetime.timedelta(hours=-3))),
  datetime.time(10, 30),
  collections.OrderedDict(b=1, a=2),
  collections.Counter("abca"),
  collections.defaultdict(list, k=[1]),
  collections.deque([1, 2], 3),
  collections.UserDict(a=1),
  collections.UserList([1]),
  collections.UserString("s"),
  collections.ChainMap({"a": 1}, {"a": 2, "b": 3}),
  Point(1, 2),
  ValueError("bad", 3),
  {}.keys(),
  {"k": 1}.items(),
]


@pytest.mark.parametrize("value", VALUES, ids=lambda v: type(v).__name__)
def test_standard_library_data_round_trips_exactly_typed(value):
  back = CODEC.decode(CODEC.encode(value))
  assert type(back).__name__ == type(value).__name__
  if isinstance(value, BaseException):
    assert type(back) is type(value) and back.args == value.args
  elif type(value) in (type({}.keys()), type({}.items())):
    assert back == value
  else:
    assert back == value or (value != value and back != back)
    assert repr(back) == repr(value) or isinstance(value, (Point, collections.ChainMap))


def test_an_ordered_dict_keeps_its_own_order():
  moved = collections.OrderedDict(a=1, b=2, c=3)
  moved.move_to_end("a")  # the dict underneath keeps a, b, c
  assert list(CODEC.decode(CODEC.encode(moved)).items()) == [("b", 2), ("c", 3), ("a", 1)]


def test_numpy_and_pandas_round_trip_as_their_own_types():
  np = pytest.importorskip("numpy")
  pd = pytest.importorskip("pandas")
  frame = pd.DataFrame(
    {
      "a": [1, 2],
      "b": ["x", None],
      "c": pd.Categorical(["u", "v"]),
      "t": pd.date_range("2021-01-01", periods=2, tz="UTC"),
    },
    index=pd.Index(["p", "q"], name="k"),
  )
  pd.testing.assert_frame_equal(CODEC.decode(CODEC.encode(frame)), frame)
  series = pd.Series([1.5, None], name="s", index=pd.date_range("2020", periods=2, freq="D"))
  pd.testing.assert_series_equal(CODEC.decode(CODEC.encode(series)), series)
  multi = pd.MultiIndex.from_tuples([(1, "a"), (2, "b")], names=["n", "m"])
  pd.testing.assert_index_equal(CODEC.decode(CODEC.encode(multi)), multi)
  for array in (
    np.arange(6, dtype=np.int16).reshape(2, 3),
    np.array(["a", "bc"]),
    np.array([1, "x", None], dtype=object),
    np.ma.array([1, 2], mask=[0, 0]),
  ):
    back = CODEC.decode(CODEC.encode(array))
    assert type(back) is type(array) and back.dtype == array.dtype
    assert back.tolist() == array.tolist()
  for scalar in (np.float32(1.5), np.int64(-3), np.bool_(True), np.datetime64("2020-01-01")):
    back = CODEC.decode(CODEC.encode(scalar))
    assert type(back) is type(scalar) and back == scalar
  for stamp in (pd.Timestamp("2020-01-01 10:00", tz="US/Eastern"), pd.Timedelta("1 day")):
    assert CODEC.decode(CODEC.encode(stamp)) == stamp
  assert CODEC.decode(CODEC.encode(pd.NaT)) is pd.NaT


def test_what_is_not_data_goes_to_make_ref():
  made = []
  codec = codec_lib.Codec(
    lambda obj: made.append(obj) or {"r": [1, "object", ["m", "C"]]},
    lambda tag, body: ("ref", body),
  )

  class Mine:
    pass

  mine, function = Mine(), lambda: 0
  assert codec.decode(codec.encode([mine, function])) == [("ref", [1, "object", ["m", "C"]])] * 2
  assert made == [mine, function]


def test_a_masked_item_is_not_data():
  np = pytest.importorskip("numpy")
  made = []
  codec = codec_lib.Codec(lambda obj: made.append(obj) or {"r": [1, "object", ["m", "C"]]}, None)
  masked = np.ma.masked_all(())  # numpy's checks: equal to any array (assert_array_equal)
  codec.encode([masked, np.ma.array([1, 2], mask=[0, 1])])
  assert len(made) == 2 and made[0] is masked


HOSTILE_TREES = [
  {"zz": 1},  # unknown tag
  {"l": [1], "t": [2]},  # two tags
  [1, 2],  # an untagged container
  {"ex": ["SystemExit", {"t": []}]},  # only Exception subclasses of builtins
  {"ex": ["eval", {"t": []}]},
  {"dd": ["os.system", []]},  # only builtin factories
  {"nd": ["|O", [1], "AAAAAAAAAAA="]},  # object arrays only item by item
  {"nd": ["<i8", [2], "AAAAAAAAAAA="]},  # 8 bytes for 2 items
  {"nd": ["<i8", [-1], ""]},
  {"nd": ["V8", [1], "AAAAAAAAAAA="]},
  {"b": "not base64!"},
  {"q": ["1", "0"]},
  {"m": "1e99999999999999999999999"},
  {"I": "9" * 30000},  # an int too long to parse cheaply
  {"s": [{"l": []}]},  # an unhashable member
  {"r": [1, "object", ["m", "C"]]},  # a reference where none may be
  {"ntu": ["P", ["x"], [1, 2]]},
  {"dq": [[], "x"]},
  {"cm": [{"l": []}]},
  {"ud": {"l": []}},
  # Type confusion: a field of the wrong type where a constructor would take it.
  {"rg": [0, "10", 1]},
  {"td": [1, 2.5, 0]},
  {"c": [1.0, 2.0]},
  {"rec": [None, None, "P", [["x", "yes", 1]], [True, False, False]]},
  {"rec": [None, None, "P", [], [True, False]]},
  {"dd": [{"l": []}, []]},
  {"ex": [["ValueError"], {"t": []}]},
  {"ntu": ["P", "xy", [1, 2]]},
  {"ts": [1, None, "ns"]},
  {"df": [[{"l": [1]}], {"ri": [0, 1, 1, None]}, {"ri": [0, 2, 1, None]}]},
  {"sr": [{"l": [1, 2]}, {"ri": [0, 1, 1, None]}, None]},
  {"mi": [[], [], "names"]},
  # Time zones by name only: pandas hands "dateutil/..." to dateutil, which opens a path.
  {"ts": ["1", "dateutil//dev/null", "ns"]},
  {"ts": ["1", "dateutil//proc/self/fd/0", "ns"]},
  {"dtm": ["2020-01-01T00:00:00", "../../../../etc/hostname", 0]},
  {"dtm": ["2020-01-01T00:00:00", "/etc/localtime", 0]},
  {"dtz": [{"nd": ["<i8", [1], "AQAAAAAAAAA="]}, "ns", "dateutil//dev/null"]},
  # a masked item: numpy's checks hold for it whatever it is compared with
  {"ma": [{"nd": ["<f8", [], "AAAAAAAAAAA="]}, {"nd": ["|b1", [], "AQ=="]}]},
]


@pytest.mark.parametrize("tree", HOSTILE_TREES, ids=lambda t: json.dumps(t)[:30])
def test_hostile_trees_are_refused(tree):
  with pytest.raises((codec_lib.DecodeError, ValueError, TypeError)):
    CODEC.decode(json.dumps(tree).encode())


def test_bombs_are_refused():
  deep = '{"l":[' * 600 + "1" + "]}" * 600
  with pytest.raises(codec_lib.DecodeError):
    CODEC.decode(deep.encode())
  with pytest.raises(codec_lib.DecodeError):
    CODEC.decode(b"\xff\xfe not json")
  with pytest.raises(codec_lib.DecodeError):
    CODEC.decode(b" " * (codec_lib.MAX_BYTES + 1))


def test_a_namedtuple_with_hostile_field_names_is_a_plain_record():
  value = CODEC.decode(json.dumps({"ntu": ["x; import os", ["__class__", "a b"], [1, 2]]}).encode())
  assert value == (1, 2) and isinstance(value, tuple)
  assert type(value)._fields == ("f0", "f1")  # collections' own check refused the names


# --- the bridge -----------------------------------------------------------------------------------


class _Program:
  """A program's side over a socketpair, served in a thread: `get(name)` hands out its objects."""

  def __init__(self, objects: dict):
    ours, theirs = socket.socketpair()
    self.end = bridge.Endpoint(theirs, bridge.program_policy)
    self.end.handlers["get"] = objects.__getitem__
    self.thread = threading.Thread(target=self.end.serve_until_closed, daemon=True)
    self.thread.start()
    self.tests = bridge.Endpoint(ours, bridge.test_side_policy)
    self.tests.resolving = False
    self.sock = ours

  def get(self, name: str):
    return self.tests.request("get", None, name)

  def close(self):
    self.tests.close()
    self.thread.join(5)


class AlwaysEqual:
  seen = []

  def __eq__(self, other):
    AlwaysEqual.seen.append(other)
    return True

  __hash__ = object.__hash__

  def __add__(self, other):
    AlwaysEqual.seen.append(other)
    return 0

  def __contains__(self, item):
    AlwaysEqual.seen.append(item)
    return True

  def __iter__(self):
    return iter([1, 2])

  def __len__(self):
    return 2

  def label(self, suffix):
    return f"label{suffix}"


def test_a_reference_never_hands_the_program_what_it_is_compared_with():
  program = _Program(
    {
      "eq": AlwaysEqual(),
      "double": lambda xs: xs.extend(xs) or None,
      "same": lambda xs: xs.append(1) or xs,
      "boom": lambda: int("x"),
    }
  )
  try:
    eq = program.get("eq")
    assert bridge.is_remote(eq)
    assert program.get("eq") is eq  # one reference per object
    expected = [12345]
    assert not eq == expected and eq != expected and eq is not expected
    with pytest.raises(TypeError):
      _ = eq + expected
    with pytest.raises(TypeError):
      _ = expected < eq
    assert 2 in eq and 12345 not in eq  # compared here, item by item
    assert len(eq) == 2 and bool(eq) and eq.label("!") == "label!"
    assert AlwaysEqual.seen == []  # nothing of the tests' reached the program's object
    data = [1, 2]
    assert program.get("double")(data) is None and data == [1, 2, 1, 2]  # copied back
    assert program.get("same")(data) is data and data[-1] == 1  # the argument, itself
    with pytest.raises(ValueError):
      program.get("boom")()
  finally:
    program.close()


def test_the_program_may_call_a_mock_but_not_erase_what_it_recorded():
  mock = unittest.mock.MagicMock()
  mock.value = 3
  policy = bridge.test_side_policy
  assert policy(mock, "call", None) and policy(mock, "getattr", "json")
  assert policy(mock, "getattr", "value")
  for name in (
    "reset_mock",
    "configure_mock",
    "assert_not_called",
    "call_args",
    "return_value",
    "side_effect",
    "called",
    "mock_calls",
    "_mock_children",
  ):
    assert not policy(mock, "getattr", name), name
  assert not policy(mock, "setattr", "return_value")
  assert not policy(mock, "objset", "called")  # object.__setattr__ is the tests' only

  class Node:
    def walk(self):
      return self

  assert policy(Node(), "setattr", "next") and not policy(Node(), "setattr", "walk")
  assert not policy(Node(), "setattr", "_private")
  assert not policy(Node(), "objset", "next")


def test_the_test_process_lends_no_module_library_function_or_builtin():
  import os  # pylint: disable=import-outside-toplevel

  def helper():
    return 1

  helper.__module__ = bridge._TESTS_MODULE  # pylint: disable=protected-access
  assert not bridge.test_side_lendable(os) and not bridge.test_side_lendable(os.write)
  assert not bridge.test_side_lendable(json.loads) and not bridge.test_side_lendable(dict)
  assert not bridge.test_side_lendable(open) and not bridge.test_side_lendable([].append)
  assert bridge.test_side_lendable(helper) and bridge.test_side_lendable(unittest.mock.Mock())


def test_a_flood_or_a_forged_frame_breaks_only_the_call():
  ours, theirs = socket.socketpair()
  tests = bridge.Endpoint(ours, bridge.test_side_policy)
  theirs.sendall(struct.pack("!I", codec_lib.MAX_BYTES + 1))
  with pytest.raises(bridge.ChannelBroken):
    tests.request("get", None, "x")
  ours2, theirs2 = socket.socketpair()
  tests = bridge.Endpoint(ours2, bridge.test_side_policy)
  forged = json.dumps({"t": ["a", {"h": 77}, None]}).encode()  # a reference it never lent
  theirs2.sendall(struct.pack("!I", len(forged)) + forged)
  with pytest.raises(bridge.ChannelBroken):
    tests.request("get", None, "x")
  for sock in (ours, theirs, ours2, theirs2):
    sock.close()
