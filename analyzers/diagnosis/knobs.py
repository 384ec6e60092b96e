"""The setting a verdict tells the user to try, named as the run's framework names it on the run's
device (`tracer.core.frameworks` declares them), with the tracer option that sets it.

A framework with no such setting on that device gives no framework text: the advice then names only
what the tracer can change, never a placeholder or another framework's or device's setting."""

from __future__ import annotations

from tracer.core.frameworks import FRAMEWORKS, Tuning
from tracer.core.options import flag_of
from tracer.core.records import BuiltinWorkload, RunRecord, RunSpec

# the tracer option that changes a tuning for every framework alike
_TRACER_OPTION = {Tuning.WORKERS: "workers", Tuning.PREFETCH: "prefetch", Tuning.THREADS: "threads",
                  Tuning.SYNC: "sync_every"}  # fmt: skip


def setting(spec: RunSpec, what: Tuning) -> str | None:
    """The run's framework's own setting on the run's device, or None (also for an undeclared
    framework: an imported trace's framework is whatever its user typed)."""
    info = FRAMEWORKS.get(spec.framework)
    return info.setting(what, spec.device) if info is not None else None


def knob(run: RunSpec | RunRecord, what: Tuning, advice: str = "") -> str:
    """E.g. `more loader workers: torch.utils.data.DataLoader(num_workers=...) (tracer --workers)`;
    '' where neither the framework nor the tracer has a setting for it. Given a run's record, a run the
    tracer did not train itself (an imported trace, a user's command) gets no tracer option: none of
    them would change that training."""
    spec = run.spec if isinstance(run, RunRecord) else run
    own = setting(spec, what)
    ours = not isinstance(run, RunRecord) or isinstance(run.workload, BuiltinWorkload)
    option = _TRACER_OPTION.get(what) if ours else None
    if own is None and option is None:
        return ""
    text = (f"{advice}: {own}" if advice else own) if own else advice
    if option is None:
        return text
    return f"{text} (tracer {flag_of(option)})" if text else f"tracer {flag_of(option)}"


def join(*parts: str) -> str:
    """Advice parts in order, the empty ones left out."""
    return "; ".join(p for p in parts if p)
