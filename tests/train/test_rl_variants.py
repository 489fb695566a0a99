"""The loss variants through the RL loop on the tiny random model: one run with GSPO, a
straight-through KL estimate, token TIS and the overlong filter logs what each adds."""

from precisecoder.train import config as base
from precisecoder.train import metrics, rl


def test_one_run_with_every_variant_logs_their_metrics(tmp_path):
  cfg = base.default("tiny")
  cfg.rl.update(max_new_tokens=16, policy_loss="gspo", kl_beta=0.05, kl_estimator="k3+",
                is_correction="token_tis", is_cap=2.0, overlong="filter")
  cfg.train.update(steps=1, eval_every=0, report=False)
  base.validate(cfg)
  assert rl.train(cfg, str(tmp_path)) == 0
  (record,) = metrics.read_metrics(tmp_path / "metrics.jsonl")
  # kl_beta > 0: the update runs whatever the rewards (the KL term has a gradient).
  assert record["skipped_update"] == 0
  for key in ("train/kl", "train/is_log_ratio_mean", "train/is_log_ratio_max_abs",
              "train/is_truncated_fraction", "truncated_fraction"):
    assert key in record, sorted(record)
  # The sampler and the learner hold the same weights: their log-probs differ by numerics.
  assert abs(record["train/is_log_ratio_mean"]) < 1e-3
  assert record["train/is_log_ratio_max_abs"] < 1e-2
  assert 0 <= record["truncated_fraction"] <= 1
