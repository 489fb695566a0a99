"""Multi-turn episodes: the feedback turn's tokens through the chat template, and whole episodes
of a tiny policy whose answers pass or fail real tests in the pool."""

import dataclasses
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import answerable_tasks, answering_policy, make_chat_tokenizer
from flax import nnx

from precisecoder import episodes, prompts, sampling
from precisecoder.execution import ExecutionPool
from precisecoder.model import Decoder, architectures
from precisecoder.rewards import RewardScorer
from precisecoder.tasks import load_tasks
from precisecoder.train import greedy_eval, rollout
from precisecoder.train.policy import ByteTokenizer, Policy

CHATML = (
  "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
  "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
QWEN3 = (pathlib.Path(__file__).parent / "testdata" / "qwen3_chat_template.jinja").read_text()
MESSAGE = "Your program failed 1 of 2 visible tests.\n\nTest 1: f(1)\n  expected: 2\n  got: 1"
ANSWER = "```python\ndef f(x):\n    return x\n```"


def test_a_feedback_turn_continues_the_conversation_as_the_template_renders_it():
  tokenizer = make_chat_tokenizer(CHATML, [MESSAGE, ANSWER])
  end = tokenizer.convert_tokens_to_ids("<|im_end|>")
  user = [{"role": "user", "content": "Fix f."}]
  prompt = tokenizer.apply_chat_template(user, tokenize=False, add_generation_prompt=True)
  answer = prompts.encode_prompt(tokenizer, ANSWER) + [end]  # ended by the end-of-turn token
  ids = episodes.feedback_ids(tokenizer, MESSAGE, answer)
  assert ids[0] != end  # the model said it already
  whole = tokenizer.apply_chat_template(
    user + [{"role": "assistant", "content": ANSWER}, {"role": "user", "content": MESSAGE}],
    tokenize=False,
    add_generation_prompt=True,
  )
  assert prompt + prompts.decode_text(tokenizer, answer + ids) == whole
  cut = prompts.encode_prompt(tokenizer, ANSWER)  # cut by the length limit: the turn is closed
  assert episodes.feedback_ids(tokenizer, MESSAGE, cut)[0] == end
  # Qwen3's template: the next answer opens as its first did (thinking off: an empty block).
  qwen = make_chat_tokenizer(QWEN3, [MESSAGE])
  turn = prompts.feedback_turn(qwen, MESSAGE)
  assert turn == (
    f"<|im_end|>\n<|im_start|>user\n{MESSAGE}<|im_end|>\n"
    "<|im_start|>assistant\n<think>\n\n</think>\n\n"
  )
  assert prompts.feedback_turn(qwen, MESSAGE, thinking=True).endswith("<|im_start|>assistant\n")


@pytest.fixture(scope="module", name="pool")
def _pool():
  with ExecutionPool(workers=2) as pool:
    yield pool


@pytest.fixture(scope="module", name="policy")
def _policy():
  """Answers "1" (which passes `answerable_tasks`) with probability ~1/2, else one token that
  fails; greedy, it answers "1"."""
  graphdef, params = nnx.split(Decoder(architectures.get("tiny"), rngs=nnx.Rngs(0)))
  model = nnx.merge(graphdef, answering_policy(params, garbage_ends=True))
  return Policy(model=model, tokenizer=ByteTokenizer(), config=model.config, eos_ids=[1], pad_id=0)


@pytest.fixture(scope="module", name="tasks")
def _tasks(tmp_path_factory):
  path = tmp_path_factory.mktemp("answerable") / "tasks.jsonl"
  answerable_tasks(path)
  return load_tasks(path)


def test_episodes_of_a_policy_that_passes_or_fails(pool, policy, tasks):
  """Failures hear feedback and answer again. The learner's rows are the sampled
  conversations: answers in the loss, feedback not, behaviour log-probs those of the policy
  on the packed sequence."""
  model, tasks = policy.model, tasks[:2]
  agent = episodes.AgentConfig(turns=3, feedback_tokens=320)
  out = rollout.sample_rollout(
    policy,
    tasks,
    num_samples=4,
    max_new_tokens=4,
    temperature=1.0,
    seed=3,
    include_tests=False,
    prompt_bucket=128,
    agent=agent,
    pool=pool,
  )
  assert sorted(set(out.stops)) == ["no_program", "passed", "turns"]  # seed 3: all three
  assert max(len(t) for t in out.turns) == 3
  width = agent.response_len(4)
  assert out.tokens.shape[1] == width == 3 * 4 + 2 * 320
  for row, turns in enumerate(out.turns):
    last = turns[-1]
    assert (out.stops[row] == "passed") == last.outcome.passed
    assert (out.stops[row] == "no_program") == last.outcome.no_program
    assert last.feedback is None and all(t.feedback for t in turns[:-1])
    assert out.programs[row] == last.program and out.completions[row] == last.completion
    # The response: each answer (in the loss) then its feedback turn (not), in order.
    start = 0
    for k, turn in enumerate(turns):
      assert out.model_mask[row, start : start + turn.num_tokens].all()
      start += turn.num_tokens
      assert not out.model_mask[row, start : start + turn.feedback_tokens].any()
      fed = out.tokens[row, start : start + turn.feedback_tokens].tolist()
      start += turn.feedback_tokens
      if turn.feedback is not None:
        assert prompts.decode_text(policy.tokenizer, fed) == prompts.feedback_turn(
          policy.tokenizer, turn.feedback
        )
        assert turns[k + 1].prompt.endswith(turn.feedback + "\n<assistant>\n")
        assert turns[k + 1].prompt.startswith(turn.prompt)
    assert start == out.lengths[row] and not out.model_mask[row, start:].any()
    assert (out.logprobs[row][~out.model_mask[row]] == 0).all()
    assert "1" not in [t.program for t in turns[:-1]]  # a passing answer ends the episode
  batch = rollout.training_arrays(out, 0, completion_len=width)
  np.testing.assert_array_equal(batch["completion_mask"], out.model_mask)
  assert (batch["mask"][:, -width:].sum(axis=1) == out.lengths).all()
  logits = model(jnp.asarray(batch["tokens"]), jnp.asarray(batch["mask"]))
  logp = jax.nn.log_softmax(logits[:, -width - 1 : -1], axis=-1)
  logp = np.asarray(
    jnp.take_along_axis(logp, jnp.asarray(batch["tokens"][:, -width:, None]), axis=-1)[..., 0]
  )
  np.testing.assert_allclose(logp[out.model_mask], batch["old_logprobs"][out.model_mask], atol=1e-4)
  assert sampling.completion_mask(out.lengths, width).sum() > out.model_mask.sum()


def test_greedy_evaluation_runs_episodes(pool, policy, tasks):
  """Training-time evaluation of an agent: episodes, the columns of their last programs, and
  pass and edited lines after each turn."""
  summary, records = greedy_eval.evaluate_greedy(
    policy,
    tasks[:4],
    RewardScorer(pool),
    max_new_tokens=4,
    batch_size=4,
    include_tests=False,
    prompt_bucket=128,
    agent=episodes.AgentConfig(turns=2, feedback_tokens=320),
  )
  assert summary["pass"] == summary["pass_turn1"] == summary["pass_turn2"] == 1.0
  assert summary["edit_lines_turn1"] == summary["edit_lines"] == 1.0
  assert [r["turns"][0]["program"] for r in records] == ["1"] * 4
  assert all(r["turns"][0]["outcome"]["passed"] and len(r["turns"]) == 1 for r in records)
  buggy, clean = tasks[0], dataclasses.replace(tasks[1], is_buggy=False)
  terms = {k: np.zeros(2) for k in ("precision", "recall", "f1", "noop", "damage")}
  terms.update(
    unit=np.array([1.0, 0.0]),
    edit_lines=np.array([2.0, 5.0]),
    unit_turn1=np.array([0.0, 1.0]),
    edit_lines_turn1=np.array([4.0, 0.0]),
  )
  by_turn = greedy_eval.summarize([buggy, clean], terms)  # buggy rows only, turn by turn
  assert (by_turn["pass_turn1"], by_turn["edit_lines_turn1"]) == (0.0, 4.0)
