"""The upstream benchmarks' test sources (data/sources.py) on fixture files: BigCodeBench's
unittest suites, LiveCodeBench's public and pickled private cases, and pickled payloads that
cannot load globals. PDB's loader that joins them to its records: test_pdb.py."""

import base64
import pickle
import zlib

import pytest

from precisecoder.data import sources
from tests.data.test_pdb import BCB, LCB


def test_bigcodebench_tests_are_unittest_kind():
  tests, errors = sources.bigcodebench_tests(BCB)
  assert errors == []
  assert set(tests) == {"BigCodeBench/1", "BigCodeBench/2"}
  assert tests["BigCodeBench/1"]["kind"] == "unittest"
  assert "class TestCases(unittest.TestCase)" in tests["BigCodeBench/1"]["code"]


def test_livecodebench_public_and_pickled_private_cases():
  tests, errors = sources.livecodebench_tests(LCB)
  assert errors == []
  stdin = tests["abc900_a"]
  assert stdin["kind"] == "io"
  assert [c["stdin"] for c in stdin["cases"]] == ["3\n1 2 3\n", "1\n5\n", "4\n-1 -2 3 10\n"]
  functional = tests["9901"]
  assert functional == {
    "kind": "call",
    "entry_point": "Solution().addToAll",
    "cases": [
      {"args": [[1, 2, 3], 2], "expected": [3, 4, 5]},
      {"args": [[], 7], "expected": []},
      {"args": [[-1], 1], "expected": [0]},
    ],
  }


class _Evil:
  def __reduce__(self):
    return (print, ("pwned",))


def test_pickled_payloads_cannot_load_globals():
  payload = base64.b64encode(zlib.compress(pickle.dumps(_Evil()))).decode()
  with pytest.raises(sources.SourceError, match="refusing to load"):
    sources.decode_test_cases(payload, "fixture")
  with pytest.raises(sources.SourceError, match="neither JSON"):
    sources.decode_test_cases("not base64 !!", "fixture")
