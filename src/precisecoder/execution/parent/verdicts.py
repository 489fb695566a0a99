"""The verdict on a job's runs: a worker's raw run records -> a `Result`.

`judge` parses the child's channel as data only and decides every verdict here, against what
`expectations.split` kept back; nothing the child wrote is trusted beyond the values it reports.
"""

from __future__ import annotations

import decimal
import fractions
import json
import math
import signal
from typing import Any, Mapping

from precisecoder.execution.parent.expectations import Expected
from precisecoder.execution.shared.types import Limits, Result, Status


def decode_tagged(value: Any) -> Any:
  """The child's exact-typed encoding (harness.to_tagged) back to Python data."""
  if isinstance(value, dict):
    ((tag, body),) = value.items()
    if tag == "l":
      return [decode_tagged(v) for v in body]
    if tag == "t":
      return tuple(decode_tagged(v) for v in body)
    if tag == "d":
      return {decode_tagged(k): decode_tagged(v) for k, v in body}
    if tag == "s":
      return {decode_tagged(v) for v in body}
    if tag == "fs":
      return frozenset(decode_tagged(v) for v in body)
    if tag == "b":
      return bytes.fromhex(body)
    if tag == "c":
      return complex(*body)
    if tag == "f":
      return float(body)
    if tag == "q":
      numerator, denominator = (decode_tagged(part) for part in body)
      if type(numerator) is not int or type(denominator) is not int or not denominator:  # pylint: disable=unidiomatic-typecheck
        raise ValueError("not a fraction")
      return fractions.Fraction(numerator, denominator)
    if tag == "v":  # a library scalar or a subclass, as the built-in value it equals
      return decode_tagged(body)
    if tag in ("ks", "is", "vs"):  # a dict view: a real one, over a dict built here
      items = [decode_tagged(v) for v in body]
      if tag == "ks":
        return dict.fromkeys(items).keys()
      if tag == "is":
        if not all(isinstance(item, tuple) and len(item) == 2 for item in items):
          raise ValueError("not the items of a dict")
        return dict(items).items()
      return dict(enumerate(items)).values()
    if tag == "dt":  # a numpy dtype, by its descriptor
      import numpy  # pylint: disable=import-outside-toplevel  (only where a test compares dtypes)

      if type(body) is not str or len(body) > 16:  # pylint: disable=unidiomatic-typecheck
        raise ValueError("not a dtype")
      return numpy.dtype(body)
    if tag == "nd":  # a small numpy array (or masked array), rebuilt as numpy compares it
      import numpy  # pylint: disable=import-outside-toplevel

      dtype, shape, items, mask = body
      if not isinstance(dtype, str) or len(dtype) > 16 or not isinstance(mask, (list, type(None))):
        raise ValueError("not an array")
      kind = numpy.dtype(dtype)
      values = decode_tagged(items)
      if kind.kind not in "biufcUS" or kind.itemsize > 1024 or len(values) > 64:
        raise ValueError("not a small array of numbers or text")  # as the harness sends them
      array = numpy.array(values, dtype=kind).reshape(shape)
      if mask is None:
        return array
      return numpy.ma.array(array, mask=numpy.array(mask, dtype=bool).reshape(shape))
    if tag == "m":
      try:
        if type(body) is str:  # pylint: disable=unidiomatic-typecheck
          return decimal.Decimal(body)
      except decimal.InvalidOperation:
        pass
      raise ValueError(f"not a decimal: {body!r:.40}")
    raise ValueError(f"unknown tag {tag!r}")
  if isinstance(value, (list, tuple)):
    raise ValueError("untagged list")
  return value


def _wanted(operator: str, literal: Any) -> str:
  if operator in ("truthy", "falsy"):
    return "a true value" if operator == "truthy" else "a false value"
  if operator.startswith("near"):
    return f"within {literal[1]!r} of {literal[0]!r}"
  if operator == "almost":
    centre, places, delta = literal
    return f"{centre!r} within {delta!r}" if delta is not None else f"{centre!r} to {places} places"
  return f"{operator} {literal!r:.200}"


def _holds(operator: str, value: Any, literal: Any) -> bool:
  if operator == "==":
    return value == literal
  if operator == "!=":
    return value != literal
  if operator == "is":
    return value is literal
  if operator == "is not":
    return value is not literal
  if operator in ("truthy", "falsy"):
    return bool(value) is (operator == "truthy")
  if operator == "almost":  # unittest's assertAlmostEqual, with Python's arithmetic
    centre, places, delta = literal
    if value == centre:
      return True
    difference = abs(value - centre)
    return difference <= delta if delta is not None else round(difference, places) == 0
  # Decoded values are plain Python data, so the arithmetic is Python's own, and it raises
  # (str - float, Decimal - float, a huge int) exactly where the child's would have.
  centre, tolerance, fabs = literal
  distance = math.fabs(value - centre) if fabs else abs(value - centre)
  return distance < tolerance if operator == "near<" else distance <= tolerance


_scan = json.JSONDecoder().scan_once  # json.loads' own scanner, without its per-call wrapping


def _records(run: Mapping[str, Any]) -> list[dict]:
  """The child's channel lines that parse as JSON objects (anything else is ignored: a line
  nested past the parser's recursion limit too)."""
  return _parsed(run.get("channel", "").splitlines()[1:])  # line 0 is the "ready" record


def _parsed(lines: list[str]) -> list[dict]:
  records = []
  for line in lines:
    try:
      record, end = _scan(line, 0)  # a whole line the harness wrote: what json.loads gives
      if end != len(line):
        raise ValueError
    except (StopIteration, ValueError, RecursionError):  # else: exactly as json.loads reads it
      try:
        record = json.loads(line)
      except (ValueError, RecursionError):
        continue
    if isinstance(record, dict):
      records.append(record)
  return records


def _signed(record: dict, run: Mapping[str, Any]) -> bool:
  return record.get("nonce") == run["nonce"]


def _abnormal(run: Mapping[str, Any], records: list[dict], limits: Limits) -> tuple[Status, str]:
  """Why a run produced no complete verdict."""
  if not run["ready"]:
    return Status.INFRA_ERROR, "sandbox setup failed: " + run.get("stderr", "")[-300:]
  if run["timeout"]:
    return Status.TIMEOUT, f"wall-clock limit of {limits.timeout_s:g}s"
  if run["signal"] == signal.SIGXCPU:
    return Status.TIMEOUT, "CPU time limit"
  if any(r.get("memory") is True for r in records):
    return Status.MEMORY, f"memory limit of {limits.memory_mb} MB"
  if run["overflow"]:
    return Status.FAIL, f"{run['overflow']} exceeded {limits.max_output_bytes} bytes"
  if run["signal"] is not None:
    return Status.CRASH, f"killed by {_signal_name(run['signal'])}"
  errors = [r["error"] for r in records if isinstance(r.get("error"), str) and "case" not in r]
  if errors:
    return Status.FAIL, errors[-1]
  return Status.FAIL, f"exited with status {run['exit']} before the harness finished"


def _signal_name(number: int) -> str:
  try:
    return signal.Signals(number).name
  except ValueError:  # a real-time signal (SIGRTMIN + n) has no name of its own
    return f"signal {number}"


def printable(text: str) -> str:
  """`text` as valid UTF-8: a lone surrogate the child wrote as a JSON escape ("\\ud800") stays
  an escape, so that a score file can be written."""
  return text.encode("utf-8", "backslashreplace").decode("utf-8")


def normalise_output(text: str) -> str:
  return "\n".join(line.rstrip() for line in text.splitlines()).rstrip()


def judge(expected: Expected, runs: list[Mapping[str, Any]], limits: Limits) -> Result:
  """The verdict on a job's runs (one per io case, else one)."""
  duration = sum(run["duration_s"] for run in runs)
  last = runs[-1]

  def result(status: Status, detail: str = "", got: Any = None) -> Result:
    return Result(status, duration, printable(detail[:1000]), last["stdout"], last["stderr"], got)

  if expected.kind == "io":
    for i, want in enumerate(expected.outputs):
      if i >= len(runs):
        return result(Status.INFRA_ERROR, f"case {i} was not run")
      run = runs[i]
      if not run["ready"] or run["timeout"] or run["overflow"] or run["exit"] != 0:
        status, detail = _abnormal(run, _records(run), limits)
        return result(status, f"case {i}: {detail}")
      if normalise_output(run["stdout"]) != normalise_output(want):
        return result(Status.FAIL, f"case {i}: wrong output")
    return result(Status.PASS)

  records = _records(last)
  ended = any(r.get("end") == expected.kind and _signed(r, last) for r in records)
  if expected.kind == "call":
    outcomes = {r["case"]: r for r in records if type(r.get("case")) is int}
    for i, want in enumerate(expected.values):
      record = outcomes.get(i)
      if record is None:
        break
      if "error" in record:
        if record.get("memory") is True:
          return result(Status.MEMORY, f"case {i}: MemoryError")
        return result(Status.FAIL, f"case {i}: {record['error']}")
      if "value" not in record or record["value"] != want:
        return result(Status.FAIL, f"case {i}: wrong return value", record.get("value"))
    else:
      if ended:
        return result(Status.PASS)
    return result(*_abnormal(last, records, limits))

  checks = _Checks(expected, last)
  failure = checks.read(records)
  if failure is not None:
    return result(Status.FAIL, failure)
  reported, seen = checks.reported, checks.seen
  if expected.kind == "assert":
    end = next((r for r in records if r.get("end") == "assert" and _signed(r, last)), None)
    if end is not None:
      return result(*_ending(expected, end, reported, seen))
    return result(*_abnormal(last, records, limits))

  outcomes: dict[str, dict] = {}
  for record in records:
    if isinstance(record.get("test"), str) and _signed(record, last):
      outcomes.setdefault(record["test"], record)
  for name in sorted(outcomes):
    if name not in expected.test_names:
      return result(Status.FAIL, f"unexpected test {name}")
    if outcomes[name].get("outcome") != "ok":
      detail = outcomes[name].get("detail")
      return result(Status.FAIL, f"{name}: {outcomes[name].get('outcome')} {detail}".strip())
  missing = sorted(expected.test_names - outcomes.keys())
  if not missing and ended:
    end = next(r for r in records if r.get("end") == "unittest" and _signed(r, last))
    return result(*_ending(expected, end, reported, seen))
  status, detail = _abnormal(last, records, limits)
  if status is Status.FAIL and missing:
    detail = f"{missing[0]} did not run ({detail})"
  return result(status, detail)


class _Checks:
  """Reads a run's signed check reports in order: how many there were, which checks they covered,
  and the first that fails its check. Where the checks have an order (`Expected.order`: the job
  ran in one process), the reports must follow it exactly: no check skipped, repeated or reported
  out of turn."""

  def __init__(self, expected: Expected, run: Mapping[str, Any]):
    self.expected, self.run = expected, run
    self.reported, self.seen = 0, set()

  def read(self, records: list[dict]) -> str | None:
    """Why one of `records`, after those read before, fails its check; None while they hold."""
    for record in records:
      if "expect" in record and _signed(record, self.run):
        failure = self._check(record)
        if failure is not None:
          return failure
    return None

  def _check(self, record: dict) -> str | None:
    expected, order = self.expected, self.expected.order
    self.reported += 1
    k = record["expect"]
    if type(k) is not int or not 0 <= k < len(expected.checks):  # pylint: disable=unidiomatic-typecheck
      return f"unknown expectation {k!r}"
    if order is not None and (self.reported > len(order) or order[self.reported - 1] != k):
      return f"assert #{k} reported out of turn (report {self.reported})"
    self.seen.add(k)
    operator, literal = expected.checks[k]
    if "value" not in record:  # not plain data: the child could report only its truth
      truth = record.get("truthy")
      if type(truth) is not bool:  # pylint: disable=unidiomatic-typecheck
        return f"assert #{k}: no value"
      if operator == "is not":  # only None, True and False are held by `is`: plain data all
        return None
      if record.get("remote") is True and operator in ("==", "!=", "is"):
        # a split run's reference to a program object: it equals nothing the tests hold
        if operator != "!=":
          return f"assert #{k} failed: got a reference to an object of the program"
        return None
      if operator not in ("truthy", "falsy"):
        return f"assert #{k}: {record.get('error', 'no value')!s:.300}"
      if truth is not (operator == "truthy"):
        return f"assert #{k} failed: got a value that is {truth}"
      return None
    try:
      value = decode_tagged(record["value"])
      converted = isinstance(record["value"], dict) and "v" in record["value"]
      # numpy.True_ == True, but it is not True
      holds = (
        (operator == "is not")
        if operator in ("is", "is not") and converted
        else (bool(_holds(operator, value, literal)))
      )  # an array's truth, as the child's assert
    except (ValueError, TypeError, ArithmeticError):
      return f"assert #{k}: unreadable value"
    if not holds:
      return f"assert #{k} failed: got {value!r:.200}, expected {_wanted(operator, literal)}"
    return None


class RunningChecks:
  """The check reports of a run still going, read as the worker passes them on: a few lines at
  each of its ticks. `judge` reads a run's check reports first, in order, and fails it on the
  first that fails its check, whatever it does after; so the pool stops such a run there
  (`pool._Worker.stop`), as a plain interpreter stops at the first failing assert. Each report
  is read after all those before it, since a check's turn is its place in the whole run."""

  def __init__(self, expected: Expected, nonce: str):
    self.nonce = nonce
    judged_early = expected.kind in ("assert", "unittest")  # call and io runs end on their own
    self._checks = _Checks(expected, {"nonce": nonce}) if judged_early else None

  def fail_now(self, lines: str) -> bool:
    """Whether `lines` (whole lines, written after those read before) fail the run. True once
    at most: the run is stopped then, and the lines it wrote meanwhile change nothing."""
    if self._checks is None:
      return False
    try:
      failed = self._checks.read(_parsed(lines.splitlines())) is not None
    except Exception:  # pylint: disable=broad-except  (left to `judge` when the run ends)
      failed = False
      self._checks = None  # where the lines stand in the run is lost: read no more
    if failed:
      self._checks = None
    return failed


def _ending(expected: Expected, end: dict, reported: int, seen: set[int]) -> tuple[Status, str]:
  """The verdict of a run whose harness signed its end record."""
  if end.get("expects") != reported:
    return Status.FAIL, "assert records lost"
  missing = expected.required - seen
  if missing:  # every honest run reports these: the records are forged
    return Status.FAIL, f"assert #{min(missing)} was never reported"
  if expected.order is not None and reported != len(expected.order):
    return Status.FAIL, "assert records lost"
  return Status.PASS, ""
