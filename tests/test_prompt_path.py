"""One prompt path: training, evaluation and `generate` render byte-identical prompts, and
prefilled thinking is exactly what the chat template gives."""

import functools
import json
import pathlib

import numpy as np
import pytest
import transformers
from conftest import make_chat_tokenizer, make_tiny_chat_checkpoint

from precisecoder import cli, prompts, tasks as tasks_lib
from precisecoder.model import load_checkpoint
from precisecoder.model.tokenizer import eos_token_ids, pad_token_id
from precisecoder.train import rollout, sft
from precisecoder.train.policy import Policy

# Written here, without Qwen3's tool branches; on 2026-12-01 it rendered byte-identical to the
# template Qwen ships with Qwen3-0.6B for all 8 shapes prompts.py renders (user turn with or
# without a system turn; enable_thinking unset, true, false; the prefilled assistant turn).
QWEN3_TEMPLATE = (
  pathlib.Path(__file__).parent / "testdata" / "qwen3_chat_template.jinja"
).read_text()
CHATML = (
  "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
  "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
# A template that keeps only the answer of assistant turns (reasoning dropped): plain fallback.
DROPS_REASONING = (
  "{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
  "{% if m['role'] == 'assistant' %}{{ m['content'].split('</think>')[-1] }}"
  "{% else %}{{ m['content'] }}{% endif %}<|im_end|>\n"
  "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

TASKS = [
  tasks_lib.Task(
    task_id="inc_0",
    prompt="Return x plus one.",
    buggy_code="def inc(x):\n    return x - 1\n",
    gt_solution="def inc(x):\n    return x + 1\n",
    gt_diff=tasks_lib.derive_gt_diff(
      "def inc(x):\n    return x - 1\n", "def inc(x):\n    return x + 1\n"
    ),
    tests={"kind": "call", "entry_point": "inc", "cases": [{"args": [1], "expected": 2}]},
  ),
  tasks_lib.Task(
    task_id="neg_0",
    prompt="Return minus x.",
    buggy_code="def neg(x):\n    return x\n",
    gt_solution="def neg(x):\n    return -x\n",
    gt_diff=tasks_lib.derive_gt_diff("def neg(x):\n    return x\n", "def neg(x):\n    return -x\n"),
    tests={"kind": "call", "entry_point": "neg", "cases": [{"args": [2], "expected": -2}]},
  ),
]
THINKING = "The bug is on line 2: `return x - 1` subtracts.\nIt should add."


CORPUS = [t.buggy_code + t.gt_solution + t.prompt for t in TASKS]


@functools.cache
def _tokenizer(template: str) -> transformers.PreTrainedTokenizerFast:
  return make_chat_tokenizer(template, CORPUS)


@pytest.fixture(scope="module")
def qwen_checkpoint(tmp_path_factory):
  folder = tmp_path_factory.mktemp("tiny_qwen_template")
  make_tiny_chat_checkpoint(folder, QWEN3_TEMPLATE, CORPUS)
  task_file = folder / "tasks.jsonl"
  tasks_lib.write_tasks(task_file, TASKS)
  return folder, task_file


def _generate(folder, task_file, out, *extra):
  assert (
    cli.main(
      [
        "generate",
        "--checkpoint",
        str(folder),
        "--tasks",
        str(task_file),
        "--output",
        str(out),
        "--max-new-tokens",
        "2",
        *extra,
      ]
    )
    == 0
  )
  return [json.loads(line) for line in out.read_text().splitlines()]


def test_training_evaluation_and_generate_render_identical_prompts(qwen_checkpoint, tmp_path):
  folder, task_file = qwen_checkpoint
  model, tokenizer, config = load_checkpoint(folder)
  policy = Policy(
    model=model,
    tokenizer=tokenizer,
    config=config,
    eos_ids=eos_token_ids(tokenizer, config.eos_token_ids),
    pad_id=pad_token_id(tokenizer, config.pad_token_id),
  )
  generated = _generate(folder, task_file, tmp_path / "pred.jsonl")
  training = rollout.encode_prompts(policy, TASKS)
  # greedy_eval.evaluate_greedy and the RL loop sample through sample_rollout.
  evaluated = rollout.sample_rollout(
    policy, TASKS, num_samples=1, max_new_tokens=2, temperature=0.0, seed=0
  )
  demos = sft.sft_batch(policy, TASKS)
  for n, (task, line) in enumerate(zip(TASKS, generated)):
    text = line["prompt"]
    # Qwen3's template with thinking off opens the turn with an empty think block.
    assert text.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert text == prompts.render_prompt(tokenizer, task)
    ids = tokenizer.encode(text, add_special_tokens=False)
    assert training[n] == ids
    assert evaluated.prompt_ids[n][evaluated.prompt_mask[n]].tolist() == ids
    answer_start = demos["mask"].shape[1] - demos["completion_mask"].shape[1]
    prompt_part = demos["mask"][n] & ~np.pad(demos["completion_mask"][n], (answer_start, 0))
    assert demos["tokens"][n][prompt_part].tolist() == ids


def test_prefill_is_exactly_what_the_qwen3_template_gives():
  tokenizer = _tokenizer(QWEN3_TEMPLATE)
  messages = prompts.debug_messages(TASKS[0])
  text = prompts.render_prompt(tokenizer, TASKS[0], prefill_thinking=THINKING)
  # The template's own rendering of an assistant turn with this reasoning, cut before the answer.
  whole = tokenizer.apply_chat_template(
    messages + [{"role": "assistant", "reasoning_content": THINKING, "content": "ANSWER"}],
    tokenize=False,
  )
  assert text == whole[: whole.index("ANSWER")]
  assert text == (
    tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    + f"<think>\n{THINKING}\n</think>\n\n"
  )


@pytest.mark.parametrize("template", [CHATML, DROPS_REASONING], ids=["chatml", "drops-reasoning"])
def test_prefill_plain_form(template):
  tokenizer = _tokenizer(template)
  text = prompts.render_prompt(tokenizer, TASKS[0], prefill_thinking=f"\n{THINKING}\n")
  opening = tokenizer.apply_chat_template(
    prompts.debug_messages(TASKS[0]), tokenize=False, add_generation_prompt=True
  )
  expected = opening + f"<think>\n{THINKING}\n</think>\n\n"
  assert text == expected


def test_thinking_block_forms():
  assert prompts.thinking_block("<think>\nfirst\n</think>\n```python\nx\n```") == "first"
  assert prompts.thinking_block("opened by the template</think>answer") == "opened by the template"
  assert prompts.thinking_block("<think>cut off by the length") == "cut off by the length"
  assert prompts.thinking_block("```python\nx = 1\n```") is None


def test_generate_prefill_thinking(qwen_checkpoint, tmp_path):
  folder, task_file = qwen_checkpoint
  source = tmp_path / "from.jsonl"
  source.write_text(
    "".join(
      json.dumps(r) + "\n"
      for r in [
        {"task_id": "inc_0", "sample": 1, "completion": "<think>later sample</think>x"},
        {"task_id": "inc_0", "sample": 0, "completion": f"<think>\n{THINKING}\n</think>\n```x```"},
        {"task_id": "neg_0", "sample": 0, "completion": "no reasoning here"},
      ]
    )
  )
  lines = _generate(folder, task_file, tmp_path / "pred.jsonl", "--prefill-thinking", str(source))
  lines.sort(key=lambda line: line["task_id"] != "inc_0")
  tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
  assert lines[0]["prompt"] == prompts.render_prompt(tokenizer, TASKS[0], prefill_thinking=THINKING)
  assert lines[0]["prompt"].endswith(f"<think>\n{THINKING}\n</think>\n\n")
  assert "error" not in lines[0]
  assert lines[1]["completion"] == "" and "no thinking block" in lines[1]["error"]
  assert lines[1]["prompt"] == prompts.render_prompt(tokenizer, TASKS[1])  # nothing prefilled
  source.write_text(json.dumps({"task_id": "inc_0", "sample": "one", "completion": ""}) + "\n")
  assert (
    cli.main(
      [
        "generate",
        "--checkpoint",
        str(folder),
        "--tasks",
        str(task_file),
        "--output",
        str(tmp_path / "bad.jsonl"),
        "--prefill-thinking",
        str(source),
      ]
    )
    == 2
  )
