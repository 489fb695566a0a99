"""The loss variants through the RL loop on the tiny random model: one run with GSPO, a
straight-through KL estimate, token TIS and the overlong filter logs what each adds."""

import pytest

from precisecoder.train import config as train_config
from precisecoder.train import metrics, rl


def test_one_run_with_every_variant_logs_their_metrics(tmp_path):
  cfg = train_config.default("tiny")
  cfg.rl.update(
    max_new_tokens=16,
    policy_loss="gspo",
    kl_beta=0.05,
    kl_estimator="k3+",
    is_correction="token_tis",
    is_cap=2.0,
    overlong="filter",
  )
  cfg.train.update(steps=1, eval_every=0, report=False)
  train_config.validate(cfg)
  assert rl.train(cfg, str(tmp_path)) == 0
  (record,) = metrics.read_metrics(tmp_path / "metrics.jsonl")
  # kl_beta > 0: the update runs whatever the rewards (the KL term has a gradient).
  assert record["skipped_update"] == 0
  for key in (
    "train/kl",
    "train/is_log_ratio_mean",
    "train/is_log_ratio_max_abs",
    "train/is_truncated_fraction",
    "truncated_fraction",
  ):
    assert key in record, sorted(record)
  # The sampler and the learner hold the same weights: their log-probs differ by numerics.
  assert abs(record["train/is_log_ratio_mean"]) < 1e-3
  assert record["train/is_log_ratio_max_abs"] < 1e-2
  assert 0 <= record["truncated_fraction"] <= 1


def _dynamic_config(k=0, **train):
  cfg = train_config.default("tiny")
  cfg.rl.update(
    max_new_tokens=8,
    kl_beta=0.05,
    dynamic_sampling=True,
    dynamic_sampling_max_rounds=1,
    max_staleness=k,
  )
  cfg.train.update(eval_every=0, report=False, **train)
  return cfg


@pytest.mark.slow  # three short runs, about 1.5 CPU-minutes
@pytest.mark.parametrize("k", [0, 1])
def test_dynamic_sampling_resumes_exactly(tmp_path, k):
  """Dynamic sampling's extra draws come from the checkpointed task iterator: stopped after
  step 1 and resumed, step 2 draws, samples and learns what the uninterrupted run did (k = 1:
  step 2's rounds were drawn and sampled in step 1, and are in the checkpoint)."""
  straight, resumed = tmp_path / "straight", tmp_path / "resumed"
  assert rl.train(_dynamic_config(k, steps=2), str(straight)) == 0
  assert rl.train(_dynamic_config(k, steps=2, stop_after=1), str(resumed)) == 0
  assert rl.train(_dynamic_config(k, steps=2), str(resumed)) == 0
  drop = ("time/", "reward_exposed_fraction")
  records = [
    [
      {k: v for k, v in r.items() if not k.startswith(drop)}
      for r in metrics.read_metrics(d / "metrics.jsonl")
    ]
    for d in (straight, resumed)
  ]
  assert records[0] == records[1]
  first = records[0][0]
  quota = _dynamic_config().rl.prompts_per_step
  if first["dynamic/groups_kept"] < quota:  # short: the rounds ran to their bound
    assert first["dynamic/rounds"] == 2
  assert first["dynamic/groups_kept"] + first["dynamic/groups_filled"] == quota
  assert first["dynamic/groups_drawn"] == quota * first["dynamic/rounds"]
