"""Helpers to parse Spark's string options once, with errors that name the option and what is allowed.

Spark hands options to Python data sources as a case-insensitive map whose keys arrive lower-cased, so
every lookup here is by lower-cased name, and errors use the documented (camelCase) spelling.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from sparkafka.client.conf import check_librdkafka_settings, close_librdkafka_property
from sparkafka.client.java_settings import Client, from_java_names
from sparkafka.errors import ConfigError

__all__ = ["DEFAULT_METADATA_TIMEOUT_MS", "Option", "OptionReader", "choose", "names"]

KAFKA_PREFIX = "kafka."
DEFAULT_METADATA_TIMEOUT_MS = 30_000
"""``metadataTimeoutMs`` of the source and the sink: the bound on each metadata or intent request."""

L = TypeVar("L", bound=str)
"""A ``Literal`` of allowed values: pass ``get_args(TheLiteral)`` typed ``tuple[TheLiteral, ...]``."""


@dataclass(frozen=True)
class Option:
    """One option of the source or the sink (or a field of a pipeline file), as users read it.

    The docs' option and pipeline references and their migration table are generated from these
    declarations when the site is built, and tests check each declared ``default`` and ``allowed`` value
    against the parser, so the docs cannot drift from the code.
    """

    name: str
    """The documented (camelCase) spelling; options are matched without regard to case."""
    description: str
    """What the option does, in a sentence or two of Markdown."""
    default: str | None = None
    """The value that means the same as leaving the option out (a test parses both); None: none such."""
    default_note: str | None = None
    """The default in words, where it depends on other options (``default`` is None then)."""
    allowed: tuple[str, ...] = ()
    """The values allowed, when they are a fixed list (the parser's own tuple)."""
    alias_of: str | None = None
    """The option this one is another name for (Spark's name for one of ours, or ours for Spark's)."""
    spark: str | None = None
    """Spark's ``format("kafka")`` has this option: "" when sparkafka gives it Spark's meaning, else what
    differs and why. None: sparkafka's own option."""
    kind: str = "string"
    """The value's type as written (a pipeline file's fields are TOML: ``integer``, ``table``, ...)."""


def _spelling(value: str) -> str:
    return value.strip().lower().replace("-", "_")


def choose(option: str, value: str, allowed: tuple[L, ...], hints: Mapping[str, L] | None = None) -> L:
    """The one of ``allowed`` that ``value`` of ``option`` names (``OptionReader.choice``: every option of
    the source and the sink that takes fixed values; runs where the options are parsed).

    Accepted on purpose: a value as the docs spell it, in any case, with ``-`` for ``_``. So for
    ``deliveryGuarantee`` sparkafka's ``exactly_once``, Flink's ``exactly-once`` (a value of its
    ``sink.delivery-guarantee``) and the name of Flink's enum constant ``EXACTLY_ONCE`` are one value.
    Anything else is refused with the values allowed and, when one is close (``exactly_one``) or ``hints``
    maps it to one (``at_most_once`` to ``none``), a "did you mean".

    Raises:
        ConfigError: ``value`` names none of ``allowed``.
    """
    spelled = {_spelling(a): a for a in allowed}
    found = spelled.get(_spelling(value))
    if found is not None:
        return found
    hint = {_spelling(k): v for k, v in (hints or {}).items()}.get(_spelling(value))
    if hint is None:
        close = difflib.get_close_matches(_spelling(value), list(spelled), n=1, cutoff=0.6)
        hint = spelled[close[0]] if close else None
    message = (
        f"option {option}={value!r} is not allowed; use one of: {', '.join(allowed)} (in any case, with - "
        "or _)"
    )
    if hint is not None:
        message += f"; did you mean {hint!r}?"
    raise ConfigError(message)


def names(options: Iterable[Option]) -> tuple[str, ...]:
    """The names of ``options``, for ``OptionReader``'s ``known``."""
    return tuple(o.name for o in options)


class OptionReader:
    """Typed, case-insensitive access to one option map; tracks which keys were used to reject the rest.

    Args:
        options: the raw option map.
        known: the documented option names (camelCase); ``kafka.*`` keys are accepted when librdkafka knows
            the property (``check_librdkafka_settings``; their values are the parsers' to check, last).
        what: how errors name the thing being configured, e.g. "sparkafka source".
        instead: options sparkafka does not have (such as Spark's Kafka source's), each with the sentence
            that names what to use instead.
        client: which client the ``kafka.*`` settings are for (``client.conf.from_java_names``).
    """

    def __init__(
        self,
        options: Mapping[str, Any],
        known: Iterable[str],
        what: str,
        instead: Mapping[str, str] | None = None,
        client: Client | None = None,
    ) -> None:
        """Check the keys now: an ``instead`` key or an unknown one raises ConfigError naming it.

        An unknown key gets a "did you mean" (a close option name, or ``kafka.<name>`` when it is a Kafka
        client setting without its prefix); only when some key has none is the list of valid options added.
        """
        self._raw = {str(k).lower(): ("" if v is None else str(v)) for k, v in options.items()}
        spelled = {str(k).lower(): str(k) for k in options}  # as given (Spark lower-cases its keys)
        self._known = {k.lower(): k for k in known}
        self._what = what
        self._client = client
        for key, why in (instead or {}).items():
            if key.lower() in self._raw:
                raise ConfigError(f"option {spelled[key.lower()]} is not a sparkafka option: {why}")
        unknown = sorted(k for k in self._raw if k not in self._known and not k.startswith(KAFKA_PREFIX))
        if unknown:
            hints = {k: self._did_you_mean(k) for k in unknown}
            named = ", ".join(spelled[k] + (f" (did you mean {h}?)" if h else "") for k, h in hints.items())
            message = f"unknown option(s) for the {what}: {named}"
            if not all(hints.values()):
                valid = ", ".join(sorted(self._known.values()))
                message += f". Valid options: {valid}, and kafka.* for Kafka client settings"
            raise ConfigError(message)
        check_librdkafka_settings(self.kafka(), self._known.values(), values=False)

    def _did_you_mean(self, key: str) -> str | None:
        """A close option name; else ``kafka.<name>`` when ``key`` is (close to) a librdkafka property."""
        close = difflib.get_close_matches(key, list(self._known), n=1, cutoff=0.75)
        if close:
            return self._known[close[0]]
        kafka = close_librdkafka_property(key)
        return f"{KAFKA_PREFIX}{kafka}" if kafka else None

    def name(self, key: str) -> str:
        """The documented spelling of ``key``."""
        return self._known.get(key.lower(), key)

    def has(self, key: str) -> bool:
        """Whether ``key`` was given a value that is not blank."""
        return key.lower() in self._raw and self._raw[key.lower()].strip() != ""

    def get_str(self, key: str, default: str | None = None) -> str | None:
        """The value of ``key``, stripped; ``default`` when it is missing or blank."""
        value = self._raw.get(key.lower())
        if value is None or value.strip() == "":
            return default
        return value.strip()

    def required(self, key: str) -> str:
        """The value of ``key``, stripped; missing or blank raises ConfigError naming the option."""
        value = self.get_str(key)
        if value is None:
            raise ConfigError(f"option {self.name(key)} is required for the {self._what}")
        return value

    def choice(self, key: str, allowed: tuple[L, ...], default: L, hints: Mapping[str, L] | None = None) -> L:
        """One of ``allowed``, typed as the Literal they come from, spelled as ``choose`` takes it."""
        text = self.get_str(key)
        return default if text is None else choose(self.name(key), text, allowed, hints)

    def get_int(self, key: str, default: int, minimum: int | None = None) -> int:
        """The whole number ``key`` holds, at least ``minimum``; ``default`` (unchecked) when not given."""
        text = self.get_str(key)
        if text is None:
            return default
        try:
            value = int(text)
        except ValueError:
            raise ConfigError(f"option {self.name(key)}={text!r} must be a whole number") from None
        if minimum is not None and value < minimum:
            raise ConfigError(f"option {self.name(key)}={value} must be >= {minimum}")
        return value

    def optional_int(self, key: str, minimum: int | None = None) -> int | None:
        """The whole number ``key`` holds, at least ``minimum``; None when not given."""
        return self.get_int(key, 0, minimum) if self.has(key) else None

    def get_bool(self, key: str, default: bool) -> bool:
        """``key`` as a boolean (true/false, 1/0, yes/no, any case); ``default`` when not given."""
        text = self.get_str(key)
        if text is None:
            return default
        lowered = text.lower()
        if lowered in ("true", "1", "yes"):
            return True
        if lowered in ("false", "0", "no"):
            return False
        raise ConfigError(f"option {self.name(key)}={text!r} must be true or false")

    def get_json(self, key: str) -> Any:
        """The parsed JSON value of required option ``key``; invalid JSON raises ConfigError."""
        text = self.required(key)
        try:
            return json.loads(text)
        except json.JSONDecodeError as e:
            raise ConfigError(
                f"option {self.name(key)} is not valid JSON ({e.msg} at char {e.pos})"
            ) from None

    def kafka(self) -> dict[str, str]:
        """Every ``kafka.*`` option with the prefix removed, for the Kafka clients."""
        # Java client settings with a librdkafka equivalent (fetch.max.wait.ms) are translated, so a
        # format("kafka") job's settings keep their meaning; the others are refused together.
        return from_java_names(
            {k[len(KAFKA_PREFIX) :]: v for k, v in self._raw.items() if k.startswith(KAFKA_PREFIX)},
            self._client,
        )
