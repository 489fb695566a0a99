"""TRL's `GRPOTrainer`: each reward term as a reward function.

  from precisecoder.integrations import trl as pc
  funcs = pc.reward_functions("tasks.jsonl", terms=("unit", "f1"), lam=1/3)
  trainer = GRPOTrainer(model, reward_funcs=funcs, train_dataset=Dataset.from_list(
      pc.dataset_rows("tasks.jsonl")), args=GRPOConfig(
      reward_weights=[2/3, 1/3], multi_objective_aggregation="normalize_then_sum"))  # GDPO

TRL calls each function as `f(prompts=, completions=, completion_ids=, **dataset_columns,
trainer_state=, log_extra=, log_metric=)` and logs it as `rewards/<its __name__>/mean`; the
task comes from the dataset's `task_id` column. A completion the infrastructure failed to
score is None (TRL: NaN, left out of the term's mean and of GDPO's group statistics);
a completion for which every function returns None gets no advantage.
"""

from __future__ import annotations

from typing import Any, Iterable

from precisecoder import prompts
from precisecoder.integrations import adapters


def reward_functions(
  tasks: adapters.TasksArg,
  terms: Iterable[str] = ("unit", "f1"),
  lam: float = 1 / 3,
  **settings: Any,
) -> list[adapters.TermFunction]:
  """One callable per term, named after it, sharing one scoring service and cache.

  `tasks`: a task file path (or comma-separated paths), a list of Tasks or a task_id ->
  Task mapping. `settings`: workers, epsilon, pdb_compat, reward_urls (score on servers).
  """
  return adapters.term_functions(tasks, terms, lam, None, **settings)


def dataset_rows(
  tasks: adapters.TasksArg, *, include_tests: bool = True, thinking: bool = False
) -> list[dict[str, Any]]:
  """TRL's conversational prompt rows, {"prompt": [messages], "task_id"}: our prompt."""
  return [
    {
      "prompt": prompts.debug_messages(t, thinking=thinking, include_tests=include_tests),
      "task_id": t.task_id,
    }
    for t in adapters.task_table(tasks).values()
  ]
