"""Greedy evaluation of a comparison's base and arms on *held-in* tasks: training families, task
instances no run has seen.

  PRECISECODER_CACHE=... .venv/bin/python benchmarks/heldin_eval.py WORKDIR [--tasks 64] \
      [--preset compare-cpu] [--out WORKDIR/heldin.md]

`precisecoder compare` evaluates on held-out families (data.tier's validation split); a small
policy that has not learned to generalise across families passes none of them, before or after
RL. This asks the other question: on new instances of the families the base and RL trained on,
does RL raise pass and shrink edits? Tasks: the generator's `train` split at data seed + 1,
minus every task whose buggy program is in the base's SFT corpus or the arms' RL training set.
Each arm's last checkpoint in WORKDIR/<arm>/seed_<k> (or WORKDIR/<arm>) and the base are
evaluated greedily on them; the output is the paper's buggy-task columns per model (95%
bootstrap interval over tasks; for arms the mean over seeds with a Student-t interval), and
each arm's change from the base paired by task, per seed and pooled over seeds.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib

import numpy as np

from precisecoder import tasks as tasks_lib
from precisecoder.analysis import statistics as st
from precisecoder.execution import ExecutionPool
from precisecoder.rewards import RewardScorer
from precisecoder.train import base_model, compare_arms, config as config_lib, greedy_eval, tasksets
from precisecoder.train import metrics, policy as policy_lib

COLUMNS = {"pass": ("unit", "buggy"), "precision": ("precision", "buggy"),
           "recall": ("recall", "buggy"), "f1": ("f1", "buggy"),
           "edit_lines": ("edit_lines", "buggy")}


def heldin_tasks(cfg, count: int) -> list[tasks_lib.Task]:
  """`count` train-family tasks at data seed + 1 that neither SFT nor RL saw."""
  sft_file, _ = base_model.sft_data(cfg.base)
  seen = {t.buggy_code for t in tasks_lib.load_tasks(sft_file)}
  seen |= {t.buggy_code for t in tasksets.train_tasks(cfg)}
  pool, n = [], count
  while len(pool) < count and n <= 64 * count:
    n *= 2
    pool = [t for t in tasksets.generated("train", cfg.data.tier, n, cfg.data.seed + 1)
            if t.buggy_code not in seen]
  return pool[:count]


def runs(workdir: pathlib.Path) -> dict[str, list[pathlib.Path]]:
  """Arm name -> its finished run folders (seed_k, or the arm folder itself)."""
  out: dict[str, list[pathlib.Path]] = {}
  for arm in sorted(p for p in workdir.iterdir() if p.is_dir()):
    folders = sorted(arm.glob("seed_*")) or [arm]
    done = [f for f in folders if (f / "config.json").exists() and metrics.last_step(f)
            >= json.loads((f / "config.json").read_text())["train"]["steps"]]
    if done:
      out[arm.name] = done
  return out


def evaluate_checkpoint(checkpoint: str, tasks, scorer, cfg) -> list[dict]:
  c = config_lib.default("tiny")
  c.model.update(checkpoint=checkpoint, mesh="cpu", mlp_chunk=0)
  _, records = greedy_eval.evaluate_greedy(policy_lib.load_policy(c), tasks, scorer,
                                           max_new_tokens=cfg.train.eval_max_new_tokens,
                                           batch_size=cfg.train.eval_batch_size,
                                           include_tests=cfg.data.include_tests_in_prompt,
                                           seed=cfg.seed, prompt_bucket=cfg.rl.prompt_bucket)
  return records


def _cell(iv: st.Interval, column: str, sign: bool = False) -> str:
  scale, digits = (1, 2) if column == "edit_lines" else (100, 1)
  f = f"{{:{'+' if sign else ''}.{digits}f}}"
  body = f"{f.format(iv.mean * scale)} [{f.format(iv.low * scale)}, {f.format(iv.high * scale)}]"
  return body + (" *" if sign and (iv.low > 0 or iv.high < 0) else "")


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("workdir", type=pathlib.Path)
  parser.add_argument("--tasks", type=int, default=64)
  parser.add_argument("--preset", default="compare-cpu")
  parser.add_argument("--out", type=pathlib.Path, default=None)
  args = parser.parse_args()
  config_file = compare_arms.default_configs_dir() / "precisecoder.py"
  cfg = config_lib.load_file(f"{config_file}:{args.preset}")
  tasks = heldin_tasks(cfg, args.tasks)
  arms = runs(args.workdir)
  records: dict[str, list[list[dict]]] = {}
  with ExecutionPool(workers=2) as pool:
    scorer = RewardScorer(pool)
    records["base"] = [evaluate_checkpoint(str(base_model.ensure(cfg.base)), tasks, scorer, cfg)]
    for arm, folders in arms.items():
      records[arm] = [evaluate_checkpoint(str(f), tasks, scorer, cfg) for f in folders]
      print(f"evaluated {arm}: {len(folders)} run(s)", flush=True)

  def per_task(rows, term):
    return [r[term] for r in rows if r["is_buggy"]]

  lines = [f"# Held-in evaluation: {args.workdir}", "",
           f"{len(tasks)} train-family `{cfg.data.tier}` tasks at data seed {cfg.data.seed + 1} "
           "that the base's SFT corpus and the RL training set do not contain; greedy, "
           f"{cfg.train.eval_max_new_tokens} new tokens; each arm's last checkpoint. Percent "
           "except edited lines; the reference fixes edit "
           f"{np.mean([len(t.gt_diff) for t in tasks]):.2f} lines.", "",
           "| model | runs | " + " | ".join(COLUMNS) + " |", "|---|---|" + "---|" * len(COLUMNS)]
  summary: dict = {"tasks": len(tasks), "models": {}, "changes": {}}
  for name, seeds in records.items():
    if len(seeds) == 1:  # one run: interval over tasks
      cells = {c: st.bootstrap_interval(per_task(seeds[0], t)) for c, (t, _) in COLUMNS.items()}
    else:  # several seeds: mean over seeds, t-interval over seeds
      cells = {c: st.seed_interval([np.mean(per_task(s, t)) for s in seeds])
               for c, (t, _) in COLUMNS.items()}
    summary["models"][name] = {c: dataclasses.asdict(iv) for c, iv in cells.items()}
    lines.append(f"| {name} | {len(seeds)} | " + " | ".join(_cell(cells[c], c) for c in COLUMNS)
                 + " |")
  lines += ["", "Changes from the base, paired by task (95% bootstrap interval over tasks; "
            "`*`: the interval excludes 0). Per seed, then all seeds' task differences pooled:",
            "", "| change | " + " | ".join(COLUMNS) + " |", "|---|" + "---|" * len(COLUMNS)]
  base = records["base"][0]
  for arm, seeds in records.items():
    if arm == "base":
      continue
    diffs = [st.paired_differences(base, s, columns=COLUMNS) for s in seeds]
    for k, d in enumerate(diffs):
      lines.append(f"| {arm} run {k} − base | " + " | ".join(_cell(d[c], c, True)
                                                            for c in COLUMNS) + " |")
    pooled = {c: st.bootstrap_interval(np.concatenate([
        np.asarray(per_task(s, t)) - np.asarray(per_task(base, t)) for s in seeds]))
        for c, (t, _) in COLUMNS.items()}
    summary["changes"][arm] = {c: dataclasses.asdict(iv) for c, iv in pooled.items()}
    lines.append(f"| **{arm} (pooled) − base** | " + " | ".join(_cell(pooled[c], c, True)
                                                               for c in COLUMNS) + " |")
  text = "\n".join(lines) + "\n"
  out = args.out or args.workdir / "heldin.md"
  out.write_text(text)
  out.with_suffix(".json").write_text(json.dumps(summary, indent=1) + "\n")
  print(text)


if __name__ == "__main__":
  main()
