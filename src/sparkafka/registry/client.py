"""The Schema Registry connection: settings, one client per process, lookups with errors that name them.

Runs in the driver (reader schema at plan time, the writer schema's registration at start) and in Spark's
Python workers (writer schemas by id, once per id per process: ``schema_by_id`` caches). The HTTP client is
confluent-kafka's ``SchemaRegistryClient``; every failure leaves here as a ``RegistryError`` naming the
registry (its URL without user info), the subject, version or id, and what to do.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from sparkafka.errors import ConfigError, RegistryError
from sparkafka.options import Option, names

__all__ = [
    "Format",
    "RegisteredSchema",
    "RegistryConfig",
    "latest_or_pinned",
    "parse_registry",
    "register_or_lookup",
    "schema_by_id",
]

Format = Literal["avro", "protobuf", "json_schema"]
FORMATS: tuple[Format, ...] = ("avro", "protobuf", "json_schema")
SCHEMA_TYPES: dict[Format, str] = {"avro": "AVRO", "protobuf": "PROTOBUF", "json_schema": "JSON"}
_FORMAT_OF = {v: k for k, v in SCHEMA_TYPES.items()}
_ANSWERED_AS: dict[Format, str] = {"protobuf": "serialized"}
"""The ``format`` a schema is asked for in (Protobuf: a base64 FileDescriptorProto, not .proto text)."""

REGISTRY_SETTINGS: tuple[Option, ...] = (
    Option("url", "The registry's base URL, `http://host:port` or `https://...`; several comma-separated."),
    Option(
        "basic_auth_user_info",
        "`user:password` for HTTP basic auth (Confluent Cloud: API key and secret); masked everywhere.",
    ),
    Option("ssl_ca_location", "A CA file to verify the registry's TLS certificate with."),
    Option("ssl_certificate_location", "A client certificate, for mutual TLS."),
    Option("ssl_key_location", "The client certificate's key."),
    Option("ssl_key_password", "The key's password; masked everywhere."),
    Option(
        "timeout_s",
        "Seconds per HTTP request; 5xx and 429 answers are retried within it.",
        default="10.0",
        kind="number",
    ),
)
"""The settings of a ``[schema_registry]`` table (or ``SchemaRegistry(...)``'s keyword arguments)."""
_KEYS = set(names(REGISTRY_SETTINGS))
_MASK = "********"


@dataclass(frozen=True)
class RegistryConfig:
    """Where the Schema Registry is and how to reach it. Pickled into Spark tasks; ``repr`` masks secrets."""

    url: str
    """One or more base URLs, comma-separated (``http://host:8081``)."""
    basic_auth_user_info: str | None = None
    """``user:password`` for HTTP basic auth (Confluent Cloud: API key and secret)."""
    ssl_ca_location: str | None = None
    ssl_certificate_location: str | None = None
    ssl_key_location: str | None = None
    ssl_key_password: str | None = None
    timeout_s: float = 10.0
    """Per HTTP request; the client retries 5xx and 429 answers within it."""

    def __repr__(self) -> str:
        """The settings that are set, with the secrets and any user info in the URL masked."""
        secret = {"basic_auth_user_info", "ssl_key_password"}
        shown = ", ".join(
            f"{k}={_MASK if k in secret else v!r}" for k, v in vars(self).items() if v is not None
        )
        return f"RegistryConfig({shown.replace(self.url, self.where)})"

    @property
    def where(self) -> str:
        """The URL as errors and logs show it: user info in the URL masked."""
        return _masked_url(self.url)

    def client_conf(self) -> dict[str, Any]:
        """confluent-kafka's SchemaRegistryClient settings."""
        conf: dict[str, Any] = {"url": self.url, "timeout": self.timeout_s, "max.retries": 2}
        for key in ("basic_auth_user_info", *(k for k in _KEYS if k.startswith("ssl_"))):
            value = getattr(self, key)
            if value is not None:
                conf[key.replace("_", ".")] = value
        return conf


def _masked_url(url: str) -> str:
    """``url`` with any user info (``//user:password@``) masked."""
    return re.sub(r"//[^/@]*@", f"//{_MASK}@", url)


def parse_registry(options: Mapping[str, Any], where: str = "schema_registry") -> RegistryConfig:
    """A ``[schema_registry]`` table (or keyword arguments) as a RegistryConfig; unknown keys rejected."""
    unknown = sorted(set(options) - _KEYS)
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]} is not a known setting; allowed: {', '.join(sorted(_KEYS))}")
    url = options.get("url")
    if not isinstance(url, str) or not re.match(r"https?://", url):
        shown = _masked_url(url) if isinstance(url, str) else url
        raise ConfigError(
            f"{where}.url = {shown!r}: use the registry's base URL, http://host:port or https://..."
        )
    info = options.get("basic_auth_user_info")
    if info is not None and (not isinstance(info, str) or ":" not in info):
        raise ConfigError(f"{where}.basic_auth_user_info must be user:password")
    timeout = options.get("timeout_s", 10.0)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float | str):
        raise ConfigError(f"{where}.timeout_s = {timeout!r}: use a number of seconds > 0")
    try:
        timeout_s = float(timeout)
    except ValueError:
        timeout_s = -1.0
    if timeout_s <= 0:
        raise ConfigError(f"{where}.timeout_s = {timeout!r}: use a number of seconds > 0")
    fields = {k: str(v) for k, v in options.items() if k not in ("url", "timeout_s")}
    return RegistryConfig(url=url.rstrip("/"), timeout_s=timeout_s, **fields)


class RegisteredSchema(NamedTuple):
    """A schema as the registry holds it."""

    schema_id: int
    format: Format
    text: str
    """Avro and JSON Schema: the schema's JSON; Protobuf: a base64 FileDescriptorProto (format=serialized)."""
    references: tuple[tuple[str, str, int], ...] = ()
    """(import name, subject, version) of each schema this one imports (Protobuf, JSON Schema, Avro)."""
    subject: str | None = None
    version: int | None = None


_lock = threading.Lock()


@functools.cache
def _client(cfg: RegistryConfig) -> Any:
    from confluent_kafka.schema_registry import SchemaRegistryClient

    return SchemaRegistryClient(cfg.client_conf())


def _call(cfg: RegistryConfig, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args)`` on the process's client; its failures as a RegistryError naming ``what``."""
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    try:
        with _lock:
            client = _client(cfg)
    except (ValueError, OSError, TypeError) as e:  # bad TLS files or password, user info twice, a bad URL
        message = str(e).replace(cfg.url, cfg.where)
        for secret in (cfg.basic_auth_user_info, cfg.ssl_key_password):
            if secret:
                message = message.replace(secret, _MASK)
        raise RegistryError(f"schema registry {cfg.where}: cannot set up the client: {message}") from None
    try:
        return getattr(client, fn)(*args, **kwargs)
    except SchemaRegistryError as e:
        status, code = e.http_status_code, e.error_code
        hint = {
            40401: "no such subject (register a schema under it, or name another subject)",
            40402: "no such version of the subject",
            40403: "no such schema id",
            409: "the schema is incompatible with the subject's earlier versions (its compatibility level)",
            42201: "the registry rejects the schema as invalid",
            401: "the registry refused the credentials (schema_registry.basic_auth_user_info)",
            403: "the credentials may not do this (schema_registry.basic_auth_user_info)",
        }.get(code, {401: "unauthorized: check schema_registry.basic_auth_user_info"}.get(status, ""))
        detail = f"{hint}: {e.error_message}" if hint else str(e)
        raise RegistryError(f"schema registry {cfg.where}: {what}: {detail}", code=code or status) from None
    except Exception as e:
        # httpx transport errors are OSError/RuntimeError, or (ConnectError, TimeoutException) neither.
        transport = type(e).__module__.startswith(("httpx", "httpcore"))
        if not transport and not isinstance(e, OSError | RuntimeError | ValueError | TypeError):
            raise
        raise RegistryError(
            f"schema registry {cfg.where} is unreachable ({type(e).__name__}: {e}) while looking up {what}; "
            "check schema_registry.url"
        ) from None


def _registered(raw: Any, schema_id: int | None = None) -> RegisteredSchema:
    schema = getattr(raw, "schema", raw)
    refs = tuple((r.name, r.subject, int(r.version)) for r in (schema.references or []))
    return RegisteredSchema(
        schema_id=int(schema_id if schema_id is not None else raw.schema_id),
        format=_FORMAT_OF.get(schema.schema_type or "AVRO", "avro"),
        text=schema.schema_str,
        references=refs,
        subject=getattr(raw, "subject", None),
        version=getattr(raw, "version", None),
    )


def _fmt(fmt: Format) -> str | None:
    return _ANSWERED_AS.get(fmt)


@functools.lru_cache(maxsize=4096)
def schema_by_id(cfg: RegistryConfig, schema_id: int, fmt: Format) -> RegisteredSchema:
    """The writer schema of records framed with ``schema_id`` (cached per process: ids are immutable)."""
    raw = _call(cfg, f"schema id {schema_id}", "get_schema", schema_id, fmt=_fmt(fmt))
    return _registered(raw, schema_id)


@functools.lru_cache(maxsize=4096)
def schema_by_version(cfg: RegistryConfig, subject: str, version: int, fmt: Format) -> RegisteredSchema:
    """A pinned reader schema or a referenced one (imports), by subject and version; cached per process
    (a registered version never changes, and every writer id that references it would ask again)."""
    raw = _call(cfg, f"subject {subject!r} version {version}", "get_version", subject, version, fmt=_fmt(fmt))
    return _registered(raw)


def latest_or_pinned(
    cfg: RegistryConfig,
    fmt: Format,
    subject: str | None,
    version: int | None = None,
    schema_id: int | None = None,
) -> RegisteredSchema:
    """The reader schema: by id, by subject and version, or the subject's latest version (the default).

    Runs in the driver when a query is planned; the latest version is read once, so a query keeps the
    reader schema it started with (restart it to read with a newer one).
    """
    if schema_id is not None:
        found = schema_by_id(cfg, schema_id, fmt)
    elif subject is None:
        raise ConfigError("a reader schema needs a subject or a schema id")
    elif version is not None:
        found = schema_by_version(cfg, subject, version, fmt)
    else:
        # get_version(latest) asks the registry every time; get_latest_version would answer from a cache
        # that never expires in this process (a restarted query must see a newer version).
        what = f"the latest version of subject {subject!r}"
        raw = _call(cfg, what, "get_version", subject, "latest", fmt=_fmt(fmt))
        found = _registered(raw)
    if found.format != fmt:
        what = f"schema id {schema_id}" if schema_id is not None else f"subject {subject!r}"
        raise RegistryError(
            f"schema registry {cfg.where}: {what} holds a {SCHEMA_TYPES[found.format]} schema, "
            f"not {SCHEMA_TYPES[fmt]}: use decode/encode = {found.format}"
        )
    return found


def register_or_lookup(
    cfg: RegistryConfig, fmt: Format, subject: str, text: str, auto_register: bool
) -> RegisteredSchema:
    """The id of ``text`` under ``subject``: registered if ``auto_register``, else it must already be there.

    Runs in the driver once per query start. An incompatible schema is refused by the registry (HTTP 409)
    and the error says so; nothing is written.
    """
    from confluent_kafka.schema_registry import Schema

    schema = Schema(text, SCHEMA_TYPES[fmt])
    if auto_register:
        schema_id = _call(
            cfg, f"registering a schema under subject {subject!r}", "register_schema", subject, schema
        )
        return RegisteredSchema(int(schema_id), fmt, text, subject=subject)
    raw = _call(
        cfg, f"the schema under subject {subject!r} (auto_register is off)", "lookup_schema", subject, schema
    )
    return RegisteredSchema(int(raw.schema_id), fmt, text, subject=subject, version=raw.version)


SubjectStrategy = Literal["topic", "record", "topic_record"]
STRATEGIES: tuple[SubjectStrategy, ...] = ("topic", "record", "topic_record")


def subject_name(strategy: SubjectStrategy, topic: str | None, record: str, what: str = "value") -> str:
    """The subject name for ``what`` (value or key) under one of Confluent's subject name strategies.

    TopicNameStrategy ``<topic>-value`` (``<topic>-key``), RecordNameStrategy ``<record full name>``,
    TopicRecordNameStrategy ``<topic>-<record full name>``.
    """
    if strategy == "record":
        return record
    if topic is None:
        raise ConfigError(f"subject name strategy {strategy} needs the topic; name the subject instead")
    return f"{topic}-{what}" if strategy == "topic" else f"{topic}-{record}"
