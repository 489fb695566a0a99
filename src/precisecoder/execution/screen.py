"""A static screen: constructs no debugging fix needs, refused where a fix introduces them.

A fix changes a few lines of the buggy program. It has no reason to read frames, code objects
or the garbage collector's lists, install hooks, load ctypes, give an object another class,
graft comparisons onto a class, define a finaliser, read /proc, or name the harness. A program
that does, where the buggy program it fixes did not, is refused before it runs
(`introduced`); one whose buggy program uses such a construct itself is judged as usual. This
is defence in depth behind the sandbox, the guard, integrity and the audit hook
(`execution/__init__.py`): it sees only what is written, not what a program builds at run
time (`getattr(sys, "_get" + "frame")`).

Measured against the honest corpora (`benchmarks/bench_verdicts.py --screen`): no program of
the test corpora, no BigCodeBench gold and no HumanEval solution uses any of these.
"""

from __future__ import annotations

import ast
import functools
import re

# Attributes no fix needs, read or written, on any object.
_ATTRIBUTES = frozenset(
  {
    "f_back",
    "f_locals",
    "f_globals",
    "f_builtins",
    "f_code",
    "f_trace",
    "tb_frame",
    "gi_frame",
    "cr_frame",
    "ag_frame",
    "__code__",
    "__defaults__",
    "__kwdefaults__",
    "__globals__",
    "__closure__",
    "__builtins__",
    "co_consts",
    "cell_contents",
    "__subclasses__",
    "settrace",
    "setprofile",
    "addaudithook",
    "_getframe",
    "currentframe",
    "getouterframes",
    "getinnerframes",
    "get_objects",
    "get_referrers",
    "get_referents",
  }
)
# Attributes of these modules only (the names are common elsewhere).
_MODULE_ATTRIBUTES = {
  "gc": {"callbacks"},
  "inspect": {"stack", "trace"},
  "mock": {"ANY"},
  "sys": {"meta_path", "path_hooks"},
}
_MODULES = frozenset({"ctypes", "_ctypes"})
# Comparison dunders grafted onto an existing class (a class statement's own defs are not this).
_GRAFTED = frozenset(
  {
    "__eq__",
    "__ne__",
    "__lt__",
    "__le__",
    "__gt__",
    "__ge__",
    "__hash__",
    "__bool__",
    "__len__",
    "__contains__",
    "__class__",
  }
)
_CHEAP = re.compile(  # a program without any of these needs no parse
  r"f_back|f_locals|f_globals|f_builtins|f_code|f_trace|_frame|__code__|__defaults__|"
  r"__kwdefaults__|__globals__|__closure__|__builtins__|co_consts|cell_contents|__subclasses__|"
  r"settrace|setprofile|addaudithook|_getframe|currentframe|outerframes|innerframes|"
  r"get_objects|get_referrers|get_referents|callbacks|inspect|ANY|meta_path|path_hooks|ctypes|"
  r"__eq__|__ne__|__lt__|__le__|__gt__|__ge__|__hash__|__bool__|__len__|__contains__|"
  r"__class__|__del__|/proc/|__precisecoder"
)


def introduced(buggy: str, program: str) -> str | None:
  """Why `program` is refused: a screened construct it uses that `buggy` does not; else None.
  A program that does not parse is left to the run, which reports why."""
  if not _CHEAP.search(program):
    return None
  new = constructs(program) - constructs(buggy)
  if not new:
    return None
  return f"screened: the program introduces {min(new)}, which no debugging fix needs"


@functools.lru_cache(maxsize=4096)
def constructs(source: str) -> frozenset[str]:
  """The screened constructs `source` uses (module docstring), described."""
  if not _CHEAP.search(source):
    return frozenset()
  try:
    tree = ast.parse(source)
  except (SyntaxError, ValueError, RecursionError, MemoryError):
    return frozenset()
  found = set()
  for node in ast.walk(tree):
    if isinstance(node, ast.Attribute):
      base = node.value.id if isinstance(node.value, ast.Name) else None
      if node.attr in _ATTRIBUTES or node.attr in _MODULE_ATTRIBUTES.get(base, ()):
        found.add(f"the attribute {node.attr!r}")
      if node.attr in _GRAFTED and isinstance(node.ctx, (ast.Store, ast.Del)):
        found.add(f"an assignment to {node.attr!r}")
    elif isinstance(node, ast.Name) and (
      node.id == "__builtins__" or node.id.startswith("__precisecoder")
    ):
      found.add(f"the name {node.id!r}")
    elif isinstance(node, ast.Import):
      found |= {f"the module {a.name!r}" for a in node.names if a.name.split(".")[0] in _MODULES}
    elif isinstance(node, ast.ImportFrom) and node.module:
      if node.module.split(".")[0] in _MODULES:
        found.add(f"the module {node.module!r}")
      found |= {
        f"the name {a.name!r} from {node.module}"
        for a in node.names
        if a.name in _ATTRIBUTES
        or a.name in _MODULE_ATTRIBUTES.get(node.module.rsplit(".", 1)[-1], ())
      }
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "__del__":
      found.add("a finaliser (__del__)")
    elif (
      isinstance(node, ast.Constant)
      and isinstance(node.value, str)
      and ("/proc/" in node.value or "__precisecoder" in node.value)
    ):
      found.add("a path under /proc" if "/proc/" in node.value else "the harness's names")
  return frozenset(found)
