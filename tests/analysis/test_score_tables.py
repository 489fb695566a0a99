"""An evaluation's tables from its score lines: the precision vs no-op correlation's pairing."""

import pytest

from precisecoder.analysis import score_tables


def test_precision_noop_correlation_pairs_sources():
  rows = []
  for source, precision, noop in (
    ("a", 1.0, 1.0),
    ("b", 0.5, 0.5),
    ("c", 0.0, 0.0),
    ("d", 0.2, None),
  ):
    rows.append({"task_id": source, "is_buggy": True, "source": source, "precision": precision})
    if noop is not None:
      rows.append({"task_id": source + "_clean", "is_buggy": False, "source": source, "noop": noop})
  r = score_tables.precision_noop_correlation(rows)
  assert r.n == 3 and r.r == pytest.approx(1.0)
