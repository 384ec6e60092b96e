"""What a user reads: analyze tables with units, CSV without float noise, pipes into `head`, --version,
`runs` on a narrow terminal."""

from __future__ import annotations

import csv
import fcntl
import io
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from analyzers.render.display import short_name
from analyzers.trace.kernel_names import WORDS_WIDTH
from tests.conftest import run_tracer
from tracer.core.runfolder import RunFolder, list_runs, short_ids

KERNEL = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
    "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)"
)


@pytest.mark.parametrize("fmt", ["table", "csv", "json"])
def test_piped_into_head_ends_quietly(tiny_pytorch_run: RunFolder, fmt: str) -> None:
    cmd = f"set -o pipefail; {sys.executable} -m tracer analyze {tiny_pytorch_run.path} --format {fmt} | head -1"
    result = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert len(result.stdout.splitlines()) == 1


def test_thread_table_has_units_and_plain_pids(tiny_pytorch_run: RunFolder) -> None:
    result = run_tracer("analyze", str(tiny_pytorch_run.path), "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert rows and all(int(r["tid"]) != 0 for r in rows)
    assert not [v for r in rows for v in r.values() if re.fullmatch(r"-?\d+\.\d{16,}", v or "")]  # no float noise
    table = run_tracer("analyze", str(tiny_pytorch_run.path))
    assert table.returncode == 0
    header = next(ln for ln in table.stdout.splitlines() if "thread_name" in ln)
    assert re.search(r"cpu \((ns|µs|ms|s)\)", header) and re.search(r"active \((ns|µs|ms|s)\)", header)
    pid = rows[0]["pid"]
    assert pid in table.stdout and f"{int(pid):,}" not in table.stdout.replace(pid, "")


def test_imported_nsys_trace_has_no_phantom_thread_0(tmp_path: Path, real_fixtures: Path) -> None:
    out = tmp_path / "runs"
    imported = run_tracer(
        "import", str(real_fixtures / "nsys-h100/resnet18_train_nsys2025.3.1.sqlite"), "--out", str(out)
    )
    assert imported.returncode == 0, imported.stderr[-2000:]
    (run,) = list_runs(out)
    result = run_tracer("analyze", str(run.path), "--format", "json")
    assert result.returncode == 0, result.stderr[-2000:]
    data = json.loads(result.stdout)
    assert data["threads"] and all(r["tid"] != 0 for r in data["threads"])
    kernels = data["kernels"]
    table = run_tracer("analyze", str(run.path), "--top", "3")
    assert kernels and kernels[0]["short_name"] in table.stdout
    assert all(len(k["short_name"]) <= WORDS_WIDTH for k in kernels)


def test_short_kernel_name() -> None:
    assert short_name(KERNEL) == "at::native::vectorized_elementwise_kernel<…>"
    assert short_name("cudaLaunchKernel") == "cudaLaunchKernel"
    long = "ns::" * 30 + "kernel"
    assert len(short_name(long)) <= 60 and short_name(long).endswith("kernel")


def test_version() -> None:
    result = run_tracer("--version")
    assert result.returncode == 0 and re.fullmatch(r"tracer \d+\.\d+\.\d+\S*\n", result.stdout)


def _in_terminal(args: list[str], columns: int) -> str:
    """Runs `tracer ARGS` on a real pseudo-terminal `columns` wide (as a user's narrow window) and returns
    what it printed."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    proc = subprocess.Popen([sys.executable, "-m", "tracer", *args], stdout=slave, stderr=slave, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=120)
    os.close(master)
    text = b"".join(chunks).decode(errors="replace")
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text).replace("\r", "")


def test_runs_on_a_60_column_terminal_names_the_run_without_cutting(tiny_pytorch_run: RunFolder) -> None:
    """The whole id, or its tail that every command takes (said under the table); never an id cut short."""
    shown = _in_terminal(["runs", "--runs", str(tiny_pytorch_run.path.parent)], 60)
    tail = short_ids([r.run_id for r in list_runs(tiny_pytorch_run.path.parent)])[tiny_pytorch_run.run_id]
    words = " ".join(shown.split())  # the note under the table wraps where the folder's path ends
    assert tiny_pytorch_run.run_id in shown or (tail in shown.split() and "id: the run id's" in words), shown
    assert all(len(line) <= 60 for line in shown.splitlines()), shown
    assert "…" not in shown
    show = _in_terminal(["show", str(tiny_pytorch_run.path)], 60)
    assert f"folder {tiny_pytorch_run.path}" in show.replace("\n", "")  # the line users copy, whole


def test_runs_show_and_diagnose_fit_a_120_column_terminal(real_fixtures: Path) -> None:
    """Issue 28 item 3: at 120 columns `runs` is one table with the filter columns, `show` and `diagnose`
    wrap their advice instead of cutting it."""
    fixtures = str(real_fixtures / "gpu-h100")
    runs = _in_terminal(["runs", "--runs", fixtures], 120)
    assert all(len(line) <= 120 for line in runs.splitlines()), runs
    header = next(line for line in runs.splitlines() if line.startswith("id "))
    assert all(word in header for word in ("trace", "limit", "status", "diverged")), header
    ids = short_ids([r.run_id for r in list_runs(real_fixtures / "gpu-h100")])
    assert all(f"\n{tail} " in runs for tail in ids.values()), runs  # 120 columns: the ids' tails
    assert "id: the run id's tail, which every command takes" in runs
    for command in ("show", "diagnose"):
        shown = _in_terminal([command, "--runs", fixtures, "85cf"], 80)
        # the folder's path alone stays one line (the terminal wraps it softly, so a copy takes it whole)
        assert all(len(line) <= 80 for line in shown.splitlines() if not line.startswith("folder /")), shown
        assert "…" not in shown and "..." in shown
        assert "torch.utils.data.DataLoader(prefetch_factor=...) (tracer --prefetch)" in " ".join(shown.split())


def test_show_piped_is_as_wide_as_its_text(real_fixtures: Path) -> None:
    result = run_tracer("show", str(real_fixtures / "gpu-h100/20261125-000159-pytorch-alexnet-big-gpu-b100-85cf"))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert not [ln for ln in lines if ln != ln.rstrip()], "a piped line ends in padding"
    assert any(ln.startswith("  - input-bound: ") and "(tracer --prefetch)" in ln for ln in lines)  # one line, whole
