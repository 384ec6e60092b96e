"""Many ranks, one run: per-rank Kineto traces and a several-process nsys export imported as one run,
its per-rank table and its straggler, each checked against a plain reading of the raw files."""

from __future__ import annotations

import gzip
import json
import sqlite3
import tarfile
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from analyzers.figures import straggler
from analyzers.figures.ranks import COMM_NCCL, rank_table
from analyzers.trace import collectives
from analyzers.trace import tables as t
from tests.conftest import run_tracer
from tracer.core import schema
from tracer.core.runfolder import RunFolder, list_runs

DLRM = "param-dlrm-8rank"


def _events(path: Path) -> dict[str, Any]:
    with gzip.open(path, "rt") as f:
        data: dict[str, Any] = json.load(f)
    return data


def _plain_sums(path: Path) -> tuple[int, float, float]:
    """(rank, ProfilerStep µs, NCCL kernel µs) read with json and sums, nothing of the tool."""
    data = _events(path)
    events = data["traceEvents"]
    steps = sum(e["dur"] for e in events if str(e.get("name", "")).startswith("ProfilerStep#") and e.get("ph") == "X")
    nccl = sum(
        e["dur"] for e in events if e.get("cat") == "kernel" and e["name"].startswith(("ncclKernel_", "ncclDevKernel_"))
    )
    return data["distributedInfo"]["rank"], steps, nccl


@pytest.fixture(scope="module")
def dlrm_run(real_fixtures: Path, tmp_path_factory: pytest.TempPathFactory) -> RunFolder:
    out = tmp_path_factory.mktemp("dlrm")
    result = run_tracer("import", str(real_fixtures / DLRM), "--out", str(out))
    assert result.returncode == 0, result.stderr
    (folder,) = list_runs(out)
    return folder


def test_eight_dlrm_ranks_are_one_run_of_world_size_8(dlrm_run: RunFolder) -> None:
    record = dlrm_run.read_record()
    assert record.world_size == 8
    assert [r.rank for r in record.rank_infos] == list(range(8))
    assert {r.device for r in record.rank_infos} == {"Tesla V100-SXM2-32GB"}
    assert {r.backend for r in record.rank_infos} == {"nccl"}
    assert "Tesla V100-SXM2-32GB" in record.environment.gpu_text
    assert record.imported is not None and "batch" in record.imported.not_recorded  # no made-up batch
    meta = json.loads((dlrm_run.path / t.TRACE_META).read_text())[t.SOURCE_KINETO]
    assert "Unix time" in meta[t.ALIGNMENT_FACT] and len(meta[t.RANKS_FACT]) == 8
    kernels = pq.read_table(dlrm_run.table_path(t.KERNELS))
    assert sorted(set(kernels[schema.RANK].to_pylist())) == list(range(8))
    shown = run_tracer("show", str(dlrm_run.path))
    assert shown.returncode == 0 and "ranks: 8 of world size 8 (nccl; Tesla V100-SXM2-32GB)" in shown.stdout
    assert "batch 1" not in shown.stdout


def test_per_rank_step_and_nccl_time_equal_plain_sums(dlrm_run: RunFolder, real_fixtures: Path) -> None:
    table = rank_table(dlrm_run)
    assert table is not None and table.comm_source == COMM_NCCL
    rows = {r.rank: r for r in table.rows}
    for path in sorted((real_fixtures / DLRM).iterdir()):
        rank, step_us, nccl_us = _plain_sums(path)
        assert rows[rank].steps == 1
        assert rows[rank].step_s == pytest.approx(step_us / 1e6, abs=1e-9), path.name
        assert rows[rank].comm_s == pytest.approx(nccl_us / 1e6, abs=1e-9), path.name
    assert min(r.comm_s or 0 for r in rows.values()) < 0.002 < 0.011 < max(r.comm_s or 0 for r in rows.values())


def test_straggler_is_the_last_to_arrive_not_the_one_that_waited_most(dlrm_run: RunFolder, real_fixtures: Path) -> None:
    """Recomputed from the raw files: at each NCCL kernel (k-th of its kind on every rank) the latest
    start is the rank that held the others back."""
    starts: dict[int, dict[tuple[str, int], float]] = {}
    for path in sorted((real_fixtures / DLRM).iterdir()):
        data = _events(path)
        seen: dict[str, int] = {}
        mine: dict[tuple[str, int], float] = {}
        kernels = sorted(
            (e for e in data["traceEvents"] if e.get("cat") == "kernel" and e["name"].startswith("ncclKernel_")),
            key=lambda e: e["ts"],
        )
        for e in kernels:
            kind = e["name"].split("_")[1]
            seen[kind] = seen.get(kind, -1) + 1
            mine[(kind, seen[kind])] = e["ts"]
        starts[data["distributedInfo"]["rank"]] = mine
    last: dict[int, int] = {}
    for key in starts[0]:
        who = max(starts, key=lambda r: starts[r][key])
        last[who] = last.get(who, 0) + 1
    found = straggler.straggler(dlrm_run)
    assert found is not None and found.last_counts == last
    assert found.rank == max(last, key=lambda r: last[r])
    assert found.waited_most != found.rank  # the rank that waited longest arrived early
    diagnosed = run_tracer("diagnose", str(dlrm_run.path), "--format", "json")
    assert diagnosed.returncode == 0, diagnosed.stderr
    assert f"rank {found.rank} arrived last" in diagnosed.stdout


def test_a_tar_of_the_ranks_imports_the_same(real_fixtures: Path, tmp_path: Path, dlrm_run: RunFolder) -> None:
    archive = tmp_path / "dlrm.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for path in sorted((real_fixtures / DLRM).iterdir()):
            tar.add(path, arcname=f"kineto/{path.name}")
    result = run_tracer("import", str(archive), "--out", str(tmp_path / "runs"))
    assert result.returncode == 0, result.stderr
    (folder,) = list_runs(tmp_path / "runs")
    assert folder.read_record().world_size == 8
    a, b = rank_table(folder), rank_table(dlrm_run)
    assert a is not None and b is not None and a.rows == b.rows


def test_two_files_of_one_rank_are_refused(real_fixtures: Path, tmp_path: Path) -> None:
    first = sorted((real_fixtures / DLRM).iterdir())[0]
    copy = tmp_path / ("copy-" + first.name)
    copy.write_bytes(first.read_bytes())
    result = run_tracer("import", str(first), str(copy), "--out", str(tmp_path / "runs"))
    assert result.returncode == 2 and "both rank 0" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_nsys_two_gpu_export_splits_into_two_ranks(real_fixtures: Path, tmp_path: Path) -> None:
    """Each rank's kernels and NVTX ranges are exactly its process's rows, by a plain SQL query."""
    export = real_fixtures / "nsys-ai" / "mfu_2gpu_before.sqlite"
    result = run_tracer("import", str(export), "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    (folder,) = list_runs(tmp_path)
    record = folder.read_record()
    assert record.world_size == 2
    pids = [r.pid for r in record.rank_infos]
    kernels = pq.read_table(folder.table_path(t.KERNELS))
    nvtx = pq.read_table(folder.table_path(t.NVTX))
    db = sqlite3.connect(f"file:{export}?mode=ro", uri=True)
    for rank, pid in enumerate(pids):
        k_sql = db.execute(
            "SELECT count(*), sum(end - start) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE (globalPid >> 24) & 0xFFFFFF = ?",
            (pid,),
        ).fetchone()
        mine = t.of_rank(kernels, rank)
        assert (mine.num_rows, pc.sum(mine["dur_ns"]).as_py()) == k_sql
        nccl_sql = db.execute(
            "SELECT sum(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName "
            "WHERE (k.globalPid >> 24) & 0xFFFFFF = ? AND s.value LIKE 'ncclDevKernel%'",
            (pid,),
        ).fetchone()[0]
        nccl = mine.filter(collectives.nccl_mask(mine["name"]))
        assert pc.sum(nccl["dur_ns"]).as_py() == nccl_sql  # the newer naming era is communication too
        n_sql = db.execute(
            "SELECT count(*) FROM NVTX_EVENTS WHERE (globalTid >> 24) & 0xFFFFFF = ?", (pid,)
        ).fetchone()[0]
        assert t.of_rank(nvtx, rank).num_rows == n_sql
    table = rank_table(folder)
    assert table is not None and [r.collectives for r in table.rows] == [33, 33]


def test_imported_pytorch_steps_from_profiler_step_ranges(real_fixtures: Path, tmp_path: Path) -> None:
    """2021 format (category Operator) and later (user_annotation): one step per ProfilerStep#N, data
    wait from the DataLoader __next__ ranges inside it; a trace without them has no steps table."""
    cases = {
        "kineto-2021/worker0.1623143089861.pt.trace.json.gz": True,
        "hta/nccl_data.json.gz": False,
        "kineto-h100/resnet50_bs100_train_torch2.11.json.gz": None,
    }
    for name, has_loader in cases.items():
        out = tmp_path / name.split("/")[0]
        assert run_tracer("import", str(real_fixtures / name), "--out", str(out)).returncode == 0
        (folder,) = list_runs(out)
        steps = folder.samples(schema.STEPS_TABLE)
        events = _events(real_fixtures / name)["traceEvents"]
        ranges = [e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")]
        if has_loader is None:
            assert not ranges and steps is None
            continue
        assert steps is not None and steps.num_rows == len(ranges)
        assert sorted(steps["step"].to_pylist()) == sorted(int(e["name"].split("#")[1]) for e in ranges)
        assert set(steps[schema.PROBE].to_pylist()) == {"kineto.ProfilerStep"}
        total = sum(e["dur"] for e in ranges) / 1e6
        split = pc.sum(pc.add(steps[schema.DATA_WAIT_S], steps[schema.COMPUTE_S])).as_py()
        assert split == pytest.approx(total, abs=1e-6)
        loads = sum(
            e["dur"]
            for e in events
            if "DataLoader" in str(e.get("name", "")) and e.get("name", "").endswith("__next__")
        )
        assert pc.sum(steps[schema.DATA_WAIT_S]).as_py() == pytest.approx(loads / 1e6, abs=1e-6)
        assert (loads > 0) == has_loader


def test_steps_written_before_ranks_read_as_rank_0(tmp_path: Path) -> None:
    folder = RunFolder.create(tmp_path, "old")
    old = ",".join(schema.STEP_COLUMNS[:7])
    folder.sample_stream_path(schema.STEPS_TABLE).write_text(f"{old}\n1,0,8,1000,0.1,0.2,0.0\n")
    table = folder.samples(schema.STEPS_TABLE)
    assert table is not None and table[schema.RANK].to_pylist() == [0]
    assert table[schema.PROBE].to_pylist() == [schema.PROBE_WORKER]


def test_analyze_one_rank_and_the_ranks_section(dlrm_run: RunFolder, real_fixtures: Path) -> None:
    """`analyze --rank 3`: its kernels only (a plain sum over rank 3's file), every row says rank 3."""
    result = run_tracer("analyze", str(dlrm_run.path), "--rank", "3", "--format", "json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data[schema.RANK] == 3 and [r[schema.RANK] for r in data["ranks"]] == [3]
    assert all(row[schema.RANK] == 3 for row in data[t.KERNELS])
    path = next(p for p in (real_fixtures / DLRM).iterdir() if p.name.startswith("worker3_"))
    kernels_us = sum(e["dur"] for e in _events(path)["traceEvents"] if e.get("cat") == "kernel")
    assert sum(row["total_ns"] for row in data[t.KERNELS]) == pytest.approx(kernels_us * 1e3, abs=1)
    csv_out = run_tracer("analyze", str(dlrm_run.path), "--format", "csv")
    header = csv_out.stdout.splitlines()[0].split(",")
    assert schema.RANK in header
    assert sum(1 for line in csv_out.stdout.splitlines() if line.startswith("ranks,")) == 8
    missing = run_tracer("analyze", str(dlrm_run.path), "--rank", "9")
    assert missing.returncode == 2 and "no rank 9" in missing.stderr and "Traceback" not in missing.stderr


def test_export_has_one_process_per_rank_and_lanes_are_grouped(dlrm_run: RunFolder, tmp_path: Path) -> None:
    from analyzers.timeline import lanes

    out = tmp_path / "dlrm.json"
    assert run_tracer("export-trace", str(dlrm_run.path), str(out)).returncode == 0
    events = json.loads(out.read_text())["traceEvents"]
    processes = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert sorted(processes.values()) == [f"rank {r} (Tesla V100-SXM2-32GB)" for r in range(8)]
    assert {e["pid"] for e in events} == set(processes)
    steps = [e for e in events if e.get("cat") == "step"]
    assert len(steps) == 8 and len({e["pid"] for e in steps}) == 8
    drawn = lanes.load(dlrm_run)
    assert drawn.gpu is not None and drawn.threads is not None
    stepped = [n for n in drawn.gpu.lane_names if " · steps" in n]  # each with its count of last arrivals
    last = straggler.straggler(dlrm_run)
    assert last is not None
    assert stepped == [f"rank {r.rank} · steps (last at {r.last} of {last.collectives})" for r in last.summary]
    assert all(n.startswith("rank ") for n in drawn.threads.lane_names + drawn.gpu.lane_names)


def test_compare_shows_ranks_side_by_side(dlrm_run: RunFolder) -> None:
    result = run_tracer("compare", str(dlrm_run.path), str(dlrm_run.path), "--no-group")
    assert result.returncode == 0, result.stderr
    assert "A: ranks of" in result.stdout and "B: ranks of" in result.stdout


def test_clocks_that_cannot_be_trusted_are_aligned_on_the_first_collective(real_fixtures: Path, tmp_path: Path) -> None:
    """Two ranks whose times are relative, each from its own zero (no baseTimeNanoseconds, not Unix time):
    the import shifts rank 1 so that its first NCCL kernel ends with rank 0's, and says so."""
    paths = sorted((real_fixtures / DLRM).iterdir())[:2]
    for i, path in enumerate(paths):
        data = _events(path)
        data["distributedInfo"]["world_size"] = 2
        zero = min(e["ts"] for e in data["traceEvents"] if "ts" in e) - 1000 * i  # each rank its own zero
        for e in data["traceEvents"]:
            if "ts" in e:
                e["ts"] -= zero
        with gzip.open(tmp_path / path.name, "wt") as f:
            json.dump(data, f)
    result = run_tracer("import", *(str(tmp_path / p.name) for p in paths), "--out", str(tmp_path / "runs"))
    assert result.returncode == 0, result.stderr
    (folder,) = list_runs(tmp_path / "runs")
    meta = json.loads((folder.path / t.TRACE_META).read_text())[t.SOURCE_KINETO]
    assert "first collective" in meta[t.ALIGNMENT_FACT] and "not comparable" in meta[t.ALIGNMENT_FACT]
    kernels = pq.read_table(folder.table_path(t.KERNELS))
    ends = []
    for rank in (0, 1):
        mine = t.of_rank(kernels, rank)
        ends.append(pc.min(mine.filter(collectives.nccl_mask(mine["name"]))["end_ns"]).as_py())
    assert ends[0] == ends[1]
    assert [r["shift_ns"] != 0 for r in meta[t.RANKS_FACT]] == [False, True]


def test_any_steps_table_with_ranks_is_read_by_rank(dlrm_run: RunFolder, tmp_path: Path) -> None:
    """A run whose record lists no ranks (a command under torchrun, its probe writing RANK) but whose
    steps table has several: the per-rank table and the straggler read them all the same."""
    import dataclasses
    import shutil

    copy = RunFolder(tmp_path / dlrm_run.run_id)
    shutil.copytree(dlrm_run.path, copy.path)
    copy.write_record(dataclasses.replace(copy.read_record(), ranks=()))
    assert copy.read_record().world_size == 1
    table, before = rank_table(copy), rank_table(dlrm_run)
    assert table is not None and before is not None
    assert [(r.rank, r.steps, r.step_s, r.comm_s) for r in table.rows] == [
        (r.rank, r.steps, r.step_s, r.comm_s) for r in before.rows
    ]
    found = straggler.straggler(copy)
    assert found is not None and found.rank == straggler.straggler(dlrm_run).rank  # type: ignore[union-attr]
