"""The reward server's ASGI app (Starlette; `precisecoder serve` runs it on uvicorn).

  POST /score       {"items": [{"task_id", "completion" | "program", "sample"?, "error"?}],
                     "tasks"?: [task records], "lam"?: λ, "terms"?: bool}
                    -> {"results": [score record (+ "terms" if asked), one per item]}
  POST /get_reward  OpenRLHF: {"query": [...], "prompts": [...], "labels": [task_id, ...]}
                    -> {"rewards": [...], "scores": [...], "extra_logs": {term: [...]}}
  POST /feedback    {"task_id", "completion" | "program"} -> the visible tests' outcome and
                    the agent's feedback message (`precisecoder serve` wires feedback.as_json;
                    501 on a server made without a feedback function)
  GET  /health      settings (slack, PDB mode, λ, workers), tasks loaded, queue, counters

Every request is scored through one `ScoringService`, so concurrent requests are joined into
one batch for the pool. `tasks` in a /score request are used for that request (looked up
before the tasks the server was started with): a trainer can score tasks the server has never
seen. An item's `error` marks it unscorable up front (it scores 0 with that reason, as in
`precisecoder score`). `"terms": true` adds to each record every reward array our trainer
learns from (what `client.RemoteScorer` needs). A score record whose `error` starts with
"infra_error" was not scored (its terms may be null).

Bad input is a 4xx whose `error` names the field ("items[3].task_id: unknown task 'x'"): 400
for a body that is not JSON, 401 for a missing or wrong bearer token, 413 for a body or item
count over the limits, 422 for a field that cannot work. A request still waiting for its
results at the deadline gets 504; its batch still finishes (and is cached, so a retry is
quick). Nothing a client sends crashes the server.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import hmac
import json
from typing import Any, Callable, Mapping

import anyio
from absl import logging
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from precisecoder import predictions
from precisecoder.integrations import adapters, service as service_lib
from precisecoder.tasks import Task, TaskError, parse_task

# (execution pool, task, program) -> a JSON-able outcome of the task's visible tests.
FeedbackFn = Callable[[Any, Task, str], Mapping[str, Any]]


class HTTPError(Exception):
  def __init__(self, status: int, message: str):
    super().__init__(message)
    self.status = status


def _error(status: int, message: str) -> JSONResponse:
  headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
  return JSONResponse({"error": message}, status_code=status, headers=headers)


class RewardServer:
  """The app's state and handlers; `app` is the ASGI application.

  Args:
    service: the scoring service (a `LocalBackend` over this machine's pool); closed when the
      app shuts down, after the requests in flight have their results.
    tasks: task_id -> Task, loaded at start.
    settings: reported by /health (epsilon, pdb_compat, workers): clients check them.
    lam: λ for requests that do not name one.
    reward: the term OpenRLHF's /get_reward returns as `rewards`.
    token: bearer token required on every endpoint but /health (None: no auth).
    max_items, max_body_bytes: per request; over them is 413.
    deadline_s: how long a request may wait for its results before a 504.
    max_program_lines: the size cap of `precisecoder score --max-program-lines`.
    feedback: the visible-test feedback of the multi-turn agent (None: /feedback answers 501).
  """

  def __init__(
    self,
    service: service_lib.ScoringService,
    tasks: Mapping[str, Task],
    *,
    settings: Mapping[str, Any],
    lam: float = 1 / 3,
    reward: str = "r_lambda",
    token: str | None = None,
    max_items: int = 4096,
    max_body_bytes: int = 64 << 20,
    deadline_s: float = 600.0,
    max_program_lines: int = predictions.MAX_PROGRAM_LINES,
    feedback: FeedbackFn | None = None,
  ):
    adapters.check_terms([reward])
    self.service, self.tasks, self.settings = service, dict(tasks), dict(settings)
    self.lam, self.reward, self.token = lam, reward, token
    self.max_items, self.max_body_bytes, self.deadline_s = max_items, max_body_bytes, deadline_s
    self.max_program_lines = max_program_lines
    self.feedback = feedback
    self.requests: collections.Counter[str] = collections.Counter()
    self.app = Starlette(
      routes=[
        Route("/score", self._endpoint(self.score), methods=["POST"]),
        Route("/get_reward", self._endpoint(self.get_reward), methods=["POST"]),
        Route("/feedback", self._endpoint(self.give_feedback), methods=["POST"]),
        Route("/health", self.health, methods=["GET"]),
      ],
      lifespan=self._lifespan,
    )

  @contextlib.asynccontextmanager
  async def _lifespan(self, app):  # pylint: disable=unused-argument
    yield
    await anyio.to_thread.run_sync(self.service.close)  # in-flight batches finish first

  # -- plumbing ------------------------------------------------------------------------

  def _endpoint(self, handler):
    async def endpoint(request: Request) -> JSONResponse:
      self.requests[request.url.path] += 1
      try:
        self._authorize(request)
        body = await self._json(request)
        return JSONResponse(await handler(body))
      except HTTPError as e:
        self.requests[f"http_{e.status}"] += 1
        return _error(e.status, str(e))
      except Exception as e:  # pylint: disable=broad-except  (a failed batch: say so, go on)
        logging.exception("reward server: %s failed", request.url.path)
        self.requests["http_500"] += 1
        return _error(500, f"scoring failed: {type(e).__name__}: {e}")

    return endpoint

  def _authorize(self, request: Request) -> None:
    if self.token is None:
      return
    given = request.headers.get("authorization", "")
    if not hmac.compare_digest(given.encode(), f"Bearer {self.token}".encode()):
      raise HTTPError(401, "Authorization: missing or wrong bearer token")

  async def _json(self, request: Request) -> Any:
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > self.max_body_bytes:
      raise HTTPError(413, f"body: {length} bytes exceed the limit of {self.max_body_bytes}")
    chunks, size = [], 0
    async for chunk in request.stream():
      size += len(chunk)
      if size > self.max_body_bytes:
        raise HTTPError(413, f"body: over the limit of {self.max_body_bytes} bytes")
      chunks.append(chunk)
    try:
      return json.loads(b"".join(chunks))
    except ValueError as e:  # UnicodeDecodeError is one
      raise HTTPError(400, f"body: not valid JSON ({e})") from None

  async def _results(
    self, items: list[service_lib.Item], lam: float | None
  ) -> list[dict[str, Any]]:
    try:
      future = self.service.submit(items, lam)
    except RuntimeError as e:  # closed: shutting down
      raise HTTPError(503, str(e)) from None
    try:
      return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(future)), self.deadline_s)
    except (asyncio.TimeoutError, TimeoutError):
      raise HTTPError(
        504,
        f"deadline: no results within {self.deadline_s:g} s; the batch goes "
        "on and is cached, so a retry is quick",
      ) from None

  # -- fields ----------------------------------------------------------------------------

  def _request_tasks(self, body: Mapping[str, Any]) -> dict[str, Task]:
    records = body.get("tasks", [])
    if not isinstance(records, list):
      raise HTTPError(422, "tasks: must be a list of task records")
    out = {}
    for i, record in enumerate(records):
      try:
        task = parse_task(record, f"tasks[{i}]")
      except TaskError as e:
        raise HTTPError(422, str(e)) from None
      out[task.task_id] = task
    return out

  def _lam(self, body: Mapping[str, Any]) -> float | None:
    """The request's λ; None: the server's own (the scorer's, no re-blend needed)."""
    if "lam" not in body:
      return None
    lam = body["lam"]
    if isinstance(lam, bool) or not isinstance(lam, (int, float)) or not 0 <= lam <= 1:
      raise HTTPError(422, f"lam: must be a number in [0, 1], got {lam!r}")
    return float(lam)

  def _list(self, body: Any, field: str) -> list:
    if not isinstance(body, dict):
      raise HTTPError(422, f"body: expected a JSON object with {field!r}")
    values = body.get(field)
    if not isinstance(values, list):
      raise HTTPError(422, f"{field}: must be a list")
    if len(values) > self.max_items:
      raise HTTPError(413, f"{field}: {len(values)} items exceed the limit of {self.max_items}")
    return values

  def _task(self, task_id: Any, field: str, extra: Mapping[str, Task] | None = None) -> Task:
    if not isinstance(task_id, str):
      raise HTTPError(422, f"{field}: must be a string task_id, got {task_id!r}")
    task = (extra or {}).get(task_id) or self.tasks.get(task_id)
    if task is None:
      raise HTTPError(
        422,
        f"{field}: unknown task {task_id!r} (not in the server's task files "
        "nor in this request's 'tasks')",
      )
    return task

  def _program(self, entry: Mapping[str, Any], field: str) -> tuple[str | None, str | None]:
    program, error = predictions.resolve(entry, self.max_program_lines)
    if error == predictions.NO_PROGRAM:
      raise HTTPError(422, f"{field}: needs a string 'completion' or 'program'")
    return program, error

  # -- endpoints ---------------------------------------------------------------------------

  async def score(self, body: Any) -> dict[str, Any]:
    entries = self._list(body, "items")
    extra, lam = self._request_tasks(body), self._lam(body)
    items, counts = [], collections.Counter()
    for i, entry in enumerate(entries):
      field = f"items[{i}]"
      if not isinstance(entry, dict):
        raise HTTPError(422, f"{field}: expected an object")
      task = self._task(entry.get("task_id"), f"{field}.task_id", extra)
      sample = entry.get("sample", counts[task.task_id])
      counts[task.task_id] += 1
      if type(sample) is not int or sample < 0:
        raise HTTPError(422, f"{field}.sample: must be a non-negative integer, got {sample!r}")
      if entry.get("error") is not None:
        if not isinstance(entry["error"], str):
          raise HTTPError(422, f"{field}.error: must be a string")
        program, error = None, entry["error"]
      else:
        program, error = self._program(entry, field)
      items.append(service_lib.Item(task, program, error, sample))
    with_terms = body.get("terms", False)
    if not isinstance(with_terms, bool):
      raise HTTPError(422, f"terms: must be true or false, got {with_terms!r}")
    results = await self._results(items, lam)
    if not with_terms:
      results = [{k: v for k, v in r.items() if k != "terms"} for r in results]
    return {"results": results}

  async def get_reward(self, body: Any) -> dict[str, Any]:
    query, prompts, labels = (self._list(body, f) for f in ("query", "prompts", "labels"))
    try:
      completions = adapters.openrlhf_completions(query, prompts, labels)
    except ValueError as e:
      raise HTTPError(422, str(e)) from None
    items = []
    for i, (label, completion) in enumerate(zip(labels, completions)):
      task = self._task(label, f"labels[{i}]")
      items.append(adapters.items_for([task], [completion])[0])
    results = await self._results(items, self._lam(body))
    return adapters.openrlhf_response(results, self.reward, log_missing=None)

  async def give_feedback(self, body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
      raise HTTPError(422, "body: expected a JSON object with 'task_id'")
    task = self._task(body.get("task_id"), "task_id")
    program, error = self._program(body, "body")
    if error is not None:
      raise HTTPError(413, f"program: {error}")
    if self.feedback is None:
      raise HTTPError(501, "feedback: visible-test feedback is not wired into this server yet")
    pool = getattr(self.service.backend, "pool", None)
    outcome = await anyio.to_thread.run_sync(self.feedback, pool, task, program)
    return {"task_id": task.task_id, **outcome}

  async def health(self, request: Request) -> JSONResponse:  # pylint: disable=unused-argument
    stats = getattr(self.service.backend, "stats", dict)()
    return JSONResponse(
      {
        "status": "ok",
        **self.settings,
        "lam": self.lam,
        "reward": self.reward,
        "tasks": len(self.tasks),
        "pending_items": self.service.pending_items(),
        "service": self.service.stats(),
        "scorer": stats,
        "requests": dict(self.requests),
      }
    )
