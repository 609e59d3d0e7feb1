"""The docs' tests' toolbox: code blocks of the site's pages, and the error sentences in sparkafka's code.

Used by ``tests/unit/test_docs.py`` (no broker) and ``tests/integration/test_docs_examples.py``.
"""

from __future__ import annotations

import ast
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).parents[2]
DOCS = ROOT / "docs"
SRC = ROOT / "src" / "sparkafka"

FENCE = re.compile(r"^```([a-z]*)[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)
NOT_RUN = re.compile(r"^<!-- not run: (.+?) -->$")
RUN_BY = re.compile(r"^<!-- run by (tests/[\w/]+\.py) -->$")


@dataclass(frozen=True)
class Block:
    """One fenced code block of a page."""

    page: str
    """The page's path in the repository (``docs/reading.md``, ``README.md``)."""
    line: int
    """The line of its opening fence (1-based), for messages."""
    lang: str
    code: str
    not_run: str | None = None
    """Why it cannot run (``<!-- not run: why -->`` on the line above its fence)."""
    run_by: str | None = None
    """The test that runs it (``<!-- run by tests/...py -->`` on the line above its fence)."""

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def pages() -> list[Path]:
    """Every Markdown page of the site."""
    return sorted(DOCS.rglob("*.md"))


def blocks(page: Path) -> list[Block]:
    """The fenced code blocks of ``page``, with the marker above each."""
    text = page.read_text()
    found = []
    for match in FENCE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        above = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        not_run, run_by = NOT_RUN.match(above), RUN_BY.match(above)
        found.append(
            Block(
                page=str(page.relative_to(ROOT)),
                line=line,
                lang=match.group(1),
                code=match.group(2),
                not_run=not_run.group(1) if not_run else None,
                run_by=run_by.group(1) if run_by else None,
            )
        )
    return found


def all_blocks() -> list[Block]:
    """The blocks of every page, and of the README."""
    return [b for page in [ROOT / "README.md", *pages()] for b in blocks(page)]


# -- shell -----------------------------------------------------------------------------------------------

SHELLS = ("bash", "shell", "sh")


def shell_commands(code: str) -> Iterator[str]:
    """The command lines of a shell block: continuation lines joined, comments and heredoc bodies left out."""
    lines = code.replace("\\\n", " ").splitlines()
    heredoc: str | None = None
    for raw in lines:
        if heredoc is not None:
            if raw.strip() == heredoc:
                heredoc = None
            continue
        line = raw.split(" #", 1)[0].strip() if not raw.lstrip().startswith("#") else ""
        if not line:
            continue
        found = re.search(r"<<-?'?(\w+)'?", line)
        if found:
            heredoc = found.group(1)
        yield line


def sparkafka_argv(command: str) -> list[str] | None:
    """The arguments of a ``sparkafka`` command line (after env assignments and a venv path); else None."""
    words = shlex.split(command.rstrip("&").strip())
    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
        words = words[1:]
    if not words or Path(words[0]).name != "sparkafka":
        return None
    return words[1:]


def output_commands(code: str) -> Iterator[str]:
    """The ``$ command`` lines of a text block (a terminal's transcript)."""
    for line in code.splitlines():
        if line.startswith("$ "):
            yield line[2:].split(" | ", 1)[0]


# -- error sentences ---------------------------------------------------------------------------------------

HOLE = "…"

ERROR_CLASSES = {
    "SparkafkaError",
    "ConfigError",
    "BrokerError",
    "AuthenticationError",
    "AuthorizationError",
    "PartitionsGoneError",
    "DataLossError",
    "DeliveryError",
    "TransactionError",
    "RegistryError",
    "NativeUnavailableError",
    "IntentWriteError",
    "LogRangeGoneError",
    # a record's fault, in a dead letter's header or a from_registry error column
    "RecordUnreadableError",
    "MismatchError",
    "FrameError",
    "ReaderCannotReadError",
}
"""Exceptions whose message reaches the user (sparkafka's hierarchy, and records' faults)."""


@dataclass(frozen=True)
class Sentence:
    """An error sentence as the code builds it, its variable parts as ``…``."""

    text: str
    where: str
    """file:line of the code that builds it."""


def _template(node: ast.expr | None, assigned: dict[str, ast.expr]) -> str:
    if node is None:
        return HOLE
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(
            _template(v, assigned) if not isinstance(v, ast.FormattedValue) else HOLE for v in node.values
        )
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _template(node.left, assigned) + _template(node.right, assigned)
    if isinstance(node, ast.Name) and node.id in assigned:
        return _template(assigned.pop(node.id), assigned)  # popped: a name assigned from itself ends
    return HOLE


def _normalise(text: str) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    return re.sub(f"(?:{HOLE}\\s*)+{HOLE}", HOLE, text)


def _called(call: ast.Call) -> str | None:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def _message_arg(call: ast.Call, name: str) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg == "message":
            return kw.value
    if name == "PartitionsGoneError":
        return call.args[1] if len(call.args) > 1 else None
    return call.args[0] if call.args else None


def _is_field_error(func: ast.expr) -> bool:
    """``fields.error(name, message)`` of pipeline.config (not a logger's ``log.error``)."""
    return isinstance(func, ast.Attribute) and not (
        isinstance(func.value, ast.Name) and func.value.id == "log"
    )


def _is_stderr(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "stderr"


class _Finder(ast.NodeVisitor):
    """The sentences of one module; messages built by other functions are left as ``builders`` to read."""

    def __init__(self, path: Path, plans: dict[str, int]) -> None:
        self.path = path
        self.plans = plans
        self.found: list[Sentence] = []
        self.builders: set[str] = set()
        """Functions whose returned strings are raised (``raise ConfigError(refusal_for(...))``)."""
        self.returns: dict[str, list[tuple[ast.expr, dict[str, ast.expr], int]]] = {}
        self.refusals: list[tuple[ast.expr, int]] = []
        """``refusal=`` arguments: plans whose refusal the CLI raises as a ConfigError."""
        self.assigned: dict[str, ast.expr] = {}
        self.extended: set[str] = set()
        self.constants: dict[str, ast.expr] = {}
        """The module's string constants (``REGISTER_FOR_EXACTLY_ONCE = "..."``), seen from its functions."""

    def visit_Module(self, node: ast.Module) -> None:
        for sub in node.body:
            target = sub.targets[0] if isinstance(sub, ast.Assign) and len(sub.targets) == 1 else None
            target = sub.target if isinstance(sub, ast.AnnAssign) else target
            value = sub.value if isinstance(sub, (ast.Assign, ast.AnnAssign)) else None
            is_text = isinstance(value, ast.Constant) and isinstance(value.value, str)
            if isinstance(target, ast.Name) and value is not None and is_text:
                self.constants[target.id] = value
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        outer, outer_ext = self.assigned, self.extended
        self.assigned, self.extended = {}, set()
        local: dict[str, ast.expr] = {}
        for sub in ast.walk(node):
            if isinstance(sub, ast.Assign) and len(sub.targets) == 1 and isinstance(sub.targets[0], ast.Name):
                local.setdefault(sub.targets[0].id, sub.value)
            elif (
                isinstance(sub, ast.AnnAssign) and isinstance(sub.target, ast.Name) and sub.value is not None
            ):
                local.setdefault(sub.target.id, sub.value)
            elif isinstance(sub, ast.AugAssign) and isinstance(sub.target, ast.Name):
                self.extended.add(sub.target.id)
        self.assigned = {**self.constants, **local}
        for sub in ast.walk(node):
            if isinstance(sub, ast.Return) and sub.value is not None:
                self.returns.setdefault(node.name, []).append((sub.value, dict(self.assigned), sub.lineno))
        self.generic_visit(node)
        self.assigned, self.extended = outer, outer_ext

    visit_AsyncFunctionDef = visit_FunctionDef  # noqa: N815 - ast.NodeVisitor's name

    def _add(self, text: str, line: int) -> None:
        self.found.append(Sentence(_normalise(text), f"{self.path.relative_to(ROOT)}:{line}"))

    def visit_Call(self, node: ast.Call) -> None:
        name = _called(node)
        refusal = next((kw.value for kw in node.keywords if kw.arg == "refusal"), None)
        if refusal is None and name in self.plans and len(node.args) > self.plans[name]:
            refusal = node.args[self.plans[name]]
        if refusal is not None and not (isinstance(refusal, ast.Constant) and refusal.value is None):
            self.refusals.append((refusal, node.lineno))
        if name in ERROR_CLASSES:
            arg = _message_arg(node, name)
            if arg is not None and not self._delegated(arg):
                text = _template(arg, dict(self.assigned))
                self._add(
                    text + (HOLE if isinstance(arg, ast.Name) and arg.id in self.extended else ""),
                    node.lineno,
                )
        elif name == "error" and _is_field_error(node.func) and len(node.args) == 2:
            # pipeline.config's _Fields.error(field, message): "<file>: <field> <message>"
            field, message = (_template(a, dict(self.assigned)) for a in node.args)
            self._add(f"{HOLE}: {field} {message}", node.lineno)
        elif name == "print" and any(k.arg == "file" and _is_stderr(k.value) for k in node.keywords):
            self._add(_template(node.args[0], dict(self.assigned)), node.lineno)
        self.generic_visit(node)

    def _delegated(self, arg: ast.expr) -> bool:
        """Whether the message was built elsewhere: a builder's result, a plan's refusal, a caught error."""
        if isinstance(arg, ast.Name) and arg.id in self.assigned:
            value = self.assigned[arg.id]
            if isinstance(value, ast.Call) and _called(value) not in ("str",):
                self.builders.add(_called(value) or "")
                return True
            if isinstance(value, (ast.Call, ast.Attribute)):
                return True  # str(e): a caught error's own sentence, found where it is raised
        if isinstance(arg, ast.Call):
            self.builders.add(_called(arg) or "")
            return True
        return (isinstance(arg, ast.Attribute) and arg.attr == "refusal") or (
            isinstance(arg, ast.Name) and (arg.id not in self.assigned)
        )


def error_sentences(root: Path = SRC) -> list[Sentence]:
    """Every error sentence sparkafka's code builds (``sparkafka.local``, development support, left out).

    A message is the first argument of an error of ``ERROR_CLASSES`` (or of pipeline.config's field
    errors, or a line the CLI prints to stderr), its variable parts ``…``; where it is another function's
    result (``raise ConfigError(running_query_refusal(...))``), that function's returned strings; where it is
    a plan's ``refusal``, every ``refusal=`` given.
    """
    trees = {
        path: ast.parse(path.read_text(), str(path))
        for path in sorted(root.rglob("*.py"))
        if "local" not in path.relative_to(root).parts
    }
    plans = {  # classes with a field ``refusal`` (ResolvePlan, ReplanPlan): its position among the fields
        node.name: fields.index("refusal")
        for tree in trees.values()
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
        and "refusal"
        in (
            fields := [
                f.target.id
                for f in node.body
                if isinstance(f, ast.AnnAssign) and isinstance(f.target, ast.Name)
            ]
        )
    }
    finders = []
    for path, tree in trees.items():
        finder = _Finder(path, plans)
        finder.visit(tree)
        finders.append(finder)
    builders = {b for f in finders for b in f.builders}
    for f in finders:
        for value, line in f.refusals:
            f._add(_template(value, {}), line)
        for name in builders & set(f.returns):
            for value, assigned, line in f.returns[name]:
                if not (isinstance(value, ast.Constant) and value.value is None):
                    f._add(_template(value, dict(assigned)), line)
    return [s for f in finders for s in f.found if re.search(r"[a-z]{2}", s.text)]  # not "…: …" wrappers


TROUBLESHOOTING_ENTRY = re.compile(r"^- (`+) ?(.+?) ?\1$", re.M)
"""An entry of docs/troubleshooting.md: a list item that is one code span, the sentence with ``HOLE``s."""


def troubleshooting_entries() -> list[str]:
    """The sentences docs/troubleshooting.md lists, each with ``HOLE`` where the code fills in a value."""
    return [m.group(2) for m in TROUBLESHOOTING_ENTRY.finditer((DOCS / "troubleshooting.md").read_text())]


def troubleshooting_entry(sentence: str) -> str | None:
    """The entry of docs/troubleshooting.md a sentence as printed is an instance of (None: not listed)."""
    for entry in troubleshooting_entries():
        pattern = ".+?".join(re.escape(part) for part in entry.split(HOLE))
        if re.fullmatch(pattern, sentence, re.S):
            return entry
    return None
