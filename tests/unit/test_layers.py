"""The package layout's one rule, read from the code's own imports: nothing imports upward.

Layers, bottom to top: the base (errors, structs, metrics files, Kafka's algorithms), the client layer and
what differs between PySpark lines (``spark_lines``), the
product's parts (source, sink, registry, and the options reader they share), the Spark-facing adapters, the
operator tools, the pipeline runner, development support (``sparkafka.local``: only the CLI's ``broker``
and ``demo`` import it), the CLI. The package root (``sparkafka``: ``register``, the metrics readers)
is the user's entry point and is imported by nothing inside but the CLI and ``local``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import sparkafka

ROOT = Path(sparkafka.__file__).parent

LAYERS: dict[str, int] = {
    "errors": 0,
    "structs": 0,
    "options": 2,
    "metrics_files": 0,
    "kafka": 0,
    "client": 1,
    "spark_lines": 1,
    "registry": 2,
    "source": 2,
    "sink": 2,
    "datasource": 3,
    "driver_facts": 3,
    "stream_writer": 3,
    "spark_errors": 3,
    "spark_logs": 3,
    "ops": 4,
    "pipeline": 5,
    "local": 6,
    "cli": 7,
}


def _part(module: str) -> str:
    """``sparkafka.source.fetch`` -> ``source``; the root package itself -> ``""``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _is_part(name: str) -> bool:
    return (ROOT / f"{name}.py").exists() or (ROOT / name / "__init__.py").exists()


def _imports() -> list[tuple[str, str]]:
    """(importing module, imported module) for every ``sparkafka`` import, lazy ones included."""
    edges = []
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT.parent).with_suffix("")
        module = ".".join(rel.parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == "sparkafka":
                # from sparkafka import x: a part of the package, or a name of the root's
                edges += [
                    (module, f"sparkafka.{a.name}" if _is_part(a.name) else "sparkafka") for a in node.names
                ]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                if node.module.split(".")[0] == "sparkafka":
                    edges.append((module, node.module))
            elif isinstance(node, ast.Import):
                edges += [(module, a.name) for a in node.names if a.name.split(".")[0] == "sparkafka"]
    return edges


def test_every_top_level_part_has_a_layer() -> None:
    parts = {p.stem for p in ROOT.iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()}
    assert parts - {"__init__"} == set(LAYERS)


def test_nothing_imports_upward() -> None:
    upward = []
    for importer, imported in _imports():
        src, dst = _part(importer), _part(imported)
        if src in ("", dst):
            continue
        if dst == "":  # the package root: the user's entry point
            if src not in ("cli", "local"):
                upward.append(f"{importer} imports the package root")
            continue
        if LAYERS[dst] > LAYERS[src]:
            upward.append(f"{importer} ({src}, layer {LAYERS[src]}) imports {imported} (layer {LAYERS[dst]})")
    assert upward == []
