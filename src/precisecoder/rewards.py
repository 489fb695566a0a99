"""The PreciseCoder reward: counterfactual per-defect credit for a batch of programs.

For each (task, program) pair (PAPER.md "The method"):
  unit       the program passes the task's tests;
  fix_i      defect i's counterfactual program (every reference fix except
             block i, plus the predicted block aligned to i) passes;
  ess_i      the smallest contiguous run of the predicted block that still fixes
             defect i (sizes 1, 2, ... up to the slack, smallest first);
  precision  min((Σ matched reference lines + slack credit) / ℓ, 1);
  recall     (1/m) Σ fix_i, gated to 1 when unit = 1;
  F1, r_λ = (1 − λ)·unit + λ·F1, and the baselines' terms.

Every program of a batch (full programs, counterfactuals, ess candidates) is run once, and a
task's references are verified, not assumed, before its rows earn credit: `reward_jobs`. A task
that breaks either is an error for each of its rows (reason in `error`, every term 0), never
credited.

Unusable and failing predictions (docs/scoring.md "Unusable and non-compiling predictions"):
  - no usable program (none, empty, over the size cap, not diffable): an error row, every term
    0, and `edit_lines` / `edit_cost` those of deleting the whole buggy program, as PDB's
    evaluator counts an empty answer, so that junk never looks precise;
  - a program that does not compile (or whose unit run hit the output cap) is scored: unit 0,
    its blocks credited by their counterfactual runs as the paper's formula and PDB do; the
    reason is in `note`, not `error`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from precisecoder import edits, reward_recipes
from precisecoder.execution.shared.programs import identity as compiled_identity
from precisecoder.execution import Limits
from precisecoder.reward_jobs import Pool, ReferenceChecks, JobBatch, Verdicts
from precisecoder.tasks import Task

ARRAY_KEYS = (
  "unit",
  "precision",
  "recall",
  "recall_gated",
  "f1",
  *reward_recipes.BLENDS,
  "edit_lines",
  "edit_cost",
  "noop",
  "damage",
  "broken_task",
)
BROKEN_TASK = "broken task: "  # how a broken task's rows' `error` starts
# The paper's columns: name -> (term in score records / reward arrays, rows it averages over).
# Buggy-task metrics average over buggy tasks; no-op and damage over already-correct programs.
PAPER_COLUMNS: dict[str, tuple[str, str]] = {
  "pass": ("unit", "buggy"),
  "precision": ("precision", "buggy"),
  "recall": ("recall", "buggy"),
  "f1": ("f1", "buggy"),
  "edit_lines": ("edit_lines", "buggy"),
  "noop": ("noop", "clean"),
  "damage": ("damage", "clean"),
}


def default_epsilon(ref: edits.Block) -> int:
  """PDB's slack: 2 extra lines for a single-line reference block, 1 for a multi-line one."""
  return 2 if len(ref) == 1 else 1


@dataclasses.dataclass
class MatchScore:
  """One aligned predicted block, and what its test runs showed."""

  match: edits.Match
  slack: int  # extra predicted lines credited beyond the reference lines
  fixed: bool = True  # exact matches are credited without a run
  ess_size: int | None = None  # smallest passing sub-block size, if one was found

  def as_record(self) -> dict[str, Any]:
    m = self.match
    return {
      "kind": m.kind,
      "pred_lines": [m.pred.start, m.pred.end],
      "pred_edits": len(m.pred),
      "ref_blocks": sorted(r.index for r in m.refs),
      "fixed": self.fixed,
      "slack": self.slack if self.fixed else 0,
      "ess_size": self.ess_size,
    }


@dataclasses.dataclass
class SampleScore:
  """Every term for one (task, program) pair."""

  task: Task
  program: str | None
  unit: float = 0.0
  precision: float = 0.0
  recall: float = 0.0
  recall_gated: float = 0.0
  f1: float = 0.0
  edit_lines: int = 0
  edit_cost: float = 0.0
  noop: bool = False
  damage: bool | None = None
  fixed: list[int] = dataclasses.field(default_factory=list)
  matches: list[MatchScore] = dataclasses.field(default_factory=list)
  error: str | None = None  # why the pair is not scored (every term 0)
  note: str | None = None  # why a scored program failed its unit run, beyond its tests
  pred_diff: edits.Diff = dataclasses.field(default_factory=dict, repr=False)


def rows_to_arrays(rows: Sequence[Mapping[str, float]]) -> dict[str, np.ndarray]:
  """`term_row`s -> the trainer's float32 arrays of shape [N], one per `ARRAY_KEYS`."""
  return {k: np.asarray([row[k] for row in rows], dtype=np.float32) for k in ARRAY_KEYS}


def _harmonic(a: float, b: float) -> float:
  return 2 * a * b / (a + b) if a + b > 0 else 0.0


class RewardScorer:
  """Scores programs against tasks with the PreciseCoder terms (see module doc).

  Args:
    pool: the execution pool (`ExecutionPool`, or anything with its `run`).
    epsilon: slack lines per matched reference block; None follows PDB's default
      (2 for a single-line block, 1 for a multi-line one).
    pdb_compat: reproduce the released PDB evaluator: its ess runs keep the
      matched reference block in the test program, and F1 uses ungated recall.
    lam: λ of r_λ = (1 − λ)·unit + λ·F1.
    verify_references: run each task's reference fix and buggy program once
      per task content; a task whose reference fails or whose buggy program
      passes is an error on every row. Once verified, the reference fix (and
      code it compiles to) passes and the buggy program fails without a run.
      False: no verification and no such shortcuts (every program runs).
    same_code_same_verdict: programs that compile to the same code share one
      verdict (`execution.programs`): true of any pool that runs them. Set it
      False for a pool whose verdicts read the source text.
    deadline_s: per-round deadline passed to `pool.execute`.
    cache_size: verdicts remembered across calls.
  """

  def __init__(
    self,
    pool: Pool,
    epsilon: int | None = None,
    pdb_compat: bool = False,
    lam: float = 1 / 3,
    *,
    verify_references: bool = True,
    same_code_same_verdict: bool = True,
    deadline_s: float | None = None,
    cache_size: int = 200_000,
  ):
    if epsilon is not None and epsilon < 0:
      raise ValueError(f"epsilon must be >= 0, got {epsilon}")
    if not 0 <= lam <= 1:
      raise ValueError(f"lam must be in [0, 1], got {lam}")
    self.pool = pool
    self.epsilon = epsilon
    self.pdb_compat = pdb_compat
    self.lam = lam
    self.verify_references = verify_references
    self.same_code_same_verdict = same_code_same_verdict
    self.deadline_s = deadline_s
    self.verdicts = Verdicts(cache_size)
    self.references = ReferenceChecks(self.limits_for, self.run_identity)

  def limits_for(self, task: Task) -> Limits:
    return Limits(timeout_s=float(task.timeout_s))

  def run_identity(self, program: str) -> str:
    """What decides `program`'s verdict: its compiled code, or with
    `same_code_same_verdict=False` (or if it does not compile) its text."""
    digest = compiled_identity(program)[0] if self.same_code_same_verdict else None
    return f"code:{digest}" if digest is not None else f"text:{program}"

  @property
  def broken_tasks(self) -> dict[str, str]:
    """task_id -> why, for every broken task seen (what `RemoteScorer.broken_tasks` holds)."""
    return self.references.broken_tasks

  def stats(self) -> dict[str, int]:
    v = self.verdicts
    return {
      "verdicts_requested": v.requested,
      "programs_executed": v.executed,
      "verdicts_without_run": v.skipped,
      "broken_tasks": len(self.broken_tasks),
    }

  # -------------------------------------------------------------------------
  # Public API
  # -------------------------------------------------------------------------

  def score(self, tasks: Sequence[Task], programs: Sequence[str | None]) -> dict[str, np.ndarray]:
    """Per-term float32 arrays of shape [N] (keys: `ARRAY_KEYS`)."""
    return self.to_arrays(self.score_samples(tasks, programs))

  def score_records(
    self,
    tasks: Sequence[Task],
    programs: Sequence[str | None],
    samples: Sequence[int] | None = None,
    errors: Sequence[str | None] | None = None,
  ) -> list[dict[str, Any]]:
    """One score-file line per pair (DESIGN.md "Contract: predictions and scores")."""
    scores = self.score_samples(tasks, programs, errors)
    return [
      self.to_record(s, samples[i] if samples is not None else 0) for i, s in enumerate(scores)
    ]

  def score_samples(
    self,
    tasks: Sequence[Task],
    programs: Sequence[str | None],
    errors: Sequence[str | None] | None = None,
  ) -> list[SampleScore]:
    """Every term of every pair; `errors[i]` marks a pair as unscorable up front."""
    if len(tasks) != len(programs):
      raise ValueError(f"{len(tasks)} tasks but {len(programs)} programs")
    batch = JobBatch(self)
    task_keys = (
      {id(t): self.references.task_key(t) for t in tasks} if self.verify_references else {}
    )
    checks = self.references.register(tasks, task_keys, batch)

    # Round 1: reference checks, full programs and counterfactuals of non-exact matches. The
    # references need no diff: they start first, and the pairs are diffed while they run.
    scores, unit_keys, cf_keys = batch.execute(
      while_running=lambda: self._first_round(tasks, programs, errors, task_keys, batch)
    )
    for s, unit_key, keys in zip(scores, unit_keys, cf_keys):
      if unit_key is not None:
        s.unit = float(batch.passed(unit_key))
        infra = batch.infra_error(unit_key)
        note = self.verdicts.notes.get(unit_key)
        if infra and s.error is None:
          s.error = f"infra_error: {infra}"
        elif note and s.error is None:
          s.note = f"unit run stopped by the output cap: {note}"
      for m, key in zip(s.matches, keys):
        if key is not None:
          m.fixed = batch.passed(key)
    self.references.settle(checks, batch)
    sound = [s for s in scores if not self._unsound(s, task_keys)]

    self._essential_runs(sound, batch)
    for s in sound:
      self._finish(s)
    for s in scores:
      if s.error is not None:  # not scored: no term may carry credit (an infra error's matches)
        s.unit, s.precision, s.recall, s.recall_gated, s.f1 = 0.0, 0.0, 0.0, 0.0, 0.0
        s.fixed, s.matches = [0] * len(s.fixed), []
    return scores

  def _first_round(
    self,
    tasks: Sequence[Task],
    programs: Sequence[str | None],
    errors: Sequence[str | None] | None,
    task_keys: dict[int, str],
    batch: JobBatch,
  ) -> tuple[list[SampleScore], list[str | None], list[list[str | None]]]:
    """Diffs every pair and registers its full program and the counterfactuals of its non-exact
    matches in `batch`; returns the scores and, per pair, those programs' verdict keys."""
    diffs: dict[tuple[int, str], tuple | str] = {}  # RL groups repeat completions: once each
    scores = [
      self._diff(t, p, errors[i] if errors else None, diffs)
      for i, (t, p) in enumerate(zip(tasks, programs))
    ]
    unit_keys: list[str | None] = []
    cf_keys: list[list[str | None]] = []
    for s in scores:
      if self._unsound(s, task_keys, unchecked_is_error=False):  # known broken: run nothing
        unit_keys.append(None)
        cf_keys.append([])
        continue
      unit_keys.append(self._unit_job(s, batch))
      cf_keys.append(
        [
          None
          if m.match.kind == edits.EXACT
          else batch.job(self._counterfactual(s.task, m.match.refs, m.match.pred), s.task)
          for m in s.matches
        ]
      )
    return scores, unit_keys, cf_keys

  def _unsound(
    self, s: SampleScore, task_keys: dict[int, str], unchecked_is_error: bool = True
  ) -> bool:
    """Marks a row of a broken (or, after its round, unverifiable) task as an error, terms 0."""
    key, problems = task_keys.get(id(s.task)), self.references.problems
    if key is None or (key not in problems and not unchecked_is_error):
      return False
    if key in problems:
      problem = problems[key]
      if problem is None:
        return False
      s.error = BROKEN_TASK + problem
    else:  # its reference runs hit an infrastructure error: no verdict, not remembered
      s.error = s.error or "infra_error: the task's reference runs did not complete"
    s.unit, s.matches, s.fixed = 0.0, [], [0] * len(s.fixed)
    s.damage = None
    return True

  # -------------------------------------------------------------------------
  # Steps
  # -------------------------------------------------------------------------

  def _diff(
    self,
    task: Task,
    program: str | None,
    error: str | None,
    seen: dict[tuple[int, str], tuple | str],
  ) -> SampleScore:
    s = SampleScore(task=task, program=program, error=error)
    s.fixed = [0] * len(edits.parse_blocks(task.gt_diff))
    if program is None or error is not None:
      s.error = error or "no program"
    elif not isinstance(program, str) or not program.strip():
      s.error = (
        "empty program" if isinstance(program, str) else f"not a string: {type(program).__name__}"
      )
    if s.error is not None:
      return self._replaces_everything(s, seen)
    key = (id(task), program)
    if key not in seen:
      seen[key] = self._diff_once(task, program)
    if isinstance(seen[key], str):  # not diffable
      s.error = seen[key]
      return self._replaces_everything(s, seen)
    pred_diff, cost, alignment = seen[key]
    s.pred_diff = pred_diff
    s.edit_lines = len(pred_diff)
    s.noop = not pred_diff
    s.edit_cost = cost
    if alignment is not None:
      s.matches = [MatchScore(m, self._initial_slack(m)) for m in alignment.matches]
    return s

  @staticmethod
  def _replaces_everything(s: SampleScore, seen: dict[tuple[int, str], tuple | str]) -> SampleScore:
    """An unusable prediction's edit size: deleting the whole buggy program (PDB's evaluator
    diffs an empty answer so), never 0 (a junk answer must not pass for a precise one)."""
    key = (id(s.task), "")
    if key not in seen:
      seen[key] = RewardScorer._diff_once(s.task, "", align=False)
    if not isinstance(seen[key], str):
      s.edit_lines, s.edit_cost = len(seen[key][0]), seen[key][1]
    return s

  @staticmethod
  def _diff_once(task: Task, program: str, align: bool = True) -> tuple | str:
    """What `_diff` needs of a (task, program) pair, worked out once per pair: the program's
    diff, edit cost (line edits per buggy line) and alignment, or why it cannot be diffed."""
    try:
      pred_diff = edits.line_diff(task.buggy_code, program)
      cost = edits.line_levenshtein(task.buggy_code, program) / max(
        1, len(task.buggy_code.splitlines())
      )
      return (
        pred_diff,
        cost,
        edits.align(task.buggy_code, pred_diff, task.gt_diff) if task.is_buggy and align else None,
      )
    except Exception as e:  # pylint: disable=broad-except  (one odd sample must not stop a run)
      return f"cannot diff: {type(e).__name__}: {e}"

  def _initial_slack(self, match: edits.Match) -> int:
    if match.kind == edits.EXACT:
      return 0
    allowed = sum(
      self.epsilon if self.epsilon is not None else default_epsilon(r) for r in match.refs
    )
    return max(min(allowed, len(match.pred) - match.ref_lines), 0)

  def _unit_job(self, s: SampleScore, batch: JobBatch) -> str | None:
    if s.error is not None:
      return None
    if self.verify_references:  # a broken task's rows are zeroed after this round
      pred_diff = s.pred_diff
      if pred_diff == s.task.gt_diff:  # the reference fix (or, for a clean task, a no-op)
        s.unit = 1.0
        self.verdicts.skipped += 1
        return None
      if s.task.is_buggy and not pred_diff:  # the unchanged buggy program
        s.unit = 0.0
        self.verdicts.skipped += 1
        return None
    key = batch.job(s.program, s.task)
    if batch.compile_error(key) is not None:
      s.note = batch.compile_error(key)
    elif self.verdicts.get(key) is False:
      s.note = compiled_identity(edits.rstrip_lines(s.program))[1]  # no compile, earlier batch
    return key

  def _counterfactual(self, task: Task, excluded: Iterable[edits.Block], pred: edits.Block) -> str:
    refs = edits.parse_blocks(task.gt_diff)
    return edits.apply_diff(task.buggy_code, edits.counterfactual_diff(refs, excluded, pred))

  def _essential_runs(self, scores: Sequence[SampleScore], batch: JobBatch) -> None:
    """Finds ess sizes, smallest first, one pool round per size across the batch."""
    pending = [
      (s, m)
      for s in scores
      for m in s.matches
      if m.fixed and m.slack > 0 and m.match.kind != edits.EXACT
    ]
    size = 1
    while pending:
      round_keys = []
      for s, m in pending:
        # The released evaluator keeps every reference block in its ess program (its
        # exclusion list is a dict, not the ids); the paper excludes the matched ones.
        excluded = () if self.pdb_compat else m.match.refs
        programs = [
          self._counterfactual(s.task, excluded, edits.sub_block(m.match.pred, i, size))
          for i in range(len(m.match.pred) - size + 1)
        ]
        # One sub-block already known to fix the defect (the reference fix itself, say)
        # settles this size: its siblings need no run, wherever they stand in the block.
        known = next(
          (key for key in (batch.passing_key(p, s.task) for p in programs) if key is not None), None
        )
        round_keys.append(
          [known] if known is not None else [batch.job(p, s.task) for p in programs]
        )
      batch.execute()
      still = []
      for (s, m), keys in zip(pending, round_keys):
        if any(batch.passed(k) for k in keys):
          m.ess_size = size
          m.slack = size - 1
        elif size < m.slack:
          still.append((s, m))
      pending = still
      size += 1

  def _finish(self, s: SampleScore) -> None:
    task = s.task
    if not task.is_buggy:
      s.damage = s.unit < 1
      return
    if s.edit_lines == 0:
      return  # a no-op (or an unscorable pair) scores 0 everywhere
    credit, fixed_refs = 0, set()
    for m in s.matches:
      if m.fixed:
        credit += m.match.ref_lines + m.slack
        fixed_refs.update(r.index for r in m.match.refs)
    for i in fixed_refs:
      s.fixed[i] = 1
    s.precision = min(credit / s.edit_lines, 1.0)
    s.recall = len(fixed_refs) / len(s.fixed) if s.fixed else 0.0
    s.recall_gated = 1.0 if s.unit == 1 else s.recall
    s.f1 = _harmonic(s.precision, s.recall if self.pdb_compat else s.recall_gated)

  # -------------------------------------------------------------------------
  # Output
  # -------------------------------------------------------------------------

  def reward_terms(self, s: SampleScore) -> dict[str, float]:
    """Every blended recipe's reward (reward_recipes.BLENDS: `reward` is r_λ)."""
    return reward_recipes.blended_columns(
      {"unit": s.unit, "f1": s.f1, "precision": s.precision, "recall_gated": s.recall_gated},
      self.lam,
    )

  def term_row(self, s: SampleScore) -> dict[str, float]:
    """One pair's value of every reward array (`ARRAY_KEYS`): what the trainer learns from."""
    row = {
      "unit": s.unit,
      "precision": s.precision,
      "recall": s.recall,
      "recall_gated": s.recall_gated,
      "f1": s.f1,
      "edit_lines": s.edit_lines,
      "edit_cost": s.edit_cost,
      "noop": float(s.noop),
      "damage": float(bool(s.damage)),
      "broken_task": float((s.error or "").startswith(BROKEN_TASK)),
      **self.reward_terms(s),
    }
    return {k: float(row[k]) for k in ARRAY_KEYS}

  def to_arrays(self, scores: Sequence[SampleScore]) -> dict[str, np.ndarray]:
    return rows_to_arrays([self.term_row(s) for s in scores])

  def to_record(self, s: SampleScore, sample: int = 0) -> dict[str, Any]:
    buggy = s.task.is_buggy
    return {
      "task_id": s.task.task_id,
      "sample": sample,
      "unit": int(s.unit),
      "precision": s.precision if buggy else None,
      "recall": s.recall if buggy else None,
      "recall_gated": s.recall_gated if buggy else None,
      "f1": s.f1 if buggy else None,
      "reward": self.reward_terms(s)["reward"],
      "edit_lines": s.edit_lines,
      "noop": s.noop,
      "damage": s.damage,
      "fixed": s.fixed,
      "error": s.error,
      "note": s.note,
      "matches": [m.as_record() for m in s.matches],
    }
