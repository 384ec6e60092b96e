"""`tracer diff`'s result in words: each side's head line and notes, then its tables (the step's parts, GPU
time by kernel class, the kernels that changed most). The terminal draws them; the words are here, beside
the diff they word (as `compare_output` and `gate_output` are beside theirs)."""

from __future__ import annotations

from analyzers.comparison.diff import Diff
from analyzers.render import sentences as say
from analyzers.render.text_table import TextTable


def side_lines(result: Diff) -> list[str]:
    """`A: RUN [what, trace; basis: covered]` and each side's notes, A then B."""
    lines = []
    for letter, d in (("A", result.a), ("B", result.b)):
        what = " ".join(x for x in (d.framework, d.model, d.device) if x)
        what += "".join(f", {k} {v}" for k, v in (("batch", d.batch), ("data", d.data)) if v)
        images = f"{d.images:,} images" if d.per == "image" else "images not recorded"
        covered = f"{d.steps} steps, {images}" if d.steps else f"{say.seconds(d.window_s or 0.0)}"
        lines.append(f"{letter}: {d.run_id} [{what}, trace {d.trace}; {d.basis}: {covered}]")
        lines += [f"   {letter}: {note}" for note in d.notes]
    return lines


def tables(result: Diff) -> list[TextTable]:
    """The tables under the sentences, each only where the diff has its rows."""
    unit = f"per {result.per}"
    out = []
    if result.parts:
        table = TextTable(f"the steady step, {unit}", ("part of the step", "A", "B", "B - A", "share of the gap"))
        gap = result.gap_s or 0.0
        for p in result.parts:
            fraction = say.share(p.delta, gap)
            a, b = say.seconds_pair(p.a, p.b)
            table.rows.append((p.label, a, b, signed(p.delta), say.percent(fraction) if fraction is not None else "-"))
        e = result.explanation
        if e is not None and e.effect_s > 0:  # what the parts leave of the gap: they and it add up to the whole
            table.rows.append(("unexplained (the gap less its parts)", "", "", "", f"{round(e.unexplained_pct)} %"))
        out.append(table)
    if result.classes:
        table = TextTable(f"GPU time by kernel class, {unit}", ("kernel class", "A", "B", "B - A"))
        for c in result.classes:
            a, b = say.seconds_pair(c.a, c.b)
            table.rows.append((c.label, a, b, signed(c.delta)))
        out.append(table)
    if result.kernels:
        title = f"{result.classes[0].label}: the kernels that changed most, {unit}"
        table = TextTable(title, ("kernel", "A", "B", "B - A"))
        for k in result.kernels:
            a, b = say.seconds_pair(k.a, k.b)
            table.rows.append((k.label, a, b, signed(k.delta)))
        out.append(table)
    return out


def signed(value: float) -> str:
    return "0" if value == 0 else ("+" if value > 0 else "-") + say.seconds(abs(value))
