"""A run in words, for the viewer's legends and facts table: one label per run (framework, model, batch,
device and trace backend, unique among the runs shown) and `run.json`'s facts in reading order."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from analyzers.figures.run_summary import displayed_status, images_per_s, mean_epoch_s
from analyzers.figures.steady import epoch_stats
from analyzers.ingest import readers
from tracer.core.cases import UNKNOWN_MODEL
from tracer.core.options import TRACE_BACKENDS
from tracer.core.records import EpochRecord, RunRecord, RunStatus
from tracer.core.workload import NOT_RECORDED, BuiltinWorkload, CommandWorkload, ImportedWorkload

NO_TRACE = "no trace in this run"
UNTRACED = TRACE_BACKENDS[0]  # `--trace none`: the label leaves the backend out


def run_label(record: RunRecord | None, folder: Path) -> str:
    """Framework, model, batch, device and trace backend: what a comparison tells apart. An import's
    batch is not recorded, and its file says what it is better than "unknown"."""
    if record is None:
        return folder.name
    m, workload = record.measurement, record.workload
    status = "" if record.outcome.status is RunStatus.OK else f" [{displayed_status(record)}]"
    trace = "" if m.trace == UNTRACED else f" {m.trace}"
    if isinstance(workload, CommandWorkload):  # a user's command: its script names it (model and batch are its own)
        return f"{m.framework} {workload.label} {m.device}{trace}{status}"
    if isinstance(workload, ImportedWorkload):
        model = readers.stem(Path(workload.source).name) if workload.model == UNKNOWN_MODEL else workload.model
        batch = "" if workload.batch is None else f" b{workload.batch}"
        return f"{m.framework} {model}{batch} {m.device}{trace} (imported){status}"
    return f"{m.framework} {workload.spec.model} b{workload.spec.batch} {m.device}{trace}{status}"


def unique_labels(labels: Sequence[str], run_ids: Sequence[str]) -> list[str]:
    """Labels that two runs would share get the shortest end of their run ids that tells them apart."""
    out = list(labels)
    for label in set(labels):
        same = [i for i, x in enumerate(labels) if x == label]
        if len(same) < 2:
            continue
        for n in range(4, max(len(run_ids[i]) for i in same) + 1):
            tails = [run_ids[i][-n:] for i in same]
            if len(set(tails)) == len(tails):
                break
        for i, tail in zip(same, tails):
            out[i] = f"{label} #{tail}"
    return out


def _fmt(value: float | None, spec: str, unit: str = "") -> str:
    return "-" if value is None else format(value, spec) + unit


def run_facts(
    record: RunRecord | None, folder: Path, epochs: list[EpochRecord], samples: int, traced: bool
) -> list[tuple[str, str]]:
    """`run.json` facts for the facts table, in reading order."""
    r = record
    if r is None:
        return [("status", "unreadable"), ("folder", str(folder))]
    env, m, out = r.environment, r.measurement, r.outcome
    versions = ", ".join(f"{k} {v}" for k, v in env.framework_versions.items()) or "-"
    gpus = ", ".join(g.name for g in env.gpus) or "none"
    status = out.status.value + (f": {out.cause}" if out.cause else "")
    if out.exit_code not in (None, 0):
        status += f" (exit {out.exit_code})"
    if out.signal:
        status += f" (signal {out.signal})"
    duration = f"{(r.wall_end_ns - r.wall_start_ns) / 1e9:.1f} s" if r.wall_end_ns else "-"
    gpu = ("device", f"{m.device}; GPU: {gpus}")
    match r.workload:
        case CommandWorkload() as command:
            workload = [
                ("command", command.text),
                ("working directory", command.cwd),
                ("interpreter", command.interpreter or "-"),
                gpu,
                ("epochs", f"{len(epochs)} (seen by the probe)" if command.probe == "on" else "- (--probe off)"),
            ]
        case ImportedWorkload() as imported:
            workload = [
                ("imported from", imported.source),
                ("model", imported.model),
                gpu,
                ("batch", NOT_RECORDED if imported.batch is None else f"{imported.batch} ({imported.batch_from})"),
                ("epochs", f"{len(epochs)} (planned: {NOT_RECORDED})"),
            ]
        case BuiltinWorkload(spec=spec):
            workload = [
                ("model", spec.model),
                ("parameters", f"{r.model.trainable_params:,}" if r.model else "-"),
                ("dataset", f"{spec.dataset}, {r.dataset.images_used if r.dataset else '?'} images"),
                gpu,
                ("batch / epochs", f"{spec.batch} / {len(epochs)} of {spec.epochs}"),
            ]
    return [
        ("status", status),
        ("framework", f"{m.framework} ({versions})"),
        *workload,
        ("epoch time (steady)", _fmt(epoch_stats(epochs).steady_epoch_s, ".2f", " s")),
        ("images/s (steady)", _fmt(epoch_stats(epochs).steady_images_per_s, ".1f")),
        (
            "whole run",
            f"mean epoch {_fmt(mean_epoch_s(epochs), '.2f', ' s')}, {_fmt(images_per_s(epochs), '.1f')} images/s",
        ),
        ("CPU", f"{env.cpu_model}, {env.cpu_logical_cores} logical cores"),
        ("RAM", f"{env.ram_total_mib / 1024:.1f} GiB"),
        ("Python", env.worker_python_version or env.tracer_python),
        ("samples", f"{samples:,}"),
        ("trace", m.trace if traced else NO_TRACE),
        ("duration", duration),
        ("folder", str(folder)),
    ]
