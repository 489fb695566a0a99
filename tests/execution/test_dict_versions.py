"""Which dicts changed, read from CPython's dict version tags (PEP 509)."""

import pytest

from precisecoder.execution.dict_versions import TAGS, DictVersions, own_dict

needs_tags = pytest.mark.skipif(not TAGS, reason="needs dict version tags (CPython 3.11-3.13)")


@needs_tags
def test_any_write_moves_the_tag_and_reads_do_not():
  for write in (
    lambda d: d.__setitem__("a", 2),
    lambda d: d.__setitem__("new", 0),
    lambda d: d.pop("a"),
  ):
    scratch = {"a": 1}
    versions = DictVersions([scratch, {}])
    assert not versions.changed()
    _ = scratch["a"], list(scratch.items()), "a" in scratch
    assert not versions.changed()
    write(scratch)
    assert versions.changed()


@needs_tags
def test_a_class_dict_is_the_one_setattr_on_the_class_writes():
  class Scratch:
    value = 1

  namespace = own_dict(Scratch)
  assert type(namespace) is dict and namespace["value"] == 1
  versions = DictVersions([namespace])
  Scratch.value = 2
  assert versions.changed()


def test_available_answers_for_this_interpreter():
  assert DictVersions.available() is TAGS
