"""Issue 56, "Hardening, round four": a user's command never blinds, hangs or escapes its run. Real
`tracer profile -- COMMAND` processes on real scripts that print their own truth (what they logged, how
many steps they took, which directory they ran in), a real tmpfs filled during a run, real daemons."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import run_tracer
from tracer.core.runfolder import list_runs

KINETO_LINE = json.dumps({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "fake_gemm", "ts": 1, "dur": 5,
                                           "pid": 0, "tid": 7}]})  # fmt: skip


def _tracer_in(cwd: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """`tracer ARGS` started in `cwd` (its relative `--out` is relative to there), as a user runs it."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[3]), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-m", "tracer", *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd
    )


@pytest.mark.parametrize(
    "first_line",
    ["[transformers] loading weights", "[2026-12-06 05:00:00] INFO start", '{"loss": 1.25, "step": 1}',
     "{'loss': 1.25}", KINETO_LINE],
)  # fmt: skip
def test_01_a_commands_logs_are_never_read_as_its_trace(first_line: str, tmp_path: Path) -> None:
    """What a command prints, on stdout or stderr, stays its log: the run ingests nothing from it, and
    `analyze` and `export-trace` of the run work (a printed Chrome trace is no GPU kernel of the run)."""
    script = tmp_path / "talks.py"
    script.write_text(f"import sys\nprint({first_line!r})\nprint({first_line!r}, file=sys.stderr)\n")
    out = tmp_path / "runs"
    result = run_tracer("profile", "--out", str(out), "--", sys.executable, str(script))
    assert result.returncode == 0, result.stderr[-2000:]
    assert "not ingested" not in result.stderr, result.stderr
    assert first_line in result.stdout
    (folder,) = list_runs(out)
    assert (folder.raw_dir / "stdout.log").read_text().startswith(first_line[:10])
    tables = {p.name for p in folder.path.glob("*.parquet")}
    assert tables <= {"thread_timeline.parquet"}, tables  # the sampled threads only: no trace was written
    analyzed = run_tracer("analyze", str(folder.path))
    assert analyzed.returncode == 0 and "Traceback" not in analyzed.stderr, analyzed.stderr[-2000:]
    assert "fake_gemm" not in analyzed.stdout
    exported = run_tracer("export-trace", str(folder.path), "--out", str(tmp_path / "t.json"))
    assert "Traceback" not in exported.stderr and "stdout.log" not in exported.stderr, exported.stderr
    if exported.returncode == 0:
        assert "fake_gemm" not in (tmp_path / "t.json").read_text()


CHDIR_LOOP = """\
import os, subprocess, sys
from dltracer_probe import steps
elsewhere = sys.argv[1]
os.chdir(elsewhere)  # as a script that works in its data folder does
for epoch in range(2):
    for _ in steps(range(3)):
        pass
if len(sys.argv) > 2:  # a child in yet another folder, probed as its parent is
    subprocess.run([sys.executable, sys.argv[2]], cwd=os.path.dirname(sys.argv[2]), check=True)
print("steps", 6 + (4 if len(sys.argv) > 2 else 0), "in", os.getcwd())
"""
CHILD_LOOP = """\
from dltracer_probe import steps
for _ in steps(range(4)):
    pass
"""


@pytest.mark.parametrize("with_child", [False, True])
def test_02_a_relative_run_folder_keeps_the_steps_of_a_script_that_chdirs(with_child: bool, tmp_path: Path) -> None:
    """`--out runs` (relative), a script that changes directory before its loop, and a child it starts in a
    third directory: every step the script says it took is in the run's steps table."""
    script, elsewhere, child_dir = tmp_path / "loop.py", tmp_path / "elsewhere", tmp_path / "child"
    elsewhere.mkdir()
    child_dir.mkdir()
    script.write_text(CHDIR_LOOP)
    (child_dir / "child.py").write_text(CHILD_LOOP)
    extra = [str(child_dir / "child.py")] if with_child else []
    result = _tracer_in(tmp_path, "profile", "--out", "runs", "--", sys.executable, str(script), str(elsewhere), *extra)
    assert result.returncode == 0, result.stderr[-2000:]
    said = next(line for line in result.stdout.splitlines() if line.startswith("steps "))
    (folder,) = list_runs(tmp_path / "runs")
    steps = folder.samples("steps")
    assert steps is not None, "no steps table"
    assert steps.num_rows == int(said.split()[1]), (said, steps.num_rows)
    assert not (elsewhere / "runs").exists() and not (child_dir / "runs").exists()
