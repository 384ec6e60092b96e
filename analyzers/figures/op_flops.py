"""FLOPs of an imported PyTorch-profiler (Kineto) trace recorded with shapes (`record_shapes=True`): each
matrix product and convolution counted from its `Input Dims` and `Concrete Inputs` (strides, padding,
groups, which gradients a backward computed), each fused attention from its query, key and value
(`attention_flops`), by FlopCounterMode's formulas, and summed per `ProfilerStep#N`. An operator inside
one counted already (a product inside an attention's math path) is its parent's. Transposed convolutions,
packed variable-length attention and operators without recorded shapes are not counted: the count says
how many operators it left out.
"""

from __future__ import annotations

import ast
import functools
import gzip
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analyzers.figures.attention_flops import attention_flops

MATMULS = {"aten::mm": (0, 1), "aten::addmm": (1, 2), "aten::bmm": (0, 1), "aten::baddbmm": (1, 2)}
CONV, CONV_BACKWARD = "aten::convolution", "aten::convolution_backward"
STEP_PREFIX = "ProfilerStep#"


@dataclass(frozen=True)
class TraceFlops:
    flops_per_step: float | None
    steps: int
    counted: int  # operators counted inside the steps
    not_counted: int  # attention and convolutions inside the steps whose shapes do not say their FLOPs
    step_s: float  # the steps' mean duration (the profiler's ProfilerStep ranges)


def _concrete(args: dict[str, Any], i: int) -> Any:
    values = args.get("Concrete Inputs") or []
    try:
        return ast.literal_eval(values[i]) if i < len(values) and values[i] not in ("", None) else None
    except (ValueError, SyntaxError):
        return None


def _conv_forward(x: list[int], w: list[int], out_spatial: list[int]) -> int:
    return 2 * x[0] * w[0] * math.prod(out_spatial) * w[1] * math.prod(w[2:])


def op_flops(name: str, args: dict[str, Any]) -> int | None:
    """One operator's FLOPs (multiply-add = 2), or None where its shapes do not say."""
    dims = args.get("Input Dims") or []
    if name in MATMULS:
        a, b = (dims[i] if i < len(dims) else [] for i in MATMULS[name])
        if len(a) < 2 or len(b) < 2:
            return None
        return 2 * math.prod(a) * b[-1]
    if name == CONV and len(dims) >= 2 and len(dims[0]) >= 3:
        stride, padding, dilation, transposed = (_concrete(args, i) for i in (3, 4, 5, 6))
        if None in (stride, padding, dilation) or transposed:
            return None
        x, w = dims[0], dims[1]
        out = [
            (size + 2 * p - d * (k - 1) - 1) // s + 1
            for size, k, s, p, d in zip(x[2:], w[2:], stride, padding, dilation, strict=False)
        ]
        return _conv_forward(x, w, out)
    if name == CONV_BACKWARD and len(dims) >= 3 and len(dims[0]) >= 3:
        transposed, mask = _concrete(args, 7), _concrete(args, 10)
        if transposed or not isinstance(mask, list):
            return None
        grad_out, x, w = dims[0], dims[1], dims[2]
        forward = _conv_forward(x, w, grad_out[2:])
        return forward * (bool(mask[0]) + bool(mask[1]))
    return attention_flops(name, dims)


def _uncounted(name: str) -> bool:
    return "attention" in name or name in (CONV, CONV_BACKWARD)


def _count(ops: list[dict[str, Any]]) -> tuple[int, int, int]:
    """FLOPs and counted operators of `ops`, and how many that should count could not: one thread at a
    time, an operator inside a counted one is its parent's; one not countable is left out unless an
    operator inside it is counted (its work is seen there)."""
    total, counted, left = 0, 0, 0
    threads: dict[tuple[object, object], list[dict[str, Any]]] = {}
    for e in ops:
        threads.setdefault((e.get("pid"), e.get("tid")), []).append(e)
    for events in threads.values():
        events.sort(key=lambda e: (float(e["ts"]), -float(e.get("dur", 0))))
        open_: list[tuple[float, bool, list[bool]]] = []  # (end, counted, [seen a count inside]) of the parents
        for e in events:
            name, ts = str(e.get("name", "")), float(e["ts"])
            while open_ and open_[-1][0] < ts:
                _, was_counted, seen = open_.pop()
                left += int(not was_counted and not seen[0])
            flops = op_flops(name, e.get("args") or {})
            if flops is None and not _uncounted(name):
                continue
            if any(parent_counted for _, parent_counted, _ in open_):
                continue  # a counted parent's work
            if flops is not None:
                total, counted = total + flops, counted + 1
                for parent in open_:
                    parent[2][0] = True
            open_.append((ts + float(e.get("dur", 0)), flops is not None, [False]))
        left += sum(1 for _, was_counted, seen in open_ if not was_counted and not seen[0])
    return total, counted, left


@functools.lru_cache(maxsize=8)
def trace_flops(path: Path) -> TraceFlops | None:
    """The trace's FLOPs per profiler step; None where it has no steps or no recorded shapes."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:  # type: ignore[operator]
        data = json.load(f)
    # a Chrome trace is an object holding traceEvents, or (its JSON Array Format) the bare list of events
    events = data.get("traceEvents", []) if isinstance(data, dict) else data if isinstance(data, list) else []
    events = [e for e in events if isinstance(e, dict)]
    ops = [e for e in events if e.get("cat") in ("cpu_op", "Operator") and "ts" in e]
    steps = [
        (float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)))
        for e in ops
        if str(e.get("name", "")).startswith(STEP_PREFIX)
    ]
    steps += [
        (float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)))
        for e in events
        if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith(STEP_PREFIX)
    ]
    steps = sorted(set(steps))
    if not steps or not any("Input Dims" in (e.get("args") or {}) for e in ops):
        return None
    inside = [e for e in ops if any(a <= float(e["ts"]) <= b for a, b in steps)]
    total, counted, left = _count(inside)
    step_s = sum(b - a for a, b in steps) / len(steps) / 1e6  # Kineto's times are microseconds
    return TraceFlops(total / len(steps) if counted else None, len(steps), counted, left, step_s)
