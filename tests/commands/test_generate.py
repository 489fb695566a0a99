"""`precisecoder generate` end to end on a tiny checkpoint, and both generate and export's
one-line refusals of unloadable checkpoints (export's own tests: tests/commands/test_export.py)."""

import json
import re
import shutil

import numpy as np
import pytest
from conftest import make_tiny_chat_checkpoint

from precisecoder import cli
from precisecoder.model import load_checkpoint

_CHATML = (
  "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
  "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
_TASKS = [
  {
    "task_id": "inc_0",
    "prompt": "Return x plus one.",
    "buggy_code": "def inc(x):\n    return x - 1\n",
    "gt_solution": "def inc(x):\n    return x + 1\n",
    "tests": {"kind": "call", "entry_point": "inc", "cases": [{"args": [1], "expected": 2}]},
  },
  {
    "task_id": "neg_0",
    "prompt": "Return minus x.",
    "buggy_code": "def neg(x):\n    return x\n",
    "gt_solution": "def neg(x):\n    return -x\n",
    "tests": {"kind": "call", "entry_point": "neg", "cases": [{"args": [2], "expected": -2}]},
  },
]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
  folder = tmp_path_factory.mktemp("tiny_llama")
  corpus = [t["buggy_code"] + t["gt_solution"] + t["prompt"] for t in _TASKS]
  make_tiny_chat_checkpoint(
    folder, _CHATML, corpus + ["Debug the given Python code that contains errors."]
  )
  tasks = folder / "tasks.jsonl"
  tasks.write_text("".join(json.dumps(t) + "\n" for t in _TASKS))
  return folder, tasks


def _read(path):
  return [json.loads(line) for line in path.read_text().splitlines()]


def test_generate_writes_contract_predictions(checkpoint, tmp_path):
  folder, tasks = checkpoint
  out = tmp_path / "pred.jsonl"
  argv = [
    "generate",
    "--checkpoint",
    str(folder),
    "--tasks",
    str(tasks),
    "--output",
    str(out),
    "--samples",
    "3",
    "--temperature",
    "1.0",
    "--max-new-tokens",
    "8",
    "--seed",
    "1",
    "--batch-size",
    "1",
    "--compile-cache",
    str(tmp_path / "cache"),
  ]
  assert cli.main(argv) == 0
  lines = _read(out)
  assert [(r["task_id"], r["sample"]) for r in lines] == [
    (t["task_id"], k) for t in _TASKS for k in range(3)
  ]
  model, tokenizer, _ = load_checkpoint(folder)
  for r in lines:
    assert r["prompt"].startswith("<|im_start|>user\nDebug the given Python code")
    assert r["prompt"].endswith("<|im_start|>assistant\n")
    assert 1 <= r["num_tokens"] <= 8 and isinstance(r["completion"], str)
  assert len({r["completion"] for r in lines}) > 1
  # The same seed reproduces the file exactly.
  again = tmp_path / "again.jsonl"
  assert cli.main(argv[:6] + [str(again)] + argv[7:]) == 0
  assert again.read_text() == out.read_text()


def test_several_samples_sample_and_several_greedy_ones_are_refused(checkpoint, tmp_path, capsys):
  """--samples N > 1 samples at temperature 1 unless told (N greedy answers would be one answer
  N times, the tour's `--samples 2` half wasted); asked for at temperature 0, it is refused."""
  folder, tasks = checkpoint
  out = tmp_path / "samples.jsonl"
  argv = [
    "generate",
    "--checkpoint",
    str(folder),
    "--tasks",
    str(tasks),
    "--output",
    str(out),
    "--samples",
    "4",
    "--max-new-tokens",
    "6",
    "--limit",
    "1",
  ]
  assert cli.main(argv) == 0
  assert len({line["completion"] for line in _read(out)}) > 1
  assert cli.main(argv + ["--temperature", "0"]) == 2
  assert "--samples 4 with --temperature 0: greedy samples are 4 copies of one answer" in (
    _one_line_error(capsys, "generate")
  )


def test_turns_keep_the_whole_transcript(tmp_path):
  """--turns: a model that always answers "x" (a program that fails) hears the visible tests'
  feedback and answers again; each turn's prompt is exactly the chat template's rendering of
  the conversation so far, and `score` scores the last answer."""
  folder = tmp_path / "answers_x"
  corpus = [t["buggy_code"] + t["gt_solution"] + t["prompt"] for t in _TASKS]
  tokenizer = make_tiny_chat_checkpoint(folder, _CHATML, corpus, answer="x")
  tasks = folder / "tasks.jsonl"
  tasks.write_text("".join(json.dumps(t) + "\n" for t in _TASKS))
  out = tmp_path / "episodes.jsonl"
  assert (
    cli.main(
      [
        "generate",
        "--checkpoint",
        str(folder),
        "--tasks",
        str(tasks),
        "--output",
        str(out),
        "--samples",
        "2",
        "--max-new-tokens",
        "4",
        "--turns",
        "3",
        "--feedback-tokens",
        "256",
        "--workers",
        "1",
      ]
    )
    == 0
  )
  lines = _read(out)
  assert [(r["task_id"], r["sample"]) for r in lines] == [
    (t["task_id"], k) for t in _TASKS for k in range(2)
  ]
  for line, task in zip(lines, [t for t in _TASKS for _ in range(2)]):
    assert line["stop"] == "turns" and len(line["turns"]) == 3 and line["num_tokens"] == 6
    assert line["completion"] == "x" and line["finished"]
    assert line["prompt"] == line["turns"][0]["prompt"]
    messages = [
      {"role": "user", "content": line["prompt"].split("user\n", 1)[1].split("<|im_end|>")[0]}
    ]
    for turn in line["turns"]:
      assert turn["prompt"] == tokenizer.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=True
      )
      assert turn["program"] == "x" and turn["outcome"]["failed"] == 1
      assert turn["outcome"]["hidden"] == 0  # one test: it is visible
      messages += [
        {"role": "assistant", "content": "x"},
        {"role": "user", "content": turn["feedback"]},
      ]
    assert f"Test 1: {task['tests']['entry_point']}(" in line["turns"][0]["feedback"]
    assert "NameError: name 'x' is not defined" in line["turns"][0]["feedback"]
    assert line["turns"][-1]["feedback"] is None
  scores = tmp_path / "scores.jsonl"
  assert (
    cli.main(
      [
        "score",
        "--tasks",
        str(tasks),
        "--predictions",
        str(out),
        "--output",
        str(scores),
        "--workers",
        "1",
      ]
    )
    == 0
  )
  assert [r["unit"] for r in _read(scores)] == [0] * 4


def _one_line_error(capsys, command: str) -> str:
  err = capsys.readouterr().err
  lines = [line for line in err.splitlines() if line.startswith("precisecoder")]
  assert "Traceback" not in err and len(lines) == 1, err  # besides progress bars and logs
  assert lines[0].startswith(f"precisecoder {command}: error: "), err
  return lines[0]


def test_bad_task_file_and_output_are_clear_errors(checkpoint, tmp_path, capsys):
  folder, tasks = checkpoint
  bad = tmp_path / "bad.jsonl"
  bad.write_text('{"task_id": "x"\n')
  argv = ["generate", "--checkpoint", str(folder), "--tasks"]
  assert cli.main(argv + [str(bad), "--output", str(tmp_path / "p.jsonl")]) == 2
  assert "bad.jsonl:1: invalid JSON" in _one_line_error(capsys, "generate")
  before = tasks.read_bytes()
  assert cli.main(argv + [str(tasks), "--output", str(tasks)]) == 2
  assert "is the --tasks file" in _one_line_error(capsys, "generate")
  assert tasks.read_bytes() == before
  assert cli.main(argv + [str(tasks), "--output", str(tmp_path)]) == 2
  assert "is a folder" in _one_line_error(capsys, "generate")
  (tmp_path / "file").write_text("")
  assert cli.main(argv + [str(tasks), "--output", str(tmp_path / "file" / "p.jsonl")]) == 2
  assert "file is a file" in _one_line_error(capsys, "generate")
  for mesh, reason in (
    ("1,x", "invalid literal"),
    ("1,2,3", "needs 6 devices"),
    ("nope", "unknown mesh"),
  ):
    assert cli.main(argv + [str(tasks), "--output", str(tmp_path / "p.jsonl"), "--mesh", mesh]) == 2
    assert f"--mesh '{mesh}'" in (line := _one_line_error(capsys, "generate")) and reason in line
  with pytest.raises(SystemExit) as exit_info:
    cli.main(argv + [str(tasks), "--output", str(tmp_path / "p.jsonl"), "--samples", "0"])
  assert exit_info.value.code == 2 and "argument --samples: must be a positive integer" in (
    capsys.readouterr().err
  )


def test_a_failed_generation_leaves_nothing(checkpoint, tmp_path, monkeypatch):
  from precisecoder import sampling

  def broken(*args, **kwargs):
    raise RuntimeError("device lost")

  monkeypatch.setattr(sampling, "sample", broken)
  folder, tasks = checkpoint
  with pytest.raises(RuntimeError, match="device lost"):
    cli.main(
      [
        "generate",
        "--checkpoint",
        str(folder),
        "--tasks",
        str(tasks),
        "--output",
        str(tmp_path / "out" / "p.jsonl"),
      ]
    )
  assert list((tmp_path / "out").iterdir()) == []


def _broken_checkpoints(folder, root):
  """(name, path, what the message must say) for checkpoints that cannot load."""
  from precisecoder.model import bundled_smollm2_gguf

  def hf_copy(name, change):
    copy = root / name
    shutil.copytree(folder, copy)
    change(copy)
    return copy

  weights = (folder / "model.safetensors").read_bytes()
  with open(bundled_smollm2_gguf(), "rb") as f:
    gguf_head = f.read(200_000)
  (root / "head.gguf").write_bytes(gguf_head)
  (root / "empty.gguf").write_bytes(b"")
  (root / "garbage.gguf").write_bytes(b"not a model" * 100)
  (root / "empty_dir").mkdir()
  meta = root / "run" / "checkpoints" / "3" / "meta"
  meta.mkdir(parents=True)
  (meta.parent / "params").mkdir()
  (meta / "metadata").write_text(
    json.dumps({"model": {"config": {"arch": "llama"}, "tokenizer": str(folder)}})
  )
  cut_params = _training_checkpoint(root / "cut_run", folder) / "checkpoints" / "1" / "params"
  biggest = max((p for p in cut_params.rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
  biggest.write_bytes(biggest.read_bytes()[: biggest.stat().st_size // 2])
  cut_index = _training_checkpoint(root / "cut_index", folder) / "checkpoints" / "1" / "params"
  (cut_index / "_METADATA").write_text((cut_index / "_METADATA").read_text()[:100])
  return [
    ("missing", root / "missing", "checkpoint does not exist"),
    ("truncated gguf", root / "head.gguf", "head.gguf: truncated GGUF file (200000 bytes"),
    ("empty gguf", root / "empty.gguf", "empty.gguf: empty file, not a GGUF model"),
    ("garbage gguf", root / "garbage.gguf", "not a readable GGUF file (ValueError: GGUF magic"),
    (
      "truncated safetensors",
      hf_copy("cut", lambda d: (d / "model.safetensors").write_bytes(weights[: len(weights) // 2])),
      "model.safetensors: truncated safetensors file",
    ),
    (
      "garbage safetensors",
      hf_copy("junk", lambda d: (d / "model.safetensors").write_bytes(b"\xff" * 64)),
      "model.safetensors: not a readable safetensors file",
    ),
    (
      "garbage config",
      hf_copy("config", lambda d: (d / "config.json").write_text("{")),
      "config.json:1: invalid JSON",
    ),
    (
      "garbage tokenizer",
      hf_copy("tok", lambda d: (d / "tokenizer.json").write_text("{")),
      "cannot load the tokenizer",
    ),
    ("empty folder", root / "empty_dir", "not a Hugging Face folder, a .gguf file or a training"),
    ("foreign training meta", root / "run", "meta: the saved model config does not fit"),
    (
      "truncated training weights",
      root / "cut_run",
      "checkpoints/1/params: truncated Orbax checkpoint (OUT_OF_RANGE",
    ),
    (
      "truncated training index",
      root / "cut_index",
      "checkpoints/1/params: truncated Orbax checkpoint (Expecting",
    ),
  ]


def _training_checkpoint(workdir, tokenizer_folder):
  """A real (tiny, random) training checkpoint at step 1, as the trainers write it."""
  from flax import nnx

  from precisecoder.model import Decoder, architectures
  from precisecoder.model.run_checkpoints import model_meta
  from precisecoder.train.checkpoint_writer import Checkpointer

  config = architectures.get("tiny", num_layers=1)
  model = Decoder(config, rngs=nnx.Rngs(0))
  checkpointer = Checkpointer(workdir / "checkpoints", async_save=False)
  checkpointer.save(
    1,
    nnx.state(model, nnx.Param),
    {"count": np.zeros(())},
    {"model": model_meta(config, tokenizer_folder)},
  )
  checkpointer.close()
  return workdir


def test_unloadable_checkpoints_are_one_line_errors(checkpoint, tmp_path, capsys):
  folder, tasks = checkpoint
  for name, path, message in _broken_checkpoints(folder, tmp_path):
    out = tmp_path / "out" / name
    assert (
      cli.main(
        [
          "generate",
          "--checkpoint",
          str(path),
          "--tasks",
          str(tasks),
          "--output",
          str(out / "p.jsonl"),
        ]
      )
      == 2
    ), name
    assert message in _one_line_error(capsys, "generate"), name
    assert cli.main(["export", "--checkpoint", str(path), "--output", str(out / "hf")]) == 2, name
    assert message in _one_line_error(capsys, "export"), name
    assert not out.exists(), name  # a refused run makes no folder


def test_an_empty_task_file_is_an_error(checkpoint, tmp_path, capsys):
  folder, _ = checkpoint
  (tmp_path / "empty.jsonl").write_text("")
  assert (
    cli.main(
      [
        "generate",
        "--checkpoint",
        str(folder),
        "--tasks",
        str(tmp_path / "empty.jsonl"),
        "--output",
        str(tmp_path / "p.jsonl"),
      ]
    )
    == 2
  )
  assert "empty.jsonl: no tasks (the file is empty)" in _one_line_error(capsys, "generate")
  assert not (tmp_path / "p.jsonl").exists()


def test_a_batch_the_machine_cannot_hold_is_refused_before_the_model_loads(
  checkpoint, tmp_path, capsys, monkeypatch
):
  """Sized from the checkpoint's config: 2 prompts x 10^9 samples cannot fit anywhere."""
  import precisecoder.model

  folder, tasks = checkpoint
  monkeypatch.setattr(
    precisecoder.model, "load_checkpoint", lambda *a, **k: pytest.fail("the model loaded")
  )
  assert (
    cli.main(
      [
        "generate",
        "--checkpoint",
        str(folder),
        "--tasks",
        str(tasks),
        "--output",
        str(tmp_path / "p.jsonl"),
        "--samples",
        str(10**9),
        "--temperature",
        "1",
      ]
    )
    == 2
  )
  line = _one_line_error(capsys, "generate")
  assert re.fullmatch(
    r"precisecoder generate: error: sampling 2 prompt\(s\) \(--batch-size 8\) x --samples "
    r"1000000000 x --max-new-tokens 512 needs at least [\d.]+ GB \(weights [\d.]+ GB, KV cache "
    r"[\d.]+ GB, logits [\d.]+ GB\); this machine has [\d.]+ GB of available host memory "
    r"\(lower --samples, --batch-size or --max-new-tokens\)",
    line,
  ), line
  assert not (tmp_path / "p.jsonl").exists()


def test_ctrl_c_keeps_finished_batches_and_the_same_command_resumes(
  checkpoint, tmp_path, monkeypatch, capsys
):
  """Ctrl-C in the second batch: one line, exit 130, the first batch kept in OUTPUT.partial;
  the same command samples only the second batch and writes the file a whole run writes; a
  command with another seed starts over and says so."""
  from precisecoder import sampling

  folder, tasks = checkpoint
  out = tmp_path / "p.jsonl"
  argv = [
    "generate",
    "--checkpoint",
    str(folder),
    "--tasks",
    str(tasks),
    "--output",
    str(out),
    "--samples",
    "2",
    "--temperature",
    "1.0",
    "--max-new-tokens",
    "4",
    "--batch-size",
    "1",
  ]
  whole = tmp_path / "whole.jsonl"
  assert cli.main(argv[:6] + [str(whole)] + argv[7:]) == 0
  real, calls = sampling.sample, []

  def interrupted(*args, **kwargs):
    calls.append(args[1])
    if len(calls) == 2:
      raise KeyboardInterrupt
    return real(*args, **kwargs)

  monkeypatch.setattr(sampling, "sample", interrupted)
  capsys.readouterr()
  assert cli.main(argv) == 130
  err = capsys.readouterr().err
  assert "Traceback" not in err and err.strip().splitlines()[-1] == (
    f"precisecoder generate: interrupted; the finished batches are kept in {out}.partial: "
    "rerun the same command to resume"
  )
  assert not out.exists() and len((tmp_path / "p.jsonl.partial").read_text().splitlines()) == 3
  monkeypatch.setattr(sampling, "sample", lambda *a, **k: calls.append(a[1]) or real(*a, **k))
  calls.clear()
  assert cli.main(argv) == 0
  assert len(calls) == 1  # the second batch only
  assert "precisecoder generate: resuming: 2 rows kept from an interrupted run" in (
    capsys.readouterr().err
  )
  assert out.read_text() == whole.read_text()
  assert sorted(p.name for p in tmp_path.iterdir()) == ["p.jsonl", "whole.jsonl"]
  # An interrupted run, then the command with another seed: every batch sampled again.
  monkeypatch.setattr(sampling, "sample", interrupted)
  calls.clear()
  out.unlink()
  assert cli.main(argv) == 130
  calls.clear()
  monkeypatch.setattr(sampling, "sample", lambda *a, **k: calls.append(a[1]) or real(*a, **k))
  assert cli.main(argv + ["--seed", "5"]) == 0
  assert len(calls) == 2
  assert "holds rows of another command (changed: seed); starting over" in capsys.readouterr().err


def test_a_second_generate_writing_the_same_output_is_refused(checkpoint, tmp_path, capsys):
  from precisecoder.commands import outputs

  folder, tasks = checkpoint
  out = tmp_path / "p.jsonl"
  with outputs.OutputLock(out):
    assert (
      cli.main(
        [
          "generate",
          "--checkpoint",
          str(folder),
          "--tasks",
          str(tasks),
          "--output",
          str(out),
          "--max-new-tokens",
          "2",
        ]
      )
      == 2
    )
  err = capsys.readouterr().err
  assert f"precisecoder generate: error: --output {out}: another command is writing it (" in err
  assert not out.exists()
