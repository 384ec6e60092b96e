"""scripts/cupti_record.py's oracle on the CPU: the real libcupti walks buffers laid out as CUPTI 13 lays
them out, and the collector's own walk must agree with it; without cupti-python the oracle says so
instead of reading fields some other way. (The recording itself needs a GPU: see tests/data/cupti/.)"""

from __future__ import annotations

import gzip
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace

from tests.tracer.measure.tracing.cupti_here import api, kernel, libcupti_path, memcpy, memset
from tracer.core.schema import CUPTI_LAYOUT
from tracer.worker import cupti_trace

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "cupti_record.py"
L = CUPTI_LAYOUT


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("cupti_record", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_oracle_is_cuptis_own_walk_and_agrees_with_the_collectors(tmp_path: Path) -> None:
    lib = cupti_trace.Library(libcupti_path())
    buffers = [
        api(L.KIND_RUNTIME, 211, 1, 2, 1) + kernel(0, 3, 4, 1) + memcpy(1, 5, 6, 2, 8),
        api(L.KIND_DRIVER, 307, 7, 8, 3) + memset(9, 10, 4, 16),
    ]
    files = []
    for i, data in enumerate(buffers):
        files.append(str(tmp_path / f"buf-{i:05d}.bin"))
        Path(files[-1]).write_bytes(data)
    collector = SimpleNamespace(lib=lib, version=lib.version(), writer=SimpleNamespace(files=lambda: files))
    summary: dict[str, object] = {}
    _script()._oracle(collector, str(tmp_path), summary)
    with gzip.open(tmp_path / "oracle.json.gz", "rt") as f:
        oracle = json.load(f)
    assert oracle["walk"] == "cuptiActivityGetNextRecord"
    assert oracle["buffers"]["buf-00000.bin"]["offsets"] == [0, 40, 256]
    assert oracle["buffers"]["buf-00001.bin"]["kinds"] == [L.KIND_DRIVER, L.KIND_MEMSET]
    found = summary["oracle"]
    assert isinstance(found, dict) and found["walks_agree"] is True
    if oracle["fields"] is None:  # no importable cupti-python here: said, not replaced by our own reading
        assert oracle["fields_error"] and oracle["records"]["api"]["cbid"] == []
    else:
        assert oracle["fields"].startswith("cupti-python") and oracle["records"]["api"]["cbid"] == [211, 307]


def test_the_script_without_an_outdir_says_how_to_run_it() -> None:
    import subprocess

    done = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "usage: python3 scripts/cupti_record.py OUTDIR" in done.stderr
