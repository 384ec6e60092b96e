"""The names of the trace kinds that code outside their formats' entries tells apart (what a run's record
says it was imported from), and the py-spy and archive names the tracer shares with the ingest (no
imports). A format itself (its kind, its words, suffixes, sniffing and reader) is its one entry in
`analyzers.ingest.readers`: a format added there needs no name here."""

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
"""nsys's kinds: an export and the report it was exported from are one trace (the export is read)."""

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
