# Two commands for a newcomer: `make demo` and `make test`. Both set everything up first.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.sparkafka-installed

.PHONY: demo test check lint docs docs-serve unit integration kafka spark-kafka native dist bench-vs-spark bench-event-time bench-read-path bench-read-path-tls bench-memory bench-source bench-sink bench-latency bench-avro soak setup pyspark-zips check-java clean

setup: $(STAMP) check-java kafka native pyspark-zips

# PySpark's Python workers import pyspark from the zips in its package (python/lib), which ship as source only:
# each worker compiled what it imported, about 0.5 s of CPU, and a driver starts some seven in a row before its
# first batch ends. Compiled once into those zips (src/sparkafka/local/pyspark_zips.py); a second run checks
# their names and does nothing.
pyspark-zips: $(STAMP)
	@$(PY) -m sparkafka.local.pyspark_zips

# Apache Kafka's broker jars, pinned and checksummed (src/sparkafka/local/apache_kafka), from Maven Central
# into ~/.cache/sparkafka once; a second run downloads nothing. `make demo` and `make test` run on it.
kafka: $(STAMP) check-java
	@$(PY) -m sparkafka.local.kafka_dist

# Spark's own Kafka connector (format("kafka")), pinned and checksummed (src/sparkafka/local/spark_kafka): a
# test and benchmark dependency only, for the side-by-side tests and bench/vs_spark.py.
spark-kafka: $(STAMP) check-java
	@$(PY) -m sparkafka.local.spark_kafka_dist

# sparkafka's native fetch (native/: Rust over librdkafka and OpenSSL, both built from source and linked in, locked
# in native/Cargo.lock) as the wheel users install: `make dist` ships the very file built here, and the venv runs
# it, so the tests test what ships. OpenSSL comes from openssl-src (feature vendored-openssl), so the extension
# needs no system libssl or libcrypto, and the wheel is manylinux-tagged: maturin gives the lowest manylinux tag
# whose policy the extension meets (the glibc symbol versions it needs, the libraries it links), and with
# --auditwheel check it fails rather than copy a system library into the wheel; the line after it fails if the
# tag came out plain linux. Built on glibc 2.34 or newer (Debian 12 here: 2.36) that tag is manylinux_2_34:
# since glibc 2.34 put libpthread and libdl into libc, pthread_create and dlopen are GLIBC_2.34 symbols, so pip
# takes the wheel on glibc 2.34 and newer (RHEL 9, Amazon Linux 2023, Ubuntu 22.04, Debian 12), not on older ones;
# a lower tag needs a build on an older glibc (a manylinux2014 container). One build for both uses: cold, 170 s
# on 2 cores, of which about 100 s is OpenSSL (70 s against the system's OpenSSL, measured side by side); cargo's
# cache is ~/.cache/sparkafka/native-target, so later builds and clones take seconds. Without the native fetch
# sparkafka reads through confluent-kafka (option fetcher=auto).
NATIVE_STAMP := $(VENV)/.sparkafka-native
NATIVE_TARGET := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/sparkafka/native-target
NATIVE_WHEELS := $(VENV)/native-wheels
native: $(NATIVE_STAMP)

$(NATIVE_STAMP): $(STAMP) $(wildcard native/Cargo.* native/pyproject.toml native/README.md native/*.pyi native/src/*.rs)
	@scripts/check_rust.sh
	rm -rf $(NATIVE_WHEELS)
	CARGO_TARGET_DIR=$(NATIVE_TARGET) $(VENV)/bin/maturin build --quiet --release --locked \
		--features vendored-openssl --auditwheel check -i $(PY) -m native/Cargo.toml -o $(NATIVE_WHEELS)
	@ls $(NATIVE_WHEELS)/sparkafka_native-*-manylinux_*.whl >/dev/null 2>&1 || { \
		echo "error: the native wheel is not manylinux-tagged: $$(ls $(NATIVE_WHEELS))" >&2; exit 1; }
	$(PY) -m pip install --quiet --force-reinstall --no-deps $(NATIVE_WHEELS)/sparkafka_native-*.whl
	touch $@

# The two wheels a user installs (README: Install) and the sdist, in dist/, checked by twine: sparkafka (pure
# Python, with pyspark_sparkafka so format("sparkafka") needs no register) and sparkafka-native (above: the
# manylinux wheel the venv runs, copied as built).
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

# The tests marked `lines` also run on each older PySpark line (scripts/test_lines.sh: a venv per line, one
# pytest process with its own broker and SparkSession at a time), beside the main suite: the main suite's
# processes spend most of their time waiting. Its output is printed when it ends (LINES_LOG).
LINES_LOG := $(VENV)/test-lines.log
test: setup spark-kafka lint
	@scripts/test_lines.sh > $(LINES_LOG) 2>&1 & lines=$$!; \
	$(PY) -m pytest tests $(PARALLEL) --durations=12 --time-budget=30; main=$$?; \
	wait $$lines; older=$$?; \
	echo "== the older PySpark lines (scripts/test_lines.sh, $(LINES_LOG)): exit $$older"; \
	grep -E '^(== |FAILED|ERROR|[0-9]+ (passed|failed))' $(LINES_LOG); \
	[ $$older -eq 0 ] || tail -n 60 $(LINES_LOG); \
	[ $$main -eq 0 ] && [ $$older -eq 0 ]

# The inner loop: lint, unit tests, and the integration tests without the chaos and cluster suites, within
# 12 minutes (the integration tests' share: 11; lint and the unit tests, in TEST_WORKERS processes, half a
# minute).
check: setup spark-kafka lint
	$(PY) -m pytest tests/unit -q -n $(TEST_WORKERS) --time-budget=1
	$(PY) -m pytest tests/integration -m "not chaos and not cluster" $(PARALLEL) --durations=12 --time-budget=11

unit: $(STAMP) native
	$(PY) -m pytest tests/unit -q -n $(TEST_WORKERS) --time-budget=1

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

# Days in minutes (bench/soak.py): an exactly-once pipeline, an update-mode aggregation and an at-least-once
# query for 30 minutes on Apache Kafka with its clocks compressed, faults on a schedule, every series sampled
# and judged flat or not, every record checked. SOAK_ARGS="--minutes 120" to run longer.
soak: setup
	$(PY) bench/soak.py $(SOAK_ARGS)

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
