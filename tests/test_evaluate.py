"""Evaluation summaries, reward recipes and the report table."""

import json

import ml_collections
import numpy as np
import pytest

from precisecoder import evaluate, tasks as tasks_lib
from precisecoder.analysis import report
from precisecoder.train import recipes


def _task(i, buggy=True):
  fixed = "def f(x):\n    return x + 1"
  code = "def f(x):\n    return x - 1" if buggy else fixed
  return tasks_lib.Task(task_id=f"t{i}", buggy_code=code, gt_solution=fixed,
                        gt_diff=tasks_lib.derive_gt_diff(code, fixed),
                        tests={"kind": "call", "entry_point": "f",
                               "cases": [{"args": [1], "expected": 2}]}, is_buggy=buggy)


def test_summary_splits_buggy_and_clean_rows():
  tasks = [_task(0), _task(1), _task(2, buggy=False), _task(3, buggy=False)]
  terms = {"unit": np.array([1, 0, 1, 0.0]), "precision": np.array([0.5, 0, 1, 1.0]),
           "recall": np.array([1, 0, 0, 0.0]), "f1": np.array([2 / 3, 0, 0, 0.0]),
           "edit_lines": np.array([2, 4, 0, 1.0]), "noop": np.array([0, 0, 1, 0.0]),
           "damage": np.array([0, 0, 0, 1.0])}
  s = evaluate.summarize(tasks, terms)
  assert s["pass"] == 0.5 and s["precision"] == 0.25 and s["edit_lines"] == 3.0
  assert s["noop"] == 0.5 and s["damage"] == 0.5
  assert s["num_buggy"] == 2 and s["num_clean"] == 2


def _rl(reward, advantage, **kw):
  return ml_collections.ConfigDict(dict(reward=reward, advantage=advantage, lam=1 / 3,
                                        group_size=2, scale_std=True, ea_alpha=0.5,
                                        ea_beta=0.5, **kw))


def test_recipes():
  terms = {"unit": np.array([1, 0, 1, 1.0]), "f1": np.array([0.5, 0.2, 1, 0.0]),
           "reward": np.array([0.8, 0.1, 1, 2 / 3]), "precision": np.zeros(4),
           "edit_cost": np.array([0.1, 0.5, 0.2, 0.4]), "recall_gated": np.zeros(4),
           "precision_only": np.zeros(4), "recall_only": np.zeros(4)}
  adv, reward = recipes.compute_advantages(_rl("unit", "grpo"), terms)
  np.testing.assert_array_equal(reward, terms["unit"])
  assert adv[0] > 0 > adv[1] and adv[2] == adv[3] == 0
  adv, _ = recipes.compute_advantages(_rl("r_lambda", "gdpo"), terms)
  assert adv[2] > adv[3] and adv[0] > adv[1]  # second group: unit equal, F1 decides
  adv, reward = recipes.compute_advantages(_rl("ea_grpo", "grpo"), terms)
  assert reward[1] == 0 and 0 < reward[0] <= 1
  with pytest.raises(ValueError, match="single scalar reward"):
    recipes.compute_advantages(_rl("ea_grpo", "gdpo"), terms)
  with pytest.raises(ValueError, match="rl.reward"):
    recipes.compute_advantages(_rl("bogus", "grpo"), terms)


def test_report_table(tmp_path):
  (tmp_path / "eval").mkdir()
  for step, p in ((0, 0.25), (4, 0.5)):
    (tmp_path / "eval" / f"step_{step}.json").write_text(json.dumps(
        {"step": step, "summary": {"pass": p, "precision": 0.4, "recall": 0.5,
                                   "edit_lines": 3.25, "noop": 0.0, "damage": 0.5}}))
  (tmp_path / "metrics.jsonl").write_text(
      json.dumps({"step": 0, "eval/pass": 0.25}) + "\n"
      + json.dumps({"step": 4, "eval/pass": 0.5, "reward": 0.3, "time/step": 10.0,
                    "time/reward_exposed": 0.5}) + "\n")
  path = report.write_report(tmp_path)
  text = path.read_text()
  # Files without per-task records (older runs): means only, no interval; no F1 recorded.
  assert "| base (step 0) | 25.0 | 40.0 | 50.0 | – | 3.25 | 0.0 | 50.0 |" in text
  assert "| step 4 (final) | 50.0 |" in text
  assert "5.0% of step time" in text
  assert (tmp_path / "eval.png").exists()
