"""Random option maps: the parsers either accept them or raise ConfigError, never anything else."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import Phase, find, given, settings
from hypothesis import strategies as st

from sparkafka.errors import ConfigError
from sparkafka.options import names
from sparkafka.sink.options import SINK_OPTIONS, parse_sink_options
from sparkafka.source.options import SOURCE_OPTIONS, parse_source_options

KEYS = [
    *names(SOURCE_OPTIONS),
    *names(SINK_OPTIONS),
    "kafka.bootstrap.servers",
    "kafka.group.id",
    "kafka.auto.offset.reset",
    "kafka.isolation.level",
    "kafka.enable.auto.commit",
    "kafka.transaction.timeout.ms",
    "kafka.transactional.id",
    "bogus",
]
VALUES = st.one_of(
    st.sampled_from(
        [
            "",
            "0",
            "-1",
            "-2",
            "1",
            "30000",
            "true",
            "false",
            "earliest",
            "latest",
            "group",
            "exactly_once",
            "p",
            "t",
            "a,b",
            "[",
            "(",
            '{"t": {"0": 5}}',
            '{"t": [0, 1]}',
            '{"t": {"x": 1}}',
            '{"t": {"0": -3}}',
            '{"t": 5}',
            "null",
            "1e3",
            "127.0.0.1:9092",
        ]
    ),
    st.text(max_size=12),
    st.integers(-5, 10**6).map(str),
)


# Half the maps start valid, so the fuzzing reaches past the first checks.
BASES = st.sampled_from(
    [
        {},
        {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "t"},
        {"kafka.bootstrap.servers": "127.0.0.1:9092", "topic": "t"},
        {"kafka.bootstrap.servers": "127.0.0.1:9092", "assign": '{"t": [0]}', "kafka.group.id": "g"},
    ]
)
MAPS = st.builds(
    lambda base, extra: {**base, **extra}, BASES, st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=6)
)


def _accepts(parse: Callable[[dict[str, Any]], object], options: dict[str, Any]) -> bool:
    try:
        parse(options)
    except ConfigError:
        return False
    return True


PARSERS = {
    "source": lambda options: parse_source_options(options, batch=False),
    "sink": parse_sink_options,
}


@pytest.mark.parametrize("parser", list(PARSERS))
def test_the_maps_reach_both_answers(parser: str) -> None:
    """The maps below are accepted as well as refused: a parser that refused everything would pass the
    properties, so this finds a map of each kind (``find`` fails when none turns up)."""
    parse = PARSERS[parser]
    quick = settings(max_examples=2000, deadline=None, database=None, phases=[Phase.generate])  # no shrinking
    assert _accepts(parse, find(MAPS, lambda options: _accepts(parse, options), settings=quick))
    assert not _accepts(parse, find(MAPS, lambda options: not _accepts(parse, options), settings=quick))


@settings(max_examples=500, deadline=None)
@given(MAPS, st.booleans())
def test_source_parser_accepts_or_raises_config_error(options: dict[str, Any], batch: bool) -> None:
    with contextlib.suppress(ConfigError):  # anything else fails the test
        parse_source_options(options, batch=batch)


@settings(max_examples=500, deadline=None)
@given(MAPS)
def test_sink_parser_accepts_or_raises_config_error(options: dict[str, Any]) -> None:
    with contextlib.suppress(ConfigError):  # anything else fails the test
        parse_sink_options(options)


SECRET_KEYS = st.sampled_from(
    ["kafka.sasl.password", "kafka.ssl.key.password", "kafka.sasl.oauthbearer.client.secret", "kafka.x.token"]
)


@settings(max_examples=300, deadline=None)
@given(MAPS, SECRET_KEYS, st.booleans())
def test_no_error_message_shows_a_secret(options: dict[str, Any], secret_key: str, sink: bool) -> None:
    canary = "Canary-7f3a9c"
    options = {**options, secret_key: canary}
    message = ""
    try:
        if sink:
            parse_sink_options(options)
        else:
            parse_source_options(options, batch=False)
    except ConfigError as e:
        message = str(e)
    assert canary not in message
