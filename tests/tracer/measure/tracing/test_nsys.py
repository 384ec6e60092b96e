"""--trace nsys: where nsys is found, how its exit status is read, and real CPU runs under Debian's nsys."""

from __future__ import annotations

import os
import signal
import sqlite3
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from analyzers.ingest import nsys_arrow
from tests.conftest import TINY, run_tracer
from tests.tracer.measure.tracing.helpers import require_gpu, require_nsys
from tracer.core.errors import UserError
from tracer.core.records import RunSpec, RunStatus
from tracer.core.runfolder import RunFolder
from tracer.measure.tracing import nsys as nsys_module
from tracer.measure.tracing.nsys import LAUNCHER, NsysBackend, find_nsys, nsys_export_types, profile_args, stop_agents


def _spec(**kw: object) -> RunSpec:
    return RunSpec(framework="pytorch", model="alexnet", dataset="small", **kw)  # type: ignore[arg-type]


def test_profile_args_per_device_and_sampling() -> None:
    assert profile_args(_spec()) == ["--trace=osrt,nvtx", "--sample=none", "--cpuctxsw=none"]
    assert profile_args(_spec(device="gpu"))[0] == "--trace=cuda,nvtx,osrt"
    assert profile_args(_spec(nsys_sampling=True))[1:] == ["--sample=process-tree", "--cpuctxsw=process-tree"]


def test_nsys_env_wins_and_a_bad_one_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "bin" / "nsys"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("NSYS", str(fake.parent))  # a folder holding nsys works too
    assert find_nsys() == fake
    monkeypatch.setenv("NSYS", str(tmp_path / "missing"))
    with pytest.raises(UserError, match="NSYS=.* is not an nsys executable"):
        find_nsys()


def _fake_nsys(folder: Path, log: Path) -> Path:
    """An `nsys` that writes its own path to `log` and fails as an export of a bad report would."""
    fake = folder / "nsys"
    folder.mkdir(parents=True)
    fake.write_text(f'#!/bin/sh\necho "$0" >> {log}\necho "fake nsys: cannot read the report" >&2\nexit 1\n')
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    return fake


def test_import_and_profile_find_the_same_nsys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """#25: `NSYS=folder tracer import x.nsys-rep` runs the nsys that `profile --trace nsys` would, not
    the one on PATH (the import once took PATH first and wanted $NSYS to be the binary)."""
    log = tmp_path / "called.log"
    chosen = _fake_nsys(tmp_path / "chosen", log)
    on_path = _fake_nsys(tmp_path / "on-path", log)
    monkeypatch.setenv("NSYS", str(chosen.parent))
    monkeypatch.setenv("PATH", f"{on_path.parent}{os.pathsep}{os.environ['PATH']}")
    backend = NsysBackend()
    backend.check(_spec())
    assert backend.nsys == chosen
    report = tmp_path / "x.nsys-rep"
    report.write_bytes(b"not a report")
    result = run_tracer("import", str(report), "--out", str(tmp_path / "runs"))
    assert result.returncode == 2 and "fake nsys: cannot read the report" in result.stderr, result.stderr
    assert set(log.read_text().split()) == {str(chosen)}


def test_cli_without_nsys_says_so_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NSYS", str(tmp_path / "no-nsys"))
    out = tmp_path / "runs"
    result = run_tracer(
        "profile", "--framework", "pytorch", "--model", "alexnet", *TINY, "--trace", "nsys", "--out", str(out)
    )
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and "nsys" in result.stderr
    assert not out.exists() or not list(out.iterdir())


def _folder_with_events(path: Path, *kinds: str) -> RunFolder:
    path.mkdir()
    (path / "events.jsonl").write_text("".join(f'{{"kind": "{k}", "t_ns": 1}}\n' for k in kinds))
    return RunFolder(path)


def test_worker_status_recovered_from_nsys_exit_code(tmp_path: Path) -> None:
    backend = NsysBackend()
    finished = _folder_with_events(tmp_path / "finished", "start", "end")
    crashed = _folder_with_events(tmp_path / "crashed", "start")
    assert backend.worker_returncode(128 + signal.SIGSEGV, crashed.events()) == -signal.SIGSEGV
    assert backend.worker_returncode(128 + signal.SIGKILL, finished.events()) == -signal.SIGKILL
    assert backend.worker_returncode(3, crashed.events()) == 3
    assert backend.worker_returncode(1, finished.events()) == 0  # nsys's own trouble after the worker finished
    assert backend.worker_returncode(0, finished.events()) == 0


def _launch(tmp_path: Path, script: str, **env: str) -> subprocess.CompletedProcess[str]:
    fake = tmp_path / "fake_nsys.py"
    fake.write_text(script)
    (tmp_path / "raw").mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, str(LAUNCHER), str(tmp_path), sys.executable, str(fake)],
        env=dict(os.environ, **env),
        capture_output=True,
        text=True,
        timeout=60,
    )


def _counting(tmp_path: Path) -> str:
    """The start of a fake nsys that counts its launches in tmp_path/count (`n`: the launches before it)."""
    return f"""import os, sys
count = {str(tmp_path / "count")!r}
n = int(open(count).read()) if os.path.exists(count) else 0
open(count, "w").write(str(n + 1))
"""


def test_launcher_retries_an_nsys_that_died_before_the_worker_started(tmp_path: Path) -> None:
    script = (
        _counting(tmp_path)
        + f"""
if n == 0:
    sys.exit(1)  # like nsys's sem_open failure: no worker.pid written
open({str(tmp_path / "worker.pid")!r}, "w").write("1")
sys.exit(0)
"""
    )
    done = _launch(tmp_path, script)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "count").read_text() == "2" and "retrying (2/3)" in done.stderr


def test_a_command_that_fails_after_a_retried_launch_fails_for_its_own_reason(tmp_path: Path) -> None:
    """nsys died at launch, was run again, and the command then exited 1 with nothing on stderr: the
    reason is the command's silence, not the launcher's note that it retried."""
    from tracer.measure.outcome import last_said
    from tracer.measure.tracing.nsys_launch import NOTE

    script = (
        _counting(tmp_path)
        + f"""
if n == 0:
    sys.exit(1)  # nsys's launch failure: no pid written
open({str(tmp_path / "worker.pid")!r}, "w").write("1")
sys.exit(1)  # the command's own failure, silent
"""
    )
    done = _launch(tmp_path, script)
    tail = tuple(done.stderr.strip().splitlines())
    assert done.returncode == 1 and tail[-1].startswith(NOTE) and "retrying (2/3)" in tail[-1]
    assert last_said(tail, "no output on stderr") == "no output on stderr"


def test_launcher_retries_an_nsys_that_exited_0_without_starting_the_worker(tmp_path: Path) -> None:
    """CI of 28 Nov: nsys 2022.4 exited 0 under a capture range and never ran the worker."""
    script = (
        _counting(tmp_path)
        + f"""
if n == 1:
    open({str(tmp_path / "worker.pid")!r}, "w").write("1")
sys.exit(0)
"""
    )
    done = _launch(tmp_path, script)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "count").read_text() == "2"
    assert "exited with code 0 before the worker started; retrying (2/3)" in done.stderr


def test_launcher_fails_an_nsys_that_never_started_the_worker(tmp_path: Path) -> None:
    done = _launch(tmp_path, "import sys; sys.exit(0)")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        "dl-tracer: nsys never started the worker in 3 tries (its last exit code: 0)"
    )


def test_launcher_does_not_retry_once_the_worker_ran_and_keeps_its_status(tmp_path: Path) -> None:
    script = f"""
import os, signal
open({str(tmp_path / "worker.pid")!r}, "w").write("1")
os.kill(os.getpid(), signal.SIGSEGV)
"""
    done = _launch(tmp_path, script)
    assert done.returncode == 128 + signal.SIGSEGV
    assert "retrying" not in done.stderr


def test_launcher_stops_an_nsys_that_hangs_after_the_worker_exited(tmp_path: Path) -> None:
    script = f"""
import subprocess, sys, time
worker = subprocess.Popen([sys.executable, "-c", "pass"])
open({str(tmp_path / "worker.pid")!r}, "w").write(str(worker.pid))
worker.wait()
time.sleep(60)  # like nsys 2022.4 stuck in 'Generating ...qdstrm'
"""
    started = time.monotonic()
    done = _launch(tmp_path, script, TRACER_NSYS_REPORT_TIMEOUT_S="2")
    assert done.returncode == 1 and "did not finish its report" in done.stderr
    assert time.monotonic() - started < 30
    assert int((tmp_path / "raw" / "nsys.pid").read_text()) > 0


def test_finish_ends_the_agent_of_this_runs_nsys_only(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path)
    (tmp_path / "raw").mkdir()
    agents = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import time; time.sleep(60)",
                "--start-agent",
                f"--session-name=profile-python-{pid}",
            ]
        )
        for pid in (4242, 4343)
    ]
    try:
        (tmp_path / "raw" / "nsys.pid").write_text("4242\n")
        assert stop_agents(folder) == [agents[0].pid]
        assert agents[0].wait(timeout=10) == -signal.SIGKILL
        assert agents[1].poll() is None
    finally:
        for a in agents:
            a.kill()
            a.wait()


@pytest.mark.nsys
def test_cpu_run_under_debian_nsys_ends_ok_with_an_osrt_timeline(make_run: Callable[..., RunFolder]) -> None:
    require_nsys()
    # the CI command with --batch 4 (4 steps an epoch instead of 16) to keep the suite short
    folder = make_run("pytorch", "--model", "alexnet", "--trace", "nsys", "--device", "cpu", "--batch", "4")
    record = folder.read_record()
    assert record.outcome.status is RunStatus.OK, record.outcome
    # the export is Arrow where this nsys offers it (Debian's 2022.4 does), else SQLite
    offered = nsys_export_types(str(find_nsys()))
    export = nsys_module.ARROW if "arrow" in offered else nsys_module.SQLITE
    assert set(record.trace_files) == {nsys_module.REPORT, export}
    for name in record.trace_files:
        assert (folder.path / name).stat().st_size > 0
    worker_pid = int(folder.worker_pid_path.read_text())
    assert record.worker_pid == worker_pid
    # the sampler watched the worker (nsys's grandchild), not nsys
    threads = folder.samples("threads")
    assert threads is not None and set(threads.column("pid").to_pylist()) >= {worker_pid}
    if export == nsys_module.ARROW:
        n_osrt = nsys_arrow.read_streams(folder.path / export)["OSRT_API"].num_rows
    else:
        with sqlite3.connect(f"file:{folder.path / export}?mode=ro", uri=True) as db:
            (n_osrt,) = db.execute("SELECT count(*) FROM OSRT_API").fetchone()
    assert n_osrt > 0
    osrt = pq.read_table(folder.table_path("osrt")).to_pylist()
    assert osrt and worker_pid in {r["pid"] for r in osrt}


COUNTING_SCRIPT = """\
import os, sys
count = os.path.join(os.path.dirname(os.path.abspath(__file__)), "count")
n = int(open(count).read()) if os.path.exists(count) else 0
open(count, "w").write(str(n + 1))
sys.exit(int(sys.argv[1]))
"""


@pytest.mark.nsys
@pytest.mark.parametrize("code", [0, 1])
def test_a_users_command_under_nsys_runs_once_and_keeps_its_status(code: int, tmp_path: Path) -> None:
    """A user's command that ends at once, well or badly, ran once (the launcher had run a failing one three
    times, taking its quick exit for nsys's launch failure) and is judged by its own exit code."""
    from tracer.core.runfolder import list_runs

    require_nsys()
    script = tmp_path / "count.py"
    script.write_text(COUNTING_SCRIPT)
    out = tmp_path / "runs"
    done = run_tracer("profile", "--trace", "nsys", "--out", str(out), "--", sys.executable, str(script), str(code))
    assert done.returncode == (0 if code == 0 else 1), done.stderr[-3000:]
    assert (tmp_path / "count").read_text() == "1"
    (folder,) = list_runs(out)
    record = folder.read_record()
    if code == 0:
        assert record.outcome.status is RunStatus.OK, record.outcome
        assert record.trace_files and (folder.path / record.trace_files[0]).exists()
    else:
        assert record.outcome.status is RunStatus.FAILED
        assert "retrying" not in record.outcome.cause and "exited with code 1" in record.outcome.cause


BUSY_WITH_A_CHILD = """\
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.5)"])
t = time.time()
while time.time() - t < 1.5:
    pass
child.wait()
"""


@pytest.mark.nsys
def test_a_users_command_under_nsys_is_sampled_without_nsys(tmp_path: Path) -> None:
    """The sampler measures the command's own process tree (the command and its child), not nsys's and
    its launcher's with it: the command's shell wrote its pid before it became the command."""
    from tracer.core.runfolder import list_runs
    from tracer.core.schema import THREADS_TABLE

    require_nsys()
    script = tmp_path / "busy.py"
    script.write_text(BUSY_WITH_A_CHILD)
    out = tmp_path / "runs"
    done = run_tracer("profile", "--trace", "nsys", "--out", str(out), "--", sys.executable, str(script))
    assert done.returncode == 0, done.stderr[-3000:]
    (folder,) = list_runs(out)
    command_pid = int(folder.worker_pid_path.read_text())
    nsys_pid = int((folder.path / "raw" / "nsys.pid").read_text())
    threads = folder.samples(THREADS_TABLE.name)
    assert threads is not None
    pids = set(threads.column("pid").to_pylist())
    assert command_pid in pids and nsys_pid not in pids, (command_pid, nsys_pid, pids)
    assert len(pids) == 2  # the command and its child
    assert not any(name.startswith("nsys") for name in threads.column("name").to_pylist())


@pytest.mark.nsys
def test_worker_crash_under_nsys_is_failed_not_ok(make_run: Callable[..., RunFolder]) -> None:
    require_nsys()
    folder = make_run("pytorch", "--trace", "nsys", "--epochs", "1", "--inject-fault", "segv@1", expect_ok=False)
    outcome = folder.read_record().outcome
    assert outcome.status is RunStatus.FAILED
    assert "SIGSEGV" in outcome.cause


@pytest.mark.gpu
@pytest.mark.nsys
def test_gpu_run_under_nsys_traces_cuda(make_run: Callable[..., RunFolder]) -> None:
    require_gpu()
    require_nsys()
    folder = make_run("pytorch", "--device", "gpu", "--batch", "8", "--trace", "nsys")
    assert folder.read_record().outcome.status is RunStatus.OK
    assert folder.table_path("cuda_api").exists() and folder.table_path("kernels").exists()
