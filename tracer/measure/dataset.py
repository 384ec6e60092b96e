"""The study's image sets, generated: 3 classes (fire, smoke, no_fire), 791 ("small") or 6003 ("big") JPEGs.

The real photos are not redistributable, so the generator makes deterministic photo-like images of
varied sizes (sky gradients, terrain, blurred flames or smoke plumes, grain) that cost what photos cost
to decode and resize. Generated once per machine and cached.
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import json
import os
import shutil
import sys
import warnings
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

from tracer.core.cases import DATASET_IMAGES
from tracer.core.errors import UserError
from tracer.core.paths import cache_root

CLASSES = ("fire", "no_fire", "smoke")
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp")  # the files the workers train on (tracer.worker.workload)
# Above this an image is refused, not trained on: a 20000 x 20000 JPEG took 3.8 GB in an MXNet run. 50 MP
# is a large camera's photo; the study's images are about 0.2 MP.
MAX_IMAGE_PIXELS = 50_000_000
CHECKED_FILE = "checked-images.json"  # per dataset folder, in the cache: images already read, by size and mtime
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


def datasets_root() -> Path:
    """Where the generated datasets are cached."""
    return cache_root() / "datasets"


def cached_path(name: str) -> Path:
    return datasets_root() / f"{name}-v{GENERATOR_VERSION}"


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


def validate_folder(path: Path, num_classes: int = len(CLASSES)) -> list[str]:
    """A user's dataset: one sub-folder per class (at most `num_classes`, the model's outputs), each with
    at least one image, and every image readable (`check_images`)."""
    if path.exists() and not path.is_dir():
        raise UserError(f"dataset {path} is a file: give small, big or a folder with one sub-folder per class")
    if not path.is_dir():
        raise UserError(
            f"dataset folder {path} does not exist: give small, big or a folder with one sub-folder per class"
        )
    try:
        classes = sorted(p.name for p in path.iterdir() if p.is_dir())
        images = {c: sorted(f for f in (path / c).iterdir() if f.suffix.lower() in IMAGE_SUFFIXES) for c in classes}
    except PermissionError as e:
        raise UserError(
            f"dataset folder {e.filename or path} is not readable by this user: fix its permissions"
        ) from None
    if not classes:
        raise UserError(
            f"dataset folder {path} has no class sub-folders: put each class's images in its own sub-folder"
        )
    empty = [c for c in classes if not images[c]]
    if empty:
        raise UserError(f"dataset folder {path}: class folder(s) {', '.join(empty)} hold no images (.jpg/.png/.bmp)")
    if len(classes) > num_classes:
        raise UserError(
            f"dataset folder {path} has {len(classes)} class folders ({', '.join(classes)}): the model has"
            f" {num_classes} outputs, so give it at most {num_classes} class sub-folders"
        )
    check_images(path, [f for c in classes for f in images[c]])
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


def check_images(folder: Path, files: list[Path]) -> None:
    """Reads every image once (header, then a reduced decode of the whole stream, which finds a JPEG cut
    short) and names the first bad one in one line: empty, truncated, not an image, a link that loops,
    or above MAX_IMAGE_PIXELS. Images seen good before, with the same size and mtime, are not read again."""
    record = _check_record(folder)
    cache = record.parent
    try:
        seen: dict[str, list[int]] = json.loads(record.read_text())
    except (OSError, ValueError):
        seen = {}
    good: dict[str, list[int]] = {}
    for path in files:
        name = str(path.relative_to(folder))
        try:
            st = path.stat()
        except OSError as e:
            raise UserError(f"dataset image {path}: {e.strerror or e} (a broken or looping link?); remove it") from None
        key = [st.st_size, st.st_mtime_ns]
        if seen.get(name) != key:
            _check_image(path, st.st_size)
        good[name] = key
    if good != seen:
        try:
            cache.mkdir(parents=True, exist_ok=True)
            tmp = record.with_name(f"{record.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(good))
            os.replace(tmp, record)
        except OSError:
            pass  # only a cache: the next run reads the images again


def _check_record(folder: Path) -> Path:
    return (
        cache_root() / "dataset-checks" / hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:16] / CHECKED_FILE
    )


def is_dataset(folder: Path) -> bool:
    """A folder the tool trains from: a generated set, a user's folder once checked for a run here, or one
    shaped as a dataset (`shaped_like_dataset`: a set trained from on another machine, or not yet)."""
    return (folder / DONE_MARKER).exists() or _check_record(folder).exists() or shaped_like_dataset(folder)


SHAPE_LOOK_ENTRIES = 256
"""Entries of each sub-folder looked at for an image when telling a dataset by its shape: the check stays
cheap beside a large folder of other files."""


def shaped_like_dataset(folder: Path) -> bool:
    """Whether `folder` has the layout `validate_folder` trains from: sub-folders (hidden ones aside), each
    holding an image. A report or a run written into one would add a class that holds no images."""
    try:
        subs = [p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")]
        if not subs:
            return False
        for sub in subs:
            with os.scandir(sub) as entries:
                looked = (e for _, e in zip(range(SHAPE_LOOK_ENTRIES), entries))
                if not any(e.name.lower().endswith(IMAGE_SUFFIXES) for e in looked):
                    return False
    except OSError:
        return False
    return True


def _check_image(path: Path, size: int) -> None:
    what = "remove or replace it"
    if size == 0:
        raise UserError(f"dataset image {path} is empty (0 bytes): {what}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(path) as im:
                pixels = im.width * im.height
                if pixels > MAX_IMAGE_PIXELS:
                    raise UserError(
                        f"dataset image {path} is {im.width} x {im.height} pixels, above the limit of"
                        f" {MAX_IMAGE_PIXELS / 1e6:g} million: shrink it or leave it out"
                    )
                im.draft("RGB", (max(1, im.width // 8), max(1, im.height // 8)))  # JPEG: 1/8 scale, whole stream
                im.load()
    except UserError:
        raise
    except Image.DecompressionBombError:
        raise UserError(
            f"dataset image {path} is above the limit of {MAX_IMAGE_PIXELS / 1e6:g} million pixels: shrink it"
            " or leave it out"
        ) from None
    except (OSError, SyntaxError, ValueError) as e:
        raise UserError(f"dataset image {path} cannot be read ({e}): {what}") from None
