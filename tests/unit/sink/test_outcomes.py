"""The decision table of ``sparkafka.sink.outcomes.judge``: what a transaction's markers prove."""

from __future__ import annotations

import pytest

from sparkafka.client.raw_log import Marker
from sparkafka.sink.outcomes import judge
from sparkafka.sink.txn_control import MarkerProbe, TxnHandle

HANDLE = TxnHandle("p-0", 1001, 4, 10, 0, MarkerProbe("out", 2, 500))


@pytest.mark.parametrize(
    ("marker", "gone", "outcome", "why"),
    [
        (Marker(503, True, 4), None, "committed", "out-2 holds its COMMIT marker at offset 503"),
        (Marker(503, False, 5), None, "aborted", "is an ABORT of epoch 5 at offset 503"),
        # A later transaction's COMMIT (epoch 6): this one had ended before the intent, never committed.
        (Marker(900, True, 6), None, "aborted", "is a COMMIT of epoch 6 at offset 900"),
        (None, None, "aborted", "out-2 has no marker of producer id 1001 from offset 500"),
        (None, "out-2 no longer holds offset 500", None, "out-2 no longer holds offset 500"),
        # Transaction version 1 never commits at the fenced epoch: a COMMIT at epoch + 1 means the broker
        # ran the transaction as version 2 (epoch bumped at its end), which this rule cannot read.
        (Marker(503, True, 5), None, None, "a COMMIT of epoch 5, one above its own"),
    ],
)
def test_what_the_first_marker_from_the_probe_proves(
    marker: Marker | None, gone: str | None, outcome: str | None, why: str
) -> None:
    finding = judge(HANDLE, marker, gone=gone)
    assert finding.outcome == outcome
    assert why in finding.why


def test_handles_carry_their_probe_through_the_intent_log_and_compare_by_transaction() -> None:
    raw = HANDLE.to_json()
    assert raw["probe"] == ["out", 2, 500]
    assert TxnHandle.from_json(raw) == HANDLE
    assert TxnHandle.from_json(raw).probe == HANDLE.probe
    old = {k: v for k, v in raw.items() if k != "probe"}  # written by a version without probes
    assert TxnHandle.from_json(old).probe is None
    # The same transaction before and after the driver set its probe's offset.
    assert HANDLE.with_probe_offset(700) == HANDLE
    assert HANDLE.with_probe_offset(700).probe == MarkerProbe("out", 2, 700)
