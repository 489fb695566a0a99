"""`precisecoder generate`: sample debugging completions for a task file from any checkpoint.

Each output line is a prediction in the DESIGN.md contract plus the exact prompt text:
  {"task_id", "sample", "completion", "prompt", "num_tokens", "finished"}
so that `precisecoder score` evaluates the checkpoint. Lines are written batch by batch to
OUTPUT.partial, which becomes OUTPUT when every task is done (commands/outputs.py). Ctrl-C
(exit 130) or a kill keeps the finished batches, and the same command resumes after them; one
with another task file, checkpoint or sampling flag starts over, saying which changed. A
second command writing the same OUTPUT is refused. A task whose prompt does not fit the
context gets an empty completion and an "error".

`--prefill-thinking FROM.jsonl` (prefill transfer): the assistant turn starts with the thinking
block of another model's completion of the same task (the first sample of FROM that has one),
rendered by the chat template (`prompts.render_prompt`); the model writes only the answer. A task
without a thinking block in FROM gets an empty completion and an "error".

`--turns K` (K > 1) runs debugging episodes (episodes.py): each answer's program runs on the
task's visible tests in the sandboxed pool and, while some fail, the model hears which and
answers again, up to K times. The line then also holds the whole transcript, `turns`: for each
turn its `prompt` (the exact text the model continued from), `completion`, `program`, the
visible tests' `outcome` and the `feedback` that followed; and `stop`, why the episode ended.
`completion` is the last answer, so `precisecoder score` scores the episode's last program.
"""

from __future__ import annotations

import argparse
import logging
import pathlib
import sys
import time
from typing import Any

from tqdm import tqdm

from precisecoder import console
from precisecoder.commands import checks, flags, outputs

log = logging.getLogger("precisecoder.generate")


def resolve_temperature(args: argparse.Namespace) -> None:
  """Sets `args.temperature` when not given (greedy for one sample, SAMPLES_TEMPERATURE for
  more); raises InputError for several greedy samples: they would be one answer N times."""
  if args.temperature is None:
    args.temperature = 0.0 if args.samples == 1 else flags.SAMPLES_TEMPERATURE
  elif args.temperature < 0:
    raise checks.InputError(f"--temperature {args.temperature}: must be >= 0")
  elif args.samples > 1 and args.temperature == 0:
    raise checks.InputError(
      f"--samples {args.samples} with --temperature 0: greedy samples are {args.samples} "
      f"copies of one answer; give --temperature > 0 (default for --samples > 1: "
      f"{flags.SAMPLES_TEMPERATURE}) or --samples 1"
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
  parser.add_argument(
    "--checkpoint",
    required=True,
    help="Hugging Face folder, .gguf file or training checkpoint directory",
  )
  parser.add_argument("--tasks", required=True, help="task file (JSON Lines, DESIGN.md contract)")
  parser.add_argument(
    "--output",
    required=True,
    help="predictions file to write (JSON Lines); finished batches go to "
    "OUTPUT.partial first, and the same command resumes them after Ctrl-C or a "
    "kill",
  )
  flags.add_sampling(parser)
  parser.add_argument("--seed", type=int, default=0, help="sampling seed")
  parser.add_argument("--verbose", action="store_true", help=console.VERBOSE_HELP)
  flags.add_episodes(parser)
  parser.add_argument(
    "--workers",
    type=checks.workers,
    default=2,
    help="execution workers for the visible tests (--turns > 1)",
  )
  parser.add_argument(
    "--limit", type=checks.non_negative_int, default=0, help="only the first N tasks (0: all)"
  )


def _pool(args: argparse.Namespace):
  """The execution pool that runs the visible tests of episodes (none for single answers)."""
  import contextlib  # pylint: disable=import-outside-toplevel

  if args.turns == 1:
    return contextlib.nullcontext()
  from precisecoder.execution import ExecutionPool

  return ExecutionPool(workers=args.workers)


def make_mesh_flag(spec: str):
  """The --mesh flag as a Mesh (None: one device); a shape or preset that cannot work is an
  InputError naming the flag."""
  if not spec:
    return None
  from precisecoder.model import make_mesh

  try:
    return make_mesh(spec)
  except (KeyError, ValueError) as e:
    message = e.args[0] if isinstance(e, KeyError) and e.args else e
    raise checks.InputError(f"--mesh {spec!r}: {message}") from None


def check_memory(args: argparse.Namespace, num_tasks: int, devices: int = 1) -> None:
  """--batch-size prompts x --samples x --max-new-tokens against the machine's memory, from
  the checkpoint's config alone (no weights loaded). Raises InputError, or CheckpointError for
  a checkpoint whose config cannot be read."""
  from precisecoder.model import memory
  from precisecoder.model.loading import read_config
  from precisecoder.sampling import PROMPT_BUCKET

  config = read_config(args.checkpoint, dtype=args.dtype)
  prompts = min(args.batch_size, num_tasks)
  need = memory.sampler_bytes(
    config,
    prompts=prompts,
    samples=args.samples,
    prompt_len=PROMPT_BUCKET,
    max_new_tokens=args.max_new_tokens,
  )
  try:
    memory.check(
      need,
      f"sampling {prompts} prompt(s) (--batch-size {args.batch_size}) x "
      f"--samples {args.samples} x --max-new-tokens {args.max_new_tokens}",
      "lower --samples, --batch-size or --max-new-tokens",
      devices=devices,
    )
  except memory.BatchTooLarge as e:
    raise checks.InputError(str(e)) from None


def read_thinking(path: str) -> dict[str, str]:
  """task_id -> the thinking block of its lowest-numbered sample in a predictions file."""
  from precisecoder import prompts, tasks as tasks_lib

  found: dict[str, tuple[int, str]] = {}
  try:
    for where, record in tasks_lib.iter_records(path):
      if (
        not isinstance(record, dict)
        or not isinstance(record.get("task_id"), str)
        or not isinstance(record.get("completion"), str)
        or not isinstance(record.get("sample", 0), int)
      ):
        raise checks.InputError(
          f"--prefill-thinking: {where}: expected an object with string "
          "'task_id' and 'completion' (and an integer 'sample')"
        )
      thinking = prompts.thinking_block(record["completion"])
      sample = record.get("sample", 0)
      if thinking and (record["task_id"] not in found or sample < found[record["task_id"]][0]):
        found[record["task_id"]] = (sample, thinking)
  except tasks_lib.TaskError as e:
    raise checks.InputError(f"--prefill-thinking: {e}") from None
  return {task_id: thinking for task_id, (_, thinking) in found.items()}


def main(args: argparse.Namespace) -> int:
  """Exit status 2, with one line naming the flag or file, for unusable inputs."""
  from precisecoder.model.loading import CheckpointError

  try:
    return write_predictions(args)
  except (checks.InputError, CheckpointError) as e:
    print(f"precisecoder generate: error: {e}", file=sys.stderr)
    return 2
  except KeyboardInterrupt:
    print(
      f"precisecoder generate: interrupted; the finished batches are kept in "
      f"{args.output}{outputs.PARTIAL_SUFFIX}: rerun the same command to resume",
      file=sys.stderr,
    )
    return 130


def _resume_key(args: argparse.Namespace) -> dict[str, Any]:
  """What an interrupted run's lines depend on: the task file, the checkpoint and every flag
  that changes a completion (--batch-size too: each batch has its own seed)."""
  checkpoint = pathlib.Path(args.checkpoint)
  files = (
    [checkpoint]
    if checkpoint.is_file()
    else sorted(p for p in checkpoint.rglob("*") if p.is_file() and p.name != "lock")
  )
  stamp = [
    (
      str(p.relative_to(checkpoint)) if p != checkpoint else p.name,
      p.stat().st_size,
      p.stat().st_mtime_ns,
    )
    for p in files
  ]
  flags = {k: v for k, v in sorted(vars(args).items()) if k not in _UNKEYED_FLAGS}
  return {
    "tasks": outputs.file_digest(args.tasks),
    "checkpoint": [str(checkpoint.absolute()), stamp],
    "prefill_thinking": args.prefill_thinking and outputs.file_digest(args.prefill_thinking),
    **flags,
  }


# Flags that change how the work is done, not what is written (and the files keyed above).
_UNKEYED_FLAGS = {
  "output",
  "workers",
  "mesh",
  "compile_cache",
  "checkpoint",
  "tasks",
  "prefill_thinking",
}


def write_predictions(args: argparse.Namespace) -> int:
  """Writes the predictions file of `args`; returns 0. Raises InputError or CheckpointError
  for unusable inputs, KeyboardInterrupt on Ctrl-C (the finished batches are kept)."""
  logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
  console.quiet_libraries(args.verbose)
  from precisecoder import episodes, feedback, prompts, tasks as tasks_lib
  from precisecoder.model import load_checkpoint
  from precisecoder.model.tokenizer import eos_token_ids, pad_token_id
  from precisecoder.sampling import enable_compilation_cache, sample

  if args.visible_fraction <= 0:
    raise checks.InputError(f"--visible-fraction {args.visible_fraction}: must be above 0")
  agent = episodes.AgentConfig(
    turns=args.turns,
    feedback_tokens=args.feedback_tokens,
    thinking=args.thinking,
    visibility=feedback.Visibility(args.visible_tests, args.visible_fraction),
  )
  resolve_temperature(args)
  out_path = checks.output_file(
    args.output,
    inputs=[
      ("--tasks", args.tasks),
      ("--checkpoint", args.checkpoint),
      ("--prefill-thinking", args.prefill_thinking),
    ],
  )
  try:
    tasks = tasks_lib.load_tasks(args.tasks)
  except tasks_lib.TaskError as e:
    raise checks.InputError(str(e)) from None
  if args.limit:
    tasks = tasks[: args.limit]
  prefill = read_thinking(args.prefill_thinking) if args.prefill_thinking else None
  enable_compilation_cache(args.compile_cache or None)
  mesh = make_mesh_flag(args.mesh)
  check_memory(args, len(tasks), devices=1 if mesh is None else mesh.devices.size)
  model, tokenizer, config = load_checkpoint(args.checkpoint, dtype=args.dtype, mesh=mesh)
  eos_ids = eos_token_ids(tokenizer, config.eos_token_ids)
  pad_id = pad_token_id(tokenizer, config.pad_token_id)
  context = config.max_position_embeddings - agent.response_len(args.max_new_tokens)

  started, generated = time.perf_counter(), 0
  per_batch = args.batch_size * args.samples
  with (
    outputs.resumable_rows(
      out_path,
      _resume_key(args),
      "generate",
      busy=checks.InputError,
      keep=lambda rows: (
        len(rows) if len(rows) == len(tasks) * args.samples else len(rows) // per_batch * per_batch
      ),  # whole batches: each has its own seed
    ) as rows,
    tqdm(
      total=len(tasks) * args.samples, initial=len(rows.kept), desc="generate", unit="completion"
    ) as bar,
    _pool(args) as pool,
  ):
    for batch_index, start in enumerate(range(0, len(tasks), args.batch_size)):
      if start * args.samples < len(rows.kept):
        continue  # written by an interrupted run
      batch = tasks[start : start + args.batch_size]
      lines = []
      texts = [
        prompts.render_prompt(
          tokenizer,
          t,
          thinking=args.thinking,
          include_tests=not args.no_tests_in_prompt,
          prefill_thinking=None if prefill is None else prefill.get(t.task_id),
        )
        for t in batch
      ]
      ids = [prompts.encode_prompt(tokenizer, text) for text in texts]
      errors = [
        f"prompt of {len(i)} tokens exceeds the context" if not 0 < len(i) <= context else None
        for i in ids
      ]
      if prefill is not None:
        errors = [
          f"no thinking block for this task in {args.prefill_thinking}"
          if t.task_id not in prefill
          else e
          for t, e in zip(batch, errors)
        ]
      fits = [e is None for e in errors]
      for task, text, error in zip(batch, texts, errors):
        if error:
          log.warning("%s: %s (context %d tokens)", task.task_id, error, context)
          for k in range(args.samples):
            lines.append(
              {
                "task_id": task.task_id,
                "sample": k,
                "completion": "",
                "prompt": text,
                "num_tokens": 0,
                "finished": False,
                "error": error,
              }
            )
      kept = [n for n, ok in enumerate(fits) if ok]
      if kept and args.turns > 1:
        result = episodes.play(
          model,
          tokenizer,
          [batch[n] for n in kept],
          [texts[n] for n in kept],
          pool,
          agent=agent,
          num_samples=args.samples,
          max_new_tokens=args.max_new_tokens,
          eos_ids=eos_ids,
          pad_id=pad_id,
          temperature=args.temperature,
          top_p=args.top_p,
          top_k=args.top_k,
          seed=args.seed + batch_index,
          mesh=mesh,
        )
        for row, turns in enumerate(result.turns):
          n = kept[result.groups[row]]
          length = sum(t.num_tokens for t in turns)
          generated += length
          lines.append(
            {
              "task_id": batch[n].task_id,
              "sample": row % args.samples,
              "completion": turns[-1].completion,
              "prompt": texts[n],
              "num_tokens": length,
              "finished": turns[-1].finished,
              "stop": result.stops[row],
              "turns": [t.to_json() for t in turns],
            }
          )
      elif kept:
        result = sample(
          model,
          [ids[n] for n in kept],
          num_samples=args.samples,
          max_new_tokens=args.max_new_tokens,
          temperature=args.temperature,
          top_p=args.top_p,
          top_k=args.top_k,
          eos_ids=eos_ids,
          pad_id=pad_id,
          seed=args.seed + batch_index,
          mesh=mesh,
        )
        for row in range(len(result.lengths)):
          n = kept[result.groups[row]]
          completion = result.completion_ids(row, eos_ids=eos_ids)
          length = int(result.lengths[row])
          generated += length
          lines.append(
            {
              "task_id": batch[n].task_id,
              "sample": row % args.samples,
              "completion": prompts.decode_completion(tokenizer, completion),
              "prompt": texts[n],
              "num_tokens": length,
              "finished": len(completion) < length,
            }
          )
      rows.write(lines)
      bar.update(len(batch) * args.samples)
      bar.set_postfix(tok_s=f"{generated / (time.perf_counter() - started):.1f}")
  log.info(
    "wrote %d completions for %d tasks to %s (%d tokens, %.1f tokens/s)",
    len(tasks) * args.samples,
    len(tasks),
    out_path,
    generated,
    generated / (time.perf_counter() - started),
  )
  return 0
