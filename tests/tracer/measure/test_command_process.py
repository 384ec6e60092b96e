"""`tracer profile -- COMMAND` behaves as the process a user expects (issue 52 item 6, issue 56 items 7,
17, 18): the tracer exits with the script's own status, forwards each terminal signal as itself, keeps its
summary out of the script's stdout, and a closed or vanished stdout neither crashes it nor hides a failure.
Each script prints its own truth; the tests hold the tracer to it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import run_tracer
from tracer.core.records import RunStatus
from tracer.core.runfolder import list_runs

SCRIPTS = Path(__file__).resolve().parent / "scripts"
TRACER = [sys.executable, "-m", "tracer"]


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}


def test_the_tracer_exits_with_the_scripts_own_status(tmp_path: Path) -> None:
    script = SCRIPTS / "exits_7.py"
    alone = subprocess.run([sys.executable, str(script)], capture_output=True, text=True)
    assert alone.returncode == 7 and "exiting with 7" in alone.stdout
    result = run_tracer("profile", "--out", str(tmp_path / "runs"), "--", sys.executable, str(script))
    assert result.returncode == alone.returncode, result.stderr[-2000:]
    assert "run failed" in result.stderr and "exited with code 7" in result.stderr
    (folder,) = list_runs(tmp_path / "runs")
    assert folder.read_record().outcome.exit_code == 7


def test_a_script_its_own_signal_ends_exits_128_plus_n(tmp_path: Path) -> None:
    code = "import os, signal; print('up', flush=True); os.kill(os.getpid(), signal.SIGKILL)"
    shell = f"{sys.executable} -c {code!r}; echo status $?"
    alone = subprocess.run(["bash", "-c", shell], capture_output=True, text=True)
    assert "status 137" in alone.stdout
    result = run_tracer("profile", "--out", str(tmp_path / "runs"), "--", sys.executable, "-c", code)
    assert result.returncode == 137, result.stderr[-2000:]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT])
def test_each_signal_reaches_the_script_as_itself(sig: signal.Signals, tmp_path: Path) -> None:
    checkpoint = tmp_path / "checkpoint"
    cmd = [*TRACER, "profile", "--out", str(tmp_path / "runs"), "--"]
    cmd += [sys.executable, str(SCRIPTS / "checkpoint_on_sigterm.py"), str(checkpoint)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    assert proc.stdout is not None
    assert proc.stdout.readline() == "training\n"  # the script is in its loop, its handlers set
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=300)
    said = f"got {sig.name}: checkpointed"
    assert said in out, err[-2000:]
    assert checkpoint.read_text() == sig.name  # the script's own handler ran, for this very signal
    assert proc.returncode == 128 + sig  # interrupted: 128 + N, as for the built-in workload
    (folder,) = list_runs(tmp_path / "runs")
    outcome = folder.read_record().outcome
    assert outcome.status is RunStatus.INTERRUPTED and outcome.exit_code == 3  # the script's own word, kept
    assert outcome.cause.startswith(f"{sig.name} ") and f"forwarded to the command as {sig.name}" in outcome.cause
    assert "Ctrl-C or SIGTERM" not in outcome.cause or sig in (signal.SIGINT, signal.SIGTERM)
    shown = run_tracer("show", "--runs", str(tmp_path / "runs"), folder.run_id)
    assert "interrupted (interrupted" not in shown.stdout and f"interrupted ({sig.name}" in shown.stdout


def test_a_redirected_stdout_holds_only_the_scripts_output(tmp_path: Path) -> None:
    script = SCRIPTS / "prints_to_stdout.py"
    alone = subprocess.run([sys.executable, str(script)], capture_output=True)
    assert alone.stdout.decode().splitlines()[-1] == "5 lines printed"
    kept = tmp_path / "out.txt"
    with kept.open("wb") as f:
        cmd = [*TRACER, "profile", "--out", str(tmp_path / "runs"), "--", sys.executable, str(script)]
        result = subprocess.run(cmd, stdout=f, stderr=subprocess.PIPE, text=True, env=_env(), timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert kept.read_bytes() == alone.stdout  # not a byte of the tracer's summary among them
    assert "run " in result.stderr and "wall" in result.stderr  # the summary went to stderr


def test_a_failed_run_piped_to_head_still_fails(tmp_path: Path) -> None:
    many = "import sys, time\nfor i in range(400): print(f'line {i}', flush=True); time.sleep(0.002)\nsys.exit(7)\n"
    script = tmp_path / "many_then_7.py"
    script.write_text(many)
    line = f"{' '.join(TRACER)} profile --out {tmp_path / 'runs'} -- {sys.executable} {script} | head -n 1"
    result = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {line}"], capture_output=True, text=True, env=_env(), timeout=300
    )
    assert result.stdout == "line 0\n"
    assert result.returncode == 7, result.stderr[-2000:]  # not the 0 of a quiet broken pipe
    assert "run failed" in result.stderr and "Traceback" not in result.stderr


def test_a_closed_stdout_is_no_traceback(tmp_path: Path) -> None:
    script = SCRIPTS / "prints_to_stdout.py"
    line = f"{' '.join(TRACER)} profile --out {tmp_path / 'runs'} -- {sys.executable} {script} >&-"
    result = subprocess.run(["bash", "-c", line], capture_output=True, text=True, env=_env(), timeout=300)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-2000:]
    (folder,) = list_runs(tmp_path / "runs")
    assert (folder.path / "raw" / "stdout.log").read_text().splitlines()[-1] == "5 lines printed"


def test_repeats_are_grouped_by_the_scripts_content_and_arguments(tmp_path: Path) -> None:
    from analyzers.figures.repeats import group_repeats

    script = tmp_path / "train.py"
    script.write_text("import sys\nprint('lr', sys.argv[1:])\n")
    out = tmp_path / "runs"
    for args in (["--lr", "0.1"], ["--lr", "0.1"], ["--lr", "0.2"]):
        result = run_tracer("profile", "--out", str(out), "--", sys.executable, str(script), *args)
        assert result.returncode == 0, result.stderr[-2000:]
    script.write_text("import sys\nprint('lr', sys.argv[1:], 'edited')\n")  # the same command, another script
    result = run_tracer("profile", "--out", str(out), "--", sys.executable, str(script), "--lr", "0.1")
    assert result.returncode == 0 and "edited" in result.stdout, result.stderr[-2000:]
    groups = group_repeats(sorted(list_runs(out), key=lambda f: f.run_id))
    sizes = sorted(len(g) for g in groups)
    assert sizes == [1, 1, 2], [[f.read_record().command for f in g] for g in groups]
    listed = run_tracer("runs", "--runs", str(out))
    assert "train.py --lr 0.1" in listed.stdout and "train.py --lr 0.2" in listed.stdout, listed.stdout


def test_a_forked_trees_memory_is_its_pss_with_rss_beside_it(tmp_path: Path) -> None:
    import re

    if not Path("/proc/self/smaps_rollup").exists():
        pytest.skip("no /proc/PID/smaps_rollup (Linux 4.14+): PSS is not measured here")
    result = run_tracer(
        "profile", "--out", str(tmp_path / "runs"), "--", sys.executable, str(SCRIPTS / "forked_workers.py")
    )
    assert result.returncode == 0, result.stderr[-2000:]
    said = re.search(r"RSS summed (\d+) MiB, PSS summed (\d+) MiB", result.stdout)
    assert said is not None, result.stdout
    rss, pss = float(said.group(1)), float(said.group(2))
    assert pss < 0.5 * rss  # the script's own truth: the shared pages make the sum of RSS a multiple of PSS
    (folder,) = list_runs(tmp_path / "runs")
    process = folder.samples("process")
    assert process is not None
    peak_pss = max(v for v in process.column("pss_mib").to_pylist() if v is not None)
    peak_rss = max(process.column("rss_mib").to_pylist())
    assert peak_pss == pytest.approx(pss, rel=0.15), (peak_pss, pss)  # the tree's peak: when all four lived
    assert peak_rss == pytest.approx(rss, rel=0.15), (peak_rss, rss)
    shown = run_tracer("show", "--runs", str(tmp_path / "runs"), folder.run_id)
    assert "PSS" in shown.stdout and "RSS summed over processes" in shown.stdout, shown.stdout


def _drain(fd: int, into: list[bytes]) -> None:
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: every writer closed its end
            return
        if not chunk:
            return
        into.append(chunk)


def test_on_a_terminal_the_command_gets_a_terminal(tmp_path: Path) -> None:
    import fcntl
    import pty
    import struct
    import termios
    import threading

    script = SCRIPTS / "terminal_or_pipe.py"
    ends = [pty.openpty() for _ in range(2)]  # the tracer's stdout and stderr, each a terminal 97 columns wide
    for _, theirs in ends:
        fcntl.ioctl(theirs, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 97, 0, 0))
    seen: list[list[bytes]] = [[], []]
    readers = [threading.Thread(target=_drain, args=(ours, got)) for (ours, _), got in zip(ends, seen)]
    for r in readers:
        r.start()
    cmd = [*TRACER, "profile", "--out", str(tmp_path / "runs"), "--", sys.executable, str(script)]
    proc = subprocess.Popen(cmd, stdout=ends[0][1], stderr=ends[1][1], env=_env())
    for _, theirs in ends:
        os.close(theirs)
    code = proc.wait(timeout=300)
    for r in readers:
        r.join(timeout=30)
    out, err = (b"".join(got).decode() for got in seen)
    assert code == 7, err[-2000:]  # the script's own status, through the terminal too
    assert "stdout is a terminal: True" in out and "columns 97" in out, out
    assert "stderr is a terminal: True" in err, err
    (folder,) = list_runs(tmp_path / "runs")
    kept = (folder.path / "raw" / "stdout.log").read_bytes()
    assert kept == b"stdout is a terminal: True\ncolumns 97\nfallback columns 97\n"  # as written: no CR added
    piped = run_tracer("profile", "--out", str(tmp_path / "piped"), "--", sys.executable, str(script))
    assert "stdout is a terminal: False" in piped.stdout and piped.returncode == 7  # a pipe stays a pipe


@pytest.mark.nsys
def test_a_killed_nsys_launcher_is_not_blamed_on_the_command(tmp_path: Path) -> None:
    import psutil

    from tests.tracer.measure.tracing.helpers import require_nsys

    require_nsys()
    code = "import time; print('training', flush=True); time.sleep(600)"
    cmd = [*TRACER, "profile", "--trace", "nsys", "--out", str(tmp_path / "runs"), "--", sys.executable, "-c", code]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    assert proc.stdout is not None
    assert proc.stdout.readline() == "training\n"  # the command runs under nsys
    try:
        children = psutil.Process(proc.pid).children()
        (launcher,) = [p for p in children if p.cmdline()[1:2] and p.cmdline()[1].endswith("nsys_launch.py")]
        launcher.kill()
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    (folder,) = list_runs(tmp_path / "runs")
    outcome = folder.read_record().outcome
    assert outcome.cause.startswith("the nsys launcher was killed by SIGKILL"), (outcome, err[-2000:])


def test_a_failed_builtin_run_piped_to_head_still_fails(tmp_path: Path) -> None:
    """The built-in workload's summary is on stdout: a reader that leaves after one line ends the printing,
    not the exit code of the failed run (issue 56 item 7)."""
    from tests.conftest import TINY, require_framework

    require_framework("pytorch")
    args = ["profile", "--framework", "pytorch", "--model", "alexnet", *TINY, "--inject-fault", "raise@2"]
    line = f"{' '.join(TRACER)} {' '.join(args)} --out {tmp_path / 'runs'} | head -n 1"
    result = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {line}"], capture_output=True, text=True, env=_env(), timeout=600
    )
    assert len(result.stdout.splitlines()) == 1
    assert result.returncode == 1, result.stderr[-2000:]
    assert "run failed" in result.stderr and "Traceback" not in result.stderr
