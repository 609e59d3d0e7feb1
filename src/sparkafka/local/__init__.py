"""Local development helpers: Apache Kafka and tansu launchers, the demo, process groups, local Spark.

The names below are imported on first use, so ``python -m sparkafka.local.kafka_dist`` (what ``make``
runs) does not import its own module through this package first.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sparkafka.local.broker import EmbeddedBroker, find_tansu_binary, free_port
    from sparkafka.local.kafka_broker import ApacheKafka

__all__ = ["ApacheKafka", "EmbeddedBroker", "find_tansu_binary", "free_port"]

_HOMES = {
    "ApacheKafka": "sparkafka.local.kafka_broker",
    "EmbeddedBroker": "sparkafka.local.broker",
    "find_tansu_binary": "sparkafka.local.broker",
    "free_port": "sparkafka.local.broker",
}


def __getattr__(name: str) -> Any:
    """``from sparkafka.local import ApacheKafka``: the name from its module, imported now."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
