"""MXNet 1.9 Gluon: gluon.model_zoo.vision models (tracer/worker/models/mxnet.py), gluon.data.DataLoader
as the input pipeline."""

import ctypes
import random
from typing import Any, Dict, Tuple

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon
from mxnet.gluon.data.vision import transforms

from tracer.worker import base
from tracer.worker.base import EpochStats, ParamCount
from tracer.worker.memory_data import MemorySet
from tracer.worker.models.mxnet import build_model, initialise
from tracer.worker.reporting import Reporter
from tracer.worker.workload import MEAN, STD, ImageList, WorkloadConfig, load_normalised


class ImageDataset(gluon.data.Dataset):
    """Decodes with the shared PIL+NumPy preprocessing; the flip is drawn per item from Python's RNG."""

    def __init__(self, images: ImageList, size: int) -> None:
        self.files = list(images.files)
        self.labels = list(images.labels)
        self.size = size

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, index: int) -> Tuple[Any, int]:
        flip = random.random() < 0.5
        return load_normalised(self.files[index], self.size, flip), self.labels[index]


def native_transform(size: int, flip: bool = True) -> Any:
    """gluon.data.vision.transforms as MXNet users write them (OpenCV under mx.image)."""
    steps = [transforms.Resize(size, keep_ratio=True), transforms.CenterCrop(size)]
    if flip:
        steps.append(transforms.RandomFlipLeftRight())
    return transforms.Compose(steps + [transforms.ToTensor(), transforms.Normalize(MEAN, STD)])


class NativeImageDataset(gluon.data.Dataset):
    """mx.image.imread (OpenCV decode, RGB) then gluon's vision transforms."""

    def __init__(self, images: ImageList, size: int) -> None:
        self.files = list(images.files)
        self.labels = list(images.labels)
        self.transform = native_transform(size)

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, index: int) -> Tuple[Any, int]:
        return self.transform(mx.image.imread(self.files[index])), self.labels[index]


def native_resize(size: int) -> Any:
    """The native pipeline's decode-side steps (no flip, no tensor): what --data memory keeps as uint8."""
    return transforms.Compose([transforms.Resize(size, keep_ratio=True), transforms.CenterCrop(size)])


def native_pixels(path: str, size: int) -> Any:
    """One image through the native pipeline without flip, as a CHW float32 array (pixel-agreement test)."""
    return native_transform(size, flip=False)(mx.image.imread(path)).asnumpy()


def _native_batchify(samples: Any) -> Tuple[Any, Any]:
    x = mx.nd.stack(*[s[0] for s in samples])
    return x, mx.nd.array([s[1] for s in samples], dtype="float32")


def _batchify(samples: Any) -> Tuple[Any, Any]:
    x = np.stack([s[0] for s in samples])
    y = np.asarray([s[1] for s in samples], dtype=np.float32)
    return mx.nd.array(x, dtype="float32"), mx.nd.array(y, dtype="float32")


class Trainer(base.Trainer):
    NATIVE_DECODER = "mx.image.imread (OpenCV imdecode)"
    NATIVE_RESIZE = "gluon transforms.Resize keep_ratio (OpenCV INTER_LINEAR, no antialias), shorter side, CenterCrop"

    def __init__(self, cfg: WorkloadConfig, images: ImageList, reporter: Reporter) -> None:
        base.Trainer.__init__(self, cfg, images, reporter)
        self._memory_loader: Any = None
        self._mean: Any = None
        self._std: Any = None

    def versions(self) -> Dict[str, str]:
        features = mx.runtime.Features()
        return {
            "mxnet": mx.__version__,
            "cuda": str(features.is_enabled("CUDA")),
            "cudnn": str(features.is_enabled("CUDNN")),
            "mkldnn": str(features.is_enabled("MKLDNN")),
            "numpy": np.__version__,
        }

    def knobs(self) -> Dict[str, object]:
        cfg = self.cfg
        return {
            "gluon.data.DataLoader.num_workers": self._workers(),
            "gluon.data.DataLoader.prefetch": self._prefetch() * self._workers(),
            "MXSetNumOMPThreads": cfg.threads,
            "mxnet.contrib.amp.target_dtype": self.amp_dtype,
            "hybridize": True,
        }

    def set_threads(self, threads: int) -> None:
        if mx.base._LIB.MXSetNumOMPThreads(ctypes.c_int(threads)) != 0:
            raise RuntimeError(
                "MXSetNumOMPThreads(%d) failed: %s" % (threads, mx.base.py_str(mx.base._LIB.MXGetLastError()))
            )

    def gpu_missing(self) -> str:
        return "" if mx.context.num_gpus() else "mxnet.context.num_gpus() is 0"

    def use_device(self, gpu: bool) -> None:
        self.device = mx.gpu(0) if gpu else mx.cpu()

    def seed(self, seed: int) -> None:
        mx.random.seed(seed)

    def build_training(self) -> ParamCount:
        cfg = self.cfg
        if self.amp_dtype:
            from mxnet.contrib import amp

            amp.init(target_dtype=self.amp_dtype)
        self.net = build_model(cfg.model, cfg.num_classes)
        params = initialise(self.net, cfg.image_size, self.device)
        self.net.hybridize()
        self.loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
        self.trainer = gluon.Trainer(
            self.net.collect_params(), "sgd", {"learning_rate": cfg.lr, "momentum": cfg.momentum}
        )
        if cfg.amp:
            from mxnet.contrib import amp

            amp.init_trainer(self.trainer)
        native = self._pipeline_kind() == "native"
        self.loader = gluon.data.DataLoader(
            NativeImageDataset(self.images, cfg.image_size) if native else ImageDataset(self.images, cfg.image_size),
            batch_size=cfg.batch,
            shuffle=True,
            last_batch="keep",
            batchify_fn=_native_batchify if native else _batchify,
            num_workers=self._workers(),
            prefetch=self._prefetch() * self._workers() or None,
            pin_memory=cfg.device == "gpu",
        )
        return params

    def train_epoch(self, epoch: int) -> EpochStats:
        batches, step = self.epoch_input(epoch, lambda: self.loader, self._train_step)
        return self.run_epoch(epoch, batches, step, _read)

    # --- --data memory / synthetic (tracer.worker.memory_data)
    MEMORY_LOADER = "gluon.data.ArrayDataset + DataLoader(num_workers=0, shuffle)"
    DECODE_THREADS = 1  # MXNet's imperative NDArray calls are not safe from several Python threads

    def decode_uint8(self, path: str, size: int) -> Any:
        if self._pipeline_kind() != "native":
            return base.Trainer.decode_uint8(self, path, size)
        return native_resize(size)(mx.image.imread(path)).asnumpy().astype(np.uint8)

    def prepare_memory(self, held: MemorySet) -> None:
        self._memory_loader = gluon.data.DataLoader(
            gluon.data.ArrayDataset(held.images, held.labels),
            batch_size=self.cfg.batch,
            shuffle=True,
            last_batch="keep",
            num_workers=0,
            pin_memory=self.cfg.device == "gpu",
        )
        self._mean = mx.nd.array(MEAN, ctx=self.device).reshape((1, 3, 1, 1))
        self._std = mx.nd.array(STD, ctx=self.device).reshape((1, 3, 1, 1))

    def memory_batches(self, epoch: int) -> Any:
        return self._memory_loader

    def memory_to_device(self, batch: Any) -> Tuple[Any, Any]:
        """uint8 NHWC to the device, then ToTensor's and Normalize's arithmetic and a random flip there."""
        x, y = batch
        x = x.as_in_context(self.device).transpose((0, 3, 1, 2)).astype("float32") / 255
        if self.flip_memory:
            flip = mx.nd.random.uniform(shape=(x.shape[0],), ctx=self.device) < 0.5
            x = mx.nd.where(flip, mx.nd.flip(x, axis=3), x)
        x = mx.nd.broadcast_div(mx.nd.broadcast_sub(x, self._mean), self._std)
        return x, y.as_in_context(self.device).astype("float32")

    def synthetic_batch(self, n: int) -> Tuple[Any, Any]:
        size = self.cfg.image_size
        x = mx.nd.random.normal(shape=(n, 3, size, size), ctx=self.device)
        y = mx.nd.random.randint(0, self.cfg.num_classes, shape=(n,), ctx=self.device).astype("float32")
        return x, y

    def _train_step(self, batch: Any) -> Tuple[Any, int]:
        x, y = batch
        x = x.as_in_context(self.device)
        y = y.as_in_context(self.device)
        with autograd.record():
            logits = self.net(x)
            loss = self.loss_fn(logits, y)
            if self.cfg.amp:
                from mxnet.contrib import amp

                with amp.scale_loss(loss, self.trainer) as scaled:
                    autograd.backward(scaled)
        if not self.cfg.amp:
            loss.backward()
        n = int(x.shape[0])
        self.trainer.step(n)
        return (loss, logits, y), n

    def _finish_epoch(self) -> None:
        mx.nd.waitall()


def _read(outputs: Tuple[Any, Any, Any]) -> Tuple[float, float]:
    """The batch's mean loss and its correct predictions (argmax of the logits the step computed)."""
    loss, logits, y = outputs
    correct = (logits.argmax(axis=1) == y.astype(logits.dtype)).sum()
    return float(loss.mean().asscalar()), float(correct.asscalar())
