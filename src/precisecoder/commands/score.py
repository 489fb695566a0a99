"""`precisecoder score`: score model predictions on tasks (DESIGN.md "Contract: predictions and
scores").

  precisecoder score --tasks T.jsonl --predictions P.jsonl --output S.jsonl \
      [--pdb-compat] [--epsilon N] [--workers N [--python PATH] | --reward-urls URL,URL] [--json]

Writes one JSON line per prediction and prints a summary (means over tasks:
unit, precision, recall, F1, reward, edited lines over buggy tasks; no-op and
damage rates over clean tasks). Exit status: 0 when every line was scored,
1 when a task is broken (its reference fix fails its tests, or its buggy
program passes them: every task is checked once, in the sandbox; its rows
score 0 with the reason in `error` and the summary names it), 2 for unusable inputs
(unreadable file, bad JSON, unknown task id, duplicate (task_id, sample), an empty
predictions file, bad arguments or output path, an --output another command is
writing), 130 after Ctrl-C.
Each scored batch is appended to OUTPUT.partial: Ctrl-C or a kill keeps them and the same command
resumes after them; one with other inputs or scoring flags starts over, saying which changed
(commands/outputs.py).
A program over --max-program-lines (or 100 characters a line on average) scores 0
with the reason in `error`: its line diff alone would hold up the batch. An unusable prediction
(none, empty, over the cap) counts as deleting the whole buggy program in `edit_lines`; a
program that does not compile is scored (unit 0, per-block credit) with the reason in `note`
(docs/scoring.md).
With --reward-urls the reward servers score (the same records); a batch that fails on every
server, or a server that scores with other settings, is exit 1 with the reason.
Programs run under --python (default: this interpreter); a broken task whose reference program
cannot import a module gets a line naming the environment its task set needs
(`data.environments`).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import sys
import time
from typing import Any, Iterator, Sequence

import tqdm

from precisecoder import predictions, rewards, tasks as tasks_lib
from precisecoder.commands import checks, flags, outputs
from precisecoder.commands.checks import InputError
from precisecoder.integrations.client import RemoteScoringError
from precisecoder.integrations.service import ConfigurationError
from precisecoder.data import environments


def add_arguments(parser: argparse.ArgumentParser) -> None:
  parser.add_argument(
    "--tasks", required=True, help="task file (contract JSON Lines or PDB records)"
  )
  parser.add_argument(
    "--predictions",
    required=True,
    help='JSON Lines: {"task_id", "completion" | "program", ["sample"]}',
  )
  parser.add_argument(
    "--output",
    required=True,
    help="score file to write (JSON Lines); scored batches go to OUTPUT.partial "
    "first, and the same command resumes them after Ctrl-C or a kill",
  )
  flags.add_scoring(parser)
  parser.add_argument(
    "--batch-size",
    type=checks.positive_int,
    default=512,
    help="predictions per scoring round (progress granularity)",
  )
  parser.add_argument(
    "--max-program-lines",
    type=checks.positive_int,
    default=predictions.MAX_PROGRAM_LINES,
    help=f"a longer program (or one over {predictions.CHARS_PER_LINE} "
    "characters a line on average) scores 0 with the reason in 'error'",
  )
  parser.add_argument(
    "--reward-urls",
    default="",
    help="score on these reward servers (`precisecoder serve`), comma-separated, "
    "round-robin with retries; --workers is then unused",
  )
  parser.add_argument("--json", action="store_true", help="print the summary as JSON only")


def read_predictions(
  path: str, known: dict[str, tasks_lib.Task], max_lines: int = predictions.MAX_PROGRAM_LINES
) -> list[dict[str, Any]]:
  """Prediction lines with `program` (or an `error`) resolved; raises InputError if unusable.

  Reads JSON Lines (or a JSON array), gzipped if the name ends in .gz, like task files.
  """
  out, counts, seen = [], collections.Counter(), {}
  keyless = 0  # lines with neither key: a wrong key on every line is an error
  first_keyless: tuple[str, list[str]] | None = None
  try:
    for where, record in tasks_lib.iter_records(path):
      if not isinstance(record, dict) or not isinstance(record.get("task_id"), str):
        raise InputError(f"{where}: expected an object with a string 'task_id'")
      task_id = record["task_id"]
      if task_id not in known:
        raise InputError(f"{where}: unknown task_id {task_id!r} (not in the task file)")
      sample = record.get("sample", counts[task_id])
      counts[task_id] += 1
      if type(sample) is not int or sample < 0:  # bool is an int to isinstance; 1.0 is not
        raise InputError(f"{where}: field 'sample' must be a non-negative integer, got {sample!r}")
      if (task_id, sample) in seen:
        raise InputError(
          f"{where}: duplicate (task_id, sample) ({task_id!r}, {sample}); first at "
          f"{seen[task_id, sample]}"
        )
      seen[task_id, sample] = where
      if "program" not in record and "completion" not in record:
        keyless += 1
        first_keyless = first_keyless or (where, sorted(record))
      program, error = predictions.resolve(record, max_lines)
      if error == predictions.NO_PROGRAM:
        error = f"{where}: {error}"
      out.append({"task_id": task_id, "sample": sample, "program": program, "error": error})
  except tasks_lib.TaskError as e:
    raise InputError(str(e)) from None
  if not out:
    raise InputError(f"{path}: no predictions (the file is empty)")
  if first_keyless is not None and keyless == len(out):  # not one prediction to score
    where, keys = first_keyless
    raise InputError(
      f"{where}: no 'completion' or 'program' field (it has {', '.join(keys)}); "
      f"no line of {path} has one"
    )
  return out


def summarize(
  records: Sequence[dict[str, Any]], tasks: dict[str, tasks_lib.Task]
) -> dict[str, Any]:
  """Means over tasks (a task's samples averaged first), as PDB reports them."""
  per_task: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
  for r in records:
    per_task[r["task_id"]].append(r)

  def task_mean(field: str, buggy: bool) -> float | None:
    values = []
    for task_id, rows in per_task.items():
      if tasks[task_id].is_buggy == buggy:
        values.append(sum(float(r[field] or 0) for r in rows) / len(rows))
    return sum(values) / len(values) if values else None

  n_buggy = sum(tasks[t].is_buggy for t in per_task)
  return {
    "predictions": len(records),
    "tasks": len(per_task),
    "buggy_tasks": n_buggy,
    "clean_tasks": len(per_task) - n_buggy,
    "unit": task_mean("unit", True),
    "precision": task_mean("precision", True),
    "recall": task_mean("recall", True),
    "f1": task_mean("f1", True),
    "reward": task_mean("reward", True),
    "edit_lines": task_mean("edit_lines", True),
    "noop_rate": task_mean("noop", False),
    "damage_rate": task_mean("damage", False),
    # Not scored (every term 0): the rows with an `error`. Scored, unit 0, with a `note`: a
    # program that does not compile (or whose run hit the output cap).
    "errors": sum(r["error"] is not None for r in records),
    "noted": sum(r.get("note") is not None for r in records),
  }


def format_table(summary: dict[str, Any]) -> str:
  rows = [
    ("predictions", summary["predictions"]),
    ("tasks (buggy / clean)", f"{summary['buggy_tasks']} / {summary['clean_tasks']}"),
  ]
  for label, key, pct in [
    ("unit (pass)", "unit", True),
    ("precision", "precision", True),
    ("recall", "recall", True),
    ("F1", "f1", True),
    ("reward r_lambda", "reward", False),
    ("edited lines", "edit_lines", False),
    ("no-op rate (clean)", "noop_rate", True),
    ("damage rate (clean)", "damage_rate", True),
  ]:
    value = summary[key]
    text = "-" if value is None else (f"{100 * value:.1f}%" if pct else f"{value:.3f}")
    rows.append((label, text))
  broken = summary.get("broken", {})
  rows += [
    ("unscorable predictions", summary["errors"]),
    ("scored with a note (no compile, output cap)", summary.get("noted", 0)),
    ("broken tasks", len(broken)),
    ("programs executed", summary.get("programs_executed", "-")),
    ("predictions / s", f"{summary.get('predictions_per_s', 0):.1f}"),
  ]
  width = max(len(label) for label, _ in rows)
  lines = [f"{label:<{width}}  {value}" for label, value in rows]
  lines += [f"broken task {task_id}: {why}" for task_id, why in sorted(broken.items())]
  return "\n".join(lines)


def _make_pool(workers: int | None, python: str | None = None):
  from precisecoder.execution import ExecutionPool  # pylint: disable=import-outside-toplevel

  return ExecutionPool(workers=workers, python=python)


@contextlib.contextmanager
def _scorer(args: argparse.Namespace) -> Iterator[Any]:
  """This machine's pool and a RewardScorer, or the reward servers of --reward-urls."""
  if args.reward_urls:
    from precisecoder.integrations import client  # pylint: disable=import-outside-toplevel

    try:
      remote = client.RemoteScorer(
        args.reward_urls, epsilon=args.epsilon, pdb_compat=args.pdb_compat, lam=args.lam
      )
    except ValueError as e:
      raise InputError(f"--reward-urls: {e}") from None
    try:
      yield remote
    finally:
      remote.close()
    return
  with _make_pool(args.workers, args.python) as pool:
    yield rewards.RewardScorer(pool, epsilon=args.epsilon, pdb_compat=args.pdb_compat, lam=args.lam)


# The flags a score row depends on: a resumed run keeps rows only when they are unchanged.
_SCORING_FLAGS = ("pdb_compat", "epsilon", "lam", "max_program_lines")


def _scored_prefix(rows: list[dict[str, Any]], predictions: list[dict[str, Any]]) -> int:
  """How many of an interrupted run's rows are the first predictions' rows, in order."""
  n = 0
  for row, prediction in zip(rows, predictions):
    if (row.get("task_id"), row.get("sample")) != (prediction["task_id"], prediction["sample"]):
      break
    n += 1
  return n


def _score_rest(
  args: argparse.Namespace,
  known: dict[str, tasks_lib.Task],
  predictions: list[dict[str, Any]],
  rows: outputs.Rows,
) -> tuple[list[dict[str, Any]], Any]:
  """(every row, the scorer): scores the predictions after the kept rows, writing each
  batch's rows as it finishes."""
  records = list(rows.kept)
  rest = predictions[len(rows.kept) :]
  with (
    _scorer(args) as scorer,
    tqdm.tqdm(
      total=len(predictions),
      initial=len(rows.kept),
      unit="pred",
      desc="score",
      file=sys.stderr,
      disable=None,
    ) as progress,
  ):
    for lo in range(0, len(rest), args.batch_size):
      chunk = rest[lo : lo + args.batch_size]
      chunk_records = scorer.score_records(
        [known[p["task_id"]] for p in chunk],
        [p["program"] for p in chunk],
        samples=[p["sample"] for p in chunk],
        errors=[p["error"] for p in chunk],
      )
      rows.write(chunk_records)
      records.extend(chunk_records)
      progress.update(len(chunk))
      progress.set_postfix(executed=scorer.stats().get("programs_executed", "-"))
  return records, scorer


def score_files(args: argparse.Namespace) -> dict[str, Any]:
  """Scores the files named in `args`; returns the summary. Raises InputError."""
  output = checks.output_file(
    args.output, inputs=[("--tasks", args.tasks), ("--predictions", args.predictions)]
  )
  try:
    task_list = tasks_lib.load_tasks(args.tasks)
  except tasks_lib.TaskError as e:
    raise InputError(str(e)) from None
  known = {t.task_id: t for t in task_list}
  predictions = read_predictions(args.predictions, known, args.max_program_lines)

  start = time.perf_counter()
  key = {
    "tasks": outputs.file_digest(args.tasks),
    "predictions": outputs.file_digest(args.predictions),
    **{flag: getattr(args, flag) for flag in _SCORING_FLAGS},
  }
  with outputs.resumable_rows(
    output, key, "score", busy=InputError, keep=lambda rows: _scored_prefix(rows, predictions)
  ) as rows:
    records, scorer = _score_rest(args, known, predictions, rows)
  elapsed = time.perf_counter() - start
  summary = summarize(records, known)
  broken = {
    r["task_id"]: r["error"][len(rewards.BROKEN_TASK) :]
    for r in records
    if (r.get("error") or "").startswith(rewards.BROKEN_TASK)
  }  # kept rows' too
  broken.update(scorer.broken_tasks)
  summary.update(
    scorer.stats(),
    seconds=round(elapsed, 3),
    predictions_per_s=len(records) / elapsed if elapsed > 0 else 0.0,
    broken=broken,
  )
  missing = [
    (environments.dataset_of(task_id, known[task_id].source_dataset), module)
    for task_id, why in broken.items()
    if (module := environments.missing_module(why)) is not None
  ]
  summary["environment"] = environments.advice(missing, args.python or sys.executable)
  return summary


def main(args: argparse.Namespace) -> int:
  try:
    summary = score_files(args)
  except InputError as e:
    print(f"precisecoder score: error: {e}", file=sys.stderr)
    return 2
  except (RemoteScoringError, ConfigurationError) as e:  # the finished batches are kept
    print(f"precisecoder score: error: {e}", file=sys.stderr)
    return 1
  except KeyboardInterrupt:
    print(
      f"precisecoder score: interrupted; the scored batches are kept in "
      f"{args.output}{outputs.PARTIAL_SUFFIX}: rerun the same command to resume",
      file=sys.stderr,
    )
    return 130
  if args.json:
    print(json.dumps(summary))
  else:
    print(format_table(summary))
  if summary["broken"]:
    print(
      f"precisecoder score: {len(summary['broken'])} broken task(s): their rows scored 0, "
      "see 'error' in the score file",
      file=sys.stderr,
    )
    for line in summary["environment"]:
      print(f"precisecoder score: {line}", file=sys.stderr)
    return 1
  return 0
