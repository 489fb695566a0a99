"""The supervised losses' sequences (train/sequences.py), called directly: the answer text the
debug prompt asks for, and batches of left-padded prompts then right-padded answers, their
masks, length buckets and the cut at max_len. SFT and DPO on such batches: test_sft.py,
test_dpo.py."""

import numpy as np
import pytest

from precisecoder import tasks as tasks_lib
from precisecoder.train import sequences


def test_the_reference_answer_is_the_fixed_program_in_a_python_block():
  task = tasks_lib.Task(
    task_id="t",
    prompt="p",
    buggy_code="x = 0\n",
    gt_solution="x = 1\n\n",
    gt_diff={},
    tests={"kind": "call", "entry_point": "f", "cases": []},
  )
  assert sequences.reference_answer(task) == "```python\nx = 1\n```"


def test_sequence_batches_pad_prompts_left_answers_right_and_mask_the_answers():
  batch = sequences.sequence_batch([[5, 6, 7], [8]], [[1], [2, 3]], pad_id=0, multiple=4)
  np.testing.assert_array_equal(
    batch["tokens"], [[0, 5, 6, 7, 1, 0, 0, 0], [0, 0, 0, 8, 2, 3, 0, 0]]
  )
  np.testing.assert_array_equal(batch["mask"], batch["tokens"] != 0)
  np.testing.assert_array_equal(batch["completion_mask"], [[1, 0, 0, 0], [1, 1, 0, 0]])
  # A power of two times `multiple`: answers of 9 tokens take 16 columns, not 12.
  long = sequences.sequence_batch([[5]], [list(range(1, 10))], 0, multiple=4, power_of_two=True)
  assert long["tokens"].shape == (1, 4 + 16)
  # Past max_len the answer is cut (the prompt never is): 8 prompt columns leave 4.
  cut = sequences.sequence_batch([[5] * 8], [list(range(1, 10))], 0, multiple=4, max_len=12)
  assert cut["tokens"].shape == (1, 12) and cut["tokens"][0, 8:].tolist() == [1, 2, 3, 4]
  # Powers of two that would pass max_len fall back to multiples: 5 + 9 tokens fit 8 + 12
  # columns, so no answer token is cut, where 8 + 16 would have cut 4 of them.
  fits = sequences.sequence_batch(
    [[5] * 5], [list(range(1, 10))], 0, multiple=4, max_len=20, power_of_two=True
  )
  assert fits["tokens"].shape == (1, 8 + 12) and fits["completion_mask"].sum() == 9
  with pytest.raises(ValueError, match="2 prompts but 1 answers"):
    sequences.sequence_batch([[1], [2]], [[3]], 0)
