#!/usr/bin/env bash
# The tests marked `lines`, in the venv of each older PySpark line sparkafka declares (made by
# `python -m sparkafka.local.spark_lines_dist`), one line after the other. `make test` runs this beside the
# main suite, which runs the same tests on the newest line: a leg is one pytest process with its own broker
# and SparkSession, so it fills the time the main suite's processes spend waiting.
#   scripts/test_lines.sh [LINE ...]      # default: every older line
set -uo pipefail
cd "$(dirname "$0")/.."
# This clone's sources, whichever clone made the line's venv (it serves them all): first on the path of the
# tests, their subprocesses and Spark's Python workers.
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
lines=("$@")
[ ${#lines[@]} -gt 0 ] || lines=(4.0 4.1 4.2)
status=0
for line in "${lines[@]}"; do
  started=$(date +%s)
  if ! made=$(.venv/bin/python -m sparkafka.local.spark_lines_dist --line "$line"); then
    echo "PySpark $line: its venv could not be made" >&2
    status=1
    continue
  fi
  python=${made##*: }
  echo "== PySpark $line ($python)"
  if ! "$python" -m pytest tests -m lines -q -p no:cacheprovider --durations=5; then
    status=1
  fi
  echo "== PySpark $line: $(( $(date +%s) - started )) s"
done
exit $status
