"""Suite-wide settings: offline, CPU only, and a persistent JAX compilation cache."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

_ROOT = pathlib.Path(__file__).resolve().parents[1]

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
# Compiles dominate a CPU test run; a cache shared across test processes and runs cuts them.
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(_ROOT / ".jax_cache"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.1")
# Generated task sets and built base models (train/tasksets.py, experiments/base_model.py).
os.environ.setdefault("PRECISECODER_CACHE", str(_ROOT / ".cache"))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
  """Under `--dist loadgroup` (pyproject) an `xdist_group`'s tests share one worker because xdist
  suffixes their node ids with the group. Where a pytest release stops that (pytest-xdist#1386),
  the marks are silently ignored and test_multihost's launches would run once per worker, all at
  once: such tests fail instead, before their fixtures start."""
  if (
    getattr(item.config.option, "loadgroup", False)
    and item.get_closest_marker("xdist_group")
    and "@" not in item.nodeid
  ):
    pytest.fail(
      "--dist loadgroup ignored this test's xdist_group mark: this pytest and "
      "pytest-xdist do not group tests (pytest-xdist#1386); install requirements.txt's "
      "pins",
      pytrace=False,
    )


def make_chat_tokenizer(chat_template, corpus):
  """A byte-level BPE trained on `corpus` here (no download) with ChatML's special tokens."""
  import transformers  # pylint: disable=import-outside-toplevel
  from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # pylint: disable=import-outside-toplevel

  tok = Tokenizer(models.BPE())
  tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
  tok.decoder = decoders.ByteLevel()
  trainer = trainers.BpeTrainer(
    vocab_size=400,
    special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
    initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
  )
  tok.train_from_iterator(list(corpus) * 20, trainer)
  return transformers.PreTrainedTokenizerFast(
    tokenizer_object=tok,
    eos_token="<|im_end|>",
    pad_token="<|endoftext|>",
    chat_template=chat_template,
  )


def make_tiny_chat_checkpoint(folder, chat_template, corpus, answer=None):
  """A 1-layer random Llama folder with `make_chat_tokenizer`'s tokenizer: the real
  generate/evaluate path in seconds. Returns the tokenizer.

  `answer` (one token's text): the model instead answers exactly that token and ends its turn,
  whatever it was asked (a bigram model in its tied embeddings, as `answering_policy`)."""
  import torch  # pylint: disable=import-outside-toplevel
  import transformers  # pylint: disable=import-outside-toplevel

  tokenizer = make_chat_tokenizer(chat_template, corpus)
  config = transformers.LlamaConfig(
    vocab_size=len(tokenizer),
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=1,
    num_attention_heads=2,
    num_key_value_heads=1,
    max_position_embeddings=4096,
    tie_word_embeddings=True,
    eos_token_id=tokenizer.eos_token_id,
    pad_token_id=tokenizer.pad_token_id,
  )
  torch.manual_seed(0)
  model = transformers.LlamaForCausalLM(config)
  if answer is not None:
    with torch.no_grad():
      # Residual stream ~ the token's embedding; every token points at `answer`, which points
      # at the end of turn (rms-normed directions, logits ~ sqrt(32) x dot products).
      embed = model.model.embed_tokens.weight
      embed.zero_()
      embed[:, 0] = 0.1
      embed[tokenizer.convert_tokens_to_ids(answer), :2] = torch.tensor([2.0, 0.5])
      embed[tokenizer.eos_token_id, :2] = torch.tensor([0.0, 20.0])
      for layer in model.model.layers:
        layer.self_attn.o_proj.weight.mul_(1e-4)
        layer.mlp.down_proj.weight.mul_(1e-4)
  model.save_pretrained(folder)
  tokenizer.save_pretrained(folder)
  return tokenizer


def read_only_folder(tmp_path):
  """A folder this process cannot write into: one made read-only, or /proc when running as
  root (permission bits do not stop root; /proc takes no new files from anyone)."""
  if os.geteuid() == 0:
    return pathlib.Path("/proc")
  folder = tmp_path / "read-only"
  folder.mkdir()
  folder.chmod(0o555)
  return folder


def scripted_conversation(conversation, prompt_ids, feedback_for):
  """Plays a `sampling.Conversation` to its end with `feedback_for(turn, row, answer) -> ids`
  ([] ends a row). Returns, per turn, (outputs, conversations): `conversations[row]` is the
  row's whole conversation before that turn's answer, or None once the row has ended."""
  out = conversation.first
  history = [list(prompt_ids[g]) for g in out.groups]
  alive = [True] * len(history)
  played = []
  for turn in range(conversation.turns):
    played.append((out, [list(h) if a else None for h, a in zip(history, alive)]))
    if turn == conversation.turns - 1:
      break
    replies = []
    for row, h in enumerate(history):
      answer = out.tokens[row, : out.lengths[row]].tolist()
      ids = list(feedback_for(turn, row, answer)) if alive[row] and answer else []
      alive[row] = bool(ids)
      h += answer + ids
      replies.append(ids)
    out = conversation.reply(replies)
  return played


def answerable_tasks(path):
  """Tasks a random-weight policy can solve: the buggy program `x = 1` fails a test that
  wants no names defined, the fix (and the policy's usual answer) is `1`."""
  from precisecoder.data import generator
  from precisecoder.tasks import parse_task, task_to_record, write_tasks

  tasks = []
  for task in generator.make_tasks("train", "easy", 8, seed=0):
    record = {k: v for k, v in task_to_record(task).items() if k != "gt_diff"}
    record.update(
      buggy_code="x = 1\n",
      gt_solution="1\n",
      tests={"kind": "assert", "code": "assert [n for n in dir() if n[0] != '_'] == []\n"},
    )
    tasks.append(parse_task(record, task.task_id))
  write_tasks(path, tasks)


# The RL sizes every run on `answerable_tasks` shares, in one process or on several hosts: 2
# tasks x 4 samples of up to 4 tokens a step, all 8 rows one minibatch.
ANSWERABLE_RL = dict(prompts_per_step=2, group_size=4, max_new_tokens=4, minibatch_size=8)


def answerable_train(steps):
  """`config.train` for such a run: `steps` steps, no evaluation or report, one checkpoint at
  the end."""
  return dict(steps=steps, checkpoint_every=100, eval_every=0, report=False)


def answerable_rl_config(task_file, steps, **rl):
  """The tiny model's RL run on `answerable_tasks`: 2 tasks x 4 samples of up to 4 tokens a
  step in 2 rollout chunks, `steps` steps, no evaluation or report, one checkpoint at the end;
  `rl` overrides `config.rl`'s fields. Its step size makes each update move the policy, so that
  samples from a stale policy differ from fresh ones."""
  from precisecoder.train import config as train_config  # pylint: disable=import-outside-toplevel

  cfg = train_config.default("tiny")
  cfg.data.task_file = str(task_file)
  cfg.rl.update(ANSWERABLE_RL, rollout_chunks=2, prompt_bucket=1024)
  cfg.rl.update(rl)
  cfg.optim.learning_rate = 1e-4
  cfg.train.update(answerable_train(steps))
  return cfg


def run_with_cpu_devices(script, count, *args):
  """`script` run as a process of its own with `count` CPU devices and tests/ importable; the
  JSON its last line of output reports."""
  env = {
    **os.environ,
    # Last, so that it wins over a device count the environment sets.
    "XLA_FLAGS": " ".join(
      [os.environ.get("XLA_FLAGS", ""), f"--xla_force_host_platform_device_count={count}"]
    ),
    "JAX_PLATFORMS": "cpu",
    "PYTHONPATH": os.pathsep.join(
      [str(pathlib.Path(__file__).parent), os.environ.get("PYTHONPATH", "")]
    ),
  }
  # The timeout only turns a hang into a failure: a loaded host may take many minutes.
  proc = subprocess.run(
    [sys.executable, str(script), *map(str, args)],
    env=env,
    capture_output=True,
    text=True,
    timeout=3600,
  )
  assert proc.returncode == 0, proc.stderr[-4000:]
  return json.loads(proc.stdout.strip().splitlines()[-1])


def answering_policy(params, garbage_ends=False):
  """Edits the tiny model so that its residual stream is (almost) the current token's
  embedding, a bigram model set by the tied embeddings: after "\n" (the end of every prompt)
  it says "1" with probability ~1/2 (else anything), after "1" it ends. `garbage_ends`: so does
  every other token (the embeddings of all tokens lean towards the end token's), so a
  garbage answer is one token long (a program that fails) and an episode hears feedback."""
  import numpy as np  # pylint: disable=import-outside-toplevel

  newline, one, eos = ord("\n") + 2, ord("1") + 2, 1  # ByteTokenizer ids
  embed = np.array(params["embed"].get_value())
  embed[:, :2] = 0.0
  if garbage_ends:
    embed[:, 1] = 0.02
  for token, (x, y) in (
    (newline, (0.05, 0.0)),
    (one, (np.log(1023) / np.sqrt(128), 0.1)),
    (eos, (0.0, 10.0)),
  ):
    embed[token] = 0.0
    embed[token, :2] = (x, y)
  params["embed"].set_value(embed)
  for name in ("o_proj", "down_proj"):
    params["layers"][name].set_value(params["layers"][name].get_value() * 1e-4)
  return params


def save_step_zero(cfg, workdir, **policy):
  """`workdir` holding the step-0 checkpoint of `answering_policy(**policy)` (the random init
  of `cfg`'s model, edited), which a run of `cfg` there starts from."""
  # pylint: disable=import-outside-toplevel
  from flax import nnx
  from precisecoder.model import run_checkpoints
  from precisecoder.train import policy as policy_lib, run as run_lib, step as step_lib

  start = policy_lib.load_policy(cfg)
  _, params = nnx.split(start.model)
  opt_state = step_lib.init_optimizer(step_lib.make_optimizer(cfg.optim), params, None)
  with run_lib.Run(cfg, str(workdir)) as run:
    run.save(
      0,
      answering_policy(params, **policy),
      opt_state,
      None,
      run_checkpoints.model_meta(start.config, start.source),
    )


def step_metrics(workdir):
  """A run's metrics.jsonl rows without what timing decides (time/*, the reward's exposed
  share): what two runs that trained alike have equal."""
  from precisecoder.train import metrics  # pylint: disable=import-outside-toplevel

  return [
    {k: v for k, v in r.items() if not k.startswith(("time/", "reward_exposed"))}
    for r in metrics.read_metrics(pathlib.Path(workdir) / "metrics.jsonl")
  ]


def saved_params(workdir):
  """The parameters of a run's latest checkpoint, as numpy arrays in tree order."""
  # pylint: disable=import-outside-toplevel
  import jax
  import numpy as np
  from flax import nnx
  from precisecoder.model import run_checkpoints

  model, _, _ = run_checkpoints.load(workdir)
  return [np.asarray(x) for x in jax.tree.leaves(nnx.state(model))]
