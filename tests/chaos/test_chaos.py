"""The chaos harness in its bounded form, on three Apache Kafka brokers: each broker SIGKILLed once (so
partition leaders and the transaction coordinators move), 3 driver SIGKILLs, a sink task failure per run.

Set SPARKAFKA_CHAOS_SEED to replay a schedule; `python -m tests.chaos.harness --minutes N` soaks longer.
"""

from __future__ import annotations

import os
import random
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.chaos.harness import BROKERS, run_chaos

pytestmark = pytest.mark.chaos


@pytest.mark.timeout(1200)  # about 4-5 minutes here; the suite's 600 s default is tight on a busy machine
def test_exactly_once_under_broker_kills_driver_kills_and_task_failures(
    tmp_path: Path, record_figures: Callable[[str], None]
) -> None:
    seed = int(os.environ.get("SPARKAFKA_CHAOS_SEED") or random.SystemRandom().randrange(1 << 31))
    # Its progress is the test's output (shown if it fails); its figures go in the CI log, pass or fail.
    report = run_chaos(tmp_path, seed, driver_kills=3, broker_kills=BROKERS, out=sys.stdout)
    render = report.render()
    record_figures(render)
    assert [k.node for k in report.broker_kills] == [1, 2, 3], render
    assert report.driver_exits == [], render  # the query kept running through every broker kill
    assert all(k.rode_out for k in report.broker_kills), render
    assert report.driver_kills == 3, render
    assert report.task_failures >= 1, render
    assert report.coordinator_moves >= 1, render  # every coordinator's node was killed once
    assert report.intent_log.endswith("3 replicas, min.insync.replicas 2"), render
    assert report.group_commits is not None, render
    assert report.group_commits[0] > 0, render  # group commits landed
    assert report.records_in > 0, render
    assert report.views_agree, render  # the oracle and a plain read_committed consumer agree
    assert report.duplicates == 0, render
    assert report.lost == 0, render
