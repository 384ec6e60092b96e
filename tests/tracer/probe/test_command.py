"""`tracer profile -- COMMAND` on commands that need no framework: output passed through unchanged,
refusals in one line, the user's own sitecustomize, the marker, a failing script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import run_tracer
from tracer.core.records import RunStatus
from tracer.core.runfolder import list_runs
from tracer.core.schema import PROBE, PROBE_RUN_DIR_ENV, Event, Probe

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
NOISY = """\
import sys
sys.stdout.buffer.write(b"line one\\n\\x00\\xff raw bytes \\r\\n" + bytes(range(256)))
sys.stdout.flush()
sys.stderr.buffer.write(b"to stderr \\xe2\\x9c\\x93\\n")
print("no newline at the end", end="")
"""


def _events(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines()]


def test_output_is_byte_equal_with_and_without_the_tracer(tmp_path: Path) -> None:
    script = tmp_path / "noisy.py"
    script.write_text(NOISY)
    alone = subprocess.run([sys.executable, str(script)], capture_output=True)
    result = subprocess.run(
        [sys.executable, "-m", "tracer", "profile", "--out", str(tmp_path / "runs"), "--", sys.executable, str(script)],
        capture_output=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith(alone.stdout)  # the command's bytes first, then the tracer's summary
    (folder,) = list_runs(tmp_path / "runs")
    assert (folder.path / "raw" / "stdout.log").read_bytes() == alone.stdout
    assert (folder.path / "raw" / "stderr.log").read_bytes() == alone.stderr
    assert alone.stderr in result.stderr
    record = folder.read_record()
    assert record.command is not None and record.command.argv[-1] == str(script)
    assert record.command.interpreter  # the probe's start event names the interpreter


def test_a_command_that_cannot_start_is_one_line_and_no_folder(tmp_path: Path) -> None:
    for command in (["no-such-program-xyz"], [str(tmp_path / "missing.py")], [str(tmp_path)]):
        result = run_tracer("profile", "--out", str(tmp_path / "runs"), "--", *command)
        assert result.returncode == 2, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and "cannot start" in result.stderr
        assert not (tmp_path / "runs").exists() or not list_runs(tmp_path / "runs")


def test_builtin_options_beside_a_command_are_refused(tmp_path: Path) -> None:
    result = run_tracer("profile", "--model", "alexnet", "--batch", "8", "--", sys.executable, "-c", "pass")
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert "--model, --batch describe the built-in workload" in result.stderr


def test_the_users_sitecustomize_still_runs_and_the_marker_times_steps(tmp_path: Path) -> None:
    own = tmp_path / "own"
    own.mkdir()
    mark = tmp_path / "sitecustomize-ran"
    (own / "sitecustomize.py").write_text(f"open({str(mark)!r}, 'w').write('yes')\n")
    env = {**os.environ, "PYTHONPATH": f"{os.environ.get('PYTHONPATH', '')}{os.pathsep}{own}"}
    cmd = [sys.executable, "-m", "tracer", "profile", "--out", str(tmp_path / "runs"), "--"]
    cmd += [sys.executable, str(EXAMPLES / "marker_loop.py"), "--items", "2048", "--epochs", "2"]
    result = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert mark.read_text() == "yes"
    (folder,) = list_runs(tmp_path / "runs")
    steps = folder.samples("steps")
    assert steps is not None and set(steps.column(PROBE).to_pylist()) == {Probe.MARKER}
    assert sorted(set(steps.column("epoch").to_pylist())) == [1, 2]
    assert steps.num_rows == 2 * (2048 // 256)
    assert [e["epoch"] for e in _events(folder.path) if e["kind"] == Event.EPOCH_END] == [1, 2]
    shown = run_tracer("show", "--runs", str(tmp_path / "runs"), folder.run_id)
    assert "marker_loop.py" in shown.stdout and "seen by the probe (marker)" in shown.stdout


def test_the_marker_is_a_no_op_outside_the_tracer() -> None:
    done = subprocess.run([sys.executable, str(EXAMPLES / "marker_loop.py"), "--items", "512"], capture_output=True)
    assert done.returncode == 0 and b"epoch 2: mse" in done.stdout


def test_probe_off_runs_the_command_unprobed(tmp_path: Path) -> None:
    cmd = ["profile", "--probe", "off", "--out", str(tmp_path / "runs"), "--"]
    result = run_tracer(*cmd, sys.executable, str(EXAMPLES / "marker_loop.py"), "--items", "512")
    assert result.returncode == 0, result.stderr[-2000:]
    (folder,) = list_runs(tmp_path / "runs")
    assert folder.samples("steps") is None
    record = folder.read_record()
    assert record.command is not None and record.command.probe == "off"
    assert folder.samples("process") is not None  # the sampler measured it all the same


LEAVER = """\
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
open(sys.argv[1], "w").write(str(child.pid))
time.sleep(float(sys.argv[2]))
"""


def _gone(pid: int, within_s: float = 60) -> bool:
    import psutil

    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.2)
    return False


def test_a_process_that_left_the_group_does_not_outlive_the_run(tmp_path: Path) -> None:
    """A command's child in a session of its own (as torchrun starts its ranks) is ended with the run."""
    script, pid_file = tmp_path / "leaver.py", tmp_path / "pid"
    script.write_text(LEAVER)
    result = run_tracer(
        "profile", "--out", str(tmp_path / "runs"), "--", sys.executable, str(script), str(pid_file), "0"
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert _gone(int(pid_file.read_text()), 5)


def test_nor_when_the_tracer_itself_is_killed(tmp_path: Path) -> None:
    script, pid_file = tmp_path / "leaver.py", tmp_path / "pid"
    script.write_text(LEAVER)
    cmd = [sys.executable, "-m", "tracer", "profile", "--out", str(tmp_path / "runs"), "--"]
    tracer = subprocess.Popen([*cmd, sys.executable, str(script), str(pid_file), "600"], stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
            time.sleep(0.2)
        tracer.kill()  # no finally of the tracer runs: the lifeguard alone ends the command
        tracer.wait()
        assert _gone(int(pid_file.read_text()))
    finally:
        if tracer.poll() is None:
            tracer.kill()


def test_the_probe_needs_nothing_of_the_tool_on_the_path(tmp_path: Path) -> None:
    """In an interpreter where no `tracer` package is importable (the machine's own Python, not the tool's
    environment), the probe starts, times the marked loop, and leaves no `tracer` module behind."""
    from tracer.measure.command import probe_pythonpath

    bare = Path(sys.base_prefix) / "bin" / "python3"
    script = "import sys\nfrom dltracer_probe import steps\nfor _ in steps(range(5)):\n    pass\n"
    script += "print(sorted(m for m in sys.modules if m.split('.')[0] == 'tracer'))\n"
    (tmp_path / "samples").mkdir()
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(probe_pythonpath()), PROBE_RUN_DIR_ENV: str(tmp_path)}
    done = subprocess.run([str(bare), "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout.strip() == "[]"
    (steps,) = (tmp_path / "samples").glob("steps-*.csv")
    assert len(steps.read_text().splitlines()) == 1 + 5  # the header and the five steps


@pytest.mark.parametrize(
    ("option", "status"),
    [(["--timeout", "3"], RunStatus.TIMEOUT), (["--stall-after", "3"], RunStatus.STALLED)],
)
def test_a_command_that_sleeps_ends_as_the_built_in_workload_would(
    tmp_path: Path, option: list[str], status: RunStatus
) -> None:
    out = tmp_path / "runs"
    result = run_tracer(
        "profile", *option, "--out", str(out), "--", sys.executable, "-c", "import time; time.sleep(600)"
    )
    assert result.returncode == 1, result.stderr[-2000:]
    (folder,) = list_runs(out)
    assert folder.read_record().outcome.status is status


def test_repeat_makes_one_folder_per_run_of_the_command(tmp_path: Path) -> None:
    out = tmp_path / "runs"
    result = run_tracer("profile", "--repeat", "2", "--out", str(out), "--", sys.executable, "-c", "print('hi')")
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.count("hi\n") == 2
    runs = list_runs(out)
    assert len(runs) == 2 and all(r.read_record().command.argv[-1] == "print('hi')" for r in runs)  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("signal_name", "status", "cause"),
    [
        ("SIGSEGV", RunStatus.FAILED, "the command crashed with SIGSEGV"),
        ("SIGKILL", RunStatus.KILLED, "the command was killed by SIGKILL, from another process or the kernel's"),
    ],
)
def test_a_signal_that_ends_a_command_is_named(signal_name: str, status: RunStatus, cause: str, tmp_path: Path) -> None:
    code = f"import os, signal; print('up', flush=True); os.kill(os.getpid(), signal.{signal_name})"
    result = run_tracer("profile", "--out", str(tmp_path / "runs"), "--", sys.executable, "-c", code)
    assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr[-2000:]
    (folder,) = list_runs(tmp_path / "runs")
    outcome = folder.read_record().outcome
    assert outcome.status is status and outcome.signal == signal_name and outcome.cause.startswith(cause)
