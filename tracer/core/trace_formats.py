"""The trace files the tool reads, declared once: their kinds, how their names end, and how to say so.

Kept in the core (no imports) so that the CLI's help text and the ingest agree without the CLI
importing the analyzers at start-up."""

from __future__ import annotations

NSYS_SQLITE = "nsys-sqlite"
NSYS_ARROW = "nsys-arrow"
"""`nsys export --type arrow`: one Arrow IPC stream per table (see `analyzers.ingest.nsys_arrow`)."""
NSYS_REP = "nsys-rep"
KINETO = "kineto"
CUPTI = "cupti"
"""Our in-process CUPTI batches, a `raw/cupti/` folder."""
ROCPD = "rocpd"
"""rocprof's / rocmProfileData's SQLite database (`.rpd`): HIP API calls, kernels, copies."""
XPLANE = "xplane"
"""An XPlane profile (`.xplane.pb`), as jax.profiler and TensorFlow's profiler write it; read through
XProf's own converter."""
XPROF_JSON = "xprof-json"
"""The Chrome-trace JSON XProf makes from XPlane (jax.profiler's `perfetto_trace.json.gz`)."""
NSYS_JAX = "nsys-jax"
"""An nsys-jax archive (a zip, or its unpacked folder): the `nvtx_gpu_proj_trace` recipe's Parquet and
the thread names beside it."""

NSYS_KINDS = (NSYS_SQLITE, NSYS_ARROW, NSYS_REP)
FILE_KINDS = (*NSYS_KINDS, KINETO, ROCPD, XPLANE, XPROF_JSON, NSYS_JAX)
"""The kinds one file can be imported or analysed as."""

SUFFIXES = {
    NSYS_REP: (".nsys-rep", ".qdrep"),
    KINETO: (".json", ".json.gz", ".pt.trace.json", ".pt.trace.json.gz"),
    NSYS_SQLITE: (".sqlite", ".sqlite3", ".db"),
    NSYS_ARROW: (".arrow",),
    ROCPD: (".rpd",),
    XPLANE: (".xplane.pb",),
    XPROF_JSON: ("perfetto_trace.json.gz", ".trace.json.gz"),
    NSYS_JAX: (".zip",),
}
"""How names of each kind end (what a file is, is read from its content: `analyzers.ingest.sniff`)."""

PYSPY_PREFIX = "pyspy"
PYSPY_OUTPUT = "pyspy.speedscope.json"
"""What `--pyspy` writes under raw/ (speedscope JSON); any raw/pyspy*.json or *.speedscope is read as one."""
PYSPY_START = "pyspy.start_ns"
"""Under raw/: when py-spy attached (Unix ns, one integer), since speedscope times are relative."""


def is_pyspy(file_name: str) -> bool:
    """A py-spy speedscope profile, by name: the one test the ingest and the tracer share."""
    name = file_name.lower()
    return name.startswith(PYSPY_PREFIX) and name.endswith((".json", ".speedscope"))


ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz")
"""An archive of several ranks' traces (`tracer import` reads the traces inside it as one run)."""

READABLE = (
    "nsys .sqlite/.arrow/.nsys-rep, Kineto .json[.gz] (one or several ranks: a folder or a .tar[.gz] of them), "
    "rocpd .rpd, XPlane .xplane.pb (or its profile folder), XProf/Perfetto .json.gz, nsys-jax .zip"
)
"""The file kinds in words, for help texts and refusals."""


def stem(file_name: str) -> str:
    """A trace file's name without the longest of `SUFFIXES` it ends with (`run_nsys2024.6.sqlite` ->
    `run_nsys2024.6`, `w0.1623.pt.trace.json.gz` -> `w0.1623`): the rest tells files of one folder apart."""
    lower = file_name.lower()
    ends = [s for suffixes in SUFFIXES.values() for s in suffixes if lower.endswith(s) and len(s) < len(file_name)]
    return file_name[: -max(map(len, ends))] if ends else file_name
