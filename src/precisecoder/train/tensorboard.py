"""A TensorBoard event-file writer for scalars, without TensorFlow.

An event file is a TFRecord stream of `Event` protos. We encode the messages we need by hand
(Event{wall_time=1, step=2, file_version=3, summary=5, session_log=7}, Summary{value=1},
Summary.Value{tag=1, simple_value=2}) and frame them with masked CRC-32C as TFRecord does.
"""

from __future__ import annotations

import os
import pathlib
import socket
import struct
import time


def _crc32c_table() -> list[int]:
  table = []
  for i in range(256):
    crc = i
    for _ in range(8):
      crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    table.append(crc)
  return table


_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
  crc = 0xFFFFFFFF
  for b in data:
    crc = _TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
  return crc ^ 0xFFFFFFFF


def _masked_crc(data: bytes) -> int:
  crc = crc32c(data)
  return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def _varint(n: int) -> bytes:
  out = bytearray()
  n &= (1 << 64) - 1
  while True:
    byte = n & 0x7F
    n >>= 7
    if n:
      out.append(byte | 0x80)
    else:
      out.append(byte)
      return bytes(out)


def _field(number: int, wire_type: int) -> bytes:
  return _varint((number << 3) | wire_type)


def _bytes_field(number: int, payload: bytes) -> bytes:
  return _field(number, 2) + _varint(len(payload)) + payload


def encode_event(wall_time: float, step: int, *, scalars: dict[str, float] | None = None,
                 file_version: str | None = None, session_start: bool = False) -> bytes:
  event = _field(1, 1) + struct.pack("<d", wall_time) + _field(2, 0) + _varint(step)
  if file_version is not None:
    event += _bytes_field(3, file_version.encode())
  if session_start:  # session_log=7: SessionLog{status=1 (START)}
    event += _bytes_field(7, _field(1, 0) + _varint(1))
  if scalars:
    summary = b"".join(
        _bytes_field(1, _bytes_field(1, tag.encode()) + _field(2, 5) + struct.pack("<f", value))
        for tag, value in scalars.items())
    event += _bytes_field(5, summary)
  return event


def frame_record(data: bytes) -> bytes:
  length = struct.pack("<Q", len(data))
  return length + struct.pack("<I", _masked_crc(length)) + data + struct.pack("<I", _masked_crc(data))


class EventWriter:
  """Appends scalar summaries to `<logdir>/events.out.tfevents.<time>.<host>`.

  `purge_step` (a resumed run: the restored step + 1) starts the file with a SessionLog START
  at that step, on which TensorBoard drops every event at or after it from earlier files: the
  steps an interrupted run logged past its last checkpoint are not shown twice."""

  def __init__(self, logdir: str | os.PathLike, purge_step: int | None = None):
    logdir = pathlib.Path(logdir)
    logdir.mkdir(parents=True, exist_ok=True)
    self.path = logdir / f"events.out.tfevents.{int(time.time())}.{socket.gethostname()}"
    self._file = open(self.path, "ab")
    self._file.write(frame_record(encode_event(time.time(), 0, file_version="brain.Event:2")))
    if purge_step is not None:
      self._file.write(frame_record(encode_event(time.time(), purge_step, session_start=True)))

  def scalars(self, step: int, values: dict[str, float]) -> None:
    self._file.write(frame_record(encode_event(time.time(), step, scalars=values)))
    self._file.flush()

  def close(self) -> None:
    self._file.close()
