"""Thinking-trace statistics on hand-written traces, and `precisecoder analyze traces`."""

import json
import math

import pytest

from precisecoder import cli, tasks as tasks_lib
from precisecoder.analysis import traces

BUGGY = "def total(xs):\n    s = 0\n    for x in xs[1:]:\n        s += x\n    return s\n"
FIXED = "def total(xs):\n    s = 0\n    for x in xs:\n        s += x\n    return s\n"
TESTS = {"kind": "call", "entry_point": "total", "cases": [{"args": [[1, 2]], "expected": 3}]}


def _task(task_id, buggy=True, source="total"):
  code = BUGGY if buggy else FIXED
  return tasks_lib.Task(
    task_id=task_id,
    buggy_code=code,
    gt_solution=FIXED,
    gt_diff=tasks_lib.derive_gt_diff(code, FIXED),
    tests=TESTS,
    is_buggy=buggy,
    bug_count=int(buggy),
    extra={"family": source},
  )


QUOTING = (
  "<think>\nThe loop reads `for x in xs[1:]:` which skips the first element. Maybe the "
  "bug is the slice. It might also be the initial value, but that seems fine.\n</think>\n"
  "```python\n" + FIXED + "```"
)
PRESUMING = (
  "<think>The task says there is a bug, so there must be a bug somewhere. I need to fix "
  "the bug with minimal edits and not reformat anything. The instructions say only fix "
  "the bugs.</think>```python\n" + FIXED + "```"
)


def test_lexicons_count_hand_written_phrases():
  assert traces.count("hedges", "Maybe it is fine. It might be; I'm not sure, perhaps.") == 4
  assert traces.count("hedges", "The mayor said nothing.") == 0  # whole words only
  assert (
    traces.count(
      "restatements",
      "I must make minimal edits and not reformat lines. "
      "The instructions say to only fix the bugs.",
    )
    == 4
  )
  assert (
    traces.count(
      "prompt_presumption", "Since the prompt says there is a bug, there must be a bug here."
    )
    == 2
  )
  assert traces.count("prompt_presumption", "The tests fail, so the code has a bug.") == 0
  assert (
    traces.count(
      "hypotheses",
      "Maybe the bug is the slice. What if the loop is off by one? "
      "Another possibility: the constant.",
    )
    == 4
  )
  assert traces.count("hypotheses", "The function returns the sum.") == 0


def test_bad_lexicon_names_its_line():
  with pytest.raises(traces.LexiconError, match="line 2"):
    traces.parse_lexicon("# comment\n(unclosed\n", "mine")
  with pytest.raises(traces.LexiconError, match="no phrases"):
    traces.parse_lexicon("# only a comment\n", "mine")


def test_quoting_needs_the_buggy_line_verbatim():
  task = _task("t")
  assert traces.buggy_lines(task) == ["for x in xs[1:]:"]
  assert traces.quotes_buggy_line("look at `for x in xs[1:]:` here", task) is True
  assert traces.quotes_buggy_line("look at for x in xs[1 :]:", task) is False
  assert traces.quotes_buggy_line("anything", _task("c", buggy=False)) is None
  short = tasks_lib.Task(
    task_id="s",
    buggy_code="def f(x):\n    return x\n",
    gt_solution="def f(x):\n    return -x\n",
    gt_diff=tasks_lib.derive_gt_diff("def f(x):\n    return x\n", "def f(x):\n    return -x\n"),
    tests=TESTS,
  )
  assert traces.quotes_buggy_line("return x", short) is None  # too short to identify a quote


def test_summary_on_hand_written_traces():
  tasks = {
    t.task_id: t
    for t in [
      _task("a"),
      _task("b"),
      _task("c"),
      _task("d"),
      *[_task(f"clean{i}", buggy=False) for i in range(8)],
    ]
  }
  predictions = [
    {"task_id": "a", "sample": 0, "completion": QUOTING},
    {"task_id": "b", "sample": 0, "completion": PRESUMING},
    {"task_id": "c", "sample": 0, "completion": QUOTING},
    {"task_id": "d", "sample": 0, "completion": "no thinking at all"},
  ]
  scores = [
    {"task_id": "a", "sample": 0, "f1": 1.0, "precision": 1.0},
    {"task_id": "b", "sample": 0, "f1": 0.0, "precision": 0.5},
    {"task_id": "c", "sample": 0, "f1": 0.5, "precision": 1.0},
  ]
  # Clean traces: more hypotheses, more no-ops.
  for i in range(8):
    trace = "<think>" + " ".join(["Maybe the bug is here."] * i + ["Looks right."]) + "</think>"
    predictions.append({"task_id": f"clean{i}", "sample": 0, "completion": trace})
    scores.append({"task_id": f"clean{i}", "sample": 0, "noop": float(i >= 4)})
  rows = traces.trace_rows(predictions, tasks, scores)
  assert len(rows) == 11  # "d" has no thinking block
  summary = traces.summarize(rows, completions=len(predictions), resamples=200)
  assert summary["quote_share"]["mean"] == pytest.approx(2 / 3)
  assert summary["quote_share"]["n"] == 3
  words = sum(r["words"] for r in rows)
  assert summary["per_1000_words"]["prompt_presumption"] == pytest.approx(1000 * 2 / words)
  quartiles = summary["noop_by_hypothesis_quartile"]
  assert [q["noop_rate"] for q in quartiles] == [0.0, 0.0, 1.0, 1.0]
  assert [(q["hypotheses_min"], q["hypotheses_max"]) for q in quartiles] == [
    (0, 1),
    (2, 3),
    (4, 5),
    (6, 7),
  ]
  # Quoting tasks a, c (F1 1.0, 0.5) vs non-quoting b (0.0): z = ±, slope = cov/var of z.
  effect = summary["quoting_effect"]["f1"]
  x = [1, 0, 1]
  y = [1.0, 0.0, 0.5]
  mx, sd = sum(x) / 3, math.sqrt(sum((v - 2 / 3) ** 2 for v in x) / 3)
  z = [(v - mx) / sd for v in x]
  expected = sum(zi * (yi - 0.5) for zi, yi in zip(z, y)) / sum(zi * zi for zi in z)
  assert effect["slope_per_sd"] == pytest.approx(expected) and effect["tasks"] == 3
  text = traces.markdown(summary)
  assert "quotes the buggy line verbatim, %: 66.7 [" in text
  assert "| Q4 | 6–7 | 2 | 100.0% |" in text


def test_analyze_traces_command(tmp_path, capsys):
  task_file = tmp_path / "tasks.jsonl"
  tasks_lib.write_tasks(task_file, [_task("a"), _task("b")])
  preds = tmp_path / "preds.jsonl"
  preds.write_text(
    json.dumps({"task_id": "a", "sample": 0, "completion": QUOTING})
    + "\n"
    + json.dumps({"task_id": "b", "sample": 0, "completion": PRESUMING})
    + "\n"
  )
  out = tmp_path / "traces"
  assert (
    cli.main(
      [
        "analyze",
        "traces",
        "--predictions",
        str(preds),
        "--tasks",
        str(task_file),
        "--output",
        str(out),
      ]
    )
    == 0
  )
  summary = json.loads(out.with_suffix(".json").read_text())
  assert summary["traces"] == 2 and summary["quote_share"]["mean"] == 0.5
  assert "per 1,000 words" in capsys.readouterr().out
  preds.write_text(json.dumps({"task_id": "zzz", "completion": QUOTING}) + "\n")
  assert (
    cli.main(["analyze", "traces", "--predictions", str(preds), "--tasks", str(task_file)]) == 2
  )
  assert "zzz" in capsys.readouterr().err
