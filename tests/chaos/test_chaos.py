"""The chaos harness in its bounded form: 5 driver SIGKILLs, 1 broker restart, task failures, a few minutes.

Set SPARKAFKA_CHAOS_SEED to replay a schedule; `python -m tests.chaos.harness --minutes N` soaks longer.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from tests.chaos.harness import run_chaos

pytestmark = pytest.mark.chaos


@pytest.mark.timeout(1500)  # about 4-5 minutes here; the suite's 600 s default is tight on a busy machine
def test_exactly_once_under_driver_kills_broker_restarts_and_task_failures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("moto", reason="the chaos harness needs moto[server] (dev extra) for durable storage")
    seed = int(os.environ.get("SPARKAFKA_CHAOS_SEED") or random.SystemRandom().randrange(1 << 31))
    with capsys.disabled():  # the figures belong in the CI log, pass or fail
        report = run_chaos(tmp_path, seed, min_kills=5, broker_restarts=1)
    assert report.driver_kills >= 5
    assert report.broker_restarts == 1
    assert report.task_failures >= 1
    assert report.records_in > 0
    assert report.duplicates == 0, report.render()
    assert report.lost == 0, report.render()
