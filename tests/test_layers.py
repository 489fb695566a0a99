"""Imports run one way: a module imports only from its own layer or the layers below it, and no
modules import one another in a cycle (inside a layer too).

Layers, bottom to top (README "Layout"): the sandbox, the model and task records; what is built
on them (rewards, prompts, sampling, data); the trainers; what runs trainers (the base policy's
build, the comparison's arms); the analysis of runs; the commands. Every import counts, lazy ones
inside functions included. `__main__` modules are entry points: run, never imported, so they sit
with the commands.

Inside a layer, a package may have sub-layers of its own (`SUBLAYERS`): execution/'s trust zones,
from what every process loads to what judges in the pool's process (execution/__init__.py).
"""

from __future__ import annotations

import ast
import pathlib

import pytest

SRC = pathlib.Path(__file__).resolve().parents[1] / "src"

# Bottom to top: the modules and packages directly under precisecoder/ in each layer.
LAYERS = (
  ("execution", "model", "tasks", "edits", "intmath", "console"),
  (
    "rewards",
    "reward_jobs",
    "reward_recipes",
    "advantages",
    "prompts",
    "predictions",
    "sampling",
    "multihost",
    "data",
    "feedback",
    "episodes",
  ),
  ("train", "integrations"),
  ("experiments",),
  ("analysis",),
  ("commands", "cli"),
)
_RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}

# Bottom to top: a package's sub-packages, each importing only its own and those below it. The
# package's own __init__ sits on top (its API may import any of them).
SUBLAYERS = {
  "precisecoder.execution": ("shared", "program_side", "test_side", "worker_side", "parent"),
}


def layer(module: str) -> int:
  """The layer of a dotted `precisecoder...` module; the package itself is at the bottom."""
  parts = module.split(".")
  if parts[-1] == "__main__":
    return len(LAYERS) - 1
  if len(parts) == 1:
    return 0
  if parts[1] not in _RANK:
    raise KeyError(f"{module}: precisecoder.{parts[1]} is in no layer; add it to LAYERS")
  return _RANK[parts[1]]


def sublayer(module: str) -> tuple[str, int] | None:
  """(package, rank) of a module inside a package with `SUBLAYERS`, else None; the package itself
  (and a name imported from it, not a sub-package) is on top."""
  for package, zones in SUBLAYERS.items():
    if module == package:
      return package, len(zones)
    if module.startswith(package + "."):
      zone = module[len(package) + 1 :].split(".")[0]
      if zone not in zones:
        raise KeyError(f"{module}: {package}.{zone} is in no sub-layer; add it to SUBLAYERS")
      return package, zones.index(zone)
  return None


def _imported(node: ast.Import | ast.ImportFrom, package: str) -> list[str]:
  """The precisecoder modules an import statement reaches (`from precisecoder import x` reaches
  precisecoder.x)."""
  if isinstance(node, ast.Import):
    return [a.name for a in node.names if a.name.split(".")[0] == "precisecoder"]
  if node.level:
    parts = package.split(".")
    base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
  else:
    base = node.module or ""
  if base.split(".")[0] != "precisecoder":
    return []
  if base == "precisecoder" or base in SUBLAYERS:
    return [f"{base}.{a.name}" for a in node.names]
  return [base]


def sublayer_of(module: str) -> str | None:
  """The package with `SUBLAYERS` that holds `module` (or is it), if any."""
  return next((p for p in SUBLAYERS if module == p or module.startswith(p + ".")), None)


def _zone(module: str) -> int | None:
  """A module's sub-layer rank, where a name imported from a package is not one of its zones."""
  try:
    found = sublayer(module)
  except KeyError:
    found = sublayer(module.rpartition(".")[0])
  return None if found is None else found[1]


def violations(module: str, source: str, filename: str) -> list[str]:
  """'file:line: module (layer) imports target (layer)' for each upward import in `source`, and
  likewise for a sub-layer's (zone's) upward import inside its package."""
  package = module if filename.endswith("__init__.py") else module.rpartition(".")[0]
  own, own_zone = layer(module), sublayer(module)
  found = []
  for node in ast.walk(ast.parse(source, filename=filename)):
    if not isinstance(node, (ast.Import, ast.ImportFrom)):
      continue
    for target in _imported(node, package):
      if layer(target) > own:
        found.append(
          f"{filename}:{node.lineno}: {module} ({'/'.join(LAYERS[own])}) imports "
          f"{target} ({'/'.join(LAYERS[layer(target)])}), a higher layer"
        )
        continue
      if own_zone is None or sublayer_of(target) != own_zone[0]:
        continue
      zones, rank = SUBLAYERS[own_zone[0]], _zone(target)
      if rank > own_zone[1]:
        found.append(
          f"{filename}:{node.lineno}: {module} (zone {zones[own_zone[1]]}) imports {target} "
          f"({'the package' if rank == len(zones) else 'zone ' + zones[rank]}), a higher zone"
        )
  return found


def _modules():
  for path in sorted((SRC / "precisecoder").rglob("*.py")):
    parts = path.relative_to(SRC).with_suffix("").parts
    module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    yield module, path


def import_graph(sources: dict[str, tuple[str, str]]) -> dict[str, set[str]]:
  """{module: the modules of `sources` it imports} for `sources` = {module: (source, filename)}.
  `from package import name` reaches the submodule `package.name` when there is one, else the
  package; a module never counts as importing itself."""
  graph = {}
  for module, (source, filename) in sources.items():
    package = module if filename.endswith("__init__.py") else module.rpartition(".")[0]
    reached = set()
    for node in ast.walk(ast.parse(source, filename=filename)):
      if isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
          parts = package.split(".")
          base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in sources else base for a in node.names]
      elif isinstance(node, ast.Import):
        names = [a.name for a in node.names]
      else:
        continue
      for name in names:
        while name and name not in sources:  # a name from a module: the module
          name = name.rpartition(".")[0]
        if name and name != module:
          reached.add(name)
    graph[module] = reached
  return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
  """The cycles ([a, b, ..., a]) a depth-first walk of `graph` meets: none in a DAG."""
  found, done = [], set()
  for start in sorted(graph):
    if start in done:
      continue
    path, stack = [start], [iter(sorted(graph[start]))]
    while stack:
      target = next(stack[-1], None)
      if target is None:
        done.add(path.pop())
        stack.pop()
      elif target in path:
        found.append(path[path.index(target) :] + [target])
      elif target not in done:
        path.append(target)
        stack.append(iter(sorted(graph[target])))
  return found


def test_no_module_imports_a_higher_layer():
  found = []
  for module, path in _modules():
    found += violations(module, path.read_text(), str(path.relative_to(SRC.parent)))
  assert not found, "upward imports:\n" + "\n".join(found)


def test_no_modules_import_one_another_in_a_cycle():
  sources = {module: (path.read_text(), str(path)) for module, path in _modules()}
  found = cycles(import_graph(sources))
  assert not found, "import cycles:\n" + "\n".join(" -> ".join(c) for c in found)


def test_a_synthetic_cycle_is_named_lazy_imports_included():
  sources = {
    "precisecoder.train.policy": (
      "def load():\n  from precisecoder.train import base\n",
      "src/precisecoder/train/policy.py",
    ),
    "precisecoder.train.base": (
      "from precisecoder.train import sft\n",
      "src/precisecoder/train/base.py",
    ),
    "precisecoder.train.sft": ("from .policy import load\n", "src/precisecoder/train/sft.py"),
    "precisecoder.train.step": (
      "from precisecoder.train import sft\n",
      "src/precisecoder/train/step.py",
    ),
  }
  assert cycles(import_graph(sources)) == [
    [
      "precisecoder.train.base",
      "precisecoder.train.sft",
      "precisecoder.train.policy",
      "precisecoder.train.base",
    ]
  ]
  del sources["precisecoder.train.policy"]
  assert cycles(import_graph(sources)) == []


def test_every_top_level_module_has_a_layer():
  for module, _ in _modules():
    layer(module)  # raises for a module or package missing from LAYERS
    sublayer(module)  # raises for a module of a package with SUBLAYERS outside them


@pytest.mark.parametrize(
  "module, source, line, target",
  [
    (
      "precisecoder.train.run",
      "import os\ndef f():\n  from precisecoder.analysis import report\n",
      3,
      "precisecoder.analysis",
    ),
    ("precisecoder.train.run", "from ..analysis import report\n", 1, "precisecoder.analysis"),
    ("precisecoder.sampling", "from precisecoder import train\n", 1, "precisecoder.train"),
    ("precisecoder.tasks", "import precisecoder.rewards as r\n", 1, "precisecoder.rewards"),
    ("precisecoder.analysis.report", "from precisecoder.cli import main\n", 1, "precisecoder.cli"),
  ],
)
def test_a_synthetic_upward_import_is_named_with_file_line_and_target(module, source, line, target):
  (found,) = violations(module, source, "src/x.py")
  assert found.startswith(f"src/x.py:{line}: {module} (") and f"imports {target} (" in found


def test_downward_and_same_layer_imports_pass():
  source = (
    "from precisecoder.train import metrics\nfrom precisecoder import rewards, tasks\n"
    "from . import statistics\nimport numpy\n"
  )
  assert violations("precisecoder.analysis.report", source, "src/x.py") == []
  assert (
    violations(
      "precisecoder.train.__main__", "from precisecoder.commands import train\n", "src/x.py"
    )
    == []
  )


@pytest.mark.parametrize(
  "module, source, line, target, zone",
  [
    (
      "precisecoder.execution.program_side.split_program",
      "import os\ndef f():\n  from precisecoder.execution.test_side import split_tests\n",
      3,
      "precisecoder.execution.test_side",
      "zone test_side",
    ),
    (
      "precisecoder.execution.test_side.split_tests",
      "from precisecoder.execution.parent import expectations\n",
      1,
      "precisecoder.execution.parent",
      "zone parent",
    ),
    (
      "precisecoder.execution.shared.codec",
      "from ..worker_side import harness\n",
      1,
      "precisecoder.execution.worker_side",
      "zone worker_side",
    ),
    (
      "precisecoder.execution.worker_side.worker",
      "from precisecoder.execution import parent\n",
      1,
      "precisecoder.execution.parent",
      "zone parent",
    ),
    (
      "precisecoder.execution.program_side",
      "from precisecoder.execution import Job\n",
      1,
      "precisecoder.execution.Job",
      "the package",
    ),
  ],
)
def test_a_zone_importing_a_higher_zone_is_named(module, source, line, target, zone):
  filename = "src/x/__init__.py" if module.endswith("_side") else "src/x.py"
  (found,) = violations(module, source, filename)
  assert found.startswith(f"{filename}:{line}: {module} (zone ")
  assert f"imports {target} ({zone}), a higher zone" in found


def test_a_zone_importing_its_own_or_a_lower_zone_passes():
  source = (
    "from precisecoder.execution.shared import bridge, codec\n"
    "from precisecoder.execution.program_side import program_boot\nfrom . import split_tests\n"
    "from .. import shared\nimport precisecoder.execution.shared.protocol\n"
  )
  assert violations("precisecoder.execution.test_side.split_tests", source, "src/x.py") == []
  api = "from precisecoder.execution.parent.pool import ExecutionPool\n"
  assert violations("precisecoder.execution", api, "src/x/__init__.py") == []
  assert violations("precisecoder.rewards", api, "src/x.py") == []


def test_a_module_outside_the_zones_is_named():
  with pytest.raises(KeyError, match="precisecoder.execution.pool is in no sub-layer"):
    sublayer("precisecoder.execution.pool")
