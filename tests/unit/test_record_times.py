"""The record-time lookup consumer's settings (``client.record_times``), without a broker."""

from __future__ import annotations

from sparkafka.client.record_times import lookup_settings

CONF = {"bootstrap.servers": "127.0.0.1:9", "fetch.wait.max.ms": "5", "group.id": "the-users"}


def test_a_lookup_of_one_record_fetches_at_most_64_kib_a_partition_whatever_the_reads_use() -> None:
    """A first-record lookup needs one record batch a partition; ``kafka.max.partition.fetch.bytes`` (or its
    alias) set for the executors' reads, or librdkafka's 1 MiB default, would bring that much a partition."""
    for user in ({}, {"max.partition.fetch.bytes": "8388608"}, {"fetch.message.max.bytes": "8388608"}):
        settings = lookup_settings({**CONF, **user}, first_only=True)
        assert settings["max.partition.fetch.bytes"] == str(64 * 1024)
        assert "fetch.message.max.bytes" not in settings
        assert settings["group.id"] == "sparkafka-record-times"


def test_a_scan_for_the_bound_keeps_the_fetch_size_it_was_given() -> None:
    """A scan looks at up to 10,000 records: capped at 64 KiB it would take many round trips."""
    assert "max.partition.fetch.bytes" not in lookup_settings(CONF, first_only=False)
    given = {**CONF, "max.partition.fetch.bytes": "8388608"}
    assert lookup_settings(given, first_only=False)["max.partition.fetch.bytes"] == "8388608"
