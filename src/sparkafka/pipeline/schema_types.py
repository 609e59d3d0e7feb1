"""The type names in a DDL schema (``source.schema``), checked before Spark parses it.

Spark's own parser names the wrong word for a misspelt type, and only once Spark has started; this finds
the type names and says which one Spark lacks, with the Spark name a close or foreign one means.
"""

from __future__ import annotations

import difflib
import re

__all__ = ["SPARK_TYPES", "unknown_type"]

SPARK_TYPES = frozenset(
    {
        "BOOLEAN", "BYTE", "TINYINT", "SHORT", "SMALLINT", "INT", "INTEGER", "LONG", "BIGINT", "FLOAT",
        "REAL", "DOUBLE", "DECIMAL", "DEC", "NUMERIC", "STRING", "CHAR", "CHARACTER", "VARCHAR", "BINARY",
        "DATE", "TIMESTAMP", "TIMESTAMP_LTZ", "TIMESTAMP_NTZ", "TIME", "INTERVAL", "VOID", "VARIANT",
        "GEOGRAPHY", "GEOMETRY", "ARRAY", "MAP", "STRUCT",
    }
)  # fmt: skip
"""The type names of Spark 4.3's DDL (each checked against ``DataType.fromDDL``; aliases included)."""

_OTHER_DIALECTS = {
    "TEXT": "STRING",
    "VARCHAR2": "STRING",
    "JSON": "STRING",
    "UUID": "STRING",
    "BOOL": "BOOLEAN",
    "INT32": "INT",
    "INT64": "BIGINT",
    "FLOAT64": "DOUBLE",
    "NUMBER": "DECIMAL",
    "DATETIME": "TIMESTAMP",
    "BYTES": "BINARY",
    "BLOB": "BINARY",
    "LIST": "ARRAY",
    "OBJECT": "STRUCT",
    "RECORD": "STRUCT",
}
"""Type names of other SQL dialects and schema languages, with Spark's name for them."""

_DDL_TOKEN = re.compile(
    r"\s*(`(?:[^`]|``)*`"  # a `quoted name`
    r"|'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\""  # a string (COMMENT '...')
    r"|[A-Za-z_][A-Za-z0-9_]*|\d+|.)"  # a word, a number, one character of punctuation
)


class _UnknownTypeError(Exception):
    """A type name Spark's DDL does not have, at a field (dotted for nested struct fields)."""

    def __init__(self, name: str, field: str) -> None:
        super().__init__(name)
        self.name, self.field = name, field


def unknown_type(schema: str) -> str | None:
    """What is wrong when a DDL schema uses a type Spark lacks (``field temp: unknown type DUBBLE; did you
    mean DOUBLE?``), else None. Runs in the driver while a pipeline file is read, before Spark starts.

    Spark's own parser answers ``temp DUBBLE`` with "Syntax error at or near 'STRING'" (measured: the
    word it names is not the wrong one), and only once Spark has started. This reads the DDL's shape
    (``name TYPE, ...`` with ``ARRAY<>``, ``MAP<,>``, ``STRUCT<name: TYPE, ...>``, parameters and modifiers
    such as ``NOT NULL`` or ``COMMENT '...'``) just far enough to find each type name; anything it does not
    follow is left to Spark, which reports it when the query is planned.
    """
    tokens = [t for t in _DDL_TOKEN.findall(schema) if t.strip()]
    try:
        _columns(tokens)
    except _UnknownTypeError as e:
        upper = e.name.upper()
        close = difflib.get_close_matches(upper, sorted(SPARK_TYPES), n=1, cutoff=0.6)
        spark_name = _OTHER_DIALECTS.get(upper) or (close[0] if close else None)
        hint = (
            f"; did you mean {spark_name}?"
            if spark_name
            else " (Spark's types include STRING, INT, BIGINT, DOUBLE, DECIMAL(p, s), BOOLEAN, TIMESTAMP, "
            "DATE, BINARY, ARRAY<t>, MAP<k, v>, STRUCT<name: t, ...>)"
        )
        return f"field {e.field}: unknown type {e.name}{hint}"
    except (IndexError, ValueError):
        return None  # a shape this reader does not follow: Spark's parser reports it
    return None


def _name(token: str) -> str:
    return token[1:-1].replace("``", "`") if token.startswith("`") else token


def _columns(tokens: list[str]) -> None:
    """Walk ``name TYPE [modifiers], ...``; raise _UnknownTypeError, or ValueError for an unusual shape."""
    i = 0
    while i < len(tokens):
        field = _name(tokens[i])
        i += 1
        if tokens[i] == ":":
            i += 1
        i = _skip_modifiers(tokens, _type(tokens, i, field), closers=(",",))
        if i < len(tokens):
            i += 1  # the comma


def _type(tokens: list[str], i: int, field: str) -> int:
    """Check the type starting at ``tokens[i]``; return the index after it (before any modifiers)."""
    word = tokens[i]
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", word):
        raise ValueError(word)
    upper = word.upper()
    if upper not in SPARK_TYPES:
        raise _UnknownTypeError(word, field)
    i += 1
    if upper in ("ARRAY", "MAP", "STRUCT"):
        if tokens[i] != "<":
            raise ValueError(tokens[i])
        i += 1
        if upper == "STRUCT":
            return _struct_fields(tokens, i, field)
        i = _type(tokens, i, field)
        if upper == "MAP":
            if tokens[i] != ",":
                raise ValueError(tokens[i])
            i = _type(tokens, i + 1, field)
        if tokens[i] != ">":
            raise ValueError(tokens[i])
        return i + 1
    if i < len(tokens) and tokens[i] == "(":  # DECIMAL(10, 2), VARCHAR(3), GEOGRAPHY(4326)
        i = tokens.index(")", i) + 1
    return i


def _struct_fields(tokens: list[str], i: int, parent: str) -> int:
    """Check ``name[:] TYPE [modifiers], ... >``; return the index after the closing ``>``."""
    while tokens[i] != ">":
        field = f"{parent}.{_name(tokens[i])}"
        i += 1
        if tokens[i] == ":":
            i += 1
        i = _skip_modifiers(tokens, _type(tokens, i, field), closers=(",", ">"))
        if tokens[i] == ",":
            i += 1
    return i + 1


def _skip_modifiers(tokens: list[str], i: int, closers: tuple[str, ...]) -> int:
    """Skip ``NOT NULL``, ``COMMENT '...'``, ``COLLATE x``, ``WITHOUT TIME ZONE``, ``DAY TO SECOND``..."""
    while i < len(tokens) and tokens[i] not in closers:
        if tokens[i] in ("<", ">", "(", ")"):
            raise ValueError(tokens[i])
        i += 1
    return i
