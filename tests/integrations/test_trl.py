"""TRL: our reward functions called exactly as GRPOTrainer._calculate_rewards calls them
(trl 1.16.0), and, where TRL is installed, two GRPOTrainer steps on a tiny random model."""

import math

import pytest

from integration_helpers import (
  completions_for,
  make_task_set,
  rows_for,
  score_command,
  term_of_record,
  write_task_file,
)
from precisecoder.integrations import adapters, trl as pc_trl

TERMS = ("unit", "precision", "recall", "f1", "r_lambda", "edit_lines")


def _call_as_trl(func, prompts, completions, columns):
  """GRPOTrainer's call: dataset columns (but prompt/completion) repeated per completion,
  plus trainer_state, log_extra and log_metric; None becomes NaN."""
  logged = {}
  out = func(
    prompts=prompts,
    completions=completions,
    completion_ids=[[1, 2, 3]] * len(completions),
    **columns,
    trainer_state=object(),
    log_extra=lambda c, v: logged.setdefault(c, v),
    log_metric=lambda n, v: logged.setdefault(n, v),
  )
  assert len(out) == len(prompts)
  return [math.nan if r is None else float(r) for r in out]


def test_terms_called_as_grpo_trainer_equal_precisecoder_score(tmp_path):
  task_set = make_task_set()
  task_file = write_task_file(tmp_path, task_set)
  ids, completions = rows_for(task_set)
  funcs = pc_trl.reward_functions(str(task_file), terms=TERMS, lam=1 / 3)
  assert [getattr(f, "__name__") for f in funcs] == list(TERMS)  # TRL logs rewards/<name>/mean
  prompts = [[{"role": "user", "content": "fix it"}]] * len(ids)
  conversational = [[{"role": "assistant", "content": c}] for c in completions]
  columns = {"task_id": ids, "source": ["x"] * len(ids)}
  records = score_command(tmp_path, task_file, ids, completions)
  for func in funcs:
    got = _call_as_trl(func, prompts, conversational, columns)
    want = [term_of_record(r, func.__name__) for r in records]
    assert got == pytest.approx(want, abs=1e-9), func.__name__
  by_term = {f.__name__: _call_as_trl(f, prompts, completions, columns) for f in funcs}
  assert set(by_term["unit"]) == {0.0, 1.0} and 0 < by_term["precision"][2] < 1


def test_dataset_rows_name_their_task(tmp_path):
  task_set = make_task_set()
  rows = pc_trl.dataset_rows(task_set)
  assert [r["task_id"] for r in rows] == [t.task_id for t in task_set]
  assert rows[0]["prompt"][0]["role"] == "user"
  assert task_set[0].buggy_code.strip() in rows[0]["prompt"][0]["content"]


# ---------------------------------------------------------------------------
# Through TRL itself
# ---------------------------------------------------------------------------

CHAT_TEMPLATE = (
  "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}"
  "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n"
  "{% endif %}"
)


def _teach(model, tokenizer, texts, steps=200):
  """Adam steps on `texts`, so that samples are answers (the fix or the bug), not noise."""
  import torch  # pylint: disable=import-outside-toplevel

  batch = tokenizer(texts, return_tensors="pt", padding=True)
  labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
  optimizer = torch.optim.Adam(model.parameters(), lr=2e-2)
  for _ in range(steps):
    loss = model(**batch, labels=labels).loss
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


@pytest.fixture
def one_torch_thread():
  """Tiny models on a shared 2-core host: torch's thread pool only contends (40x slower)."""
  import torch  # pylint: disable=import-outside-toplevel

  threads = torch.get_num_threads()
  torch.set_num_threads(1)
  yield
  torch.set_num_threads(threads)


@pytest.mark.slow
def test_grpo_trainer_two_steps_logs_the_terms_score_gives(tmp_path, one_torch_thread):
  """Two GRPOTrainer steps (GDPO: normalize_then_sum) with our functions on a tiny random
  Llama taught to answer with the fix or the buggy code: the logged per-term means equal
  `precisecoder score` of the completions TRL generated."""
  trl = pytest.importorskip("trl")
  datasets = pytest.importorskip("datasets")
  import torch  # pylint: disable=import-outside-toplevel
  import transformers  # pylint: disable=import-outside-toplevel
  from conftest import make_chat_tokenizer  # pylint: disable=import-outside-toplevel

  task_set = make_task_set()[:2]
  task_file = write_task_file(tmp_path, task_set)
  # A short prompt (the buggy code) keeps the model small and fast; the reward reads the task.
  rows = [
    {"prompt": [{"role": "user", "content": t.buggy_code}], "task_id": t.task_id} for t in task_set
  ]
  answers = [c for t in task_set for c in completions_for(t)[:2]]
  tokenizer = make_chat_tokenizer(CHAT_TEMPLATE, [t.buggy_code for t in task_set] + answers)
  tokenizer.padding_side = "left"
  config = transformers.LlamaConfig(
    vocab_size=len(tokenizer),
    hidden_size=48,
    intermediate_size=96,
    num_hidden_layers=1,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=1024,
    tie_word_embeddings=True,
    eos_token_id=tokenizer.eos_token_id,
    pad_token_id=tokenizer.pad_token_id,
  )
  torch.manual_seed(0)
  model = transformers.LlamaForCausalLM(config)
  prompts = [
    tokenizer.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True)
    for r in rows
  ]
  _teach(
    model,
    tokenizer,
    [p + a + "<|im_end|>" for p, t in zip(prompts, task_set) for a in completions_for(t)[:2]],
  )

  generated = []

  def keep(prompts, completions, task_id, **_):  # weight 0: records what TRL scored
    generated.append((list(task_id), [adapters.completion_text(c) for c in completions]))
    return [0.0] * len(completions)

  funcs = pc_trl.reward_functions(str(task_file), terms=("unit", "f1", "edit_lines"))
  args = trl.GRPOConfig(
    output_dir=str(tmp_path / "out"),
    max_steps=2,
    per_device_train_batch_size=4,
    num_generations=4,
    max_completion_length=80,
    temperature=1.0,
    learning_rate=1e-5,
    logging_steps=1,
    report_to="none",
    use_cpu=True,
    seed=0,
    save_strategy="no",
    reward_weights=[2 / 3, 1 / 3, 0.0, 0.0],
    multi_objective_aggregation="normalize_then_sum",
    disable_tqdm=True,
  )
  trainer = trl.GRPOTrainer(
    model=model,
    reward_funcs=[*funcs, keep],
    args=args,
    processing_class=tokenizer,
    train_dataset=datasets.Dataset.from_list(rows),
  )
  trainer.train()

  logs = [entry for entry in trainer.state.log_history if "rewards/unit/mean" in entry]
  assert len(logs) == 2 and len(generated) == 2
  seen = set()
  for step, (ids, completions) in enumerate(generated):
    records = score_command(tmp_path, task_file, ids, completions)
    for term in ("unit", "f1", "edit_lines"):
      want = sum(term_of_record(r, term) for r in records) / len(records)
      assert logs[step][f"rewards/{term}/mean"] == pytest.approx(want, abs=1e-5), (step, term)
      seen.add((term, want))
  assert any(want not in (0.0, 1.0) for _, want in seen)  # the samples differ in score
