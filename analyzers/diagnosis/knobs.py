"""The setting a verdict tells the user to try, named as the run's framework names it on the run's
device (`tracer.core.frameworks` declares them), with the tracer option that sets it.

A framework with no such setting on that device gives no framework text: the advice then names only
what the tracer can change, never a placeholder or another framework's or device's setting."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from tracer.core.frameworks import FRAMEWORKS, Tuning
from tracer.core.options import flag_of
from tracer.core.records import RunRecord, RunSpec
from tracer.core.schema import Probe
from tracer.core.workload import BuiltinWorkload, Measurement

# the tracer option that changes a tuning for every framework alike
_TRACER_OPTION = {Tuning.WORKERS: "workers", Tuning.PREFETCH: "prefetch", Tuning.THREADS: "threads",
                  Tuning.SYNC: "sync_every"}  # fmt: skip


def tracer_trained(run: RunSpec | RunRecord) -> bool:
    """Whether the tracer's own options can change this run: its built-in workload (a bare spec is one),
    not an imported trace or a user's command."""
    return not isinstance(run, RunRecord) or isinstance(run.workload, BuiltinWorkload)


def setting(spec: RunSpec | Measurement, what: Tuning) -> str | None:
    """The run's framework's own setting on the run's device, or None (also for an undeclared
    framework: an imported trace's framework is whatever its user typed)."""
    info = FRAMEWORKS.get(spec.framework)
    return info.setting(what, spec.device) if info is not None else None


# Settings an older worker used instead of the declared one, named by the knob the run recorded: a JAX run
# that read with grain.ReadOptions threads (no mp_prefetch workers) is told about the threads it used.
AS_RUN: dict[tuple[str, Tuning], tuple[str, str, str]] = {
    ("jax", Tuning.WORKERS): (
        "grain.ReadOptions.num_threads",
        "grain.MultiprocessingOptions.num_workers",
        "grain.ReadOptions(num_threads=...) as this run read (newer runs: IterDataset.mp_prefetch workers)",
    ),
    ("jax", Tuning.PREFETCH): (
        "grain.ReadOptions.prefetch_buffer_size",
        "grain.MultiprocessingOptions.per_worker_buffer_size",
        "grain.ReadOptions(prefetch_buffer_size=...) as this run read",
    ),
}


def knob(run: RunSpec | RunRecord, what: Tuning, advice: str = "", knobs: Mapping[str, object] | None = None) -> str:
    """E.g. `more loader workers: torch.utils.data.DataLoader(num_workers=...) (tracer --workers)`;
    '' where neither the framework nor the tracer has a setting for it. Given a run's record, a run the
    tracer did not train itself (an imported trace, a user's command) gets no tracer option: none of
    them would change that training. Where the run recorded an older setting instead of the declared one
    (AS_RUN; `knobs`, else the record's), that one is named."""
    spec = run.measurement if isinstance(run, RunRecord) else run
    own = setting(spec, what)
    recorded = knobs if knobs is not None else (run.knobs if isinstance(run, RunRecord) else None)
    used, declared, text_as_run = AS_RUN.get((spec.framework, what), ("", "", ""))
    if recorded and used in recorded and declared not in recorded:
        own = text_as_run
    ours = tracer_trained(run)
    option = _TRACER_OPTION.get(what) if ours else None
    if own is None and option is None:
        return ""
    text = (f"{advice}: {own}" if advice else own) if own else advice
    if option is None:
        return text
    return f"{text} (tracer {flag_of(option)})" if text else f"tracer {flag_of(option)}"


def larger_batch(run: RunSpec | RunRecord, why: str = "") -> str:
    """`a larger --batch (why)` for the tracer's own workload; a run it did not train (an imported trace, a
    user's command) is told of its own batch size, which no tracer option sets."""
    ours = tracer_trained(run)
    text = "a larger --batch" if ours else "a larger batch size (the training's own setting)"
    return f"{text} ({why})" if why else text


def join(*parts: str) -> str:
    """Advice parts in order, the empty ones left out."""
    return "; ".join(p for p in parts if p)


#: What feeds a user's command faster, named for the pipeline the probe saw its steps come from
#: (the steps table's probe column): a command's script is changed by its user, not by a tracer flag.
PROBE_KNOBS: dict[str, str] = {
    Probe.TORCH_DATALOADER: "torch.utils.data.DataLoader(num_workers=N, persistent_workers=True, pin_memory=True"
    " on a GPU)",
    Probe.TF_DATA: "tf.data: .map(..., num_parallel_calls=tf.data.AUTOTUNE) and .prefetch(tf.data.AUTOTUNE)",
    Probe.KERAS_FIT: "give fit a tf.data.Dataset with .map(..., num_parallel_calls=tf.data.AUTOTUNE)"
    " and .prefetch(tf.data.AUTOTUNE)",
    Probe.GRAIN: "grain workers: .mp_prefetch(grain.MultiprocessingOptions(num_workers=N))",
    Probe.GLUON_DATALOADER: "mxnet.gluon.data.DataLoader(num_workers=N, prefetch=...)",
    Probe.PADDLE_DATALOADER: "paddle.io.DataLoader(num_workers=N, use_shared_memory=True)",
    Probe.PADDLE_FIT: "paddle.Model.fit(num_workers=N)",
    Probe.MARKER: "load the next batch while this one trains (a background thread or process)",
}


def tf_data_advice(knobs: Mapping[str, Any]) -> str:
    """What a tf.data pipeline as the probe read it (`map`, `parallel_map`, `prefetch`, `cache`) can still
    be given: no `num_parallel_calls` for a pipeline without a `map`, no prefetch where it has one."""
    parts = []
    if knobs.get("map") and not knobs.get("parallel_map"):
        parts.append(".map(..., num_parallel_calls=tf.data.AUTOTUNE)")
    if not knobs.get("prefetch"):
        parts.append(".prefetch(tf.data.AUTOTUNE)")
    if not knobs.get("cache"):
        parts.append(".cache() where the set fits in memory (the work before it is done once)")
    return "tf.data: " + " and ".join(parts) if parts else ""


def command_input_knobs(probes: Sequence[str], knobs: Mapping[str, Any]) -> str:
    """The input-pipeline settings to try for a command, with the values the probe read
    (`now num_workers=0`), for each pipeline that fed its steps."""
    parts = []
    for probe in probes:
        advice = PROBE_KNOBS.get(probe)
        if probe in (Probe.TF_DATA, Probe.KERAS_FIT) and f"{probe}.map" in knobs:
            advice = tf_data_advice({k.removeprefix(probe + "."): v for k, v in knobs.items()})
        if not advice:
            continue
        now = ", ".join(f"{k.split('.')[-1]}={v}" for k, v in knobs.items() if k.startswith(probe + "."))
        parts.append(f"{advice} (now {now})" if now else advice)
    return join(*parts)


_TRACER_FLAG = re.compile(r" \(tracer --[a-z-]+\)|tracer --[a-z-]+")
#: A built-in run's tracer flags as a command's script says them (the user edits the script, not a flag).
_SCRIPT_WORDS = {"--batch": "batch size", "--image-size": "input size", "--epochs": "epochs",
                 "--sync-every": "loss reads"}  # fmt: skip


def for_command(advice: str) -> str:
    """`advice` for a user's command: the tracer's own flags left out or said as the script's settings."""
    text = _TRACER_FLAG.sub("", advice)
    for flag, words in _SCRIPT_WORDS.items():
        text = text.replace(f"({flag})", f"({words})").replace(flag, words)
    return "; ".join(part.strip() for part in text.split(";") if part.strip())
