"""`--trace nsys`: the worker runs under `nsys profile`; its report is exported afterwards, to Arrow
where this nsys offers it (columns, no SQLite on either side), else to SQLite.

Files: `raw/trace.nsys-rep` (open it in the Nsight Systems GUI), `raw/trace.arrow` or
`raw/trace.sqlite` (what the analyzers ingest), `raw/nsys-export.log`. nsys is the launched
process, the worker its child, so the sampler follows the worker's own pid file, and nsys's exit
status (the app's code, or 128+N for a signal N) is turned back into the worker's. nsys is started
through `nsys_launch.py`, which retries the launch failures nsys shows under heavy load.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tracer.core import window
from tracer.core.errors import UserError
from tracer.core.paths import cache_root
from tracer.core.records import RunSpec
from tracer.core.runfolder import RunFolder
from tracer.core.schema import KIND, NSYS_WINDOW_TRACE, NVTX_WINDOW_RANGE, TRACE_ENV, Event
from tracer.measure.lifeguard import end_nsys_agents
from tracer.measure.tracing.base import TraceBackend
from tracer.measure.tracing.nsys_launch import take_session_lock

REPORT = "raw/trace.nsys-rep"
SQLITE = "raw/trace.sqlite"
ARROW = "raw/trace.arrow"
EXPORTS = {"arrow": ARROW, "sqlite": SQLITE}
"""`nsys export --type` values we ingest, best first, and where each goes."""
EXPORT_LOG = "raw/nsys-export.log"
EXPORT_TIMEOUT_S = 1800.0
#: Runs nsys and retries a launch that failed before the worker started (see its docstring).
LAUNCHER = Path(__file__).with_name("nsys_launch.py")
INSTALL_HINT = (
    "install Nsight Systems, put nsys on PATH or point NSYS at it; "
    "for CPU-only tracing on Debian/Ubuntu, scripts/install_nsys.sh puts Debian's nsys in the cache"
)


def _version_key(path: Path) -> list[int]:
    return [int(n) for n in re.findall(r"\d+", str(path))]


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def candidates() -> list[Path]:
    """Where nsys may be when $NSYS does not say: PATH, our cache, the usual NVIDIA folders (newest first)."""
    found: list[Path] = []
    on_path = shutil.which("nsys")
    if on_path:
        found.append(Path(on_path))
    cached = cache_root() / "nsys" / "root" / "usr" / "lib" / "nsight-systems"
    found += [cached / "bin" / "nsys", cached / "host-linux-x64" / "nsys"]
    opt = Path("/opt/nvidia")
    patterns = (
        "nsight-systems*/*/bin/nsys",
        "nsight-systems*/bin/nsys",
        "nsight-systems*/*/target-linux-x64/nsys",
        "nsight-compute/*/host/target-linux-x64/nsys",
    )
    for pattern in patterns:
        found += sorted(opt.glob(pattern), key=_version_key, reverse=True)
    found.append(Path("/usr/local/cuda/bin/nsys"))
    return found


def find_nsys() -> Path:
    """The one way nsys is found, by `profile --trace nsys` and by `import x.nsys-rep` alike: $NSYS
    (the executable or its folder) wins; else the first of `candidates()` that exists."""
    found = nsys_if_any()
    if found is None:
        raise UserError(f"no nsys found (looked in $NSYS, PATH, {cache_root() / 'nsys'}, /opt/nvidia): {INSTALL_HINT}")
    return found


def nsys_if_any() -> Path | None:
    """`find_nsys`, or None when there is none; a $NSYS that names no nsys is still an error."""
    env = os.environ.get("NSYS")
    if env:
        path = Path(env).expanduser()
        path = path / "nsys" if path.is_dir() else path
        if _executable(path):
            return path
        raise UserError(f"NSYS={env} is not an nsys executable: {INSTALL_HINT}")
    return next((path for path in candidates() if _executable(path)), None)


# A version as nsys writes it into a report and prints it (`nsys --version`): "2022.4.2.1-df9881f", and
# from nsys 2023 on with a build number and a `vN` ending ("2023.2.3.1004-33186433v0").
_VERSION = re.compile(rb"(20\d\d)\.(\d{1,2})\.(\d{1,3})(?:\.\d+)?(-[0-9a-f]+(?:v\d+)?)?")
_REPORT_SCAN_BYTES = 1 << 20


def report_version(report: Path) -> tuple[int, int, int] | None:
    """The version of the nsys that wrote a .nsys-rep, read from the file (no nsys needed): the report is
    a header line and protobuf messages, and the writer's version is a string field of its own (a
    length byte, then e.g. `2022.4.2.1-df9881f` or `2023.2.3.1004-33186433v0`) in the last messages
    (checked against nsys 2022.4). Only a version with nsys's build suffix (`-hash`) is taken: a version
    inside a longer string (a PATH naming nsight-systems-2025.3.1) or a bare one in the recorded
    environment (Nsight Compute's `2023.2.2.3`, a field of its own there) is not. None when the file
    holds none."""
    try:
        with report.open("rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - _REPORT_SCAN_BYTES))
            tail = f.read()
            f.seek(0)
            head = f.read(min(size, _REPORT_SCAN_BYTES))
    except OSError:
        return None
    for chunk in (tail, head):
        found = [
            (int(m[1]), int(m[2]), int(m[3]))
            for m in _VERSION.finditer(chunk)
            if m[4] and m.start() > 0 and chunk[m.start() - 1] == m.end() - m.start()
        ]
        if found:
            return max(found, key=found.count)
    return None


@functools.cache
def nsys_version(nsys: str) -> tuple[int, int, int] | None:
    """`nsys --version` ("NVIDIA Nsight Systems version 2022.4.2.1-df9881f") as (2022, 4, 2); None unread."""
    try:
        said = subprocess.run([nsys, "--version"], capture_output=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = _VERSION.search(said)
    return (int(m[1]), int(m[2]), int(m[3])) if m else None


def version_text(version: tuple[int, int, int] | None) -> str:
    return "unknown" if version is None else ".".join(map(str, version))


def check_can_read(nsys: Path, report: Path) -> None:
    """One line before an export that cannot work: the report was written by a newer nsys than this one
    (nsys 2022.4 answers a 2026.1 report with "Version number is invalid: 2026@1@2"), with both ways out."""
    made, have = report_version(report), nsys_version(str(nsys))
    if made is None or have is None or made[:2] <= have[:2]:
        return
    raise UserError(
        f"{report.name} was written by nsys {version_text(made)}, newer than the nsys found ({version_text(have)}, "
        f"{nsys}), which cannot read it: set NSYS to an nsys {made[0]}.{made[1]} or newer, or export it where it "
        f"was made (`nsys export --type=sqlite {report.name}`) and give the .sqlite"
    )


def found_where(nsys: Path) -> str:
    """How `nsys_if_any` came to this nsys, in words (for `tracer env nsys`)."""
    if os.environ.get("NSYS"):
        return "$NSYS"
    if shutil.which("nsys") == str(nsys):
        return "PATH"
    if cache_root() in nsys.parents:
        return "the tool's cache (scripts/install_nsys.sh)"
    return "an NVIDIA install folder"


def export(nsys: Path, report: Path, out: Path, kind: str, log: Path | None = None) -> str:
    """`nsys export --type kind` of `report` into `out`: "" when it worked, else the last line nsys
    said (its whole output goes to `log` when given). The one place the export command is written."""
    cmd = [str(nsys), "export", f"--type={kind}", f"--output={out}", "--force-overwrite=true", str(report)]
    try:
        with take_session_lock():  # an export beside a running `nsys profile` was seen to hang them both
            done = subprocess.run(cmd, capture_output=True, timeout=EXPORT_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return f"no answer in {EXPORT_TIMEOUT_S:.0f} s"
    said = (done.stdout + done.stderr).decode(errors="replace")  # nsys echoes bytes of a damaged report
    if log is not None:
        log.write_text(said)
    if done.returncode == 0 and out.exists():
        return ""
    return (said.strip().splitlines() or [f"exit code {done.returncode}, no output"])[-1]


def profile_args(spec: RunSpec) -> list[str]:
    """CUDA + NVTX + OS-runtime tracing on GPU runs, NVTX + OS runtime on CPU runs; CPU sampling
    and context switches only with --nsys-sampling (they cost more and need perf_event access).
    A trace window is an NVTX capture range (`capture_args`)."""
    trace = "cuda,nvtx,osrt" if spec.device == "gpu" else "osrt,nvtx"
    sampling = "process-tree" if spec.nsys_sampling else "none"
    return [f"--trace={trace}", f"--sample={sampling}", f"--cpuctxsw={sampling}", *capture_args(spec)]


def capture_args(spec: RunSpec) -> list[str]:
    """`--trace-window`: collection starts when the worker opens its NVTX range NVTX_WINDOW_RANGE and
    stops when it closes it (`--capture-range=nvtx`, which Debian's nsys 2022.4 has and which works on
    a CPU-only run; `cudaProfilerApi` needs CUDA). The app goes on after the range (`stop`, not nsys's
    `stop-shutdown`), and the range's text is not a registered NVTX string, which nsys then has to be
    told to look at (NSYS_NVTX_PROFILER_REGISTER_ONLY=0)."""
    if window.of_record(spec) is None:
        return []
    return [
        "--capture-range=nvtx",
        f"--nvtx-capture={NVTX_WINDOW_RANGE}",
        "--capture-range-end=stop",
        "--env-var=NSYS_NVTX_PROFILER_REGISTER_ONLY=0",
    ]


def stop_agents(folder: RunFolder) -> list[int]:
    """Ends the helper agent of this run's nsys, which leaves the process group and so outlives a run
    whose nsys was stopped or killed (the one matching rule: tracer.measure.lifeguard.end_nsys_agents)."""
    try:
        nsys_pid = int((folder.raw_dir / "nsys.pid").read_text().strip())
    except (OSError, ValueError):
        return []
    return end_nsys_agents([nsys_pid])


#: What starts a command that writes no worker.pid of its own under nsys: a shell writes its pid to the
#: file named after it, then becomes the command (exec keeps the pid and nsys's injection).
ANNOUNCE_PID = ("/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"')
#: nsys waits, by default, for every process the app re-parented: a daemon a user's command left behind
#: would hold the run open for as long as it lives. The run ends with the command; the daemon is ended
#: with it (the runner's sweep of the command's descendants).
WAIT_FOR_THE_COMMAND = "--wait=primary"


class NsysBackend(TraceBackend):
    name = "nsys"
    wraps_process = True

    def __init__(self) -> None:
        self._nsys: Path | None = None

    @property
    def nsys(self) -> Path:
        if self._nsys is None:
            self._nsys = find_nsys()
        return self._nsys

    def check(self, spec: RunSpec, python: str = "") -> None:
        try:
            self._nsys = find_nsys()
        except UserError as e:
            raise UserError(f"--trace nsys: {e}") from None

    def command(self, worker_cmd: list[str], folder: RunFolder, spec: RunSpec, writes_pid: bool) -> list[str]:
        """A user's command (which writes no worker.pid) starts through `ANNOUNCE_PID`: the sampler then
        measures the command's own process tree, not nsys's with it, and the launcher can tell nsys's
        failed launch (no pid yet: retried) from the command's own quick exit (run once)."""
        output = folder.path / REPORT
        waits = []
        if not writes_pid:
            worker_cmd = [*ANNOUNCE_PID, str(folder.worker_pid_path), *worker_cmd]
            waits = [WAIT_FOR_THE_COMMAND]
        return [
            sys.executable,
            str(LAUNCHER),
            str(folder.path),
            str(self.nsys),
            "profile",
            *profile_args(spec),
            *waits,
            f"--output={output.with_suffix('')}",
            "--force-overwrite=true",
            *worker_cmd,
        ]

    def environment(self, folder: RunFolder, spec: RunSpec) -> dict[str, str]:
        """With a trace window the worker opens the NVTX range nsys's capture range starts on."""
        return {TRACE_ENV: NSYS_WINDOW_TRACE} if window.of_record(spec) is not None else {}

    def worker_returncode(self, returncode: int, events: Sequence[Mapping[str, Any]]) -> int:
        """nsys exits with the app's code, or 128+N when the app died of signal N. A worker that
        wrote its `end` event and was not killed by a signal finished, whatever nsys says of itself."""
        if returncode > 128:
            try:
                return -signal.Signals(returncode - 128).value
            except ValueError:
                pass
        kinds = {e.get(KIND) for e in events}
        finished, errors = Event.END in kinds, Event.ERROR in kinds
        if returncode != 0 and finished and not errors:
            return 0
        return returncode

    def finish(self, folder: RunFolder) -> list[str]:
        stop_agents(folder)
        report = folder.path / REPORT
        if not report.exists():
            leftovers = sorted(p.name for p in folder.raw_dir.glob("*.qdstrm"))
            said = [str(e.get("error")) for e in folder.events() if e.get(KIND) == Event.TRACE_ERROR]
            hint = (
                f" (only {', '.join(leftovers)}: nsys's QdstrmImporter failed; nsys 2025 needs libdw.so.1, "
                "see the README, Tracing a run)"
                if leftovers
                else f": its capture range never started ({said[0]})"
                if said
                else " (see raw/worker.log)"
            )
            raise RuntimeError(f"nsys wrote no report {REPORT}{hint}")
        kind = best_export(str(self.nsys))
        failed = export(self.nsys, report, folder.path / EXPORTS[kind], kind, folder.path / EXPORT_LOG)
        if failed:
            raise RuntimeError(f"nsys export to {kind} failed ({failed}): see {EXPORT_LOG}")
        return [REPORT, EXPORTS[kind]]


def best_export(nsys: str) -> str:
    """The first of EXPORTS this nsys offers ("sqlite" when its help cannot be read)."""
    offered = nsys_export_types(nsys)
    return next((kind for kind in EXPORTS if kind in offered), "sqlite")


@functools.cache
def nsys_export_types(nsys: str) -> frozenset[str]:
    """The `--type` values this nsys's `export` offers (from its own help text: 2022.4 says "Possible
    values are: sqlite, hdf, text, arrow, json, info."), so a columnar export is used by capability,
    not by version number. Empty when the help cannot be read."""
    try:
        proc = subprocess.run([nsys, "export", "--help"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return frozenset()
    m = re.search(r"Possible values are:\s*([^\n]+?)\.?\s*\n", proc.stdout + proc.stderr + "\n")
    return frozenset(v.strip().strip(".") for v in m.group(1).split(",")) if m else frozenset()
