"""The generated image sets: the study's counts, deterministic, photo-like, varied sizes."""

from __future__ import annotations

import hashlib
import io
import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.conftest import run_tracer
from tracer.core.errors import UserError
from tracer.measure import dataset


def folder_digest(path: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(path.rglob("*.jpg")):
        h.update(str(f.relative_to(path)).encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def test_study_counts() -> None:
    assert sum(dataset.class_counts(791).values()) == 791
    assert sum(dataset.class_counts(6003).values()) == 6003
    assert set(dataset.class_counts(6003)) == {"fire", "smoke", "no_fire"}
    assert dataset.SIZES["small"].images == 791 and dataset.SIZES["big"].images == 6003


def test_small_set_is_generated_deterministically(tmp_path: Path) -> None:
    a = dataset.generate(tmp_path / "a", 791)
    b = dataset.generate(tmp_path / "b", 791)
    per_class = {c: len(list((a / c).glob("*.jpg"))) for c in dataset.CLASSES}
    assert per_class == dataset.class_counts(791)
    assert folder_digest(a) == folder_digest(b)
    assert not list(tmp_path.glob("*.tmp-*")), "the temporary folder must be renamed into place"


@pytest.mark.parametrize("cls", dataset.CLASSES)
def test_images_look_like_photos(cls: str) -> None:
    sizes = set()
    for i in range(12):
        im = Image.open(io.BytesIO(dataset.image_bytes(cls, i)))
        assert im.format == "JPEG" and im.mode == "RGB"
        sizes.add(im.size)
        arr = np.asarray(im, dtype=np.float64).mean(axis=2)
        assert arr.std() > 10, "not flat colour"
        # neighbouring pixels correlate strongly in photos, not in noise
        corr = np.corrcoef(arr[:, :-1].ravel(), arr[:, 1:].ravel())[0, 1]
        assert corr > 0.8, f"looks like noise (neighbour correlation {corr:.2f})"
    assert len(sizes) > 6 and (224, 224) not in sizes


def test_user_folder_checks(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="does not exist"):
        dataset.validate_folder(tmp_path / "nope")
    with pytest.raises(UserError, match="no class sub-folders"):
        dataset.validate_folder(tmp_path)
    (tmp_path / "fire").mkdir()
    with pytest.raises(UserError, match="hold no images"):
        dataset.validate_folder(tmp_path)
    (tmp_path / "fire" / "x.jpg").write_bytes(dataset.image_bytes("fire", 0))
    assert dataset.validate_folder(tmp_path) == ["fire"]


RACER = """
import sys
from tracer.measure import dataset
dataset.SIZES["race"] = dataset.DatasetSize("race", 90)
real = dataset.generate
def generate(*args, **kwargs):
    print("generated")
    return real(*args, **kwargs)
dataset.generate = generate
print(dataset.ensure_generated("race"))
"""


def test_processes_asking_at_once_generate_once(tmp_path: Path) -> None:
    """A campaign's parallel runs ask for the dataset together: one generates, the others wait for it
    (none replaces the folder another may be reading)."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, TRACER_CACHE=str(tmp_path))
    procs = [
        subprocess.Popen([sys.executable, "-c", RACER], stdout=subprocess.PIPE, text=True, env=env) for _ in range(3)
    ]
    outs = [p.communicate(timeout=300)[0].split() for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    assert sum(out.count("generated") for out in outs) == 1, outs
    path = Path(outs[0][-1])
    assert {Path(out[-1]) for out in outs} == {path} and (path / dataset.DONE_MARKER).exists()
    assert sum(1 for _ in path.rglob("*.jpg")) == 90


def _huge_jpeg(path: Path, side: int = 20000) -> None:
    """A small JPEG whose frame header (SOF0) says side x side pixels, as a 20000 x 20000 photo's does."""
    data = bytearray(dataset.image_bytes("fire", 0))
    sof = data.index(b"\xff\xc0")
    data[sof + 5 : sof + 9] = side.to_bytes(2, "big") * 2
    path.write_bytes(bytes(data))


@pytest.fixture
def good_folder(tmp_path: Path) -> Path:
    root = tmp_path / "photos"
    for cls in dataset.CLASSES:
        (root / cls).mkdir(parents=True)
        for i in range(3):
            (root / cls / f"{i}.jpg").write_bytes(dataset.image_bytes(cls, i))
    return root


@pytest.mark.parametrize("damage", ["empty", "truncated", "self-link", "not-an-image", "20000x20000"])
def test_a_bad_image_is_named_before_any_training(damage: str, good_folder: Path, tmp_path: Path) -> None:
    """Issue 27, item 8: these passed the check and failed after the framework import (three tracebacks)."""
    bad = good_folder / "smoke" / "bad.jpg"
    good = dataset.image_bytes("smoke", 9)
    if damage == "empty":
        bad.write_bytes(b"")
    elif damage == "truncated":
        bad.write_bytes(good[: len(good) // 2])
    elif damage == "self-link":
        bad.symlink_to(bad)
    elif damage == "not-an-image":
        bad.write_text("hello")
    else:
        _huge_jpeg(bad)
    with pytest.raises(UserError, match="bad.jpg") as e:
        dataset.validate_folder(good_folder)
    if damage == "20000x20000":
        assert "limit" in str(e.value) and f"{dataset.MAX_IMAGE_PIXELS / 1e6:g} million" in str(e.value)
    result = run_tracer("profile", "--framework", "pytorch", "--model", "alexnet", "--dataset", str(good_folder),
                        "--out", str(tmp_path / "runs"))  # fmt: skip
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert len(result.stderr.strip().splitlines()) == 1 and "bad.jpg" in result.stderr, result.stderr
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").iterdir())


def test_each_image_is_read_once_until_it_changes(good_folder: Path) -> None:
    assert dataset.validate_folder(good_folder) == sorted(dataset.CLASSES)
    image = good_folder / "fire" / "0.jpg"
    st = image.stat()
    image.write_bytes(b"\0" * st.st_size)  # damaged behind the check's back, same size and mtime
    os.utime(image, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert dataset.validate_folder(good_folder) == sorted(dataset.CLASSES)  # not read again
    os.utime(image, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    with pytest.raises(UserError, match="0.jpg"):
        dataset.validate_folder(good_folder)
