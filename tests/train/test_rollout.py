"""Rollouts: sampled rows grouped by task, chunks joined with their padding redone, and the
learner's arrays (prompt + completion, the loss on the model's own tokens only)."""

import numpy as np
import pytest

from precisecoder import prompts, tasks as tasks_lib
from precisecoder.train import config as config_lib
from precisecoder.train import policy as policy_lib
from precisecoder.train import rollout

PAD = 0


def _task(task_id):
  return tasks_lib.parse_task(
    {
      "task_id": task_id,
      "buggy_code": "x = 1\n",
      "gt_solution": "x = 2\n",
      "tests": {"kind": "assert", "code": "assert x == 2\n"},
      "is_buggy": True,
    },
    "test",
  )


def _part(task_ids, prompt, tokens, lengths, model_mask=None):
  n = len(task_ids)
  prompt_ids = np.asarray(prompt, np.int32)
  return rollout.Rollout(
    tasks=[_task(t) for t in task_ids],
    prompt_ids=prompt_ids,
    prompt_mask=prompt_ids != PAD,
    tokens=np.asarray(tokens, np.int32),
    logprobs=-np.ones_like(np.asarray(tokens), dtype=np.float32),
    lengths=np.asarray(lengths, np.int32),
    completions=[f"c{t}" for t in task_ids],
    programs=[f"p{t}" for t in task_ids],
    model_mask=model_mask,
    turns=None if model_mask is None else [[] for _ in range(n)],
    stops=None if model_mask is None else ["eos"] * n,
  )


def test_chunks_join_with_prompts_padded_left_and_completions_right():
  a = _part(["a"], [[5, 6]], [[7, 8, 9]], [3])
  b = _part(["b", "c"], [[0, 5, 6, 7], [5, 6, 7, 8]], [[9], [9]], [1, 1])
  joined = rollout.concat_rollouts([a, b], PAD)
  assert len(joined) == 3 and [t.task_id for t in joined.tasks] == ["a", "b", "c"]
  np.testing.assert_array_equal(joined.prompt_ids, [[0, 0, 5, 6], [0, 5, 6, 7], [5, 6, 7, 8]])
  np.testing.assert_array_equal(joined.prompt_mask, joined.prompt_ids != PAD)
  np.testing.assert_array_equal(joined.tokens, [[7, 8, 9], [9, 0, 0], [9, 0, 0]])
  np.testing.assert_array_equal(joined.logprobs, [[-1, -1, -1], [-1, 0, 0], [-1, 0, 0]])
  np.testing.assert_array_equal(
    joined.completion_mask, [[True] * 3, [True, False, False], [True, False, False]]
  )
  assert joined.programs == ["pa", "pb", "pc"] and joined.model_mask is None


def test_episode_chunks_keep_their_model_masks_and_turns():
  a = _part(["a"], [[5]], [[7, 8, 9]], [3], model_mask=np.asarray([[True, False, True]]))
  b = _part(["b"], [[5]], [[7]], [1], model_mask=np.asarray([[True]]))
  joined = rollout.concat_rollouts([a, b], PAD)
  np.testing.assert_array_equal(joined.loss_mask, [[True, False, True], [True, False, False]])
  assert joined.stops == ["eos", "eos"] and len(joined.turns) == 2


def test_training_arrays_pad_to_a_fixed_width_and_mask_only_the_models_tokens():
  part = _part(["a", "b"], [[0, 5], [5, 6]], [[7, 8, 9], [7, 0, 0]], [3, 1])
  arrays = rollout.training_arrays(part, PAD, completion_len=4)
  np.testing.assert_array_equal(arrays["tokens"], [[0, 5, 7, 8, 9, 0], [5, 6, 7, 0, 0, 0]])
  np.testing.assert_array_equal(
    arrays["mask"],
    [[False, True, True, True, True, False], [True, True, True, False, False, False]],
  )
  np.testing.assert_array_equal(
    arrays["completion_mask"], [[True, True, True, False], [True, False, False, False]]
  )
  np.testing.assert_array_equal(arrays["old_logprobs"], [[-1, -1, -1, 0], [-1, -1, -1, 0]])
  assert arrays["tokens"].dtype == np.int32 and arrays["old_logprobs"].dtype == np.float32
  episode = _part(["a"], [[5]], [[7, 8, 9]], [3], model_mask=np.asarray([[True, False, True]]))
  cut = rollout.training_arrays(episode, PAD, completion_len=2)  # longer ones are cut
  np.testing.assert_array_equal(cut["completion_mask"], [[True, False]])  # not the feedback
  np.testing.assert_array_equal(cut["tokens"], [[5, 7, 8]])


def test_response_len_is_one_answer_or_an_episodes_answers_and_feedback():
  rl = config_lib.default("tiny").rl
  rl.max_new_tokens = 16
  assert rollout.agent_config(rl) is None and rollout.response_len(rl) == 16
  rl.update(turns=3, feedback_tokens=100)
  assert rollout.agent_config(rl).turns == 3
  assert rollout.response_len(rl) == 3 * 16 + 2 * 100


@pytest.fixture(scope="module", name="policy")
def tiny_policy():
  return policy_lib.load_policy(config_lib.default("tiny"))


def test_sampled_rows_are_grouped_by_task_and_their_programs_extracted(policy):
  tasks = [_task("a"), _task("b")]
  out = rollout.sample_rollout(
    policy, tasks, num_samples=2, max_new_tokens=3, temperature=1.0, seed=0
  )
  assert [t.task_id for t in out.tasks] == ["a", "a", "b", "b"]
  assert out.tokens.shape == (4, 3) and out.logprobs.shape == (4, 3)
  assert np.all((1 <= out.lengths) & (out.lengths <= 3))
  assert np.all(out.logprobs[out.completion_mask] <= 0)
  for row in range(4):  # each row's prompt is its task's prompt
    want = rollout.encode_prompts(policy, [out.tasks[row]])[0]
    assert out.prompt_ids[row][out.prompt_mask[row]].tolist() == want
  assert out.programs == [prompts.extract_program(c) for c in out.completions]
  again = rollout.sample_rollout(
    policy, tasks, num_samples=2, max_new_tokens=3, temperature=1.0, seed=0
  )
  np.testing.assert_array_equal(again.tokens, out.tokens)  # the seed decides the samples
