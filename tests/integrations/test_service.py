"""The scoring service: one batch for concurrent callers, one run per completion across terms,
infrastructure failures as "not scored" (never cached), λ per request, a clean close."""

import math
import threading

import pytest

from integration_helpers import completions_for, make_task_set, share_backend
from precisecoder import predictions, rewards
from precisecoder.execution import ExecutionPool
from precisecoder.integrations import service as service_lib, trl, tunix


class GateBackend:
  """Records each batch's size; the first batch waits at the gate until it is opened."""

  def __init__(self, fail_first=False):
    self.sizes, self.entered, self.gate = [], threading.Event(), threading.Event()
    self.fail_first = fail_first
    self.closed = False

  def results(self, items):
    self.sizes.append(len(items))
    self.entered.set()
    assert self.gate.wait(60)
    if self.fail_first and len(self.sizes) == 1:
      raise ConnectionError("pool lost")
    return [
      {
        "task_id": i.task.task_id,
        "sample": i.sample,
        "unit": 1,
        "reward": 1.0,
        "error": None,
        "terms": {k: 1.0 for k in rewards.ARRAY_KEYS},
      }
      for i in items
    ]

  def close(self):
    self.closed = True


@pytest.fixture(scope="module")
def tasks():
  return make_task_set()


def _items(task_list, n=1):
  return [
    service_lib.Item(t, f"def f():\n  return {k}\n", None, k) for t in task_list for k in range(n)
  ]


def test_callers_waiting_while_a_batch_scores_are_joined_into_the_next(tasks):
  backend = GateBackend()
  service = service_lib.ScoringService(backend)
  first = service.submit(_items(tasks[:1]))
  assert backend.entered.wait(60)
  later = [service.submit(_items(tasks[1:3], 2)), service.submit(_items(tasks[3:], 3))]
  backend.gate.set()
  assert len(first.result(60)) == 1
  assert [len(f.result(60)) for f in later] == [4, 6]
  assert backend.sizes == [1, 10]  # the two later callers: one batch
  service.close()
  assert backend.closed


def test_an_infrastructure_failure_is_not_scored_and_not_remembered(tasks):
  backend = GateBackend(fail_first=True)
  backend.gate.set()
  service = service_lib.ScoringService(backend)
  failed = service.score(_items(tasks[:2]))
  assert all(not service_lib.is_scored(r) for r in failed)
  assert all(r["unit"] is None and r["terms"] is None for r in failed)
  assert "ConnectionError: pool lost" in failed[0]["error"]
  retried = service.score(_items(tasks[:2]))  # scored this time: the failure was not cached
  assert all(service_lib.is_scored(r) and r["unit"] == 1 for r in retried)
  assert service.stats()["not_scored"] == 2
  service.close()


def test_a_configuration_error_reaches_the_caller(tasks):
  class Refusing(GateBackend):
    def results(self, items):
      raise service_lib.ConfigurationError("server scores with epsilon=1")

  service = service_lib.ScoringService(Refusing())
  with pytest.raises(service_lib.ConfigurationError, match="epsilon=1"):
    service.score(_items(tasks[:1]))
  service.close()


def test_close_finishes_what_was_submitted(tasks):
  backend = GateBackend()
  service = service_lib.ScoringService(backend)
  future = service.submit(_items(tasks))
  assert backend.entered.wait(60)
  closer = threading.Thread(target=service.close)
  closer.start()
  backend.gate.set()
  closer.join(60)
  assert len(future.result(0)) == len(tasks) and backend.closed
  with pytest.raises(RuntimeError, match="closed"):
    service.submit(_items(tasks[:1]))


@pytest.fixture(scope="module")
def pool():
  with ExecutionPool(workers=1) as p:
    yield p


def test_four_terms_run_the_sandbox_once_per_completion(tasks, pool):
  backend = service_lib.LocalBackend(pool=pool)
  service = share_backend(backend)
  ids = [t.task_id for t in tasks for _ in range(4)]
  completions = [c for t in tasks for c in completions_for(t)]
  funcs = trl.reward_functions(tasks, terms=("unit", "precision", "f1", "r_lambda"))
  first = funcs[0](prompts=["p"] * len(ids), completions=completions, task_id=ids)
  executed = backend.scorer.stats()["programs_executed"]
  assert executed > 0
  values = [f(prompts=["p"] * len(ids), completions=completions, task_id=ids) for f in funcs]
  assert values[0] == first
  assert backend.scorer.stats()["programs_executed"] == executed  # no run for the other terms
  pairs = {(i, predictions.resolve({"completion": c})) for i, c in zip(ids, completions)}
  assert service.stats()["items_scored"] == len(pairs) and service.stats()["batches"] == 1


def test_lam_per_request_equals_a_scorer_built_with_that_lam(tasks, pool):
  service = service_lib.ScoringService(service_lib.LocalBackend(pool=pool, lam=1 / 3))
  programs = [predictions.resolve({"completion": c})[0] for c in completions_for(tasks[0])]
  items = [service_lib.Item(tasks[0], p, None, k) for k, p in enumerate(programs)]
  got = service.score(items, lam=0.5)
  expected = rewards.RewardScorer(pool, lam=0.5).score([tasks[0]] * len(programs), programs)
  for k, result in enumerate(got):
    assert result["reward"] == pytest.approx(float(expected["reward"][k]), abs=1e-7)
    for key in ("reward", "precision_only", "recall_only"):
      assert result["terms"][key] == pytest.approx(float(expected[key][k]), abs=1e-7)
  assert any(0 < r["reward"] < 1 for r in got)  # the over-edit: a blend, not 0 or 1
  service.close()


def test_a_not_scored_pair_is_none_for_trl_and_nan_for_tunix(tasks):
  backend = GateBackend(fail_first=True)
  backend.gate.set()
  share_backend(backend)
  [trl_unit] = trl.reward_functions(tasks, terms=("unit",))
  [tunix_unit] = tunix.reward_functions(tasks, terms=("unit",))
  assert trl_unit(prompts=["p"], completions=["x = 1"], task_id=[tasks[0].task_id]) == [None]
  value = tunix_unit(prompts=["p"], completions=["x = 2"], task_id=[tasks[0].task_id])
  assert value == [1.0]  # the backend works again: a fresh pair is scored
  backend.fail_first = True
  backend.sizes.clear()
  assert math.isnan(tunix_unit(prompts=["p"], completions=["x = 3"], task_id=[tasks[0].task_id])[0])


def test_unknown_terms_and_task_ids_are_errors_not_scores(tasks):
  with pytest.raises(ValueError, match="unknown reward term"):
    trl.reward_functions(tasks, terms=("unit", "bleu"))
  [unit] = trl.reward_functions(tasks, terms=("unit",))
  with pytest.raises(ValueError, match="no 'task_id' column"):
    unit(prompts=["p"], completions=["x"])
  with pytest.raises(ValueError, match=r"task_id\[0\]: unknown task_id 'nope'"):
    unit(prompts=["p"], completions=["x"], task_id=["nope"])
