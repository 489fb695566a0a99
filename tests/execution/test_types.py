"""The pool's public contract: a job's key is its content, a result passes only as PASS."""

from precisecoder.execution.shared.types import Job, Limits, Result, Status

TESTS = {"kind": "assert", "code": "assert f() == 1\n"}


def test_equal_jobs_share_a_key_and_any_difference_changes_it():
  job = Job("def f():\n  return 1\n", TESTS, Limits(timeout_s=2))
  assert job.key() == Job("def f():\n  return 1\n", dict(TESTS), Limits(timeout_s=2)).key()
  others = [
    Job("def f():\n  return 2\n", TESTS, Limits(timeout_s=2)),
    Job(job.program, {"kind": "assert", "code": "assert f() == 2\n"}, job.limits),
    Job(job.program, TESTS, Limits(timeout_s=3)),
    Job(job.program, TESTS, Limits(timeout_s=2, memory_mb=512)),
  ]
  assert len({job.key(), *(other.key() for other in others)}) == 5


def test_only_a_pass_passes():
  assert Result(Status.PASS).passed
  assert not any(Result(status).passed for status in Status if status is not Status.PASS)
