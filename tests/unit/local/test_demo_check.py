"""The demo's verification must fail loudly when the output is wrong (a test for the check itself)."""

from __future__ import annotations

import json

import pytest

from sparkafka.local.demo import FLUSH_CUSTOMER, Order, expected_windows, make_orders, verify_windows


def rows(expected: dict[tuple[str, str], tuple[int, float]]) -> list[bytes | None]:
    return [
        json.dumps({"customer": c, "minute": m, "orders": n, "revenue_eur": round(r, 2)}).encode()
        for (c, m), (n, r) in expected.items()
    ]


def test_correct_output_passes_and_flush_window_is_ignored() -> None:
    orders = make_orders(400, 3, seed=3)
    expected = expected_windows(orders)
    assert sum(n for n, _ in expected.values()) == sum(not o.malformed for o in orders)
    flush = json.dumps({"customer": FLUSH_CUSTOMER, "minute": "x", "orders": 1, "revenue_eur": 1.0}).encode()
    assert verify_windows(expected, [*rows(expected), flush]) == []


def test_corrupted_output_is_reported() -> None:
    expected = expected_windows(make_orders(400, 3, seed=3))
    good = rows(expected)
    assert any("written twice" in p for p in verify_windows(expected, [*good, good[0]]))
    assert any("missing" in p for p in verify_windows(expected, good[1:]))
    wrong = json.loads(good[0] or b"")
    wrong["orders"] += 1
    problems = verify_windows(expected, [json.dumps(wrong).encode(), *good[1:]])
    assert any("expected" in p for p in problems)
    assert any("unreadable" in p for p in verify_windows(expected, [*good, b"{oops"]))


def test_malformed_orders_are_not_json() -> None:
    bad = Order(1, "c", 1.0, "EUR", 0, malformed=True)
    with pytest.raises(json.JSONDecodeError):
        json.loads(bad.value())
