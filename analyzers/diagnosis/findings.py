"""The study's claims, each re-checked on the runs given: agrees / disagrees / not measured, with
the numbers and the runs they came from. The claims and their sources are listed in
docs/guide/diagnosis.md.

Claims compare frameworks, so runs are pooled first: per framework and case (model, dataset, device,
batch), the repeats of one spec (analyzers.figures.repeats.pool; an untraced spec before a traced one), a value
being the median over its rankable runs with their range and n. A claim is judged only on runs of the
kind it is about (`Claim.device`, `Claim.batch`: the study's CPU figures on CPU runs, its batch-100
claims at batch 100); where there are none, it is "not measured" with the reason read from the runs.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from analyzers.diagnosis import thresholds as th
from analyzers.figures.noise import WITHIN_NOISE, why_not_ordered
from analyzers.figures.repeats import pool
from analyzers.figures.run_summary import RunSummary, summarise
from analyzers.figures.steady import Spread, spread
from analyzers.render import palette
from analyzers.run.run import Run
from tracer.core.records import RunRecord
from tracer.core.workload import Known

AGREES, DISAGREES, NOT_MEASURED = "agrees", "disagrees", "not measured"
SOURCE = "the study, as summarised in issue #19"
# The study's GPU discussion (Table 2) saw data loading decide the epoch time at batch 100, where the
# GPU's own work per image is small; at batch 1 the host's dispatch sets the pace instead.
DATA_LOADING_BATCHES = (100,)


@dataclass(frozen=True)
class Claim:
    key: str
    text: str
    source: str
    device: str | None = None  # the runs it is about: "cpu", "gpu", or None for both
    batch: int | None = None  # the batch it is about, None for any


@dataclass(frozen=True)
class Finding:
    claim: Claim
    result: str  # AGREES, DISAGREES or NOT_MEASURED
    numbers: str
    runs: tuple[str, ...] = ()  # the run ids the judgement used


def case_of(run: Run) -> tuple[str, str, str, int]:
    """What a claim pools runs by: model, dataset, device, batch."""
    known = Known.of(run.record.workload)  # batch 0: not recorded (a key, never shown)
    return (known.model, known.dataset, run.record.measurement.device, known.batch or 0)


def rankable(run: Run) -> bool:
    return run.record.rankable


def data_wait_pct(run: Run) -> float | None:
    """The steady data-wait share (the input-bound rule's number), where measured."""
    return summarise(run).steady_data_wait_pct


@dataclass(frozen=True)
class Cell:
    """One framework on one case: the rankable runs of one spec, pooled."""

    framework: str
    case: tuple[str, str, str, int]
    runs: tuple[Run, ...]

    def value(self, get: Callable[[Run], float | None]) -> Spread | None:
        return spread([get(r) for r in self.runs])

    def text(self, get: Callable[[Run], float | None], spec: str = ".0f", unit: str = "") -> str:
        v = self.value(get)
        shown = "-" if v is None else v.text(spec)
        return f"{palette.label(self.framework)} {shown}{(' ' + unit) if unit and v is not None else ''}"


CLAIMS = (
    Claim("table-order", "Tables 1-2: PyTorch and TensorFlow are the two fastest at batch 100",
          "the study's Tables 1 (CPU) and 2 (GPU), epoch times at batch 100", None, 100),
    Claim("pytorch-full-cpu", "PyTorch keeps the CPU at 100 % with a steady thread count",
          "the study's CPU/thread figures for PyTorch", "cpu"),
    Claim("tensorflow-more-threads", "TensorFlow starts more threads than the other frameworks",
          "the study's thread-count figures (CPU runs)", "cpu"),
    Claim("tensorflow-less-ram-b1", "TensorFlow uses less RAM at batch 1", "the study's RAM figures, batch 1",
          "cpu", 1),
    Claim("similar-ram-b100", "At batch 100 the frameworks' RAM is similar", "the study's RAM figures, batch 100",
          "cpu", 100),
    Claim("data-loading-gpu", "Data loading decides the epoch time on the GPU",
          "the study's GPU discussion (Table 2), batch 100", "gpu", 100),
    Claim("mxnet-paddle-fail-b100", "MXNet and Paddle fail some batch-100 configurations",
          "the study's Tables 1-2 (missing cells)", None, 100),
    Claim("singa-crash", "SINGA crashes by ignoring the machine's resources (a thread per image)",
          "the study's SINGA discussion"),
)  # fmt: skip


def findings(runs: Sequence[Run]) -> list[Finding]:
    out = []
    for c in CLAIMS:
        mine = of_kind(runs, c)
        result, numbers, used = _CHECKS[c.key](mine, runs, c)
        out.append(Finding(c, result, numbers, tuple(used)))
    return out


def of_kind(runs: Sequence[Run], claim: Claim) -> list[Run]:
    """The runs a claim is about: its device and batch."""
    return [
        r
        for r in runs
        if (claim.device is None or r.record.measurement.device == claim.device)
        and (claim.batch is None or Known.of(r.record.workload).batch == claim.batch)
    ]


def _kind_text(claim: Claim) -> str:
    parts = [claim.device.upper() if claim.device else "", f"batch-{claim.batch}" if claim.batch else ""]
    return " ".join(p for p in parts if p) + " runs" if any(parts) else "runs"


def _none_of_kind(claim: Claim, all_runs: Sequence[Run]) -> str:
    """Why a claim has nothing to judge, from the runs given."""
    kinds = sorted({f"{r.record.measurement.device.upper()} b{Known.of(r.record.workload).batch}" for r in all_runs})
    return (
        f"no finished {_kind_text(claim)} among the {len(all_runs)} runs given (they are {', '.join(kinds) or 'none'})"
    )


def cells(runs: Sequence[Run]) -> dict[tuple[str, str, str, int], list[Cell]]:
    """Per case, one Cell per framework: its rankable runs of one spec (an untraced spec first, then the
    one with the most runs), pooled as analyzers.figures.repeats pools them."""
    by_case: dict[tuple[str, str, str, int], dict[str, list[Run]]] = defaultdict(lambda: defaultdict(list))
    for r in runs:
        if rankable(r):
            by_case[case_of(r)][r.framework].append(r)
    out: dict[tuple[str, str, str, int], list[Cell]] = {}
    for case, frameworks in by_case.items():
        row = []
        for fw in palette.order(list(frameworks)):
            mine = {r.run_id: r for r in frameworks[fw]}
            pools = [p for p in pool((r, r.record) for r in mine.values()) if p.counted]
            if not pools:
                continue
            best = min(pools, key=lambda p: (_measured(p.records[0]), -len(p.counted), p.run_ids[0]))
            row.append(Cell(fw, case, tuple(mine[i] for i in best.counted)))
        if row:
            out[case] = row
    return out


def _measured(record: RunRecord) -> bool:
    m = record.measurement
    return m.trace != "none" or m.pyspy or m.nsys_sampling


def _used(cs: Sequence[Cell]) -> list[str]:
    return [r.run_id for c in cs for r in c.runs]


def _case_text(case: tuple[str, str, str, int]) -> str:
    model, dataset, device, batch = case
    return f"{model}/{dataset.rsplit('/', 1)[-1]} {device} b{batch}"


Check = Callable[[Sequence[Run], Sequence[Run], Claim], tuple[str, str, list[str]]]


def _table_order(runs: Sequence[Run], all_runs: Sequence[Run], claim: Claim) -> tuple[str, str, list[str]]:
    parts, verdicts, used = [], [], []
    found = cells(runs)
    if not found:
        return NOT_MEASURED, _none_of_kind(claim, all_runs), []
    for case, row in found.items():
        timed = sorted(
            ((v.median, c) for c in row if (v := c.value(lambda r: summarise(r).steady_epoch_s)) is not None),
            key=lambda x: x[0],
        )
        names = {c.framework for _, c in timed}
        if len(timed) < 3 or not {"pytorch", "tensorflow"} <= names:
            continue
        # the second and the third within noise (analyzers.figures.noise): "the two fastest" is not decided there
        (_, second), (_, third) = timed[1], timed[2]
        noise = why_not_ordered(
            second.value(lambda r: summarise(r).steady_epoch_s),
            third.value(lambda r: summarise(r).steady_epoch_s),
            (any(summarise(r).contended for r in second.runs), any(summarise(r).contended for r in third.runs)),
        )
        if not noise:
            verdicts.append({c.framework for _, c in timed[:2]} == {"pytorch", "tensorflow"})
        used += _used([c for _, c in timed])
        order = " < ".join(c.text(lambda r: summarise(r).steady_epoch_s, ".2f", "s") for _, c in timed)
        if noise:
            order += f" (the second and third {WITHIN_NOISE}: {noise}; no order judged)"
        parts.append(f"{_case_text(case)}, steady epoch: {order}")
    if not verdicts and parts:  # every case within noise where it matters
        return NOT_MEASURED, "; ".join(parts), used
    if not verdicts:
        present = sorted({c.framework for row in found.values() for c in row})
        return (
            NOT_MEASURED,
            (
                "no batch-100 case with PyTorch, TensorFlow and a third framework finished "
                f"(frameworks at batch 100 here: {', '.join(palette.label(f) for f in present)})"
            ),
            [],
        )
    return (AGREES if all(verdicts) else DISAGREES), "; ".join(parts), used


def _pytorch_full_cpu(runs: Sequence[Run], all_runs: Sequence[Run], claim: Claim) -> tuple[str, str, list[str]]:
    mine = [
        c for row in cells(runs).values() for c in row
        if c.framework == "pytorch" and c.value(lambda r: summarise(r).cpu_pct_mean) is not None
    ]  # fmt: skip
    if not mine:
        return NOT_MEASURED, f"no finished PyTorch CPU run with CPU samples among the {len(all_runs)} runs given", []
    parts, ok = [], []
    for c in mine:
        cpu = c.value(lambda r: summarise(r).cpu_pct_mean)
        lo = min((v for r in c.runs if (v := summarise(r).threads_min) is not None), default=None)
        hi = max((v for r in c.runs if (v := summarise(r).threads_max) is not None), default=None)
        steady = lo is not None and hi is not None and hi - lo <= 2
        ok.append(cpu is not None and cpu.median >= th.FULL_CPU_PCT and steady)
        parts.append(
            f"{_case_text(c.case)}: CPU {cpu.text('.0f') if cpu else '-'} %, threads {lo}-{hi}"
            + (f" (n={len(c.runs)})" if len(c.runs) > 1 else "")
        )
    return (AGREES if all(ok) else DISAGREES), "; ".join(parts), _used(mine)


def _compare_per_case(
    runs: Sequence[Run], all_runs: Sequence[Run], claim: Claim, value: Callable[[RunSummary], float | None],
    unit: str, test: Callable[[float, list[float]], bool],
) -> tuple[str, str, list[str]]:  # fmt: skip
    parts, results, used = [], [], []
    for case, row in cells(runs).items():
        tf = next((c for c in row if c.framework == "tensorflow"), None)
        others = [c for c in row if c.framework != "tensorflow" and c.value(lambda r: value(summarise(r))) is not None]
        tf_value = tf.value(lambda r: value(summarise(r))) if tf is not None else None
        if tf is None or tf_value is None or not others:
            continue
        other_values = [v.median for c in others if (v := c.value(lambda r: value(summarise(r)))) is not None]
        results.append(test(tf_value.median, other_values))
        used += _used([tf, *others])
        parts.append(
            f"{_case_text(case)}: "
            + " vs ".join(c.text(lambda r: value(summarise(r)), ".0f", unit) for c in [tf, *others])
        )
    if not results:
        present = sorted({r.framework for r in runs if rankable(r)})
        return (
            NOT_MEASURED,
            (
                f"no case with TensorFlow and another framework finished among the {_kind_text(claim)} "
                f"(frameworks there: {', '.join(palette.label(f) for f in present) or 'none'})"
            ),
            [],
        )
    return (AGREES if all(results) else DISAGREES), "; ".join(parts), used


def _tf_more_threads(runs: Sequence[Run], all_runs: Sequence[Run], claim: Claim) -> tuple[str, str, list[str]]:
    return _compare_per_case(runs, all_runs, claim, lambda s: s.threads_median, "threads",
                             lambda tf, others: tf > max(others))  # fmt: skip


def _tf_less_ram_b1(runs: Sequence[Run], all_runs: Sequence[Run], claim: Claim) -> tuple[str, str, list[str]]:
    return _compare_per_case(runs, all_runs, claim, lambda s: s.peak_rss_mib, "MiB", lambda tf, o: tf < min(o))


def _similar_ram_b100(runs: Sequence[Run], all_runs: Sequence[Run], claim: Claim) -> tuple[str, str, list[str]]:
    def similar(tf: float, others: list[float]) -> bool:
        mid = statistics.median([tf, *others])
        return abs(tf - mid) <= th.RAM_SIMILAR_PCT / 100 * mid

    return _compare_per_case(runs, all_runs, claim, lambda s: s.peak_rss_mib, "MiB", similar)


def _data_loading_gpu(runs: Sequence[Run], all_runs: Sequence[Run], claim: Claim) -> tuple[str, str, list[str]]:
    """Judged on the steady data-wait share of each framework's pooled GPU runs at the batch sizes where
    the study made the claim: it agrees where every framework waits above the input-bound threshold."""
    mine = [c for row in cells(runs).values() for c in row if c.value(data_wait_pct) is not None]
    if not mine:
        return NOT_MEASURED, _none_of_kind(claim, all_runs) + " with per-step timing", []
    parts = [
        f"{_case_text(c.case)}: " + c.text(data_wait_pct, ".0f", "% of steady step time wait for data") for c in mine
    ]
    high = [c for c in mine if (v := c.value(data_wait_pct)) is not None and v.median > th.INPUT_BOUND_PCT]
    verdict = AGREES if len(high) == len(mine) else DISAGREES
    summary = f"{len(high)} of {len(mine)} above {th.INPUT_BOUND_PCT:.0f} %: "
    return verdict, summary + "; ".join(parts), _used(mine)


def _mxnet_paddle_fail(runs: Sequence[Run], all_runs: Sequence[Run], claim: Claim) -> tuple[str, str, list[str]]:
    mine = [r for r in runs if r.framework in ("mxnet", "paddle")]
    if not mine:
        present = sorted({r.framework for r in runs})
        return (
            NOT_MEASURED,
            (
                "no MXNet or Paddle run at batch 100 among the runs given "
                f"(frameworks at batch 100: {', '.join(palette.label(f) for f in present) or 'none'})"
            ),
            [],
        )
    failed = [r for r in mine if not rankable(r)]
    parts = [f"{r.framework} {_case_text(case_of(r))}: {summarise(r).status}" for r in mine]
    used = [r.run_id for r in mine]
    return (AGREES if failed else DISAGREES), f"{len(failed)} of {len(mine)} failed: " + "; ".join(parts), used


def _singa_crash(runs: Sequence[Run], all_runs: Sequence[Run], claim: Claim) -> tuple[str, str, list[str]]:
    mine = [r for r in runs if r.framework == "singa"]
    if not mine:
        present = sorted({r.framework for r in all_runs})
        return (
            NOT_MEASURED,
            (
                f"no SINGA run among the {len(all_runs)} runs given "
                f"(frameworks: {', '.join(palette.label(f) for f in present) or 'none'})"
            ),
            [],
        )
    failed = [r for r in mine if not rankable(r)]
    parts = [f"{_case_text(case_of(r))}: {summarise(r).status} {r.record.outcome.cause}".rstrip() for r in mine]
    used = [r.run_id for r in mine]
    return (AGREES if failed else DISAGREES), f"{len(failed)} of {len(mine)} failed: " + "; ".join(parts), used


_CHECKS: dict[str, Check] = {
    "table-order": _table_order,
    "pytorch-full-cpu": _pytorch_full_cpu,
    "tensorflow-more-threads": _tf_more_threads,
    "tensorflow-less-ram-b1": _tf_less_ram_b1,
    "similar-ram-b100": _similar_ram_b100,
    "data-loading-gpu": _data_loading_gpu,
    "mxnet-paddle-fail-b100": _mxnet_paddle_fail,
    "singa-crash": _singa_crash,
}


def to_markdown(found: Sequence[Finding]) -> str:
    lines = ["| claim | source | result | numbers | runs used |", "| --- | --- | --- | --- | --- |"]
    for f in found:
        used = ", ".join(f.runs) if f.runs else "none"
        lines.append(f"| {_md(f.claim.text)} | {_md(f.claim.source)} | {f.result} | {_md(f.numbers)} | {used} |")
    return "\n".join(lines) + "\n"


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
