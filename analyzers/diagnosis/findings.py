"""The study's claims, each re-checked on the runs given: agrees / disagrees / not measured, with
the numbers. The claims and their sources are listed in docs/guide/diagnosis.md."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from analyzers.diagnosis import thresholds as th
from analyzers.run_summary import RunSummary, summarise
from tracer.core.records import RunRecord
from tracer.core.runfolder import RunFolder

AGREES, DISAGREES, NOT_MEASURED = "agrees", "disagrees", "not measured"
SOURCE = "the study, as summarised in issue #19"


@dataclass(frozen=True)
class Claim:
    key: str
    text: str
    source: str


@dataclass(frozen=True)
class Finding:
    claim: Claim
    result: str  # AGREES, DISAGREES or NOT_MEASURED
    numbers: str


@dataclass(frozen=True)
class Run:
    record: RunRecord
    summary: RunSummary
    data_wait_pct: float | None  # the input-bound rule's number, where measured

    @property
    def framework(self) -> str:
        return self.record.spec.framework

    @property
    def case(self) -> tuple[str, str, str, int]:
        s = self.record.spec
        return (s.model, s.dataset, s.device, s.batch)

    @property
    def ok(self) -> bool:
        return self.record.outcome.status.value == "ok"


CLAIMS = (
    Claim("table-order", "Tables 1-2: PyTorch and TensorFlow are the two fastest at batch 100",
          "the study's Tables 1 (CPU) and 2 (GPU), epoch times at batch 100"),
    Claim("pytorch-full-cpu", "PyTorch keeps the CPU at 100 % with a steady thread count",
          "the study's CPU/thread figures for PyTorch"),
    Claim("tensorflow-more-threads", "TensorFlow starts more threads than the other frameworks",
          "the study's thread-count figures"),
    Claim("tensorflow-less-ram-b1", "TensorFlow uses less RAM at batch 1", "the study's RAM figures, batch 1"),
    Claim("similar-ram-b100", "At batch 100 the frameworks' RAM is similar", "the study's RAM figures, batch 100"),
    Claim("data-loading-gpu", "Data loading decides the epoch time on the GPU",
          "the study's GPU discussion (Table 2)"),
    Claim("mxnet-paddle-fail-b100", "MXNet and Paddle fail some batch-100 configurations",
          "the study's Tables 1-2 (missing cells)"),
    Claim("singa-crash", "SINGA crashes by ignoring the machine's resources (a thread per image)",
          "the study's SINGA discussion"),
)  # fmt: skip


def load_runs(folders: Sequence[RunFolder]) -> list[Run]:
    from analyzers.diagnosis import diagnose

    out = []
    for f in folders:
        verdicts = {v.rule: v for v in diagnose(f)}
        ib = verdicts.get("input-bound")
        out.append(Run(f.read_record(), summarise(f), ib.value if ib is not None and ib.measured else None))
    return out


def findings(runs: Sequence[Run]) -> list[Finding]:
    return [Finding(c, *_CHECKS[c.key](runs)) for c in CLAIMS]


def _by_case(runs: Sequence[Run]) -> dict[tuple[str, str, str, int], list[Run]]:
    out: dict[tuple[str, str, str, int], list[Run]] = defaultdict(list)
    for r in runs:
        out[r.case].append(r)
    return dict(out)


def _case_text(case: tuple[str, str, str, int]) -> str:
    model, dataset, device, batch = case
    return f"{model}/{dataset.rsplit('/', 1)[-1]} {device} b{batch}"


def _table_order(runs: Sequence[Run]) -> tuple[str, str]:
    parts, verdicts = [], []
    for case, group in _by_case([r for r in runs if r.record.spec.batch >= 100]).items():
        timed = sorted((r.summary.mean_epoch_s, r.framework) for r in group if r.ok and r.summary.mean_epoch_s)
        if len(timed) < 3:
            continue
        top2 = {fw for _, fw in timed[:2]}
        verdicts.append(top2 == {"pytorch", "tensorflow"})
        parts.append(_case_text(case) + ": " + " < ".join(f"{fw} {s:.2f} s" for s, fw in timed))
    if not verdicts:
        return NOT_MEASURED, "no case at batch 100 with three or more finished frameworks"
    return (AGREES if all(verdicts) else DISAGREES), "; ".join(parts)


def _pytorch_full_cpu(runs: Sequence[Run]) -> tuple[str, str]:
    mine = [r for r in runs if r.framework == "pytorch" and r.ok and r.summary.cpu_pct_mean is not None]
    if not mine:
        return NOT_MEASURED, "no finished PyTorch run with CPU samples"
    parts, ok = [], []
    for r in mine:
        s = r.summary
        steady = s.threads_min is not None and s.threads_max is not None and s.threads_max - s.threads_min <= 2
        full = (s.cpu_pct_mean or 0) >= th.FULL_CPU_PCT
        ok.append(full and steady)
        parts.append(f"{_case_text(r.case)}: CPU {s.cpu_pct_mean:.0f} %, threads {s.threads_min}-{s.threads_max}")
    return (AGREES if all(ok) else DISAGREES), "; ".join(parts)


def _compare_per_case(
    runs: Sequence[Run], batch_ok: Callable[[int], bool], value: Callable[[RunSummary], float | None], unit: str,
    test: Callable[[float, list[float]], bool],
) -> tuple[str, str]:  # fmt: skip
    parts, results = [], []
    for case, group in _by_case([r for r in runs if batch_ok(r.record.spec.batch) and r.ok]).items():
        vals = {r.framework: value(r.summary) for r in group}
        tf = vals.pop("tensorflow", None)
        others = [v for v in vals.values() if v is not None]
        if tf is None or not others:
            continue
        results.append(test(tf, others))
        parts.append(
            f"{_case_text(case)}: tensorflow {tf:.0f} {unit} vs "
            + ", ".join(f"{fw} {v:.0f}" for fw, v in vals.items() if v is not None)
        )
    if not results:
        return NOT_MEASURED, "no case with TensorFlow and another framework finished"
    return (AGREES if all(results) else DISAGREES), "; ".join(parts)


def _tf_more_threads(runs: Sequence[Run]) -> tuple[str, str]:
    return _compare_per_case(
        runs, lambda b: True, lambda s: s.threads_median, "threads", lambda tf, others: tf > max(others)
    )


def _tf_less_ram_b1(runs: Sequence[Run]) -> tuple[str, str]:
    return _compare_per_case(runs, lambda b: b == 1, lambda s: s.peak_rss_mib, "MiB", lambda tf, o: tf < min(o))


def _similar_ram_b100(runs: Sequence[Run]) -> tuple[str, str]:
    def similar(tf: float, others: list[float]) -> bool:
        mid = statistics.median([tf, *others])
        return abs(tf - mid) <= th.RAM_SIMILAR_PCT / 100 * mid

    return _compare_per_case(runs, lambda b: b >= 100, lambda s: s.peak_rss_mib, "MiB", similar)


def _data_loading_gpu(runs: Sequence[Run]) -> tuple[str, str]:
    gpu = [r for r in runs if r.record.spec.device == "gpu" and r.ok and r.data_wait_pct is not None]
    if not gpu:
        return NOT_MEASURED, "no finished GPU run with per-step timing"
    parts = [f"{r.framework} {_case_text(r.case)}: data wait {r.data_wait_pct:.0f} % of step time" for r in gpu]
    high = [r for r in gpu if (r.data_wait_pct or 0) > th.INPUT_BOUND_PCT]
    return (AGREES if high else DISAGREES), "; ".join(parts)


def _mxnet_paddle_fail(runs: Sequence[Run]) -> tuple[str, str]:
    mine = [r for r in runs if r.framework in ("mxnet", "paddle") and r.record.spec.batch >= 100]
    if not mine:
        return NOT_MEASURED, "no MXNet or Paddle run at batch 100"
    failed = [r for r in mine if not r.ok]
    parts = [f"{r.framework} {_case_text(r.case)}: {r.record.outcome.status.value}" for r in mine]
    return (AGREES if failed else DISAGREES), f"{len(failed)} of {len(mine)} failed: " + "; ".join(parts)


def _singa_crash(runs: Sequence[Run]) -> tuple[str, str]:
    mine = [r for r in runs if r.framework == "singa"]
    if not mine:
        return NOT_MEASURED, "no SINGA run (not installable here: no build for this Python)"
    failed = [r for r in mine if not r.ok]
    parts = [f"{_case_text(r.case)}: {r.record.outcome.status.value} {r.record.outcome.cause}" for r in mine]
    return (AGREES if failed else DISAGREES), f"{len(failed)} of {len(mine)} failed: " + "; ".join(parts)


_CHECKS: dict[str, Callable[[Sequence[Run]], tuple[str, str]]] = {
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
    lines = ["| claim | source | result | numbers |", "| --- | --- | --- | --- |"]
    for f in found:
        lines.append(f"| {f.claim.text} | {f.claim.source} | {f.result} | {f.numbers} |")
    return "\n".join(lines) + "\n"
