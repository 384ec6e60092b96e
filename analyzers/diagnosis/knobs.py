"""The setting a verdict tells the user to try, named as the run's framework names it on the run's
device (`tracer.core.frameworks` declares them), with the tracer option that sets it.

A framework with no such setting on that device gives no framework text: the advice then names only
what the tracer can change, never a placeholder or another framework's or device's setting."""

from __future__ import annotations

from collections.abc import Mapping

from tracer.core.frameworks import FRAMEWORKS, Tuning
from tracer.core.options import flag_of
from tracer.core.records import RunSpec

# the tracer option that changes a tuning for every framework alike
_TRACER_OPTION = {Tuning.WORKERS: "workers", Tuning.PREFETCH: "prefetch", Tuning.THREADS: "threads",
                  Tuning.SYNC: "sync_every"}  # fmt: skip


def setting(spec: RunSpec, what: Tuning) -> str | None:
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


def knob(spec: RunSpec, what: Tuning, advice: str = "", knobs: Mapping[str, object] | None = None) -> str:
    """E.g. `more loader workers: torch.utils.data.DataLoader(num_workers=...) (tracer --workers)`;
    '' where neither the framework nor the tracer has a setting for it. `knobs` (the run's, from run.json):
    where the run recorded an older setting instead of the declared one (AS_RUN), that one is named."""
    own = setting(spec, what)
    used, declared, text_as_run = AS_RUN.get((spec.framework, what), ("", "", ""))
    if knobs and used in knobs and declared not in knobs:
        own = text_as_run
    option = _TRACER_OPTION.get(what)
    if own is None and option is None:
        return ""
    text = (f"{advice}: {own}" if advice else own) if own else advice
    if option is None:
        return text
    return f"{text} (tracer {flag_of(option)})" if text else f"tracer {flag_of(option)}"


def join(*parts: str) -> str:
    """Advice parts in order, the empty ones left out."""
    return "; ".join(p for p in parts if p)
