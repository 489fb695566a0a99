"""OpenRLHF's reward file: `--reward.remote_url /path/to/this/file.py` makes OpenRLHF call
`reward_func(queries, prompts, labels)` here (in threads, a sample at a time: the scoring
service batches them). Or run `precisecoder serve` and pass its `/get_reward` URL.

  export PRECISECODER_TASKS=/data/tasks.jsonl   # labels: task ids (--data.label_key task_id)
  export PRECISECODER_REWARD=r_lambda PRECISECODER_LAM=0.333   # optional
  export PRECISECODER_REWARD_URLS=http://host:8000     # optional: score on reward servers
  FILE=$(python -c 'import precisecoder.integrations.openrlhf as m; print(m.__file__)')
  ... --reward.remote_url $FILE --data.label_key task_id

Each query is prompt + response decoded together; the response is what follows the prompt.
Returns {"rewards", "scores", "extra_logs": {term: values}}: one value per query. A response
the infrastructure failed to score has reward None, which OpenRLHF cannot train on (its
sample fails loudly rather than learning from a made-up 0). OpenRLHF advantages take one
scalar: GDPO's per-term normalisation is not available there.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

from precisecoder.integrations import adapters

_scorers: dict[tuple, adapters.Scorer] = {}


def reward_func(
  queries: Sequence[str], prompts: Sequence[str], labels: Sequence[Any]
) -> dict[str, Any]:
  """OpenRLHF's contract; settings from the environment (module doc)."""
  settings = adapters.settings_from_environment()
  key = tuple(sorted(settings.items()))
  if key not in _scorers:
    _scorers[key] = adapters.Scorer(**settings)
  reward = os.environ.get(adapters.ENV_REWARD, "r_lambda")
  return adapters.openrlhf_rewards(
    _scorers[key], list(queries), list(prompts), list(labels), reward
  )
