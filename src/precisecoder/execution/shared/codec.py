"""Data across the split run's socket: a tagged JSON format of our own, the same both ways.

`Codec.encode(value)` turns data of exact, allowed types into bytes; anything else becomes a
reference (`make_ref`, supplied by the bridge). `Codec.decode(data)` rebuilds values with
constructors written here: every tag maps to one of them, every field's type is checked, and a
message past `MAX_BYTES` or nested past `MAX_DEPTH` is refused (`DecodeError`). The decoder
builds no class a program wrote and calls no program code; references it meets are handed to
`resolve_ref` (the bridge's proxies). Libraries (numpy, pandas) are used only when a message
holds their tags, and only if the receiving process has them loaded or can import them.
"""

from __future__ import annotations

import binascii
import builtins
import collections
import datetime
import decimal
import fractions
import functools
import json
import math
import re
import sys
from typing import Any, Callable

from precisecoder.execution.shared import protocol

MAX_BYTES = 64 << 20
MAX_DEPTH = 500
_type = type


def _refuse(value: Any) -> None:
  raise TypeError(f"a {type(value).__name__} is not JSON data")


class DecodeError(ValueError):
  """A message that is not data of the allowed form."""


class NotData(Exception):
  """Raised by `make_ref` callers that want data only."""


_BUILTIN_FACTORIES = {
  list: "list",
  int: "int",
  set: "set",
  dict: "dict",
  str: "str",
  float: "float",
  tuple: "tuple",
}
_FACTORIES_BY_NAME = {name: kind for kind, name in _BUILTIN_FACTORIES.items()}
# Subclasses of these (IntEnum, namedtuple) cross as the base value they hold, read by the base
# type's own C method: what the subclass overrides never runs here.
_BASES = (
  (bool, None),
  (int, int.__int__),
  (float, float.__float__),
  (str, str.__str__),
  (tuple, lambda value: tuple(tuple.__iter__(value))),
)
_EXTENSION_DTYPES = frozenset(
  {
    "Int8",
    "Int16",
    "Int32",
    "Int64",
    "UInt8",
    "UInt16",
    "UInt32",
    "UInt64",
    "Float32",
    "Float64",
    "boolean",
    "string",
    "str",
  }
)


# Bound now: the tests may patch base64 or json (`patch('base64.b64decode')`), and the program's
# process puts their patches in place; the codec must not call them.
_b2a, _a2b = binascii.b2a_base64, binascii.a2b_base64
# One C encoder, made here (JSONEncoder.encode builds one per call): a tree is fresh lists and
# dicts of our making, so it needs no check for cycles. Read with json's C scanner, and with
# json.loads where the scanner stops short (whitespace, or an error to name).
_dumps = protocol.compact_encoder(_refuse)
_scan = json.JSONDecoder().scan_once
_loads = json.JSONDecoder().decode


def _parse(text: str) -> Any:
  try:
    value, end = _scan(text, 0)
    if end == len(text):
      return value
  except StopIteration:
    pass
  return _loads(text)


def _b64(data: bytes) -> str:
  return _b2a(data, newline=False).decode("ascii")


def _unb64(text: str) -> bytes:
  try:
    return _a2b(text, strict_mode=True)
  except binascii.Error as e:
    raise DecodeError(f"base64: {e}") from None


class Codec:
  """One side's encoder and decoder. `make_ref(obj) -> dict` names a non-data object for the
  other side; `resolve_ref(tag, body) -> object` turns such a name back into an object."""

  def __init__(self, make_ref: Callable[[Any], dict], resolve_ref: Callable[[str, Any], Any]):
    self._make_ref = make_ref
    self._resolve_ref = resolve_ref
    self.records = True  # dataclass instances cross as `Record`s (the program's side)
    # The decoding side's count of its requests (`Record._rec_now`): where it moved, the other
    # side may have run and changed a record's object.
    self.epoch: Callable[[], int] | None = None

  # --- encoding -------------------------------------------------------------------------------

  def encode(self, value: Any) -> bytes:
    return _dumps(self.tree(value)).encode()

  def tree(self, value: Any, depth: int = 0) -> Any:  # pylint: disable=too-many-return-statements,too-many-branches
    """`value` as a JSON-ready tagged tree."""
    if depth > MAX_DEPTH:
      return self._make_ref(value)
    kind = _type(value)
    if value is None or kind is bool or kind is str:
      return value
    if kind is int:
      return value if abs(value) < 1 << 53 else {"I": str(value)}
    if kind is float:
      return value if math.isfinite(value) else {"F": repr(value)}
    d = depth + 1
    if kind is list:
      return {"l": list(value) if _scalars(value) else [self.tree(v, d) for v in value]}
    if kind is tuple:
      return {"t": list(value) if _scalars(value) else [self.tree(v, d) for v in value]}
    if kind is dict:
      return {"d": [[self.tree(k, d), self.tree(v, d)] for k, v in dict.items(value)]}
    if kind is set or kind is frozenset:
      return {"s" if kind is set else "fs": [self.tree(v, d) for v in value]}
    if kind is bytes or kind is bytearray:
      return {"b" if kind is bytes else "ba": _b64(bytes(value))}
    if kind is complex:
      return {"c": [repr(value.real), repr(value.imag)]}
    if kind is range:
      return {"rg": [value.start, value.stop, value.step]}
    if kind is slice:
      return {"sl": [self.tree(value.start, d), self.tree(value.stop, d), self.tree(value.step, d)]}
    if value is Ellipsis:
      return {"el": 0}
    if kind is decimal.Decimal:
      return {"m": decimal.Decimal.__str__(value)}
    if kind is fractions.Fraction:
      return {"q": [str(value.numerator), str(value.denominator)]}
    if kind in (datetime.datetime, datetime.date, datetime.time, datetime.timedelta):
      return self._time(value, kind)
    if kind is collections.OrderedDict or kind is collections.Counter:
      # an OrderedDict's own order (`move_to_end` leaves the dict underneath as it was)
      items = collections.OrderedDict.items if kind is collections.OrderedDict else dict.items
      return {
        "od" if kind is collections.OrderedDict else "ct": [
          [self.tree(k, d), self.tree(v, d)] for k, v in items(value)
        ]
      }
    if (
      kind is collections.defaultdict
      and _type(value.default_factory) is type
      and (value.default_factory in _BUILTIN_FACTORIES or value.default_factory is None)
    ):
      return {
        "dd": [
          _BUILTIN_FACTORIES.get(value.default_factory),
          [[self.tree(k, d), self.tree(v, d)] for k, v in dict.items(value)],
        ]
      }
    if kind is collections.deque:
      return {"dq": [[self.tree(v, d) for v in value], value.maxlen]}
    wrapped = _WRAPPERS.get(kind)
    if wrapped is not None and _type(value.data) is wrapped[0]:
      return {wrapped[1]: self.tree(value.data, d)}
    if kind is collections.ChainMap and _type(value.maps) is list:
      return {"cm": [self.tree(m, d) for m in value.maps]}
    view = _VIEWS.get(kind)
    if view is not None:
      return {view: [self.tree(v, d) for v in value]}
    if (
      issubclass(kind, BaseException)
      and kind.__module__ == "builtins"
      and (getattr(builtins, kind.__name__, None) is kind)
    ):
      return {"ex": [kind.__name__, self.tree(value.args, d)]}
    if (
      issubclass(kind, tuple)
      and _type(getattr(kind, "_fields", None)) is tuple
      and all(_type(f) is str for f in kind._fields)
    ):  # a namedtuple: its fields and items
      return {
        "ntu": [
          _text(kind.__name__),
          list(kind._fields),
          [self.tree(v, d) for v in tuple.__iter__(value)],
        ]
      }
    params = getattr(kind, "__dataclass_params__", None)
    if (
      params is not None
      and getattr(kind, "__dataclass_fields__", None) is not None
      and (not issubclass(kind, type))
      and self.records
    ):
      return self._record(value, kind, params, d)
    module = kind.__module__ if _type(kind.__module__) is str else ""
    if module.startswith("numpy"):
      tree = self._numpy(value, kind, d)
      if tree is not None:
        return tree
    if module.startswith("pandas"):
      tree = self._pandas(value, kind, d)
      if tree is not None:
        return tree
    for base, read in _BASES:
      if issubclass(kind, base) and read is not None:
        return self.tree(read(value), depth)
    return self._make_ref(value)

  def _record(self, value, kind, params, d):
    """An instance of a dataclass: its fields as data, with references to it and its class (the
    receiver compares records as dataclasses do: same class, equal compared fields)."""
    fields = [
      f
      for f in kind.__dataclass_fields__.values()
      if _type(f.name) is str
      and getattr(f, "_field_type", None) is not None
      and f._field_type.name == "_FIELD"
    ]  # pylint: disable=protected-access
    return {
      "rec": [
        self._make_ref(value),
        self._make_ref(kind),
        _text(kind.__name__),
        [[f.name, bool(f.compare), self.tree(getattr(value, f.name), d)] for f in fields],
        [bool(params.eq), bool(params.order), bool(params.frozen)],
      ]
    }

  def _time(self, value, kind):
    if kind is datetime.timedelta:
      return {"td": [value.days, value.seconds, value.microseconds]}
    if kind is datetime.date:
      return {"da": value.isoformat()}
    zone = value.tzinfo
    key = None
    if zone is not None and _type(zone) is not datetime.timezone:
      key = getattr(zone, "key", None) if _type(zone).__name__ == "ZoneInfo" else None
      if key is None:  # pytz and others: the fixed offset and name they give this moment
        offset = value.utcoffset() if kind is datetime.datetime else zone.utcoffset(None)
        value = value.replace(
          tzinfo=datetime.timezone(offset, value.tzname()) if offset is not None else None
        )
    if key is not None:
      value = value.replace(tzinfo=None)
    return {"dtm" if kind is datetime.datetime else "tm": [value.isoformat(), key, value.fold]}

  def _numpy(self, value, kind, d):
    numpy = sys.modules["numpy"]
    if kind is numpy.ma.MaskedArray:
      mask = numpy.ma.getmaskarray(value)
      if mask.any():  # masked items: a reference (`_build_numpy` says why)
        return None
      return {"ma": [self.tree(numpy.ma.getdata(value), d), self.tree(mask, d)]}
    if kind is numpy.ndarray:
      dtype = value.dtype
      if dtype.fields is None and dtype.kind in "biufcmM" and not dtype.hasobject:
        data = _b64(numpy.ascontiguousarray(value).tobytes())
        return {"nd": [dtype.str, list(value.shape), data]}
      if dtype.kind in "US":
        return {"nt": [dtype.str, list(value.shape), self.tree(value.tolist(), d)]}
      if dtype.kind == "O":
        return {"no": [list(value.shape), [self.tree(v, d) for v in value.ravel().tolist()]]}
      return None
    if isinstance(value, numpy.generic) and kind in _numpy_scalar_types(numpy):
      dtype = value.dtype
      if dtype.kind in "biufcmM":
        return {"ns": [dtype.str, _b64(value.tobytes())]}
      if dtype.kind in "US":
        return {"nst": [dtype.str, value.item()]}
    if kind is numpy.dtype or isinstance(value, numpy.dtype):
      if value.fields is None and value.kind in "biufcmMOUS":
        return {"dt": value.str}
    return None

  def _pandas(self, value, kind, d):  # pylint: disable=too-many-return-statements
    pandas = sys.modules["pandas"]
    if kind is pandas.DataFrame:
      columns = [self._values(value.iloc[:, i], d) for i in range(value.shape[1])]
      if any(c is None for c in columns):
        return None
      return {"df": [columns, self._index(value.columns, d), self._index(value.index, d)]}
    if kind is pandas.Series:
      values = self._values(value, d)
      if values is None:
        return None
      return {"sr": [values, self._index(value.index, d), self.tree(value.name, d)]}
    if isinstance(value, pandas.Index) and kind.__module__.startswith("pandas"):
      return self._index(value, d)
    if kind is pandas.Timestamp:
      return {"ts": [str(value.value), str(value.tz) if value.tz is not None else None, value.unit]}
    if kind is pandas.Timedelta:
      return {"pt": [str(value.value), value.unit]}
    if value is pandas.NaT:
      return {"nat": 0}
    if value is pandas.NA:
      return {"na": 0}
    if kind is pandas.Categorical:
      return {"cat": [self._index(value.categories, d), self.tree(value.codes, d), value.ordered]}
    return None

  def _values(self, series, d):
    """A Series' values by its dtype, or None where the dtype is not one we rebuild."""
    pandas = sys.modules["pandas"]
    dtype = series.dtype
    if isinstance(dtype, pandas.CategoricalDtype):
      return (
        self._pandas(series.array, pandas.Categorical, d)
        if _type(series.array) is pandas.Categorical
        else None
      )
    if isinstance(dtype, pandas.DatetimeTZDtype):
      return {"dtz": [self.tree(series.array.asi8, d), dtype.unit, str(dtype.tz)]}
    if str(dtype) in _EXTENSION_DTYPES:
      items = [None if pandas.isna(v) else v for v in series.array.tolist()]
      return {"ext": [str(dtype), self.tree(items, d)]}
    numpy = sys.modules["numpy"]
    if isinstance(dtype, numpy.dtype):
      return self.tree(series.to_numpy(copy=False), d)
    return None

  def _index(self, index, d):
    pandas = sys.modules["pandas"]
    kind = _type(index)
    name = self.tree(index.name, d)
    if kind is pandas.RangeIndex:
      return {"ri": [index.start, index.stop, index.step, name]}
    if kind is pandas.MultiIndex:
      return {
        "mi": [
          [self._index(level, d) for level in index.levels],
          [self.tree(codes, d) for codes in index.codes],
          [self.tree(n, d) for n in index.names],
        ]
      }
    values = (
      self._values(pandas.Series(index, copy=False), d)
      if kind is not pandas.Index or (index.dtype != object)
      else self.tree(index.to_numpy(), d)
    )
    if values is None:
      return self._make_ref(index)
    freq = getattr(index, "freqstr", None) if kind is pandas.DatetimeIndex else None
    return {"ix": [values, name, freq]}

  # --- decoding -------------------------------------------------------------------------------

  def decode(self, data: bytes) -> Any:
    if len(data) > MAX_BYTES:
      raise DecodeError("message too large")
    try:
      tree = _parse(data.decode())
    except (ValueError, RecursionError, UnicodeDecodeError) as e:
      raise DecodeError(f"not JSON: {e}") from None
    return self.build(tree)

  def build(self, tree: Any, depth: int = 0) -> Any:  # pylint: disable=too-many-return-statements,too-many-branches
    """A value from a tagged tree: only types this module lists are made."""
    if depth > MAX_DEPTH + 1:  # the encoder lends what lies deeper (a reference, one more level)
      raise DecodeError("nested too deeply")
    kind = _type(tree)
    if tree is None or kind in (bool, int, float, str):
      return tree
    if kind is not dict or len(tree) != 1:
      raise DecodeError("untagged container")
    ((tag, body),) = tree.items()
    d = depth + 1
    build = self.build
    if tag == "l":
      return list(body) if _scalars(_list(body)) else [build(v, d) for v in body]
    if tag == "t":
      return tuple(body) if _scalars(_list(body)) else tuple([build(v, d) for v in body])
    if tag in ("d", "od", "ct"):
      maker = {"d": dict, "od": collections.OrderedDict, "ct": collections.Counter}[tag]
      out = maker()
      for pair in _list(body):
        key, item = _pair(pair)
        out[_hashable(build(key, d))] = build(item, d)
      return out
    if tag == "dd":
      factory, pairs = _pair(body)
      if factory is not None and factory not in _FACTORIES_BY_NAME:
        raise DecodeError("defaultdict factory")
      out = collections.defaultdict(_FACTORIES_BY_NAME.get(factory))
      for pair in _list(pairs):
        key, item = _pair(pair)
        out[_hashable(build(key, d))] = build(item, d)
      return out
    if tag == "s":
      return {_hashable(build(v, d)) for v in _list(body)}
    if tag == "fs":
      return frozenset(_hashable(build(v, d)) for v in _list(body))
    if tag == "dq":
      items, maxlen = _pair(body)
      if maxlen is not None and _type(maxlen) is not int:
        raise DecodeError("deque maxlen")
      return collections.deque([build(v, d) for v in _list(items)], maxlen)
    if tag in _WRAPPED_TAGS:
      maker, base = _WRAPPED_TAGS[tag]
      data = build(body, d)
      if _type(data) is not base:
        raise DecodeError("wrapped data")
      out = maker.__new__(maker)
      out.data = data
      return out
    if tag == "cm":
      maps = [build(m, d) for m in _list(body)]
      if not all(_type(m) is dict for m in maps):
        raise DecodeError("chain map")
      return collections.ChainMap(*maps)
    if tag in ("ks", "is", "vs"):
      items = [build(v, d) for v in _list(body)]
      if tag == "ks":
        return dict.fromkeys(_hashable(v) for v in items).keys()
      if tag == "is":
        if not all(_type(v) is tuple and len(v) == 2 for v in items):
          raise DecodeError("dict items")
        return dict((_hashable(k), v) for k, v in items).items()
      return dict(enumerate(items)).values()
    if tag == "ex":
      name, args = _pair(body)
      cls = getattr(builtins, _str(name, 64), None)
      if not (isinstance(cls, type) and issubclass(cls, Exception)):
        raise DecodeError("exception class")
      args = build(args, d)
      if _type(args) is not tuple:
        raise DecodeError("exception args")
      error = cls.__new__(cls)
      error.args = args
      return error
    if tag == "ntu":
      name, fields, items = _list(body, 3)
      fields = tuple(_str(f, 100) for f in _list(fields))
      items = [build(v, d) for v in _list(items)]
      if len(items) != len(fields):
        raise DecodeError("namedtuple")
      return _named_tuple(_str(name, 100), fields)(*items)
    if tag == "rec":
      obj, cls, name, fields, flags = _list(body, 5)
      obj, cls = build(obj, d), build(cls, d)
      fields = [
        (_str(f, 100), c, build(v, d)) for f, c, v in (_list(item, 3) for item in _list(fields))
      ]
      if not all(_type(c) is bool for _, c, _ in fields) or not all(
        _type(b) is bool for b in _list(flags, 3)
      ):
        raise DecodeError("record")
      record = Record(obj, cls, _str(name, 100), fields, *flags)
      if self.epoch is not None:
        object.__setattr__(record, "_rec_seen", (self.epoch, self.epoch()))
      return record
    if tag == "I":
      return int(_str(body, 20000))
    if tag == "F":
      return float(_str(body, 10))
    if tag in ("b", "ba"):
      data = _unb64(_str(body, MAX_BYTES))
      return data if tag == "b" else bytearray(data)
    if tag == "c":
      real, imag = _pair(body)
      return complex(float(_str(real, 40)), float(_str(imag, 40)))
    if tag == "rg":
      return range(*_ints(body, 3))
    if tag == "sl":
      return slice(*(build(v, d) for v in _list(body, 3)))
    if tag == "el":
      return Ellipsis
    if tag == "m":
      try:
        return decimal.Decimal(_str(body, 10000))
      except decimal.InvalidOperation:
        raise DecodeError("not a decimal") from None
    if tag == "q":
      numerator, denominator = (int(_str(part, 20000)) for part in _pair(body))
      if not denominator:
        raise DecodeError("zero denominator")
      return fractions.Fraction(numerator, denominator)
    if tag == "td":
      return datetime.timedelta(*_ints(body, 3))
    if tag == "da":
      return datetime.date.fromisoformat(_str(body, 40))
    if tag in ("dtm", "tm"):
      return _clock(tag, body)
    if tag in _NUMPY_TAGS:
      return self._build_numpy(tag, body, d)
    if tag in _PANDAS_TAGS:
      return self._build_pandas(tag, body, d)
    if tag in ("r", "h", "mod", "cls"):
      return self._resolve_ref(tag, body)
    raise DecodeError(f"unknown tag {tag!r:.20}")

  def _build_numpy(self, tag, body, d):
    numpy = _library("numpy")
    if tag == "nd":
      dtype, shape, data = _list(body, 3)
      kind = _dtype(numpy, dtype, "biufcmM")
      shape = tuple(_ints(shape, len(_list(shape)))) if len(_list(shape)) <= 32 else None
      if shape is None or any(n < 0 for n in shape):
        raise DecodeError("array shape")
      raw = _unb64(_str(data, MAX_BYTES))
      if len(raw) != math.prod(shape) * kind.itemsize:
        raise DecodeError("array size")
      return numpy.frombuffer(raw, dtype=kind).reshape(shape).copy()
    if tag == "ma":
      data, mask = (self.build(part, d) for part in _pair(body))
      if (
        _type(data) is not numpy.ndarray
        or _type(mask) is not numpy.ndarray
        or (mask.shape != data.shape or mask.dtype != bool)
      ):
        raise DecodeError("masked array")
      if mask.any():  # numpy's checks hold for a masked item whatever it is compared with
        raise DecodeError("masked items")  # (`assert_array_equal(np.ma.masked_all(()), x)`)
      return numpy.ma.array(data, mask=mask)
    if tag == "nt":
      dtype, shape, items = _list(body, 3)
      array = numpy.array(self.build(items, d), dtype=_dtype(numpy, dtype, "US"))
      if list(array.shape) != _list(shape):
        raise DecodeError("array shape")
      return array
    if tag == "no":
      shape, items = _list(body, 2)
      values = [self.build(v, d) for v in _list(items)]
      shape = tuple(_ints(shape, len(_list(shape))))
      if math.prod(shape) != len(values):
        raise DecodeError("array size")
      array = numpy.empty(len(values), dtype=object)
      for i, v in enumerate(values):
        array[i] = v
      return array.reshape(shape)
    if tag == "ns":
      dtype, data = _list(body, 2)
      kind = _dtype(numpy, dtype, "biufcmM")
      raw = _unb64(_str(data, 64))
      if len(raw) != kind.itemsize:
        raise DecodeError("scalar size")
      return numpy.frombuffer(raw, dtype=kind)[0]
    if tag == "nst":
      dtype, item = _list(body, 2)
      return numpy.array(item, dtype=_dtype(numpy, dtype, "US"))[()]
    return _dtype(numpy, body, "biufcmMOUS")  # "dt"

  def _build_pandas(self, tag, body, d):  # pylint: disable=too-many-return-statements
    pandas = _library("pandas")
    if tag == "df":
      columns, names, index = _list(body, 3)
      names, index = self._build_index(names, d), self._build_index(index, d)
      arrays = [self._build_values(c, d) for c in _list(columns)]
      if len(arrays) != len(names) or any(len(a) != len(index) for a in arrays):
        raise DecodeError("frame shape")
      frame = (
        pandas.DataFrame(dict(enumerate(arrays)), index=index)
        if arrays
        else (pandas.DataFrame(index=index))
      )
      frame.columns = names
      return frame
    if tag == "sr":
      values, index, name = _list(body, 3)
      values, index = self._build_values(values, d), self._build_index(index, d)
      if len(values) != len(index):
        raise DecodeError("series length")
      return pandas.Series(values, index=index, name=_hashable(self.build(name, d)), copy=False)
    if tag in ("ri", "mi", "ix"):
      return self._build_index({tag: body}, d)
    if tag == "ts":
      value, tz, unit = _list(body, 3)
      stamp = pandas.Timestamp(int(_str(value, 30)), tz="UTC" if tz is not None else None)
      stamp = stamp.tz_convert(_zone(tz)) if tz is not None else stamp
      return stamp.as_unit(_str(unit, 4))
    if tag == "pt":
      value, unit = _list(body, 2)
      return pandas.Timedelta(int(_str(value, 30))).as_unit(_str(unit, 4))
    if tag == "nat":
      return pandas.NaT
    if tag == "na":
      return pandas.NA
    return self._build_values({tag: body}, d)  # "cat", "dtz", "ext"

  def _build_values(self, tree, d):
    """A column's values: an array, a Categorical or a pandas extension array."""
    pandas = sys.modules.get("pandas")
    tag = next(iter(tree)) if _type(tree) is dict and len(tree) == 1 else None
    if tag == "cat":
      categories, codes, ordered = _list(tree[tag], 3)
      codes = self.build(codes, d)
      if (
        _type(ordered) is not bool
        or getattr(codes, "dtype", None) is None
        or (codes.dtype.kind != "i")
      ):
        raise DecodeError("categorical")
      return pandas.Categorical.from_codes(
        codes, categories=self._build_index(categories, d), ordered=ordered
      )
    if tag == "dtz":
      stamps, unit, tz = _list(tree[tag], 3)
      stamps = self.build(stamps, d)
      if getattr(stamps, "dtype", None) is None or stamps.dtype.kind != "i":
        raise DecodeError("datetimes")
      naive = pandas.DatetimeIndex(stamps.astype(f"M8[{_str(unit, 4)}]"))
      return naive.tz_localize("UTC").tz_convert(_zone(tz)).array
    if tag == "ext":
      dtype, items = _list(tree[tag], 2)
      if dtype not in _EXTENSION_DTYPES:
        raise DecodeError("extension dtype")
      return pandas.array(self.build(items, d), dtype=dtype)
    values = self.build(tree, d)
    numpy = sys.modules.get("numpy")
    if numpy is None or _type(values) is not numpy.ndarray or values.ndim != 1:
      raise DecodeError("column values")
    return values

  def _build_index(self, tree, d):
    pandas = _library("pandas")
    if _type(tree) is not dict or len(tree) != 1:
      raise DecodeError("index")
    ((tag, body),) = tree.items()
    if tag == "ri":
      start, stop, step, name = _list(body, 4)
      return pandas.RangeIndex(*_ints([start, stop, step], 3), name=_hashable(self.build(name, d)))
    if tag == "mi":
      levels, codes, names = _list(body, 3)
      return pandas.MultiIndex(
        levels=[self._build_index(level, d) for level in _list(levels)],
        codes=[self.build(c, d) for c in _list(codes)],
        names=[_hashable(self.build(n, d)) for n in _list(names)],
      )
    if tag == "ix":
      values, name, freq = _list(body, 3)
      values = self._build_values(values, d)
      name = _hashable(self.build(name, d))
      if freq is not None:
        return pandas.DatetimeIndex(values, name=name, freq=_str(freq, 32))
      return pandas.Index(values, name=name, copy=False)
    value = self.build(tree, d)
    if isinstance(value, pandas.Index):
      return value
    raise DecodeError("index")


_WRAPPERS = {
  collections.UserDict: (dict, "ud"),
  collections.UserList: (list, "ul"),
  collections.UserString: (str, "us"),
}
_WRAPPED_TAGS = {tag: (kind, base) for kind, (base, tag) in _WRAPPERS.items()}
_VIEWS = {_type({}.keys()): "ks", _type({}.items()): "is", _type({}.values()): "vs"}


@functools.lru_cache(maxsize=256)
def _named_tuple(name: str, fields: tuple[str, ...]) -> type:
  """A namedtuple class of collections' making, by the name and fields the sender gave: it
  compares, hashes and orders as the tuple it is."""
  try:
    return collections.namedtuple(name, fields)
  except ValueError:  # not identifiers: a plain tuple subclass would do no better
    return collections.namedtuple("Record", [f"f{i}" for i in range(len(fields))])


def _text(value) -> str:
  return value if _type(value) is str else "tuple"


_NUMPY_TAGS = frozenset({"ma", "nd", "nt", "no", "ns", "nst", "dt"})
_PANDAS_TAGS = frozenset(
  {"df", "sr", "ri", "mi", "ix", "ts", "pt", "nat", "na", "cat", "dtz", "ext"}
)


def _library(name: str):
  module = sys.modules.get(name)
  if module is None:
    try:
      module = __import__(name)
    except ImportError:
      raise DecodeError(f"{name} is not available") from None
  return module


def _numpy_scalar_types(numpy) -> frozenset:
  return frozenset(
    t
    for t in numpy.sctypeDict.values()
    if t not in (numpy.object_, numpy.void) and issubclass(t, numpy.generic)
  )


def _dtype(numpy, text, kinds: str):
  kind = numpy.dtype(_str(text, 24))
  if kind.kind not in kinds or kind.fields is not None:
    raise DecodeError(f"dtype {text!r:.24}")
  return kind


def _clock(tag, body):
  text, key, fold = _list(body, 3)
  maker = datetime.datetime if tag == "dtm" else datetime.time
  value = maker.fromisoformat(_str(text, 64))
  if fold not in (0, 1):
    raise DecodeError("fold")
  if key is not None:
    import zoneinfo  # pylint: disable=import-outside-toplevel

    value = value.replace(tzinfo=zoneinfo.ZoneInfo(_zone(key)))
  return value.replace(fold=fold)


_ZONE = re.compile(r"[A-Za-z0-9_+\-:]+(/[A-Za-z0-9_+\-:]+)*")


def _zone(body) -> str:
  """A time zone's name (`Europe/Paris`, `UTC`), never a path: pandas hands `dateutil/` names to
  dateutil, which opens an absolute path it is given (`dateutil//dev/stdin`)."""
  text = _str(body, 64)
  if not _ZONE.fullmatch(text) or text.startswith("dateutil"):
    raise DecodeError(f"time zone {text!r:.70}")
  return text


_SCALAR_TYPES = frozenset({int, str, bool, float, _type(None)})
_FAST = 8  # shorter sequences go item by item: the checks below would cost more than they save
_LIMIT = 1 << 53


def _scalars(items) -> bool:
  """Whether a long list or tuple holds only values that are their own tree (and their own
  build): str, bool, None, ints under 2**53 and finite floats, checked at C speed (a generator's
  state, a column of numbers)."""
  if len(items) < _FAST:
    return False
  kinds = set(map(_type, items))
  if not kinds <= _SCALAR_TYPES:
    return False
  if int in kinds:
    ints = [v for v in items if _type(v) is int] if len(kinds) > 1 else items
    if max(ints) >= _LIMIT or min(ints) <= -_LIMIT:
      return False
  if float in kinds:
    floats = [v for v in items if _type(v) is float] if len(kinds) > 1 else items
    if not all(map(math.isfinite, floats)):
      return False
  return True


def _list(body, length: int | None = None) -> list:
  if _type(body) is not list or (length is not None and len(body) != length):
    raise DecodeError("malformed body")
  return body


def _pair(body) -> list:
  return _list(body, 2)


def _str(body, limit: int) -> str:
  if _type(body) is not str or len(body) > limit:
    raise DecodeError("malformed text")
  return body


def _ints(body, length: int) -> list[int]:
  items = _list(body, length)
  if any(_type(v) is not int for v in items):
    raise DecodeError("malformed integers")
  return items


def _hashable(value):
  try:
    hash(value)
  except TypeError:
    raise DecodeError("unhashable key") from None
  return value


class Record:
  """A dataclass instance of the other process, as this side sees it: its fields as data, its
  other attributes (methods) through a reference to it. It compares as the dataclass's own
  generated methods do, here, on the fields' data: equal to a record of the same class (the same
  reference) whose compared fields are equal; ordered likewise where the class orders."""

  __slots__ = ("_rec_obj", "_rec_cls", "_rec_name", "_rec_fields", "_rec_flags", "_rec_seen")

  def __init__(self, obj, cls, name: str, fields: list, eq: bool, order: bool, frozen: bool):
    setter = object.__setattr__
    setter(self, "_rec_obj", obj)
    setter(self, "_rec_cls", cls)
    setter(self, "_rec_name", name)
    setter(self, "_rec_fields", {f: (c, v) for f, c, v in fields})
    setter(self, "_rec_flags", (eq, order, frozen))
    setter(self, "_rec_seen", (None, 0))  # (`Codec.epoch`, its value when the fields were read)

  def _rec_now(self) -> dict:
    """The fields, read again from the program's object where the program may have run since
    they were (`acc.deposit(5)` then `acc.balance`); a frozen record's never change."""
    fields = object.__getattribute__(self, "_rec_fields")
    epoch, seen = object.__getattribute__(self, "_rec_seen")
    if epoch is None or epoch() == seen or object.__getattribute__(self, "_rec_flags")[2]:
      return fields
    obj = object.__getattribute__(self, "_rec_obj")
    for name, (compared, _) in list(fields.items()):
      fields[name] = (compared, getattr(obj, name))
    object.__setattr__(self, "_rec_seen", (epoch, epoch()))
    return fields

  def _rec_key(self) -> tuple:
    return tuple(v for c, v in self._rec_now().values() if c)

  def _rec_peer(self, other) -> bool:
    return _type(other) is Record and (
      object.__getattribute__(other, "_rec_cls") is object.__getattribute__(self, "_rec_cls")
    )

  def __getattr__(self, name: str):
    fields = self._rec_now()
    if name in fields:
      return fields[name][1]
    if name.startswith("__") and name.endswith("__"):
      raise AttributeError(name)
    return getattr(object.__getattribute__(self, "_rec_obj"), name)

  def __setattr__(self, name: str, value) -> None:
    fields = object.__getattribute__(self, "_rec_fields")
    if object.__getattribute__(self, "_rec_flags")[2]:
      raise AttributeError(f"cannot assign to field {name!r}")
    if name in fields:
      fields[name] = (fields[name][0], value)
    setattr(object.__getattribute__(self, "_rec_obj"), name, value)

  def __eq__(self, other):
    if not object.__getattribute__(self, "_rec_flags")[0]:
      return self is other
    if not self._rec_peer(other):
      return NotImplemented
    return self._rec_key() == other._rec_key()

  def __ne__(self, other):
    equal = self.__eq__(other)
    return equal if equal is NotImplemented else not equal

  def _rec_order(self, other, compare):
    if not object.__getattribute__(self, "_rec_flags")[1] or not self._rec_peer(other):
      return NotImplemented
    return compare(self._rec_key(), other._rec_key())

  def __lt__(self, other):
    return self._rec_order(other, lambda a, b: a < b)

  def __le__(self, other):
    return self._rec_order(other, lambda a, b: a <= b)

  def __gt__(self, other):
    return self._rec_order(other, lambda a, b: a > b)

  def __ge__(self, other):
    return self._rec_order(other, lambda a, b: a >= b)

  def __hash__(self):
    eq, _, frozen = object.__getattribute__(self, "_rec_flags")
    if eq and not frozen:
      raise TypeError(f"unhashable type: {object.__getattribute__(self, '_rec_name')!r}")
    return hash(self._rec_key()) if eq else object.__hash__(self)

  # What the program's class defines, asked of its object, as of any reference (`bridge.Remote`):
  # a dataclass with `__len__` or `__str__` of its own answers them there.
  def __len__(self) -> int:
    return len(object.__getattribute__(self, "_rec_obj"))

  def __iter__(self):
    return iter(object.__getattribute__(self, "_rec_obj"))

  def __bool__(self) -> bool:
    return bool(object.__getattribute__(self, "_rec_obj"))

  def __str__(self) -> str:
    return str(object.__getattribute__(self, "_rec_obj"))

  def __repr__(self) -> str:
    fields = self._rec_now()
    inside = ", ".join(f"{name}={value!r}" for name, (_, value) in fields.items())
    return f"{object.__getattribute__(self, '_rec_name')}({inside})"
