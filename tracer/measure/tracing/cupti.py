"""`--trace cupti`: CUDA activity recorded inside the worker through CUPTI's C API
(`tracer/worker/cupti_trace.py`), at Kineto's cost.

Works for any framework, without nsys; it needs a GPU and a `libcupti` the worker's interpreter can load
(the CUDA wheels' nvidia-cuda-cupti, matching the CUDA the framework uses). The worker writes CUPTI's
buffers as they are; after the run, however it ended, they become `raw/cupti/records-NNNNN.parquet` (the
format `analyzers.trace.tables` declares; `tracer/measure/tracing/cupti_decode.py`), and the drops CUPTI counted are
reported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tracer.core.errors import UserError
from tracer.core.records import RunSpec
from tracer.core.runfolder import RunFolder
from tracer.core.schema import (
    CUPTI_CLOCK_FILE,
    CUPTI_INDEX_FILE,
    CUPTI_KERNEL_NAMES_FILE,
    CUPTI_LIBRARY_ENV,
    CUPTI_META_FILE,
    CUPTI_STOP_FILE,
    TRACE_CUPTI,
    TRACE_ENV,
)
from tracer.measure.tracing.base import TraceBackend
from tracer.measure.tracing.cupti_decode import RECORD_SCHEMA, Converted, convert

CUPTI_DIR = "raw/cupti"
DECODE_FILE = "decode.json"
PROBE_TIMEOUT_S = 120.0
#: Where `tracer/worker` lives: the probe imports the worker's own library search there (only there).
_SOURCE_ROOT = Path(__file__).resolve().parents[3]

#: Run in the worker's interpreter: can it load libcupti, which one, and which CUDA does that env carry?
PROBE = """
import json, sys
sys.path.insert(0, sys.argv[1])
out = {}
try:
    from tracer.worker.cupti_trace import Library
    lib = Library()
    out.update(error=None, library=lib.path, version=lib.version())
except Exception as e:
    out["error"] = "%s: %s" % (type(e).__name__, e)
try:
    from importlib import metadata
    for dist in ("nvidia-cuda-runtime", "nvidia-cuda-runtime-cu12", "nvidia-cuda-cupti", "nvidia-cuda-cupti-cu12"):
        try:
            out["cuda"] = metadata.version(dist)
            break
        except Exception:
            pass
except ImportError:
    pass
print(json.dumps(out))
"""


def probe(python: str) -> dict[str, Any]:
    try:
        done = subprocess.run(
            [python, "-c", PROBE, str(_SOURCE_ROOT)],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            check=False,
        )
        return dict(json.loads(done.stdout.strip().splitlines()[-1]))
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError) as e:
        return {"error": f"could not run {python}: {e}"}


def install_hint(python: str, cuda: str | None) -> str:
    if cuda:
        major, minor = (cuda.split(".") + ["0"])[:2]
        dist = "nvidia-cuda-cupti" if int(major) >= 13 else f"nvidia-cuda-cupti-cu{major}"
        pin = f"{dist}=={major}.{minor}.*"
        why = f"its CUDA is {major}.{minor}"
    else:
        pin = "nvidia-cuda-cupti==<CUDA major.minor>.*"
        why = "match the CUDA the framework was built with, e.g. 13.0"
    return f"{python} -m pip install '{pin}' ({why}), or set {CUPTI_LIBRARY_ENV} to a libcupti.so"


class CuptiBackend(TraceBackend):
    name = "cupti"

    def check(self, spec: RunSpec, python: str = "") -> None:
        if spec.device != "gpu":
            raise UserError(
                "--trace cupti records CUDA activity and needs --device gpu; on CPU use --trace nsys or --trace torch"
            )
        if not python:
            return
        found = probe(python)
        if found.get("error"):
            raise UserError(
                f"--trace cupti needs CUPTI's library where the worker's interpreter can load it ({found['error']}): "
                + install_hint(python, found.get("cuda"))
            )

    def environment(self, folder: RunFolder, spec: RunSpec) -> dict[str, str]:
        return {TRACE_ENV: TRACE_CUPTI}

    def finish(self, folder: RunFolder) -> list[str]:
        cupti_dir = folder.path / CUPTI_DIR
        if not cupti_dir.is_dir():
            raise RuntimeError(f"the worker wrote no {CUPTI_DIR}/ (see raw/worker.log)")
        done = convert_dir(cupti_dir)
        kept = [str(p.relative_to(folder.path)) for p in done.paths]
        for extra in (CUPTI_CLOCK_FILE, CUPTI_META_FILE, CUPTI_STOP_FILE, CUPTI_INDEX_FILE, CUPTI_KERNEL_NAMES_FILE):
            if (cupti_dir / extra).exists():
                kept.append(f"{CUPTI_DIR}/{extra}")
        kept.append(f"{CUPTI_DIR}/{DECODE_FILE}")
        return kept


def convert_dir(cupti_dir: Path) -> Converted:
    """The run's buffers into records; what it gave (records, drops, errors) written to `decode.json`, and
    drops and errors said on stderr: a trace that lost records must say so."""
    done = convert(cupti_dir)
    summary = {"records": done.records, "dropped": done.dropped, "files": len(done.paths), "errors": done.errors}
    summary["unresolved_kernels"] = done.unresolved_kernels
    tmp = cupti_dir / (DECODE_FILE + ".tmp")
    tmp.write_text(json.dumps(summary, indent=1))
    os.replace(tmp, cupti_dir / DECODE_FILE)
    if done.dropped:
        print(f"--trace cupti: CUPTI dropped {done.dropped} records (buffer pool exhausted)", file=sys.stderr)
    for error in done.errors[:3]:
        print(f"--trace cupti: {error}", file=sys.stderr)
    return done


__all__ = ["RECORD_SCHEMA", "CuptiBackend", "convert_dir", "install_hint", "probe"]
