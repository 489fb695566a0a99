"""What the scoring service, its backends and the reward servers' client share: the pair to
score, the backend's surface and the error for a setting that cannot work."""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol, Sequence

from precisecoder.tasks import Task


@dataclasses.dataclass(frozen=True)
class Item:
  """One pair to score: `error` marks it unscorable up front (no program, too large)."""

  task: Task
  program: str | None
  error: str | None = None
  sample: int = 0


class ConfigurationError(Exception):
  """A setting that cannot work (a server scoring with other settings, a refused token): the
  caller is told, rather than every item being reported as not scored."""


class Backend(Protocol):
  """Scores a batch: one result (score record + `terms`) per item, in order."""

  def results(self, items: Sequence[Item]) -> list[dict[str, Any]]: ...

  def close(self) -> None: ...
