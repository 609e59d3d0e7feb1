"""Secrets nowhere, proven with a canary password on the secured broker.

A user whose password is a canary runs, in its own driver process (tests/integration/secret_driver.py: the
event log and the Spark UI on), a batch read, a streaming read with group commits into the exactly-once
sink, an option error and an authorization refusal. The canary must not appear in anything it leaves a user
to share: its output and sparkafka's DEBUG log, the errors, ``df.explain()`` in every mode, the query's
``lastProgress`` and ``recentProgress``, Spark's event log, the UI's SQL, Environment, jobs and streaming
pages (fetched over HTTP), the checkpoint, the metrics files, the commit intents and the transactional ids.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path

import pytest

from sparkafka.local.secure_kafka import SecureKafka
from sparkafka.sink.intents import intent_topic
from tests.support.kafka import Kafka

pytestmark = pytest.mark.xdist_group("secure-kafka")  # one secured broker for every secured test


def test_a_canary_password_appears_nowhere(secure_kafka: SecureKafka, secured: Kafka, tmp_path: Path) -> None:
    u = uuid.uuid4().hex[:8]
    canary = f"CANARY{uuid.uuid4().hex}"
    user = f"canary-{u}"
    secure_kafka.add_user(user, canary)
    source = secured.topic(partitions=2, prefix=f"can-in-{u}")
    output = secured.topic(partitions=2, prefix=f"can-out-{u}")
    denied = secured.topic(partitions=1, prefix=f"can-denied-{u}")
    group, prefix = f"can-g-{u}", f"can-eos-{u}"
    secure_kafka.grant(
        user,
        [
            ("READ", "topic", source),
            ("READ", "group", group),
            ("WRITE", "topic", output),
            ("WRITE", "transactional_id", f"{prefix}*"),
            ("READ", "topic", intent_topic(prefix)),
            ("WRITE", "topic", intent_topic(prefix)),
            ("CREATE", "topic", intent_topic(prefix)),
        ],
    )
    values = secured.produce(source, [f"c{i}" for i in range(20)], partitions=2)
    settings = tmp_path / "settings.json"
    kafka = {f"kafka.{k}": v for k, v in secure_kafka.sasl_settings(user).items()}
    assert kafka["kafka.sasl.password"] == canary
    run = {"kafka": kafka, "source": source, "output": output, "group": group, "prefix": prefix}
    settings.write_text(json.dumps({**run, "denied": denied}))
    out = tmp_path / "out"
    scratch = tmp_path / "tmp"  # the driver's TMPDIR: its metrics files and Spark's scratch land here
    scratch.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "tests.integration.secret_driver", str(settings), str(out)],
        env={**os.environ, "TMPDIR": str(scratch)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert secured.committed_values(output) == Counter(v.encode() for v in values)

    # What was made, so that a test that found nothing cannot pass for one that looked nowhere.
    made = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()}
    assert {"out/explain.txt", "out/progress.json", "out/errors.txt", "out/driver.log"} <= made
    assert any(m.startswith("out/events/") for m in made)
    assert any(m.startswith("out/checkpoint/offsets/") for m in made)
    assert "out/ui-sql-api.json" in made
    assert any(m.startswith("out/ui-sql-execution-") for m in made)
    assert any("/sparkafka/metrics/" in m for m in made)
    errors = (out / "errors.txt").read_text()
    assert "option startingOffsets='nope' is not allowed" in errors
    assert f"user {user} may not READ topic {denied}" in errors
    progress = json.loads((out / "progress.json").read_text())
    assert progress["recent"]
    assert "sparkafka" in (out / "explain.txt").read_text()

    leaks = [m for m in sorted(made) if canary.encode() in (tmp_path / m).read_bytes()]
    assert leaks == [settings.relative_to(tmp_path).as_posix()]  # only the file it was given
    assert canary not in done.stdout + done.stderr
    intents = secured.committed(intent_topic(prefix))
    assert intents
    assert not [r for r in intents if canary.encode() in (r.value or b"") + (r.key or b"")]
    tids = {h["tid"] for r in intents if r.value for h in json.loads(r.value).get("committed", [])}
    assert tids
    assert all(tid.startswith(prefix) and canary not in tid for tid in tids)
