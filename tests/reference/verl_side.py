"""verl's side of tests/reference/test_verl_reference.py: run in verl's environment
(scripts/verl_env.sh -> .venv-verl), it reads the cases as JSON on stdin, computes each with
verl's own functions (`verl.trainer.ppo.core_algos`, `rollout_corr_helper`) and writes their
results as JSON on stdout. It imports nothing of ours: the comparison is the test's."""

import json
import sys

import numpy as np
import torch
from verl.trainer.ppo import core_algos, rollout_corr_helper
from verl.workers.config import ActorConfig


def _t(x):
  return torch.tensor(np.asarray(x, np.float32))


def policy(case):
  """verl's clipped surrogate (`vanilla`: PPO, `gspo`) and its gradient in log_prob."""
  logp = _t(case["logp"]).requires_grad_(True)
  mask = _t(case["mask"])
  adv = _t(case["advantages"])[:, None].expand_as(mask)
  config = ActorConfig(
    strategy="fsdp",
    clip_ratio=case["clip_low"],
    clip_ratio_low=case["clip_low"],
    clip_ratio_high=case["clip_high"],
    # Dual-clip's bound, out of reach of the cases' ratios (ours has none).
    clip_ratio_c=1e9,
    rollout_n=1,
    ppo_mini_batch_size=1,
    ppo_micro_batch_size_per_gpu=1,
    use_dynamic_bsz=False,
  )
  fn = core_algos.get_policy_loss_fn(case["verl_loss"])
  weights = None if case["weights"] is None else _t(case["weights"])
  loss, metrics = fn(
    old_log_prob=_t(case["old"]),
    log_prob=logp,
    advantages=adv,
    response_mask=mask,
    loss_agg_mode=case["aggregation"],
    config=config,
    rollout_is_weights=weights,
  )
  loss.backward()
  return {
    "loss": loss.item(),
    "clip_fraction": metrics["actor/pg_clipfrac"],
    "grad": logp.grad.tolist(),
  }


def kl(case):
  """verl's `kl_penalty` per token and the gradient of its sum in log_prob."""
  logp = _t(case["logp"]).requires_grad_(True)
  value = core_algos.kl_penalty(logp, _t(case["ref"]), case["verl_name"])
  value.sum().backward()
  return {"value": value.tolist(), "grad": logp.grad.tolist()}


def aggregate(case):
  loss = core_algos.agg_loss(_t(case["values"]), _t(case["mask"]), case["aggregation"])
  return {"loss": loss.item()}


def grpo(case):
  """GRPO / Dr. GRPO: one outcome reward per response (on its last token)."""
  rewards = _t(case["rewards"])[:, None]
  index = np.repeat(np.arange(len(case["rewards"]) // case["group"]), case["group"])
  adv, _ = core_algos.compute_grpo_outcome_advantage(
    rewards,
    torch.ones_like(rewards),
    index,
    epsilon=case["eps"],
    norm_adv_by_std_in_grpo=case["scale_std"],
  )
  return {"advantages": adv[:, 0].tolist()}


def gdpo(case):
  """GDPO from per-term rewards, each on the response's one token."""
  n = len(next(iter(case["terms"].values())))
  index = np.repeat(np.arange(n // case["group"]), case["group"])
  config = {
    "gdpo_reward_keys": list(case["terms"]),
    "gdpo_reward_weights": [case["weights"][k] for k in case["terms"]],
  }
  batch = {
    "prompts": torch.zeros(n, 1, dtype=torch.long),
    "attention_mask": torch.ones(n, 2, dtype=torch.long),
  }
  response_mask = torch.ones(n, 1)
  adv, _ = core_algos.compute_gdpo_outcome_advantage(
    torch.zeros(n, 1),
    response_mask,
    index,
    epsilon=case["eps"],
    config=config,
    non_tensor_batch={k: np.asarray(v) for k, v in case["terms"].items()},
    batch=batch,
  )
  return {"advantages": adv[:, 0].tolist()}


def is_weights(case):
  """verl's truncated importance weights (TIS) at token or sequence level."""
  mask = _t(case["mask"])
  log_ratio = (_t(case["learner"]) - _t(case["behaviour"])) * mask
  weights, _ = rollout_corr_helper.compute_rollout_correction_weights(
    log_ratio, mask, rollout_is=case["level"], rollout_is_threshold=case["cap"]
  )
  return {"weights": weights.tolist()}


KINDS = {
  "policy": policy,
  "kl": kl,
  "aggregate": aggregate,
  "grpo": grpo,
  "gdpo": gdpo,
  "is_weights": is_weights,
}

if __name__ == "__main__":
  cases = json.load(sys.stdin)
  json.dump([KINDS[c["kind"]](c) for c in cases], sys.stdout)
