"""The CUPTI buffer decoder: its walk against CUPTI's own, its tables against the oracle recorded on a GPU
(tests/data/cupti/, made by scripts/cupti_record.py), and its crash and drop handling on the CPU."""

from __future__ import annotations

import gzip
import json
import re
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from tests.tracer.measure.tracing.cupti_here import (
    RECORDED,
    VERSION,
    api,
    kernel,
    libcupti_path,
    memcpy,
    memset,
    next_record_offsets,
)
from tracer.core.schema import (
    CUPTI_INDEX_FILE,
    CUPTI_KERNEL_NAMES_FILE,
    CUPTI_LAYOUT,
    CUPTI_META_FILE,
    MEMCPY_NAMES,
)
from tracer.measure.tracing.cupti_decode import (
    MEMSET_NAME,
    UNRESOLVED,
    DecodeError,
    Layouts,
    Meta,
    buffer_table,
    convert,
    read_index,
    walk,
)

L = CUPTI_LAYOUT
RT, DRV, KERNEL = L.KIND_RUNTIME, L.KIND_DRIVER, L.KIND_CONCURRENT_KERNEL
LAYOUTS = Layouts.of(VERSION)
NAME_PTR = 0x7F0000001000


def _mixed(repeats: int) -> bytes:
    return b"".join(
        [
            api(RT, 211, 100, 200, 1),
            kernel(NAME_PTR, 300, 400, 1),
            api(DRV, 307, 110, 190, 1),
            memcpy(1, 500, 600, 2, 4096),
            memset(700, 800, 3, 64),
        ]
        * repeats
    )


def _meta(cupti_dir: Path, kernel_names: dict[int, str] | None = None) -> None:
    meta = {
        "cupti_version": VERSION,
        "pid": 4242,
        "callback_names": {"runtime": {"211": "cudaLaunchKernel_v7000"}, "driver": {"307": "cuLaunchKernel"}},
    }
    (cupti_dir / CUPTI_META_FILE).write_text(json.dumps(meta))
    names = kernel_names if kernel_names is not None else {NAME_PTR: "void gemm<float, 128>(int, float*)"}
    (cupti_dir / CUPTI_KERNEL_NAMES_FILE).write_text(json.dumps({str(k): v for k, v in names.items()}))


def test_the_layouts_have_the_sizes_cupti_13_declares() -> None:
    sizes = {kind: dtype.itemsize for kind, dtype in LAYOUTS.dtypes.items()}
    assert sizes == {RT: 40, DRV: 40, KERNEL: 216, L.KIND_MEMCPY: 96, L.KIND_MEMSET: 88}
    fields: Any = LAYOUTS.dtypes[KERNEL].fields
    assert fields["name"][1] == 104 and fields["correlation_id"][1] == 92
    with pytest.raises(DecodeError, match="no CUPTI record layout declared for CUPTI API version 990001"):
        Layouts.of(990001)


def test_the_vectorised_walk_finds_the_records_cupti_finds() -> None:
    lib = libcupti_path()
    for data in (_mixed(1), _mixed(200), _mixed(3)[:-88]):
        offsets, kinds = next_record_offsets(lib, data)
        found = walk(data, LAYOUTS)
        assert found.error is None
        assert found.offsets.tolist() == offsets and found.kinds.tolist() == kinds


def test_the_walk_stops_where_a_record_has_no_layout() -> None:
    data = _mixed(2)
    bad = data[:256] + np.array([77, 0], "<u4").tobytes() + bytes(32) + data[256:]
    found = walk(bad, LAYOUTS)
    assert found.offsets.tolist() == [0, 40] and found.error == "record kind 77 at byte 256: no layout"
    truncated = walk(data[:-8], LAYOUTS)  # the last record cut short
    assert len(truncated.offsets) == 9 and "kind 2" in (truncated.error or "")
    assert walk(b"", LAYOUTS).offsets.tolist() == []


def test_a_buffer_becomes_the_records_table_the_analyzers_read(tmp_path: Path) -> None:
    _meta(tmp_path)
    table, found = buffer_table(_mixed(2), LAYOUTS, Meta.read(tmp_path))
    rows = table.to_pylist()
    assert [r["kind"] for r in rows] == ["runtime"] * 2 + ["driver"] * 2 + ["kernel"] * 2 + ["memcpy"] * 2 + [
        "memset"
    ] * 2
    assert rows[0] == {
        "kind": "runtime",
        "name": "cudaLaunchKernel_v7000",
        "start_ns": 100,
        "end_ns": 200,
        "pid": 4242,
        "tid": 77,
        "correlation_id": 1,
        "device": None,
        "stream": None,
        "bytes": None,
    }
    assert rows[2]["name"] == "cuLaunchKernel"
    assert rows[4]["name"] == "void gemm<float, 128>(int, float*)" and rows[4]["stream"] == 7
    assert rows[4]["pid"] == 4242 and rows[4]["tid"] is None and rows[4]["device"] == 0
    assert rows[6]["name"] == MEMCPY_NAMES[1] and rows[6]["bytes"] == 4096
    assert rows[8]["name"] == MEMSET_NAME and rows[8]["bytes"] == 64 and rows[8]["correlation_id"] == 3


def _write_run(cupti_dir: Path, buffers: list[bytes], index: list[dict[str, Any]] | None = None) -> None:
    cupti_dir.mkdir(parents=True, exist_ok=True)
    _meta(cupti_dir)
    lines = []
    for i, data in enumerate(buffers):
        (cupti_dir / f"buf-{i:05d}.bin").write_bytes(data)
        lines.append({"file": f"buf-{i:05d}.bin", "valid_bytes": len(data), "stream": 0, "dropped": 0, "t_ns": 1})
    lines += index or []
    (cupti_dir / CUPTI_INDEX_FILE).write_text("".join(json.dumps(d) + "\n" for d in lines))


def test_convert_keeps_what_a_crash_left_and_counts_the_drops(tmp_path: Path) -> None:
    cupti = tmp_path / "cupti"
    _write_run(cupti, [_mixed(1), _mixed(2)], index=[{"file": None, "valid_bytes": 0, "dropped": 12}])
    # the worker died after renaming a third buffer, before its index line; and mid-write of a fourth
    (cupti / "buf-00002.bin").write_bytes(_mixed(1))
    (cupti / "buf-00003.bin.tmp").write_bytes(b"half")
    with (cupti / CUPTI_INDEX_FILE).open("a") as f:
        f.write('{"file": "buf-0000')  # a line cut short
    assert [e.file for e in read_index(cupti)] == ["buf-00000.bin", "buf-00001.bin", None, "buf-00002.bin"]
    done = convert(cupti)
    assert [p.name for p in done.paths] == ["records-00000.parquet", "records-00001.parquet", "records-00002.parquet"]
    assert done.records == 20 and done.dropped == 12 and done.errors == [] and done.unresolved_kernels == 0
    assert not list(cupti.glob("buf-*"))
    assert pq.read_table(done.paths[1]).num_rows == 10


def test_kernels_whose_names_were_not_resolved_keep_their_pointer(tmp_path: Path) -> None:
    cupti = tmp_path / "cupti"
    _write_run(cupti, [_mixed(2)])
    _meta(cupti, kernel_names={})  # the worker was killed before its stop
    done = convert(cupti, remove_buffers=False)
    names = pq.read_table(done.paths[0]).column("name").to_pylist()
    assert f"{UNRESOLVED}{NAME_PTR:x}" in names and done.unresolved_kernels == 2
    assert (cupti / "buf-00000.bin").exists()


def test_the_analyzers_read_the_decoded_records_on_the_unix_clock(tmp_path: Path) -> None:
    from analyzers.ingest import cupti as ingest_cupti

    cupti = tmp_path / "cupti"
    _write_run(cupti, [_mixed(1)])
    (cupti / "clock.json").write_text(json.dumps({"offset_ns": 1_000_000}))
    convert(cupti)
    tables, _ = ingest_cupti.read_dir(cupti)
    api_rows = tables["cuda_api"].to_pylist()
    assert [r["api"] for r in api_rows] == ["cudaLaunchKernel", "cuLaunchKernel"]
    assert api_rows[0]["start_ns"] == 1_000_100 and api_rows[0]["dur_ns"] == 100
    assert tables["kernels"].column("short_name").to_pylist() == ["void gemm<float, 128>(int, float*)"]
    assert tables["memcpy"].column("kind").to_pylist() == ["[CUDA memcpy Host-to-Device]", "[CUDA memset]"]


# --- the recorded GPU data (scripts/cupti_record.py on the GPU machine; tests/data/cupti/README.md)


def _recorded_cases() -> list[Path]:
    return sorted(p.parent for p in RECORDED.glob("*/oracle.json.gz")) if RECORDED.is_dir() else []


def _require_recorded() -> list[Path]:
    cases = _recorded_cases()
    if not cases:
        pytest.skip(
            f"no recorded CUPTI buffers under {RECORDED} yet: run scripts/cupti_record.py OUTDIR on a GPU machine "
            "and copy OUTDIR/<case>/{cupti,oracle.json.gz} there"
        )
    return cases


def _oracle_rows(oracle: dict[str, Any], meta: Meta) -> dict[str, list[tuple[Any, ...]]]:
    """The oracle's records as records-table rows (CUPTI_COLUMNS order), per buffer file: CUPTI's walk,
    cupti-python's fields, the call names CUPTI gave at start."""
    recs = oracle["records"]
    out: dict[str, list[tuple[Any, ...]]] = {}

    def add(file: str, *row: Any) -> None:
        out.setdefault(file, []).append(row)

    a = recs["api"]
    for i in range(len(a["offset"])):
        kind = "runtime" if a["kind"][i] == RT else "driver"
        name = (meta.runtime_names if kind == "runtime" else meta.driver_names).get(a["cbid"][i])
        add(a["file"][i], kind, name, a["start"][i], a["end"][i], a["process_id"][i], a["thread_id"][i],
            a["correlation_id"][i], None, None, None)  # fmt: skip
    k = recs["kernel"]
    for i in range(len(k["offset"])):
        add(k["file"][i], "kernel", k["name"][i], k["start"][i], k["end"][i], meta.pid, None,
            k["correlation_id"][i], k["device_id"][i], k["stream_id"][i], None)  # fmt: skip
    for group in ("memcpy", "memset"):
        m = recs[group]
        for i in range(len(m["offset"])):
            name = MEMCPY_NAMES.get(m["copy_kind"][i]) if group == "memcpy" else MEMSET_NAME
            add(m["file"][i], group, name, m["start"][i], m["end"][i], meta.pid, None, m["correlation_id"][i],
                m["device_id"][i], m["stream_id"][i], m["bytes"][i])  # fmt: skip
    return out


def test_recorded_buffers_decode_to_what_cupti_and_cupti_python_read(tmp_path: Path) -> None:
    for case in _require_recorded():
        cupti = tmp_path / case.name
        shutil.copytree(case / "cupti", cupti)
        with gzip.open(case / "oracle.json.gz", "rt") as f:
            oracle = json.load(f)
        assert oracle["fields"], f"{case.name}: the oracle has no fields ({oracle.get('fields_error')})"
        meta = Meta.read(cupti)
        layouts = Layouts.of(meta.version)
        for name, walked in oracle["buffers"].items():
            found = walk((cupti / name).read_bytes(), layouts)
            assert found.error is None, (case.name, name, found.error)
            assert found.offsets.tolist() == walked["offsets"] and found.kinds.tolist() == walked["kinds"]
        expected = _oracle_rows(oracle, meta)
        done = convert(cupti)
        assert done.errors == [] and done.unresolved_kernels == 0 and done.dropped == 0
        assert done.records == sum(len(v) for v in expected.values()) > 0
        for path in done.paths:
            got = [tuple(r.values()) for r in pq.read_table(path).to_pylist()]
            want = expected.get(path.name.replace("records-", "buf-").replace(".parquet", ".bin"), [])
            assert sorted(got, key=repr) == sorted(want, key=repr), (case.name, path.name)


#: Kernels whose choice is cuDNN's or cuBLAS's autotuning (cudnn.benchmark): a second process may pick others,
#: and with them the launch calls around them, so only the rest is compared with the twin run.
AUTOTUNED = re.compile(r"cudnn|xmma|cutlass|cask|winograd|convolve|gemm|nchw|nhwc", re.IGNORECASE)


def test_recorded_batch_1_run_has_the_kernels_and_copies_cupti_python_saw(tmp_path: Path) -> None:
    """The same steps traced again with cupti-python as the collector (its own decoded activity objects):
    per kernel that autotuning does not choose (PyTorch's own element-wise, reduction and loss kernels), per
    copy and per set seen at least once a step, the same counts. The twin is another process, so cuDNN may
    pick other convolution kernels there (seen on the H200: 15 kernel names seen in one run only), and the API
    calls that launch them differ with them; those are compared to CUPTI's own walk in the test above."""
    cases = {p.name: p for p in _require_recorded()}
    theirs_file = RECORDED / "b1-cupti-python" / "counts.json"
    if "b1" not in cases or not theirs_file.exists():
        pytest.skip("the recorded data has no b1 case with its cupti-python twin (b1-cupti-python/counts.json)")
    twin = json.loads(theirs_file.read_text())
    theirs = {(r["kind"], r["name"]): r["count"] for r in twin["rows"]}
    copy_kind = {v: str(k) for k, v in MEMCPY_NAMES.items()}
    done = convert(shutil.copytree(cases["b1"] / "cupti", tmp_path / "b1"))
    ours: Counter[tuple[str, str]] = Counter()
    for path in done.paths:
        for kind, name in zip(*pq.read_table(path, columns=["kind", "name"]).to_pydict().values()):
            ours[(kind, copy_kind[name] if kind == "memcpy" else name)] += 1
    steps = twin["steps"]

    def compared(key: tuple[str, str], n: int) -> bool:
        kind, name = key
        return n >= steps and (kind in ("memcpy", "memset") or (kind == "kernel" and not AUTOTUNED.search(name)))

    keys = {k for k, n in theirs.items() if compared(k, n)} | {k for k, n in ours.items() if compared(k, n)}
    assert sum(1 for kind, _ in keys if kind == "kernel") >= 5 and any(kind == "memcpy" for kind, _ in keys)
    assert {key: ours[key] for key in sorted(keys)} == {key: theirs.get(key, 0) for key in sorted(keys)}
