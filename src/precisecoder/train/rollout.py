"""Rollouts: tasks -> chat prompts -> sampled completions -> extracted programs; with
`rl.turns` > 1, multi-turn episodes with test feedback between turns (episodes.py)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import ml_collections
import numpy as np
from jax.sharding import Mesh

from precisecoder import episodes as episodes_lib
from precisecoder import feedback as feedback_lib
from precisecoder import prompts, sampling
from precisecoder.tasks import Task
from precisecoder.train.policy import Policy


@dataclasses.dataclass
class Rollout:
  """Rows are prompt-major (the samples of one task are adjacent)."""

  tasks: list[Task]  # per row
  prompt_ids: np.ndarray  # int32 [N, P], left-padded
  prompt_mask: np.ndarray  # bool [N, P]
  tokens: np.ndarray  # int32 [N, T]
  logprobs: np.ndarray  # float32 [N, T], behaviour log-probs
  lengths: np.ndarray  # int32 [N]
  completions: list[str]  # an episode's last answer
  programs: list[str]  # an episode's last program
  # Episodes (rl.turns > 1): `tokens` are answers and feedback turns; the loss sees only
  # `model_mask`'s tokens. None for single answers (every token is the model's).
  model_mask: np.ndarray | None = None
  turns: list[list[episodes_lib.Turn]] | None = None
  stops: list[str] | None = None

  def __len__(self) -> int:
    return self.tokens.shape[0]  # rows (a restored rollout in flight has no tasks: inflight.py)

  @property
  def completion_mask(self) -> np.ndarray:
    return sampling.completion_mask(self.lengths, self.tokens.shape[1])

  @property
  def loss_mask(self) -> np.ndarray:
    return self.completion_mask if self.model_mask is None else self.model_mask


def agent_config(rl: ml_collections.ConfigDict) -> episodes_lib.AgentConfig | None:
  """The episodes of `rl.turns` > 1 (None: one answer per sample, the single-turn path)."""
  if rl.turns <= 1:
    return None
  return episodes_lib.AgentConfig(
    turns=rl.turns,
    feedback_tokens=rl.feedback_tokens,
    visibility=feedback_lib.Visibility(rl.visible_tests, rl.visible_fraction),
  )


def response_len(rl: ml_collections.ConfigDict) -> int:
  """Tokens after the prompt a sample can take: one answer, or an episode's answers and
  feedback turns."""
  agent = agent_config(rl)
  return rl.max_new_tokens if agent is None else agent.response_len(rl.max_new_tokens)


def encode_prompts(
  policy: Policy, tasks: Sequence[Task], *, include_tests: bool = True
) -> list[list[int]]:
  return [policy.prompt_ids(t, include_tests=include_tests) for t in tasks]


def _prompt_texts(policy: Policy, tasks: Sequence[Task], include_tests: bool) -> list[str]:
  """The chat prompts an episode starts from (its later turns continue their text)."""
  return [prompts.render_prompt(policy.tokenizer, t, include_tests=include_tests) for t in tasks]


def prompt_lengths(
  policy: Policy,
  tasks: Sequence[Task],
  *,
  include_tests: bool = True,
  agent: episodes_lib.AgentConfig | None = None,
) -> list[int]:
  """The prompt tokens of each task as `sample_rollout` encodes it."""
  if agent is not None:
    texts = _prompt_texts(policy, tasks, include_tests)
    return [len(prompts.encode_prompt(policy.tokenizer, text)) for text in texts]
  return [len(ids) for ids in encode_prompts(policy, tasks, include_tests=include_tests)]


def sample_rollout(
  policy: Policy,
  tasks: Sequence[Task],
  *,
  num_samples: int,
  max_new_tokens: int,
  temperature: float,
  seed: int,
  top_p: float = 1.0,
  include_tests: bool = True,
  prompt_bucket: int = 64,
  mesh: Mesh | None = None,
  agent: episodes_lib.AgentConfig | None = None,
  pool=None,
  host_rows: sampling.HostRows | None = None,
) -> Rollout:
  """`num_samples` completions per task and the programs extracted from them; with `agent`,
  `num_samples` episodes per task whose visible tests run in `pool` (a pool or scorer).
  `host_rows`: the tasks' place in the global batch when this host samples them on devices
  of its own (sampling.agree_rows, from `prompt_lengths`)."""
  if agent is not None:
    texts = _prompt_texts(policy, tasks, include_tests)
    out = episodes_lib.play(
      policy.model,
      policy.tokenizer,
      tasks,
      texts,
      pool,
      agent=agent,
      num_samples=num_samples,
      max_new_tokens=max_new_tokens,
      eos_ids=policy.eos_ids,
      pad_id=policy.pad_id,
      temperature=temperature,
      top_p=top_p,
      seed=seed,
      mesh=mesh,
      prompt_bucket=prompt_bucket,
      host_rows=host_rows,
    )
    return Rollout(
      tasks=[tasks[g] for g in out.groups],
      prompt_ids=out.prompt_ids,
      prompt_mask=out.prompt_mask,
      tokens=out.tokens,
      logprobs=out.logprobs,
      lengths=out.lengths,
      completions=out.completions,
      programs=out.programs,
      model_mask=out.model_mask,
      turns=out.turns,
      stops=out.stops,
    )
  ids = encode_prompts(policy, tasks, include_tests=include_tests)
  out = sampling.sample(
    policy.model,
    ids,
    num_samples=num_samples,
    max_new_tokens=max_new_tokens,
    temperature=temperature,
    top_p=top_p,
    eos_ids=policy.eos_ids,
    pad_id=policy.pad_id,
    seed=seed,
    mesh=mesh,
    prompt_bucket=prompt_bucket,
    host_rows=host_rows,
  )
  completions = [
    prompts.decode_completion(policy.tokenizer, out.completion_ids(r, eos_ids=policy.eos_ids))
    for r in range(out.tokens.shape[0])
  ]
  return Rollout(
    tasks=[tasks[g] for g in out.groups],
    prompt_ids=out.prompt_ids,
    prompt_mask=out.prompt_mask,
    tokens=out.tokens,
    logprobs=out.logprobs,
    lengths=out.lengths,
    completions=completions,
    programs=[prompts.extract_program(c) for c in completions],
  )


def concat_rollouts(parts: Sequence[Rollout], pad_id: int) -> Rollout:
  """Joins rollouts sampled in chunks, re-padding prompts (left) and completions (right)."""
  p = max(r.prompt_ids.shape[1] for r in parts)
  t = max(r.tokens.shape[1] for r in parts)
  pad = sampling.pad_to
  return Rollout(
    tasks=[x for r in parts for x in r.tasks],
    prompt_ids=np.concatenate([pad(r.prompt_ids, p, pad_id, left=True) for r in parts]),
    prompt_mask=np.concatenate([pad(r.prompt_mask, p, False, left=True) for r in parts]),
    tokens=np.concatenate([pad(r.tokens, t, pad_id, left=False) for r in parts]),
    logprobs=np.concatenate([pad(r.logprobs, t, 0.0, left=False) for r in parts]),
    lengths=np.concatenate([r.lengths for r in parts]),
    completions=[x for r in parts for x in r.completions],
    programs=[x for r in parts for x in r.programs],
    **(
      {}
      if parts[0].model_mask is None
      else dict(
        model_mask=np.concatenate([pad(r.model_mask, t, False, left=False) for r in parts]),
        turns=[x for r in parts for x in r.turns],
        stops=[x for r in parts for x in r.stops],
      )
    ),
  )


def training_arrays(rollout: Rollout, pad_id: int, *, completion_len: int) -> dict[str, np.ndarray]:
  """Prompt + completion as one sequence for the learner. Completions are padded to a fixed
  `completion_len` (and prompts come bucketed from the sampler) so that the train step
  compiles once rather than for every step's longest completion. The loss mask
  (`completion_mask`) covers the model's own tokens: all of a completion, an episode's
  answers but not its feedback turns."""
  t = completion_len
  tokens = sampling.pad_to(rollout.tokens[:, :t], t, pad_id, left=False)
  cmask = sampling.completion_mask(rollout.lengths, t)
  logprobs = sampling.pad_to(rollout.logprobs[:, :t], t, 0.0, left=False)
  loss_mask = sampling.pad_to(rollout.loss_mask[:, :t], t, False, left=False)
  return {
    "tokens": np.concatenate([rollout.prompt_ids, tokens], axis=1).astype(np.int32),
    "mask": np.concatenate([rollout.prompt_mask, cmask], axis=1),
    "completion_mask": loss_mask,
    "old_logprobs": logprobs.astype(np.float32),
  }
