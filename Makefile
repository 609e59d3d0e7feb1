# Two commands for a newcomer: `make demo` and `make test`. Both set everything up first.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.sparkafka-installed

.PHONY: demo test check lint unit integration kafka spark-kafka bench-vs-spark bench-read-path bench-memory bench-source bench-sink bench-latency bench-avro setup check-java clean

setup: $(STAMP) check-java kafka

# Apache Kafka's broker jars, pinned and checksummed (src/sparkafka/local/apache_kafka), from Maven Central
# into ~/.cache/sparkafka once; a second run downloads nothing. `make demo` and `make test` run on it.
kafka: $(STAMP) check-java
	@$(PY) -m sparkafka.local.kafka_dist

# Spark's own Kafka connector (format("kafka")), pinned and checksummed (src/sparkafka/local/spark_kafka): a
# test and benchmark dependency only, for the side-by-side tests and bench/vs_spark.py.
spark-kafka: $(STAMP) check-java
	@$(PY) -m sparkafka.local.spark_kafka_dist

$(PY):
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "error: Python 3.11+ is required (found " + sys.version.split()[0] + ")")'
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

check-java:
	@scripts/check_java.sh

demo: setup
	$(VENV)/bin/sparkafka demo

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/ruff format --check src tests bench
	$(VENV)/bin/mypy

test: setup spark-kafka lint
	$(PY) -m pytest tests --durations=12

# The inner loop: lint, unit tests, and the integration tests without the chaos and cluster suites.
check: setup spark-kafka lint
	$(PY) -m pytest tests/unit -q
	$(PY) -m pytest tests/integration -m "not chaos and not cluster"

unit: $(STAMP)
	$(PY) -m pytest tests/unit -q

integration: setup spark-kafka
	$(PY) -m pytest tests/integration

bench-source: setup
	$(PY) bench/source_throughput.py

bench-sink: setup
	$(PY) bench/sink_throughput.py

bench-latency: setup
	$(PY) bench/latency.py

bench-read-path: setup spark-kafka
	$(PY) bench/read_path.py --spark

bench-memory: setup
	$(PY) bench/worker_memory.py

bench-avro: setup
	$(PY) bench/avro_decode.py

# sparkafka side by side with Spark's own format("kafka") on Apache Kafka: source, latency, sink (ratios).
bench-vs-spark: setup spark-kafka
	$(PY) bench/vs_spark.py

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .mypy_cache .ruff_cache
