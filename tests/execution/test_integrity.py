"""Integrity: which writes to the library read as tampering, and which imports come first."""

import ast
import importlib
import operator
import sys
import time
import types

import pytest

from precisecoder.execution import integrity as integrity_lib
from precisecoder.execution.dict_versions import DictVersions
from precisecoder.execution import provenance
from precisecoder.execution.programs import PROGRAM_FILENAME


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


def _named(found: list[str]) -> list[str]:
  """The names violations() gives, without the reason in parentheses."""
  return [item.split(" (")[0] for item in found]


@pytest.mark.parametrize(
  "tamper, named",
  [
    (lambda m: setattr(m, "compare", lambda a, b: True), "precisecoder_scratch.compare"),
    (lambda m: setattr(m, "compare", operator.ne), "precisecoder_scratch.compare"),
    (lambda m: delattr(m, "compare"), "precisecoder_scratch.compare"),
  ],
)
def test_a_rebound_or_removed_callable_is_named(scratch_module, tamper, named):
  integrity = integrity_lib.Integrity()
  tamper(scratch_module)
  assert _named(integrity.violations()) == [named]


def test_data_is_the_library_s_own_unless_the_tests_read_it(scratch_module):
  integrity = integrity_lib.Integrity()
  scratch_module.PI = 3.0  # a flag or table a library rebuilds as it runs (mimetypes.inited)
  assert integrity.violations() == []
  integrity = integrity_lib.Integrity()
  integrity.watch_reached(["precisecoder_scratch"], names=["precisecoder_scratch.PI"])
  scratch_module.PI = 3.1
  assert _named(integrity.violations()) == ["precisecoder_scratch.PI"]


def test_data_holding_the_program_s_code_is_named(scratch_module):
  program_function = eval(compile("lambda a, b: True", PROGRAM_FILENAME, "eval"))
  integrity = integrity_lib.Integrity()
  scratch_module.PI = [program_function]  # data now, but it runs the program's code
  assert _named(integrity.violations()) == ["precisecoder_scratch.PI"]


def test_a_library_installing_its_own_function_as_it_loads_is_allowed(
  scratch_module, tmp_path, monkeypatch
):
  (tmp_path / "precisecoder_patcher.py").write_text(
    "import precisecoder_scratch\ndef compare(a, b):\n  return a == b\n"
    "precisecoder_scratch.compare = compare\n"
  )
  monkeypatch.syspath_prepend(str(tmp_path))
  monkeypatch.setattr(provenance, "LIBRARY_ROOTS", (*provenance.LIBRARY_ROOTS, f"{tmp_path}/"))
  provenance.library_file.cache_clear()
  integrity = integrity_lib.Integrity()
  try:
    importlib.import_module("precisecoder_patcher")  # typing_extensions does this to typing
    assert integrity.violations() == []
  finally:
    sys.modules.pop("precisecoder_patcher", None)
    provenance.library_file.cache_clear()


def test_classes_and_tables_the_tests_reach_are_watched(scratch_module):
  class Library:
    def method(self):
      return 1

  scratch_module.Library = Library
  scratch_module.dispatch = {list: scratch_module.compare}
  integrity = integrity_lib.Integrity().watch_reached(["precisecoder_scratch"])
  Library.method = lambda self: 2  # a class attribute: pd.Series.equals, _AssertRaisesContext
  scratch_module.dispatch[list] = eval(compile("lambda a, b: True", PROGRAM_FILENAME, "eval"))
  found = _named(integrity.violations())
  assert found == [
    "test_classes_and_tables_the_tests_reach_are_watched.<locals>.Library.method",
    f"precisecoder_scratch.dispatch.{list!r}",
  ]
  assert _named(integrity.quick()) == found


def test_tables_may_grow_and_other_libraries_may_update_them(scratch_module):
  scratch_module.dispatch = {list: scratch_module.compare}
  integrity = integrity_lib.Integrity().watch_reached(["precisecoder_scratch"])
  scratch_module.dispatch[dict] = len  # a cache or registry entry added
  scratch_module.dispatch[list] = operator.eq  # an adapter another library registers
  del scratch_module.dispatch[dict]
  assert integrity.violations() == []


def test_the_harness_and_keyword_defaults_may_not_change_at_all(scratch_module):
  def check(value, *, tolerance=1e-9):
    return value < tolerance

  scratch_module.check = check
  integrity = integrity_lib.Integrity().watch_reached(["precisecoder_scratch"])
  check.__kwdefaults__["tolerance"] = 1e9  # widened in place: no setattr, no new object
  assert _named(integrity.violations()) == ["precisecoder_scratch.check.__kwdefaults__.tolerance"]
  integrity = integrity_lib.Integrity().watch_reached([], frozen=["precisecoder_scratch"])
  scratch_module.new_name = 1
  assert _named(integrity.violations()) == ["precisecoder_scratch.new_name"]


def test_allowed_changes_become_the_snapshot(scratch_module):
  integrity = integrity_lib.Integrity()
  scratch_module.PI = 3.0
  assert integrity.violations() == []
  scratch_module.compare = operator.ne
  assert _named(integrity.violations()) == ["precisecoder_scratch.compare"]


@pytest.mark.skipif(
  not DictVersions.available(), reason="needs dict version tags (CPython <= 3.13)"
)
def test_a_patch_put_back_is_seen(scratch_module):
  integrity = integrity_lib.Integrity()
  real = scratch_module.compare
  scratch_module.compare = lambda a, b: True
  scratch_module.compare = real
  assert integrity.violations() == ["precisecoder_scratch (patched, then put back)"]


def test_while_the_tests_patch_the_library_quick_checks_only_the_program_s_writes(scratch_module):
  integrity = integrity_lib.Integrity().watch_reached(["precisecoder_scratch"])
  integrity.see_put_back = False
  scratch_module.compare = operator.ne  # what a test's mock.patch does
  assert integrity.quick() == []
  scratch_module.compare = eval(compile("lambda a, b: True", PROGRAM_FILENAME, "eval"))
  assert _named(integrity.quick()) == ["precisecoder_scratch.compare"]


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
  assert _named(integrity.violations()) == ["precisecoder_scratch.compare"]


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
  code = (
    "import numpy as np\nimport os.path\nfrom math import isclose\n"
    "import numpy.testing as npt\n"
    "def check(candidate):\n  np.testing.assert_array_equal(candidate(), np.array([1]))\n"
    "  npt.assert_allclose(1, 1)\n  assert os.path.sep\n"
  )
  names = integrity_lib.test_imports(_nodes(code))
  for name in (
    "numpy",
    "os.path",
    "math",
    "math.isclose",
    "numpy.testing",
    "numpy.testing.assert_array_equal",
    "numpy.testing.assert_allclose",
    "os.path.sep",
  ):
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
      integrity_lib.test_imports(_nodes("from precisecoder_scratch_pkg.sub import helper\n"))
    )
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


@pytest.mark.parametrize(
  "code, writes",
  [
    ("import unittest\nfrom unittest.mock import patch\n", True),
    (
      "import unittest\nclass T(unittest.TestCase):\n  @mock.patch('os.getcwd')\n"
      "  def test(self, m): pass\n",
      True,
    ),
    ("import os\nos.environ['X'] = '1'\n", True),
    ("import random\nrandom.random = lambda: 0.5\n", True),
    ("setattr(thing, 'x', 1)\n", True),
    ("import math\nassert math.isclose(f(1), 2.0)\nxs = [1]\nxs[0] = 2\n", False),
    ("class Box:\n  pass\nb = Box()\nb.value = 3\nassert f(b) == 3\n", False),
  ],
)
def test_tests_that_write_the_library_are_recognised(code, writes):
  assert integrity_lib.tests_write_library(_nodes(code)) is writes
