"""Multi-turn debugging episodes: the model answers, its program runs on the task's visible
tests, and while some fail it hears which (feedback.py) and answers again, up to `turns` times.

One episode per row, rows prompt-major as the sampler returns them. Turn k:
  1. the sampler decodes the answer, continuing the row's KV cache (sampling.Conversation);
  2. the program is extracted and run on the visible tests (one pool round for every row);
  3. the episode ends if every visible test passed ("passed"), the answer holds no program
     ("no_program"), the answer or its feedback does not fit the token budget ("budget"), or
     this was the last turn ("turns"); otherwise the feedback message becomes a user turn
     through the chat template (prompts.feedback_turn) and the model answers again.
The model's tokens are kept as sampled, never re-tokenized: the text of turn k's prompt is
the first prompt, then each answer as its tokens decode (end-of-turn token included), then
each feedback turn. The episode's program is its last answer's.

For the learner an episode is one response after the prompt: answers and feedback turns in
order, with `model_mask` True on the answers' tokens only (the loss) and behaviour log-probs
on those tokens (0 elsewhere). The width is static: turns x max_new_tokens + (turns - 1) x
feedback_tokens.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
from jax.sharding import Mesh

from precisecoder import feedback as feedback_lib
from precisecoder import multihost, prompts, sampling
from precisecoder.tasks import Task

STOP_REASONS = ("passed", "no_program", "budget", "turns")


@dataclasses.dataclass(frozen=True)
class AgentConfig:
  """How episodes run: `turns` answers at most, feedback turns of at most `feedback_tokens`
  tokens (chat template included) about the visible tests `visibility` picks."""

  turns: int = 1
  feedback_tokens: int = 1024
  visibility: feedback_lib.Visibility = feedback_lib.Visibility()
  feedback_chars: int = 3000  # the message's own bound (feedback.message)
  thinking: bool = False  # the chat template's thinking switch, as in prompts.render_prompt

  def response_len(self, max_new_tokens: int) -> int:
    """Tokens after the prompt that an episode can take."""
    return self.turns * max_new_tokens + (self.turns - 1) * self.feedback_tokens


@dataclasses.dataclass
class Turn:
  prompt: str  # the exact text this turn continued from
  completion: str  # the answer, special tokens removed
  program: str
  num_tokens: int  # answer tokens sampled, end-of-turn token included
  finished: bool  # the answer ended with an end-of-turn token (not the length limit)
  outcome: feedback_lib.Outcome
  feedback: str | None = None  # the message that followed (None: the episode ended here)
  feedback_tokens: int = 0  # tokens of the feedback turn (template included)

  def to_json(self) -> dict[str, Any]:
    return {
      "prompt": self.prompt,
      "completion": self.completion,
      "program": self.program,
      "num_tokens": self.num_tokens,
      "finished": self.finished,
      "outcome": self.outcome.to_json(),
      "feedback": self.feedback,
    }


@dataclasses.dataclass
class Episodes:
  """Rows prompt-major (row = prompt index x num_samples + sample)."""

  prompt_ids: np.ndarray  # int32 [N, P], left-padded
  prompt_mask: np.ndarray  # bool [N, P]
  tokens: np.ndarray  # int32 [N, R]: answers and feedback turns in order, pad after
  logprobs: np.ndarray  # float32 [N, R]: behaviour log-probs on answer tokens, else 0
  model_mask: np.ndarray  # bool [N, R]: True on the model's own tokens
  lengths: np.ndarray  # int32 [N]: response tokens (answers and feedback)
  groups: np.ndarray  # int32 [N]
  turns: list[list[Turn]]  # per row, its turns in order
  stops: list[str]  # per row, why its episode ended (STOP_REASONS)

  @property
  def completions(self) -> list[str]:
    return [t[-1].completion for t in self.turns]

  @property
  def programs(self) -> list[str]:
    return [t[-1].program for t in self.turns]

  @property
  def feedback_tokens(self) -> np.ndarray:
    return np.array([sum(t.feedback_tokens for t in turns) for turns in self.turns], np.int32)


def turn_programs(turns: Sequence[Sequence[Turn]], count: int) -> list[list[str]]:
  """[turn][row]: each row's program after turn k + 1 (its last one once its episode ended)."""
  return [[row[min(k, len(row) - 1)].program for row in turns] for k in range(count)]


def feedback_ids(
  tokenizer, message: str, answer: Sequence[int], *, thinking: bool = False
) -> list[int]:
  """The tokens of the user turn `message` after `answer`: the chat template's text from the
  end of an answer to the start of the next (prompts.feedback_turn), without its end-of-turn
  token when the answer ended with that very token (the model said it already)."""
  ids = prompts.encode_prompt(
    tokenizer, prompts.feedback_turn(tokenizer, message, thinking=thinking)
  )
  return ids[1:] if ids and answer and ids[0] == answer[-1] else ids


def _stop(outcome: feedback_lib.Outcome, finished: bool, last_turn: bool) -> str:
  """Why an episode ends after this answer ("" while it goes on)."""
  if outcome.passed:
    return "passed"
  if outcome.no_program:
    return "no_program"
  if last_turn:
    return "turns"
  return "" if finished else "budget"


def play(
  model,
  tokenizer,
  tasks: Sequence[Task],
  prompt_texts: Sequence[str],
  pool_or_scorer,
  *,
  agent: AgentConfig,
  num_samples: int,
  max_new_tokens: int,
  eos_ids: Sequence[int],
  pad_id: int,
  temperature: float = 1.0,
  top_p: float = 1.0,
  top_k: int = 0,
  seed: int = 0,
  mesh: Mesh | None = None,
  prompt_bucket: int = 64,
  host_rows: sampling.HostRows | None = None,
) -> Episodes:
  """`num_samples` episodes per task, each starting from its rendered prompt text.
  `host_rows`: this host's place in the global batch when it samples on a mesh of its own
  devices (sampling.sample)."""
  prompt_ids = [prompts.encode_prompt(tokenizer, text) for text in prompt_texts]
  conversation = sampling.Conversation(
    model,
    prompt_ids,
    turns=agent.turns,
    feedback_len=agent.feedback_tokens,
    num_samples=num_samples,
    max_new_tokens=max_new_tokens,
    temperature=temperature,
    top_p=top_p,
    top_k=top_k,
    eos_ids=eos_ids,
    pad_id=pad_id,
    seed=seed,
    mesh=mesh,
    prompt_bucket=prompt_bucket,
    host_rows=host_rows,
  )
  out = conversation.first
  rows = len(out.lengths)
  row_tasks = [tasks[g] for g in out.groups]
  texts = [prompt_texts[g] for g in out.groups]  # each row's conversation so far, as text
  width = agent.response_len(max_new_tokens)
  tokens = np.full((rows, width), pad_id, np.int32)
  logprobs = np.zeros((rows, width), np.float32)
  model_mask = np.zeros((rows, width), bool)
  lengths = np.zeros(rows, np.int32)
  turns: list[list[Turn]] = [[] for _ in range(rows)]
  stops = [""] * rows
  live = list(range(rows))
  eos = set(int(e) for e in eos_ids)
  for k in range(agent.turns):
    for r in live:  # the answer joins the row's response
      n = int(out.lengths[r])
      tokens[r, lengths[r] : lengths[r] + n] = out.tokens[r, :n]
      logprobs[r, lengths[r] : lengths[r] + n] = out.logprobs[r, :n]
      model_mask[r, lengths[r] : lengths[r] + n] = True
      lengths[r] += n
    answers = {r: out.tokens[r, : out.lengths[r]].tolist() for r in live}
    completions = {
      r: prompts.decode_completion(tokenizer, ids[:-1] if ids and ids[-1] in eos else ids)
      for r, ids in answers.items()
    }
    programs = {r: prompts.extract_program(c) for r, c in completions.items()}
    results = dict(
      zip(
        live,
        feedback_lib.feedback_many(
          pool_or_scorer,
          [row_tasks[r] for r in live],
          [programs[r] for r in live],
          visibility=agent.visibility,
          max_chars=agent.feedback_chars,
        ),
      )
    )
    replies: list[list[int]] = [[] for _ in range(rows)]
    for r in live:
      finished = bool(answers[r]) and answers[r][-1] in eos
      outcome, message = results[r]
      turns[r].append(
        Turn(texts[r], completions[r], programs[r], len(answers[r]), finished, outcome)
      )
      stops[r] = _stop(outcome, finished, k == agent.turns - 1)
      if stops[r]:
        continue
      ids = feedback_ids(tokenizer, message, answers[r], thinking=agent.thinking)
      if len(ids) > agent.feedback_tokens:
        stops[r] = "budget"
        continue
      replies[r] = ids
      turns[r][-1].feedback, turns[r][-1].feedback_tokens = message, len(ids)
      texts[r] += prompts.decode_text(tokenizer, answers[r]) + prompts.decode_text(tokenizer, ids)
      tokens[r, lengths[r] : lengths[r] + len(ids)] = ids
      lengths[r] += len(ids)
    live = [r for r in range(rows) if replies[r]]
    # On a mesh across hosts every host takes the same turns (its peers' rows may go on when
    # its own have ended); on its own devices a host stops when its rows have.
    more = multihost.global_max(int(bool(live))) if multihost.spans_processes(mesh) else live
    if k == agent.turns - 1 or not more:
      break
    out = conversation.reply(replies)
  return Episodes(
    prompt_ids=out.prompt_ids,
    prompt_mask=out.prompt_mask,
    tokens=tokens,
    logprobs=logprobs,
    model_mask=model_mask,
    lengths=lengths,
    groups=out.groups,
    turns=turns,
    stops=stops,
  )
