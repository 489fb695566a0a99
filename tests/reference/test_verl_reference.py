"""Our losses, KL estimators, advantages and importance weights against verl's own functions
(`verl.trainer.ppo.core_algos`, `rollout_corr_helper`, verl 0.9.1) on identical inputs.

verl runs in its own environment (scripts/verl_env.sh builds .venv-verl; CI builds it before
the suite): tests/reference/verl_side.py computes every case there in one subprocess and this
module compares. Without that environment the module is skipped, except under CI (CI=true),
where a missing reference is a failure.

Where our form departs from verl's the cases stay where both agree, and say so: verl's PPO
adds dual-clip for negative advantages past a ratio of clip_ratio_c (ours has none: the cases'
ratios stay below it); verl's GDPO whitens the weighted sum over tokens, ours over samples
(PAPER.md), identical for one-token responses as here; verl's k3 is clamped to [-10, 10]
(ours is not: the cases' log-ratios are small).
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from precisecoder import advantages as adv_lib
from precisecoder.train import losses

ROOT = pathlib.Path(__file__).resolve().parents[2]
VERL_PYTHON = pathlib.Path(
  os.environ.get("PRECISECODER_VERL_PYTHON", ROOT / ".venv-verl" / "bin" / "python")
)
CLIPS = {"ppo_clip": (0.2, 0.28), "gspo": (3e-3, 4e-3)}
VERL_LOSS = {"ppo_clip": "vanilla", "gspo": "gspo"}
VERL_KL = {"k1": "k1", "k2": "mse", "k3": "low_var_kl", "k1+": "k1+", "k3+": "low_var_kl+"}


def _inputs(seed=0, rows=6, width=9):
  """Log-probs, a mask with sequences of 3 to `width` tokens, and advantages of both signs."""
  rng = np.random.default_rng(seed)
  old = -rng.uniform(0.05, 3.0, (rows, width)).astype(np.float32)
  # Ratios within [e^-0.4, e^0.4]: both sides of PPO's clip, below dual-clip's bound.
  logp = (old + rng.uniform(-0.4, 0.4, (rows, width))).astype(np.float32)
  lengths = rng.integers(3, width + 1, rows)
  lengths[0] = width
  mask = (np.arange(width)[None, :] < lengths[:, None]).astype(np.float32)
  advantages = rng.normal(size=rows).astype(np.float32)
  return logp * mask, old * mask, advantages, mask


def _cases():
  logp, old, advantages, mask = _inputs()
  cases = []
  for loss in ("ppo_clip", "gspo"):
    for aggregation in losses.AGGREGATIONS:
      cases.append(dict(kind="policy", loss=loss, aggregation=aggregation, weights=None))
  # A GSPO case whose sequence ratios sit inside and outside its narrow range.
  gspo_old = logp - np.float32(0.002) * np.arange(-3, 3, dtype=np.float32)[:, None] * mask
  cases.append(
    dict(kind="policy", loss="gspo", aggregation="seq-mean-token-mean", weights=None, old=gspo_old)
  )
  weights = np.minimum(np.exp(np.random.default_rng(1).normal(0, 0.5, mask.shape)), 2.0)
  cases.append(
    dict(
      kind="policy",
      loss="ppo_clip",
      aggregation="token-mean",
      weights=(weights * mask).astype(np.float32),
    )
  )
  for case in cases:
    if case["kind"] == "policy":
      clip_low, clip_high = CLIPS[case["loss"]]
      case.update(
        verl_loss=VERL_LOSS[case["loss"]],
        logp=logp,
        mask=mask,
        advantages=advantages,
        clip_low=clip_low,
        clip_high=clip_high,
        old=case.get("old", old),
      )
  ref = (logp + np.random.default_rng(2).uniform(-1, 1, logp.shape)).astype(np.float32)
  for name in losses.KL_ESTIMATORS:
    cases.append(dict(kind="kl", name=name, verl_name=VERL_KL[name], logp=logp, ref=ref))
  values = np.random.default_rng(3).normal(size=mask.shape).astype(np.float32)
  for aggregation in losses.AGGREGATIONS:
    cases.append(dict(kind="aggregate", aggregation=aggregation, values=values, mask=mask))
  rng = np.random.default_rng(4)
  rewards = rng.choice([0.0, 0.25, 1.0], size=24).astype(np.float32)
  rewards[:4] = 1.0  # a group with no variance: advantage 0
  for scale_std, eps in ((True, 1e-6), (False, 1e-6), (True, adv_lib.GDPO_EPS)):
    cases.append(dict(kind="grpo", rewards=rewards, group=4, eps=eps, scale_std=scale_std))
  terms = {
    "unit": rng.choice([0.0, 1.0], size=24).astype(np.float32),
    "f1": rng.uniform(0, 1, 24).astype(np.float32),
  }
  terms["unit"][4:8] = 1.0
  cases.append(
    dict(kind="gdpo", terms=terms, weights={"unit": 2 / 3, "f1": 1 / 3}, group=4, eps=1e-6)
  )
  behaviour = (logp + np.random.default_rng(5).normal(0, 0.4, logp.shape)).astype(np.float32)
  for level in ("token", "sequence"):
    cases.append(
      dict(
        kind="is_weights", learner=logp, behaviour=behaviour * mask, mask=mask, level=level, cap=2.0
      )
    )
  return cases


def _jsonable(x):
  if isinstance(x, np.ndarray):
    return x.tolist()
  if isinstance(x, dict):
    return {k: _jsonable(v) for k, v in x.items()}
  return x


@pytest.fixture(scope="module")
def verl_results():
  cases = _cases()
  if not VERL_PYTHON.exists():
    if os.environ.get("CI") == "true":
      pytest.fail(
        f"verl's environment {VERL_PYTHON} is missing: CI builds it with scripts/verl_env.sh"
      )
    pytest.skip(f"no verl environment at {VERL_PYTHON} (scripts/verl_env.sh builds it)")
  proc = subprocess.run(
    [str(VERL_PYTHON), str(ROOT / "tests" / "reference" / "verl_side.py")],
    input=json.dumps([_jsonable(c) for c in cases]),
    capture_output=True,
    text=True,
    timeout=600,
    check=False,
    env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
  )
  assert proc.returncode == 0, proc.stderr[-4000:]
  return list(zip(cases, json.loads(proc.stdout), strict=True))


def _ours_policy(case):
  def loss(logp):
    return losses.policy_loss(
      logp,
      jnp.asarray(case["old"]),
      jnp.asarray(case["advantages"]),
      jnp.asarray(case["mask"]) > 0,
      clip_low=case["clip_low"],
      clip_high=case["clip_high"],
      aggregation=case["aggregation"],
      loss=case["loss"],
      weights=None if case["weights"] is None else jnp.asarray(case["weights"]),
    )

  out, grad = jax.value_and_grad(lambda x: loss(x).loss)(jnp.asarray(case["logp"]))
  return {
    "loss": float(out),
    "clip_fraction": float(loss(jnp.asarray(case["logp"])).clip_fraction),
    "grad": grad,
  }


def _ours_kl(case):
  fn = lambda x: losses.kl_estimate(x, jnp.asarray(case["ref"]), case["name"])
  logp = jnp.asarray(case["logp"])
  return {"value": fn(logp), "grad": jax.grad(lambda x: jnp.sum(fn(x)))(logp)}


def _ours(case):
  kind = case["kind"]
  if kind == "policy":
    return _ours_policy(case)
  if kind == "kl":
    return _ours_kl(case)
  if kind == "aggregate":
    return {
      "loss": losses.aggregate(
        jnp.asarray(case["values"]), jnp.asarray(case["mask"]) > 0, case["aggregation"]
      )
    }
  if kind == "grpo":
    return {
      "advantages": adv_lib.grpo_advantages(
        case["rewards"], case["group"], scale_std=case["scale_std"], eps=case["eps"]
      )
    }
  if kind == "gdpo":
    return {
      "advantages": adv_lib.gdpo_advantages(
        case["terms"], case["weights"], case["group"], eps=case["eps"]
      )
    }
  if kind == "is_weights":
    return {
      "weights": losses.is_weights(
        jnp.asarray(case["learner"]),
        jnp.asarray(case["behaviour"]),
        jnp.asarray(case["mask"]) > 0,
        case["level"],
        case["cap"],
      )
    }
  raise AssertionError(kind)


def _label(case):
  return " ".join(
    f"{k}={case[k]}"
    for k in ("kind", "loss", "aggregation", "name", "level", "scale_std")
    if k in case
  )


def test_every_case_equals_verl_to_float32_precision(verl_results):
  """Losses (ppo_clip, gspo; every aggregation; with IS weights), their gradients in the
  log-probs, clip fractions, each KL estimator's value and gradient, GRPO, Dr. GRPO and GDPO
  advantages, and token / sequence TIS weights."""
  assert len(verl_results) == 25
  for case, theirs in verl_results:
    ours = _ours(case)
    assert set(ours) == set(theirs), _label(case)
    for key, value in theirs.items():
      np.testing.assert_allclose(
        np.asarray(ours[key], np.float64),
        np.asarray(value),
        rtol=2e-5,
        atol=2e-6,
        err_msg=f"{_label(case)}: {key}",
      )


def test_the_cases_reach_both_sides_of_every_clip(verl_results):
  """The comparison is not vacuous: some PPO and GSPO cases clip, and not all tokens do."""
  for loss in ("ppo_clip", "gspo"):
    fractions = [
      theirs["clip_fraction"]
      for case, theirs in verl_results
      if case["kind"] == "policy" and case["loss"] == loss
    ]
    assert max(fractions) > 0 and min(fractions) < 1, (loss, fractions)
