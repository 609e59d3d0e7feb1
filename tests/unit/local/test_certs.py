"""The secured broker's certificates need ``cryptography``: the extra its hint names installs it."""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

import pytest

from sparkafka.errors import BrokerError
from sparkafka.local.certs import CRYPTOGRAPHY_EXTRA, CRYPTOGRAPHY_HINT, CertificateAuthority

ROOT = Path(__file__).resolve().parents[3]


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[\s\[<>=!~;]", r, maxsplit=1)[0].lower() for r in requirements}


def test_the_extra_the_hint_names_installs_cryptography() -> None:
    """A venv made from the wheels has no cryptography unless an extra brings it (issue 50)."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert f"pip install 'sparkafka[{CRYPTOGRAPHY_EXTRA}]'" in CRYPTOGRAPHY_HINT
    assert "cryptography" in _names(extras[CRYPTOGRAPHY_EXTRA])
    assert "cryptography" in _names(extras["dev"])  # the tests' secured broker


def test_without_cryptography_a_secured_broker_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "cryptography", None)  # import cryptography raises ImportError
    with pytest.raises(BrokerError) as refused:
        CertificateAuthority(tmp_path)
    assert str(refused.value) == CRYPTOGRAPHY_HINT
