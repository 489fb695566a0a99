"""Imports run one way: a module imports only from its own layer or the layers below it.

Layers, bottom to top (README "Layout"): the sandbox, the model and task records; what is built
on them (rewards, prompts, sampling, data); the trainers; the analysis of runs; the commands.
Every import counts, lazy ones inside functions included. `__main__` modules are entry points:
run, never imported, so they sit with the commands.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

SRC = pathlib.Path(__file__).resolve().parents[1] / "src"

# Bottom to top: the modules and packages directly under precisecoder/ in each layer.
LAYERS = (
    ("execution", "model", "tasks", "edits"),
    ("rewards", "reward_recipes", "advantages", "prompts", "predictions", "sampling",
     "multihost", "data"),
    ("train", "integrations"),
    ("analysis",),
    ("commands", "cli"),
)
_RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}


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


def _imported(node: ast.Import | ast.ImportFrom, package: str) -> list[str]:
  """The precisecoder modules an import statement reaches (`from precisecoder import x` reaches
  precisecoder.x)."""
  if isinstance(node, ast.Import):
    return [a.name for a in node.names if a.name.split(".")[0] == "precisecoder"]
  if node.level:
    parts = package.split(".")
    base = ".".join(parts[:len(parts) - node.level + 1] + ([node.module] if node.module else []))
  else:
    base = node.module or ""
  if base.split(".")[0] != "precisecoder":
    return []
  if base == "precisecoder":
    return [f"precisecoder.{a.name}" for a in node.names]
  return [base]


def violations(module: str, source: str, filename: str) -> list[str]:
  """'file:line: module (layer) imports target (layer)' for each upward import in `source`."""
  package = module if filename.endswith("__init__.py") else module.rpartition(".")[0]
  own = layer(module)
  found = []
  for node in ast.walk(ast.parse(source, filename=filename)):
    if not isinstance(node, (ast.Import, ast.ImportFrom)):
      continue
    for target in _imported(node, package):
      if layer(target) > own:
        found.append(f"{filename}:{node.lineno}: {module} ({'/'.join(LAYERS[own])}) imports "
                     f"{target} ({'/'.join(LAYERS[layer(target)])}), a higher layer")
  return found


def _modules():
  for path in sorted((SRC / "precisecoder").rglob("*.py")):
    parts = path.relative_to(SRC).with_suffix("").parts
    module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    yield module, path


def test_no_module_imports_a_higher_layer():
  found = []
  for module, path in _modules():
    found += violations(module, path.read_text(), str(path.relative_to(SRC.parent)))
  assert not found, "upward imports:\n" + "\n".join(found)


def test_every_top_level_module_has_a_layer():
  for module, _ in _modules():
    layer(module)  # raises for a module or package missing from LAYERS


@pytest.mark.parametrize("module, source, line, target", [
    ("precisecoder.train.run", "import os\ndef f():\n  from precisecoder.analysis import report\n",
     3, "precisecoder.analysis"),
    ("precisecoder.train.run", "from ..analysis import report\n", 1, "precisecoder.analysis"),
    ("precisecoder.sampling", "from precisecoder import train\n", 1, "precisecoder.train"),
    ("precisecoder.tasks", "import precisecoder.rewards as r\n", 1, "precisecoder.rewards"),
    ("precisecoder.analysis.report", "from precisecoder.cli import main\n", 1,
     "precisecoder.cli"),
])
def test_a_synthetic_upward_import_is_named_with_file_line_and_target(module, source, line,
                                                                      target):
  (found,) = violations(module, source, "src/x.py")
  assert found.startswith(f"src/x.py:{line}: {module} (") and f"imports {target} (" in found


def test_downward_and_same_layer_imports_pass():
  source = ("from precisecoder.train import metrics\nfrom precisecoder import rewards, tasks\n"
            "from . import statistics\nimport numpy\n")
  assert violations("precisecoder.analysis.report", source, "src/x.py") == []
  assert violations("precisecoder.train.__main__", "from precisecoder.commands import train\n",
                    "src/x.py") == []
