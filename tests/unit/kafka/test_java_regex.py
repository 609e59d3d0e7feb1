"""Java regex patterns rewritten for Python match the topics Java matches: each case's expected topics
were printed by ``java.util.regex.Pattern.compile(p).matcher(name).find()`` on the same names."""

from __future__ import annotations

import re

import pytest

from sparkafka.errors import ConfigError
from sparkafka.kafka.java_regex import JavaRegexError, java_regex
from sparkafka.source.options import Subscription, parse_source_options

TOPICS = ["orders", "orders-dlq", "old-orders", "Orders.v1", "orders.v1", "pay-7", "a_b", "x1x"]


@pytest.mark.parametrize(
    ("java", "matched"),
    [
        # Spark's findFirstIn: a search, not a full match.
        ("orders", ["orders", "orders-dlq", "old-orders", "orders.v1"]),
        ("^orders$", ["orders"]),
        (r"\Qorders.v1\E", ["orders.v1"]),
        (r"^\p{Upper}", ["Orders.v1"]),
        (r"^\p{Alpha}+-\p{Digit}$", ["pay-7"]),
        (r"^\p{IsAlphabetic}+$", ["orders"]),
        (r"^\P{Lower}", ["Orders.v1"]),
        (r"^[\p{Lower}_]+$", ["orders", "a_b"]),
        (r"^[^\p{Punct}]+$", ["orders", "x1x"]),
        (r"(?<w>x)1\k<w>", ["x1x"]),
        (r"^\x{6f}ld", ["old-orders"]),
        (r"dlq\z", ["orders-dlq"]),
        (r"^o[a-z]++s$", []),  # possessive: the same in both dialects (Java: no match either)
        (r"(?<=-)\d", ["pay-7"]),
    ],
)
def test_java_patterns_match_the_topics_java_matches(java: str, matched: list[str]) -> None:
    assert [t for t in TOPICS if Subscription(pattern=java).matches(t)] == matched
    assert [t for t in TOPICS if re.search(java_regex(java), t)] == matched


@pytest.mark.parametrize(
    ("java", "message"),
    [
        (r"[a-z&&[^e]]", "class intersection"),
        (r"[a-c[x-z]]", "union"),
        (r"\p{IsLatin}", r"\\p\{IsLatin\} is a Java class sparkafka does not translate"),
        (r"a\R", "any line break"),
        (r"\Gx", "end of the previous match"),
        (r"[\P{Alpha}x]", "inside a character class"),
    ],
)
def test_java_only_syntax_is_refused_by_name(java: str, message: str) -> None:
    with pytest.raises(JavaRegexError, match=message):
        java_regex(java)
    with pytest.raises(ConfigError, match=f"subscribePattern=.* uses Java regex syntax .*{message}"):
        parse_source_options({"kafka.bootstrap.servers": "h:1", "subscribePattern": java})


def test_the_pattern_is_trimmed_as_in_spark() -> None:
    options = parse_source_options({"kafka.bootstrap.servers": "h:1", "subscribePattern": " ^orders$ "})
    assert options.subscription.pattern == "^orders$"
    assert options.subscription.matches("orders")
