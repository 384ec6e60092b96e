"""rocpd's graph-launched kernels: roctracer records each kernel a `hipGraphLaunch` ran as a `Task` op named by
its kernel (rocmProfileData's RoctracerDataSource: HIP_OP_DISPATCH_KIND_TASK), beside the `KernelExecution`
ops of plain launches. Both are kernels: their count and time equal the database's own, read with SQL."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pyarrow.parquet as pq

from analyzers.trace import tables as t
from tests.analyzers.ingest.test_imports import ROCPD_SCHEMA
from tests.conftest import run_tracer
from tracer.core.runfolder import list_runs

GEMM = "void wvSplitK_hf_sml_<__hip_bfloat16, 64, 2, 16, 8, 2, 1>(int, int)"
NORM = "void vllm::rms_norm_kernel<c10::BFloat16>(c10::BFloat16*, c10::BFloat16 const*, float, int, int)"


def _make(path: Path) -> None:
    """One plain launch, then a graph launched three times, each replay running two kernels as `Task` ops."""
    con = sqlite3.connect(path)
    con.executescript(ROCPD_SCHEMA)
    words = ["", "hipLaunchKernel", "hipGraphLaunch", "KernelExecution", "Task", GEMM, NORM]
    con.executemany("INSERT INTO rocpd_string(id, string) VALUES (?, ?)", list(enumerate(words, start=1)))
    sid = {w: i for i, w in enumerate(words, start=1)}
    api = [(1, 7, 8, 1_000, 5_000, sid["hipLaunchKernel"], sid[""])]
    ops = [(1, 0, 1, 0, "0x0", 10_000, 60_000, sid[NORM], sid["KernelExecution"])]
    links = [(1, 1)]
    for replay in range(3):
        base = 100_000 * (replay + 1)
        call = 2 + replay
        api.append((call, 7, 8, base, base + 4_000, sid["hipGraphLaunch"], sid[""]))
        for k, (name, dur) in enumerate(((GEMM, 30_000), (NORM, 7_000))):
            op = 10 + 2 * replay + k
            ops.append((op, 0, 1, op, "0x0", base + 10_000 + k * 40_000, base + 10_000 + k * 40_000 + dur,
                        sid[name], sid["Task"]))  # fmt: skip
            links.append((call, op))
    con.executemany("INSERT INTO rocpd_api VALUES (?, ?, ?, ?, ?, ?, ?)", api)
    con.executemany("INSERT INTO rocpd_op VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", ops)
    con.executemany("INSERT INTO rocpd_api_ops(api_id, op_id) VALUES (?, ?)", links)
    con.commit()
    con.close()


def test_graph_launched_tasks_are_kernels(tmp_path: Path) -> None:
    rpd = tmp_path / "graphs.rpd"
    _make(rpd)
    con = sqlite3.connect(rpd)
    count, total = con.execute(
        'SELECT COUNT(*), SUM(o."end" - o.start) FROM rocpd_op o JOIN rocpd_string s ON s.id = o.opType_id '
        "WHERE s.string IN ('KernelExecution', 'Task')"
    ).fetchone()
    con.close()
    done = run_tracer("import", str(rpd), "--out", str(tmp_path / "runs"))
    assert done.returncode == 0, done.stderr
    (run,) = list_runs(tmp_path / "runs")
    kernels = pq.read_table(run.table_path(t.KERNELS))
    assert kernels.num_rows == count == 7
    assert sum(e - s for s, e in zip(kernels["start_ns"].to_pylist(), kernels["end_ns"].to_pylist())) == total
    graph_calls = {2, 3, 4}  # each Task keeps the hipGraphLaunch that ran it as its correlation
    assert sorted(c for c in kernels["correlation_id"].to_pylist() if c in graph_calls) == [2, 2, 3, 3, 4, 4]
    classes = run_tracer("analyze", str(run.path), "--format", "json")
    assert classes.returncode == 0 and json.loads(classes.stdout)["kernel_other_pct"] == 0  # both classed
