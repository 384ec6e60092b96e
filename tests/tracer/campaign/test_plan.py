"""Plan files: expansion into cells with stable ids, and errors that name the line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracer.campaign.plan import load_plan, parse_plan
from tracer.core.errors import UserError

ROOT = Path(__file__).resolve().parents[3]

BASE = """\
name = "t"
frameworks = ["pytorch", "tensorflow"]
models = ["alexnet", "mobilenet_v2"]
datasets = ["small"]
"""


def plan(text: str, tmp_path: Path):  # type: ignore[no-untyped-def]
    path = tmp_path / "plan.toml"
    path.write_text(text)
    return load_plan(path)


def error(text: str, tmp_path: Path) -> str:
    with pytest.raises(UserError) as e:
        plan(text, tmp_path)
    return str(e.value)


def test_study_plan_is_the_160_run_matrix() -> None:
    study = load_plan(ROOT / "plans" / "study.toml")
    assert len(study.cells) == 160
    assert len({c.cell_id for c in study.cells}) == 160
    assert {c.epochs for c in study.cells} == {100}
    assert len(load_plan(ROOT / "plans" / "tiny.toml").cells) == 4


def test_defaults_and_profile_arguments(tmp_path: Path) -> None:
    p = plan(BASE + "[knobs]\nlimit = 8\nimage_size = 64\namp = true\n", tmp_path)
    assert [c.cell_id for c in p.cells] == [
        "pytorch-alexnet-small-cpu-b1-e1",
        "pytorch-mobilenet_v2-small-cpu-b1-e1",
        "tensorflow-alexnet-small-cpu-b1-e1",
        "tensorflow-mobilenet_v2-small-cpu-b1-e1",
    ]
    args = p.cells[0].profile_args()
    assert args[:6] == ["--framework", "pytorch", "--model", "alexnet", "--dataset", "small"]
    assert "--amp" in args and args[args.index("--limit") + 1] == "8" and args[args.index("--image-size") + 1] == "64"


def test_cell_ids_do_not_depend_on_the_rest_of_the_matrix(tmp_path: Path) -> None:
    small = {c.cell_id for c in plan(BASE, tmp_path).cells}
    bigger = plan(BASE.replace('["small"]', '["small", "big"]') + "batches = [1, 100]\n", tmp_path)
    assert small <= {c.cell_id for c in bigger.cells}
    assert len(bigger.cells) == 16


def test_knob_lists_and_repetitions_are_axes_and_exclusions_apply(tmp_path: Path) -> None:
    text = BASE + (
        "repetitions = 2\n[knobs]\nimage_size = [32, 64]\n"
        '[[exclude]]\nframework = "tensorflow"\n\n[[exclude]]\nmodel = "alexnet"\nimage_size = 32\n'
    )
    cells = plan(text, tmp_path).cells
    assert len(cells) == 1 * 2 * 2 * 2 - 2  # pytorch only, minus alexnet@32 twice
    assert "pytorch-mobilenet_v2-small-cpu-b1-e1-imagesize32-r2" in {c.cell_id for c in cells}
    assert all(not (c.model == "alexnet" and c.knobs["image_size"] == 32) for c in cells)


def test_an_empty_string_knob_is_left_out(tmp_path: Path) -> None:
    cells = plan(BASE + '[knobs]\ninject_fault = ["", "raise@1"]\n', tmp_path).cells
    with_fault = [c for c in cells if "--inject-fault" in c.profile_args()]
    assert len(cells) == 8 and len(with_fault) == 4
    assert any(c.cell_id.endswith("injectfaultnone") for c in cells)


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        (BASE + "color = 1\n", 5, "unknown key 'color'"),
        (BASE + "[knobs]\nlimit = 8\nimagesize = 64\n", 7, "unknown knob 'imagesize'"),
        (
            'name = "t"\nframeworks = [\n  "pytorch",\n  "pytoch",\n]\nmodels = ["alexnet"]\ndatasets = ["small"]\n',
            4,
            "unknown value 'pytoch'",
        ),  # fmt: skip
        (BASE + 'devices = ["cpu", "tpu"]\n', 5, "unknown value 'tpu'"),
        (BASE + "batches = [1, 0]\n", 5, "batches"),
        (BASE + 'epochs = "many"\n', 5, "epochs"),
        (BASE + "[knobs]\nlimit = 8\nimage_size = 16\n", 7, "at least 32"),
        (BASE + '[knobs]\nlimit = "eight"\n', 6, "not int"),
        (BASE + '\n[[exclude]]\nframework = "pytorch"\n\n[[exclude]]\nmodle = "alexnet"\n', 10, "unknown key 'modle'"),
        (BASE + '\n[[exclude]]\nmodel = "alexnt"\n', 7, "unknown value 'alexnt'"),
        (BASE + '[python]\npytorch = "/usr/bin/python3"\nsinga2 = "x"\n', 7, "unknown framework 'singa2'"),
        (BASE + "repetitions = 0\n", 5, "repetitions"),
        (BASE + "epochs = = 3\n", 5, "not valid TOML"),
    ],
)
def test_errors_name_the_line(tmp_path: Path, text: str, line: int, words: str) -> None:
    message = error(text, tmp_path)
    assert f"plan.toml:{line}" in message, message
    assert words in message, message


def test_missing_axis_and_empty_matrix_are_errors(tmp_path: Path) -> None:
    assert "no 'datasets'" in error('frameworks = ["pytorch"]\nmodels = ["alexnet"]\n', tmp_path)
    assert "leave no runs" in error(BASE + '[[exclude]]\ndataset = "small"\n', tmp_path)


def test_dataset_folders_resolve_against_the_plan(tmp_path: Path) -> None:
    (tmp_path / "mine" / "fire").mkdir(parents=True)
    cells = plan(BASE.replace('["small"]', '["mine"]'), tmp_path).cells
    assert cells[0].dataset == str((tmp_path / "mine").resolve())
    assert cells[0].cell_id == "pytorch-alexnet-mine-cpu-b1-e1"
    assert "unknown dataset 'nowhere'" in error(BASE.replace('["small"]', '["nowhere"]'), tmp_path)


def test_parse_plan_without_a_file() -> None:
    p = parse_plan(BASE, Path("inline.toml"))
    assert p.name == "t" and len(p.cells) == 4


def test_data_is_a_knob_and_the_study_has_a_variant_with_it(tmp_path: Path) -> None:
    """`data` is a plan knob like any option; a list makes it an axis, and the study's commented variant
    triples the matrix with the three data modes (issue 26)."""
    p = plan(BASE + '[knobs]\ndata = "synthetic"\n', tmp_path)
    assert {c.profile_args()[c.profile_args().index("--data") + 1] for c in p.cells} == {"synthetic"}
    text = (ROOT / "plans" / "study.toml").read_text()
    line = '# data = ["files", "memory", "synthetic"]'
    assert line in text
    variant = plan(text.replace(line, line[2:]), tmp_path)
    assert len(variant.cells) == 3 * 160 and len({c.cell_id for c in variant.cells}) == 3 * 160
    modes = [c.profile_args()[c.profile_args().index("--data") + 1] for c in variant.cells]
    assert {m: modes.count(m) for m in set(modes)} == {"files": 160, "memory": 160, "synthetic": 160}
    assert "knobs.data: unknown value 'all'" in error(BASE + '[knobs]\ndata = "all"\n', tmp_path)


def test_a_plan_of_millions_of_runs_is_refused_before_it_is_expanded(tmp_path: Path) -> None:
    """Issue 27, item 13: a 1.92-million-cell plan ran `campaign --dry-run` for minutes toward ~13 GB."""
    from tests.conftest import run_tracer
    from tracer.campaign.plan import MAX_PLAN_RUNS

    sizes = ", ".join(str(n) for n in range(32, 1032))
    batches = ", ".join(str(n) for n in range(1, 481))
    text = BASE + f"batches = [{batches}]\n[knobs]\nimage_size = [{sizes}]\n"  # 2 x 2 x 480 x 1000
    words = error(text, tmp_path)
    assert "1,920,000 runs" in words and f"at most {MAX_PLAN_RUNS:,}" in words
    result = run_tracer("campaign", str(tmp_path / "plan.toml"), "--dry-run", "--out", str(tmp_path / "runs"))
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr[-2000:]


def test_a_cell_breaking_a_rule_between_options_is_refused_at_load(tmp_path: Path) -> None:
    """What `tracer profile` refuses (tracer.core.options.cross_field_problem), a plan's cell is refused
    for when the plan is read, not when its run starts."""
    why = error(BASE + '[knobs]\nworkers = "autotune"\n', tmp_path)
    assert "pytorch-alexnet-small-cpu" in why and "--workers autotune is tf.data's AUTOTUNE" in why
    why = error(BASE + "[knobs]\nnsys_sampling = true\n", tmp_path)
    assert "--nsys-sampling applies to --trace nsys only" in why
    with_exclusion = BASE.replace('"pytorch", ', "") + '[knobs]\nworkers = "autotune"\n'
    assert {c.framework for c in plan(with_exclusion, tmp_path).cells} == {"tensorflow"}
