"""`--trace cupti`: CUDA activity recorded inside the worker by CUPTI (`tracer/worker/cupti_trace.py`).

Works for any framework, without nsys; it needs a GPU and NVIDIA's `cupti-python` in the worker's
interpreter, matching the CUDA the framework uses. After the run, however it ended, the worker's
batch files become `raw/cupti/records-NNNNN.parquet` (the format `analyzers.tables` declares).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tracer.core.errors import UserError
from tracer.core.records import RunSpec
from tracer.core.runfolder import RunFolder
from tracer.core.schema import CUPTI_COLUMNS, TRACE_CUPTI, TRACE_ENV
from tracer.tracing.base import TraceBackend

CUPTI_DIR = "raw/cupti"
PROBE_TIMEOUT_S = 120.0
_CUPTI_TYPES = {"kind": pa.string(), "name": pa.string()}
RECORD_SCHEMA = pa.schema([(c, _CUPTI_TYPES.get(c, pa.int64())) for c in CUPTI_COLUMNS])

#: Run in the worker's interpreter: is `cupti` importable, and which CUDA does that env carry?
PROBE = """
import json
out = {}
try:
    from cupti import cupti
    out["error"] = None
except Exception as e:
    out["error"] = "%s: %s" % (type(e).__name__, e)
try:
    from importlib import metadata
    for dist in ("nvidia-cuda-cupti", "nvidia-cuda-cupti-cu12", "nvidia-cuda-cupti-cu11", "nvidia-cuda-runtime"):
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
            [python, "-c", PROBE], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, check=False
        )
        return dict(json.loads(done.stdout.strip().splitlines()[-1]))
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError) as e:
        return {"error": f"could not run {python}: {e}"}


def install_hint(python: str, cuda: str | None) -> str:
    if cuda:
        major_minor = ".".join(cuda.split(".")[:2])
        pin = f"cupti-python=={major_minor}.*"
        why = f"its CUDA is {major_minor}"
    else:
        pin = "cupti-python==<CUDA major.minor>.*"
        why = "match the CUDA the framework was built with, e.g. 13.0"
    return f"{python} -m pip install '{pin}' pyelftools  ({why})"


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
                f"--trace cupti needs NVIDIA's cupti-python in the worker's interpreter ({found['error']}): "
                + install_hint(python, found.get("cuda"))
            )

    def environment(self, folder: RunFolder, spec: RunSpec) -> dict[str, str]:
        return {TRACE_ENV: TRACE_CUPTI}

    def finish(self, folder: RunFolder) -> list[str]:
        cupti_dir = folder.path / CUPTI_DIR
        if not cupti_dir.is_dir():
            raise RuntimeError(f"the worker wrote no {CUPTI_DIR}/ (see raw/worker.log)")
        kept = [str(p.relative_to(folder.path)) for p in convert_batches(cupti_dir)]
        for extra in ("clock.json", "meta.json"):
            if (cupti_dir / extra).exists():
                kept.append(f"{CUPTI_DIR}/{extra}")
        return kept


def convert_batches(cupti_dir: Path) -> list[Path]:
    """Each worker batch `batch-NNNNN.json` becomes `records-NNNNN.parquet` (the batch is removed
    once its Parquet is in place; half-written `.tmp` files of a crashed worker are dropped)."""
    for tmp in cupti_dir.glob("batch-*.json.tmp"):
        tmp.unlink()
    for batch in sorted(cupti_dir.glob("batch-*.json")):
        data = json.loads(batch.read_text())
        out = cupti_dir / batch.name.replace("batch-", "records-").replace(".json", ".parquet")
        tmp = out.with_suffix(".parquet.tmp")
        pq.write_table(batch_table(data), tmp)
        os.replace(tmp, out)
        batch.unlink()
    return sorted(cupti_dir.glob("records-*.parquet"))


def batch_table(data: dict[str, Any]) -> pa.Table:
    cols = data["columns"]
    names = pa.array(data["names"], pa.string())
    arrays = []
    for field in RECORD_SCHEMA:
        if field.name == "name":
            arrays.append(names.take(pa.array(cols["name"], pa.int32())))
        else:
            arrays.append(pa.array(cols[field.name], field.type))
    return pa.Table.from_arrays(arrays, schema=RECORD_SCHEMA)
