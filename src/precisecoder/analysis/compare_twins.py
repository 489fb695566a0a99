"""Arms of a comparison beside their twins: an asynchronous arm (rl.max_staleness = k >= 1,
configs/*_async.py) minus the arm of the same reward recipe at the first arm's schedule
(experiments/compare_arms.py's check_same_budget finds the twins).

Does an arm still learn with stale rollouts? Per evaluated split (validation tasks, held-in
tasks, the multi-line split), each pair's difference at the last evaluation, paired by task
with the seeds pooled (a task's value is its mean over seeds) and paired by seed (Student-t
over seeds), each arm's gain over the base beside its twin's, and a verdict in words: the same
result within the intervals (no difference's interval excludes 0) or not, and which columns
differ.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from precisecoder.analysis import report, statistics

SECTIONS = {"": "validation tasks", **{name: what for name, (_, what, _) in report.SPLITS.items()}}


def _records(evaluation: Mapping[str, Any] | None, section: str) -> list[dict[str, Any]]:
  if not evaluation:
    return []
  part = evaluation if section == "" else evaluation.get(section) or {}
  return list(part.get("records") or [])


def staleness(arm: Any) -> int | None:
  """The arm's rl.max_staleness from its config.json (None when it has none)."""
  return arm.config.get("rl", {}).get("max_staleness")


def _label(arm: Any) -> str:
  k = staleness(arm)
  return f"`{arm.name}`" + ("" if k is None else f" (k = {k})")


def pair_section(
  arm: Any,
  twin: Any,
  base: Mapping[str, Any] | None,
  per_seed: Mapping[str, Mapping[int, Mapping[str, float]]],
  section: str,
) -> dict[str, Any] | None:
  """One pair on one section: arm − twin by task (seeds pooled) and by seed, each one's change
  from the base by task, the columns where the arm's mean lies in the twin's interval over
  tasks, and whether every difference's interval holds 0. None without both final records."""
  mine, theirs = _records(arm.final, section), _records(twin.final, section)
  if not mine or not theirs:
    return None
  by_task = statistics.paired_differences(theirs, mine)
  columns = [c for c, iv in by_task.items() if iv.n > 0]
  seeds = sorted(set(per_seed.get(arm.name, {})) & set(per_seed.get(twin.name, {})))
  if len(seeds) < 2:  # one seed has no interval over seeds: the pairs by task say it all
    seeds = []
  by_seed = {
    c: statistics.seed_interval(
      [per_seed[arm.name][s][c] - per_seed[twin.name][s][c] for s in seeds]
    )
    for c in columns
  }
  base_records = _records(base, section)
  from_base = (
    {
      name: statistics.paired_differences(base_records, rows)
      for name, rows in ((arm.name, mine), (twin.name, theirs))
    }
    if base_records
    else {}
  )
  twin_table = statistics.paper_table(theirs)
  arm_table = statistics.paper_table(mine)
  inside = [c for c in columns if twin_table[c].low <= arm_table[c].mean <= twin_table[c].high]
  beyond = [
    (c, how, table[c])
    for how, table in (("by task", by_task), ("by seed", by_seed))
    for c in columns
    if table[c].excludes(0.0)
  ]
  return {
    "columns": columns,
    "by_task": {c: by_task[c] for c in columns},
    "by_seed": by_seed if seeds else {},
    "seeds": seeds,
    "from_base": {name: {c: t[c] for c in columns} for name, t in from_base.items()},
    "inside_twin_interval": inside,
    "beyond_noise": beyond,
    "same": not beyond,
  }


def build(
  arms: Sequence[Any],
  base: Mapping[str, Any] | None,
  per_seed: Mapping[str, Mapping[str, Mapping[int, Mapping[str, float]]]],
  twins: Mapping[str, str],
) -> dict[str, dict[str, Any]]:
  """{"<arm> − <twin>": {"arm", "twin", "staleness": [k arm, k twin], "sections": {section:
  pair_section}}} for each arm with a twin among `arms`; `per_seed` is {section: each arm's
  per-seed means at its last evaluation} (compare_report.seed_tables' per_seed)."""
  by_name = {a.name: a for a in arms}
  out = {}
  for name, twin_name in twins.items():
    if name not in by_name or twin_name not in by_name:
      continue
    arm, twin = by_name[name], by_name[twin_name]
    sections = {
      section: pair_section(arm, twin, base, per_seed.get(section, {}), section)
      for section in SECTIONS
    }
    out[f"{name} − {twin_name}"] = {
      "arm": name,
      "twin": twin_name,
      "staleness": [staleness(arm), staleness(twin)],
      "sections": {s: p for s, p in sections.items() if p is not None},
    }
  return out


def _cell(iv: statistics.Interval, column: str) -> str:
  return statistics.cell(iv, column, difference=True)


def verdict(pair: Mapping[str, Any], arms: Mapping[str, Any], section: str) -> str:
  """One paragraph: is the arm's result on `section` its twin's within the intervals, and does
  it learn (gain over the base) as its twin does."""
  p = pair["sections"][section]
  arm, twin = arms[pair["arm"]], arms[pair["twin"]]
  where = SECTIONS[section]
  seeds = f" or by seed ({len(p['seeds'])} seeds)" if p["by_seed"] else ""
  if p["same"]:
    head = (
      f"On {where} {_label(arm)} has the same result as {_label(twin)} within the intervals: "
      f"no column's difference excludes 0, paired by task{seeds}; "
      f"pass {_cell(p['by_task']['pass'], 'pass')}"
      + (
        f", edited lines {_cell(p['by_task']['edit_lines'], 'edit_lines')}"
        if "edit_lines" in p["by_task"]
        else ""
      )
      + " by task"
    )
  else:
    head = f"On {where} {_label(arm)} differs from {_label(twin)} beyond noise in " + ", ".join(
      f"{c} {_cell(iv, c)} ({how})" for c, how, iv in p["beyond_noise"]
    )
  head += (
    f"; its means lie inside the twin's 95% intervals over tasks in "
    f"{len(p['inside_twin_interval'])} of {len(p['columns'])} columns"
    + (
      f" (not: {', '.join(c for c in p['columns'] if c not in p['inside_twin_interval'])})"
      if len(p["inside_twin_interval"]) < len(p["columns"])
      else ""
    )
    + "."
  )
  if p["from_base"]:
    gain = p["from_base"]
    head += (
      f" Pass over the base: {_cell(gain[arm.name]['pass'], 'pass')} "
      f"({twin.name}: {_cell(gain[twin.name]['pass'], 'pass')})."
    )
  return head


def lines(result: Mapping[str, dict[str, Any]], arms: Sequence[Any]) -> list[str]:
  """The report's section on the pairs (empty without any)."""
  if not any(pair["sections"] for pair in result.values()):
    return []
  by_name = {a.name: a for a in arms}
  out = [
    "## Asynchronous arms beside their synchronous twins",
    "",
    "Each arm at another schedule (`rl.max_staleness` k, the rollouts' staleness) minus its "
    "twin, the arm of the same reward recipe at the first arm's schedule, at their last "
    "evaluation: paired by task with the seeds pooled (95% bootstrap interval over tasks) and "
    "paired by seed (95% Student-t interval over seeds); starred where the interval excludes "
    "0. The same result within the intervals: no difference excludes 0.",
    "",
  ]
  # Held-in tasks first: where the policy learns at this size, so where a change would show.
  order = sorted(SECTIONS, key=lambda s: s != "heldin")
  for section in order:
    pairs = [(name, pair) for name, pair in result.items() if section in pair["sections"]]
    if not pairs:
      continue
    columns = pairs[0][1]["sections"][section]["columns"]
    tables = {}
    for name, pair in pairs:
      p = pair["sections"][section]
      tables[f"{name} (by task)"] = p["by_task"]
      if p["by_seed"]:
        tables[f"{name} (by seed)"] = p["by_seed"]
      for arm_name, gain in p["from_base"].items():
        tables[f"{arm_name} − base (by task)"] = gain
    out += [
      f"### On {SECTIONS[section]}",
      "",
      statistics.markdown_table(tables, columns, difference=True),
      "",
      *(text for _, pair in pairs for text in (verdict(pair, by_name, section), "")),
    ]
  return out


def to_json(result: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
  def tables(p):
    return {
      "by_task": {c: iv.to_json() for c, iv in p["by_task"].items()},
      "by_seed": {c: iv.to_json() for c, iv in p["by_seed"].items()},
      "from_base": {
        name: {c: iv.to_json() for c, iv in t.items()} for name, t in p["from_base"].items()
      },
    }

  return {
    name: {
      "arm": pair["arm"],
      "twin": pair["twin"],
      "staleness": pair["staleness"],
      "sections": {
        section or "validation": {
          **tables(p),
          "seeds": p["seeds"],
          "inside_twin_interval": p["inside_twin_interval"],
          "beyond_noise": [[c, how] for c, how, _ in p["beyond_noise"]],
          "same": p["same"],
        }
        for section, p in pair["sections"].items()
      },
    }
    for name, pair in result.items()
  }
