"""The soak (``bench/soak.py``) in its 3-minute form: an exactly-once pipeline, an update-mode aggregation
and an at-least-once query on Apache Kafka with its clocks compressed, every transactional id crossing a
producer-id rotation, quiet partitions outliving their producer state. It fails on what 3 minutes show
beyond doubt: a record lost or written twice, a driver that died, descriptors or threads growing with
batches. ``make soak`` runs the full 30 minutes, with faults, and judges every series.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from sparkafka.local.procs import GroupProcess

pytestmark = pytest.mark.chaos

SOAK = Path(__file__).resolve().parents[2] / "bench" / "soak.py"


@pytest.mark.timeout(1200)  # about 5 minutes here: 40 s of epoch bumps, 3 minutes, the drain and the oracle
def test_a_compressed_soak_loses_nothing_and_leaks_nothing(
    tmp_path: Path, record_figures: Callable[[str], None]
) -> None:
    plot = tmp_path / "soak.png"
    with GroupProcess(
        [sys.executable, str(SOAK), "--ci", "--plot", str(plot)], log_path=tmp_path / "soak.log"
    ) as soak:
        code = soak.wait(1100)
    output = (tmp_path / "soak.log").read_text()
    verdict = output[output.rfind("\ntrends over") :]
    record_figures(verdict)
    assert code == 0, output[-6000:]
    assert "SOAK PASSED" in output
    assert "exactly once: " in output
    assert plot.exists()
