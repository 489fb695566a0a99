"""Whether dicts changed, read from CPython's per-dict version tags (PEP 509).

Integrity (`integrity.py`) and the guard (`guard.py`) ask after every call the tests make into
the program whether any of hundreds of library dicts moved; the tags answer without reading a
single value.
"""

from __future__ import annotations

import ctypes
import gc as _gc
import sys

from precisecoder.execution.provenance import own_members

_type = type


class DictVersions:
  """Whether dicts changed, read from CPython's per-dict version tag (PEP 509).

  CPython gives a dict a new tag on every insertion, replacement and deletion.
  Comparing tags answers "did anything change?" without fetching a single
  value: in a forked child, fetching a value writes its reference count and so
  copies its page, and the hundreds of values in builtins and sys cost about a
  millisecond per run that way. `available()` checks on a scratch dict that
  this interpreter behaves so (3.11 to 3.13 do; 3.14 dropped the tag); where
  it does not, callers compare the values themselves.
  """

  # PyDictObject: PyObject_HEAD (refcount, type), ma_used, then ma_version_tag.
  _OFFSET = 2 * ctypes.sizeof(ctypes.c_ssize_t) + ctypes.sizeof(ctypes.c_void_p)

  def __init__(self, dicts: list[dict]):
    self._tags = [self.view(d) for d in dicts]
    self._saved = [tag.value for tag in self._tags]

  @classmethod
  def view(cls, d: dict) -> ctypes.c_uint64:
    """`d`'s version tag, read live through `.value`."""
    return ctypes.c_uint64.from_address(id(d) + cls._OFFSET)

  def changed(self) -> bool:
    return [tag.value for tag in self._tags] != self._saved

  @classmethod
  def available(cls) -> bool:
    if sys.implementation.name != "cpython" or not (3, 11) <= sys.version_info[:2] <= (3, 13):
      return False
    scratch = {"key": 0}
    versions = cls([scratch])
    unchanged = not versions.changed()
    scratch["key"] = 1
    replaced = versions.changed()
    versions = cls([scratch])
    del scratch["key"]
    return unchanged and replaced and versions.changed()


TAGS = DictVersions.available()  # whether this interpreter has them


def own_dict(cls: type) -> dict:
  """The dict behind a class's read-only `__dict__` proxy (what setattr on the class changes)."""
  return next(r for r in _gc.get_referents(own_members(cls)) if _type(r) is dict)
