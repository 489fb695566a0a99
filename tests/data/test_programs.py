"""The program space (data/programs.py) and its tasks (data/program_tasks.py): deterministic,
distinct and correct programs whose tests fail on their verified bugs, splits disjoint by
structure, and the distance of held-out programs to the nearest training program."""

import json
import random

import pytest

from precisecoder import cli, edits
from precisecoder.data import bug_choice, cards, generator, program_tasks, programs, verification
from precisecoder.data.checking import PoolChecker, TrustedCallChecker
from precisecoder.execution import ExecutionPool
from precisecoder.tasks import apply_gt_diff, load_tasks, parse_task, task_to_record

CHECKER = TrustedCallChecker()


@pytest.fixture(autouse=True)
def _small_reference(monkeypatch):
  monkeypatch.setattr(program_tasks, "REFERENCE_PROGRAMS", 120)


def test_a_program_depends_on_split_seed_index_and_stream_only():
  a = programs.draw("train", 3, 7)
  assert programs.draw("train", 3, 7) == a
  assert programs.draw("train", 4, 7).code != a.code
  assert programs.draw("train", 3, 8).code != a.code
  assert programs.draw("train", 3, 7, "clean").code != a.code
  tasks = [task_to_record(t) for t in generator.make_tasks("train", "programs", 6, seed=3)]
  assert tasks == [task_to_record(t) for t in generator.make_tasks("train", "programs", 6, 3)]


def test_programs_are_distinct_correct_and_tested():
  drawn = [programs.draw("train", 0, i) for i in range(80)]
  assert len({p.code for p in drawn}) == 80
  assert len({p.skeleton for p in drawn}) >= 60  # shapes, not names, vary
  assert len({p.fn for p in drawn}) >= 75
  for p in drawn:
    assert 3 <= len(p.code.splitlines()) <= programs.MAX_LINES
    assert p.code.startswith(f"def {p.fn}(") and p.description.startswith("Given that `")
    cases = p.tests["cases"]
    assert p.tests["kind"] == "call" and len(cases) == programs.NUM_CASES
    assert len({json.dumps(c["expected"]) for c in cases}) >= 3
    assert CHECKER.passes_one(p.code, p.tests), p.code


def test_a_program_that_fails_or_leaves_a_line_unrun_is_rejected():
  rng = random.Random(0)
  with pytest.raises(programs._Reject, match="fails on"):  # pylint: disable=protected-access
    programs.make_tests("f", "def f(xs):\n    return xs[0]\n", ["ints"], rng)
  dead = (
    "def f(xs):\n    t = 0\n    for x in xs:\n        if x > 99:\n            t += x\n"
    "        t += 1\n    return t\n"
  )
  with pytest.raises(programs._Reject, match="no test runs"):  # pylint: disable=protected-access
    programs.make_tests("f", dead, ["ints"], rng)


def _check_task(task):
  assert parse_task(task_to_record(task), "roundtrip") == task
  assert apply_gt_diff(task.buggy_code, task.gt_diff) == task.gt_solution.rstrip("\n")
  assert len(edits.parse_blocks(task.gt_diff)) == task.bug_count == 1
  assert CHECKER.passes_one(task.gt_solution, task.tests), task.task_id
  assert not CHECKER.passes_one(task.buggy_code, task.tests), task.task_id


def test_buggy_tasks_fail_their_tests_and_multi_line_bugs_are_atomic():
  single = generator.make_tasks("train", "programs", 24, seed=1)
  for t in single:
    _check_task(t)
    assert t.prompt.startswith(f"Implement `{bug_choice.signature(t.gt_solution)}`. Given")
  assert len({t.extra["bug_subtype"][0] for t in single}) >= 6
  multi = generator.make_tasks("validation", "programs-multi", 4, seed=1)
  for t in multi:
    _check_task(t)
    assert t.extra["multi_line"] and 2 <= len(t.gt_diff) <= 4
  report = verification.verify_tasks(single + multi, CHECKER)
  assert report.ok, report.failures


def test_program_tasks_verify_in_the_sandboxed_pool():
  tasks = generator.make_tasks("test", "programs", 3, seed=2)
  tasks += generator.make_clean_tasks("test", 2, seed=2, tier="programs")
  with ExecutionPool(workers=1) as pool:
    report = verification.verify_tasks(tasks, PoolChecker(pool, timeout_s=3.0))
  assert report.ok, report.failures


def test_the_skeleton_ignores_names_constants_and_operators_but_not_structure():
  code = (
    "def f(xs, k):\n    t = 0\n    for x in xs:\n        if x > k:\n            t += 2\n"
    "    return t\n"
  )
  renamed = (
    code.replace("xs", "vals")
    .replace("t ", "acc ")
    .replace("t\n", "acc\n")
    .replace(" f(", " g(")
    .replace("> k", "<= k")
    .replace("+= 2", "-= 7")
  )
  assert renamed != code
  assert programs.skeleton(renamed) == programs.skeleton(code)
  reshaped = code.replace("            t += 2\n", "            t += 2\n            t += x\n")
  assert programs.skeleton(reshaped) != programs.skeleton(code)
  called = code.replace("if x > k", "if abs(x) > k")
  assert programs.skeleton(called) != programs.skeleton(code)


def test_splits_share_no_program_structure():
  shapes = {
    split: {programs.draw(split, 0, i).skeleton for i in range(40)} for split in programs.SPLITS
  }
  assert not shapes["train"] & shapes["validation"]
  assert not shapes["train"] & shapes["test"]
  assert not shapes["validation"] & shapes["test"]
  for split, found in shapes.items():
    assert all(programs.split_of(s) == split for s in found)


def test_levenshtein_matches_the_textbook_dynamic_programme():
  def reference(a, b):
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
      prev, row[0] = row[0], i
      for j, y in enumerate(b, 1):
        prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (x != y))
    return row[-1]

  rng = random.Random(0)
  for _ in range(300):
    a = [rng.choice("abcd") for _ in range(rng.randint(0, 90))]
    b = [rng.choice("abcd") for _ in range(rng.randint(0, 90))]
    assert programs.levenshtein(a, b) == reference(a, b), (a, b)


def test_nearest_distance_finds_the_nearest_program():
  train = [programs.draw("train", 0, i).code for i in range(60)]
  index = programs.NearestIndex(train)
  assert index.nearest(train[17]) == (0.0, 17)
  edited = train[17].replace("return", "return  1 +", 1)  # two more tokens
  distance, nearest = index.nearest(edited)
  assert nearest == 17
  assert distance == pytest.approx(2 / len(programs.code_tokens(edited)), abs=1e-4)
  abstract = programs.code_tokens("def f(a):\n    return a + 1\n", abstract=True)
  assert abstract == [
    "def",
    "<v0>",
    "(",
    "<v1>",
    ")",
    ":",
    "NEWLINE",
    "INDENT",
    "return",
    "<v1>",
    "+",
    "<num>",
    "NEWLINE",
    "DEDENT",
  ]


def test_held_out_tasks_carry_their_distance_and_the_card_reports_it():
  held_out = generator.make_tasks("validation", "programs", 6, seed=0)
  clean = generator.make_clean_tasks("validation", 4, seed=0, tier="programs")
  train = generator.make_tasks("train", "programs", 4, seed=0)
  assert all("train_distance" not in t.extra for t in train)
  for t in held_out + clean:
    assert 0 < t.extra["train_distance"] <= 1 and 0 < t.extra["train_shape_distance"] <= 1
    assert t.extra["train_shape_distance"] <= t.extra["train_distance"] + 0.2
  reference = [programs.draw("train", 0, i).code for i in range(program_tasks.REFERENCE_PROGRAMS)]
  assert [t.extra["train_distance"] for t in held_out] == programs.nearest_distances(
    [t.gt_solution for t in held_out], reference
  )
  card = cards.data_card(held_out + clean, "programs_validation")
  assert card["distinct_skeletons"] == len({t.extra["skeleton"] for t in held_out + clean})
  values = sorted(t.extra["train_distance"] for t in held_out + clean)
  assert card["train_distance"]["min"] == values[0] and card["train_distance"]["max"] == values[-1]
  assert "Distance to the nearest training program" in cards.card_markdown(card)
  assert "train_distance" not in cards.data_card(train, "programs_train")


def test_build_generator_programs_tier_command(tmp_path, capsys):
  out = tmp_path / "programs"
  assert (
    cli.main(
      [
        "data",
        "build",
        "generator",
        "--tier",
        "programs",
        "--train",
        "3",
        "--validation",
        "2",
        "--test",
        "0",
        "--clean",
        "1",
        "--out",
        str(out),
        "--workers",
        "1",
      ]
    )
    == 0
  )
  assert "programs_validation: verified 2 tasks" in capsys.readouterr().out
  assert len(load_tasks(out / "programs_train.jsonl")) == 3
  found = {c["name"]: c for c in json.loads((out / "card.json").read_text())}
  assert found["programs_validation"]["train_distance"]["mean"] > 0
  assert found["clean_validation"]["clean"] == 1


def test_the_programs_base_presets_train_and_measure_on_the_program_space():
  # pylint: disable-next=import-outside-toplevel
  from precisecoder.experiments import base_model
  from precisecoder.train import config as config_lib  # pylint: disable=import-outside-toplevel

  for name in ("cpu-programs", "tiny-programs"):
    cfg = config_lib.base_config(name)
    assert [t for t in base_model._TIERS if base_model._count(cfg, t)] == ["programs"]  # pylint: disable=protected-access
    assert cfg.measure.tier == "programs" and cfg.measure.temperature == 1.0
  assert config_lib.base_config("cpu").measure.tier == "easy"
  run = config_lib.default("compare-cpu-programs")
  config_lib.validate(run)
  assert run.base.name == "cpu-programs" and run.data.tier == "programs"
  assert generator.clean_tier(run.data.tier) == "programs"
  assert generator.multi_tier(run.data.tier) == "programs-multi"
  assert generator.multi_tier("easy") == "multi" and generator.clean_tier("hard") == "easy"
