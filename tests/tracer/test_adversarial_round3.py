"""Issue 41, "Hardening, round three": one test per defect, named after it, asserting what a user sees
(one line and exit 2, the run marked with its cause, or the folder still read) and, where a run could be
damaged, that no file of any run changed (checksums before and after).

Real `tracer` processes on one tiny real PyTorch run (made once per session, copied per module), real
links, FIFOs and signals; the cases that train run the tiniest training there is."""

from __future__ import annotations

import hashlib
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

from tests.conftest import ctrl_c_reaches_python, run_tracer
from tracer.core.runfolder import RunFolder

SHARED = Path(__file__).resolve().parents[3] / "shared" / "fixtures"
PROFILE = ["profile", "--framework", "pytorch", "--model", "alexnet", "--dataset", "small", "--image-size", "64"]
PROFILE += ["--limit", "16", "--epochs", "1"]


def checksums(*roots: Path) -> dict[str, str]:
    """sha256 of every regular file under `roots` (links not followed): what "no run changed" compares."""
    out = {}
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.is_file() and not path.is_symlink():
                out[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def one_line(result: subprocess.CompletedProcess[str], *words: str) -> str:
    """The command refused with one line naming `words`, exit 2, no traceback."""
    assert result.returncode == 2, (result.returncode, result.stdout[-1000:], result.stderr[-2000:])
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    lines = [ln for ln in result.stderr.splitlines() if ln.strip() and "warning" not in ln]
    assert len(lines) == 1, result.stderr
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


@pytest.fixture(scope="module")
def runs(tiny_pytorch_run: RunFolder, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of two copies of the tiny run (A and B), read by every test and never written."""
    root = tmp_path_factory.mktemp("round3") / "runs"
    for suffix in ("a", "b"):
        run_id = f"{tiny_pytorch_run.run_id}-{suffix}"
        shutil.copytree(tiny_pytorch_run.path, root / run_id)
        record = json.loads((root / run_id / "run.json").read_text())
        record["run_id"] = run_id
        (root / run_id / "run.json").write_text(json.dumps(record))
    return root


@pytest.fixture
def unchanged(runs: Path) -> Iterator[None]:
    """Fails the test when any file of any run in `runs` changed."""
    before = checksums(runs)
    yield
    assert checksums(runs) == before


def run_a(runs: Path) -> Path:
    return sorted(runs.iterdir())[0]


def run_b(runs: Path) -> Path:
    return sorted(runs.iterdir())[1]


# 1. report --out holding links into a run, or a FIFO at one of its names


@pytest.mark.parametrize("how", ["symlink", "hardlink", "fifo"])
def test_d01_report_never_writes_through_links_or_into_fifos(
    how: str, runs: Path, tmp_path: Path, unchanged: None
) -> None:
    rep = tmp_path / "rep"
    rep.mkdir()
    run = run_a(runs)
    if how == "symlink":
        (rep / "index.html").symlink_to(run / "run.json")
    elif how == "hardlink":
        os.link(run / "events.jsonl", rep / "findings.md")
    else:
        os.mkfifo(rep / "diagnosis.md")
    one_line(run_tracer("report", str(runs), "--out", str(rep), timeout=300), str(rep))


# 3. hard links as outputs: compare --csv, view --screenshot, a planted export-trace temporary name


def test_d03_compare_csv_hard_link_of_run_json_is_refused(runs: Path, tmp_path: Path, unchanged: None) -> None:
    os.link(run_a(runs) / "run.json", tmp_path / "x.csv")
    one_line(run_tracer("compare", str(run_a(runs)), str(run_b(runs)), "--csv", str(tmp_path / "x.csv")), "hard link")


def test_d03_view_screenshot_hard_link_of_run_json_is_refused(runs: Path, tmp_path: Path, unchanged: None) -> None:
    os.link(run_a(runs) / "run.json", tmp_path / "x.png")
    one_line(run_tracer("view", str(run_a(runs)), "--screenshot", str(tmp_path / "x.png")), "hard link")


def test_d03_export_trace_ignores_a_planted_tmp_link(runs: Path, tmp_path: Path, unchanged: None) -> None:
    """A link at the old fixed temporary name `out.json.tmp` is left alone: the writer's name is unique."""
    os.link(run_a(runs) / "run.json", tmp_path / "out.json.tmp")
    (tmp_path / "out2.json.tmp").symlink_to(run_a(runs) / "events.jsonl")
    for out in ("out.json", "out2.json"):
        result = run_tracer("export-trace", str(run_a(runs)), str(tmp_path / out))
        assert result.returncode == 0, result.stderr
        assert json.loads((tmp_path / out).read_text())["traceEvents"]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary file left


# 4. a symlink loop as an output or as --dataset


@pytest.mark.parametrize(
    "command",
    [
        ["export-trace", "{run}", "{loop}"],
        ["compare", "{run}", "{run_b}", "--csv", "{loop}"],
        ["view", "{run}", "--screenshot", "{loop}.png"],
        ["report", "{run}", "--out", "{loop}"],
        ["import", str(SHARED / "hta" / "triton_example.json.gz"), "--out", "{loop}"],
        ["data", "make", "small", "--out", "{loop}"],
        ["profile", "--framework", "pytorch", "--model", "alexnet", "--dataset", "{loop}"],
        ["profile", "--framework", "pytorch", "--model", "alexnet", "--dataset", "small", "--out", "{loop}"],
    ],
    ids=lambda c: "-".join(w for w in c[:2] if not w.startswith("{") and "/" not in w),
)
def test_d04_symlink_loop_is_one_line(command: list[str], runs: Path, tmp_path: Path, unchanged: None) -> None:
    loop = tmp_path / "loop"
    (tmp_path / "other").symlink_to(loop)
    loop.symlink_to(tmp_path / "other")
    if command[0] == "view":
        (tmp_path / "loop.png").symlink_to(tmp_path / "loop2.png")
        (tmp_path / "loop2.png").symlink_to(tmp_path / "loop.png")
    args = [a.format(run=run_a(runs), run_b=run_b(runs), loop=loop) for a in command]
    one_line(run_tracer(*args, timeout=300), "loop")


# 17. a full disk leaves no temporary or empty file; two writers of one output share no temporary name


def test_d17_full_disk_leaves_no_partial_output(runs: Path, unchanged: None) -> None:
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    full = Path("/dev/full")
    one_line(run_tracer("export-trace", str(run_a(runs)), str(full)), "character device")


def test_d17_two_exports_to_one_output_both_whole(runs: Path, tmp_path: Path, unchanged: None) -> None:
    out = tmp_path / "one.json"
    cmd = [sys.executable, "-m", "tracer", "export-trace"]
    procs = [subprocess.Popen([*cmd, str(run), str(out)], stderr=subprocess.PIPE) for run in (run_a(runs), run_b(runs))]
    for p in procs:
        assert p.wait(timeout=300) == 0, p.stderr.read() if p.stderr else ""
    assert json.loads(out.read_text())["traceEvents"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.json"]


def test_d17_sigterm_during_import_leaves_no_half_folder(tmp_path: Path) -> None:
    """SIGTERM, SIGHUP, SIGQUIT at several instants of an import: afterwards the folder holds a whole run or nothing."""
    source = SHARED / "kineto-2021" / "worker0.1623143089861.pt.trace.json.gz"
    if not source.exists():
        pytest.skip(f"{source} is missing")
    for delay, sig in ((0.6, signal.SIGTERM), (1.2, signal.SIGHUP), (2.0, signal.SIGQUIT)):
        out = tmp_path / f"out-{delay}"
        cmd = [sys.executable, "-m", "tracer", "import", str(source), "--out", str(out)]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        time.sleep(delay)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
        assert "Traceback" not in err, err
        left = list(out.iterdir()) if out.exists() else []
        assert all((p / "run.json").is_file() for p in left), [p.name for p in left]


# 23. Ctrl-C while a command is still importing its modules


# What the `tracer` script runs once the interpreter is up (the interpreter's own start-up is Python's).
SCRIPT = "import sys; print('ready', file=sys.stderr, flush=True); from tracer.__main__ import entry; sys.exit(entry())"


@pytest.mark.parametrize("delay", [0.0, 0.05, 0.15, 0.3, 0.4])
def test_d23_ctrl_c_in_the_first_tenths_of_a_second_is_one_line(delay: float, tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, "runs", "--runs", str(tmp_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=ctrl_c_reaches_python,
    )
    assert proc.stderr is not None and proc.stderr.readline() == "ready\n"
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert "Traceback" not in err, err
    assert err.strip() in ("", "tracer: interrupted") or proc.returncode == 0, (proc.returncode, err)
