"""The verdict on a run's records: the channel read exactly as JSON, outputs compared, reports
required (the pool side of every verdict; runs through the pool: test_pool.py)."""

import json

import pytest

from precisecoder.execution.parent import expectations, verdicts
from precisecoder.execution.shared.types import Limits

LIMITS = Limits(timeout_s=60.0)


@pytest.mark.parametrize(
  "line",
  [
    '{"a":1}',
    '{"a":1} ',
    ' {"a":1}',
    '{"a":1}{"b":2}',
    '{"a":1},',
    "[1]",
    '"x"',
    '\ufeff{"a":1}',
    '{"a":NaN}',
    '{"a":1',
    "",
    '{"a":"\\u00e9"}',
    "1 2",
    '{"a":[1,{"b":null}]}\t',
  ],
)
def test_channel_lines_read_exactly_as_json_loads_reads_them(line):
  """The fast path for whole lines the harness wrote keeps json.loads' reading of any other."""
  try:
    parsed = json.loads(line)
  except ValueError:
    parsed = None
  records = verdicts._records({"channel": '{"ready":"n"}\n' + line})  # pylint: disable=protected-access
  assert records == ([parsed] if isinstance(parsed, dict) else [])


def test_io_ignores_trailing_whitespace_only():
  assert verdicts.normalise_output("1  \n2\n\n") == verdicts.normalise_output("1\n2")
  assert verdicts.normalise_output(" 1\n2") != verdicts.normalise_output("1\n2")


def test_a_run_that_skips_a_reached_assert_fails():
  code = "def check(c):\n  assert c(1) == 2\ncheck(f)\n"
  child_code, expected = expectations.split({"kind": "assert", "code": code})
  signed = {"nonce": "n" * 32}
  channel = '{"ready":"' + "n" * 32 + '"}\n' + json.dumps({"end": "assert", "expects": 0, **signed})
  run = {
    "ready": True,
    "exit": 0,
    "signal": None,
    "timeout": False,
    "overflow": None,
    "stdout": "",
    "stderr": "",
    "channel": channel,
    "nonce": "n" * 32,
    "duration_s": 0.0,
  }
  result = verdicts.judge(expected, [run], LIMITS)
  assert not result.passed and "never reported" in result.detail
  run["channel"] = (
    channel.replace('"expects": 0', '"expects": 1')
    + "\n"
    + json.dumps({"expect": 0, "value": 2, **signed})
  )
  assert verdicts.judge(expected, [run], LIMITS).passed


def test_lines_that_already_fail_a_check_fix_the_verdict_at_fail():
  code = "def check(c):\n  assert c(1) == 2\n  assert c(2) == 3\ncheck(f)\n"
  _, expected = expectations.split({"kind": "assert", "code": code})
  nonce = "n" * 32

  def lines(*values, sign=nonce):
    return "".join(
      json.dumps({"expect": k, "value": v, "nonce": sign}) + "\n" for k, v in enumerate(values)
    )

  def fails(*pieces):
    """Whether a run that wrote `pieces`, one a tick, is stopped, and at which."""
    running = verdicts.RunningChecks(expected, nonce)
    return [running.fail_now(piece) for piece in pieces]

  assert fails(lines(2, 4)) == [True]
  assert fails(lines(5)) == [True]
  assert fails(lines(2)) == [False]  # holds so far
  assert fails(lines(5, sign="f" * 32)) == [False]  # not signed
  assert fails('{"expect": 0, "value": [[[[\n' + "[" * 10**5) == [False]
  # A piece is read after those before it: a check's turn is its place in the whole run.
  first, second = lines(2, 3).splitlines(keepends=True)
  assert fails(first, second) == [False, False]
  assert fails(second) == [True]  # out of turn
  assert fails(first, lines(2, 4).splitlines(keepends=True)[1], second) == [False, True, False]
  _, call = expectations.split(
    {"kind": "call", "entry_point": "f", "cases": [{"args": [1], "expected": 2}]}
  )
  assert not verdicts.RunningChecks(call, nonce).fail_now(lines(5))  # call runs end on their own
