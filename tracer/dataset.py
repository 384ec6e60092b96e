"""The study's image sets, generated: 3 classes (fire, smoke, no_fire), 791 ("small") or 6003 ("big") JPEGs.

The real photos are not redistributable, so the generator makes deterministic photo-like images of
varied sizes (sky gradients, terrain, blurred flames or smoke plumes, grain) that cost what photos cost
to decode and resize. Generated once per machine and cached.
"""

from __future__ import annotations

import fcntl
import io
import os
import shutil
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

from tracer.core.cases import DATASET_IMAGES
from tracer.core.errors import UserError
from tracer.paths import cache_root

CLASSES = ("fire", "no_fire", "smoke")
GENERATOR_VERSION = 1
DONE_MARKER = ".complete"


@dataclass(frozen=True)
class DatasetSize:
    name: str
    images: int


SIZES = {name: DatasetSize(name, images) for name, images in DATASET_IMAGES.items()}


def class_counts(total: int) -> dict[str, int]:
    base, extra = divmod(total, len(CLASSES))
    return {c: base + (1 if i < extra else 0) for i, c in enumerate(CLASSES)}


def image_bytes(cls: str, index: int, seed: int = 0) -> bytes:
    """One JPEG; the same (class, index, seed) always gives the same bytes."""
    rng = np.random.default_rng([seed, CLASSES.index(cls), index])
    w, h = int(rng.integers(260, 641)), int(rng.integers(200, 481))
    img = _background(rng, w, h)
    draw = ImageDraw.Draw(img, "RGBA")
    _terrain(rng, draw, w, h)
    if cls == "fire":
        img = _flames(rng, img, w, h)
    elif cls == "smoke":
        img = _plumes(rng, img, w, h)
    else:
        _trees(rng, draw, w, h)
    grain = rng.normal(0, 6, (h, w, 1)).astype(np.int16)
    arr = np.clip(np.asarray(img, dtype=np.int16) + grain, 0, 255).astype(np.uint8)
    out = io.BytesIO()
    Image.fromarray(arr).save(out, format="JPEG", quality=90)
    return out.getvalue()


def _background(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    top = rng.uniform([90, 130, 170], [170, 200, 250])
    bottom = rng.uniform([150, 150, 140], [230, 220, 210])
    t = np.linspace(0, 1, h)[:, None, None]
    sky = top * (1 - t) + bottom * t
    clouds = rng.uniform(-25, 25, (max(2, h // 60), max(2, w // 60), 1))
    clouds_img = Image.fromarray(((clouds[:, :, 0] + 25) * 5).astype(np.uint8)).resize((w, h), Image.Resampling.BICUBIC)
    texture = (np.asarray(clouds_img, dtype=np.float64)[:, :, None] / 5.0) - 25
    return Image.fromarray(np.clip(sky + texture, 0, 255).astype(np.uint8), "RGB")


def _terrain(rng: np.random.Generator, draw: ImageDraw.ImageDraw, w: int, h: int) -> None:
    for _ in range(int(rng.integers(1, 4))):
        base_y = h * rng.uniform(0.5, 0.8)
        xs = np.linspace(0, w, 9)
        ys = base_y + rng.normal(0, h * 0.05, xs.size)
        colour = tuple(int(c) for c in rng.uniform([30, 60, 20], [110, 130, 70])) + (255,)
        draw.polygon([(0, h)] + list(zip(xs.tolist(), ys.tolist())) + [(w, h)], fill=colour)


def _trees(rng: np.random.Generator, draw: ImageDraw.ImageDraw, w: int, h: int) -> None:
    for _ in range(int(rng.integers(3, 12))):
        x, y = rng.uniform(0, w), rng.uniform(h * 0.55, h)
        s = rng.uniform(8, 40)
        green = tuple(int(c) for c in rng.uniform([10, 60, 10], [60, 140, 60])) + (255,)
        draw.rectangle([x - s / 8, y - s, x + s / 8, y], fill=(80, 50, 30, 255))
        draw.ellipse([x - s / 2, y - 2 * s, x + s / 2, y - s / 2], fill=green)


def _flames(rng: np.random.Generator, img: Image.Image, w: int, h: int) -> Image.Image:
    layer = Image.new("RGBA", (w, h), (0, 0, 0, 0))
    draw = ImageDraw.Draw(layer)
    for _ in range(int(rng.integers(3, 9))):
        x, y = rng.uniform(0.1 * w, 0.9 * w), rng.uniform(0.5 * h, 0.95 * h)
        fw, fh = rng.uniform(20, 0.3 * w), rng.uniform(30, 0.5 * h)
        for k, colour in enumerate(((200, 40, 10), (250, 120, 20), (255, 220, 90))):
            shrink = 1 - 0.3 * k
            draw.ellipse(
                [x - fw * shrink / 2, y - fh * shrink, x + fw * shrink / 2, y], fill=colour + (int(210 - 30 * k),)
            )
    layer = layer.filter(ImageFilter.GaussianBlur(float(rng.uniform(2, 6))))
    return Image.alpha_composite(img.convert("RGBA"), layer).convert("RGB")


def _plumes(rng: np.random.Generator, img: Image.Image, w: int, h: int) -> Image.Image:
    layer = Image.new("RGBA", (w, h), (0, 0, 0, 0))
    draw = ImageDraw.Draw(layer)
    x, y = rng.uniform(0.2 * w, 0.8 * w), rng.uniform(0.6 * h, 0.9 * h)
    for _ in range(int(rng.integers(6, 16))):
        r = rng.uniform(15, 0.2 * w)
        grey = int(rng.uniform(90, 200))
        draw.ellipse([x - r, y - r, x + r, y + r], fill=(grey, grey, grey, int(rng.uniform(90, 190))))
        x += rng.normal(0, r * 0.4)
        y -= rng.uniform(0.3, 1.0) * r
    layer = layer.filter(ImageFilter.GaussianBlur(float(rng.uniform(6, 14))))
    return Image.alpha_composite(img.convert("RGBA"), layer).convert("RGB")


def generate(target: Path, images: int, seed: int = 0, progress: Callable[[int], None] | None = None) -> Path:
    """Writes the dataset into `target` (made atomically: a half-written folder is never used)."""
    tmp = target.with_name(f"{target.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    jobs = []
    chunk = 250
    for cls, count in class_counts(images).items():
        for start in range(0, count, chunk):
            jobs.append((tmp / cls, cls, start, min(chunk, count - start)))
    with ProcessPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        for done in pool.map(_write_chunk, [(f, c, s, n, seed) for f, c, s, n in jobs]):
            if progress:
                progress(done)
    (tmp / DONE_MARKER).write_text(f"generator {GENERATOR_VERSION} seed {seed} images {images}\n")
    if target.exists():
        shutil.rmtree(target)
    tmp.rename(target)
    return target


def _write_chunk(args: tuple[Path, str, int, int, int]) -> int:
    folder, cls, start, count, seed = args
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(start, start + count):
        (folder / f"{cls}_{i:05d}.jpg").write_bytes(image_bytes(cls, i, seed))
    return count


def cached_path(name: str) -> Path:
    return cache_root() / "datasets" / f"{name}-v{GENERATOR_VERSION}"


def ensure_generated(name: str, progress: Callable[[int], None] | None = None) -> Path:
    """The cached dataset, generated on first use. Processes that ask at once (a campaign's parallel
    runs) take turns on a lock file: the first generates, the others find it done, and none replaces
    a folder another is training from."""
    path = cached_path(name)
    if (path / DONE_MARKER).exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or when this process dies
        if (path / DONE_MARKER).exists():
            return path
        return generate(path, SIZES[name].images, progress=progress)


def validate_folder(path: Path) -> list[str]:
    """A user's dataset: one sub-folder per class, each with at least one image."""
    if path.exists() and not path.is_dir():
        raise UserError(f"dataset {path} is a file: give small, big or a folder with one sub-folder per class")
    if not path.is_dir():
        raise UserError(
            f"dataset folder {path} does not exist: give small, big or a folder with one sub-folder per class"
        )
    try:
        classes = sorted(p.name for p in path.iterdir() if p.is_dir())
        suffixes = (".jpg", ".jpeg", ".png", ".bmp")
        empty = [c for c in classes if not any(f.suffix.lower() in suffixes for f in (path / c).iterdir())]
    except PermissionError as e:
        raise UserError(
            f"dataset folder {e.filename or path} is not readable by this user: fix its permissions"
        ) from None
    if not classes:
        raise UserError(
            f"dataset folder {path} has no class sub-folders: put each class's images in its own sub-folder"
        )
    if empty:
        raise UserError(f"dataset folder {path}: class folder(s) {', '.join(empty)} hold no images (.jpg/.png/.bmp)")
    if len(classes) == 1:
        print(
            f"tracer: warning: dataset folder {path} has one class ({classes[0]}): the model still has its 3 outputs,"
            " and the loss means little",
            file=sys.stderr,
        )
    return classes


# --data memory holds the decoded set as uint8 (tracer/worker/memory_data.py): images x size x size x 3 bytes.
DECODED_CHANNELS = 3


def count_images(path: Path) -> int:
    """Images in a dataset folder's class sub-folders (the files a run can train on)."""
    suffixes = (".jpg", ".jpeg", ".png", ".bmp")
    return sum(1 for c in path.iterdir() if c.is_dir() for f in c.iterdir() if f.suffix.lower() in suffixes)


def decoded_bytes(path: Path, limit: int | None, image_size: int) -> tuple[int, int]:
    """(images, bytes) that --data memory would hold for this folder, --limit and --image-size."""
    images = count_images(path)
    if limit is not None:
        images = min(images, limit)
    return images, images * image_size * image_size * DECODED_CHANNELS


def check_memory_fits(path: Path, limit: int | None, image_size: int) -> int:
    """Refuses --data memory in one line when the decoded set would not fit in the RAM free now;
    returns the bytes it needs."""
    import psutil

    images, need = decoded_bytes(path, limit, image_size)
    free = psutil.virtual_memory().available
    if need > free:
        raise UserError(
            f"--data memory needs {_gib(need)} to hold {images:,} images of {image_size} px decoded (uint8),"
            f" and {_gib(free)} of RAM is free: use --limit, a smaller --image-size or --data files"
        )
    return need


def _gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"
