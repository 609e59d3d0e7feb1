"""A small Schema Registry for the tests: the documented REST subset confluent-kafka's client uses.

No Confluent-compatible registry can be installed on these machines (karapace is not on PyPI), so the tests
run this one, in a thread, bound to 127.0.0.1; with ``SPARKAFKA_TEST_SCHEMA_REGISTRY`` set the same tests
use that real registry instead (see ``registry_url`` in tests/conftest.py).

Implemented (https://docs.confluent.io/platform/current/schema-registry/develop/api.html):
``POST /subjects/{s}/versions`` (register; the same schema gets the same id everywhere), ``POST
/subjects/{s}`` (look up), ``GET /subjects[/{s}/versions[/{v}|latest]]``, ``GET /schemas/ids/{id}``,
``DELETE /subjects/{s}``, ``GET|PUT /config[/{s}]``, ``POST /compatibility/subjects/{s}/versions/{v}``.
Compatibility: BACKWARD by default (NONE settable), checked against the latest version with Avro's
resolution rules; Protobuf and JSON Schema registrations are always compatible here (a real registry
checks them too). Protobuf schemas are stored as registered: confluent-kafka's Python client registers
base64 FileDescriptorProtos and asks for ``format=serialized``, which therefore returns them unchanged.
Optional HTTP basic auth (``users={"name": "password"}``).

To try the registry formats by hand (docs/schema-registry.md), run it from the repo root; it
serves until Ctrl-C or SIGTERM, on 127.0.0.1 only, keeping schemas in memory:

    .venv/bin/python -m tests.support.schema_registry --port 8081
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import re
import signal
import sys
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["TestSchemaRegistry", "avro_can_read"]

_PROMOTIONS = {
    "int": {"int", "long", "float", "double"},
    "long": {"long", "float", "double"},
    "float": {"float", "double"},
    "double": {"double"},
    "string": {"string", "bytes"},
    "bytes": {"bytes", "string"},
}


def _named(schema: Any, names: dict[str, Any], namespace: str = "") -> None:
    if isinstance(schema, list):
        for s in schema:
            _named(s, names, namespace)
    elif isinstance(schema, dict):
        if schema.get("type") in ("record", "error", "enum", "fixed"):
            ns = schema.get("namespace", namespace)
            name = schema["name"] if "." in schema["name"] or not ns else f"{ns}.{schema['name']}"
            names[name] = schema
            names[schema["name"].split(".")[-1]] = schema
            namespace = ns
        for f in schema.get("fields", []):
            _named(f["type"], names, namespace)
        for key in ("items", "values"):
            if key in schema:
                _named(schema[key], names, namespace)


def avro_can_read(reader: Any, writer: Any) -> str | None:
    """None if ``reader`` can read data written with ``writer`` (Avro schema resolution), else why not."""
    r_names: dict[str, Any] = {}
    w_names: dict[str, Any] = {}
    _named(reader, r_names)
    _named(writer, w_names)

    def kind(s: Any, names: dict[str, Any]) -> Any:
        if isinstance(s, str) and s in names:
            return names[s]
        if isinstance(s, dict) and s.get("type") in _PROMOTIONS | {"null": 0, "boolean": 0}:
            return s["type"]
        return s

    def check(r: Any, w: Any, path: str, seen: set[tuple[int, int]]) -> str | None:  # noqa: PLR0911
        r, w = kind(r, r_names), kind(w, w_names)
        if (id(r), id(w)) in seen:
            return None
        seen = seen | {(id(r), id(w))}
        if isinstance(w, list):
            for branch in w:
                why = check(r, branch, path, seen)
                if why:
                    return why
            return None
        if isinstance(r, list):
            if any(check(branch, w, path, seen) is None for branch in r):
                return None
            return f"{path}: no branch of the reader's union reads the writer's {json.dumps(w)[:60]}"
        if isinstance(r, str) or isinstance(w, str):
            if isinstance(r, str) and isinstance(w, str) and (r == w or r in _PROMOTIONS.get(w, set())):
                return None
            return f"{path}: the writer's {json.dumps(w)[:60]} cannot be read as {json.dumps(r)[:60]}"
        if r.get("type") != w.get("type"):
            return f"{path}: the writer's {w.get('type')} cannot be read as {r.get('type')}"
        t = r["type"]
        if t in ("record", "error", "enum", "fixed"):
            names = {r["name"].split(".")[-1], *(a.split(".")[-1] for a in r.get("aliases", []))}
            if w["name"].split(".")[-1] not in names:
                return f"{path}: the writer's {t} {w['name']} is not the reader's {r['name']} (nor an alias)"
        if t in ("record", "error"):
            writer_fields = {f["name"]: f for f in w["fields"]}
            for f in r["fields"]:
                names = [f["name"], *f.get("aliases", [])]
                match = next((writer_fields[n] for n in names if n in writer_fields), None)
                if match is None:
                    if "default" not in f:
                        return f"{path}.{f['name']}: a field the writer lacks needs a default"
                    continue
                why = check(f["type"], match["type"], f"{path}.{f['name']}", seen)
                if why:
                    return why
            return None
        if t == "enum":
            missing = set(w["symbols"]) - set(r["symbols"])
            return (
                None if not missing or "default" in r else f"{path}: enum symbols {sorted(missing)} unknown"
            )
        if t == "array":
            return check(r["items"], w["items"], f"{path}[]", seen)
        if t == "map":
            return check(r["values"], w["values"], f"{path}{{}}", seen)
        if t == "fixed":
            return None if r["size"] == w["size"] else f"{path}: fixed sizes differ"
        return check(t, w["type"], path, seen)

    return check(reader, writer, "", set())


class _Store:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.schemas: list[dict[str, Any]] = []  # id - 1 -> {schema, schemaType, references}
        self.subjects: dict[str, list[int]] = {}  # subject -> ids by version - 1
        self.config: dict[str, str] = {"": "BACKWARD"}
        self.requests: list[str] = []  # "METHOD /path", in order of arrival


def _key(entry: dict[str, Any]) -> str:
    schema = entry["schema"]
    if entry.get("schemaType", "AVRO") != "PROTOBUF":
        with contextlib.suppress(ValueError):
            schema = json.dumps(json.loads(schema), sort_keys=True)
    return json.dumps([entry.get("schemaType", "AVRO"), schema, entry.get("references", [])], sort_keys=True)


class _Error(Exception):
    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


class _Handler(BaseHTTPRequestHandler):
    store: _Store
    users: dict[str, str] | None

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _reply(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length) or b"{}")

    def _handle(self, method: str) -> None:
        with self.store.lock:
            self.store.requests.append(f"{method} {self.path}")
        if self.users is not None:
            auth = self.headers.get("Authorization", "")
            user, _, password = base64.b64decode(auth[6:] or b"").decode().partition(":")
            if not auth.startswith("Basic ") or self.users.get(user) != password:
                self._reply(401, {"error_code": 401, "message": "Unauthorized"})
                return
        path, _, query = self.path.partition("?")
        parts = [p for p in path.split("/") if p]
        try:
            self._reply(200, self._route(method, parts, dict(re.findall(r"([^&=]+)=([^&]*)", query))))
        except _Error as e:
            self._reply(e.status, {"error_code": e.code, "message": e.message})
        except (
            KeyError,
            ValueError,
            TypeError,
            IndexError,
        ) as e:  # a malformed request, as the registry says
            self._reply(422, {"error_code": 422, "message": f"Unprocessable request: {e}"})

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def _versions(self, subject: str) -> list[int]:
        from urllib.parse import unquote

        ids = self.store.subjects.get(unquote(subject))
        if not ids:
            raise _Error(404, 40401, f"Subject '{subject}' not found.")
        return ids

    def _version(self, subject: str, version: str) -> tuple[int, int]:
        ids = self._versions(subject)
        if version in ("latest", "-1"):
            return len(ids), ids[-1]
        if not version.isdigit() or not 1 <= int(version) <= len(ids):
            raise _Error(404, 40402, f"Version {version} not found.")
        return int(version), ids[int(version) - 1]

    def _entry(
        self, schema_id: int, subject: str | None = None, version: int | None = None
    ) -> dict[str, Any]:
        entry = dict(self.store.schemas[schema_id - 1])
        if entry.get("schemaType") == "AVRO":
            del entry["schemaType"]
        if not entry.get("references"):
            entry.pop("references", None)
        if subject is not None:
            entry.update(subject=subject, version=version, id=schema_id)
        return entry

    def _compatible(self, subject: str, entry: dict[str, Any], against: list[int]) -> str | None:
        level = self.store.config.get(subject, self.store.config[""])
        if level == "NONE" or entry.get("schemaType", "AVRO") != "AVRO":
            return None
        new = json.loads(entry["schema"])
        for schema_id in against:
            old = self.store.schemas[schema_id - 1]
            if old.get("schemaType", "AVRO") != "AVRO":
                return "the schema type differs from the subject's"
            why = avro_can_read(new, json.loads(old["schema"]))
            if why:
                return why
        return None

    def _route(self, method: str, parts: list[str], query: dict[str, str]) -> Any:  # noqa: PLR0911
        from urllib.parse import unquote

        store = self.store
        with store.lock:
            if parts == ["subjects"] and method == "GET":
                return sorted(store.subjects)
            if parts[:1] == ["schemas"] and parts[1:2] == ["ids"] and len(parts) == 3 and method == "GET":
                schema_id = int(parts[2])
                if not 1 <= schema_id <= len(store.schemas):
                    raise _Error(404, 40403, f"Schema {schema_id} not found")
                return self._entry(schema_id)
            if parts[:1] == ["config"]:
                key = unquote(parts[1]) if len(parts) > 1 else ""
                if method == "PUT":
                    store.config[key] = self._body()["compatibility"]
                    return {"compatibility": store.config[key]}
                return {"compatibilityLevel": store.config.get(key, store.config[""])}
            if parts[:2] == ["compatibility", "subjects"] and method == "POST":
                _, schema_id = self._version(parts[2], parts[4])
                why = self._compatible(unquote(parts[2]), self._body(), [schema_id])
                return {"is_compatible": why is None, **({"messages": [why]} if why else {})}
            if parts[:1] != ["subjects"] or len(parts) < 2:
                raise _Error(404, 404, f"no such endpoint: {method} /{'/'.join(parts)}")
            subject = unquote(parts[1])
            if len(parts) == 2 and method == "DELETE":
                return list(range(1, len(store.subjects.pop(subject, [])) + 1))
            if len(parts) == 2 and method == "POST":  # look up a schema under a subject
                entry = self._normalised(self._body())
                ids = self._versions(parts[1])
                for version, schema_id in enumerate(ids, start=1):
                    if _key(store.schemas[schema_id - 1]) == _key(entry):
                        return self._entry(schema_id, subject, version)
                raise _Error(404, 40403, "Schema not found")
            if len(parts) == 3 and parts[2] == "versions":
                if method == "GET":
                    return list(range(1, len(self._versions(parts[1])) + 1))
                entry = self._normalised(self._body())
                return {"id": self._register(subject, entry)}
            if len(parts) == 4 and parts[2] == "versions" and method == "GET":
                version, schema_id = self._version(parts[1], parts[3])
                return self._entry(schema_id, subject, version)
        raise _Error(404, 404, f"no such endpoint: {method} /{'/'.join(parts)}")

    @staticmethod
    def _normalised(body: dict[str, Any]) -> dict[str, Any]:
        entry = {
            "schema": body["schema"],
            "schemaType": body.get("schemaType") or "AVRO",
            "references": body.get("references") or [],
        }
        if entry["schemaType"] == "AVRO":
            try:
                json.loads(entry["schema"])
            except ValueError as e:
                raise _Error(422, 42201, f"Invalid schema: {e}") from None
        return entry

    def _register(self, subject: str, entry: dict[str, Any]) -> int:
        store = self.store
        key = _key(entry)
        existing = next((i + 1 for i, s in enumerate(store.schemas) if _key(s) == key), None)
        versions = store.subjects.get(subject, [])
        if existing is not None and existing in versions:
            return existing
        why = self._compatible(subject, entry, versions[-1:])
        if why:
            raise _Error(409, 409, f"Schema being registered is incompatible with an earlier schema: {why}")
        if existing is None:
            store.schemas.append(entry)
            existing = len(store.schemas)
        store.subjects.setdefault(subject, []).append(existing)
        return existing


class TestSchemaRegistry:
    """``with TestSchemaRegistry() as registry: registry.url`` -- a registry on 127.0.0.1, in a thread."""

    __test__ = False  # not a pytest test class

    def __init__(self, users: dict[str, str] | None = None, port: int = 0) -> None:
        """A registry on 127.0.0.1:``port`` (0: a free port), started by ``with``."""
        self._store = _Store()
        handler = type("Handler", (_Handler,), {"store": self._store, "users": users})
        self._server = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="test-schema-registry", daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def requests(self) -> list[str]:
        """Every request so far, ``METHOD /path``: what a client asked, and how often."""
        with self._store.lock:
            return list(self._store.requests)

    def __enter__(self) -> TestSchemaRegistry:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m tests.support.schema_registry [--port 8081]``: serve until Ctrl-C or SIGTERM."""
    parser = argparse.ArgumentParser(
        prog="python -m tests.support.schema_registry",
        description="sparkafka's test stand-in for a Schema Registry (the REST subset its client uses), on "
        "127.0.0.1, schemas in memory: for trying the registry formats, not for production.",
    )
    parser.add_argument(
        "--port", type=int, default=8081, help="port on 127.0.0.1 (default 8081; 0: a free one)"
    )
    args = parser.parse_args(argv)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):  # set explicitly: a background job inherits SIGINT ignored
        signal.signal(sig, lambda *_: stop.set())
    try:
        registry = TestSchemaRegistry(port=args.port)
    except OSError as e:
        print(f"schema registry: cannot listen on 127.0.0.1:{args.port}: {e.strerror}", file=sys.stderr)
        return 1
    with registry:
        print(f"schema registry (sparkafka's test stand-in) on {registry.url}; Ctrl-C to stop", flush=True)
        stop.wait()
    print("schema registry stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
