"""The generated image sets: the study's counts, deterministic, photo-like, varied sizes."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tracer import dataset
from tracer.core.errors import UserError


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
from tracer import dataset
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
