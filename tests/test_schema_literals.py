"""Column names and event kinds are declared once (tracer/core/schema.py, tracer/worker/schema.py):
spelling one as a bare string literal anywhere else in the code fails this test."""

from __future__ import annotations

import ast
from pathlib import Path

from tracer.core import schema

ROOT = Path(__file__).resolve().parents[1]
DECLARING = {ROOT / "tracer" / "core" / "schema.py", ROOT / "tracer" / "worker" / "schema.py"}
PACKAGES = ("tracer", "analyzers", "viewer", "benchmarks")
# Names that are also ordinary words of other vocabularies (a device called "gpu", a thread "name",
# a process "pid"): spelled elsewhere they are not necessarily the column, so only the names with a
# unit or a meaning of their own are held to the rule.
COMMON_WORDS = {
    "gpu",
    "core",
    "name",
    "pid",
    "tid",
    "threads",
    "processes",
    "t_ns",
    "epoch",
    "step",
    "images",
    "start_ns",
    "zone",
    "domain",
    "online",
    "sensor",
    "rail",
    "mhz",
    "probe",  # also a function's name (tracer.measure.tracing.cupti.probe) and the probe's package folder
    "rank",
}


def _column_names() -> set[str]:
    names = {c for table in schema.SAMPLE_TABLES.values() for c in table.columns}
    return names - COMMON_WORDS


def _event_kinds() -> set[str]:
    return set(schema.Event.ALL)


def _string_literals(tree: ast.AST) -> list[tuple[ast.Constant, ast.AST | None]]:
    """Every plain string constant with its parent, docstrings and f-string fragments left out."""
    parents: dict[ast.AST, ast.AST] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[child] = node
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            parent = parents.get(node)
            if isinstance(parent, ast.Expr) or isinstance(parent, ast.JoinedStr):
                continue  # a docstring, or text inside an f-string
            found.append((node, parent))
    return found


def _is_event_use(node: ast.AST, parent: ast.AST | None) -> bool:
    """An event kind counts where it names an event: emitted, compared with something called kind,
    or looked up in a collection keyed by kind. Free text (`stage="train"`, an SQL column `start`) does not."""
    if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Attribute) and parent.func.attr == "emit":
        return parent.args[:1] == [node]
    if isinstance(parent, ast.Compare):
        others = [parent.left, *parent.comparators]
        return any("kind" in ast.unparse(o).lower() for o in others if o is not node)
    if isinstance(parent, ast.Subscript) and parent.slice is node:  # by_kind["model"], not event["versions"]
        return isinstance(parent.value, ast.Name) and "kind" in parent.value.id.lower()
    return False


def test_no_column_or_event_kind_is_spelled_outside_the_schema() -> None:
    columns, kinds = _column_names(), _event_kinds()
    offences = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path in DECLARING:
                continue
            for node, parent in _string_literals(ast.parse(path.read_text(), str(path))):
                rel, line, value = path.relative_to(ROOT), node.lineno, node.value
                if value in columns:
                    offences.append(f"{rel}:{line}: column {value!r}")
                elif value in kinds and _is_event_use(node, parent):
                    offences.append(f"{rel}:{line}: event kind {value!r}")
    assert not offences, "use the names of tracer.core.schema:\n" + "\n".join(offences)


# Trace tables, the sources their rows come from and the activities a timeline row shows as are held to
# the same rule where a literal means one of them: compared with, passed as or keyed by something named
# after what it is (a `table`, a `source`, an `activity` or its colour). "nsys" the `--trace` backend and
# "python" the interpreter are other words, spelled freely.
TRACE_DECLARING = {
    ROOT / "analyzers" / "trace" / "table_names.py",
    ROOT / "analyzers" / "trace" / "tables.py",
    ROOT / "analyzers" / "timeline" / "gpu_timeline.py",
    ROOT / "analyzers" / "summaries" / "threads.py",  # declares the OS-runtime call kinds
}


def _trace_vocabularies() -> dict[str, tuple[set[str], tuple[str, ...]]]:
    from analyzers.summaries import threads
    from analyzers.timeline import gpu_timeline
    from analyzers.trace import tables as t

    tables = {*t.SCHEMAS, t.THREAD_TIMELINE}
    sources = {t.SOURCE_NSYS, t.SOURCE_KINETO, t.SOURCE_CUPTI, t.SOURCE_SAMPLER, t.SOURCE_PYSPY}
    activities = {
        *t.SAMPLER_ACTIVITIES,
        *gpu_timeline.GPU_ACTIVITIES,
        *gpu_timeline.NVTX_ACTIVITIES,
        *threads.OSRT_KINDS,
        threads.OTHER_OSRT,
        threads.PYTHON,
    }
    return {
        "trace table": (tables, ("table",)),
        "source": (sources, ("source",)),
        "activity": (activities, ("activit", "colour")),
    }


def _named(node: ast.AST | None, words: tuple[str, ...]) -> bool:
    return node is not None and any(w in ast.unparse(node).lower() for w in words)


def _is_vocabulary_use(node: ast.AST, parent: ast.AST | None, grand: ast.AST | None, words: tuple[str, ...]) -> bool:
    if isinstance(parent, ast.Compare):
        return any(_named(o, words) for o in [parent.left, *parent.comparators] if o is not node)
    if isinstance(parent, ast.keyword):
        return any(w in (parent.arg or "") for w in words)
    if isinstance(parent, ast.Call):
        return node in parent.args and _named(parent.func, words)
    if isinstance(parent, ast.Subscript) and parent.slice is node:
        return _named(parent.value, words)
    if (isinstance(parent, ast.Dict) and node in parent.keys) or isinstance(parent, (ast.Tuple, ast.List)):
        # ACTIVITY_COLOURS = {"busy": ...}, TRACE_TABLES = ("cuda_api", ...)
        return isinstance(grand, (ast.Assign, ast.AnnAssign)) and _named(
            grand.targets[0] if isinstance(grand, ast.Assign) else grand.target, words
        )
    return False


def test_no_trace_table_source_or_activity_is_spelled_outside_its_declaration() -> None:
    vocabularies = _trace_vocabularies()
    offences = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path in DECLARING | TRACE_DECLARING:
                continue
            tree = ast.parse(path.read_text(), str(path))
            parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
            for node, parent in _string_literals(tree):
                for what, (names, words) in vocabularies.items():
                    if node.value in names and _is_vocabulary_use(node, parent, parents.get(parent), words):  # type: ignore[arg-type]
                        offences.append(f"{path.relative_to(ROOT)}:{node.lineno}: {what} {node.value!r}")
    assert not offences, "use the names of analyzers.trace.tables (and gpu_timeline, threads):\n" + "\n".join(offences)


def test_no_environment_variable_of_the_worker_boundary_is_spelled_outside_the_worker_schema() -> None:
    """The variables the tracer sets for the worker (tracer/worker/schema.py `*_ENV`, and the trace kinds
    that are not also `--trace` backend names) are spelled once; tracer, analyzers, viewer and the worker's
    other modules take them from there."""
    from tracer.worker import schema as worker_schema

    names = {v for k, v in vars(worker_schema).items() if k.endswith("_ENV") and isinstance(v, str)}
    names.add(worker_schema.NSYS_WINDOW_TRACE)
    assert {"TRACER_TRACE", "DL_TRACER_PID"} <= names
    offences = []
    for package in (*PACKAGES, "tests"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if path in DECLARING or path == Path(__file__).resolve():
                continue
            for node, _parent in _string_literals(ast.parse(path.read_text(), str(path))):
                if node.value in names:
                    offences.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    assert not offences, "use the names of tracer/worker/schema.py (through tracer.core.schema):\n" + "\n".join(
        offences
    )
