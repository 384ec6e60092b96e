"""Every `--format json` the command line writes: one schema version, declared here, named in each output
beside the output's name, and each output's top-level fields with the records they hold (the JSON
reference page, docs/reference/json.md, is generated from `OUTPUTS`; a test holds every command's
keys to it). A gate in CI, an assistant over MCP and a notebook all read these, so a field renamed or
removed is a new `SCHEMA_VERSION`; a field added is not.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass
from typing import Any

from analyzers.figures.utilisation_fields import JSON_FIELDS

SCHEMA_VERSION = 1
SCHEMA_KEY, VERSION_KEY = "schema", "schema_version"
SCHEMA_PREFIX = "dl-tracer."


@dataclass(frozen=True)
class Output:
    """One command's JSON: what it is, its top-level fields (name -> meaning) and the records (dotted import
    paths of dataclasses) whose fields its rows carry."""

    command: str
    about: str
    fields: dict[str, str]
    records: tuple[str, ...] = ()


OUTPUTS: tuple[Output, ...] = (
    Output(
        "runs",
        "`tracer runs --format json`: one row per run folder, the columns `tracer runs` prints",
        {"runs_dir": "the folder listed", "runs": "one object per run: column header -> cell, as printed"},
    ),
    Output(
        "show",
        "`tracer show RUN --format json`: the run's summary (every headline figure, steady and whole run)",
        {"run": "the run id", "summary": "the run's summary (a RunSummary)", "problems": "damaged files met"},
        (
            "analyzers.figures.run_summary.RunSummary",
            "analyzers.figures.basis.PhaseFigures",
            "analyzers.figures.utilisation.Utilisation",
            "analyzers.figures.utilisation.Peak",
        ),
    ),
    Output(
        "diagnose",
        "`tracer diagnose RUN --format json`: every rule's verdict and what measuring cost",
        {
            "run": "the run id",
            "verdicts": "one per rule (a Verdict)",
            "measurement_cost": "the sampler's and the trace's cost (a Cost)",
            "problems": "damaged files met",
        },  # fmt: skip
        ("analyzers.diagnosis.verdict.Verdict", "analyzers.diagnosis.cost.Cost"),
    ),
    Output(
        "analyze",
        "`tracer analyze RUN --format json`: the trace's summaries over one phase",
        {
            "run": "the run id (a trace file's cache name)",
            "phase": "the phase asked for",
            "covers": "what the phase covers, in words",
            "api": "the API family (CUDA or HIP)",
            "rank": "the rank shown (runs of several ranks)",
            "ranks_basis": "what the ranks table is measured on (runs of several ranks)",
            "comm_source": "where communication time comes from (runs of several ranks)",
            "window": "the trace's window, in words (where the run has a trace)",
            "window_ns": "the trace's window [start, end] on its clock",
            "kernel_other_pct": "kernel time no class took, % (where there are kernels)",
            "operators": "framework operators (OperatorRow)",
            "cuda_api": "API calls (ApiRow)",
            "kernel_classes": "kernel time by class (ClassRow)",
            "kernels": "kernels (KernelRow)",
            "memcpy": "memory operations (MemcpyRow)",
            "threads": "threads (ThreadRow)",
            "ranks": "one row per rank (RankRow; runs of several ranks)",
            **JSON_FIELDS,  # FLOPs, peak and MFU (analyzers.figures.utilisation), where the run has a record
        },
        (
            "analyzers.summaries.operators.OperatorRow",
            "analyzers.summaries.rows.ApiRow",
            "analyzers.summaries.rows.KernelRow",
            "analyzers.summaries.rows.MemcpyRow",
            "analyzers.summaries.rows.ClassRow",
            "analyzers.summaries.rows.ThreadRow",
            "analyzers.figures.ranks.RankRow",
        ),
    ),
    Output(
        "diff",
        "`tracer diff A B --format json`: the steady step per image of two runs split into parts, the gap ranked",
        {
            "a": "run A's decomposition (a Decomposition, without its kernels)",
            "b": "run B's decomposition",
            "per": "what the seconds are per: image, or trace window",
            "gap_s": "B minus A, seconds per image (null on the trace-window basis)",
            "gap_from": "what the gap was measured from",
            "parts": "parts of the step, ranked by contribution: key, label, a_s, b_s, delta_s",
            "classes": "GPU time by kernel class, same fields",
            "kernels": "within the class that changed most, the kernels that changed most",
            "unlike": "how the runs differ besides framework and model",
            "sentences": "the explanation, in sentences",
            "explanation": "the gap split by part with each part's share and the unexplained rest (coverage)",
            "class_explanation": "the change in GPU time split by kernel class, sized likewise (null without one)",
        },
        ("analyzers.figures.step_parts.Decomposition",),
    ),
    Output(
        "compare",
        "`tracer compare RUN RUN... --format json`: runs or groups of repeats side by side",
        {
            "columns": "one per run or group of repeats: letter, run ids, contended runs",
            "metrics": "one per metric: metric, unit, per column its median, low, high, n, and why its ratio "
            "to A is not a finding ('' where it is)",
            "notes": "calls left out of the API rows, and why",
        },
    ),
    Output(
        "gate",
        "`tracer gate --format json`: the candidate against the baseline, metric by metric",
        {
            "passed": "true when nothing regressed beyond noise and threshold (exit code 0)",
            "baseline": "the baseline's run ids",
            "candidate": "the candidate's run ids",
            "regressed": "the keys of the metrics that regressed, the first named first",
            "metrics": "one per gate metric (a Judgement): state, change, threshold, each side's value and range",
            "reason": "`tracer diff`'s sentences between the sides' middle runs",
            "explained_by_diff": "the two runs `diff` compared",
            "notes": "how the sides were read",
        },
        (
            "analyzers.comparison.gate.Judgement",
            "analyzers.comparison.gate.Side",
            "analyzers.comparison.gate_metrics.GateMetric",
        ),
    ),
)
OUTPUT_BY_COMMAND = {o.command: o for o in OUTPUTS}


def comparison_json(result: Any) -> dict[str, Any]:
    """`compare`'s result (analyzers.comparison.compare.Comparison) as the fields OUTPUTS declares for it."""

    def spread(value: Any) -> dict[str, Any] | None:
        if value is None:
            return None
        return {"median": value.median, "low": value.low, "high": value.high, "n": value.n}

    return {
        "columns": [{"letter": c.letter, "runs": list(c.run_ids), "contended": c.contended} for c in result.columns],
        "metrics": [
            {
                "metric": d.metric,
                "unit": d.unit,
                "values": [spread(v) for v in d.values],
                "noise": [d.within_noise(i) for i in range(len(d.values))],
            }
            for d in result.differences
        ],
        "notes": list(result.api_notes),
    }


def stamped(command: str, data: dict[str, Any]) -> dict[str, Any]:
    """`data` headed by the output's schema name and version ({"schema": "dl-tracer.diff", "schema_version": 1})."""
    assert command in OUTPUT_BY_COMMAND, command
    return {SCHEMA_KEY: SCHEMA_PREFIX + command, VERSION_KEY: SCHEMA_VERSION, **data}


def finite(value: Any) -> Any:
    """JSON has no NaN or Infinity: a share of nothing (0 / 0) is written as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def dump(command: str, data: dict[str, Any]) -> None:
    """`data` on stdout as the command's versioned JSON."""
    json.dump(finite(stamped(command, data)), sys.stdout, indent=1, allow_nan=False, default=str)
    print()
