"""One scoring service per process: a thread that owns the scorer and batches every caller.

The trainer adapters (TRL, verl, tunix, OpenRLHF) and the reward server all score through a
`ScoringService`. Callers submit items from any thread; the service's one thread takes
everything waiting, scores it as one batch (a `RewardScorer` is not thread-safe, and one
batch keeps the pool's workers busy), and hands each caller its results. Results are kept
in a cache keyed by (task content, program), so asking for four reward terms of the same
completions runs the sandbox once per completion.

A result is a score record as `precisecoder score` writes it, plus `terms`: the pair's value
of every reward array our trainer learns from (`rewards.ARRAY_KEYS`). An infrastructure
failure is "not scored": `error` starts with "infra_error" (and, when the whole batch
failed, every term is None); such results are never cached. Blends of unit with a term
(`reward` = r_λ, ...) are recomputed per request for the λ it asks for.
"""

from __future__ import annotations

import atexit
import collections
import concurrent.futures
import dataclasses
import hashlib
import json
import threading
import time
from typing import Any, Sequence

from absl import logging

from precisecoder import reward_recipes
from precisecoder.integrations import client
from precisecoder.integrations.types import Backend, ConfigurationError, Item
from precisecoder.tasks import Task, task_to_record

INFRA_ERROR = "infra_error"  # how a not-scored result's `error` starts (as the scorer's own)
RECORD_TERMS = (
  "unit",
  "precision",
  "recall",
  "recall_gated",
  "f1",
  "reward",
  "edit_lines",
  "noop",
  "damage",
  "fixed",
)


class LocalBackend:
  """The sandboxed pool of this machine (or `pool`, left open) and a `RewardScorer` over it."""

  def __init__(
    self,
    workers: int | None = None,
    *,
    epsilon: int | None = None,
    pdb_compat: bool = False,
    lam: float = 1 / 3,
    pool: Any = None,
    python: str | None = None,
  ):
    from precisecoder.execution import ExecutionPool  # pylint: disable=import-outside-toplevel
    from precisecoder.rewards import RewardScorer  # pylint: disable=import-outside-toplevel

    self._owns_pool = pool is None
    self.pool = pool if pool is not None else ExecutionPool(workers=workers, python=python)
    self.scorer = RewardScorer(self.pool, epsilon=epsilon, pdb_compat=pdb_compat, lam=lam)

  def results(self, items: Sequence[Item]) -> list[dict[str, Any]]:
    scores = self.scorer.score_samples(
      [i.task for i in items], [i.program for i in items], [i.error for i in items]
    )
    return [
      {**self.scorer.to_record(s, i.sample), "terms": self.scorer.term_row(s)}
      for s, i in zip(scores, items)
    ]

  def settings(self) -> dict[str, Any]:
    return {
      "epsilon": self.scorer.epsilon,
      "pdb_compat": self.scorer.pdb_compat,
      "workers": getattr(self.pool, "num_workers", None),
    }

  def stats(self) -> dict[str, Any]:
    return self.scorer.stats()

  def close(self) -> None:
    if self._owns_pool:
      self.pool.close()


def is_scored(result: dict[str, Any]) -> bool:
  """False for an infrastructure failure: the pair has no score, not a score of 0."""
  return not str(result.get("error") or "").startswith(INFRA_ERROR)


def not_scored(item: Item, why: str) -> dict[str, Any]:
  """A result for a pair the infrastructure failed to score: every term None."""
  return {
    "task_id": item.task.task_id,
    "sample": item.sample,
    **{k: None for k in RECORD_TERMS},
    "error": why,
    "matches": [],
    "terms": None,
  }


def with_lam(result: dict[str, Any], lam: float | None, sample: int) -> dict[str, Any]:
  """A copy of `result` for `sample`, its blended rewards recomputed for `lam` (None: as is)."""
  out = dict(result, sample=sample)
  if lam is not None and out.get("terms") is not None:
    blends = reward_recipes.blended_columns(out["terms"], lam)
    out["terms"] = {**out["terms"], **blends}
    out["reward"] = blends["reward"]
  return out


class _TaskDigests:
  """Content hash per task object (the cache key must change when a task's content does)."""

  def __init__(self, capacity: int = 65_536):
    self._capacity = capacity
    self._by_id: dict[int, tuple[Task, str]] = {}

  def __call__(self, task: Task) -> str:
    held = self._by_id.get(id(task))
    if held is not None and held[0] is task:
      return held[1]
    payload = json.dumps(task_to_record(task), sort_keys=True, default=repr)
    digest = hashlib.blake2b(payload.encode(), digest_size=16).hexdigest()
    if len(self._by_id) >= self._capacity:
      self._by_id.clear()
    self._by_id[id(task)] = (task, digest)
    return digest


@dataclasses.dataclass
class _Request:
  items: Sequence[Item]
  lam: float | None
  future: concurrent.futures.Future


class ScoringService:
  """Batches concurrent callers into one scorer (see module doc).

  Args:
    backend: `LocalBackend` (this machine's pool) or `client.RemoteScorer` (servers).
    max_batch_items: requests are joined into one batch up to this many items (a larger
      request is one batch of its own).
    cache_items: results remembered across batches (LRU).
    batch_wait_s, batch_gap_s: how long a batch may wait for concurrent callers to join it
      in all, and for the next one to arrive (`_gather`).
  """

  def __init__(
    self,
    backend: Backend,
    *,
    max_batch_items: int = 8192,
    cache_items: int = 65_536,
    batch_wait_s: float = 0.02,
    batch_gap_s: float = 0.002,
  ):
    self.backend = backend
    self._batch_wait_s, self._batch_gap_s = batch_wait_s, batch_gap_s
    self._last_requests = 1
    self._max_batch_items = max_batch_items
    self._cache_items = cache_items
    self._cache: collections.OrderedDict[tuple, dict[str, Any]] = collections.OrderedDict()
    self._digest = _TaskDigests()
    self._queue: collections.deque[_Request] = collections.deque()
    self._cond = threading.Condition()
    self._closing = False
    self._busy = 0  # items of the batch being scored
    self._counts: collections.Counter[str] = collections.Counter()
    self._thread = threading.Thread(target=self._loop, name="precisecoder-scoring", daemon=True)
    self._thread.start()

  # -- callers -----------------------------------------------------------------

  def submit(self, items: Sequence[Item], lam: float | None = None) -> concurrent.futures.Future:
    """A future of one result per item, in order; `lam` re-blends `reward` (None: as scored)."""
    future: concurrent.futures.Future = concurrent.futures.Future()
    with self._cond:
      if self._closing:
        raise RuntimeError("the scoring service is closed")
      self._queue.append(_Request(list(items), lam, future))
      self._cond.notify()
    return future

  def score(
    self, items: Sequence[Item], lam: float | None = None, timeout: float | None = None
  ) -> list[dict[str, Any]]:
    return self.submit(items, lam).result(timeout)

  def pending_items(self) -> int:
    """Items submitted and not yet answered (queued or being scored)."""
    with self._cond:
      return sum(len(r.items) for r in self._queue) + self._busy

  def stats(self) -> dict[str, int]:
    """Batches and items scored, cache hits, results not scored."""
    return dict(self._counts)

  def close(self) -> None:
    """Scores everything already submitted, then stops the thread and the backend."""
    with self._cond:
      self._closing = True
      self._cond.notify()
    self._thread.join()
    self.backend.close()

  # -- the scoring thread --------------------------------------------------------

  def _next_batch(self) -> list[_Request] | None:
    with self._cond:
      while not self._queue and not self._closing:
        self._cond.wait()
      if not self._queue:
        return None
      self._gather()
      batch = [self._queue.popleft()]
      size = len(batch[0].items)
      while self._queue and size + len(self._queue[0].items) <= self._max_batch_items:
        size += len(self._queue[0].items)
        batch.append(self._queue.popleft())
      self._busy = size
      self._last_requests = len(batch)
      return batch

  def _gather(self) -> None:
    """Lets concurrent callers join before a batch starts (else a batch of one would go first
    and the rest would wait for it): waits, up to batch_wait_s in all, until as many
    requests are queued as the last batch had (callers answered together come back a few
    milliseconds apart), then while requests keep arriving less than batch_gap_s apart.
    A lone caller waits one gap. Called holding the lock."""
    deadline = time.monotonic() + self._batch_wait_s

    def full() -> bool:
      return self._closing or sum(len(r.items) for r in self._queue) >= self._max_batch_items

    while len(self._queue) < self._last_requests and not full():
      remaining = deadline - time.monotonic()
      if remaining <= 0:
        return
      self._cond.wait(remaining)
    while not full():
      remaining = deadline - time.monotonic()
      if remaining <= 0:
        return
      queued = len(self._queue)
      self._cond.wait(min(self._batch_gap_s, remaining))
      if len(self._queue) == queued:
        return

  def _loop(self) -> None:
    while (batch := self._next_batch()) is not None:
      try:
        self._score(batch)
      except BaseException as e:  # pylint: disable=broad-except  (never leave a caller waiting)
        for request in batch:
          if not request.future.done():
            request.future.set_exception(e)
      finally:
        with self._cond:
          self._busy = 0

  def _key(self, item: Item) -> tuple:
    return (self._digest(item.task), item.program, item.error)

  def _score(self, batch: list[_Request]) -> None:
    found: dict[tuple, dict[str, Any]] = {}
    todo: dict[tuple, Item] = {}
    for request in batch:
      for item in request.items:
        key = self._key(item)
        if key in found or key in todo:
          continue
        if key in self._cache:
          self._cache.move_to_end(key)
          found[key] = self._cache[key]
          self._counts["cache_hits"] += 1
        else:
          todo[key] = item
    failure = None
    if todo:
      try:
        fresh = self.backend.results(list(todo.values()))
        if len(fresh) != len(todo):
          raise RuntimeError(f"the backend returned {len(fresh)} results for {len(todo)} items")
      except ConfigurationError:
        raise
      except Exception as e:  # pylint: disable=broad-except  (not scored, never 0)
        failure = f"{INFRA_ERROR}: scoring failed: {type(e).__name__}: {e}"
        logging.warning("precisecoder scoring service: %d items not scored: %s", len(todo), failure)
        fresh = [not_scored(item, failure) for item in todo.values()]
      self._counts["batches"] += 1
      self._counts["items_scored"] += len(todo)
      for key, result in zip(todo, fresh):
        found[key] = result
        if is_scored(result):
          self._cache[key] = result
        else:
          self._counts["not_scored"] += 1
      while len(self._cache) > self._cache_items:
        self._cache.popitem(last=False)
    for request in batch:
      results = [
        with_lam(found[self._key(item)], request.lam, item.sample) for item in request.items
      ]
      request.future.set_result(results)


# One service per backend configuration per process, closed at exit.
_shared: dict[tuple, ScoringService] = {}
_shared_lock = threading.Lock()


def shared(
  *,
  workers: int | None = None,
  epsilon: int | None = None,
  pdb_compat: bool = False,
  reward_urls: Sequence[str] = (),
) -> ScoringService:
  """This process's service for these settings (started on first use, closed at exit):
  this machine's pool, or the reward servers at `reward_urls` (round-robin with retries)."""
  urls = tuple(reward_urls)
  key = (workers, epsilon, pdb_compat, urls)
  with _shared_lock:
    if key not in _shared:
      if urls:
        backend: Backend = client.RemoteScorer(urls, epsilon=epsilon, pdb_compat=pdb_compat)
      else:
        backend = LocalBackend(workers, epsilon=epsilon, pdb_compat=pdb_compat)
      if not _shared:
        atexit.register(shutdown)
      _shared[key] = ScoringService(backend)
    return _shared[key]


def shutdown() -> None:
  """Closes every shared service (and so its pool): finishes what was submitted first."""
  with _shared_lock:
    services = list(_shared.values())
    _shared.clear()
  for service in services:
    service.close()
