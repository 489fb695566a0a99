"""tunix's `GRPOLearner(reward_fns=...)`: each reward term as a reward function.

  from precisecoder.integrations import tunix as pc
  learner = GRPOLearner(rl_cluster, reward_fns=pc.reward_functions("tasks.jsonl"), ...)

tunix's reward manager calls each as `f(prompts=, completions=, **batch_fields)` (the
dataset's other fields, `task_id` among them, and `mode`) and wants a list of floats: a
completion the infrastructure failed to score is NaN. tunix sums the functions with
`np.nansum` before its advantage, so a NaN term counts as 0 in that sum, and there is no
per-term normalisation (no GDPO): pass one function (`terms=("r_lambda",)`) for PreciseCoder's
r_λ under GRPO.
"""

from __future__ import annotations

import math
from typing import Any, Iterable

from precisecoder.integrations import adapters


def reward_functions(
  tasks: adapters.TasksArg,
  terms: Iterable[str] = ("r_lambda",),
  lam: float = 1 / 3,
  **settings: Any,
) -> list[adapters.TermFunction]:
  """One callable per term, named after it (tunix logs `rewards/<name>`), one shared cache."""
  return adapters.term_functions(tasks, terms, lam, math.nan, **settings)
