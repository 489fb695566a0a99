"""Scoring on reward servers (`precisecoder serve`): round-robin over URLs, with retries.

  scorer = RemoteScorer(["http://10.0.0.5:8000", "http://10.0.0.6:8000"], lam=1/3)
  terms = scorer.score(tasks, programs)      # the same arrays as RewardScorer.score

A batch is cut into one shard per server (and shards of at most `max_items` items); each
shard goes to the next server in turn, carrying the tasks it needs, so a server scores
tasks it was not started with. A shard that fails (connection refused or reset, timeout,
HTTP 5xx) is retried on the next server, `retries` times in all, with a growing pause; then
the batch fails with `RemoteScoringError` naming every attempt. A batch is never scored 0
because a server was down. A server whose settings differ from ours (slack, PDB mode), or
that refuses our token or request (HTTP 4xx), is a `ConfigurationError`: retrying cannot help.
"""

from __future__ import annotations

import concurrent.futures
import http.client
import itertools
import json
import os
import threading
import time
import urllib.parse
from typing import Any, Sequence

import numpy as np

from precisecoder import rewards
from precisecoder.integrations.types import ConfigurationError, Item
from precisecoder.tasks import Task, task_to_record
from precisecoder.intmath import cdiv

TOKEN_ENV = "PRECISECODER_TOKEN"  # bearer token for the servers (and `serve`'s default)


class RemoteScoringError(RuntimeError):
  """Every attempt at a shard failed: the servers are down or overloaded."""


def parse_urls(text: str | Sequence[str]) -> tuple[str, ...]:
  """ "http://a:8000,http://b:8000" (or a list) -> URLs; raises ValueError naming a bad one."""
  urls = [u.strip() for u in (text.split(",") if isinstance(text, str) else text) if u.strip()]
  for url in urls:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
      raise ValueError(f"reward server URL {url!r}: want http://HOST:PORT or https://HOST:PORT")
    try:
      parts.port  # pylint: disable=pointless-statement  (raises on a bad port)
    except ValueError as e:
      raise ValueError(f"reward server URL {url!r}: {e}") from None
  return tuple(u.rstrip("/") for u in urls)


class _Http:
  """One POST/GET to one server; returns the decoded JSON body or raises."""

  def __init__(self, url: str, token: str | None, timeout_s: float):
    parts = urllib.parse.urlsplit(url)
    self.url = url
    self._connection = (
      http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    )
    self._host, self._port = parts.hostname, parts.port
    self._prefix = parts.path.rstrip("/")
    self._token = token
    self._timeout_s = timeout_s

  def call(self, method: str, path: str, payload: Any = None) -> tuple[int, Any]:
    body = None if payload is None else json.dumps(payload).encode()
    headers = {"Content-Type": "application/json"}
    if self._token:
      headers["Authorization"] = f"Bearer {self._token}"
    connection = self._connection(self._host, self._port, timeout=self._timeout_s)
    try:
      connection.request(method, self._prefix + path, body=body, headers=headers)
      response = connection.getresponse()
      data = response.read()
    finally:
      connection.close()
    try:
      decoded = json.loads(data) if data else None
    except ValueError:
      decoded = {"error": data[:300].decode("utf-8", "replace")}
    return response.status, decoded


class RemoteScorer:
  """Scores on reward servers; a drop-in for `RewardScorer.score` / `score_records` and a
  `types.Backend`.

  Args:
    urls: the servers, e.g. ["http://127.0.0.1:8000"].
    epsilon, pdb_compat: must equal the servers' (checked once per server, from /health).
    lam: λ of r_λ (and the other blends), applied by the server per request.
    token: bearer token (default: $PRECISECODER_TOKEN).
    retries: further attempts per shard after the first, each on the next server.
    timeout_s: per request (a large shard on a busy server takes a while).
    max_items: items per request.
  """

  def __init__(
    self,
    urls: str | Sequence[str],
    *,
    epsilon: int | None = None,
    pdb_compat: bool = False,
    lam: float = 1 / 3,
    token: str | None = None,
    retries: int = 3,
    timeout_s: float = 600.0,
    max_items: int = 1024,
    backoff_s: float = 0.5,
  ):
    self.urls = parse_urls(urls)
    if not self.urls:
      raise ValueError("RemoteScorer: no reward server URLs")
    self.epsilon, self.pdb_compat, self.lam = epsilon, pdb_compat, lam
    token = token if token is not None else os.environ.get(TOKEN_ENV) or None
    self._servers = [_Http(u, token, timeout_s) for u in self.urls]
    self._checked: set[str] = set()
    self._turn = itertools.count()
    self._lock = threading.Lock()
    self.retries, self.max_items, self.backoff_s = retries, max_items, backoff_s
    self._executor = concurrent.futures.ThreadPoolExecutor(
      max_workers=len(self.urls), thread_name_prefix="precisecoder-remote"
    )
    self.broken_tasks: dict[str, str] = {}
    self._counts = {"remote_requests": 0, "remote_retries": 0}

  # -- the RewardScorer surface ----------------------------------------------------

  def score(self, tasks: Sequence[Task], programs: Sequence[str | None]) -> dict[str, np.ndarray]:
    """Per-term float32 arrays of shape [N] (`rewards.ARRAY_KEYS`), as `RewardScorer.score`."""
    items = [Item(t, p) for t, p in zip(tasks, programs, strict=True)]
    return rewards.rows_to_arrays([r["terms"] for r in self.results(items)])

  def score_records(
    self,
    tasks: Sequence[Task],
    programs: Sequence[str | None],
    samples: Sequence[int] | None = None,
    errors: Sequence[str | None] | None = None,
  ) -> list[dict[str, Any]]:
    """One score-file line per pair, as `RewardScorer.score_records`."""
    items = [
      Item(t, p, errors[i] if errors else None, samples[i] if samples else 0)
      for i, (t, p) in enumerate(zip(tasks, programs, strict=True))
    ]
    return [{k: v for k, v in r.items() if k != "terms"} for r in self.results(items)]

  def stats(self) -> dict[str, int]:
    return {**self._counts, "broken_tasks": len(self.broken_tasks)}

  # -- the Backend surface -----------------------------------------------------------

  def results(self, items: Sequence[Item]) -> list[dict[str, Any]]:
    """One result (score record + `terms`) per item, in order; raises RemoteScoringError."""
    if not items:
      return []
    per_shard = max(1, min(self.max_items, cdiv(len(items), len(self.urls))))
    shards = [items[i : i + per_shard] for i in range(0, len(items), per_shard)]
    with self._lock:
      first = next(self._turn)
      for _ in shards[1:]:
        next(self._turn)
    futures = [
      self._executor.submit(self._shard, shard, first + i) for i, shard in enumerate(shards)
    ]
    out = [r for f in futures for r in f.result()]
    for r in out:
      error = str(r.get("error") or "")
      if error.startswith(rewards.BROKEN_TASK):
        self.broken_tasks.setdefault(r["task_id"], error[len(rewards.BROKEN_TASK) :])
    return out

  def close(self) -> None:
    self._executor.shutdown(wait=True)

  # -- one shard -------------------------------------------------------------------------

  def _payload(self, items: Sequence[Item]) -> dict[str, Any]:
    tasks: dict[str, Task] = {}
    for item in items:
      seen = tasks.setdefault(item.task.task_id, item.task)
      if seen is not item.task and seen != item.task:
        raise ValueError(f"two different tasks share the task_id {item.task.task_id!r}")
    entries = []
    for item in items:
      entry: dict[str, Any] = {"task_id": item.task.task_id, "sample": item.sample}
      if item.error is not None:
        entry["error"] = item.error
      else:
        entry["program"] = item.program
      entries.append(entry)
    return {
      "items": entries,
      "tasks": [task_to_record(t) for t in tasks.values()],
      "lam": self.lam,
      "terms": True,
    }

  def _shard(self, items: Sequence[Item], turn: int) -> list[dict[str, Any]]:
    payload = self._payload(items)
    failures = []
    for attempt in range(self.retries + 1):
      server = self._servers[(turn + attempt) % len(self._servers)]
      if attempt:
        self._counts["remote_retries"] += 1
        time.sleep(min(self.backoff_s * attempt, 5.0))
      try:
        self._check(server)
        self._counts["remote_requests"] += 1
        status, body = server.call("POST", "/score", payload)
      except (OSError, http.client.HTTPException) as e:  # refused, reset, timed out
        failures.append(f"{server.url}: {type(e).__name__}: {e}")
        continue
      if status == 200 and isinstance(body, dict) and len(body.get("results", ())) == len(items):
        return body["results"]
      why = body.get("error") if isinstance(body, dict) else body
      if 400 <= status < 500 and status != 408:
        raise ConfigurationError(
          f"reward server {server.url} refused the request (HTTP {status}): {why}"
        )
      failures.append(f"{server.url}: HTTP {status}: {why}")
    raise RemoteScoringError(
      f"scoring {len(items)} items failed on every attempt: " + "; ".join(failures)
    )

  def _check(self, server: _Http) -> None:
    """The server's slack and PDB mode must be ours, or its terms would differ from a local
    scorer's (checked once per server; raises OSError while it is unreachable)."""
    if server.url in self._checked:
      return
    status, body = server.call("GET", "/health")
    if status != 200 or not isinstance(body, dict):
      raise OSError(f"health check answered HTTP {status}")
    theirs = (body.get("epsilon"), body.get("pdb_compat"))
    if theirs != (self.epsilon, self.pdb_compat):
      raise ConfigurationError(
        f"reward server {server.url} scores with epsilon={theirs[0]}, "
        f"pdb_compat={theirs[1]}; this run wants epsilon={self.epsilon}, "
        f"pdb_compat={self.pdb_compat} (start it with the same --epsilon/--pdb-compat)"
      )
    self._checked.add(server.url)
