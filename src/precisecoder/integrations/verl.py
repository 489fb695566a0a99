"""verl's custom reward function: `compute_score` (per sample) and `compute_score_batch`
(`reward_manager=batch`). verl loads this file by path and merges
`custom_reward_function.reward_kwargs` into every call:

  FILE=$(python -c 'import precisecoder.integrations.verl as m; print(m.__file__)')
  ... custom_reward_function.path=$FILE
  custom_reward_function.name=compute_score_batch  reward_model.reward_manager=batch
  +custom_reward_function.reward_kwargs.tasks=/data/tasks.jsonl

Each row's `reward_model.ground_truth` is its task_id (`dataset_rows` writes such rows). The
result is a dict: `score` (the `reward` term, r_λ by default) and one key per term, which
verl logs and which GDPO reads (`algorithm.adv_estimator=gdpo
algorithm.gdpo_reward_keys=[unit,f1] algorithm.gdpo_reward_weights=[0.667,0.333]`). A
completion the infrastructure failed to score is NaN in every key: verl has no "not
scored", and a NaN is seen where a 0 would train silently.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Sequence

from precisecoder import prompts
from precisecoder.integrations import adapters

DEFAULT_TERMS = ("unit", "precision", "recall", "f1", "r_lambda", "edit_lines")


def compute_score(
  data_source: Any, solution_str: str, ground_truth: Any, extra_info: Any = None, **kwargs: Any
) -> dict[str, float]:
  """verl's per-sample contract; `kwargs` are our settings (see `compute_score_batch`)."""
  return compute_score_batch([data_source], [solution_str], [ground_truth], [extra_info], **kwargs)[
    0
  ]


def compute_score_batch(
  data_sources: Sequence[Any],
  solution_strs: Sequence[str],
  ground_truths: Sequence[Any],
  extra_infos: Sequence[Any] | None = None,
  *,
  tasks: adapters.TasksArg | None = None,
  terms: Iterable[str] = DEFAULT_TERMS,
  reward: str = "r_lambda",
  lam: float = 1 / 3,
  reward_urls: str | Sequence[str] = "",
  workers: int | None = None,
  **unused: Any,
) -> list[dict[str, float]]:
  """verl's batch contract: one {"score", term: value, ...} per sample.

  `tasks`: task file(s) (default: $PRECISECODER_TASKS); `terms`: the keys besides `score`;
  `reward`: the term in `score`; `reward_urls`: score on reward servers.
  """
  del data_sources, extra_infos, unused  # verl passes more than a rule reward needs
  terms = adapters.check_terms(terms)
  adapters.check_terms([reward])
  if tasks is None:
    tasks = adapters.settings_from_environment()["tasks"]
  scorer = adapters.Scorer(tasks, lam=lam, workers=workers, reward_urls=reward_urls)
  results = scorer.results(list(ground_truths), list(solution_strs), what="ground_truth")
  return [
    {
      "score": adapters.term_value(r, reward, math.nan),
      **{t: adapters.term_value(r, t, math.nan) for t in terms},
    }
    for r in results
  ]


def dataset_rows(
  tasks: adapters.TasksArg,
  *,
  data_source: str = "precisecoder",
  include_tests: bool = True,
  thinking: bool = False,
) -> list[dict[str, Any]]:
  """verl's RL parquet rows: our prompt as chat messages, the task_id as ground truth."""
  return [
    {
      "data_source": data_source,
      "prompt": prompts.debug_messages(t, thinking=thinking, include_tests=include_tests),
      "ability": "code",
      "reward_model": {"style": "rule", "ground_truth": t.task_id},
      "extra_info": {"task_id": t.task_id},
    }
    for t in adapters.task_table(tasks).values()
  ]
