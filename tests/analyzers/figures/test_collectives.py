"""Collectives as NCCL users read them, on the eight DLRM ranks: bytes equal the traces' own `nccl:*` input
sizes (read here with json and arithmetic), time the NCCL kernels', bus bandwidth NCCL's formula over both;
the straggler summary with its persistence, and its cause sized against its lateness, printed."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from analyzers.figures import collectives, straggler
from analyzers.figures.coverage import MIXED, NAMED_PCT, explain
from tests.conftest import run_tracer
from tracer.core.runfolder import RunFolder, list_runs

DLRM = "param-dlrm-8rank"
SIZES = {"float": 4, "long int": 8, "int": 4}  # the element types these traces' collectives carry
KINDS = {"nccl:all_reduce": "all_reduce", "nccl:all_to_all": "all_to_all"}


def _plain(path: Path) -> tuple[int, dict[str, tuple[int, int]], dict[str, float]]:
    """(rank, kind -> (calls, bytes) of its nccl:* ops, NCCL kernel kind -> µs) with json and sums only."""
    with gzip.open(path, "rt") as f:
        data: dict[str, Any] = json.load(f)
    ops: dict[str, tuple[int, int]] = {}
    kernels: dict[str, float] = {}
    for e in data["traceEvents"]:
        if e.get("ph") == "X" and e.get("name") in KINDS:
            dims, types = e["args"]["Input Dims"], e["args"]["Input type"]
            size = sum(SIZES[typ] * _product(shape) for shape, typ in zip(dims, types))
            calls, total = ops.get(KINDS[e["name"]], (0, 0))
            ops[KINDS[e["name"]]] = (calls + 1, total + size)
        if e.get("cat") == "kernel" and e["name"].startswith("ncclKernel_"):
            kind = e["name"].split("_")[1]
            kernels[kind] = kernels.get(kind, 0.0) + e["dur"]
    return data["distributedInfo"]["rank"], ops, kernels


def _product(shape: list[int]) -> int:
    out = 1
    for d in shape:
        out *= d
    return out


@pytest.fixture(scope="module")
def dlrm_run(real_fixtures: Path, tmp_path_factory: pytest.TempPathFactory) -> RunFolder:
    out = tmp_path_factory.mktemp("dlrm")
    result = run_tracer("import", str(real_fixtures / DLRM), "--out", str(out))
    assert result.returncode == 0, result.stderr
    (folder,) = list_runs(out)
    return folder


def test_bytes_time_and_bandwidths_are_the_traces_own(dlrm_run: RunFolder, real_fixtures: Path) -> None:
    table = collectives.table(dlrm_run)
    assert table is not None and table.world_size == 8 and table.bytes_from == collectives.BYTES_FROM_TRACE
    rows = {(r.rank, r.kind): r for r in table.rows}
    n = 8
    for path in sorted((real_fixtures / DLRM).iterdir()):
        rank, ops, kernels = _plain(path)
        assert {k for r, k in rows if r == rank} == set(ops)
        for kind, (calls, size) in ops.items():
            row = rows[(rank, kind)]
            assert (row.calls, row.bytes) == (calls, size), (path.name, kind)
        # all-reduce runs as ncclKernel_AllReduce_*, all-to-all as ncclKernel_SendRecv_* (both of this NCCL)
        assert rows[(rank, "all_reduce")].time_s == pytest.approx(kernels["AllReduce"] / 1e6, abs=1e-9)
        assert rows[(rank, "all_to_all")].time_s == pytest.approx(kernels["SendRecv"] / 1e6, abs=1e-9)
        for kind, factor in (("all_reduce", 2 * (n - 1) / n), ("all_to_all", (n - 1) / n)):
            row = rows[(rank, kind)]
            assert row.bytes is not None and row.algbw_gbps is not None and row.busbw_gbps is not None
            assert row.algbw_gbps == pytest.approx(row.bytes / row.time_s / 1e9, rel=1e-12)
            assert row.busbw_gbps == pytest.approx(row.algbw_gbps * factor, rel=1e-12)
            assert row.exposed_s + row.hidden_s == pytest.approx(row.time_s, abs=1e-12)
            assert row.wait_s is not None and row.transfer_s is not None
            assert row.wait_s + row.transfer_s == pytest.approx(row.time_s, abs=1e-12) and row.transfer_s > 0


def test_the_straggler_summary_says_who_is_last_and_whether_it_persists(dlrm_run: RunFolder) -> None:
    found = straggler.straggler(dlrm_run)
    assert found is not None and found.rank == 7 and found.summary
    by_rank = {r.rank: r for r in found.summary}
    assert {r: s.last for r, s in by_rank.items() if s.last} == found.last_counts
    assert sum(s.last for s in by_rank.values()) == sum(s.first for s in by_rank.values()) == found.collectives
    assert max(by_rank.values(), key=lambda s: s.mean_late_s).rank == 7  # the latest on average, too
    # one profiled step per rank: persistence is read over the collectives (5 of 8 last: at least half)
    assert (found.persistence, found.persistence_over) == (straggler.PERSISTENT, "collectives")
    assert by_rank[7].last_steps == by_rank[7].steps == 1
    e = found.explanation
    assert e is not None and e.effect_s == found.late_by_s
    assert sum(p.seconds for p in e.parts) + e.unexplained_s == pytest.approx(e.effect_s, abs=1e-15)
    assert max(p.pct for p in e.parts) < NAMED_PCT and found.cause == e.cause == MIXED  # data wait: a third
    shown = run_tracer("analyze", str(dlrm_run.path))
    assert shown.returncode == 0, shown.stderr
    said = " ".join(shown.stdout.split())
    assert "straggler: rank 7, last at 5 of 8" in said and "the last rank is persistent over the collectives" in said
    assert f"{round(e.unexplained_pct)} % unexplained" in said and "mixed (no part covers 80 % of the lateness)" in said
    assert "busbw (GB/s)" in said
    as_json = run_tracer("analyze", str(dlrm_run.path), "--format", "json")
    data = json.loads(as_json.stdout)
    assert data["straggler"]["explanation"]["cause"] == MIXED and len(data["collectives"]["rows"]) == 16
    diagnosed = run_tracer("diagnose", str(dlrm_run.path))
    assert "its cause is mixed" in " ".join(diagnosed.stdout.split())


def test_a_cause_is_named_only_when_it_covers_most_of_the_effect() -> None:
    named = explain(10.0, {"data wait": 8.5, "host time": 0.5})
    assert named.cause == "data wait" and named.unexplained_s == pytest.approx(1.0)
    assert named.text("the gap") == "data wait: 85 % of the gap, host time 5 %, 10 % unexplained"
    three = explain(10.0, {"data wait": 8.5, "host time": 0.5, "GPU compute": 0.5})
    assert three.text("the gap") == "data wait: 85 % of the gap, the other parts 10 %, 5 % unexplained"
    alone = explain(10.0, {"data wait": 9.0})
    assert alone.text("the gap") == "data wait: 90 % of the gap, 10 % unexplained"
    mixed = explain(10.0, {"data wait": 3.4, "host time": 2.0, "GPU compute": -0.2})
    assert mixed.cause == MIXED and mixed.unexplained_s == pytest.approx(4.8)
    said = mixed.text("the lateness")
    assert said.endswith("data wait 34 %, host time 20 %, the other parts against it by 2 %; 48 % unexplained")
    assert explain(0.0, {"data wait": 1.0}).cause is None


def test_the_report_and_the_viewers_lanes_show_them(dlrm_run: RunFolder, tmp_path: Path) -> None:
    from analyzers.timeline import lanes

    done = run_tracer("report", str(dlrm_run.path), "--out", str(tmp_path / "report"))
    assert done.returncode == 0, done.stderr
    ranks = (tmp_path / "report" / "ranks.md").read_text()
    assert "busbw (GB/s)" in ranks and "| 7 | 5 | 0 |" in ranks  # rank 7: last at 5, first at none
    assert "straggler: rank 7, last at 5 of 8" in ranks and "% unexplained" in ranks
    page = (tmp_path / "report" / "index.html").read_text()
    assert "busbw (GB/s)" in page and "the last rank is persistent over the collectives" in page
    drawn = lanes.load(dlrm_run)
    assert drawn.gpu is not None and "rank 7 · steps (last at 5 of 8)" in drawn.gpu.lane_names


def test_without_recorded_shapes_the_bytes_are_record_param_comms(real_fixtures: Path, tmp_path: Path) -> None:
    """HTA's 2-rank DDP trace (PyTorch 2.3, no record_shapes): each `nccl:*` range sits inside a
    `record_param_comms` whose `In msg nelems` and `dtype` give the message; summed here with json."""
    trace = real_fixtures / "hta" / "nccl_data.json.gz"
    with gzip.open(trace, "rt") as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    params = [e for e in events if e["name"] == "record_param_comms" and "In msg nelems" in e.get("args", {})]
    expected: dict[str, int] = {}
    for op in (e for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("nccl:")):
        around = [
            p
            for p in params
            if p["tid"] == op["tid"] and p["ts"] <= op["ts"] <= op["ts"] + op["dur"] <= p["ts"] + p["dur"]
        ]
        (p,) = around
        kind = {"nccl:all_reduce": "all_reduce", "nccl:broadcast": "broadcast"}[op["name"]]
        expected[kind] = (
            expected.get(kind, 0) + {"Float": 4, "Long": 8}[p["args"]["dtype"]] * p["args"]["In msg nelems"]
        )
    assert run_tracer("import", str(trace), "--out", str(tmp_path)).returncode == 0
    (run,) = list_runs(tmp_path)
    table = collectives.table(run)
    assert table is not None and table.world_size == 2
    assert {r.kind: r.bytes for r in table.rows} == expected
    for r in table.rows:  # n = 2: all-reduce 2(n-1)/n = 1, broadcast 1
        assert r.busbw_gbps == pytest.approx(r.bytes / r.time_s / 1e9, rel=1e-12)  # type: ignore[operator]
