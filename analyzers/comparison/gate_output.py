"""`tracer gate`'s verdict in the forms CI reads: one line per metric (the terminal), a Markdown summary
(GitHub's job summary, `$GITHUB_STEP_SUMMARY`), and JUnit XML (the test-report format CI systems parse:
one testcase per metric, a regression a `<failure>`, a metric not measured or not judged `<skipped>`)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from analyzers.comparison.gate import (
    IMPROVED,
    NOT_COMPARED,
    NOT_JUDGED,
    NOT_MEASURED,
    REGRESSED,
    WITHIN_NOISE,
    WITHIN_THRESHOLD,
    GateResult,
    Judgement,
    Side,
)

JUNIT_SUITE = "tracer gate"
JUNIT_CLASS = "tracer.gate"
SKIPPED = (NOT_MEASURED, NOT_COMPARED, NOT_JUDGED)  # JUnit <skipped>: the metric could not be held to its threshold
MARK = {
    REGRESSED: "❌",
    NOT_JUDGED: "⚠️",
    WITHIN_NOISE: "✅",
    WITHIN_THRESHOLD: "✅",
    IMPROVED: "✅",
    NOT_COMPARED: "➖",
    NOT_MEASURED: "➖",
}


def number(value: float, unit: str) -> str:
    """'31.4 %', '7.52 ms', '1.21e+03 img/s' -> '1,210 img/s': three significant figures, the unit after."""
    text = f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"
    return f"{text} {unit}"


def change_text(j: Judgement) -> str:
    """'+30.2 points' or '+12 %' (worse is +), against the threshold."""
    if j.change is None:
        return "-"
    unit = "points" if j.metric.points else "%"
    worse = "higher" if j.metric.worse > 0 else "lower"
    return f"{j.change * j.metric.worse:+.3g} {unit} (worse when {worse} by {j.threshold:g} {unit})"


def _range(s: Side, unit: str) -> str:
    if s.spread.n < 2:
        return "a single figure"
    return f"{s.over} {number(s.spread.low, unit)} to {number(s.spread.high, unit)}"


def _per(b: Side, c: Side) -> str:
    """' per image' where the sides' shared basis says what the figure is per; '' otherwise."""
    return f" {b.basis}" if b.basis.startswith("per ") and b.basis == c.basis else ""


def line(j: Judgement) -> str:
    """'data wait share of the steady step: 1.2 % -> 31.4 %, +30.2 points (threshold 5 points); regressed
    beyond noise (baseline: steps 0.1 % to 3 %; candidate: steps 25 % to 38 %)'."""
    head = f"{j.metric.label}: {j.state}"
    if j.baseline is None or j.candidate is None:
        return f"{j.metric.label}: {j.why}"
    b, c, unit = j.baseline, j.candidate, j.metric.unit
    values = f"{number(b.value, unit)} -> {number(c.value, unit)}{_per(b, c)}"
    if j.change is None:
        return f"{head}: {values} ({j.why})"  # NOT_COMPARED
    ranges = f"baseline: {_range(b, unit)}; candidate: {_range(c, unit)}"
    why = f", {j.why}" if j.why and j.state in (WITHIN_NOISE, NOT_JUDGED) else ""
    return f"{head}: {values}, {change_text(j)}{why} ({ranges})"


def verdict(result: GateResult) -> str:
    """The first line: passed, or failed naming every regressed metric, worst first."""
    if not result.failed:
        return "gate passed: nothing regressed beyond noise and threshold"
    names = ", ".join(j.metric.label for j in result.regressions)
    return f"gate failed: {len(result.regressions)} regressed beyond noise and threshold: {names}"


def text_lines(result: GateResult) -> list[str]:
    """The terminal's form: the verdict, the regressions with `diff`'s reason after the first, every other metric."""
    why = [f"  why (tracer diff {result.explained[0]} {result.explained[1]}):", *(f"    {s}" for s in result.reason)]
    out = [verdict(result)]
    for i, j in enumerate(result.judgements):
        out.append(f"  {line(j)}")
        if i == 0 and j.state == REGRESSED:
            out += ["  " + w for w in why]
    if not result.failed:
        out += why
    out += [f"  note: {n}" for n in result.notes]
    return out


def markdown(result: GateResult) -> str:
    """A job summary: the verdict, a table of every measured metric (regressions first), why from `diff`."""
    rows = ["| | metric | baseline | candidate | change | verdict |", "| --- | --- | --- | --- | --- | --- |"]
    for j in result.judgements:
        if j.state == NOT_MEASURED:
            continue
        b, c, unit = j.baseline, j.candidate, j.metric.unit
        assert b is not None and c is not None
        state = j.state + (f" ({j.why})" if j.why and j.state in (WITHIN_NOISE, NOT_JUDGED) else "")
        rows.append(
            f"| {MARK[j.state]} | {j.metric.label}{_per(b, c)} | {number(b.value, unit)} | {number(c.value, unit)} | "
            f"{change_text(j)} | {state} |"
        )
    unmeasured = [line(j) for j in result.judgements if j.state == NOT_MEASURED]
    out = [
        f"## {MARK[REGRESSED] if result.failed else MARK[WITHIN_THRESHOLD]} {verdict(result)}",
        "",
        f"Baseline: {', '.join(f'`{r}`' for r in result.baseline)}; candidate: "
        f"{', '.join(f'`{r}`' for r in result.candidate)}.",
        "",
    ]
    if result.failed:
        out += [f"**{line(result.regressions[0])}**", ""]
    out += [*rows, ""]
    first, second = result.explained
    out += [f"**Why** (`tracer diff {first} {second}`):", "", *(f"- {s}" for s in result.reason), ""]
    if unmeasured:
        out += ["Not measured: " + "; ".join(unmeasured) + ".", ""]
    out += [f"_Note: {n}._" for n in result.notes]
    return "\n".join(out).rstrip() + "\n"


def junit(result: GateResult) -> str:
    """JUnit XML: a testsuite of one testcase per metric."""
    failures = len(result.regressions)
    skipped = sum(j.state in SKIPPED for j in result.judgements)
    suites = ET.Element("testsuites", name=JUNIT_SUITE, tests=str(len(result.judgements)), failures=str(failures))
    suite = ET.SubElement(
        suites,
        "testsuite",
        name=JUNIT_SUITE,
        tests=str(len(result.judgements)),
        failures=str(failures),
        errors="0",
        skipped=str(skipped),
    )
    for j in result.judgements:
        case = ET.SubElement(suite, "testcase", classname=JUNIT_CLASS, name=j.metric.key, time="0")
        if j.state == REGRESSED:
            failure = ET.SubElement(case, "failure", message=line(j), type="regression")
            failure.text = "\n".join([line(j), *(f"why: {s}" for s in result.reason)])
        elif j.state in SKIPPED:
            ET.SubElement(case, "skipped", message=line(j))
        else:
            ET.SubElement(case, "system-out").text = line(j)
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
