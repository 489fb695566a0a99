"""The PDB loader (data/pdb.py) on fixture files in the upstream formats (PDB, BigCodeBench,
LiveCodeBench), and its check of the gold solutions. The test sources alone: test_sources.py."""

import json
import pathlib

import pytest

from precisecoder.data import pdb
from precisecoder.data.checking import PoolChecker, TrustedCallChecker
from precisecoder.execution import ExecutionPool

DATA = pathlib.Path(__file__).resolve().parents[1] / "testdata"
BCB = DATA / "data_bigcodebench.jsonl"
LCB = DATA / "data_lcb_code_generation_lite.jsonl"


def test_base_id_strips_the_variant_suffix():
  assert pdb.base_id("BigCodeBench/13_2") == "BigCodeBench/13"
  assert pdb.base_id("abc301_a_0") == "abc301_a"
  assert pdb.base_id("3485_11") == "3485"


@pytest.mark.parametrize("name", ["data_pdb_single.jsonl", "data_pdb_single.json", "parquet"])
def test_load_pdb_joins_tests_and_reports_every_problem(name, tmp_path):
  path = DATA / name
  if name == "parquet":
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [json.loads(line) for line in (DATA / "data_pdb_single.jsonl").read_text().splitlines()]
    path = tmp_path / "pdb.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
  report = pdb.load_pdb(path, bigcodebench=BCB, livecodebench=LCB)
  ids = [t.task_id for t in report.tasks]
  assert ids == ["BigCodeBench/1_0", "BigCodeBench/2_3", "abc900_a_1", "9901_0"]
  by_id = {t.task_id: t for t in report.tasks}
  assert by_id["abc900_a_1"].tests["kind"] == "io"
  assert by_id["9901_0"].tests["entry_point"] == "Solution().addToAll"
  assert by_id["BigCodeBench/1_0"].extra["bug_type"] == ["Algorithm"]
  assert by_id["BigCodeBench/1_0"].is_buggy and by_id["BigCodeBench/1_0"].bug_count == 1
  if name != "data_pdb_single.json":  # the JSON array fixture holds only the good records
    assert report.missing_tests == ["BigCodeBench/77_0"]
    assert len(report.duplicates) == 1 and report.duplicates[0].startswith("9901_0")
    assert len(report.malformed) == 1 and "gt_diff" in report.malformed[0]
    assert report.summary() == {
      "records": 7,
      "loaded": 4,
      "missing_tests": 1,
      "duplicates": 1,
      "malformed": 1,
      "source_errors": 0,
    }


def test_failing_gold_is_found():
  report = pdb.load_pdb(DATA / "data_pdb_single.jsonl", bigcodebench=BCB, livecodebench=LCB)
  call_tasks = [t for t in report.tasks if t.tests["kind"] == "call"]
  assert pdb.failing_gold(call_tasks, TrustedCallChecker()) == []
  broken = [t.__class__(**{**t.__dict__, "gt_solution": t.buggy_code}) for t in call_tasks]
  assert pdb.failing_gold(broken, TrustedCallChecker()) == ["9901_0"]


def test_failing_gold_in_the_pool():
  report = pdb.load_pdb(DATA / "data_pdb_single.jsonl", bigcodebench=BCB, livecodebench=LCB)
  with ExecutionPool(workers=2) as pool:
    assert pdb.failing_gold(report.tasks, PoolChecker(pool)) == ["BigCodeBench/2_3"]
