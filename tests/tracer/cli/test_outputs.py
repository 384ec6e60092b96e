"""Issue 27, items 3, 4, 5 and 13: one guard for every file or folder a user names for the tool to write.

Real `tracer` processes on a copy of a real run folder (an H100 fixture) and a real generated-style
dataset; every refusal comes before any work, so these are quick."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import run_tracer
from tests.tracer.cli.test_hardening_inputs import PROFILE, assert_one_line
from tracer.cli.outputs import protected_owner
from tracer.measure import dataset

FIXTURE_RUN = "20261125-000240-pytorch-vgg16-small-gpu-b100-7ff0"


@pytest.fixture
def run(real_fixtures: Path, tmp_path: Path) -> Path:
    path = tmp_path / "runs" / FIXTURE_RUN
    shutil.copytree(real_fixtures / "gpu-h100" / FIXTURE_RUN, path)
    return path


@pytest.fixture
def images(tmp_path: Path) -> Path:
    """A user's dataset folder: three classes, one real JPEG each."""
    root = tmp_path / "photos"
    for cls in dataset.CLASSES:
        (root / cls).mkdir(parents=True)
        (root / cls / "a.jpg").write_bytes(dataset.image_bytes(cls, 0))
    return root


def _digests(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.md5(p.read_bytes()).hexdigest() for p in folder.rglob("*") if p.is_file()
    }


def _writers(run: Path, target: Path) -> list[tuple[str, ...]]:
    """Every command that writes a user-named file or folder, aimed at `target`."""
    return [
        ("compare", str(run), str(run), "--csv", str(target)),
        ("view", str(run), "--screenshot", str(target)),
        ("export-trace", str(run), str(target)),
        ("report", str(run), "--out", str(target)),
    ]


def test_no_command_writes_into_a_run_folder_even_through_a_symlink(run: Path, tmp_path: Path) -> None:
    before = _digests(run)
    link_json = tmp_path / "innocent.png"
    link_json.symlink_to(run / "run.json")
    link_events = tmp_path / "innocent.csv"
    link_events.symlink_to(run / "events.jsonl")
    link_dir = tmp_path / "out-link"
    link_dir.symlink_to(run)
    for target in (run / "run.json", link_json, link_events, run / "new.png", link_dir / "x.csv"):
        for args in _writers(run, target):
            if args[0] == "view" and target.suffix != ".png":
                continue
            if args[0] == "report" and target.suffix:
                continue
            assert_one_line(run_tracer(*args), "run folder")
    assert_one_line(run_tracer("report", str(run), "--out", str(link_dir)), "is the run folder")
    assert_one_line(run_tracer("report", str(run), "--out", str(run / "report")), "inside the run folder")
    assert _digests(run) == before
    assert not (run / "report").exists()


def test_no_command_writes_into_a_dataset(run: Path, images: Path) -> None:
    dataset.validate_folder(images)  # as a run on it does: from then on the tool knows it as a dataset
    generated = dataset.datasets_root() / "small-v1"
    for target in (images / "fire" / "x.csv", generated / "x.csv"):
        assert_one_line(run_tracer("compare", str(run), str(run), "--csv", str(target)), "dataset")
        assert not target.exists()
    assert_one_line(run_tracer(*PROFILE[:-1], str(images), "--out", str(images)), "is the dataset")
    assert_one_line(run_tracer(*PROFILE[:-1], str(images), "--out", str(images / "fire")), "inside the dataset")
    assert sorted(p.name for p in images.iterdir()) == sorted(dataset.CLASSES)


@pytest.mark.parametrize("kind", ["/dev/full", "/dev/null", "fifo", "stdout-link"])
def test_export_trace_refuses_targets_that_are_no_regular_file(kind: str, run: Path, tmp_path: Path) -> None:
    """A temporary file renamed over /dev/full replaced the device node itself (as root)."""
    if kind == "fifo":
        target = tmp_path / "pipe"
        os.mkfifo(target)
    elif kind == "stdout-link":
        target = tmp_path / "out.json"
        target.symlink_to("/proc/self/fd/1")
    else:
        target = Path(kind)
    before = os.stat(target, follow_symlinks=False)
    assert_one_line(run_tracer("export-trace", str(run), str(target)), str(target))
    after = os.stat(target, follow_symlinks=False)
    assert (after.st_mode, after.st_ino, after.st_rdev) == (before.st_mode, before.st_ino, before.st_rdev)
    assert not list(target.parent.glob(target.name + ".tmp"))


def test_profile_refuses_a_dataset_with_more_classes_than_the_model_has(images: Path, tmp_path: Path) -> None:
    (images / "ash").mkdir()
    (images / "ash" / "a.jpg").write_bytes(dataset.image_bytes("fire", 1))
    line = assert_one_line(run_tracer(*PROFILE[:-1], str(images), "--out", str(tmp_path / "runs")), "4 class folders")
    assert "3 outputs" in line
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").iterdir())


@pytest.mark.parametrize(
    "args", [("--dataset", ""), ("--out", ""), ("--device", "gpu"), ("--amp", "--framework", "singa")]
)
def test_empty_paths_and_impossible_settings_are_refused_up_front(args: tuple[str, ...], tmp_path: Path) -> None:
    if args[:2] == ("--device", "gpu") and (Path("/dev/nvidia0").exists() or shutil.which("nvidia-smi")):
        pytest.skip("this machine has an NVIDIA GPU")
    out = () if "--out" in args else ("--out", str(tmp_path / "runs"))
    flag = args[0]
    result = run_tracer(*PROFILE, *args, *out)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr and flag in result.stderr, result.stderr
    assert not (tmp_path / "runs").exists()


def test_compare_csv_and_screenshot_paths_may_not_be_empty(run: Path) -> None:
    assert_one_line(run_tracer("compare", str(run), str(run), "--csv", ""), "empty")
    assert_one_line(run_tracer("export-trace", str(run), ""), "empty")


def test_the_hint_after_an_unknown_run_names_the_runs_flag(run: Path) -> None:
    line = assert_one_line(run_tracer("show", "no-such-run", "--runs", str(run.parent)), "no run")
    assert "tracer runs --runs" in line


def test_protected_owner_follows_links_and_knows_generated_datasets(run: Path, tmp_path: Path) -> None:
    link = tmp_path / "l"
    link.symlink_to(run / "raw")
    assert protected_owner(link / "f") == ("run folder", run.resolve())
    owner = protected_owner(dataset.cached_path("big") / "fire")
    assert owner is not None and owner[0] == "dataset"
    assert protected_owner(tmp_path / "elsewhere.csv") is None


def test_data_make_never_replaces_a_folder_of_someone_elses_files(run: Path, tmp_path: Path) -> None:
    """Generating replaces its target folder (rmtree, then rename): a user's folder must not be that target."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work")
    assert_one_line(run_tracer("data", "make", "small", "--out", str(mine)), "holds files of its own")
    assert (mine / "thesis.tex").read_text() == "years of work"
    assert_one_line(run_tracer("data", "make", "small", "--out", str(run / "data")), "run folder")
