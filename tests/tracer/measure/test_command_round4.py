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

from tests.conftest import ctrl_c_reaches_python, run_tracer, tmpfs
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


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs of our own (root only), unmounted whatever the test did."""
    with tmpfs(tmp_path / "disk", "2m") as mount:
        yield mount


FLOOD = """\
import sys, time
line = b"x" * 1023 + b"\\n"
for i in range(int(sys.argv[1])):  # 1 KiB lines, far past the disk's 2 MiB
    sys.stdout.buffer.write(line)
sys.stdout.flush()
print("flood done", flush=True)
try:
    time.sleep(float(sys.argv[2]))
except KeyboardInterrupt:
    sys.exit(130)
"""


def _final_record(out: Path) -> dict:
    (folder,) = list_runs(out)
    return json.loads(folder.run_json.read_text())


def test_03_a_disk_filled_by_the_commands_output_never_hangs_the_run(small_disk: Path, tmp_path: Path) -> None:
    """The command writes 6 MiB to stdout onto a 2 MiB disk: every byte still reaches our stdout, the command
    ends by itself, and run.json is final and names the full disk."""
    script = tmp_path / "flood.py"
    script.write_text(FLOOD)
    out = small_disk / "runs"
    result = run_tracer("profile", "--out", str(out), "--stall-after", "5", "--", sys.executable, str(script),
                        "6144", "0", timeout=240)  # fmt: skip
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.stdout.count("x" * 1023) == 6144 and "flood done" in result.stdout
    record = _final_record(out)
    assert record["outcome"]["status"] != "running", record["outcome"]
    assert "disk full" in record["outcome"]["cause"], record["outcome"]


def test_03_a_stall_on_a_full_disk_is_recorded_and_ended(small_disk: Path, tmp_path: Path) -> None:
    """The disk fills, then the command sits idle: the stall watch's stack dump meets the full disk, and the
    run still ends `stalled`, its command ended."""
    script = tmp_path / "flood.py"
    script.write_text(FLOOD)
    out = small_disk / "runs"
    result = run_tracer("profile", "--out", str(out), "--stall-after", "3", "--", sys.executable, str(script),
                        "4096", "600", timeout=240)  # fmt: skip
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert _final_record(out)["outcome"]["status"] == "stalled"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_03_a_signal_still_ends_a_run_on_a_full_disk(sig: signal.Signals, small_disk: Path, tmp_path: Path) -> None:
    """The disk is full and the command sleeps on: Ctrl-C or SIGTERM to the tracer ends the run,
    recorded (not `running`)."""
    script = tmp_path / "flood.py"
    script.write_text(FLOOD)
    out = small_disk / "runs"
    cmd = [sys.executable, "-m", "tracer", "profile", "--out", str(out), "--", sys.executable, str(script), "4096"]
    tracer = subprocess.Popen([*cmd, "600"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              preexec_fn=ctrl_c_reaches_python)  # fmt: skip
    try:
        assert tracer.stdout is not None
        seen = b""
        while b"flood done" not in seen:
            chunk = tracer.stdout.read1(65536)  # type: ignore[attr-defined]
            assert chunk, "the tracer's output ended before the command's"
            seen = seen[-64:] + chunk
        tracer.send_signal(sig)
        _, err = tracer.communicate(timeout=120)
    finally:
        if tracer.poll() is None:
            tracer.kill()
            tracer.wait()
    assert b"Traceback" not in err, err.decode(errors="replace")[-3000:]
    assert _final_record(out)["outcome"]["status"] == "interrupted"


DAEMON = """\
import os, sys, time
if os.fork() == 0:  # a daemon: double fork, a session of its own, re-parented away from the command
    os.setsid()
    if os.fork() == 0:
        open(sys.argv[1] + ".tmp", "w").write(str(os.getpid()))
        os.rename(sys.argv[1] + ".tmp", sys.argv[1])
        time.sleep(3600)
    os._exit(0)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.05)
print("command done; daemon", open(sys.argv[1]).read())
"""


def test_04_nsys_never_waits_for_a_daemon_the_command_left(tmp_path: Path) -> None:
    """Under `--trace nsys` a command that leaves an hour-long daemon behind ends when the command
    does (nsys waits for re-parented processes unless told not to); the daemon is ended with the run."""
    from tests.tracer.measure.tracing.helpers import require_nsys

    require_nsys()
    script, pid_file = tmp_path / "daemon.py", tmp_path / "daemon.pid"
    script.write_text(DAEMON)
    out = tmp_path / "runs"
    try:
        result = run_tracer("profile", "--trace", "nsys", "--out", str(out), "--", sys.executable, str(script),
                            str(pid_file), timeout=420)  # fmt: skip
        assert result.returncode == 0, result.stderr[-3000:]
        assert "command done" in result.stdout
        assert _final_record(out)["outcome"]["status"] == "ok"
        assert _gone(int(pid_file.read_text()))
    finally:
        if pid_file.exists():
            try:
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
            except ProcessLookupError:
                pass


def _gone(pid: int, within_s: float = 30) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except OSError:
            return True
        time.sleep(0.2)
    return False


@pytest.mark.parametrize(
    "content,words",
    [(b"", "an empty file"), (b"\x00\x01\x02binary", "neither a program"),
     (b"#!/no/such/python3\nprint('hi')\n", "/no/such/python3"), (b"#!\n", "no interpreter")],
)  # fmt: skip
def test_05_a_command_the_kernel_cannot_start_is_one_line_and_no_folder(
    content: bytes, words: str, tmp_path: Path
) -> None:
    """An executable file that is empty, binary, or names a missing interpreter on its #! line: one line,
    exit 2, no run folder and no temp folder left (as PATH or a relative path)."""
    script = tmp_path / "train"
    script.write_bytes(content)
    script.chmod(0o755)
    out = tmp_path / "runs"
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    for argv0, path in ((str(script), env["PATH"]), ("train", f"{tmp_path}{os.pathsep}{env['PATH']}")):
        result = subprocess.run([sys.executable, "-m", "tracer", "profile", "--out", str(out), "--", argv0],
                                capture_output=True, text=True, timeout=120,
                                env={**env, "PATH": path, "TMPDIR": str(temp)})  # fmt: skip
        assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
        lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and words in lines[0], result.stderr
        assert not (out.exists() and list(out.iterdir())), list(out.iterdir())
        assert not list(temp.iterdir())


MARKED_LOOP = """\
import os, sys
try:
    from dltracer_probe import steps
except ImportError:
    steps = iter
for _ in steps(range(4)):
    pass
print("flags", sys.flags.isolated, sys.flags.ignore_environment, sys.flags.no_site)
"""


REPLACING_PARENT = """\
import os, subprocess, sys
env = dict(os.environ, PYTHONPATH="/nowhere")  # a launcher that sets its own path for its child
subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "loop.py")], env=env, check=True)
"""


@pytest.mark.parametrize(
    "case,words",
    [("-I", "python -I ignores PYTHONPATH"), ("-E", "python -E ignores PYTHONPATH"),
     ("-S", "python -S skips sitecustomize"), ("child", "its PYTHONPATH was replaced")],
)  # fmt: skip
def test_06_a_probe_kept_out_says_why_not_no_loop(case: str, words: str, tmp_path: Path) -> None:
    """`python -I`, `-E` or `-S` keep the probe out of the command; a probed parent that replaces its
    child's PYTHONPATH keeps it out of the child, which runs the loop: the run says which and why,
    rather than "no loop the probe knows"."""
    script = tmp_path / "loop.py"
    script.write_text(MARKED_LOOP)
    (tmp_path / "parent.py").write_text(REPLACING_PARENT)
    command = [str(tmp_path / "parent.py")] if case == "child" else [case, str(script)]
    out = tmp_path / "runs"
    result = run_tracer("profile", "--out", str(out), "--", sys.executable, *command)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "no loop the probe knows" not in result.stderr  # the tracer's summary: on stderr, beside the script's
    assert f"the probe did not load: {words}" in result.stderr, result.stderr
    (folder,) = list_runs(out)
    shown = run_tracer("show", str(folder.path))
    assert f"the probe did not load: {words}" in shown.stdout
    if case == "child":
        assert "loop.py" in shown.stdout  # the process named


ESCAPER = """\
import os, subprocess, sys, time
# a daemon out of the run's group and session, with no environment the run set (no mark, no probe)
subprocess.Popen(["setsid", "env", "-i", sys.executable, "-c",
                  "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(600)",
                  sys.argv[1]])
time.sleep(600)
"""


def test_19_a_setsid_env_i_daemon_dies_with_a_killed_tracer(tmp_path: Path) -> None:
    """The tracer SIGKILLed while its command runs: the daemon the command started with `setsid env -i`
    (no group, no session, no environment of the run) is ended by the lifeguard all the same."""
    if not shutil.which("setsid") or not shutil.which("env"):
        pytest.skip("needs setsid(1) and env(1)")
    script, pid_file = tmp_path / "escaper.py", tmp_path / "daemon.pid"
    script.write_text(ESCAPER)
    cmd = [sys.executable, "-m", "tracer", "profile", "--out", str(tmp_path / "runs"), "--"]
    tracer = subprocess.Popen([*cmd, sys.executable, str(script), str(pid_file)], stdout=subprocess.DEVNULL)
    daemon = None
    try:
        deadline = time.monotonic() + 120
        while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
            time.sleep(0.2)
        daemon = int(pid_file.read_text())
        time.sleep(3)  # the lifeguard has noted it (it looks every second)
        tracer.kill()
        tracer.wait()
        assert _gone(daemon), "the daemon outlived its killed tracer"
    finally:
        if tracer.poll() is None:
            tracer.kill()
            tracer.wait()
        if daemon is not None:
            try:
                os.kill(daemon, signal.SIGKILL)
            except ProcessLookupError:
                pass
