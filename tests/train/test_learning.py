"""RL learns: with a fixed seed, training raises the reward on its own training tasks.

The fast test keeps every part of the RL loop real (tiny decoder, sampler, the sandboxed reward
pool and scorer, advantages, update, checkpoints) but lets one token stand for one whole answer:
a stub tokenizer decodes answer ids to complete programs (the reference fix, the fix with edits
to lines that needed none, the buggy program, a wrong edit). The randomly initialised policy
starts near uniform over those answers, so every group's reward varies from the first step;
GRPO on unit must raise the pass rate, PreciseCoder (GDPO on r_λ) must raise pass and prefer
the minimal fix, and so must PreciseCoder training LoRA adapters only (model.lora) within the
same bounds. The LoRA arm's base has its answer tokens' embeddings 5x the random init's (a
trained model's are not 0.02-scale noise): with the tied embeddings frozen at the init's scale,
no change inside the layers can move an answer's logit by more than |e| sqrt(d) ~ 0.6. On the
small policy's real base the same is measured by `precisecoder compare` (README, "Result"),
minutes per arm: too slow for a test.
"""

import json

import numpy as np
import pytest

from precisecoder import tasks as tasks_lib
from precisecoder.model import architectures
from precisecoder.train import config as config_lib, metrics, policy as policy_lib, rl


def _task(i: int) -> tasks_lib.Task:
  fixed = (
    f"def f(xs):\n    total = 0\n    for x in xs:\n        total += x * {i + 2}\n    return total\n"
  )
  buggy = fixed.replace("total += x", "total -= x")
  tests = {
    "kind": "call",
    "entry_point": "f",
    "cases": [{"args": [[1, 2, 3]], "expected": 6 * (i + 2)}, {"args": [[]], "expected": 0}],
  }
  return tasks_lib.Task(
    task_id=f"t{i}",
    buggy_code=buggy,
    gt_solution=fixed,
    gt_diff=tasks_lib.derive_gt_diff(buggy, fixed),
    tests=tests,
    prompt="Return the scaled sum.",
  )


TASKS = [_task(i) for i in range(2)]
_LOAD_POLICY = policy_lib.load_policy  # as imported (the LoRA arm wraps it)


def _answers(task: tasks_lib.Task) -> list[str]:
  over_edited = task.gt_solution.replace("total", "acc").replace(
    "return acc", "result = acc\n    return result"
  )
  wrong = task.buggy_code.replace("total = 0", "total = 1")
  return [task.gt_solution, over_edited, task.buggy_code, wrong]


class AnswerTokenizer:
  """Ids 0 pad, 1 end; then one id per answer of every task (decoding to the whole answer in
  a python block), then one id per task (a prompt is its task's id)."""

  pad_token_id = 0
  eos_token_id = 1
  bos_token_id = None
  answers = [f"```python\n{a}```" for t in TASKS for a in _answers(t)]

  def __len__(self) -> int:
    return 2 + len(self.answers) + len(TASKS)

  def encode(self, text, add_special_tokens=True):
    del add_special_tokens
    return [2 + len(self.answers) + i for i, t in enumerate(TASKS) if t.buggy_code in text][:1]

  def decode(self, ids, skip_special_tokens=False, **kwargs):
    del skip_special_tokens, kwargs
    return "".join(self.answers[i - 2] for i in map(int, ids) if 2 <= i < 2 + len(self.answers))

  def apply_chat_template(self, messages, *, tokenize=True, add_generation_prompt=False, **kwargs):
    del add_generation_prompt, kwargs
    text = messages[-1]["content"]
    return self.encode(text) if tokenize else text


def _train(
  tmp_path, monkeypatch, config_file_arm: str, workdir_name: str = "", **train
) -> list[dict]:
  monkeypatch.setattr(policy_lib, "ByteTokenizer", AnswerTokenizer)
  monkeypatch.setitem(
    architectures.ARCHITECTURES,
    "answers",
    architectures.get(
      "tiny",
      vocab_size=len(AnswerTokenizer()),
      num_layers=1,
      hidden_size=32,
      num_heads=2,
      num_kv_heads=1,
      head_dim=16,
      intermediate_size=64,
    ),
  )
  task_file = tmp_path / "tasks.jsonl"
  tasks_lib.write_tasks(task_file, TASKS)
  cfg = config_lib.default("tiny")
  if config_file_arm == "grpo":
    cfg.rl.update(reward="unit", advantage="grpo")
  if config_file_arm == "lora":  # PreciseCoder's recipe on rank-8 adapters, the base frozen
    cfg.model.lora.update(rank=8, alpha=32.0)

    def load_scaled(cfg, mesh=None, **kwargs):
      policy = _LOAD_POLICY(cfg, mesh, **kwargs)
      embed = policy.model.embed
      embed.set_value(embed[...].at[2 : 2 + len(AnswerTokenizer.answers)].multiply(5.0))
      return policy

    monkeypatch.setattr(policy_lib, "load_policy", load_scaled)
  cfg.model.arch = "answers"
  cfg.data.update(task_file=str(task_file), include_tests_in_prompt=False)
  cfg.rl.update(
    prompts_per_step=2,
    group_size=8,
    max_new_tokens=2,
    minibatch_size=16,
    shared_prompt=True,
    prompt_bucket=8,
  )
  # Adapters take a third of full fine-tuning's step: their update is scaled by alpha / r = 4.
  cfg.optim.learning_rate = 1e-2 if config_file_arm == "lora" else 3e-2
  cfg.train.update(steps=12, eval_every=0, checkpoint_every=12, report=False)
  cfg.train.update(train)
  workdir = tmp_path / (workdir_name or config_file_arm)
  assert rl.train(cfg, str(workdir)) == 0
  return [r for r in metrics.read_metrics(workdir / "metrics.jsonl") if "reward" in r]


def _mean(rows, key, part):
  return float(np.mean([r[key] for r in part(rows)]))


FIRST = lambda rows: rows[:3]  # noqa: E731
LAST = lambda rows: rows[-3:]  # noqa: E731


@pytest.mark.parametrize("arm", ["grpo", "precisecoder", "lora"])
def test_rl_raises_reward_on_its_training_tasks(tmp_path, monkeypatch, arm):
  rows = _train(tmp_path, monkeypatch, arm)
  first, last = _mean(rows, "reward", FIRST), _mean(rows, "reward", LAST)
  print(
    arm,
    json.dumps(
      {
        "reward": [round(r["reward"], 3) for r in rows],
        "pass": [round(r["reward/unit"], 3) for r in rows],
        "edit_lines": [round(r["reward/edit_lines"], 2) for r in rows],
      }
    ),
  )
  assert first < 0.6  # near-uniform start: half the answers pass
  assert last > first + 0.2, (first, last)
  assert _mean(rows, "reward/unit", LAST) > _mean(rows, "reward/unit", FIRST) + 0.2
  if arm != "grpo":  # at equal pass, the minimal fix wins: edits shrink
    assert _mean(rows, "reward/edit_lines", LAST) < _mean(rows, "reward/edit_lines", FIRST)


@pytest.mark.slow  # three runs, each compiling its steps; the checkpointer's part: test_lora.py
def test_a_lora_run_resumes_exactly(tmp_path, monkeypatch):
  """Adapters only in the checkpoint, the base loaded again: stopped after step 1 and resumed
  to step 2 == never stopped (metrics, and the merged weights its checkpoint loads as)."""
  import jax  # pylint: disable=import-outside-toplevel
  from flax import nnx  # pylint: disable=import-outside-toplevel
  from precisecoder.model import run_checkpoints  # pylint: disable=import-outside-toplevel

  def run(name, **train):
    return _train(tmp_path, monkeypatch, "lora", name, steps=2, checkpoint_every=1, **train)

  straight = run("straight")
  assert len(run("resumed", stop_after=1)) == 1
  resumed = run("resumed")
  drop = ("time/", "reward_exposed_fraction")
  assert [{k: v for k, v in r.items() if not k.startswith(drop)} for r in straight] == [
    {k: v for k, v in r.items() if not k.startswith(drop)} for r in resumed
  ]
  assert any(r["train/grad_norm"] > 0 for r in straight)  # the adapters did move
  a, b = (
    jax.tree.leaves(nnx.state(run_checkpoints.load(tmp_path / n)[0]))
    for n in ("straight", "resumed")
  )
  for x, y in zip(a, b):
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
