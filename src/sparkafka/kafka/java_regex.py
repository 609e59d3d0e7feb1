r"""Java regular expressions (``java.util.regex.Pattern``) as Python ``re`` patterns, for topic names.

Spark's ``subscribePattern`` and Kafka's Java clients take a Java regex; Python's ``re`` shares most of its
syntax but not all. ``java_regex`` rewrites what ``re`` spells differently and refuses what it cannot
express, so a pattern copied from a Spark job matches the topics it matched there (runs on the driver,
once, when the source's options are parsed).

Topic names are ASCII (Kafka allows ``[a-zA-Z0-9._-]``), so a Unicode class such as ``\p{L}`` is exactly
its ASCII part when it matches a topic name. Rewritten:

- ``\Q...\E`` (a quoted literal), ``\x{h...h}``, ``\e`` (escape), ``\z`` (end of input);
- ``\p{...}`` / ``\P{...}``: the POSIX classes (``\p{Alpha}``, ``\p{Digit}``, ...), the Unicode
  categories letters/digits (``\p{L}``, ``\p{Lu}``, ``\p{IsAlphabetic}``, ...) and ``java*`` case classes;
- ``(?<name>...)`` and ``\k<name>`` (named groups).

Refused (``JavaRegexError``): character-class union and intersection (``[a-c[x]]``,
``[a-z&&[^e]]``), ``\G``, ``\R``, ``\X``, ``\h``/``\H``, ``\v``/``\V`` (Java's vertical whitespace)
and other ``\p{...}`` names. Possessive quantifiers and atomic groups are the same in both (Python
3.11 and later).

Example: ``java_regex(r"\p{Lower}+-\Q.v1\E")`` is ``[a-z]+-\.v1``.
"""

from __future__ import annotations

import re

__all__ = ["JavaRegexError", "java_regex"]

_LOWER, _UPPER, _DIGIT = "a-z", "A-Z", "0-9"
_CLASSES = {
    "Lower": _LOWER,
    "Upper": _UPPER,
    "ASCII": "\\x00-\\x7f",
    "Alpha": _LOWER + _UPPER,
    "Digit": _DIGIT,
    "Alnum": _LOWER + _UPPER + _DIGIT,
    "Punct": "!-/:-@\\[-`{-~",
    "Graph": "!-~",
    "Print": " -~",
    "Blank": " \\t",
    "Cntrl": "\\x00-\\x1f\\x7f",
    "XDigit": "0-9a-fA-F",
    "Space": " \\t\\n\\x0b\\f\\r",
    "L": _LOWER + _UPPER,
    "Lu": _UPPER,
    "Ll": _LOWER,
    "N": _DIGIT,
    "Nd": _DIGIT,
    "Alphabetic": _LOWER + _UPPER,
    "Letter": _LOWER + _UPPER,
    "Uppercase": _UPPER,
    "Lowercase": _LOWER,
    "javaLowerCase": _LOWER,
    "javaUpperCase": _UPPER,
    "javaDigit": _DIGIT,
    "javaLetter": _LOWER + _UPPER,
    "javaLetterOrDigit": _LOWER + _UPPER + _DIGIT,
    "javaAlphabetic": _LOWER + _UPPER,
}
"""``\\p{name}``'s members among topic-name characters (ASCII), as ranges for a ``[...]`` class."""

_REFUSED = {
    "G": "\\G (end of the previous match)",
    "R": "\\R (any line break)",
    "X": "\\X (a grapheme cluster)",
    "h": "\\h (horizontal whitespace)",
    "H": "\\H",
    "v": "\\v (Java's vertical whitespace)",
    "V": "\\V",
}


class JavaRegexError(ValueError):
    """A Java regex that Python's ``re`` cannot express; the message names the construct."""


def _property(pattern: str, i: int) -> tuple[str, bool, int]:
    r"""``\p{name}`` / ``\pL`` at ``pattern[i]`` (the backslash): (ranges, negated, index after it)."""
    negated = pattern[i + 1] == "P"
    if pattern[i + 2 : i + 3] == "{":
        end = pattern.find("}", i + 3)
        if end < 0:
            raise JavaRegexError(f"\\{pattern[i + 1]}{{ at {i} is not closed")
        name, after = pattern[i + 3 : end], end + 1
    else:
        name, after = pattern[i + 2 : i + 3], i + 3
    bare = name[2:] if name.startswith(("Is", "In")) and name[2:] in _CLASSES else name
    if bare not in _CLASSES:
        raise JavaRegexError(
            f"\\{pattern[i + 1]}{{{name}}} is a Java class sparkafka does not translate (known: "
            f"{', '.join(sorted(_CLASSES))})"
        )
    return _CLASSES[bare], negated, after


def _escape(pattern: str, i: int, in_class: bool) -> tuple[str, int]:
    """The escape at ``pattern[i]`` (a backslash) in Python's dialect, and the index after it."""
    e = pattern[i + 1]
    if e == "Q":
        end = pattern.find("\\E", i + 2)
        literal = pattern[i + 2 :] if end < 0 else pattern[i + 2 : end]
        quoted = "".join("\\" + ch for ch in literal) if in_class else re.escape(literal)
        return quoted, len(pattern) if end < 0 else end + 2
    if e in "pP":
        ranges, negated, after = _property(pattern, i)
        if in_class and negated:
            raise JavaRegexError(f"\\P{{...}} inside a character class at {i} has no Python form")
        return (ranges if in_class else f"[{'^' if negated else ''}{ranges}]"), after
    if e in "xk" and pattern[i + 2 : i + 3] == ("{" if e == "x" else "<"):
        end = pattern.find("}" if e == "x" else ">", i + 3)
        if end < 0:
            raise JavaRegexError(f"\\{e}{pattern[i + 2]} at {i} is not closed")
        inner = pattern[i + 3 : end]
        return (f"\\U{int(inner, 16):08x}" if e == "x" else f"(?P={inner})"), end + 1
    if e in _REFUSED:
        raise JavaRegexError(f"{_REFUSED[e]} at {i} has no Python form")
    return {"e": "\\x1b", "z": "\\Z"}.get(e, pattern[i : i + 2]), i + 2


def java_regex(pattern: str) -> str:
    """``pattern`` (Java's dialect) rewritten for Python's ``re``; raise JavaRegexError for what ``re``
    cannot express. The result is not compiled here (the caller does, and reports ``re.error``)."""
    out: list[str] = []
    i, n = 0, len(pattern)
    in_class = False
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            text, i = _escape(pattern, i, in_class)
            out.append(text)
        elif in_class:
            if c == "[":
                raise JavaRegexError(
                    f"a character class inside another (Java's union) at {i} has no Python form"
                )
            if pattern.startswith("&&", i):
                raise JavaRegexError(f"&& (Java's class intersection) at {i} has no Python form")
            in_class = not (c == "]" and out[-1] not in ("[", "[^"))
            out.append(c)
            i += 1
        elif c == "[":
            opening = "[^" if pattern.startswith("[^", i) else "["
            out.append(opening)
            in_class = True
            i += len(opening)
        elif pattern.startswith("(?<", i) and pattern[i + 3 : i + 4] not in ("=", "!"):
            out.append("(?P<")
            i += 3
        else:
            out.append(c)
            i += 1
    return "".join(out)
