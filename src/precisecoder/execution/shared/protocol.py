"""Framing between the pool and its workers: length-prefixed JSON messages.

Only the pool and its own workers speak this protocol (never a sandboxed
child), and it carries plain JSON: nothing is ever unpickled.
"""

from __future__ import annotations

import json
import os
import struct
from typing import Any, Callable

_HEADER = struct.Struct("<I")
MAX_MESSAGE_BYTES = 1 << 30


def compact_encoder(refuse: Callable[[Any], Any]) -> Callable[[Any], str]:
  """value -> compact ASCII JSON, through one C encoder made here: JSONEncoder.encode runs Python
  code and builds a new encoder per call. `refuse(value)` raises for what is not JSON data. No
  circular-reference check: for plain data our own code builds (messages, harness records)."""
  encoder = json.encoder.c_make_encoder(
    None, refuse, json.encoder.encode_basestring_ascii, None, ":", ",", False, False, True
  )
  return lambda value: "".join(encoder(value, 0))


def _refuse(value: Any) -> None:
  raise TypeError(f"a {type(value).__name__} is not JSON data")


_encode_json = compact_encoder(_refuse)


def encode(message: Any) -> bytes:
  """One framed message: a 4-byte little-endian length, then compact JSON."""
  body = _encode_json(message).encode()
  if len(body) > MAX_MESSAGE_BYTES:
    raise ValueError(f"message of {len(body)} bytes exceeds the {MAX_MESSAGE_BYTES} byte cap")
  return _HEADER.pack(len(body)) + body


def write_all(fd: int, data: bytes) -> None:
  view = memoryview(data)
  while view:
    view = view[os.write(fd, view) :]


def read_exact(fd: int, size: int) -> bytes | None:
  """`size` bytes from a blocking fd, or None at end of file."""
  chunks = []
  while size:
    chunk = os.read(fd, min(size, 1 << 20))
    if not chunk:
      return None
    chunks.append(chunk)
    size -= len(chunk)
  return b"".join(chunks)


def read_message(fd: int) -> Any | None:
  """The next message from a blocking fd, or None when the writer is gone."""
  header = read_exact(fd, _HEADER.size)
  if header is None:
    return None
  (size,) = _HEADER.unpack(header)
  body = read_exact(fd, size)
  if body is None:
    return None
  return json.loads(body)


class MessageReader:
  """Incremental decoder for a non-blocking fd: feed bytes, take whole messages."""

  def __init__(self):
    self._buffer = bytearray()

  def feed(self, data: bytes) -> list[Any]:
    self._buffer += data
    messages = []
    while len(self._buffer) >= _HEADER.size:
      (size,) = _HEADER.unpack_from(self._buffer)
      end = _HEADER.size + size
      if len(self._buffer) < end:
        break
      messages.append(json.loads(bytes(self._buffer[_HEADER.size : end])))
      del self._buffer[:end]
    return messages
