"""The runs behind the reward, on their own: each distinct program once, verdicts remembered (LRU),
programs that do not compile failed without a run, references vouching only once verified (the
scorer's use of them, with hand-worked numbers: test_rewards.py)."""

from precisecoder import reward_jobs, tasks
from precisecoder.execution import Limits, Result, Status

TESTS = {"kind": "assert", "code": "assert f(2) == 4\n"}
GOLD = "def f(x):\n  return x * 2\n"
BUGGY = "def f(x):\n  return x + 3\n"


class Pool:
  """Passes a program whose text holds `* 2`; records every batch it was handed."""

  def __init__(self, status=None):
    self.batches, self.status = [], status

  def execute(self, jobs, deadline_s=None):
    del deadline_s
    self.batches.append([job.program for job in jobs])
    if self.status is not None:
      return [Result(self.status, detail="worker died") for _ in jobs]
    return [
      Result(Status.PASS if "* 2" in job.program else Status.FAIL, detail="wrong") for job in jobs
    ]


class Scheduler:
  """The scorer's side of a batch (`reward_jobs.Scheduler`): programs keyed by their text."""

  def __init__(self, pool, capacity=100):
    self.pool, self.deadline_s = pool, None
    self.verdicts = reward_jobs.Verdicts(capacity)
    self.references = reward_jobs.ReferenceChecks(self.limits_for, self.run_identity)

  def limits_for(self, task):
    del task
    return Limits(timeout_s=5.0)

  def run_identity(self, program):
    return program


def make_task(task_id="t", tests=None):
  return tasks.parse_task(
    {
      "task_id": task_id,
      "buggy_code": BUGGY,
      "gt_solution": GOLD,
      "tests": tests or TESTS,
      "is_buggy": True,
    },
    "test",
  )


def test_each_distinct_program_runs_once_per_batch_and_is_remembered_after():
  pool = Pool()
  scheduler = Scheduler(pool)
  task = make_task()
  batch = reward_jobs.JobBatch(scheduler)
  programs = (GOLD, BUGGY, GOLD.replace("\n", "  \n"), GOLD)
  keys = [batch.job(program, task) for program in programs]
  assert keys[0] == keys[2] == keys[3] != keys[1]  # lines right-stripped, as PDB runs them
  batch.execute()
  assert pool.batches == [[GOLD.rstrip("\n"), BUGGY.rstrip("\n")]]
  assert batch.passed(keys[0]) and not batch.passed(keys[1])
  assert batch.failure(keys[1]) == "fail: wrong"
  again = reward_jobs.JobBatch(scheduler)
  assert again.job(BUGGY, task) == keys[1] and again.passing_key(GOLD, task) == keys[0]
  again.execute()
  assert len(pool.batches) == 1  # nothing new to run
  assert scheduler.verdicts.executed == 2 and scheduler.verdicts.requested == 6
  # Other tests (or limits) are another program's verdict.
  assert reward_jobs.JobBatch(scheduler).job(GOLD, make_task(tests={**TESTS})) == keys[0]
  other = {"kind": "assert", "code": "assert f(3) == 6\n"}
  assert reward_jobs.JobBatch(scheduler).job(GOLD, make_task(tests=other)) != keys[0]


def test_a_program_that_does_not_compile_fails_without_a_run():
  pool = Pool()
  batch = reward_jobs.JobBatch(Scheduler(pool))
  key = batch.job("def f(x):\n  return (\n", make_task())
  batch.execute()
  assert pool.batches == [] and not batch.passed(key)
  assert batch.compile_error(key).startswith("syntax error")
  assert batch.failure(key) == batch.compile_error(key)


def test_infra_errors_are_reported_and_never_remembered():
  scheduler = Scheduler(Pool(status=Status.INFRA_ERROR))
  batch = reward_jobs.JobBatch(scheduler)
  key = batch.job(GOLD, make_task())
  batch.execute()
  assert batch.infra_error(key) == "worker died" and not batch.passed(key)
  assert scheduler.verdicts.get(key) is None


def test_while_running_registers_more_programs_for_the_same_round():
  pool = Pool()
  scheduler = Scheduler(pool)
  task = make_task()
  batch = reward_jobs.JobBatch(scheduler)
  batch.job(GOLD, task)
  assert batch.execute(while_running=lambda: batch.job(BUGGY, task)) == batch.job(BUGGY, task)
  assert sorted(sum(pool.batches, [])) == sorted([GOLD.rstrip("\n"), BUGGY.rstrip("\n")])


def test_verdicts_forget_the_least_recently_used_beyond_capacity():
  verdicts = reward_jobs.Verdicts(capacity=2)
  verdicts.put("a", True)
  verdicts.put("b", False)
  assert verdicts.get("a") is True  # now the most recent
  verdicts.put("c", True)
  assert (verdicts.get("a"), verdicts.get("b"), verdicts.get("c")) == (True, None, True)


def test_a_task_vouches_for_its_programs_only_once_verified():
  pool = Pool()
  scheduler = Scheduler(pool)
  references = scheduler.references
  task = make_task()
  assert references.known_verdict(GOLD, task) is None  # not checked yet
  batch = reward_jobs.JobBatch(scheduler)
  keys = {id(task): references.task_key(task)}
  checks = references.register([task, task], keys, batch)
  assert list(checks) == [keys[id(task)]]  # one check per task content
  batch.execute()
  references.settle(checks, batch)
  assert references.task_problem(task) is None and references.broken_tasks == {}
  assert references.known_verdict(GOLD.rstrip("\n"), task) is True
  assert references.known_verdict(BUGGY.rstrip("\n"), task) is False
  assert references.known_verdict("def f(x):\n  return 4\n", task) is None
  assert references.register([task], keys, reward_jobs.JobBatch(scheduler)) == {}  # remembered


def test_a_task_whose_buggy_program_passes_is_broken():
  scheduler = Scheduler(Pool())
  references = scheduler.references
  blind = "def f(x):\n  return x * 2 + 0\n"  # passes the tests as the fix does
  task = tasks.Task(**{**make_task("blind").__dict__, "buggy_code": blind})
  batch = reward_jobs.JobBatch(scheduler)
  checks = references.register([task], {id(task): references.task_key(task)}, batch)
  batch.execute()
  references.settle(checks, batch)
  assert references.task_problem(task).startswith("its buggy program passes")
  assert list(references.broken_tasks) == ["blind"]
  # A broken task vouches for nothing.
  assert references.known_verdict(GOLD.rstrip("\n"), task) is None
