"""The judge's reading of a run's channel (the pool side of every verdict)."""

import json

import pytest

from precisecoder.execution import judge


@pytest.mark.parametrize("line", [
    '{"a":1}', '{"a":1} ', ' {"a":1}', '{"a":1}{"b":2}', '{"a":1},', '[1]', '"x"', '\ufeff{"a":1}',
    '{"a":NaN}', '{"a":1', '', '{"a":"\\u00e9"}', '1 2', '{"a":[1,{"b":null}]}\t'])
def test_channel_lines_read_exactly_as_json_loads_reads_them(line):
  """The fast path for whole lines the harness wrote keeps json.loads' reading of any other."""
  try:
    parsed = json.loads(line)
  except ValueError:
    parsed = None
  records = judge._records({"channel": '{"ready":"n"}\n' + line})  # pylint: disable=protected-access
  assert records == ([parsed] if isinstance(parsed, dict) else [])
