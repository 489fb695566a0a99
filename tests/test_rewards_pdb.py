"""pdb_compat agrees with PDB's released evaluator on recorded cases.

The cases are in tests/testdata/pdb_agreement.json.
"""

import json
import pathlib

import pytest

from precisecoder import rewards, tasks
from precisecoder.execution import Result, Status

DATA = json.loads((pathlib.Path(__file__).parent / "testdata" / "pdb_agreement.json").read_text())
TASKS = {r["task_id"]: tasks.parse_task(r, "pdb_agreement.json") for r in DATA["tasks"]}


def _normal(program):
  return [l.rstrip().removesuffix("# harmless").rstrip() for l in program.splitlines() if l.strip()]


class OraclePool:
  """The recording's oracle: pass iff the program is the reference up to harmless noise.

  It reads source text (a second "# harmless" on a line fails), so scorers under it
  must not merge programs that compile alike: same_code_same_verdict=False.
  """

  def __init__(self, task):
    self.want = _normal(task.gt_solution)

  def execute(self, jobs, deadline_s=None):
    del deadline_s
    return [Result(Status.PASS if _normal(j.program) == self.want else Status.FAIL) for j in jobs]


@pytest.mark.parametrize(
  "case", DATA["cases"], ids=lambda c: f"{c['task_id']}-{c['kind']}-e{c['epsilon']}"
)
def test_matches_released_evaluator(case):
  task = TASKS[case["task_id"]]
  scorer = rewards.RewardScorer(
    OraclePool(task), epsilon=case["epsilon"], pdb_compat=True, same_code_same_verdict=False
  )
  (s,) = scorer.score_samples([task], [case["program"]])
  assert [s.unit, s.precision, s.recall, s.f1] == pytest.approx(case["pdb"], abs=1e-12)


def test_paper_mode_differs_only_by_the_ess_quirk():
  """On the recorded cases the paper reading keeps unit and recall and never credits less."""
  differ = 0
  for case in DATA["cases"]:
    task = TASKS[case["task_id"]]
    scorer = rewards.RewardScorer(
      OraclePool(task), epsilon=case["epsilon"], same_code_same_verdict=False
    )
    (paper,) = scorer.score_samples([task], [case["program"]])
    assert (paper.unit, paper.recall) == (case["pdb"][0], case["pdb"][2])
    assert paper.precision >= case["pdb"][1] - 1e-12
    differ += paper.precision > case["pdb"][1] + 1e-12
  assert differ > 0
