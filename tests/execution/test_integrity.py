"""Integrity: which writes to the library read as tampering, and which imports come first."""

import ast
import sys
import time
import types

import pytest

from precisecoder.execution import integrity as integrity_lib
from precisecoder.execution.guard import DictVersions


@pytest.fixture
def scratch_module():
  """A module registered in sys.modules for one test, so that patching it harms nothing."""
  module = types.ModuleType("precisecoder_scratch")
  module.compare = lambda a, b: a == b
  module.lazy = None
  module.PI = 3.14159
  sys.modules[module.__name__] = module
  yield module
  del sys.modules[module.__name__]


def test_an_untouched_run_has_no_violations(scratch_module):
  assert integrity_lib.Integrity().violations() == []


@pytest.mark.parametrize("tamper, named", [
    (lambda m: setattr(m, "compare", lambda a, b: True), "precisecoder_scratch.compare"),
    (lambda m: delattr(m, "compare"), "precisecoder_scratch.compare"),
    (lambda m: setattr(m, "PI", 3.0), "precisecoder_scratch.PI"),
])
def test_a_rebound_or_removed_name_is_named(scratch_module, tamper, named):
  integrity = integrity_lib.Integrity()
  tamper(scratch_module)
  assert integrity.violations() == [named]


@pytest.mark.skipif(not DictVersions.available(), reason="needs dict version tags (CPython <= 3.13)")
def test_a_patch_put_back_is_seen(scratch_module):
  integrity = integrity_lib.Integrity()
  real = scratch_module.compare
  scratch_module.compare = lambda a, b: True
  scratch_module.compare = real
  assert integrity.violations() == ["precisecoder_scratch (patched, then put back)"]


def test_lazy_globals_and_new_names_are_allowed(scratch_module):
  integrity = integrity_lib.Integrity()
  scratch_module.lazy = object()  # a library filling a global it left None
  scratch_module.cache = {}  # or adding one
  scratch_module.__warningregistry__ = {}
  assert integrity.violations() == []


def test_honest_writes_to_sys_and_time_are_allowed():
  integrity = integrity_lib.Integrity()
  saved = sys.stdout
  sys.stdout = sys.stderr
  sys.stdout = saved
  time.tzset()  # pandas does this: tzname and friends get new objects
  assert integrity.violations() == []


def test_swapping_a_module_in_sys_modules_is_named(scratch_module):
  integrity = integrity_lib.Integrity()
  sys.modules["precisecoder_scratch"] = types.ModuleType("precisecoder_scratch")
  assert "sys.modules['precisecoder_scratch']" in integrity.violations()


def test_modules_loaded_later_are_watched_once_added(scratch_module):
  del sys.modules[scratch_module.__name__]
  integrity = integrity_lib.Integrity()
  sys.modules[scratch_module.__name__] = scratch_module
  scratch_module.compare = lambda a, b: True
  assert integrity.violations() == []  # not loaded at the snapshot: not watched
  scratch_module.compare = lambda a, b: a == b
  integrity.watch_new_modules()
  scratch_module.compare = lambda a, b: True
  assert integrity.violations() == ["precisecoder_scratch.compare"]


def test_a_trace_hook_is_named():
  integrity = integrity_lib.Integrity()
  sys.setprofile(lambda *args: None)
  try:
    found = integrity.violations()
  finally:
    sys.setprofile(None)
  assert found == ["a trace or profile hook"]


def _nodes(code: str) -> list[ast.AST]:
  """Test code as the harness hands it to the scans: every node, as ast.walk lists them."""
  return list(ast.walk(ast.parse(code)))


def test_test_imports_follow_aliases_from_imports_and_attribute_chains():
  code = ("import numpy as np\nimport os.path\nfrom math import isclose\nimport numpy.testing as npt\n"
          "def check(candidate):\n  np.testing.assert_array_equal(candidate(), np.array([1]))\n"
          "  npt.assert_allclose(1, 1)\n  assert os.path.sep\n")
  names = integrity_lib.test_imports(_nodes(code))
  for name in ("numpy", "os.path", "math", "math.isclose", "numpy.testing",
               "numpy.testing.assert_array_equal", "numpy.testing.assert_allclose", "os.path.sep"):
    assert name in names
  assert len(names) == len(set(names))


def test_import_quietly_imports_a_submodule_whose_parent_is_not_loaded(tmp_path, monkeypatch):
  package = tmp_path / "precisecoder_scratch_pkg"
  package.mkdir()
  (package / "__init__.py").write_text("")
  (package / "sub.py").write_text("def helper():\n  return 1\n")
  monkeypatch.syspath_prepend(str(tmp_path))
  try:
    integrity_lib.import_quietly(
        integrity_lib.test_imports(_nodes("from precisecoder_scratch_pkg.sub import helper\n")))
    assert "precisecoder_scratch_pkg.sub" in sys.modules
  finally:
    for name in ("precisecoder_scratch_pkg.sub", "precisecoder_scratch_pkg"):
      sys.modules.pop(name, None)


def test_import_quietly_imports_modules_and_skips_everything_else():
  name = "json.tool"
  was_loaded = name in sys.modules
  integrity_lib.import_quietly(("math.isclose", "no_such_module_here", name))
  assert name in sys.modules
  assert "no_such_module_here" not in sys.modules
  assert "math.isclose" not in sys.modules  # an attribute, skipped without asking the import system
  if not was_loaded:
    del sys.modules[name]
    del sys.modules["json"].__dict__["tool"]


@pytest.mark.parametrize("code, writes", [
    ("import unittest\nfrom unittest.mock import patch\n", True),
    ("import unittest\nclass T(unittest.TestCase):\n  @mock.patch('os.getcwd')\n  def test(self, m): pass\n", True),
    ("import os\nos.environ['X'] = '1'\n", True),
    ("import random\nrandom.random = lambda: 0.5\n", True),
    ("setattr(thing, 'x', 1)\n", True),
    ("import math\nassert math.isclose(f(1), 2.0)\nxs = [1]\nxs[0] = 2\n", False),
    ("class Box:\n  pass\nb = Box()\nb.value = 3\nassert f(b) == 3\n", False),
])
def test_tests_that_write_the_library_are_recognised(code, writes):
  assert integrity_lib.tests_write_library(_nodes(code)) is writes
