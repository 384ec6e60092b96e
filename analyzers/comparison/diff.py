"""Why two runs differ: the per-image step-time gap split into the parts of `analyzers.figures.step_parts`, ranked
by how much each contributes, in a few sentences with numbers; then GPU time by kernel class and, within
the class that changed most, the kernels that changed most. Pure: `diff` computes, the CLI prints.

The gap is the slower run's time per image minus the faster one's (per step where either run does not record
its images: an imported trace without a batch), measured from the steady epochs' wall
time where both have epochs (else from the steps). Parts are compared on one scheme: both runs' own
parts where they split alike, else data wait and the rest of the step. Sentences speak of the slower run,
so that every share is a share of the gap (numbers through `analyzers.render.sentences`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from analyzers.figures.coverage import Explanation, explain
from analyzers.figures.steady import WARMUP_EPOCHS
from analyzers.figures.step_part_names import (
    BASIS_TRACED_STEPS,
    BASIS_WINDOW,
    DATA_WAIT,
    PER_STEP,
    WAIT_UNSEEN_LABEL,
    part_doing,
)
from analyzers.figures.step_parts import Decomposition, Part, decompose
from analyzers.render import sentences as say
from analyzers.run.run import Run
from analyzers.trace import kernel_classes as kc
from analyzers.trace.kernel_names import short_names
from tracer.core.errors import UserError

REST = "rest"
REST_LABEL = "the rest of the step (compute, host and synchronising)"
WHOLE_STEP = "step"  # one part only: a run's data wait was not measured, so the step is not split by it
SAME_WITHIN = 0.01  # a gap under 1 % of the faster run's time is no gap
MENTION = 0.05  # a part is named in the sentences from 5 % of the gap on
ALIKE_GPU = 0.05  # GPU time per image "within 5 %" is called alike
TOP_KERNELS = 5


@dataclass(frozen=True)
class Delta:
    """One part, class or kernel: A's and B's seconds (per image, or per trace window)."""

    key: str
    label: str
    a: float
    b: float

    @property
    def delta(self) -> float:
        return self.b - self.a


@dataclass(frozen=True)
class Diff:
    a: Decomposition
    b: Decomposition
    per: str  # "image" or "trace window"
    gap_s: float | None  # B minus A, per image (None on the trace-window basis)
    gap_from: str  # what the gap was measured from
    parts: tuple[Delta, ...]  # ranked by contribution to the gap, largest first
    classes: tuple[Delta, ...]  # GPU time by class, ranked by the size of its change
    kernels: tuple[Delta, ...]  # within the class that changed most, ranked likewise
    unlike: tuple[str, ...]
    sentences: tuple[str, ...]
    explanation: Explanation | None = None  # the gap by part, sized, with the unexplained rest (None: no gap)

    def to_json(self) -> dict[str, object]:
        def run(d: Decomposition) -> dict[str, object]:
            out = asdict(d)
            out.pop("kernels")
            return out

        def rows(items: tuple[Delta, ...]) -> list[dict[str, object]]:
            return [{"key": x.key, "label": x.label, "a_s": x.a, "b_s": x.b, "delta_s": x.delta} for x in items]

        return {
            "a": run(self.a),
            "b": run(self.b),
            "per": self.per,
            "gap_s": self.gap_s,
            "gap_from": self.gap_from,
            "parts": rows(self.parts),
            "classes": rows(self.classes),
            "kernels": rows(self.kernels),
            "unlike": list(self.unlike),
            "sentences": list(self.sentences),
            "explanation": self.explanation.to_json() if self.explanation else None,
            "class_explanation": self.class_explanation.to_json() if self.class_explanation else None,
        }

    @property
    def class_explanation(self) -> Explanation | None:
        """The change in GPU time (B minus A, over all classes) split by class, sized by the coverage rule:
        a class is the change's cause only from `coverage.NAMED_PCT` of it on. None without classes or change."""
        change = sum(c.delta for c in self.classes)
        if not self.classes or change == 0:
            return None
        sign = 1 if change > 0 else -1
        return explain(abs(change), {c.label: sign * c.delta for c in self.classes})


def diff(a: Run, b: Run, warmup: int = WARMUP_EPOCHS) -> Diff:
    from analyzers.comparison.mfu import with_mfu  # its sentence on MFU

    return with_mfu(diff_decompositions(decompose(a, warmup), decompose(b, warmup)), a, b)


def diff_decompositions(a: Decomposition, b: Decomposition) -> Diff:
    window = a.basis == BASIS_WINDOW, b.basis == BASIS_WINDOW
    if window[0] != window[1]:
        has, lacks = (b, a) if window[0] else (a, b)
        raise UserError(
            f"{has.run_id} has steps and {lacks.run_id} has none (an imported trace): their times do not compare; "
            "diff two runs with steps, or two imported traces"
        )
    if not window[0] and a.per != b.per:  # one run knows its batch, the other not: both per step
        a, b = per_step(a), per_step(b)
    per = "trace window" if window[0] else a.per
    classes = _class_deltas(a, b)
    kernels = _kernel_deltas(a, b, classes[0].key) if classes else ()
    unlike = tuple(_unlike(a, b))
    if window[0]:
        return Diff(a, b, per, None, "each trace's whole window", (), classes, kernels, unlike,
                    tuple(_window_sentences(a, b, classes, kernels) + list(unlike)))  # fmt: skip
    parts = _part_deltas(a, b)
    if a.measured_s is not None and b.measured_s is not None:
        gap, gap_from = b.measured_s - a.measured_s, "the steady epochs' wall time"
    else:
        gap, gap_from = (b.step_s or 0.0) - (a.step_s or 0.0), "the steady steps"
    sign = 1 if gap >= 0 else -1
    ranked = tuple(sorted(parts, key=lambda p: -sign * p.delta))
    explanation = explain(abs(gap), {p.label: sign * p.delta for p in ranked})
    made = Diff(a, b, per, gap, gap_from, ranked, classes, kernels, unlike, (), explanation)
    said = tuple(_sentences(made) + list(unlike))
    return Diff(a, b, per, gap, gap_from, ranked, classes, kernels, unlike, said, explanation)


def per_step(d: Decomposition) -> Decomposition:
    """`d` with every seconds figure per step (a per-image decomposition times its images per step), so a run
    that knows its batch compares with one that does not."""
    if d.per == PER_STEP or not d.steps or not d.images:
        return d
    k = d.images / d.steps

    def times(v: float | None) -> float | None:
        return None if v is None else v * k

    return replace(
        d,
        per=PER_STEP,
        step_s=times(d.step_s),
        measured_s=times(d.measured_s),
        parts=tuple(Part(p.key, p.label, p.seconds * k) for p in d.parts),
        gpu_by_class={c: v * k for c, v in d.gpu_by_class.items()},
        kernels={key: (n, c, v * k) for key, (n, c, v) in d.kernels.items()},
        gpu_idle_s=times(d.gpu_idle_s),
        gpu_during_wait_s=times(d.gpu_during_wait_s),
        notes=(*d.notes, f"per step here (its {d.images / d.steps:g} images per step), to compare with a run per step"),
    )


def _part_deltas(a: Decomposition, b: Decomposition) -> list[Delta]:
    """Both runs' own parts where they split alike (both traced, or both untraced and alike in
    asynchrony), else data wait and the rest of the step."""
    keys_a, keys_b = [p.key for p in a.parts], [p.key for p in b.parts]
    both_traced = a.basis == b.basis == BASIS_TRACED_STEPS
    if both_traced or keys_a == keys_b:
        labels = {p.key: p.label for p in (*a.parts, *b.parts)}
        return [Delta(k, labels[k], a.part(k), b.part(k)) for k in dict.fromkeys(keys_a + keys_b)]
    if DATA_WAIT not in keys_a or DATA_WAIT not in keys_b:  # a run whose wait was not seen: no split by it
        return [Delta(WHOLE_STEP, WAIT_UNSEEN_LABEL, a.step_s or 0.0, b.step_s or 0.0)]
    rest = [(d.step_s or 0.0) - d.part(DATA_WAIT) for d in (a, b)]
    return [
        Delta(DATA_WAIT, next(p.label for p in a.parts if p.key == DATA_WAIT), a.part(DATA_WAIT), b.part(DATA_WAIT)),
        Delta(REST, REST_LABEL, rest[0], rest[1]),
    ]


def _class_deltas(a: Decomposition, b: Decomposition) -> tuple[Delta, ...]:
    if not a.gpu_by_class or not b.gpu_by_class:
        return ()
    keys = [c.key for c in kc.CLASSES if c.key in a.gpu_by_class or c.key in b.gpu_by_class]
    out = [Delta(k, kc.label(k), a.gpu_by_class.get(k, 0.0), b.gpu_by_class.get(k, 0.0)) for k in keys]
    return tuple(sorted(out, key=lambda d: -abs(d.delta)))


def _kernel_deltas(a: Decomposition, b: Decomposition, cls: str) -> tuple[Delta, ...]:
    keys = [k for k, v in {**a.kernels, **b.kernels}.items() if v[1] == cls]
    names = {k: (a.kernels.get(k) or b.kernels[k])[0] for k in keys}
    labels = short_names(names.values())
    out = [
        Delta(
            k, labels[names[k]], a.kernels[k][2] if k in a.kernels else 0.0, b.kernels[k][2] if k in b.kernels else 0.0
        )
        for k in keys
    ]
    return tuple(sorted(out, key=lambda d: -abs(d.delta))[:TOP_KERNELS])


def _name(d: Decomposition, letter: str) -> str:
    return f"{letter} ({d.framework}, {d.run_id})"


def _sentences(d: Diff) -> list[str]:
    assert d.gap_s is not None
    a, b = d.a, d.b
    ta, tb = (
        a.measured_s if a.measured_s is not None else a.step_s,
        b.measured_s if b.measured_s is not None else b.step_s,
    )
    assert ta is not None and tb is not None
    slow, fast, s_letter, f_letter = (b, a, "B", "A") if d.gap_s >= 0 else (a, b, "A", "B")
    gap = abs(d.gap_s)
    t_slow, t_fast = (tb, ta) if d.gap_s >= 0 else (ta, tb)
    pair = say.seconds_pair(t_slow, t_fast)
    out = []
    if gap < SAME_WITHIN * min(ta, tb):
        out.append(
            f"A ({a.framework}) and B ({b.framework}) take the same time per {d.per} within 1 %: "
            f"{say.seconds_pair(ta, tb)[0]} and {say.seconds_pair(ta, tb)[1]} (from {d.gap_from})."
        )
        return out + _gpu_sentences(d)
    out.append(
        f"{_name(slow, s_letter)} takes {say.seconds(gap)} more per {d.per} than {_name(fast, f_letter)}: "
        f"{pair[0]} against {pair[1]} ({say.ratio(t_fast, t_slow)}, from {d.gap_from})."
    )
    sign = 1 if d.gap_s >= 0 else -1
    named = 0
    for part in d.parts:
        contribution = sign * part.delta
        if contribution <= 0 or (named and contribution < MENTION * gap) or named == 3:
            break
        named += 1
        fraction = say.share(contribution, gap)
        of_gap = f"{say.percent(fraction)} of the gap" if fraction is not None else "more than the whole gap"
        line = f"{s_letter} spends {say.seconds(contribution)} more per {d.per} {_doing(part)} ({of_gap})"
        if part.key == DATA_WAIT and slow.images_per_s and fast.images_per_s:
            line += (
                f": its loader delivered {say.count(slow.images_per_s)} images/s against {say.count(fast.images_per_s)}"
            )
        out.append(line + ".")
    back = [p for p in d.parts if sign * p.delta < 0 and -sign * p.delta >= MENTION * gap]
    if back:
        p = back[-1]
        out.append(
            f"{f_letter} spends {say.seconds(abs(p.delta))} more per {d.per} {_doing(p)}, which narrows the gap."
        )
    total = sum(sign * p.delta for p in d.parts)
    rest = gap - total
    if abs(rest) > MENTION * gap:
        windowed = [d_ for d_ in (d.a, d.b) if d_.steps < d_.steady_steps]
        if windowed:  # the parts are the traced steps', the gap the steady epochs'
            traced = ", ".join(f"{x.steps} of {x.steady_steps} traced" for x in windowed)
            where = f"in the steps the trace left out ({traced})"
        elif rest > 0:
            where = "outside the steps (epoch starts and ends)"
        else:
            where = "inside the steps but not in the epochs"
        out.append(f"{say.seconds(abs(rest))} of the gap lies {where}: the parts add up to {say.seconds(total)}.")
    else:
        out.append(f"The parts add up to {say.seconds(total)}, the gap within 5 %.")
    if d.explanation is not None:  # named only from NAMED_PCT of the gap on; else the parts with their shares
        out.append(f"Sized against the gap: {d.explanation.text('the gap')}.")
    return out + _gpu_sentences(d)


def _doing(part: Delta) -> str:
    if part.key == WHOLE_STEP:
        return "in its steps (data wait not measured, so not told apart)"
    return "in the rest of the step" if part.key == REST else part_doing(part.key)


def _gpu_sentences(d: Diff) -> list[str]:
    if not d.classes:
        return []
    a_total, b_total = sum(c.a for c in d.classes), sum(c.b for c in d.classes)
    unit = "over its trace window" if d.per == "trace window" else f"per {d.per}"
    out = []
    change = say.share(abs(b_total - a_total), max(a_total, b_total))
    if change is not None and change < ALIKE_GPU:
        pa_, pb_ = say.seconds_pair(a_total, b_total)
        out.append(f"GPU time {unit} is within {say.percent(max(change, 0.01))}: {pa_} in A, {pb_} in B.")
    else:
        pa_, pb_ = say.seconds_pair(a_total, b_total)
        more = say.more_or_less(b_total - a_total)
        out.append(f"B has {say.seconds(abs(b_total - a_total))} {more} GPU time {unit} than A: {pb_} against {pa_}.")
    top = d.classes[0]
    if abs(top.delta) >= ALIKE_GPU * max(top.a, top.b) > 0:  # a class that changed beyond 5 % of itself
        pa_, pb_ = say.seconds_pair(top.a, top.b)
        line = (
            f"The kernel class that changed most is {top.label}: {say.seconds(abs(top.delta))} "
            f"{say.more_or_less(top.delta)} in B ({pb_} against {pa_})"
        )
        if d.kernels and d.kernels[0].delta != 0:
            k = d.kernels[0]
            ka, kb = say.seconds_pair(k.a, k.b)
            line += f"; within it, {k.label} changed most ({ka} in A, {kb} in B{_of_class(k, top)})"
        out.append(line + ".")
        sized = d.class_explanation
        if sized is not None:
            out.append(f"Sized against the change in GPU time: {sized.text('the change in GPU time')}.")
    return out


def _of_class(kernel: Delta, cls: Delta) -> str:
    """', 70 % of the class's change' where the kernel moved with its class and no further than it."""
    fraction = say.share(kernel.delta, cls.delta) if kernel.delta * cls.delta > 0 else None
    return f", {say.percent(fraction)} of the class's change" if fraction is not None else ""


def _window_sentences(
    a: Decomposition, b: Decomposition, classes: tuple[Delta, ...], kernels: tuple[Delta, ...]
) -> list[str]:
    wa, wb = say.seconds_pair(a.window_s or 0.0, b.window_s or 0.0)
    gpus = f"summed over {max(a.devices, b.devices)} GPUs, " if max(a.devices, b.devices) > 1 else ""
    out = [
        f"Neither run has steps: GPU time is compared over each trace's whole window ({wa} in A, {wb} in B), "
        f"{gpus}not per image."
    ]
    dummy = Diff(a, b, "trace window", None, "", (), classes, kernels, (), ())
    return out + _gpu_sentences(dummy)


def _unlike(a: Decomposition, b: Decomposition) -> list[str]:
    """What differs between the runs besides the framework and model, and what that does to the reading."""
    out = []
    if a.device != b.device:
        out.append(
            f"The runs are unlike: A ran on the {a.device.upper()}, B on the {b.device.upper()}; "
            "the gap says as much about the devices as about the frameworks."
        )
    if a.per == PER_STEP and (a.batch is not None or b.batch is not None):
        out.append(
            "The runs are compared per step: one of them does not record its batch, so no per-image figure compares; "
            "give an imported trace its batch with `tracer import --batch N`."
        )
    if a.batch is not None and b.batch is not None and a.batch != b.batch:
        out.append(
            f"The runs are unlike: batch {a.batch} in A, {b.batch} in B; per-image figures compare, but a step's "
            "fixed costs (launches, synchronising) weigh more per image at the smaller batch."
        )
    if a.data and b.data and a.data != b.data:
        out.append(
            f"The runs are unlike: data {a.data} in A, {b.data} in B; the data wait measures different pipelines."
        )
    if a.trace != b.trace:
        out.append(
            f"The runs are unlike: traced with {a.trace} in A, {b.trace} in B; a tracer costs time (from under 5 % "
            "at batch 100 to several times at batch 1 with CUPTI), and only a traced run splits its GPU time by class."
        )
    return out
