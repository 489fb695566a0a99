"""Property tests of the reward on random straight-line programs with one-line bugs."""

from hypothesis import assume, given, settings, strategies as st

from precisecoder import rewards, tasks
from test_rewards import InProcessPool


@st.composite
def programs(draw):
  """A chain `v_i = v_{i-1} op c` (injective in x, so every constant change is visible)."""
  n = draw(st.integers(3, 8))
  ops = draw(st.lists(st.sampled_from("+*"), min_size=n, max_size=n))
  consts = draw(st.lists(st.integers(1, 9), min_size=n, max_size=n))
  return ops, consts


def render(ops, consts):
  body = [f"    v{i + 1} = v{i} {op} {c}" for i, (op, c) in enumerate(zip(ops, consts))]
  return "\n".join(["def f(v0):", *body, f"    return v{len(ops)}"]) + "\n"


def apply_ops(ops, consts, x):
  v = x
  for op, c in zip(ops, consts):
    v = v + c if op == "+" else v * c
  return v


@st.composite
def single_bug_tasks(draw):
  ops, consts = draw(programs())
  line = draw(st.integers(0, len(ops) - 1))
  wrong = draw(st.integers(1, 9).filter(lambda c: c != consts[line]))
  buggy_consts = list(consts)
  buggy_consts[line] = wrong
  expected = {x: apply_ops(ops, consts, x) for x in range(-2, 3)}
  tests = {"kind": "assert", "code": f"for x, y in {expected!r}.items():\n    assert f(x) == y\n"}
  task = tasks.parse_task(
    {
      "task_id": "p",
      "buggy_code": render(ops, buggy_consts),
      "gt_solution": render(ops, consts),
      "tests": tests,
    },
    "hypothesis",
  )
  return task, ops, consts


def harmless(program, line):
  """Wraps the right-hand side of body line `line` (1-based) in parentheses."""
  lines = program.splitlines()
  name, rhs = lines[line - 1].split(" = ", 1)
  lines[line - 1] = f"{name} = ({rhs})"
  return "\n".join(lines) + "\n"


@settings(max_examples=40, deadline=None)
@given(single_bug_tasks(), st.booleans(), st.booleans())
def test_reference_fix_scores_one(case, compat, trust):
  task, _, _ = case
  scorer = rewards.RewardScorer(InProcessPool(), pdb_compat=compat, verify_references=trust)
  (s,) = scorer.score_samples([task], [task.gt_solution])
  assert (s.unit, s.precision, s.recall, s.f1) == (1, 1, 1, 1)


@settings(max_examples=40, deadline=None)
@given(single_bug_tasks(), st.data(), st.booleans())
def test_harmless_edit_never_raises_precision(case, data, compat):
  task, ops, _ = case
  n = len(ops)
  body_lines = list(range(2, n + 2))
  extra = data.draw(st.lists(st.sampled_from(body_lines), unique=True, max_size=3))
  bug_line = int(next(iter(task.gt_diff)))
  base = task.gt_solution
  for line in extra:
    if line != bug_line:
      base = harmless(base, line)
  free = [line for line in body_lines if line not in extra and line != bug_line]
  assume(free)  # every body line already edited: no harmless line left to add
  more = harmless(base, data.draw(st.sampled_from(free)))
  scorer = rewards.RewardScorer(InProcessPool(), pdb_compat=compat)
  before, after = scorer.score_samples([task, task], [base, more])
  assert after.unit == 1 and after.edit_lines == before.edit_lines + 1
  assert after.precision <= before.precision


@settings(max_examples=40, deadline=None)
@given(single_bug_tasks(), st.booleans(), st.booleans(), st.sampled_from(["", "\n\n", "   \n"]))
def test_noop_scores_zero(case, compat, trust, noise):
  task, _, _ = case
  scorer = rewards.RewardScorer(InProcessPool(), pdb_compat=compat, verify_references=trust)
  program = task.buggy_code.replace("\n", "  \n", 1) + noise  # white space only
  (s,) = scorer.score_samples([task], [program])
  assert s.noop and (s.unit, s.precision, s.recall, s.f1, s.edit_lines) == (0, 0, 0, 0, 0)
  assert scorer.reward_terms(s)["reward"] == 0
