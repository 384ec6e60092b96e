"""The CUDA API summary against independent computations: plain SQL over each nsys SQLite file and a
plain json pass over each Kineto trace, to the nanosecond."""

from __future__ import annotations

import gzip
import json
import sqlite3
import statistics
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from analyzers.figures import phase_cuts
from analyzers.figures import phases as phases_module
from analyzers.summaries import cuda_api
from analyzers.trace import api_names
from analyzers.trace.tables import CUDA_API
from tests.analyzers.conftest import KINETO_FILES, NSYS_FILES
from tracer.core.runfolder import RunFolder


def expected_from_durations(durs: dict[str, list[int]], shown: dict[str, str]) -> dict[tuple[str, int], tuple]:
    grand = sum(sum(v) for v in durs.values())
    out = {}
    for key, d in durs.items():
        total = sum(d)
        out[(shown[key], total)] = (
            total * 100.0 / grand,
            len(d),
            total / len(d),
            statistics.median(d),
            min(d),
            max(d),
            statistics.stdev(d) if len(d) > 1 else 0.0,
        )
    return out


def sqlite_durations(path: Path) -> tuple[dict[str, list[int]], dict[str, str]]:
    """Plain SQL: runtime rows without the 2021 backtrace duplicates (eventClass 67), nsys's name rule."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    rows = con.execute(
        """SELECT s.value,
                  CASE substr(s.value, -6, 2) WHEN '_v' THEN substr(s.value, 1, length(s.value) - 6)
                  ELSE s.value END,
                  r.end - r.start
           FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId
           WHERE r.eventClass != 67"""
    ).fetchall()
    con.close()
    durs: dict[str, list[int]] = defaultdict(list)
    shown = {}
    for name, display, d in rows:
        durs[name].append(d)
        shown[name] = display
    return durs, shown


def kineto_durations(path: Path) -> tuple[dict[str, list[int]], dict[str, str]]:
    """Plain json pass: X events of the runtime/driver categories, µs to exact ns."""
    with gzip.open(path, "rt") as f:
        doc = json.load(f, parse_float=Decimal)
    durs: dict[str, list[int]] = defaultdict(list)
    for ev in doc["traceEvents"]:
        if ev.get("ph") == "X" and ev.get("cat") in ("cuda_runtime", "cuda_driver", "Runtime"):
            durs[ev["name"]].append(int((Decimal(ev["dur"]) * 1000).to_integral_value()))
    return durs, {k: k for k in durs}


def check(rows: list[cuda_api.ApiRow], expected: dict[tuple[str, int], tuple]) -> None:
    assert len(rows) == len(expected)
    assert [r.total_ns for r in rows] == sorted((r.total_ns for r in rows), reverse=True)
    for r in rows:
        pct, calls, avg, med, mn, mx, sd = expected[(r.name, r.total_ns)]
        assert (r.calls, r.min_ns, r.max_ns) == (calls, mn, mx)
        assert r.med_ns == med
        assert r.avg_ns == pytest.approx(avg, rel=1e-12)
        assert r.stddev_ns == pytest.approx(sd, rel=1e-9, abs=1e-6)
        assert r.time_pct == pytest.approx(pct, rel=1e-12)


@pytest.mark.parametrize("rel", NSYS_FILES)
def test_nsys_summary_equals_plain_sql(rel: str, real_fixtures: Path, ingested: dict[str, RunFolder]) -> None:
    check(cuda_api.api_summary(ingested[rel]), expected_from_durations(*sqlite_durations(real_fixtures / rel)))


@pytest.mark.parametrize("rel", KINETO_FILES)
def test_kineto_summary_equals_plain_json_pass(rel: str, real_fixtures: Path, ingested: dict[str, RunFolder]) -> None:
    check(cuda_api.api_summary(ingested[rel]), expected_from_durations(*kineto_durations(real_fixtures / rel)))


def test_kineto_h100_split_is_the_documented_one(ingested: dict[str, RunFolder]) -> None:
    rows = cuda_api.api_summary(ingested[KINETO_FILES[1]])
    top = [(r.name, round(r.time_pct, 1)) for r in rows[:5]]
    assert top == [
        ("cudaLaunchKernel", 39.4),
        ("cudaDeviceSynchronize", 35.0),
        ("cudaLaunchKernelExC", 11.4),
        ("cudaFuncGetAttributes", 6.2),
        ("cudaMemsetAsync", 3.9),
    ]


def test_2021_backtrace_duplicates_are_filtered(ingested: dict[str, RunFolder]) -> None:
    rows = cuda_api.api_summary(ingested["extra-p/ex-gpu.s10.sqlite"])
    assert sum(r.calls for r in rows) == 18  # 36 rows in the file, half of them eventClass 67
    assert {r.name for r in rows} == {"cudaMalloc", "cudaLaunchKernel", "cudaDeviceSynchronize", "cudaMemcpy"}
    table = pq.read_table(ingested["extra-p/ex-gpu.s10.sqlite"].table_path(CUDA_API))
    assert all(n.endswith(("_v3020", "_v7000")) for n in table["name"].to_pylist())


def test_name_rule_keeps_longer_suffixes(ingested: dict[str, RunFolder]) -> None:
    names = {r.name for r in cuda_api.api_summary(ingested[NSYS_FILES[0]])}
    assert "cudaLaunchKernel" in names and "cudaLaunchKernel_v7000" not in names
    assert "cudaLaunchKernelExC_v11060" in names  # nsys strips exactly `_v` + 4 characters
    assert "cuGetProcAddress_v2" in names


@pytest.mark.parametrize("rel", NSYS_FILES)
def test_global_tid_decoded(rel: str, real_fixtures: Path, ingested: dict[str, RunFolder]) -> None:
    con = sqlite3.connect(f"file:{real_fixtures / rel}?mode=ro", uri=True)
    gtids = [g for (g,) in con.execute("SELECT globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass != 67")]
    con.close()
    expected = sorted(((g >> 24) & 0xFFFFFF, g & 0xFFFFFF) for g in gtids)
    table = pq.read_table(ingested[rel].table_path(CUDA_API))
    assert sorted(zip(table["pid"].to_pylist(), table["tid"].to_pylist())) == expected
    assert all(0 < p < 1 << 24 for p, _ in expected)


def test_runtime_and_driver_kinds(ingested: dict[str, RunFolder]) -> None:
    table = pq.read_table(ingested[NSYS_FILES[0]].table_path(CUDA_API))
    kinds = defaultdict(set)
    for name, kind in zip(table["api"].to_pylist(), table["kind"].to_pylist()):
        kinds[kind].add(name)
    assert "cuLibraryLoadData" in kinds["driver"] and "cudaMalloc" in kinds["runtime"]
    assert len(table) == 7116


def test_clock_is_unix_ns_where_the_source_says_so(ingested: dict[str, RunFolder], real_fixtures: Path) -> None:
    con = sqlite3.connect(f"file:{real_fixtures / NSYS_FILES[0]}?mode=ro", uri=True)
    (base,) = con.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME").fetchone()
    (first,) = con.execute("SELECT min(start) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()
    con.close()
    table = pq.read_table(ingested[NSYS_FILES[0]].table_path(CUDA_API))
    assert table["start_ns"][0].as_py() == base + first
    meta = json.loads((ingested["extra-p/ex-gpu.s10.sqlite"].path / "trace_meta.json").read_text())
    assert meta["nsys"]["clock"] == "relative_ns"
    k = pq.read_table(ingested[KINETO_FILES[1]].table_path(CUDA_API))
    assert 1.79e18 < k["start_ns"][0].as_py() < 1.80e18  # baseTimeNanoseconds + ts, late 2026


def test_phases_partition_the_whole(ingested: dict[str, RunFolder], real_fixtures: Path) -> None:
    folder = ingested[NSYS_FILES[0]]
    phases = cuda_api.phase_summaries(folder)
    assert {"whole", "startup", "warmup", "steady", "teardown"} <= set(phases)
    parts_of = ("startup", "warmup", "steady", "teardown")
    by_phase = {k: {r.name: r for r in phases[k]} for k in ("whole", *parts_of)}
    for name, r in by_phase["whole"].items():
        parts = [p for p in (by_phase[k].get(name) for k in parts_of) if p]
        assert sum(p.total_ns for p in parts) == r.total_ns
        assert sum(p.calls for p in parts) == r.calls
    # no epoch marks in this trace: the first NVTX step range (step0) is the warm-up; context creation
    # and the caching allocator's first cudaMalloc calls fall before step1, none in the steady steps
    startup, warmup, steady = by_phase["startup"], by_phase["warmup"], by_phase["steady"]
    assert startup["cudaMalloc"].calls + warmup["cudaMalloc"].calls == 50 and "cudaMalloc" not in steady
    con = sqlite3.connect(f"file:{real_fixtures / NSYS_FILES[0]}?mode=ro", uri=True)
    (n_after,) = con.execute(
        "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME "
        "WHERE start >= (SELECT start FROM NVTX_EVENTS WHERE text='step1')"
    ).fetchone()
    con.close()
    assert sum(r.calls for r in steady.values()) + sum(r.calls for r in by_phase["teardown"].values()) == n_after
    # the process's teardown (after the last step range) is not steady state
    assert all(r.name != "cuLibraryUnload" for r in steady.values())
    assert {p.name: p.note for p in cuda_api.phases(folder)}["steady"] == phases_module.STEPS_NOTE


def test_epoch_phases_from_worker_events(tmp_path: Path, ingested: dict[str, RunFolder]) -> None:
    src = ingested[KINETO_FILES[1]]
    folder = RunFolder(tmp_path)
    table = pq.read_table(src.table_path(CUDA_API))
    pq.write_table(table, folder.table_path(CUDA_API))
    t0, t1 = table["start_ns"][0].as_py(), table["end_ns"][-1].as_py()
    mid = (t0 + t1) // 2
    events = [
        {"kind": "epoch_start", "epoch": 1, "t_ns": t0},
        {"kind": "epoch_end", "epoch": 1, "t_ns": mid, "images": 10, "loss": 1.0},
        {"kind": "epoch_start", "epoch": 2, "t_ns": mid},
        {"kind": "epoch_end", "epoch": 2, "t_ns": t1 + 1, "images": 10, "loss": 1.0},
    ]
    folder.events_path.write_text("".join(json.dumps(e) + "\n" for e in events))
    phases = cuda_api.phase_summaries(folder)
    calls = {k: sum(r.calls for r in v) for k, v in phases.items()}
    assert calls["epoch 1"] + calls["epoch 2"] == calls["whole"] == table.num_rows
    # cut at the epochs: epoch 1 is the warm-up, epoch 2 the steady state
    assert calls["startup"] == 0 and calls["warmup"] == calls["epoch 1"] and calls["steady"] == calls["epoch 2"]


def test_a_trace_without_markers_gets_the_stated_fallback(ingested: dict[str, RunFolder]) -> None:
    """No step range, no epoch: steady state runs from the first to the last kernel launch, and says so."""
    folder = next(f for f in ingested.values() if not phase_cuts.nvtx_ranges(f) and not f.epochs())
    cuts = {p.name: p for p in cuda_api.phases(folder)}
    steady = cuts["steady"]
    assert steady.note == cuda_api.FALLBACK_NOTE
    table = pq.read_table(folder.table_path(CUDA_API)).to_pylist()
    launches = [r for r in table if api_names.match_name(r["name"]) in api_names.LAUNCH_CALLS]
    assert launches and steady.start_ns == min(r["start_ns"] for r in launches)
    assert steady.end_ns == max(r["end_ns"] for r in launches)
    summaries = cuda_api.phase_summaries(folder)
    assert summaries["steady"] and sum(r.calls for r in summaries["steady"]) <= sum(r.calls for r in summaries["whole"])


def test_overlapping_ranges_in_one_scan_equal_each_range_alone(
    ingested: dict[str, RunFolder], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ranges of one scan (`summarise_ranges`: layers, binary search, streamed batches) give each
    range the rows a plain filter on that range alone gives: nested, touching, empty and outside ranges,
    in batches of 997 rows so that ranges cross batches."""
    monkeypatch.setattr(cuda_api, "_BATCH_ROWS", 997)
    path = ingested[KINETO_FILES[1]].table_path(CUDA_API)
    starts = pq.read_table(path, columns=["start_ns"])["start_ns"].to_pylist()
    assert len(starts) > 5 * 997
    lo, hi = min(starts), max(starts)
    cuts = [lo + (hi + 1 - lo) * k // 7 for k in range(8)]  # seven ranges that partition the rows
    ranges: list[cuda_api.Range] = [(None, None), (cuts[0], cuts[3]), (cuts[3], cuts[7]), (cuts[5], cuts[5])]
    ranges += [(a, b) for a, b in zip(cuts, cuts[1:])] + [(cuts[1], cuts[6]), (None, cuts[2]), (hi + 1, None)]
    together = cuda_api.summarise_ranges(path, "name", "api", ranges)
    alone = [cuda_api.summarise_ranges(path, "name", "api", [r]) for r in ranges]
    bounded = [(-(1 << 62) if a is None else a, 1 << 62 if b is None else b) for a, b in ranges]
    assert len(cuda_api.range_layers(bounded)) > 1
    for rows, (only,) in zip(together, alone):
        assert [r[:5] + r[6:8] for r in rows] == [r[:5] + r[6:8] for r in only]
        assert [r[5] for r in rows] == pytest.approx([r[5] for r in only], rel=1e-12)
        assert [r[8] for r in rows] == pytest.approx([r[8] for r in only], rel=1e-9, abs=1e-6)
    assert together[0] and not together[3] and not together[-1]
    assert sum(sum(r[3] for r in rows) for rows in together[4:11]) == sum(r[3] for r in together[0])


@pytest.mark.parametrize(
    ("ranges", "layers"),
    [
        ([(0, 100), (0, 10), (10, 90), (90, 100)], [[1, 2, 3], [0]]),
        ([(5, 6), (0, 3), (3, 5)], [[1, 2, 0]]),
        ([(0, 10), (2, 8), (4, 6), (10, 12)], [[0, 3], [1], [2]]),
        ([(4, 4), (7, 3)], []),
    ],
)
def test_ranges_are_dealt_into_layers_without_overlaps(ranges: list[tuple[int, int]], layers: list[list[int]]) -> None:
    assert cuda_api.range_layers(ranges) == layers


def test_a_call_without_a_start_is_in_no_range(ingested: dict[str, RunFolder], tmp_path: Path) -> None:
    """A table with null starts (a damaged or foreign file): those rows count in no range, in one scan of
    several ranges as in a filter on one."""
    import pyarrow as pa
    import pyarrow.compute as pc

    table = pq.read_table(ingested[KINETO_FILES[1]].table_path(CUDA_API))
    starts = table.column("start_ns")
    blank = pa.array([i % 5 == 0 for i in range(table.num_rows)])
    holed = table.set_column(table.schema.get_field_index("start_ns"), "start_ns", pc.if_else(blank, None, starts))
    path = tmp_path / "cuda_api.parquet"
    pq.write_table(holed, path)
    lo, hi = pc.min(starts).as_py(), pc.max(starts).as_py() + 1
    mid = (lo + hi) // 2
    together = cuda_api.summarise_ranges(path, "name", "api", [(None, None), (lo, mid), (mid, hi)])
    kept = table.num_rows - sum(1 for i in range(table.num_rows) if i % 5 == 0)
    assert sum(r[3] for r in together[0]) == kept == sum(r[3] for rows in together[1:] for r in rows)
    (alone,) = cuda_api.summarise_ranges(path, "name", "api", [(None, None)])
    assert [r[:5] + r[6:8] for r in together[0]] == [r[:5] + r[6:8] for r in alone]
    assert [r[8] for r in together[0]] == pytest.approx([r[8] for r in alone], rel=1e-9, abs=1e-6)
