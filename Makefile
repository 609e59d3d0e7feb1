# Two commands for a newcomer: `make demo` and `make test`. Both set everything up first.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.sparkafka-installed

.PHONY: demo test check lint docs docs-serve unit integration kafka spark-kafka native dist bench-vs-spark bench-event-time bench-read-path bench-read-path-tls bench-memory bench-source bench-sink bench-latency bench-avro setup check-java clean

setup: $(STAMP) check-java kafka native

# Apache Kafka's broker jars, pinned and checksummed (src/sparkafka/local/apache_kafka), from Maven Central
# into ~/.cache/sparkafka once; a second run downloads nothing. `make demo` and `make test` run on it.
kafka: $(STAMP) check-java
	@$(PY) -m sparkafka.local.kafka_dist

# Spark's own Kafka connector (format("kafka")), pinned and checksummed (src/sparkafka/local/spark_kafka): a
# test and benchmark dependency only, for the side-by-side tests and bench/vs_spark.py.
spark-kafka: $(STAMP) check-java
	@$(PY) -m sparkafka.local.spark_kafka_dist

# sparkafka's native fetch (native/: Rust over librdkafka built from source, locked in native/Cargo.lock), into
# the venv; cargo's build cache is ~/.cache/sparkafka/native-target, so a second clone builds in seconds.
# Without it sparkafka reads through confluent-kafka (option fetcher=auto). TLS and SASL come from the system's
# OpenSSL 3 (libssl-dev, checked by scripts/check_rust.sh), linked dynamically so that the system's security
# updates reach it: hence a wheel tagged linux_x86_64, for this machine's venv, not manylinux.
NATIVE_STAMP := $(VENV)/.sparkafka-native
NATIVE_TARGET := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/sparkafka/native-target
NATIVE_WHEELS := $(VENV)/native-wheels
native: $(NATIVE_STAMP)

$(NATIVE_STAMP): $(STAMP) $(wildcard native/Cargo.* native/pyproject.toml native/README.md native/*.pyi native/src/*.rs)
	@scripts/check_rust.sh
	rm -rf $(NATIVE_WHEELS)
	CARGO_TARGET_DIR=$(NATIVE_TARGET) $(VENV)/bin/maturin build --quiet --release --locked \
		--compatibility linux -i $(PY) -m native/Cargo.toml -o $(NATIVE_WHEELS)
	$(PY) -m pip install --quiet --force-reinstall --no-deps $(NATIVE_WHEELS)/sparkafka_native-*.whl
	touch $@

# The two wheels a user installs (README: Install) and the sdist, in dist/, checked by twine: sparkafka (pure
# Python, with pyspark_sparkafka so format("sparkafka") needs no register) and sparkafka-native (above).
dist: $(STAMP) native
	rm -rf dist build
	$(PY) -m build --no-isolation --sdist --wheel --outdir dist .
	cp $(NATIVE_WHEELS)/sparkafka_native-*.whl dist/
	$(VENV)/bin/twine check --strict dist/*
	@ls -1 dist

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

lint: $(STAMP) native
	$(VENV)/bin/ruff check src tests bench scripts
	$(VENV)/bin/ruff format --check src tests bench scripts
	$(VENV)/bin/mypy

# Tests run in TEST_WORKERS processes (pytest-xdist), each with its own broker and SparkSession: most of a
# test's time is waiting (a driver JVM starting, a transaction timing out, a leader election), which the
# other process fills. Two on the 2 cores CI has, so that a machine busy with other work still keeps up.
# A worker that dies ends the run (--max-worker-restart=0) with the test it died in named: pytest-xdist 3.8's
# loadgroup scheduler hands a replacement worker the dead one's finished groups as empty work and then waits
# for them for good (pytest-xdist issue 1378), which would hang CI until its limit.
TEST_WORKERS ?= 2
PARALLEL = -n $(TEST_WORKERS) --dist loadgroup --max-worker-restart=0

# The documentation site (docs/, mkdocs.yml) into site/, with --strict: a broken link, anchor or page fails.
# make test builds it too (tests/unit/test_docs.py), with every code block and generated reference checked.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

docs-serve: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve --dev-addr 127.0.0.1:8000

test: setup spark-kafka lint
	$(PY) -m pytest tests $(PARALLEL) --durations=12 --time-budget=30

# The inner loop: lint, unit tests, and the integration tests without the chaos and cluster suites, within
# 12 minutes (the integration tests' share: 11; lint and unit tests take about half a minute each).
check: setup spark-kafka lint
	$(PY) -m pytest tests/unit -q --time-budget=1
	$(PY) -m pytest tests/integration -m "not chaos and not cluster" $(PARALLEL) --durations=12 --time-budget=11

unit: $(STAMP) native
	$(PY) -m pytest tests/unit -q --time-budget=1

integration: setup spark-kafka
	$(PY) -m pytest tests/integration $(PARALLEL) --durations=12

bench-source: setup
	$(PY) bench/source_throughput.py

bench-sink: setup
	$(PY) bench/sink_throughput.py

bench-latency: setup
	$(PY) bench/latency.py

bench-read-path: setup spark-kafka
	$(PY) bench/read_path.py --spark

# The same over TLS with SASL/SCRAM (a secured local broker): the native fetch against confluent-kafka.
bench-read-path-tls: setup spark-kafka
	$(PY) bench/read_path.py --spark --tls

bench-memory: setup
	$(PY) bench/worker_memory.py

bench-avro: setup
	$(PY) bench/avro_decode.py

# sparkafka side by side with Spark's own format("kafka") on Apache Kafka: source, latency, sink (ratios).
bench-vs-spark: setup spark-kafka
	$(PY) bench/vs_spark.py

# Event-time alignment: a skewed backlog beside format("kafka"), drain cost without skew, planning time.
bench-event-time: setup spark-kafka
	$(PY) bench/event_time.py

clean:
	rm -rf $(VENV) build dist site src/*.egg-info .pytest_cache .mypy_cache .ruff_cache
