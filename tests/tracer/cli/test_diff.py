"""`tracer diff A B` as a user runs it: on two imported nsys traces (numbers equal to plain SQL sums), on
the H100 PyTorch and JAX SimpleBig runs (the gap is data wait), on two tiny CPU runs of one case in two
frameworks (parts ranked, adding up to the measured gap), and on runs that do not compare."""

from __future__ import annotations

import json
import re
import sqlite3
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from analyzers.figures.steady import epoch_stats
from analyzers.render import sentences as say
from analyzers.trace import kernel_classes as kc
from tests.conftest import run_tracer
from tracer.core.runfolder import RunFolder, list_runs

NSYS_AI = ("mfu_2gpu_before.sqlite", "mfu_2gpu_after.sqlite")


def _diff_json(*args: str) -> dict[str, Any]:
    result = run_tracer("diff", *args, "--format", "json")
    assert result.returncode == 0, result.stderr[-2000:]
    out: dict[str, Any] = json.loads(result.stdout)
    _sentences_parse(out["sentences"])
    return out


def _sentences_parse(lines: list[str]) -> None:
    """No negative share, no share above its whole, no zero shown as a gap, no sign where a word belongs."""
    text = " ".join(lines)
    assert lines and not re.search(r"\b0\.0+ [mµn]?s\b", text), text
    assert not re.search(r"(?<![\w(])-\d", text), text
    for pct in re.findall(r"(\d+) % of the gap", text):
        assert 0 < int(pct) <= 100, text


def _sql_class_ns(path: Path) -> dict[str, int]:
    """Kernel time by class from the file with plain SQL (names classified once), memcpy and memset as memory."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    by_name = dict(
        con.execute(
            "SELECT s.value, SUM(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k "
            "JOIN StringIds s ON s.id = k.demangledName GROUP BY s.value"
        ).fetchall()
    )
    memory = sum(con.execute(f"SELECT COALESCE(SUM(end - start), 0) FROM {t}").fetchone()[0]
                 for t in ("CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"))  # fmt: skip
    con.close()
    out: dict[str, int] = defaultdict(int)
    for name, cls in zip(by_name, kc.classify_distinct(list(by_name))):
        out[cls] += by_name[name]
    out[kc.MEMORY] += memory
    return dict(out)


def test_imported_nsys_pair_names_the_class_that_changed_most(real_fixtures: Path, tmp_path: Path) -> None:
    for name in NSYS_AI:
        assert run_tracer("import", str(real_fixtures / "nsys-ai" / name), "--out", str(tmp_path)).returncode == 0
    before, after = (next(f for f in list_runs(tmp_path) if n.split(".")[0] in f.run_id) for n in NSYS_AI)
    out = _diff_json(str(before.path), str(after.path))
    sql = [_sql_class_ns(real_fixtures / "nsys-ai" / n) for n in NSYS_AI]
    got = {row["key"]: (round(row["a_s"] * 1e9), round(row["b_s"] * 1e9)) for row in out["classes"]}
    assert got == {k: (sql[0].get(k, 0), sql[1].get(k, 0)) for k in set(sql[0]) | set(sql[1])}
    most = max(got, key=lambda k: abs(got[k][1] - got[k][0]))
    assert out["classes"][0]["key"] == most == "attention"
    a_ns, b_ns = got[most]
    said = " ".join(out["sentences"])
    assert f"changed most is {kc.label(most)}: {say.seconds(abs(b_ns - a_ns) / 1e9)} less in B" in said
    assert "Neither run has steps" in said and "summed over 2 GPUs" in said
    assert out["kernels"][0]["label"].startswith("flash::flash_fwd_kernel")
    # sized: the classes' changes add up to the change in GPU time (SQL's), attention's share of it is under
    # the 80 % a cause needs, so the sentence lists the classes with their shares instead of naming one
    change_ns = sum(b for _, b in got.values()) - sum(a for a, _ in got.values())
    sized = out["class_explanation"]
    assert round(sized["effect_s"] * 1e9) == abs(change_ns) and sized["unexplained_s"] == 0
    sign = 1 if change_ns > 0 else -1
    shares = {p["label"]: p["pct"] for p in sized["parts"]}
    for key, (a_ns, b_ns) in got.items():
        if a_ns != b_ns:
            assert abs(shares[kc.label(key)] - 100 * sign * (b_ns - a_ns) / abs(change_ns)) < 1e-6
    attention = 100 * sign * (got["attention"][1] - got["attention"][0]) / abs(change_ns)
    assert 10 <= attention < 80 and sized["cause"] == "mixed"
    assert f"mixed (no part covers 80 % of the change in GPU time): attention {attention:.0f} %" in said


def test_h100_pytorch_and_jax_simplebig_differ_in_data_wait(real_fixtures: Path) -> None:
    torch_run, jax_run = (next((real_fixtures / "gpu-h100").glob(f"*-{s}")) for s in ("85cf", "a504"))
    out = _diff_json(str(torch_run), str(jax_run))
    assert out["parts"][0]["key"] == "data_wait" and out["parts"][0]["delta_s"] > 0.9 * out["gap_s"] > 0
    ips = [epoch_stats(RunFolder(p).epochs()).steady_images_per_s or 0.0 for p in (jax_run, torch_run)]
    said = " ".join(out["sentences"])
    assert "B spends" in said and "more per image waiting for data" in said
    assert f"its loader delivered {say.count(ips[0])} images/s against {say.count(ips[1])}" in said
    # the named cause covers at least 80 % of the gap, and what it does not cover is said, adding up to the gap
    sized = out["explanation"]
    assert sized["cause"] == "waiting for data" and sized["parts"][0]["pct"] >= 80
    assert abs(sum(p["seconds"] for p in sized["parts"]) + sized["unexplained_s"] - out["gap_s"]) < 1e-12
    others = round(sum(p["pct"] for p in sized["parts"][1:]))
    rest = sized["parts"][1]["label"] if len(sized["parts"]) == 2 else "the other parts"
    assert f"waiting for data: {sized['parts'][0]['pct']:.0f} % of the gap, {rest} {others} %" in said
    table = run_tracer("diff", str(torch_run), str(jax_run))
    assert table.returncode == 0 and "waiting for data" in table.stdout and "share of the gap" in table.stdout


def test_two_cpu_frameworks_rank_the_parts_that_add_up(
    tiny_pytorch_run: RunFolder, make_run: Callable[..., RunFolder]
) -> None:
    """One case in PyTorch and TensorFlow on the CPU: data wait, compute and synchronising, ranked by their
    contribution to the gap, adding up to the gap measured from the steady epochs within 5 %."""
    a, b = tiny_pytorch_run, make_run("tensorflow")  # the suite's shared tiny PyTorch run: one run less
    out = _diff_json(str(a.path), str(b.path))
    gap = out["gap_s"]
    ips = [epoch_stats(f.epochs()).steady_images_per_s or 0.0 for f in (a, b)]
    assert gap == 1 / ips[1] - 1 / ips[0]
    keys = [p["key"] for p in out["parts"]]
    assert sorted(keys) == ["compute", "data_wait", "sync"]
    sign = 1 if gap > 0 else -1
    contributions = [sign * p["delta_s"] for p in out["parts"]]
    assert contributions == sorted(contributions, reverse=True)
    assert abs(sum(p["delta_s"] for p in out["parts"]) - gap) <= 0.05 * abs(gap)


def test_runs_that_do_not_compare_say_so(real_fixtures: Path, tmp_path: Path) -> None:
    """An untraced and a traced run compare as data wait and the rest, and the diff says they are unlike;
    an imported trace without steps and a run with steps do not compare: one line, exit 2."""
    untraced, traced = (next((real_fixtures / "gpu-h100").glob(f"*-{s}")) for s in ("85cf", "cf98"))
    out = _diff_json(str(untraced), str(traced))
    assert [p["key"] for p in out["parts"]] == ["data_wait", "rest"] or [p["key"] for p in out["parts"]] == [
        "rest",
        "data_wait",
    ]
    assert any("traced with none in A, nsys in B" in line for line in out["unlike"])
    assert run_tracer("import", str(real_fixtures / "nsys-ai" / "mock.sqlite"), "--out", str(tmp_path)).returncode == 0
    (imported,) = list_runs(tmp_path)
    result = run_tracer("diff", str(untraced), str(imported.path))
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1 and "do not compare" in result.stderr
