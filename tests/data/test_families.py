"""The generator's task families (data/families.py): splits that share no family and no
function name, and the renaming of locals (fresh names) that keeps the program's behaviour,
its parameters, attributes, strings and every name it already uses."""

import random

from precisecoder.data import families, generator


def test_apply_renames_changes_name_tokens_only():
  code = "def f(xs):\n    total = xs.total  # total\n    return total + len('total')\n"
  assert families.apply_renames(code, {"total": "acc"}) == (
    "def f(xs):\n    acc = xs.total  # total\n    return acc + len('total')\n"
  )
  assert families.apply_renames(code, {}) is code


def test_rename_locals_keeps_parameters_used_names_and_behaviour():
  code = (
    "def f(x, items):\n    total = 0\n    acc = 1\n    for i in items:\n"
    "        total += i * x * acc\n    return total\n"
  )
  renamed = {families.rename_locals(code, random.Random(seed)) for seed in range(20)}
  assert code in renamed and len(renamed) > 1  # some seeds rename, some keep the names
  for new in renamed:
    assert new.startswith("def f(x, items):")  # parameters keep the prompt's names
    assert "acc = 1" in new  # `acc` exists already: `total` is never renamed onto it
    scope = {}
    exec(new, scope)  # our own program, built above
    assert scope["f"](2, [1, 2, 3]) == 12


def test_splits_share_no_family_and_no_function_name():
  for tier in ("easy", "medium"):
    by_split = {s: families.families(tier, s) for s in families.SPLITS}
    assert all(by_split.values())
    names = {s: {n for f in fams for n in f.names} for s, fams in by_split.items()}
    assert not names["train"] & names["validation"]
    assert not names["train"] & names["test"]
    assert not names["validation"] & names["test"]
  all_names = [n for f in families.EASY + families.MEDIUM for n in f.names]
  assert len(all_names) == len(set(all_names))
  tasks = {s: generator.make_tasks(s, "easy", 10, seed=0) for s in families.SPLITS}
  fams = {s: {t.extra["family"] for t in ts} for s, ts in tasks.items()}
  assert not fams["train"] & fams["test"] and not fams["validation"] & fams["test"]
