"""The soak's reading of the driver JVM (bench/soak_samples.py): the live heap from a class histogram's
total, the committed heap and what Native Memory Tracking counts outside the heap, from ``jcmd -f`` output
(abridged from a real JDK 17 answer), and the series the verdict prints without judging."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from soak_samples import INFORMATIONAL, parse_jcmd, trend

JCMD_G1 = """20607:
 num     #instances         #bytes  class name (module)
-------------------------------------------------------
   1:         13033         794008  [B (java.base@17.0.15)
   2:          3002         360856  java.lang.Class (java.base@17.0.15)
 700:             1             16  sun.nio.fs.UnixFileAttributes$UnixAsBasicFileAttributes (java.base)
Total         59352        2832040
 garbage-first heap   total 57344K, used 5956K [0x0000000687400000, 0x0000000800000000)
  region size 4096K, 0 young (0K), 0 survivors (0K)
 Metaspace       used 8921K, committed 9088K, reserved 1114112K

Native Memory Tracking:

Total: reserved=7843664KB, committed=132296KB
       malloc: 10248KB #61271
-                 Java Heap (reserved=6172672KB, committed=57344KB)
                            (mmap: reserved=6172672KB, committed=57344KB)
-                     Class (reserved=1048788KB, committed=1364KB)
-                    Thread (reserved=20533KB, committed=917KB)
"main" #1 prio=5 os_prio=0 cpu=347.66ms elapsed=44.23s tid=0x00007f4960019660 nid=0x70a6 waiting on condition
"GC Thread#1" os_prio=0 cpu=10.08ms elapsed=0.03s tid=0x00007f4924001580 nid=0x711d runnable
"GC Thread#0" os_prio=0 cpu=10.08ms elapsed=0.03s tid=0x00007f4924001580 nid=0x711c runnable
"""


def test_the_live_heap_is_the_histograms_total_and_the_non_heap_is_nmt_less_the_heap() -> None:
    sample = parse_jcmd(JCMD_G1)
    assert sample is not None
    assert sample.live_mb == pytest.approx(2832040 / 2**20)
    assert sample.committed_mb == pytest.approx(56.0)
    assert sample.non_heap_mb == pytest.approx((132296 - 57344) / 1024)
    assert sample.histogram["[B"] == (13033, 794008)
    assert sample.histogram["sun.nio.fs.UnixFileAttributes$UnixAsBasicFileAttributes"] == (1, 16)


def test_a_serial_heap_adds_its_generations_and_without_nmt_there_is_no_non_heap() -> None:
    out = (
        "Total 10 1048576\n"
        " def new generation   total 116224K, used 50068K [0x0, 0x1, 0x2)\n"
        " tenured generation   total 258048K, used 134799K [0x0, 0x1, 0x2, 0x3)\n"
        "Native memory tracking is not enabled\n"
    )
    sample = parse_jcmd(out)
    assert sample is not None
    assert sample.live_mb == 1.0
    assert sample.committed_mb == pytest.approx((116224 + 258048) / 1024)
    assert sample.non_heap_mb is None


def test_without_the_histograms_total_there_is_no_sample() -> None:
    assert (
        parse_jcmd("12345:\ncom.sun.tools.attach.AttachNotSupportedException: Unable to open socket\n")
        is None
    )


def test_the_live_heap_is_judged_and_the_climbing_series_are_not() -> None:
    rows = [
        {
            "batches": b,
            "run": 1,
            "driver live heap MB": 150.0,
            "driver heap after young GC MB": 120.0 + b / 10,
        }
        for b in range(0, 1000, 50)
    ]
    live, young = trend(rows, "driver live heap MB"), trend(rows, "driver heap after young GC MB")
    assert live is not None
    assert live.flat
    assert young is not None
    assert not young.flat
    assert "driver heap after young GC MB" in INFORMATIONAL
    assert "driver live heap MB" not in INFORMATIONAL


def test_native_memory_by_category_and_threads_by_name_digits_folded() -> None:
    sample = parse_jcmd(JCMD_G1)
    assert sample is not None
    assert sample.native == {"Class": pytest.approx(1364 / 1024), "Thread": pytest.approx(917 / 1024)}
    assert sample.threads == {"main": 1, "GC Thread#": 2}
