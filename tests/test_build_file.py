"""BUILD must name every source file, test and benchmark, with deps that exist."""

from __future__ import annotations

import ast
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import update_build  # noqa: E402  (the generator owns the import-graph logic)


def _targets() -> dict[str, dict]:
  """Parses BUILD (Starlark is Python syntax here) into {name: {kind, srcs, deps, reqs}}."""
  tree = ast.parse((ROOT / "BUILD").read_text(), filename="BUILD")
  targets = {}
  for stmt in tree.body:
    call = stmt.value if isinstance(stmt, ast.Expr) else None
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
      continue
    if call.func.id not in ("py_library", "py_binary", "py_test"):
      continue
    kw = {k.arg: k.value for k in call.keywords}
    name = ast.literal_eval(kw["name"])
    assert name not in targets, f"BUILD: duplicate target {name!r}"
    deps, reqs = [], []
    for element in getattr(kw.get("deps"), "elts", []):
      if isinstance(element, ast.Call):  # requirement("pkg")
        reqs.append(ast.literal_eval(element.args[0]))
      else:
        deps.append(ast.literal_eval(element))
    targets[name] = {
      "kind": call.func.id,
      "srcs": ast.literal_eval(kw["srcs"]),
      "deps": deps,
      "reqs": reqs,
    }
  return targets


def _pinned() -> set[str]:
  names = set()
  for req in ROOT.glob("requirements*.txt"):
    for line in req.read_text().splitlines():
      match = re.match(r"([A-Za-z0-9_.\-]+)==", line.strip())
      if match:
        names.add(match.group(1).lower())
  return names


def test_every_file_is_in_exactly_one_target():
  owners: dict[str, list[str]] = {}
  for name, target in _targets().items():
    for src in target["srcs"]:
      owners.setdefault(src, []).append(name)
  files = [
    p for folder in ("src", "tests", "benchmarks", "tools") for p in (ROOT / folder).rglob("*.py")
  ]
  for path in files:
    rel = str(path.relative_to(ROOT))
    assert rel in owners, f"BUILD: {rel} is in no target (run tools/update_build.py)"
    assert len(owners[rel]) == 1 or rel == "src/precisecoder/cli.py", (
      f"BUILD: {rel} in {owners[rel]}"
    )
  for src in owners:
    assert (ROOT / src).exists(), f"BUILD: names {src}, which does not exist"


def test_tests_are_py_tests():
  kinds = {src: t["kind"] for t in _targets().values() for src in t["srcs"]}
  for path in (ROOT / "tests").rglob("test_*.py"):
    assert kinds[str(path.relative_to(ROOT))] == "py_test", path


def test_deps_exist_and_cover_imports():
  targets = _targets()
  pinned = _pinned()
  by_src = {src: t for t in targets.values() for src in t["srcs"]}
  for name, target in targets.items():
    for dep in target["deps"]:
      assert dep.startswith(":") and dep[1:] in targets, f"BUILD: {name} depends on missing {dep}"
    for req in target["reqs"]:
      assert req.lower() in pinned, f"BUILD: {name} requires {req!r}, not pinned in requirements"
  for src, target in by_src.items():
    internal, external = update_build.imports_of(ROOT / src)
    missing = {f":{d}" for d in internal} - set(target["deps"])
    assert not missing, (
      f"BUILD: {src} imports {sorted(missing)} but its target does not depend on them"
    )
    assert external <= set(target["reqs"]), (
      f"BUILD: {src} lacks requirement(s) {external - set(target['reqs'])}"
    )
