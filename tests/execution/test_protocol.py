"""Framing between the pool and its workers: length-prefixed compact JSON, read whole from a
blocking fd or piece by piece from a non-blocking one."""

import os

import pytest

from precisecoder.execution.shared import protocol

MESSAGES = [
  {"jobs": [{"id": 0, "program": "x = 'é'\n", "tests": {"kind": "io"}}]},
  [1, None],
  "text",
  {"nested": {"deep": [1.5, True]}},
]


def test_messages_cross_a_pipe_whole_and_in_order():
  read, write = os.pipe()
  try:
    for message in MESSAGES:
      protocol.write_all(write, protocol.encode(message))
    os.close(write)
    assert [protocol.read_message(read) for _ in MESSAGES] == MESSAGES
    assert protocol.read_message(read) is None  # the writer is gone
  finally:
    os.close(read)


def test_a_message_cut_short_reads_as_the_writer_gone():
  read, write = os.pipe()
  try:
    protocol.write_all(write, protocol.encode({"a": 1})[:-2])
    os.close(write)
    assert protocol.read_message(read) is None
  finally:
    os.close(read)


def test_the_incremental_reader_returns_each_message_once_it_is_whole():
  data = b"".join(protocol.encode(m) for m in MESSAGES)
  reader = protocol.MessageReader()
  got = []
  for i in range(0, len(data), 3):  # three bytes at a time: headers and bodies split anywhere
    got += reader.feed(data[i : i + 3])
  assert got == MESSAGES
  assert reader.feed(b"") == []


def test_encoding_is_compact_ascii_json_and_refuses_what_is_not_json_data():
  body = protocol.encode({"k": ["é", 1]})[4:]
  assert body == b'{"k":["\\u00e9",1]}'
  assert int.from_bytes(protocol.encode({"k": ["é", 1]})[:4], "little") == len(body)
  with pytest.raises(TypeError, match="set is not JSON data"):
    protocol.encode({"k": {1}})
