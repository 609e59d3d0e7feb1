"""What a registry wire format offers the codec: one ``WireFormat`` object per format, one small protocol.

Avro (``avro.AVRO``), Protobuf (``protobuf.PROTOBUF``) and JSON Schema (``jsonschema.JSON_SCHEMA``) each
implement it; ``formats.wire_format`` finds one by its name. The codec (``codec``) keeps what all of them
share: Confluent's framing, the per-process caches by schema id, fetching schemas and their references,
and building Arrow arrays; it never names a format. A format never imports the codec: it is handed schema
texts (``Files``) and answers with parsed schemas, Arrow types and per-record functions.

Called in the driver when a query is planned (``reader``, ``derive``) and in Spark's Python workers once
per schema id (``decoder``, ``encoder``); the functions those return run once per record.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa

__all__ = [
    "Decode",
    "Encode",
    "Files",
    "Reader",
    "ReaderCannotReadError",
    "RecordUnreadableError",
    "WireFormat",
]

Files = Sequence[tuple[str, str]]
"""A schema and the schemas it references: (import name, text), dependencies first, the schema last."""

Decode = Callable[[bytes, int], Any]
"""``decode(data, start)``: the record's payload at ``data[start:]`` as Python values of the reader's type."""

Encode = Callable[[Any], bytes]
"""``encode(value)``: the payload of one value (the codec frames it)."""


@dataclass(frozen=True)
class Reader:
    """A reader schema as its format uses it, and the Arrow type its values are built as."""

    schema: Any
    """Parsed as the format decodes with it (fastavro's schema, a Protobuf descriptor, a JSON Schema)."""
    arrow: pa.DataType
    """Before Spark's adjustments (the codec turns every timestamp into microseconds)."""
    files: tuple[tuple[str, str], ...]
    """The reader schema's ``Files``, as given to ``WireFormat.reader``."""


class RecordUnreadableError(Exception):
    """Records written with this writer schema cannot be read as the reader (each is one record's fault)."""


class ReaderCannotReadError(Exception):
    """The reader schema cannot read this writer schema's records at all: the setup's fault, raised.

    The text completes "the reader schema ... ": say what it does wrong and what to do.
    """


class WireFormat(Protocol):
    """One registry format. Implementations are stateless; the codec caches what they return."""

    @property
    def name(self) -> str:
        """The format's name in options (``avro``, ``protobuf``, ``json_schema``)."""
        ...

    @property
    def message_indexes(self) -> bool:
        """Whether a schema holds several messages, and a record names its own by message indexes after
        the schema id (Protobuf): the codec reads and writes them, and ``message`` options are allowed."""
        ...

    @property
    def text_is_json(self) -> bool:
        """Whether a schema's text is JSON (a user may pass it as written instead of a Spark type)."""
        ...

    def reader(self, files: Files, message: str | None) -> Reader:
        """The reader schema (the last of ``files``); ``message``: which one, where a schema has several."""
        ...

    def decoder(self, reader: Reader, writer: Files | None, indexes: list[int]) -> Decode:
        """Decoding of records written with ``writer`` (None: the reader's own schema), read as ``reader``.

        ``indexes``: the message indexes records carry (``message_indexes`` formats). Raises
        ``RecordUnreadableError`` or ``ReaderCannotReadError`` (see there); the returned function may raise
        ``ReaderCannotReadError`` too, when only decoding finds the schemas incompatible.
        """
        ...

    def encoder(self, writer: Files) -> tuple[Encode, list[int]]:
        """(the encoding of values with the writer schema, the message indexes to write before each)."""
        ...

    def derive(self, t: pa.DataType, name: str, namespace: str) -> str:
        """The schema text, as the registry takes it, for values of Arrow type ``t``."""
        ...
