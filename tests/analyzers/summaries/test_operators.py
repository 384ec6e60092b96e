"""PyTorch operators from a real Kineto trace: counts and totals against the raw JSON, self time against
the nesting read straight from the events."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path

import pytest

from analyzers.summaries.operators import operator_summary
from tests.conftest import run_tracer
from tracer.core.runfolder import list_runs

TRACE = "kineto-h100/resnet50_bs100_train_torch2.11.json.gz"


def test_operator_summary_matches_the_raw_events(real_fixtures: Path, tmp_path: Path) -> None:
    assert run_tracer("import", str(real_fixtures / TRACE), "--out", str(tmp_path)).returncode == 0
    (run,) = list_runs(tmp_path)
    events = [
        e for e in json.load(gzip.open(real_fixtures / TRACE))["traceEvents"]
        if e.get("cat") == "cpu_op" and e.get("ph") == "X"
    ]  # fmt: skip
    calls: dict[str, int] = defaultdict(int)
    total_us: dict[str, float] = defaultdict(float)
    for e in events:
        calls[e["name"]] += 1
        total_us[e["name"]] += float(e["dur"])
    rows = {r.name: r for r in operator_summary(run)}
    assert set(rows) == set(calls)
    for name, row in rows.items():
        assert row.calls == calls[name]
        assert row.total_ns == pytest.approx(total_us[name] * 1000, abs=row.calls)  # µs with 3 decimals
        assert 0 <= row.self_ns <= row.total_ns
    # an operator that never encloses another on its thread has self time = total time
    by_thread = defaultdict(list)
    for e in events:
        by_thread[(e["pid"], e["tid"])].append((float(e["ts"]), float(e["ts"]) + float(e["dur"]), e["name"]))
    encloses = set()
    for spans in by_thread.values():
        spans.sort()
        for i, (s, end, name) in enumerate(spans):
            if any(s <= s2 and e2 <= end for s2, e2, _ in spans[i + 1 : i + 40] if (s2, e2) != (s, end)):
                encloses.add(name)
    leaf = next(n for n in sorted(rows, key=lambda n: -rows[n].total_ns) if n not in encloses)
    assert rows[leaf].self_ns == rows[leaf].total_ns
    assert sum(r.self_pct for r in rows.values()) == pytest.approx(100.0)
    shown = run_tracer("analyze", str(run.path), "--top", "5")
    assert "key_averages" in shown.stdout and "self (" in shown.stdout
