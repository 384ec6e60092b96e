"""The study's workload, shared by every framework: configuration, image list, preprocessing constants.

Python 3.6 syntax (`dataclasses` is the backport there); standard library, NumPy and Pillow only.
"""

import json
import os
from dataclasses import dataclass, fields
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp")

# torchvision's MobileNetV2 inverted-residual blocks: (expansion t, channels c, repeats n, first stride s),
# for the workers that define the model themselves (JAX, SINGA).
MOBILENET_V2_SETTINGS = (
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
)

# torchvision's trainable parameter counts for 3 classes: the reference every framework is held to.
REFERENCE_PARAMS = {
    "alexnet": 57016131,
    "mobilenet_v2": 2227715,
    "resnet50": 23514179,
    "vgg16": 134272835,
}


@dataclass(frozen=True)
class WorkloadConfig:
    """What the tracer asks the worker to train (`worker_config.json`). The tracer derives that file from
    its option declarations (tracer/core/options.py); a test holds these fields to them."""

    framework: str
    model: str
    dataset_dir: str
    device: str = "cpu"
    batch: int = 1
    epochs: int = 1
    limit: Optional[int] = None
    image_size: int = 224
    num_classes: int = 3
    lr: float = 0.001
    momentum: float = 0.9
    seed: int = 0
    on_divergence: str = "stop"
    workers: Optional[Union[int, str]] = None  # a count, "autotune" (TensorFlow), or None: the machine's budget
    prefetch: Optional[int] = None
    pipeline: Optional[str] = None  # "native" (default) or "shared" (load_normalised)
    data: str = "files"  # schema.DATA_MODES: files, memory (decoded once into RAM) or synthetic
    sync_every: Optional[int] = None
    threads: Optional[int] = None
    amp: bool = False
    gpu_thread_mode: Optional[str] = None
    inject_fault: Optional[str] = None
    nproc: int = 1  # ranks of data-parallel training (this process's rank comes from RANK_ENV)
    slow_loader: Optional[str] = None  # RANK:MS, a test hook: that rank's loader waits MS ms per batch
    trace_window: Optional[Dict[str, Optional[int]]] = None  # epochs/steps to trace (tracer/worker/window.py)
    worker_module: Optional[str] = None  # the framework's worker module (tracer.core.frameworks declares it)

    @classmethod
    def load(cls, path: str) -> "WorkloadConfig":
        with open(path) as f:
            data = json.load(f)
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass(frozen=True)
class ImageList:
    """The images of one run, in a deterministic order, with integer labels."""

    files: List[str]
    labels: List[int]
    classes: List[str]
    total_in_folder: int

    def __len__(self) -> int:
        return len(self.files)


def list_images(dataset_dir: str, limit: Optional[int] = None) -> ImageList:
    """Classes are the sorted sub-folders; with a limit, images are taken round-robin across classes
    so that even a 16-image run sees every class."""
    classes = sorted(d for d in os.listdir(dataset_dir) if os.path.isdir(os.path.join(dataset_dir, d)))
    per_class: List[List[Tuple[str, int]]] = []
    for label, name in enumerate(classes):
        folder = os.path.join(dataset_dir, name)
        names = sorted(n for n in os.listdir(folder) if n.lower().endswith(IMAGE_SUFFIXES))
        per_class.append([(os.path.join(folder, n), label) for n in names])
    total = sum(len(c) for c in per_class)
    ordered: List[Tuple[str, int]] = []
    longest = max((len(c) for c in per_class), default=0)
    for i in range(longest):
        for items in per_class:
            if i < len(items):
                ordered.append(items[i])
    if limit is not None:
        ordered = ordered[:limit]
    return ImageList(
        files=[f for f, _ in ordered], labels=[lab for _, lab in ordered], classes=classes, total_in_folder=total
    )


def resize_and_crop(image: Any, size: int) -> Any:
    """Resize the shorter side to `size`, then centre-crop to size x size (a PIL image in, one out).

    Frameworks without an image-transform library use this so that every framework sees the same pixels.
    """
    from PIL import Image

    image = image.convert("RGB")
    w, h = image.size
    scale = size / float(min(w, h))
    nw, nh = max(size, int(round(w * scale))), max(size, int(round(h * scale)))
    image = image.resize((nw, nh), getattr(Image, "Resampling", Image).BILINEAR)
    left, top = (nw - size) // 2, (nh - size) // 2
    return image.crop((left, top, left + size, top + size))


def load_pixels(path: str, size: int, flip: bool) -> Any:
    """Decode, resize + crop, optional horizontal flip: uint8 HWC array (a quarter of the float32
    bytes, for loaders that hand batches across processes and normalise where the batch arrives)."""
    import numpy as np
    from PIL import Image

    with Image.open(path) as im:
        im = resize_and_crop(im, size)
        if flip:
            im = im.transpose(getattr(Image, "Transpose", Image).FLIP_LEFT_RIGHT)  # Pillow < 9.1 has no enum
        return np.asarray(im, dtype=np.uint8)


def normalise(pixels: Any) -> Any:
    """uint8 pixels (any leading shape, channels last) to [0, 1], then MEAN/STD: float32, channels last."""
    import numpy as np

    scaled = np.asarray(pixels, dtype=np.float32) / 255.0
    return (scaled - np.asarray(MEAN, dtype=np.float32)) / np.asarray(STD, dtype=np.float32)


def load_normalised(path: str, size: int, flip: bool, channels_first: bool = True) -> Any:
    """Decode, resize + crop, optional horizontal flip, scale to [0, 1], normalise: float32 array."""
    arr = normalise(load_pixels(path, size, flip))
    return arr.transpose(2, 0, 1).copy() if channels_first else arr


def load_batch(files: Sequence[str], size: int, flips: Sequence[bool]) -> Any:
    """A batch of `load_pixels`, stacked (N, H, W, 3) uint8: the unit of work of a process-pool loader
    (a module-level function, so a spawned process imports only this module to run it)."""
    import numpy as np

    out = np.empty((len(files), size, size, 3), dtype=np.uint8)
    for i, (path, flip) in enumerate(zip(files, flips)):
        out[i] = load_pixels(path, size, flip)
    return out


def adaptive_pool_matrix(size_in: int, size_out: int) -> Any:
    """Row i averages input bins [floor(i*n/m), ceil((i+1)*n/m)): torch's adaptive average pooling,
    as a matrix, for frameworks whose zoo models only fit 224 px input."""
    import numpy as np

    m = np.zeros((size_out, size_in), dtype=np.float32)
    for i in range(size_out):
        start = (i * size_in) // size_out
        end = -((-(i + 1) * size_in) // size_out)
        m[i, start:end] = 1.0 / (end - start)
    return m
