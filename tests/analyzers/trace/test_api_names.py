"""CUDA API names are declared once (`analyzers.trace.api_names`): the suffix rule, the display and match names,
and the launch, sync and allocation sets. A second spelling anywhere in the tool's code fails here."""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

import duckdb
import pytest

from analyzers.trace import api_names

ROOT = Path(__file__).resolve().parents[3]
DECLARED = ROOT / "analyzers" / "trace" / "api_names.py"
SUFFIX_SPELLINGS = ("_v\\d", "_v[0-9]", '"_v"', "'_v'")


def _sources() -> list[Path]:
    """The tool's own modules (the worker runs elsewhere and declares nothing of the analyzers)."""
    files = [p for top in ("analyzers", "tracer", "viewer") for p in (ROOT / top).rglob("*.py")]
    return [p for p in files if p != DECLARED and "worker" not in p.relative_to(ROOT).parts]


def _strings(path: Path) -> list[tuple[int, str, str]]:
    """(line, source text, value) of every string literal in a module."""
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        if tok.type == tokenize.STRING:
            try:
                value = ast.literal_eval(tok.string)
            except (ValueError, SyntaxError):  # an f-string: its text is what matters
                value = tok.string
            out.append((tok.start[0], tok.string, value if isinstance(value, str) else ""))
    return out


def test_the_names_and_the_suffix_rule_are_spelled_only_in_api_names() -> None:
    names = api_names.LAUNCH_CALLS | api_names.SYNC_CALLS | api_names.ALLOC_CALLS
    found = []
    for path in _sources():
        for line, text, value in _strings(path):
            if (
                value in names
                or any(s in text for s in SUFFIX_SPELLINGS if s.startswith("_"))
                or text in SUFFIX_SPELLINGS
            ):
                found.append(f"{path.relative_to(ROOT)}:{line}: {text}")
        source = path.read_text()
        if "[-6:-4]" in source:
            found.append(f"{path.relative_to(ROOT)}: nsys's display rule written again")
    assert not found, "declare CUDA API names once, in analyzers/trace/api_names.py:\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("name", "shown", "matched"),
    [
        ("cudaLaunchKernel_v7000", "cudaLaunchKernel", "cudaLaunchKernel"),
        ("cudaLaunchKernelExC_v11060", "cudaLaunchKernelExC_v11060", "cudaLaunchKernelExC"),  # nsys keeps 5 digits
        ("cudaLaunchKernelExC", "cudaLaunchKernelExC", "cudaLaunchKernelExC"),  # Kineto's spelling
        ("cudaMemcpyAsync", "cudaMemcpyAsync", "cudaMemcpyAsync"),
        ("my_v1", "my_v1", "my_v1"),  # too few digits: no version
    ],
)
def test_display_and_match_names(name: str, shown: str, matched: str) -> None:
    assert api_names.display_name(name) == shown
    assert api_names.match_name(name) == matched


def test_the_sql_condition_is_the_python_rule() -> None:
    names = ["cudaLaunchKernel_v7000", "cudaLaunchKernelExC_v11060", "cuLaunchKernel", "cudaStreamSynchronize_v3020",
             "cudaMalloc", "cudaGraphLaunch_v10000", "cudaLaunchKernelX"]  # fmt: skip
    con = duckdb.connect()
    con.execute("CREATE TABLE c (name VARCHAR)")
    con.executemany("INSERT INTO c VALUES (?)", [[n] for n in names])
    for declared in (api_names.LAUNCH_CALLS, api_names.SYNC_CALLS, api_names.ALLOC_CALLS):
        rows = con.execute(f"SELECT name FROM c WHERE {api_names.sql_in('name', declared)}").fetchall()
        assert sorted(r[0] for r in rows) == sorted(n for n in names if api_names.match_name(n) in declared)
    launches = con.execute(f"SELECT count(*) FROM c WHERE {api_names.sql_in('name', api_names.LAUNCH_CALLS)}")
    assert launches.fetchone() == (4,)
