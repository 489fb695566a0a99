"""The small base policy: a tokenizer trained on the task corpus, SFT from scratch on a mixture
of answers, measured, cached.

`ensure(base_cfg)` returns the base's Hugging Face folder, building it on first use:
  1. the corpus: verified buggy tasks from the generator's *training* families of every tier
     (`base.data`: how many per tier; validation and test families never, clean programs never);
  2. SFT targets drawn from the configured mixture (`base.mixture`, data/sft_mixture.py), a
     share of the tasks (`mixture.fresh_names`) under made-up identifiers so that the model
     learns to copy the program in its prompt rather than recall its family's;
  3. a byte-level BPE trained on the chat texts of prompts and answers (model/bpe.py);
  4. SFT from random init (`base.model`, a `coder-*` architecture) with the trainers' own SFT
     loop, each task's answers as one group sharing its prompt;
  5. the last checkpoint exported as a Hugging Face folder (`model/`: config.json,
     model.safetensors, tokenizer.json with its chat template), which the RL arms, `generate`,
     `export` and `transformers` load;
  6. measurements printed and written to `base.json`: greedy pass, precision and edited lines on
     held-out-family tasks beside the reference fixes' edited lines, no-op and damage on clean
     programs, the multi-line split, and the share of sampled groups of RL training tasks whose
     reward varies at the arms' group size (a group without variance teaches nothing).

The cache folder is `<cache_root()>/bases/<name>-<key(base_cfg)>` (a hash of the config and of
its architecture); the build holds a lock there, so arms started together wait
for one build instead of racing. Code changes do not invalidate a cached base; delete the folder
(or change the config) to rebuild.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import fcntl
import hashlib
import json
import multiprocessing
import os
import pathlib
import random
import shutil
import time
from collections.abc import Iterator, Sequence
from typing import Any

import ml_collections
import numpy as np
from absl import logging

from precisecoder import prompts
from precisecoder.data import sft_mixture
from precisecoder.model import architectures, bpe
from precisecoder.tasks import Task
from precisecoder.train import config as config_lib, sequences, tasksets
from precisecoder.intmath import cdiv

# Generator tiers the corpus may draw from; `base.data` names each count (programs-multi as
# programs_multi), and a tier a preset does not name contributes nothing.
_TIERS = ("easy", "medium", "hard", "multi", "programs", "programs-multi")


def _count(base_cfg: ml_collections.ConfigDict, tier: str) -> int:
  return int(base_cfg.data.get(tier.replace("-", "_"), 0))


def key(base_cfg: ml_collections.ConfigDict) -> str:
  """The cache key: a hash of the base's whole config and of its architecture
  (named in the config; resizing it must not reuse a base of the old size)."""
  architecture = architectures.ARCHITECTURES.get(base_cfg.model)
  text = json.dumps(
    {
      "config": _hashed(base_cfg.to_dict()),
      "architecture": None if architecture is None else dataclasses.asdict(architecture),
    },
    sort_keys=True,
    default=str,
  )
  return hashlib.sha256(text.encode()).hexdigest()[:12]


# Fields added after bases were cached, with the value that changes nothing: left out of the
# hashes when they hold it, so the bases and SFT data built before them stay valid.
_NEUTRAL = {
  ("mixture", "fresh_names"): 0.0,
  ("sft", "length_multiple"): 0,
  ("sft", "answers_per_task"): 0,
  ("sft", "copy_warmup_steps"): 0,
  ("sft", "copy_warmup_rows"): 64,
  ("sft", "copy_warmup_length"): 64,
  ("sft", "copy_warmup_vocab"): 0,
  ("sft", "copy_warmup_learning_rate"): 0.0,
  ("sft", "copy_warmup_target_accuracy"): 0.0,
  ("sft", "copy_warmup_widen"): 0,
  ("sft", "copy_warmup_own_softmax"): False,
  ("sft", "prompt_loss_weight"): 0.0,
}


def _hashed(config: dict[str, Any]) -> dict[str, Any]:
  out = {k: dict(v) if isinstance(v, dict) else v for k, v in config.items()}
  for (section, field), neutral in _NEUTRAL.items():
    if section in out and out[section].get(field) == neutral:
      del out[section][field]
  return out


def folder(base_cfg: ml_collections.ConfigDict) -> pathlib.Path:
  return tasksets.cache_root() / "bases" / f"{base_cfg.name}-{key(base_cfg)}"


def ensure(base_cfg: ml_collections.ConfigDict) -> pathlib.Path:
  """The base's Hugging Face folder, built (and measured) first if it is not cached."""
  root = folder(base_cfg)
  model_dir = root / "model"
  if (root / "base.json").exists():
    return model_dir
  root.mkdir(parents=True, exist_ok=True)
  with _locked(root / ".lock"):
    if not (root / "base.json").exists():  # another process may have built it meanwhile
      build(base_cfg, root)
  return model_dir


@contextlib.contextmanager
def _locked(path: pathlib.Path) -> Iterator[None]:
  with open(path, "w") as handle:
    if not _try_lock(handle):
      logging.info("base: waiting for the build that holds %s", path)
      fcntl.flock(handle, fcntl.LOCK_EX)
    try:
      yield
    finally:
      fcntl.flock(handle, fcntl.LOCK_UN)


def _try_lock(handle) -> bool:
  try:
    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return True
  except BlockingIOError:
    return False


def _processes() -> concurrent.futures.ProcessPoolExecutor:
  """Worker processes for the corpus (pure Python, one core each); spawned, not forked: the
  parent has JAX's threads."""
  return concurrent.futures.ProcessPoolExecutor(
    max_workers=max(1, min(8, os.cpu_count() or 1)), mp_context=multiprocessing.get_context("spawn")
  )


def corpus(base_cfg: ml_collections.ConfigDict) -> list[Task]:
  """The training-family tasks of every tier the base is trained on (tiers generated in
  parallel; each through tasksets' on-disk cache)."""
  counts = [(tier, _count(base_cfg, tier)) for tier in _TIERS if _count(base_cfg, tier)]
  with _processes() as pool:
    parts = pool.map(
      tasksets.generated,
      ["train"] * len(counts),
      [t for t, _ in counts],
      [n for _, n in counts],
      [int(base_cfg.seed)] * len(counts),
    )
    return [t for part in parts for t in part]


def with_targets(tasks: Sequence[Task], base_cfg: ml_collections.ConfigDict) -> list[Task]:
  """The tasks carrying their drawn SFT targets (`extra["sft_targets"]`, `["sft_kinds"]`),
  drawn in parallel parts (the same targets as one pass: sft_mixture.draw_targets)."""
  mix = base_cfg.mixture
  weights = {k: float(mix[k]) for k in sft_mixture.KINDS}
  size = max(1, cdiv(len(tasks), 4 * (os.cpu_count() or 1)))
  starts = list(range(0, len(tasks), size))
  with _processes() as pool:
    parts = [
      pool.submit(
        sft_mixture.draw_targets,
        tasks[i : i + size],
        weights,
        draws=int(mix.draws),
        seed=int(base_cfg.seed),
        extra_rate=float(mix.extra_rate),
        rename_rate=float(mix.rename_rate),
        first_index=i,
      )
      for i in starts
    ]
    drawn = [targets for part in parts for targets in part.result()]
  out = []
  for i, (task, targets) in enumerate(zip(tasks, drawn)):
    programs = [x.program for x in targets]
    rng = random.Random(f"precisecoder-fresh-names:{base_cfg.seed}:{i}:{task.task_id}")
    if rng.random() < float(mix.fresh_names):
      task, programs = sft_mixture.with_fresh_names(task, programs, rng)
    out.append(
      dataclasses.replace(
        task, extra={**task.extra, "sft_targets": programs, "sft_kinds": [x.kind for x in targets]}
      )
    )
  return out


def resolve(cfg: ml_collections.ConfigDict) -> tuple[str | None, list[Task]]:
  """What a run's `model.checkpoint="base"` stands for: the base policy's folder (built on
  first use) and, when the run evaluates held-in tasks, the tasks the base's SFT trained on
  (which those leave out). (None, []) for any other checkpoint."""
  if cfg.model.checkpoint != "base":
    return None, []
  from precisecoder import tasks as tasks_lib  # pylint: disable=import-outside-toplevel

  path = ensure(cfg.base)
  seen = []
  if cfg.data.num_heldin or cfg.data.num_heldin_clean:
    seen = tasks_lib.load_tasks(sft_data(cfg.base)[0])
  return str(path), seen


def sft_data(base_cfg: ml_collections.ConfigDict) -> tuple[pathlib.Path, dict[str, float]]:
  """The SFT task file (corpus + drawn targets), cached apart from the base by what it
  depends on (`data`, `mixture`, `seed`): it can be made on one machine and carried to
  another (scripts/gpu_run.sh prepare). Returns its path and the seconds each part took."""
  part = _hashed(
    {
      k: base_cfg[k].to_dict() if hasattr(base_cfg[k], "to_dict") else base_cfg[k]
      for k in ("data", "mixture", "seed")
    }
  )
  digest = hashlib.sha256(json.dumps(part, sort_keys=True).encode()).hexdigest()[:12]
  path = tasksets.cache_root() / "sft_data" / f"{digest}.jsonl.gz"
  times: dict[str, float] = {}
  if path.exists():
    return path, times
  from precisecoder import tasks as tasks_lib  # pylint: disable=import-outside-toplevel

  t0 = time.perf_counter()
  tasks = corpus(base_cfg)
  times["corpus_s"] = time.perf_counter() - t0
  t0 = time.perf_counter()
  tasks = with_targets(tasks, base_cfg)
  times["targets_s"] = time.perf_counter() - t0
  staging = path.with_name(f".{os.getpid()}-{path.name}")
  tasks_lib.write_tasks(staging, tasks)
  os.replace(staging, path)
  return path, times


def tokenizer_texts(tasks: Sequence[Task], include_tests: bool) -> list[str]:
  """The chat texts the tokenizer is trained on: each prompt with each of its answers."""
  return [
    bpe.chat_text(
      prompts.debug_prompt(t, include_tests=include_tests), sequences.answer_text(program)
    )
    for t in tasks
    for program in t.extra["sft_targets"]
  ]


# The SFT loop's options a base config may set (train/config.py's `sft`).
_SFT_OPTIONS = (
  "length_multiple",
  "answers_per_task",
  "copy_warmup_steps",
  "copy_warmup_rows",
  "copy_warmup_length",
  "copy_warmup_vocab",
  "copy_warmup_learning_rate",
  "copy_warmup_target_accuracy",
  "copy_warmup_widen",
  "copy_warmup_own_softmax",
  "prompt_loss_weight",
)


def sft_config(
  base_cfg: ml_collections.ConfigDict, tokenizer_dir: pathlib.Path, task_file: pathlib.Path
) -> ml_collections.ConfigDict:
  """The SFT run's config: the trainers' defaults, random init of `base.model` with the
  trained tokenizer, on the task file that carries the drawn targets."""
  c = config_lib.default("tiny")
  c.trainer = "sft"
  c.seed = base_cfg.seed
  c.model.update(
    arch=base_cfg.model,
    checkpoint="",
    tokenizer=str(tokenizer_dir),
    mesh="cpu",
    remat="none",
    mlp_chunk=0,
  )
  c.data.update(
    task_file=str(task_file),
    num_validation=0,
    num_clean=0,
    include_tests_in_prompt=base_cfg.data.include_tests_in_prompt,
  )
  s = base_cfg.sft
  c.sft.update(
    batch_size=s.batch_size,
    max_len=s.max_len,
    group_by_length=True,
    **{k: s[k] for k in _SFT_OPTIONS if k in s},
  )
  c.optim.update(
    learning_rate=s.learning_rate, warmup_steps=s.warmup_steps, weight_decay=0.01, b2=0.98
  )
  c.train.update(
    steps=s.steps,
    checkpoint_every=max(1, s.steps // 4),
    keep_checkpoints=1,
    eval_every=0,
    eval_at_start=False,
    report=False,
  )
  return c


def build(base_cfg: ml_collections.ConfigDict, root: pathlib.Path) -> dict[str, Any]:
  """Builds the base into `root` (see the module docstring); returns its measurements."""
  from precisecoder.model import export_hf, load_checkpoint  # pylint: disable=import-outside-toplevel
  from precisecoder.train import sft  # pylint: disable=import-outside-toplevel

  logging.info("base %s: building in %s", base_cfg.name, root)
  task_file, times = sft_data(base_cfg)
  from precisecoder import tasks as tasks_lib  # pylint: disable=import-outside-toplevel

  tasks = tasks_lib.load_tasks(task_file)
  kinds = [k for t in tasks for k in t.extra["sft_kinds"]]
  t0 = time.perf_counter()
  tokenizer_dir = root / "tokenizer"
  include_tests = bool(base_cfg.data.include_tests_in_prompt)
  bpe.train_bpe(
    tokenizer_texts(tasks, include_tests),
    int(base_cfg.tokenizer.vocab_size),
    tokenizer_dir,
    max_token_length=int(base_cfg.tokenizer.max_token_length),
  )
  times["tokenizer_s"] = time.perf_counter() - t0
  t0 = time.perf_counter()
  cfg = sft_config(base_cfg, tokenizer_dir, task_file)
  config_lib.validate(cfg)  # the trainers take validated configs; this one is made here
  from precisecoder.train.metrics import last_step  # pylint: disable=import-outside-toplevel
  from precisecoder.train.workdir import Finished  # pylint: disable=import-outside-toplevel

  # A preempted trainer saves and returns 0: the base is built only once SFT has finished.
  try:
    status = sft.train(cfg, str(root / "sft"))
  except Finished:  # an earlier build stopped after SFT
    status = 0
  if status != 0 or last_step(root / "sft") < cfg.train.steps:
    raise SystemExit(
      f"base {base_cfg.name}: SFT stopped at step {last_step(root / 'sft')} "
      f"of {cfg.train.steps}; run again to resume it"
    )
  times["sft_s"] = time.perf_counter() - t0
  model, tokenizer, model_config = load_checkpoint(root / "sft", dtype="float32")
  staging = root / "model.partial"
  shutil.rmtree(staging, ignore_errors=True)
  export_hf(model, model_config, tokenizer, staging)
  shutil.rmtree(root / "model", ignore_errors=True)
  os.replace(staging, root / "model")
  t0 = time.perf_counter()
  result = measure(root / "model", base_cfg)
  times["measure_s"] = time.perf_counter() - t0
  result.update(
    name=base_cfg.name,
    key=key(base_cfg),
    config=base_cfg.to_dict(),
    times=times,
    parameters=model_config.num_params(),
    vocab=len(tokenizer),
    corpus_tasks=len(tasks),
    targets={k: kinds.count(k) / len(kinds) for k in sft_mixture.KINDS},
    sft_loss=_last_loss(root / "sft"),
    copy_warmup=_last_warmup(root / "sft"),
  )
  (root / "base.json").write_text(json.dumps(result, indent=1, default=float) + "\n")
  print(summary(result), flush=True)
  return result


def _last_loss(workdir: pathlib.Path) -> float | None:
  from precisecoder.train.metrics import read_metrics  # pylint: disable=import-outside-toplevel

  rows = [r["train/loss"] for r in read_metrics(workdir / "metrics.jsonl") if "train/loss" in r]
  return float(np.mean(rows[-20:])) if rows else None


def _last_warmup(workdir: pathlib.Path) -> dict[str, float] | None:
  """The copy warm-up's last logged step (train/copy_warmup.py), if it had one."""
  path = workdir / "copy_warmup.jsonl"
  lines = path.read_text().splitlines() if path.exists() else []
  return json.loads(lines[-1]) if lines else None


def measure(model_dir: pathlib.Path, base_cfg: ml_collections.ConfigDict) -> dict[str, Any]:
  """Greedy evaluation on held-out families and on new instances of the training families
  (held-in: none in the SFT corpus), and reward variance of sampled RL groups."""
  from precisecoder import tasks as tasks_lib  # pylint: disable=import-outside-toplevel
  from precisecoder.data import generator  # pylint: disable=import-outside-toplevel
  from precisecoder.execution import ExecutionPool  # pylint: disable=import-outside-toplevel
  from precisecoder.rewards import RewardScorer  # pylint: disable=import-outside-toplevel
  from precisecoder.train import greedy_eval, policy as policy_lib  # pylint: disable=import-outside-toplevel
  from precisecoder.train import rollout  # pylint: disable=import-outside-toplevel

  m = base_cfg.measure
  seed = base_cfg.seed
  include_tests = bool(base_cfg.data.include_tests_in_prompt)
  cfg = config_lib.default("tiny")
  cfg.model.update(checkpoint=str(model_dir), mesh="cpu", mlp_chunk=0)
  policy = policy_lib.load_policy(cfg)
  sets = {
    "validation": tasksets.generated("validation", m.tier, m.num_validation, seed),
    "clean": tasksets.generated(
      "validation", generator.clean_tier(m.tier), m.num_clean, seed, clean=True
    ),
    "multi": tasksets.generated("validation", generator.multi_tier(m.tier), m.num_multi, seed),
    "heldin": tasksets.unseen_instances(
      m.tier, m.num_validation, m.num_clean, seed + 1, tasks_lib.load_tasks(sft_data(base_cfg)[0])
    ),
  }
  out: dict[str, Any] = {}
  with ExecutionPool(workers=2) as pool:
    scorer = RewardScorer(pool)
    for name, tasks in sets.items():
      if not tasks:
        continue
      tokens = m.max_new_tokens * (2 if name == "multi" else 1)  # medium programs are longer
      summary, _ = greedy_eval.evaluate_greedy(
        policy,
        tasks,
        scorer,
        max_new_tokens=tokens,
        batch_size=32,
        include_tests=include_tests,
        seed=seed,
      )
      out[name] = {k: v for k, v in summary.items() if not k.endswith("_s")}
      if name != "clean":
        out[name]["reference_edit_lines"] = float(
          np.mean([len(t.gt_diff) for t in tasks if t.is_buggy])
        )
    train = tasksets.generated("train", m.tier, m.num_groups, seed)
    sampled = rollout.sample_rollout(
      policy,
      train,
      num_samples=m.group_size,
      max_new_tokens=m.max_new_tokens,
      temperature=m.temperature,
      seed=seed,
      include_tests=include_tests,
      prompt_bucket=128,
    )
    terms = scorer.score(sampled.tasks, sampled.programs)
  out["groups"] = group_variance(terms, m.group_size)
  return out


def group_variance(terms: dict[str, np.ndarray], group_size: int) -> dict[str, float]:
  """Shares of groups (consecutive rows) whose unit reward, and whose r_λ, vary."""
  out = {"num_groups": len(terms["unit"]) // group_size}
  for name, column in (("unit", "unit"), ("r_lambda", "reward")):
    groups = np.asarray(terms[column], np.float64).reshape(-1, group_size)
    out[f"{name}_varies"] = float(np.mean(groups.std(axis=1) > 0))
  out["sampled_pass"] = float(np.mean(terms["unit"]))
  out["sampled_edit_lines"] = float(np.mean(terms["edit_lines"]))
  out["sampled_noop"] = float(np.mean(terms["noop"]))
  return out


def summary(result: dict[str, Any]) -> str:
  """The measurements as a few lines of text (printed after a build, and by `precisecoder
  base`)."""
  lines = [
    f"base {result['name']} ({result['key']}): {result['parameters'] / 1e6:.2f}M "
    f"parameters, vocabulary {result['vocab']}, {result['corpus_tasks']} corpus tasks, "
    f"SFT loss {result.get('sft_loss') or float('nan'):.3f}; targets "
    + ", ".join(f"{k} {v:.0%}" for k, v in result["targets"].items())
  ]
  warmup = result.get("copy_warmup")
  if warmup:
    on = f" of {warmup['ids']} ids" if "ids" in warmup else ""
    lines.append(
      f"  copy warm-up: {warmup['step']} steps, loss {warmup['loss']:.3f}, copy accuracy "
      f"{warmup['accuracy']:.1%} on random-token spans{on} it never trained on"
    )
  programs = result.get("config", {}).get("measure", {}).get("tier", "").startswith("programs")
  held_out = "held-out-structure tasks" if programs else "held-out-family tasks"
  held_in = (
    "new programs of training structures" if programs else "new instances of the training families"
  )
  for name, what in (("validation", held_out), ("multi", held_out), ("heldin", held_in)):
    r = result.get(name)
    if r:
      lines.append(
        f"  greedy, {name} ({r['num_buggy']} {what}): pass {r['pass']:.1%}, "
        f"precision {r['precision']:.1%}, edited lines {r['edit_lines']:.2f} (reference "
        f"fixes: {r['reference_edit_lines']:.2f})"
        + (
          f"; {r['num_clean']} correct programs of them: no-op {r['noop']:.1%}"
          if r.get("num_clean")
          else ""
        )
      )
  if result.get("clean"):
    r = result["clean"]
    lines.append(
      f"  greedy, {r['num_clean']} clean programs: no-op {r['noop']:.1%}, damage {r['damage']:.1%}"
    )
  g = result["groups"]
  lines.append(
    f"  sampled, {g['num_groups']} RL training tasks x G: pass {g['sampled_pass']:.1%}"
    f", edited lines {g['sampled_edit_lines']:.2f}, no-op {g['sampled_noop']:.1%}; "
    f"groups whose reward varies: unit {g['unit_varies']:.0%}, r_lambda "
    f"{g['r_lambda_varies']:.0%}"
  )
  times = result.get("times", {})
  if times:
    lines.append("  build: " + ", ".join(f"{k[:-2]} {v:.0f} s" for k, v in times.items()))
  return "\n".join(lines)


def cached_result(base_cfg: ml_collections.ConfigDict) -> dict[str, Any] | None:
  path = folder(base_cfg) / "base.json"
  return json.loads(path.read_text()) if path.exists() else None
