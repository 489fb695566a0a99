"""`precisecoder evaluate`: generate + score a checkpoint on task sets, resumably, and write the
paper's table with 95% bootstrap intervals.

  precisecoder evaluate --checkpoint PATH --tasks T.jsonl [--clean C.jsonl] [--samples G] \\
      --output DIR [--shard-size N] [generate and score options]

Work is cut into shards of `--shard-size` tasks; each shard runs `precisecoder generate` then
`precisecoder score` (the same code, not a copy) and its files appear only once complete, so a
rerun with the same settings skips finished shards and an interrupted run loses at most one
shard. Within a shard, `generate` and `score` keep their finished batches (OUT.partial) and
resume them too; Ctrl-C is one line and exit 130. DIR holds:
  settings.json         the settings (a rerun with different ones is refused)
  shards/               {buggy,clean}-NNNN.{tasks,predictions,scores}.jsonl
  predictions.jsonl     every completion (generate's format, with the exact prompt)
  scores.jsonl          every score line (score's format, plus is_buggy and source)
  per_task.jsonl        one row per task: its samples' means
  table.json, table.md  the paper's columns with intervals, and the correlations
                        (analysis/score_tables.py says how they are computed)
With `--turns K` (episodes with test feedback, generate's), the columns are the episodes' last
programs', and each shard's program after every earlier turn is scored too
(shards/*.turnN.{predictions,scores}.jsonl; `score` again): the tables add pass and edited
lines after each turn, with intervals (an episode that ended keeps its last program).
Exit status: 0 when every shard finished, 2 for unusable inputs, 130 after Ctrl-C.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import pathlib
import sys
import time
from typing import Any

from precisecoder import console
from precisecoder.commands import checks, flags, generate

log = logging.getLogger("precisecoder.evaluate")

# Options passed through to `generate` / `score`: (flag, destination in our arguments).
_GENERATE_OPTIONS = (
  ("--samples", "samples"),
  ("--temperature", "temperature"),
  ("--top-p", "top_p"),
  ("--top-k", "top_k"),
  ("--max-new-tokens", "max_new_tokens"),
  ("--seed", "seed"),
  ("--batch-size", "batch_size"),
  ("--dtype", "dtype"),
  ("--mesh", "mesh"),
  ("--compile-cache", "compile_cache"),
  ("--prefill-thinking", "prefill_thinking"),
  ("--turns", "turns"),
  ("--visible-tests", "visible_tests"),
  ("--visible-fraction", "visible_fraction"),
  ("--feedback-tokens", "feedback_tokens"),
  ("--workers", "workers"),
)
_GENERATE_SWITCHES = (("--thinking", "thinking"), ("--no-tests-in-prompt", "no_tests_in_prompt"))
_SCORE_OPTIONS = (
  ("--epsilon", "epsilon"),
  ("--lam", "lam"),
  ("--workers", "workers"),
  ("--python", "python"),
)
_SCORE_SWITCHES = (("--pdb-compat", "pdb_compat"),)
# Settings that change results: a rerun must match them to reuse finished shards.
_RESULT_SETTINGS = (
  "checkpoint",
  "samples",
  "temperature",
  "top_p",
  "top_k",
  "max_new_tokens",
  "seed",
  "dtype",
  "thinking",
  "no_tests_in_prompt",
  "shard_size",
  "epsilon",
  "lam",
  "pdb_compat",
  "limit",
  "turns",
  "visible_tests",
  "visible_fraction",
  "feedback_tokens",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
  parser.add_argument(
    "--checkpoint",
    required=True,
    help="Hugging Face folder, .gguf file or training checkpoint directory",
  )
  parser.add_argument("--tasks", required=True, help="buggy task file (JSON Lines)")
  parser.add_argument("--clean", default="", help="already-correct programs (no-op and damage)")
  parser.add_argument(
    "--output",
    required=True,
    help="directory for the results: resumable (finished shards, and the "
    "finished batches of the one under way, are kept after Ctrl-C or a kill)",
  )
  flags.add_sampling(parser)
  flags.add_episodes(parser)
  parser.add_argument(
    "--seed", type=int, default=0, help="sampling seed (shard k uses seed + 1000 k)"
  )
  parser.add_argument(
    "--shard-size", type=checks.positive_int, default=64, help="tasks per resumable unit of work"
  )
  parser.add_argument(
    "--limit", type=checks.non_negative_int, default=0, help="only the first N tasks of each file"
  )
  flags.add_scoring(parser)
  parser.add_argument(
    "--resamples", type=checks.positive_int, default=2000, help="bootstrap resamples"
  )
  parser.add_argument("--verbose", action="store_true", help=console.VERBOSE_HELP)


def _digest(path: str) -> str:
  h = hashlib.sha256()
  with open(path, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
      h.update(block)
  return h.hexdigest()


def _settings(args: argparse.Namespace) -> dict[str, Any]:
  """What decides the results (compared on a rerun), and where the inputs were (not compared:
  files may move; their digests stand for them). A local checkpoint is named by its absolute
  path, so a rerun from another folder (or with the absolute path) matches."""
  settings = {k: getattr(args, k) for k in _RESULT_SETTINGS}
  if pathlib.Path(args.checkpoint).exists():
    settings["checkpoint"] = str(pathlib.Path(args.checkpoint).resolve())
  for name in ("tasks", "clean", "prefill_thinking"):
    path = getattr(args, name)
    settings[f"{name}_sha256"] = _digest(path) if path else ""
    settings[name] = str(pathlib.Path(path).resolve()) if path else ""
  return settings


def _finished_work(out: pathlib.Path) -> list[pathlib.Path]:
  """The shard files generate or score completed (written whole, by a rename)."""
  shards = out / "shards"
  return (
    sorted(p for pattern in ("*.predictions.jsonl", "*.scores.jsonl") for p in shards.glob(pattern))
    if shards.is_dir()
    else []
  )


# Settings added since evaluations were first written, with the value an older one had.
_ADDED_SETTINGS = {"turns": 1, "visible_tests": 3, "visible_fraction": 0.5, "feedback_tokens": 1024}


def _check_settings(out: pathlib.Path, settings: dict[str, Any]) -> None:
  """Writes settings.json, or checks a rerun against it. Settings under which nothing was
  finished (a run that failed before its first shard) bind nothing: they are replaced, so a
  failed command never blocks its corrected rerun."""
  path = out / "settings.json"
  if path.exists():
    before = json.loads(path.read_text())
    changed = [
      k
      for k in settings
      if k not in ("tasks", "clean", "prefill_thinking")
      and before.get(k, _ADDED_SETTINGS.get(k)) != settings[k]
    ]
    if not changed:
      return
    if _finished_work(out):
      raise checks.InputError(
        f"{out} holds an evaluation with other settings "
        f"({', '.join(changed)}); pick a new --output or remove it"
      )
    log.info(
      "%s: replacing the settings of an evaluation that finished no shard (%s)",
      out,
      ", ".join(changed),
    )
    for stale in (out / "shards").glob("*.tasks.jsonl"):  # the old tasks of unfinished shards
      stale.unlink()
  path.write_text(json.dumps(settings, indent=1) + "\n")


def _sub_args(module, required: list[str], args: argparse.Namespace, options, switches):
  """`module`'s own parsed arguments: its defaults, our values for the options it shares."""
  parser = argparse.ArgumentParser()
  module.add_arguments(parser)
  argv = list(required)
  for flag, dest in options:
    value = getattr(args, dest)
    if value is not None and value != "":
      argv += [flag, str(value)]
  argv += [flag for flag, dest in switches if getattr(args, dest)]
  return parser.parse_args(argv)


def _run_shard(stem: pathlib.Path, tasks, args: argparse.Namespace, shard_seed: int) -> None:
  """tasks -> predictions -> scores for one shard; each step skipped when its file exists."""
  from precisecoder import tasks as tasks_lib
  from precisecoder.commands import score

  task_file = stem.with_name(stem.name + ".tasks.jsonl")
  predictions = stem.with_name(stem.name + ".predictions.jsonl")
  scores = stem.with_name(stem.name + ".scores.jsonl")
  if not task_file.exists():
    tasks_lib.write_tasks(task_file, tasks)
  # Both commands write through a temporary file renamed at the end: a file that exists is whole.
  if not predictions.exists():
    gen_args = _sub_args(
      generate,
      ["--checkpoint", args.checkpoint, "--tasks", str(task_file), "--output", str(predictions)],
      args,
      _GENERATE_OPTIONS,
      _GENERATE_SWITCHES,
    )
    gen_args.seed = shard_seed
    from precisecoder.model.loading import CheckpointError  # pylint: disable=import-outside-toplevel

    try:
      # Ctrl-C: its finished batches are kept, and resumed on a rerun.
      generate.write_predictions(gen_args)
    except (checks.InputError, CheckpointError) as e:
      print(f"precisecoder generate: error: {e}", file=sys.stderr)
      raise checks.InputError(f"generate failed on {task_file} (its error is above)") from None
  if not scores.exists():
    score_args = _sub_args(
      score,
      ["--tasks", str(task_file), "--predictions", str(predictions), "--output", str(scores)],
      args,
      _SCORE_OPTIONS,
      _SCORE_SWITCHES,
    )
    summary = score.score_files(score_args)
    log.info("%s: scored %d predictions", stem.name, summary.get("predictions", 0))
  for turn in range(1, args.turns):  # episodes: the program after each earlier turn
    turn_scores = _turn_file(stem, turn, "scores")
    if turn_scores.exists():
      continue
    programs = _turn_file(stem, turn, "predictions")
    _write_jsonl(
      programs,
      (
        {"task_id": r["task_id"], "sample": r["sample"], "program": _program_after(r, turn)}
        for r in _read_jsonl(predictions)
      ),
    )
    score.score_files(
      _sub_args(
        score,
        ["--tasks", str(task_file), "--predictions", str(programs), "--output", str(turn_scores)],
        args,
        _SCORE_OPTIONS,
        _SCORE_SWITCHES,
      )
    )


def _turn_file(stem: pathlib.Path, turn: int, kind: str) -> pathlib.Path:
  return stem.with_name(f"{stem.name}.turn{turn}.{kind}.jsonl")


def _program_after(prediction: dict[str, Any], turn: int) -> str:
  """An episode's program after `turn` turns (its last one if it ended sooner)."""
  turns = prediction.get("turns") or [{"program": ""}]  # a prompt too long: nothing generated
  return turns[min(turn, len(turns)) - 1]["program"]


def _read_jsonl(path: pathlib.Path) -> list[dict[str, Any]]:
  return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _write_jsonl(path: pathlib.Path, rows) -> None:
  with checks.atomic_output(path) as out:
    out.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def evaluate(args: argparse.Namespace) -> dict[str, Any]:
  """Runs (or resumes) the evaluation in `args.output`; returns table.json's content."""
  from precisecoder import tasks as tasks_lib
  from precisecoder.analysis import score_tables

  generate.resolve_temperature(args)  # before the settings a rerun must match are recorded

  sets = []
  for kind, path in (("buggy", args.tasks), ("clean", args.clean)):
    if not path:
      continue
    try:
      loaded = tasks_lib.load_tasks(path)
    except tasks_lib.TaskError as e:
      raise checks.InputError(str(e)) from None
    if args.limit:
      loaded = loaded[: args.limit]
    sets.append((kind, loaded))
  everything = {t.task_id: t for _, loaded in sets for t in loaded}
  if len(everything) != sum(len(loaded) for _, loaded in sets):
    raise checks.InputError(f"{args.tasks} and {args.clean} share task ids")
  out = checks.output_folder(args.output, inputs=[("--tasks", args.tasks), ("--clean", args.clean)])
  # Sizes the machine cannot hold fail now, not in the first shard's sampler.
  generate.check_memory(
    args, min(args.shard_size, max(len(t) for _, t in sets)), devices=_devices(args.mesh)
  )
  _check_settings(out, _settings(args))
  shards = []
  for kind, loaded in sets:
    for n, lo in enumerate(range(0, len(loaded), args.shard_size)):
      shards.append((out / "shards" / f"{kind}-{n:04d}", loaded[lo : lo + args.shard_size]))
  (out / "shards").mkdir(parents=True, exist_ok=True)
  started = time.perf_counter()
  for k, (stem, chunk) in enumerate(shards):
    if stem.with_name(stem.name + ".scores.jsonl").exists():
      log.info("shard %d/%d %s: done before, skipped", k + 1, len(shards), stem.name)
      continue
    _run_shard(stem, chunk, args, shard_seed=args.seed + 1000 * k)
    elapsed = time.perf_counter() - started
    log.info("shard %d/%d %s finished (%.0f s so far)", k + 1, len(shards), stem.name, elapsed)

  predictions = [
    r for stem, _ in shards for r in _read_jsonl(stem.with_name(stem.name + ".predictions.jsonl"))
  ]
  rows = score_tables.with_task_fields(
    [r for stem, _ in shards for r in _read_jsonl(stem.with_name(stem.name + ".scores.jsonl"))],
    everything,
  )
  _write_jsonl(out / "predictions.jsonl", predictions)
  _write_jsonl(out / "scores.jsonl", rows)
  _write_jsonl(out / "per_task.jsonl", score_tables.per_task(rows))
  summary = score_tables.results(rows, resamples=args.resamples, seed=args.seed)
  if args.turns > 1:
    by_turn = [
      score_tables.with_task_fields(
        [r for stem, _ in shards for r in _read_jsonl(_turn_file(stem, turn, "scores"))], everything
      )
      for turn in range(1, args.turns)
    ] + [rows]
    summary["by_turn"] = score_tables.by_turn(by_turn, resamples=args.resamples, seed=args.seed)
  summary["checkpoint"] = args.checkpoint
  (out / "table.json").write_text(json.dumps(summary, indent=1) + "\n")
  (out / "table.md").write_text(score_tables.markdown(summary, pathlib.Path(args.checkpoint).name))
  return summary


def _devices(mesh: str) -> int:
  made = generate.make_mesh_flag(mesh)
  return 1 if made is None else made.devices.size


def main(args: argparse.Namespace) -> int:
  from precisecoder.model.loading import CheckpointError

  logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
  console.quiet_libraries(args.verbose)
  try:
    evaluate(args)
  except (checks.InputError, CheckpointError) as e:
    print(f"precisecoder evaluate: error: {e}", file=sys.stderr)
    return 2
  except KeyboardInterrupt:
    print(
      f"precisecoder evaluate: interrupted; the finished shards, and the batches of the one "
      f"under way, are kept in {args.output}: rerun the same command to resume",
      file=sys.stderr,
    )
    return 130
  print((pathlib.Path(args.output) / "table.md").read_text())
  return 0
