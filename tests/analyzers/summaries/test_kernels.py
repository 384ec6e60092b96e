"""Kernel and memory-operation summaries against plain SQL / a plain json pass; GPU busy time."""

from __future__ import annotations

import gzip
import json
import sqlite3
import statistics
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

from analyzers.summaries import kernels
from tests.analyzers.conftest import KINETO_FILES, NSYS_FILES
from tracer.core.runfolder import RunFolder


def _stats(durs: dict[str, list[int]]) -> dict[str, tuple[int, int, int, int, float]]:
    return {k: (sum(d), len(d), min(d), max(d), statistics.median(d)) for k, d in durs.items()}


@pytest.mark.parametrize("rel", NSYS_FILES)
def test_kernel_summary_equals_plain_sql(rel: str, real_fixtures: Path, ingested: dict[str, RunFolder]) -> None:
    con = sqlite3.connect(f"file:{real_fixtures / rel}?mode=ro", uri=True)
    durs: dict[str, list[int]] = defaultdict(list)
    for name, d in con.execute(
        "SELECT s.value, k.end - k.start FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName"
    ):
        durs[name].append(d)
    con.close()
    got = {r.name: (r.total_ns, r.calls, r.min_ns, r.max_ns, r.med_ns) for r in kernels.kernel_summary(ingested[rel])}
    assert got == _stats(durs)


@pytest.mark.parametrize("rel", NSYS_FILES)
def test_memcpy_summary_equals_plain_sql(rel: str, real_fixtures: Path, ingested: dict[str, RunFolder]) -> None:
    con = sqlite3.connect(f"file:{real_fixtures / rel}?mode=ro", uri=True)
    names = {r[0] for r in con.execute("SELECT name FROM sqlite_master")}
    durs: dict[str, list[int]] = defaultdict(list)
    if "CUPTI_ACTIVITY_KIND_MEMCPY" in names:
        labels = {1: "Host-to-Device", 2: "Device-to-Host", 8: "Device-to-Device", 10: "Peer-to-Peer"}
        for kind, d in con.execute("SELECT copyKind, end - start FROM CUPTI_ACTIVITY_KIND_MEMCPY"):
            durs[f"[CUDA memcpy {labels[kind]}]"].append(d)
    if "CUPTI_ACTIVITY_KIND_MEMSET" in names:
        for (d,) in con.execute("SELECT end - start FROM CUPTI_ACTIVITY_KIND_MEMSET"):
            durs["[CUDA memset]"].append(d)
    con.close()
    got = {r.name: (r.total_ns, r.calls, r.min_ns, r.max_ns, r.med_ns) for r in kernels.memcpy_summary(ingested[rel])}
    assert got == _stats(durs)


@pytest.mark.parametrize("rel", KINETO_FILES)
def test_kineto_kernels_equal_plain_json_pass(rel: str, real_fixtures: Path, ingested: dict[str, RunFolder]) -> None:
    with gzip.open(real_fixtures / rel, "rt") as f:
        doc = json.load(f, parse_float=Decimal)
    durs: dict[str, list[int]] = defaultdict(list)
    for ev in doc["traceEvents"]:
        if ev.get("ph") == "X" and ev.get("cat") in ("kernel", "Kernel"):
            durs[ev["name"]].append(int((Decimal(ev["dur"]) * 1000).to_integral_value()))
    got = {r.name: (r.total_ns, r.calls, r.min_ns, r.max_ns, r.med_ns) for r in kernels.kernel_summary(ingested[rel])}
    assert got == _stats(durs)


def test_union_counts_overlaps_once() -> None:
    s = np.array([0, 5, 20, 21, 40], dtype=np.int64)
    e = np.array([10, 8, 30, 25, 41], dtype=np.int64)
    assert kernels.union_ns(s, e) == 10 + 10 + 1


def test_gpu_busy_matches_a_plain_sweep(ingested: dict[str, RunFolder], real_fixtures: Path) -> None:
    rel = NSYS_FILES[0]
    con = sqlite3.connect(f"file:{real_fixtures / rel}?mode=ro", uri=True)
    spans = sorted(
        con.execute(
            "SELECT start, end FROM CUPTI_ACTIVITY_KIND_KERNEL "
            "UNION ALL SELECT start, end FROM CUPTI_ACTIVITY_KIND_MEMCPY "
            "UNION ALL SELECT start, end FROM CUPTI_ACTIVITY_KIND_MEMSET"
        ).fetchall()
    )
    con.close()
    busy = 0
    cur_s, cur_e = spans[0]
    for s, e in spans[1:]:
        if s > cur_e:
            busy += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    busy += cur_e - cur_s
    span = max(e for _, e in spans) - spans[0][0]
    assert kernels.gpu_busy(ingested[rel]) == (busy, span - busy)
