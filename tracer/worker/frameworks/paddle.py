"""PaddlePaddle (dynamic graph): paddle.vision.models (tracer/worker/models/paddle.py), paddle.io.DataLoader
as the input pipeline."""

import random
from typing import Any, Dict, Optional, Tuple

import numpy as np
import paddle
from paddle.vision import transforms

from tracer.worker import base
from tracer.worker.base import EpochStats, ParamCount
from tracer.worker.memory_data import MemorySet
from tracer.worker.models.paddle import build_model, count_params
from tracer.worker.nvtx import Nvtx
from tracer.worker.reporting import Reporter
from tracer.worker.workload import MEAN, STD, ImageList, WorkloadConfig, load_normalised


class ImageDataset(paddle.io.Dataset):  # type: ignore[misc]
    """Decodes with the shared PIL+NumPy preprocessing; the flip is drawn per item from Python's RNG
    (paddle.io seeds each worker process)."""

    def __init__(self, images: ImageList, size: int) -> None:
        super().__init__()
        self.files = list(images.files)
        self.labels = list(images.labels)
        self.size = size

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, index: int) -> Tuple[Any, Any]:
        flip = random.random() < 0.5
        return load_normalised(self.files[index], self.size, flip), np.int64(self.labels[index])


def native_transform(size: int, flip: bool = True) -> Any:
    """paddle.vision.transforms as Paddle users write them (on its default 'pil' image backend)."""
    steps = [transforms.Resize(size), transforms.CenterCrop(size)]
    if flip:
        steps.append(transforms.RandomHorizontalFlip())
    return transforms.Compose(steps + [transforms.ToTensor(), transforms.Normalize(MEAN, STD, data_format="CHW")])


def native_resize(size: int) -> Any:
    """The native pipeline's decode-side steps (no flip, no tensor): what --data memory keeps as uint8."""
    return transforms.Compose([transforms.Resize(size), transforms.CenterCrop(size)])


def _load(path: str) -> Any:
    return paddle.vision.image_load(path).convert("RGB")


class NativeImageDataset(paddle.io.Dataset):  # type: ignore[misc]
    """paddle.vision.image_load (its image backend: PIL by default) then paddle.vision.transforms.

    Items leave as NumPy arrays, not paddle Tensors: with shared memory, paddle.io's loader process
    hands a batch of Tensors to the queue's feeder thread as views (`Tensor.get_tensor()`) and lets the
    Tensors go at its next batch, so the feeder may pickle freed memory ("Tensor's dimension is 49152,
    memory's size is 8", then the batch is lost and training waits for ever, or a segfault: one run in
    nine hung here with Paddle 3.3.1). NumPy batches are copied into tensors the queue owns."""

    def __init__(self, images: ImageList, size: int) -> None:
        super().__init__()
        self.files = list(images.files)
        self.labels = list(images.labels)
        self.transform = native_transform(size)

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, index: int) -> Tuple[Any, Any]:
        return self.transform(_load(self.files[index])).numpy(), np.int64(self.labels[index])


def native_pixels(path: str, size: int) -> Any:
    """One image through the native pipeline without flip, as a CHW float32 array (pixel-agreement test)."""
    return native_transform(size, flip=False)(_load(path)).numpy()


class Trainer(base.Trainer):
    NATIVE_DECODER = "paddle.vision.image_load (backend pil: PIL.Image.open)"
    NATIVE_RESIZE = "paddle.vision.transforms.Resize (PIL bilinear, antialiased), shorter side, CenterCrop"
    PEAK_MEMORY_SOURCE = "paddle.device.cuda.max_memory_allocated"

    def __init__(self, cfg: WorkloadConfig, images: ImageList, reporter: Reporter) -> None:
        base.Trainer.__init__(self, cfg, images, reporter)
        self._memory_loader: Any = None
        self._mean: Any = None
        self._std: Any = None

    def versions(self) -> Dict[str, str]:
        return {
            "paddlepaddle": paddle.__version__,
            "cuda": str(paddle.version.cuda()),
            "cudnn": str(paddle.version.cudnn()),
            "numpy": np.__version__,
        }

    def knobs(self) -> Dict[str, object]:
        cfg = self.cfg
        return {
            "paddle.io.DataLoader.num_workers": self._workers(),
            "paddle.io.DataLoader.prefetch_factor": self._prefetch(),
            "paddle.base.core.set_num_threads": cfg.threads,
            "paddle.amp.auto_cast": self.amp_dtype,
        }

    def set_threads(self, threads: int) -> None:
        paddle.base.core.set_num_threads(threads)

    def gpu_missing(self) -> str:
        if paddle.device.is_compiled_with_cuda() and paddle.device.cuda.device_count() > 0:
            return ""
        return "this PaddlePaddle has no CUDA device (a CPU build, or no GPU)"

    def use_device(self, gpu: bool) -> None:
        self.device = paddle.set_device("gpu:0" if gpu else "cpu")
        if gpu and hasattr(paddle.base.core, "nvprof_nvtx_push"):
            self.nvtx = Nvtx(paddle.base.core.nvprof_nvtx_push, paddle.base.core.nvprof_nvtx_pop)

    def seed(self, seed: int) -> None:
        paddle.seed(seed)

    def build_training(self) -> ParamCount:
        cfg = self.cfg
        self.model = build_model(cfg.model, cfg.num_classes)
        self.loss_fn = paddle.nn.CrossEntropyLoss()
        self.optimizer = paddle.optimizer.Momentum(
            learning_rate=cfg.lr, momentum=cfg.momentum, parameters=self.model.parameters()
        )
        self.scaler = paddle.amp.GradScaler() if self.amp_dtype == "float16" else None  # bfloat16 needs no scaling
        workers = self._workers()
        self.loader = paddle.io.DataLoader(
            NativeImageDataset(self.images, cfg.image_size)
            if self._pipeline_kind() == "native"
            else ImageDataset(self.images, cfg.image_size),
            batch_size=cfg.batch,
            shuffle=True,
            drop_last=False,
            num_workers=workers,
            prefetch_factor=max(self._prefetch(), 1),
            use_shared_memory=workers > 0,
            # Paddle's default (False): with persistent workers paddle.io hangs in the second epoch's
            # second batch (seen with batch 1, 1 worker, Paddle 3.3.1 on CPU); new workers each epoch count
            # in step 0's data wait.
            persistent_workers=False,
        )
        return count_params(self.model)

    def train_epoch(self, epoch: int) -> EpochStats:
        self.model.train()
        batches, step = self.epoch_input(epoch, lambda: self.loader, self._train_step)
        return self.run_epoch(epoch, batches, step, _read)

    # --- --data memory / synthetic (tracer.worker.memory_data)
    MEMORY_LOADER = "paddle.io.TensorDataset + DataLoader(num_workers=0, shuffle)"

    def decode_uint8(self, path: str, size: int) -> Any:
        if self._pipeline_kind() != "native":
            return base.Trainer.decode_uint8(self, path, size)
        return np.asarray(native_resize(size)(_load(path)), dtype=np.uint8)

    def prepare_memory(self, held: MemorySet) -> None:
        """The set as CPU tensors sharing the decoded array's memory (DLPack; paddle.to_tensor would copy it)."""
        tensors = [paddle.utils.dlpack.from_dlpack(held.images), paddle.utils.dlpack.from_dlpack(held.labels)]
        self._memory_loader = paddle.io.DataLoader(
            paddle.io.TensorDataset(tensors),
            batch_size=self.cfg.batch,
            shuffle=True,
            drop_last=False,
            num_workers=0,
            use_shared_memory=False,
        )
        self._mean = paddle.to_tensor(MEAN, dtype="float32").reshape([1, 3, 1, 1])
        self._std = paddle.to_tensor(STD, dtype="float32").reshape([1, 3, 1, 1])

    def memory_batches(self, epoch: int) -> Any:
        return self._memory_loader

    def memory_to_device(self, batch: Any) -> Tuple[Any, Any]:
        """uint8 NHWC to the device, then ToTensor's and Normalize's arithmetic and a random flip there."""
        x, y = batch
        if self.cfg.device == "gpu":
            x, y = x.cuda(), y.cuda()
        x = x.transpose([0, 3, 1, 2]).astype("float32") / 255.0
        if self.flip_memory:
            flip = (paddle.rand([x.shape[0]]) < 0.5).astype("float32").reshape([-1, 1, 1, 1])
            x = flip * paddle.flip(x, axis=[3]) + (1.0 - flip) * x
        return (x - self._mean) / self._std, y

    def synthetic_batch(self, n: int) -> Tuple[Any, Any]:
        size = self.cfg.image_size
        return paddle.randn([n, 3, size, size]), paddle.randint(0, self.cfg.num_classes, [n], dtype="int64")

    def _train_step(self, batch: Any) -> Tuple[Any, int]:
        x, y = batch
        dtype = self.amp_dtype
        with paddle.amp.auto_cast(enable=dtype is not None, dtype=dtype or "float16"):
            logits = self.model(x)
            loss = self.loss_fn(logits, y)
        if self.scaler is not None:
            scaled = self.scaler.scale(loss)
            scaled.backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            loss.backward()
            self.optimizer.step()
        self.optimizer.clear_grad(set_to_zero=False)
        return (loss, logits.detach(), y), int(y.shape[0])

    def _peak_memory_bytes(self) -> Optional[float]:
        return float(paddle.device.cuda.max_memory_allocated())


def _read(outputs: Tuple[Any, Any, Any]) -> Tuple[float, float]:
    """Loss and correct predictions (argmax of the logits the step computed) to the host."""
    loss, logits, y = outputs
    correct = (logits.argmax(axis=1) == y.reshape([-1])).astype("float32").sum()
    return float(loss.item()), float(correct.item())
