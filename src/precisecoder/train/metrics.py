"""Run metrics: JSON Lines (`metrics.jsonl`) plus TensorBoard scalars (tensorboardX), Weights &
Biases when `train.wandb_project` is set, and progress logging."""

from __future__ import annotations

import json
import math
import os
import pathlib
import time
import uuid
from typing import Any, Mapping

from absl import logging

# How often tensorboardX's writer thread flushes the event file (its default: 2 minutes). Its
# queue is written by a thread, so a bucket mirror (train/workdir.py), copied after every step,
# may get a step's events with the next one; closing the writer writes them all before the
# last copy.
EVENTS_FLUSH_S = 5


def _plain(value: Any) -> Any:
  if hasattr(value, "item"):
    value = value.item()
  if isinstance(value, float) and not math.isfinite(value):
    return None
  return value


def read_metrics(path: str | os.PathLike) -> list[dict[str, Any]]:
  path = pathlib.Path(path)
  if not path.exists():
    return []
  return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def last_step(workdir: str | os.PathLike) -> int:
  """The latest step recorded in `<workdir>/metrics.jsonl` (0 before the first)."""
  records = read_metrics(pathlib.Path(workdir) / "metrics.jsonl")
  return max((r.get("step", 0) for r in records), default=0)


BROKEN_TASKS_FILE = "broken_tasks.json"


def record_broken_tasks(workdir: str | os.PathLike, broken: Mapping[str, str]) -> None:
  """Adds `broken` (task_id -> why: its reference fix fails its tests, or its buggy program
  passes them) to `<workdir>/broken_tasks.json`, for the report to name them (their rows score
  0 in training and evaluation); a resumed run keeps the earlier ones."""
  if not broken:
    return
  path = pathlib.Path(workdir) / BROKEN_TASKS_FILE
  known = read_broken_tasks(workdir)
  if all(known.get(task_id) == why for task_id, why in broken.items()):
    return
  path.write_text(json.dumps({**known, **broken}, indent=1, sort_keys=True) + "\n")


def read_broken_tasks(workdir: str | os.PathLike) -> dict[str, str]:
  path = pathlib.Path(workdir) / BROKEN_TASKS_FILE
  return json.loads(path.read_text()) if path.exists() else {}


class MetricsWriter:
  """Writes one JSON line per record; numeric values also go to TensorBoard.

  On resume from step k, records after k (written before the interruption but not covered
  by the checkpoint) are dropped so the file reads as if the run had never stopped; the new
  TensorBoard file starts with a purge marker at step k + 1 (`purge_step`), on which
  TensorBoard drops the older files' events from that step on. A fresh start (k = 0) over the
  records of an earlier attempt that saved no checkpoint drops them all (purge at step 0).
  """

  def __init__(
    self,
    workdir: str | os.PathLike,
    *,
    resume_step: int = 0,
    tensorboard: bool = True,
    enabled: bool = True,
    wandb: dict[str, Any] | None = None,
  ):
    self.enabled = enabled  # False on every host but the primary one: nothing is written
    self._wandb = None
    if not enabled:
      return
    workdir = pathlib.Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    self.path = workdir / "metrics.jsonl"
    kept = (
      [r for r in read_metrics(self.path) if r.get("step", 0) <= resume_step]
      if (resume_step)
      else []
    )
    with open(self.path, "w") as f:
      f.writelines(json.dumps(r) + "\n" for r in kept)
    self._file = open(self.path, "a")
    self._events = None
    if tensorboard:
      # Imported here: it imports torch when torch is installed (~2 s), which readers of
      # metrics.jsonl (the reports) need not pay.
      from tensorboardX import SummaryWriter  # pylint: disable=import-outside-toplevel

      events = workdir / "tensorboard"
      purge = resume_step + 1 if resume_step else (0 if events.exists() else None)
      self._events = SummaryWriter(str(events), flush_secs=EVENTS_FLUSH_S, purge_step=purge)
    if wandb is not None:
      self._wandb = _start_wandb(workdir, wandb)

  def write(self, step: int, values: dict[str, Any], *, prefix: str = "") -> None:
    if not self.enabled:
      return
    record = {"step": step, **{prefix + k: _plain(v) for k, v in values.items()}}
    self._file.write(json.dumps(record) + "\n")
    self._file.flush()
    if self._events is not None:
      now = time.time()
      for tag, value in record.items():
        if tag != "step" and isinstance(value, (int, float)) and not isinstance(value, bool):
          self._events.add_scalar(tag, float(value), step, walltime=now)
      self._events.flush()
    if self._wandb is not None:
      self._wandb.log(
        {
          k: v
          for k, v in record.items()
          if k != "step" and v is not None and isinstance(v, (int, float, str))
        },
        step=step,
      )

  def close(self) -> None:
    if not self.enabled:
      return
    self._file.close()
    if self._events is not None:
      self._events.close()
    if self._wandb is not None:
      self._wandb.finish()
      self._wandb = None


def wandb_settings(cfg: Any, workdir: str | os.PathLike) -> dict[str, Any] | None:
  """`wandb.init`'s arguments from the config's `train.wandb_*` fields (the whole config is
  the run's W&B config); None when `train.wandb_project` is unset."""
  train = cfg.train
  if not train.get("wandb_project", ""):
    return None
  return dict(
    project=train.wandb_project,
    entity=train.get("wandb_entity") or None,
    name=train.get("wandb_run_name") or pathlib.Path(workdir).absolute().name,
    mode=train.get("wandb_mode") or None,
    config=cfg.to_dict(),
  )


def _start_wandb(workdir: pathlib.Path, settings: dict[str, Any]) -> Any:
  """A W&B run writing under `workdir/wandb`. Its id is kept in `workdir/wandb_run_id`, so a
  resumed run logs on to the same W&B run (W&B ignores steps at or below those it already
  has: the steps a resume repeats stay as first logged there)."""
  # Imported here: only runs that ask for W&B pay for (or need) the package.
  import wandb  # pylint: disable=import-outside-toplevel

  id_file = workdir / "wandb_run_id"
  run_id = id_file.read_text().strip() if id_file.exists() else uuid.uuid4().hex[:12]
  id_file.write_text(run_id + "\n")
  (workdir / "wandb").mkdir(exist_ok=True)
  return wandb.init(dir=str(workdir), id=run_id, resume="allow", **settings)


class Progress:
  """Logs step rate and ETA every `every` steps."""

  def __init__(self, total_steps: int, start_step: int = 0, every: int = 1):
    self.total = total_steps
    self.start = start_step
    self.every = every
    self.t0 = time.perf_counter()

  def update(self, step: int, summary: str = "") -> None:
    done = step - self.start
    if done <= 0 or (step % self.every and step != self.total):
      return
    elapsed = time.perf_counter() - self.t0
    rate = done / elapsed
    eta = (self.total - step) / rate if rate > 0 else float("inf")
    logging.info(
      "step %d/%d  %.2f s/step  ETA %s  %s",
      step,
      self.total,
      1 / rate,
      format_duration(eta),
      summary,
    )


def format_duration(seconds: float) -> str:
  """H:MM:SS, with days in front past 24 h (a clock format would wrap): '2d 03:04:05'."""
  if not math.isfinite(seconds):
    return "?"
  days, rest = divmod(int(round(seconds)), 86400)
  clock = f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
  return f"{days}d {clock}" if days else clock
