"""`precisecoder analyze`: statistics over completions.

  precisecoder analyze traces --run DIR [--output OUT]
  precisecoder analyze traces --predictions P.jsonl --tasks T.jsonl [--clean C.jsonl] \\
      [--scores S.jsonl] [--output OUT]

`traces`: the thinking-trace statistics of PAPER.md (quoting of the buggy line, hedges,
restatements of the instruction, "a bug must exist because the prompt says so" and bug
hypotheses per 1,000 words, no-op rate by hypothesis quartile, F1/precision per SD of quoting);
the method is the docstring of `precisecoder.analysis.traces`. `--run` reads an `evaluate`
directory (its settings name the task files; predictions.jsonl, scores.jsonl). Prints Markdown;
`--output` also writes OUT.json and OUT.md. Exit 2 for unusable inputs.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
from typing import Any

from precisecoder.commands import checks


def add_arguments(parser: argparse.ArgumentParser) -> None:
  sub = parser.add_subparsers(dest="analysis", required=True, metavar="ANALYSIS")
  traces = sub.add_parser("traces", help="thinking-trace statistics")
  traces.add_argument("--run", default="", help="an `evaluate` output directory")
  traces.add_argument("--predictions", default="", help="completions (generate's output)")
  traces.add_argument("--tasks", default="", help="buggy task file")
  traces.add_argument("--clean", default="", help="clean task file (for no-op by quartile)")
  traces.add_argument("--scores", default="", help="score lines of the predictions")
  traces.add_argument("--output", default="", help="write OUTPUT.json and OUTPUT.md")
  traces.add_argument(
    "--resamples", type=checks.positive_int, default=2000, help="bootstrap resamples"
  )


def _records(path: str) -> list[dict[str, Any]]:
  from precisecoder import tasks as tasks_lib

  try:
    return [r for _, r in tasks_lib.iter_records(path)]
  except tasks_lib.TaskError as e:
    raise checks.InputError(str(e)) from None


def _inputs(args: argparse.Namespace):
  """(predictions, tasks by id, scores) from --run or the separate files."""
  from precisecoder import tasks as tasks_lib

  predictions, task_files, scores = args.predictions, [args.tasks, args.clean], args.scores
  if args.run:
    run = pathlib.Path(args.run)
    try:
      settings = json.loads((run / "settings.json").read_text())
    except (OSError, json.JSONDecodeError) as e:
      raise checks.InputError(f"{run}: not an evaluate directory ({e})") from None
    predictions = predictions or str(run / "predictions.jsonl")
    if not scores and (run / "scores.jsonl").exists():
      scores = str(run / "scores.jsonl")
    task_files = [args.tasks or settings.get("tasks", ""), args.clean or settings.get("clean", "")]
  if not predictions or not task_files[0]:
    raise checks.InputError("give --run DIR, or --predictions and --tasks")
  tasks = {}
  for path in filter(None, task_files):
    try:
      tasks.update({t.task_id: t for t in tasks_lib.load_tasks(path)})
    except tasks_lib.TaskError as e:
      raise checks.InputError(str(e)) from None
  rows = _records(predictions)
  if not rows:
    raise checks.InputError(f"{predictions}: no predictions (the file is empty)")
  for n, r in enumerate(rows, 1):
    task_id = r.get("task_id") if isinstance(r, dict) else None
    if task_id not in tasks:
      raise checks.InputError(
        f"{predictions}: record {n}: task_id {task_id!r} is not in the task files"
      )
  return rows, tasks, _records(scores) if scores else []


def main(args: argparse.Namespace) -> int:
  from precisecoder.analysis import traces

  try:
    predictions, tasks, scores = _inputs(args)
    outputs = (
      [
        checks.output_file(
          str(pathlib.Path(args.output).with_suffix(suffix)),
          inputs=[
            ("--predictions", args.predictions),
            ("--tasks", args.tasks),
            ("--clean", args.clean),
            ("--scores", args.scores),
          ],
        )
        for suffix in (".json", ".md")
      ]
      if args.output
      else []
    )
  except checks.InputError as e:
    print(f"precisecoder analyze: error: {e}", file=sys.stderr)
    return 2
  rows = traces.trace_rows(predictions, tasks, scores)
  summary = traces.summarize(rows, completions=len(predictions), resamples=args.resamples)
  text = traces.markdown(summary)
  for path, content in zip(outputs, (json.dumps(summary, indent=1) + "\n", text)):
    with checks.atomic_output(path) as out:
      out.write(content)
  print(text)
  return 0
