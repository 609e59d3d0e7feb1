"""The docs' Python examples run, as written, against the test broker, registry and SparkSession.

Each page's blocks run in order in one namespace, as a reader would paste them; only addresses, topic names,
ports and paths are substituted (127.0.0.1:9092 is the test broker, a topic named orders... a fresh topic).
Its ``sparkafka topics`` commands run through the CLI first; other commands are parsed by
tests/unit/test_docs.py, and blocks that cannot run say why in the page (``<!-- not run: why -->``).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sparkafka.cli import main
from tests.support.docs import SHELLS, Block, all_blocks, shell_commands, sparkafka_argv
from tests.support.kafka import Kafka
from tests.support.wait import wait_until

RUNNABLE = [b for b in all_blocks() if b.lang == "python" and b.not_run is None and b.page != "README.md"]
PAGES = sorted({b.page for b in RUNNABLE})


class Page:
    """One page's run: its unique topic name, its substitutions, what its blocks printed."""

    def __init__(self, page: str, bootstrap: str, registry_url: str, tmp_path: Path) -> None:
        self.page = page
        self.orders = f"orders-{uuid.uuid4().hex[:8]}"
        self.bootstrap, self.registry_url, self.tmp_path = bootstrap, registry_url, tmp_path

    def topic(self, name: str) -> str:
        """The page's ``orders...`` topic name, made unique."""
        return re.sub(r"^orders", self.orders, name)

    def code(self, text: str) -> str:
        text = text.replace("127.0.0.1:9092", self.bootstrap).replace(
            "http://127.0.0.1:8081", self.registry_url
        )
        text = re.sub(
            r'"/(?:tmp|data)/[^"]*"', lambda m: json.dumps(str(self.tmp_path / m.group(0)[2:-1])), text
        )
        text = text.replace("port=9464", "port=0")
        return re.sub(r'"(orders(?:-[^"]*)?)"', lambda m: f'"{self.topic(m.group(1))}"', text)

    def run_topic_commands(self, blocks: list[Block]) -> None:
        """The page's ``sparkafka topics`` commands, through the CLI."""
        for block in blocks:
            if block.lang not in SHELLS or block.not_run or block.run_by:
                continue
            for command in shell_commands(block.code):
                argv = sparkafka_argv(command)
                if argv and argv[0] == "topics":
                    argv = [self.topic(a).replace("127.0.0.1:9092", self.bootstrap) for a in argv]
                    assert main(argv) == 0, f"{block.where}: sparkafka {' '.join(argv)}"


def _getting_started(page: Page, kafka: Kafka, namespace: dict[str, Any]) -> Callable[[list[str]], None]:
    def check(printed: list[str]) -> None:
        assert printed == ["10", "10"]  # ten orders written and read, then copied exactly once
        assert len(kafka.read_committed(page.topic("orders-upper"))) == 10

    return check


def _reading(page: Page, kafka: Kafka, namespace: dict[str, Any]) -> Callable[[list[str]], None]:
    kafka.create_topics([page.orders, page.topic("orders-a")], 2)
    kafka.produce(page.topic("orders-a"), ["1", "2", "3"], partitions=2)

    def check(printed: list[str]) -> None:
        assert namespace["backfill"].count() == 3  # subscribePattern orders-.* found orders-a
        assert namespace["stream"].isStreaming

    return check


def _writing(page: Page, kafka: Kafka, namespace: dict[str, Any]) -> Callable[[list[str]], None]:
    kafka.create_topics([page.orders, page.topic("orders-enriched")], 2)
    kafka.produce(page.orders, [json.dumps({"n": i}) for i in range(5)], partitions=2)
    spark = namespace["spark"]
    namespace["df"] = (
        spark.readStream.format("sparkafka")
        .option("kafka.bootstrap.servers", page.bootstrap)
        .option("subscribe", page.orders)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("CAST(key AS STRING) AS customer", "CAST(value AS STRING) AS order_json")
    )

    def check(printed: list[str]) -> None:
        enriched = page.topic("orders-enriched")
        wait_until(lambda: len(kafka.read_committed(enriched)) == 5, 120, "the five records, exactly once")

    return check


def _schema_registry(page: Page, kafka: Kafka, namespace: dict[str, Any]) -> Callable[[list[str]], None]:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    kafka.create_topics([page.orders], 1)
    schema = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "string"}]}
    AvroSerializer(SchemaRegistryClient({"url": page.registry_url}), json.dumps(schema))(
        {"id": "a"}, SerializationContext(page.orders, MessageField.VALUE)
    )  # registers <orders>-value, which the example reads with

    def check(printed: list[str]) -> None:
        assert namespace["orders"].columns == ["id"]  # the reader schema's fields became columns
        assert namespace["out"].schema.simpleString() == "struct<value:binary>"

    return check


def _development(page: Page, kafka: Kafka, namespace: dict[str, Any]) -> Callable[[list[str]], None]:
    def check(printed: list[str]) -> None:
        assert printed[-1].startswith("127.0.0.1:")  # the local broker printed its address

    return check


SETUP: dict[str, Callable[[Page, Kafka, dict[str, Any]], Callable[[list[str]], None]]] = {
    "docs/getting-started.md": _getting_started,
    "docs/reading.md": _reading,
    "docs/writing.md": _writing,
    "docs/schema-registry.md": _schema_registry,
    "docs/development.md": _development,
}
"""Per page: the topics and data its examples read, and what must hold after they ran."""


def test_the_pages_with_examples_are_the_ones_set_up() -> None:
    assert set(SETUP) <= set(PAGES)
    assert set(PAGES) - set(SETUP) <= {"docs/operations.md"}  # pages that need nothing set up


@pytest.mark.parametrize("page", PAGES)
def test_a_pages_python_examples_run(
    page: str,
    spark: Any,
    kafka: Kafka,
    bootstrap: str,
    registry_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    run = Page(page, bootstrap, registry_url, tmp_path)
    page_blocks = [b for b in all_blocks() if b.page == page]
    run.run_topic_commands(page_blocks)
    namespace: dict[str, Any] = {"spark": spark}
    check = SETUP.get(page, lambda *_: lambda _printed: None)(run, kafka, namespace)
    capsys.readouterr()
    try:
        for block in [b for b in page_blocks if b in RUNNABLE]:
            exec(compile(run.code(block.code), block.where, "exec"), namespace)  # the page's own code
        check(capsys.readouterr().out.splitlines())
    finally:
        for query in spark.streams.active:
            query.stop()
