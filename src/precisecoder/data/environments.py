"""Task environments: the interpreter whose libraries a task set's programs import.

Programs run under the pool's interpreter (`ExecutionPool(python=...)`, `--python`, the
`rl.python` config field; by default the trainer's own). Some task sets need libraries, or
versions of them, that the trainer's environment does not hold: BigCodeBench imports sklearn,
cv2, Django, ... and calls `boxplot(labels=)`, which matplotlib 3.9 removed. The repository
ships such an environment as a pinned requirements file and a script that builds it into a
virtualenv of its own. When a task's reference program fails to import a module, `score` and
`data verify` name the environment it needs (`advice`).
"""

from __future__ import annotations

import collections
import dataclasses
import re
from typing import Iterable


@dataclasses.dataclass(frozen=True)
class Environment:
  name: str
  requirements: str  # pinned, at the repository root
  script: str  # builds it
  python: str  # the interpreter the script makes, relative to the repository root


ENVIRONMENTS = {
  "bigcodebench": Environment(
    "BigCodeBench",
    "requirements-bigcodebench.txt",
    "scripts/bigcodebench_env.sh",
    ".venv-bigcodebench/bin/python",
  ),
}
_MISSING = re.compile(r"No module named '([\w.]+)'")


def missing_module(detail: str) -> str | None:
  """The top-level module a failed run's detail says is not installed, if it says so."""
  found = _MISSING.search(detail or "")
  return found.group(1).split(".")[0] if found else None


def dataset_of(task_id: str, source_dataset: str = "") -> str:
  """The task set a task comes from: its `source_dataset`, else its id's prefix
  ("BigCodeBench/13" -> "bigcodebench")."""
  return (source_dataset or task_id.split("/", 1)[0]).lower()


def advice(missing: Iterable[tuple[str, str]], python: str) -> list[str]:
  """One line per task set whose programs failed to import modules under `python`.

  `missing`: (task set, module) for each failed run that named a module (`missing_module`).
  """
  modules: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
  for dataset, module in missing:
    modules[dataset][module] += 1
  lines = []
  for dataset, counts in sorted(modules.items()):
    names = ", ".join(name for name, _ in counts.most_common(6))
    what = (
      f"{sum(counts.values())} run(s) of {dataset or 'this task set'} could not import "
      f"{names} under {python}"
    )
    env = ENVIRONMENTS.get(dataset)
    if env is not None:
      lines.append(
        f"{what}: these tasks need the {env.name} environment ({env.requirements}); "
        f"build it with {env.script}, then pass --python {env.python}"
      )
    else:
      lines.append(f"{what}: pass --python with an interpreter that has these libraries")
  return lines
