"""Confluent's wire format: magic byte 0, a 4-byte big-endian schema id, then the payload.

Protobuf payloads start with the message indexes that locate the message type in its schema file: a
zig-zag varint count, then each index as a zig-zag varint; the common case ``[0]`` (the file's first
message) is written as the single byte 0. Pure functions, run in Spark's Python workers per record.
"""

from __future__ import annotations

__all__ = ["MAGIC", "FrameError", "frame", "read_message_indexes", "schema_id_of", "write_message_indexes"]

MAGIC = 0
HEADER = 5


class FrameError(ValueError):
    """Bytes that are not in Confluent's wire format; the message says what is wrong with them."""


def schema_id_of(data: bytes) -> int:
    """The schema id of a framed record; the payload starts at byte 5."""
    if len(data) < HEADER:
        raise FrameError(
            f"{len(data)} bytes: too short for Confluent's wire format (magic byte and schema id)"
        )
    if data[0] != MAGIC:
        raise FrameError(
            f"no magic byte: the first byte is {data[0]}, not 0 (not in Confluent's wire format)"
        )
    return int.from_bytes(data[1:HEADER], "big")  # unsigned, as Confluent's serializers read it


def frame(schema_id: int, payload: bytes, message_indexes: bytes = b"") -> bytes:
    """A record in the wire format; ``message_indexes`` from ``write_message_indexes`` for Protobuf."""
    return b"\x00" + schema_id.to_bytes(4, "big") + message_indexes + payload


def _zigzag(value: int) -> int:
    return (value << 1) ^ (value >> 63)


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if pos >= len(data):
            raise FrameError("truncated Protobuf message indexes")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise FrameError("malformed varint in Protobuf message indexes")


def write_message_indexes(indexes: list[int]) -> bytes:
    """The message-index prefix of a Protobuf payload (``[0]`` is the single byte 0)."""
    if indexes == [0]:
        return b"\x00"
    out = bytearray()
    for value in (len(indexes), *indexes):
        v = _zigzag(value) & 0xFFFFFFFFFFFFFFFF
        while v > 0x7F:
            out.append((v & 0x7F) | 0x80)
            v >>= 7
        out.append(v)
    return bytes(out)


def read_message_indexes(data: bytes, pos: int = HEADER) -> tuple[list[int], int]:
    """(message indexes, where the Protobuf message starts) of a framed Protobuf record."""
    count, pos = _read_varint(data, pos)
    if count == 0:
        return [0], pos
    if count < 0 or count > 100:
        raise FrameError(f"{count} Protobuf message indexes: not a Confluent Protobuf payload")
    indexes = []
    for _ in range(count):
        index, pos = _read_varint(data, pos)
        indexes.append(index)
    return indexes, pos
