"""The CLI tools' Kafka settings (``--bootstrap-servers``, ``--command-config FILE``), then the first contact.

Runs in the CLI's process. ``--command-config`` is the Kafka tools' option name, with librdkafka's setting
names (the ones ``kafka.*`` options take):

- a properties file: ``key=value`` lines, ``#`` comments, keys with or without the ``kafka.`` prefix;
- a JSON file: an object of such settings, or ``FILE.json#NAME`` for the object ``NAME`` of a file that
  holds several (``sparkafka broker --secure --client-config`` writes ``admin``, ``app`` and ``app_tls``).

``${NAME}`` in a value is the environment variable NAME, as in pipeline files, so a password need not be
in the file. ``--bootstrap-servers``, when given, wins over the file's.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sparkafka.client.contact import FIRST_CONTACT_S
from sparkafka.errors import ConfigError

__all__ = ["FIRST_CONTACT_S", "client_settings", "load_command_config"]

_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _expand(value: str, where: str) -> str:
    def replace(match: re.Match[str]) -> str:
        found = os.environ.get(match.group(1))
        if found is None:
            raise ConfigError(f"{where} uses ${{{match.group(1)}}} but that environment variable is not set")
        return found

    return _ENV.sub(replace, value)


def load_command_config(spec: str) -> dict[str, str]:
    """The librdkafka settings in ``spec`` (``FILE``, or ``FILE.json#NAME``), ``kafka.`` prefixes dropped.

    Raises:
        ConfigError: the file cannot be read, is not of either form, or names an unset variable.
    """
    path, _, name = spec.partition("#")
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise ConfigError(f"--command-config {spec}: cannot read {path}: {e.strerror}") from None
    if path.endswith(".json") or text.lstrip().startswith("{"):
        raw = _json_settings(spec, path, name, text)
    elif name:
        raise ConfigError(f"--command-config {spec}: #NAME picks an object of a JSON file")
    else:
        raw = _properties(path, text)
    out = {}
    for key, value in raw.items():
        text = str(value).lower() if isinstance(value, bool) else str(value)
        out[str(key).removeprefix("kafka.")] = _expand(text, f"{path}: {key}")
    return out


def _json_settings(spec: str, path: str, name: str, text: str) -> Mapping[str, Any]:
    try:
        data = json.loads(text)
    except ValueError as e:
        raise ConfigError(f"--command-config {spec}: not JSON: {e}") from None
    if name:
        objects = [k for k, v in data.items() if isinstance(v, dict)] if isinstance(data, dict) else []
        if name not in objects:
            has = ", ".join(objects) or "none"
            raise ConfigError(f"--command-config {spec}: no object {name!r} in {path} (it has: {has})")
        data = data[name]
    if not isinstance(data, dict) or any(isinstance(v, dict | list) for v in data.values()):
        raise ConfigError(
            f"--command-config {spec}: expected an object of settings; for a file of several, name one "
            f"with {path}#NAME"
        )
    return data


def _properties(path: str, text: str) -> dict[str, str]:
    raw = {}
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", "!")):
            continue
        key, sep, value = stripped.partition("=")
        if not sep:
            raise ConfigError(f"--command-config {path} line {number}: expected key=value")
        raw[key.strip()] = value.strip()
    return raw


def client_settings(
    bootstrap_servers: str | None, command_config: str | None, timeout_s: float = FIRST_CONTACT_S
) -> dict[str, str]:
    """The tool's librdkafka settings, after a first contact that answered (``client.contact``).

    Raises:
        ConfigError: neither gives bootstrap servers, or the file is wrong (``load_command_config``), or
            librdkafka refuses a setting.
        BrokerError: no broker answered within ``timeout_s`` (a tool's ``--timeout``, default
            ``FIRST_CONTACT_S``), or the brokers refused the client
            (one sentence: a wrong password, an untrusted certificate, ...).
    """
    from sparkafka.client.conf import check_librdkafka_settings
    from sparkafka.client.contact import first_answer

    conf = load_command_config(command_config) if command_config else {}
    if bootstrap_servers:
        conf["bootstrap.servers"] = bootstrap_servers
    if not conf.get("bootstrap.servers"):
        raise ConfigError("give --bootstrap-servers HOST:PORT, or --command-config with bootstrap.servers")
    check_librdkafka_settings(conf)
    first_answer(conf, timeout_s)
    return conf
