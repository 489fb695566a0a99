"""What every trainer adapter shares: task lookup, completion text -> program, reward terms
as named callables over one scoring service, and the OpenRLHF reward payload.

Reward terms (`TERMS`, the names the callables carry and trainers log under):
  unit, precision, recall, recall_gated, f1, r_lambda (= (1 − λ)·unit + λ·F1, score's
  `reward`), edit_lines (lines edited: a cost; give it a negative weight), noop.
Values are our trainer's reward arrays (`RewardScorer.term_row`): on a clean task precision,
recall and F1 are 0 (score files write null there). A pair the infrastructure failed to
score is None (TRL) or NaN (verl, tunix, OpenRLHF's extra logs), never 0.
"""

from __future__ import annotations

import math
import os
import pathlib
import threading
from typing import Any, Iterable, Mapping, Sequence

from precisecoder import predictions
from precisecoder.integrations import service as service_lib
from precisecoder.tasks import Task, load_tasks

# term name -> key in a result's `terms` (rewards.ARRAY_KEYS)
TERMS = {
  "unit": "unit",
  "precision": "precision",
  "recall": "recall",
  "recall_gated": "recall_gated",
  "f1": "f1",
  "r_lambda": "reward",
  "edit_lines": "edit_lines",
  "noop": "noop",
}

TasksArg = str | os.PathLike | Sequence[Task] | Mapping[str, Task]

# Settings for adapters that a trainer loads by file path and calls with fixed arguments
# (OpenRLHF's reward_func; verl's compute_score when reward_kwargs do not say).
ENV_TASKS = "PRECISECODER_TASKS"  # task file(s), comma-separated
ENV_REWARD_URLS = "PRECISECODER_REWARD_URLS"  # reward servers, comma-separated ("": local)
ENV_LAM = "PRECISECODER_LAM"
ENV_WORKERS = "PRECISECODER_WORKERS"
ENV_REWARD = "PRECISECODER_REWARD"  # the term OpenRLHF trains on (default r_lambda)

_loaded: dict[tuple[str, ...], dict[str, Task]] = {}
_loaded_lock = threading.Lock()


def task_table(tasks: TasksArg) -> dict[str, Task]:
  """task_id -> Task from task file path(s) (loaded once per process), Tasks or a mapping."""
  if isinstance(tasks, Mapping):
    return dict(tasks)
  if isinstance(tasks, (str, os.PathLike)):
    paths = tuple(str(pathlib.Path(p)) for p in str(tasks).split(",") if p)
    with _loaded_lock:
      if paths not in _loaded:
        _loaded[paths] = {t.task_id: t for p in paths for t in load_tasks(p)}
      return _loaded[paths]
  return {t.task_id: t for t in tasks}


def lookup(table: Mapping[str, Task], task_ids: Iterable[Any], what: str) -> list[Task]:
  """The task of each id; a missing or unknown id is a ValueError naming it (bad data, not an
  infrastructure failure: it must not pass as 'not scored')."""
  out = []
  for i, task_id in enumerate(task_ids):
    task = table.get(task_id) if isinstance(task_id, str) else None
    if task is None:
      raise ValueError(f"{what}[{i}]: unknown task_id {task_id!r} ({len(table)} tasks loaded)")
    out.append(task)
  return out


def completion_text(completion: Any) -> str:
  """The model's answer as text: a string, or a conversation's last assistant message (TRL's
  conversational completions: [{"role": "assistant", "content": ...}])."""
  if isinstance(completion, str):
    return completion
  if isinstance(completion, Sequence):
    for message in reversed(completion):
      if isinstance(message, Mapping) and message.get("role", "assistant") == "assistant":
        content = message.get("content")
        if isinstance(content, str):
          return content
        if isinstance(content, Sequence):  # multimodal parts: [{"type": "text", "text": ...}]
          return "".join(p.get("text", "") for p in content if isinstance(p, Mapping))
  raise TypeError(
    f"a completion must be a string or a list of chat messages, not {type(completion).__name__}"
  )


def items_for(tasks: Sequence[Task], completions: Sequence[Any]) -> list[service_lib.Item]:
  """One scoring item per (task, completion), the program extracted as `score` does."""
  items = []
  for task, completion in zip(tasks, completions, strict=True):
    program, error = predictions.resolve({"completion": completion_text(completion)})
    items.append(service_lib.Item(task, program, error))
  return items


def term_value(result: Mapping[str, Any], term: str, missing: float | None) -> float | None:
  """`term` of one result; `missing` (None or NaN) when it was not scored."""
  if not service_lib.is_scored(result) or result.get("terms") is None:
    return missing
  return float(result["terms"][TERMS[term]])


def check_terms(terms: Iterable[str]) -> tuple[str, ...]:
  terms = tuple(terms)
  unknown = [t for t in terms if t not in TERMS]
  if unknown or not terms:
    raise ValueError(f"unknown reward term(s) {unknown or '(none)'}; known: {', '.join(TERMS)}")
  return terms


class Scorer:
  """Completions of known tasks -> results, through this process's shared service."""

  def __init__(
    self,
    tasks: TasksArg,
    *,
    lam: float = 1 / 3,
    workers: int | None = None,
    epsilon: int | None = None,
    pdb_compat: bool = False,
    reward_urls: str | Sequence[str] = (),
  ):
    if not 0 <= lam <= 1:
      raise ValueError(f"lam must be in [0, 1], got {lam}")
    from precisecoder.integrations import client  # pylint: disable=import-outside-toplevel

    self.table = task_table(tasks)
    self.lam = lam
    self._settings = dict(
      workers=workers,
      epsilon=epsilon,
      pdb_compat=pdb_compat,
      reward_urls=client.parse_urls(reward_urls),
    )

  @property
  def service(self) -> service_lib.ScoringService:
    return service_lib.shared(**self._settings)  # started on first use, once per process

  def results(
    self, task_ids: Sequence[Any], completions: Sequence[Any], what: str = "task_id"
  ) -> list[dict[str, Any]]:
    tasks = lookup(self.table, task_ids, what)
    return self.service.score(items_for(tasks, completions), lam=self.lam)


class TermFunction:
  """One reward term as a trainer's reward function: `f(prompts=, completions=, task_id=,
  **columns)` -> one value per completion. Its `__name__` is the term (trainers log under it)."""

  def __init__(self, term: str, scorer: Scorer, missing: float | None):
    self.term = check_terms([term])[0]
    self.__name__ = term
    self.scorer = scorer
    self.missing = missing

  def __call__(
    self,
    prompts: Sequence[Any] | None = None,
    completions: Sequence[Any] | None = None,
    task_id: Sequence[Any] | None = None,
    **columns: Any,
  ) -> list[float | None]:
    del prompts, columns  # the task carries everything the reward needs
    if completions is None:
      raise TypeError(f"reward function {self.term!r}: no completions passed")
    if task_id is None:
      raise ValueError(
        f"reward function {self.term!r}: the dataset has no 'task_id' column; "
        "each row must name its task (precisecoder.integrations.*.dataset_rows)"
      )
    return [
      term_value(r, self.term, self.missing)
      for r in self.scorer.results(list(task_id), list(completions))
    ]

  def __repr__(self) -> str:
    return f"<precisecoder reward term {self.term!r}, λ={self.scorer.lam:.4g}>"


def term_functions(
  tasks: TasksArg, terms: Iterable[str], lam: float, missing: float | None, **settings: Any
) -> list[TermFunction]:
  scorer = Scorer(tasks, lam=lam, **settings)
  return [TermFunction(t, scorer, missing) for t in check_terms(terms)]


def settings_from_environment() -> dict[str, Any]:
  """Scorer settings for adapters loaded by file path (OpenRLHF, verl without kwargs)."""
  tasks = os.environ.get(ENV_TASKS)
  if not tasks:
    raise ValueError(f"set {ENV_TASKS} to the task file(s) whose task_ids label the data")
  settings: dict[str, Any] = {"tasks": tasks, "reward_urls": os.environ.get(ENV_REWARD_URLS, "")}
  if os.environ.get(ENV_LAM):
    settings["lam"] = float(os.environ[ENV_LAM])
  if os.environ.get(ENV_WORKERS):
    settings["workers"] = int(os.environ[ENV_WORKERS])
  return settings


# ---------------------------------------------------------------------------
# OpenRLHF's reward payload (the server's /get_reward and openrlhf.reward_func)
# ---------------------------------------------------------------------------


def completion_from_query(query: str, prompt: str) -> str | None:
  """OpenRLHF sends `query` = prompt + response decoded together: the response, or None
  when the prompt cannot be found in it (the completion cannot be told apart)."""
  if query.startswith(prompt):
    return query[len(prompt) :]
  tail = prompt[-200:]  # decoding may respace the prompt's start; its end is what we need
  at = query.rfind(tail) if tail else -1
  return query[at + len(tail) :] if at >= 0 else None


def openrlhf_completions(
  query: Sequence[Any], prompts: Sequence[Any], labels: Sequence[Any]
) -> list[str]:
  """The response in each of OpenRLHF's queries; ValueError naming the field if malformed."""
  for name, values in (("query", query), ("prompts", prompts), ("labels", labels)):
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
      raise ValueError(f"{name}: must be a list of strings")
  if not len(query) == len(prompts) == len(labels):
    raise ValueError(
      f"query, prompts and labels must have one entry each per sample; got "
      f"{len(query)}, {len(prompts)} and {len(labels)}"
    )
  completions = []
  for i, (q, p) in enumerate(zip(query, prompts)):
    completion = completion_from_query(q, p)
    if completion is None:
      raise ValueError(
        f"query[{i}]: does not contain prompts[{i}]; cannot tell the completion from the prompt"
      )
    completions.append(completion)
  return completions


def openrlhf_response(
  results: Sequence[Mapping[str, Any]],
  reward: str = "r_lambda",
  log_missing: float | None = math.nan,
) -> dict[str, Any]:
  """{"rewards", "scores", "extra_logs"}: the `reward` term per query (None when not scored)
  and every term in extra_logs (`log_missing` when not scored: NaN in-process, None in JSON)."""
  values = [term_value(r, reward, None) for r in results]
  return {
    "rewards": values,
    "scores": values,
    "extra_logs": {t: [term_value(r, t, log_missing) for r in results] for t in TERMS},
  }


def openrlhf_rewards(
  scorer: Scorer,
  query: Sequence[Any],
  prompts: Sequence[Any],
  labels: Sequence[Any],
  reward: str = "r_lambda",
) -> dict[str, Any]:
  """OpenRLHF's reward payload -> its response, scored in this process (or on servers)."""
  check_terms([reward])
  completions = openrlhf_completions(query, prompts, labels)
  return openrlhf_response(scorer.results(labels, completions, what="labels"), reward)
