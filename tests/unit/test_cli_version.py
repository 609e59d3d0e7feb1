"""``sparkafka --version``: the version, the PySpark it runs on, and what that line gives sparkafka."""

from __future__ import annotations

import pytest

from sparkafka import __version__, spark_lines
from sparkafka.cli import main


def test_version_names_pyspark_and_each_feature_of_its_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(spark_lines, "ARROW_UDF", False)
    with pytest.raises(SystemExit) as ended:
        main(["--version"])
    assert ended.value.code == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"sparkafka {__version__} on PySpark {spark_lines.PYSPARK_VERSION}"
    assert "  no  arrow_udf (Schema Registry formats)" in out
    assert len(out) == 1 + len(spark_lines.features())
