"""The small base policy (base_model): its cache key and the group-variance measurement
(hand-worked). The `precisecoder base` command that builds one: tests/commands/test_base.py."""

import dataclasses

import numpy as np
import pytest

from precisecoder.model import architectures
from precisecoder.experiments import base_model
from precisecoder.train import config as config_lib


def test_group_variance_counts_groups_whose_reward_varies():
  terms = {
    "unit": np.array([1, 0, 0, 0, 1, 1, 0, 0, 0]),  # groups of 3: varies, no, varies
    "reward": np.array([1, 0.2, 0, 0, 0, 0, 0.5, 0.5, 0.5]),  # varies, no, no
    "edit_lines": np.arange(9),
    "noop": np.zeros(9),
  }
  out = base_model.group_variance(terms, 3)
  assert out["num_groups"] == 3
  assert out["unit_varies"] == pytest.approx(2 / 3)
  assert out["r_lambda_varies"] == pytest.approx(1 / 3)
  assert out["sampled_pass"] == pytest.approx(3 / 9) and out["sampled_edit_lines"] == 4


def test_the_cache_key_follows_the_whole_config(monkeypatch, tmp_path):
  monkeypatch.setenv("PRECISECODER_CACHE", str(tmp_path))
  cfg = config_lib.base_config("tiny")
  same = config_lib.base_config("tiny")
  assert base_model.folder(cfg) == base_model.folder(same)
  assert base_model.folder(cfg).parent == tmp_path / "bases"
  same.mixture.noop = 0.5
  assert base_model.key(cfg) != base_model.key(same)
  # RL presets carry their base's config: the main job and compare-cpu share one base.
  assert (
    base_model.key(config_lib.default("local").base)
    == base_model.key(config_lib.default("compare-cpu").base)
    == base_model.key(config_lib.base_config("cpu"))
  )
  # The architecture is named in the config: resizing it is a new base, not the cached one.
  before = base_model.key(cfg)
  old = architectures.ARCHITECTURES[cfg.model]
  monkeypatch.setitem(
    architectures.ARCHITECTURES,
    cfg.model,
    dataclasses.replace(old, hidden_size=2 * old.hidden_size),
  )
  assert base_model.key(cfg) != before


def test_a_field_at_its_neutral_value_leaves_the_cache_keys_as_they_were(tmp_path):
  """mixture.fresh_names came after bases were cached: at 0 (nothing renamed) the base and its
  SFT data keep the keys they had without the field; at any other value they change."""
  cfg = config_lib.base_config("tiny")
  assert cfg.mixture.fresh_names == 0.0
  without = config_lib.base_config("tiny")
  del without.mixture["fresh_names"]
  assert base_model.key(cfg) == base_model.key(without)
  data = {
    k: cfg[k].to_dict() if hasattr(cfg[k], "to_dict") else cfg[k]
    for k in ("data", "mixture", "seed")
  }
  assert base_model._hashed(data) == {**data, "mixture": without.mixture.to_dict()}
  cfg.mixture.fresh_names = 0.5
  assert base_model.key(cfg) != base_model.key(without)
  # So with the SFT loop's options that came later (one answer a step, the copy warm-up).
  cfg = config_lib.base_config("tiny")
  without = config_lib.base_config("tiny")
  for field in base_model._SFT_OPTIONS:
    del without.sft[field]
  assert base_model.key(cfg) == base_model.key(without)
  cfg.sft.copy_warmup_steps = 10
  assert base_model.key(cfg) != base_model.key(without)
  assert base_model.sft_config(cfg, tmp_path, tmp_path / "t.jsonl").sft.copy_warmup_steps == 10


def test_the_summary_reports_the_copy_warm_up_when_there_was_one(tmp_path):
  assert base_model._last_warmup(tmp_path) is None
  (tmp_path / "copy_warmup.jsonl").write_text(
    '{"step": 25, "loss": 7.0, "accuracy": 0.0}\n{"step": 50, "loss": 1.25, "accuracy": 0.875}\n'
  )
  warmup = base_model._last_warmup(tmp_path)
  assert warmup == {"step": 50, "loss": 1.25, "accuracy": 0.875}
  result = dict(
    name="tiny",
    key="abc",
    parameters=1e6,
    vocab=512,
    corpus_tasks=32,
    sft_loss=1.0,
    targets={"reference": 1.0},
    groups=dict(
      num_groups=2,
      sampled_pass=0,
      sampled_edit_lines=1,
      sampled_noop=0,
      unit_varies=0,
      r_lambda_varies=0,
    ),
  )
  assert "copy warm-up" not in base_model.summary(result)
  line = "  copy warm-up: 50 steps, loss 1.250, copy accuracy 87.5% on random-token spans"
  assert line in base_model.summary({**result, "copy_warmup": warmup})
  line = (
    "copy accuracy 87.5% on random-token spans of 512 ids it never trained on"  # its last stage
  )
  assert line in base_model.summary({**result, "copy_warmup": {**warmup, "ids": 512}})
