"""Apache SINGA 3.x/4.x (`singa.device`, `tensor`, `opt.SGD`, `model.Model`, `layer`), written against
SINGA's documented Python API and its `examples/cnn` (model/alexnet.py, model/resnet.py, train_cnn.py).

Runs on PyPI's only build, `singa==3.0.0.dev1` (CPython 3.6, CPU), whose wheel defects
`singa_patches` mends on import of the models (each only where found); `tracer env create singa` makes that
environment.

SINGA has no model zoo package: the four models are defined with `singa.layer` in
tracer/worker/models/singa.py. It has no input-pipeline library either: its examples batch NumPy arrays
in the training loop. So that
`--workers N` means N parallel decoders here as in every other framework, the worker decodes in a pool of
N processes (`tracer.worker.pool_loader`, Python's multiprocessing); `--workers 0` is the examples' way,
decoding in the training loop.
"""

import collections
from typing import Any, Deque, Dict, Iterator, List, Tuple

import numpy as np
from singa import device, opt, tensor

from tracer.worker import base
from tracer.worker.base import EpochStats, ParamCount
from tracer.worker.memory_data import MemorySet
from tracer.worker.models.singa import MODELS, WHEEL_MENDS, compile_model, singa_version
from tracer.worker.pool_loader import START_METHOD, PoolLoader
from tracer.worker.reporting import Reporter
from tracer.worker.workload import ImageList, WorkloadConfig, normalise


class Trainer(base.Trainer):
    AMP_DTYPES: Dict[str, str] = {}  # refused (check_knobs)

    def __init__(self, cfg: WorkloadConfig, images: ImageList, reporter: Reporter) -> None:
        base.Trainer.__init__(self, cfg, images, reporter)
        self.rng = np.random.RandomState(cfg.seed)  # every random number of the input: order, flips
        self._labels: Deque[Any] = collections.deque()  # the labels of the loader jobs handed out, in order

    def versions(self) -> Dict[str, str]:
        return {"singa": singa_version(), "numpy": np.__version__}

    def knobs(self) -> Dict[str, object]:
        workers = self._workers()
        return {
            "input pipeline": (
                "multiprocessing.Pool (%s) of decode processes building uint8 batches, normalised with NumPy in"
                " the training loop" % START_METHOD
                if workers
                else "NumPy batches decoded in the training loop (SINGA's examples/cnn)"
            ),
            "multiprocessing.Pool.processes": workers,
            "batches in flight": workers * self._prefetch(),
            "use_graph": False,
            "wheel defects mended (singa_patches)": ", ".join(WHEEL_MENDS) or "none",
        }

    def check_knobs(self) -> None:
        cfg = self.cfg
        rejected = (
            ("--threads", cfg.threads, "SINGA exposes no intra-op thread setting in its Python API"),
            ("--gpu-thread-mode", cfg.gpu_thread_mode, "it is a TensorFlow setting"),
            ("--amp", cfg.amp or None, "its float16 mode converts the whole model"),
        )
        for flag, value, why in rejected:
            if value is not None:
                raise ValueError("%s is not supported with SINGA: %s" % (flag, why))

    def set_threads(self, threads: int) -> None:
        raise ValueError("--threads is not supported with SINGA")  # refused in check_knobs

    def gpu_missing(self) -> str:
        try:
            return "" if device.get_num_gpus() > 0 else "singa.device.get_num_gpus() is 0"
        except AttributeError as e:  # a CPU build's wrapper has no CUDA platform
            return "this SINGA is a CPU build (%s)" % e

    def use_device(self, gpu: bool) -> None:
        self.device = device.create_cuda_gpu_on(0) if gpu else device.get_default_device()

    def seed(self, seed: int) -> None:
        self.device.SetRandSeed(seed)

    def build_training(self) -> ParamCount:
        cfg = self.cfg
        self.net = MODELS[cfg.model](cfg.num_classes)
        self.net.set_optimizer(opt.SGD(lr=cfg.lr, momentum=cfg.momentum))
        self.loader = PoolLoader(self._workers(), self._prefetch())
        return compile_model(cfg.model, self.net, cfg.batch, cfg.image_size, self.device)

    def _jobs(self) -> Iterator[Tuple[List[str], int, List[bool]]]:
        """The epoch's batches as loader jobs: files in a fresh permutation, a flip drawn per image (the
        main process draws every random number, so the order and flips do not depend on --workers)."""
        cfg = self.cfg
        order = self.rng.permutation(len(self.images))
        for start in range(0, len(order), cfg.batch):
            idx = order[start : start + cfg.batch]
            flips = [bool(self.rng.rand() < 0.5) for _ in idx]
            self._labels.append(np.asarray([self.images.labels[i] for i in idx], dtype=np.int32))
            yield [self.images.files[i] for i in idx], cfg.image_size, flips

    def _batches(self, epoch: int) -> Any:
        self._labels.clear()
        for pixels in self.loader.batches(self._jobs()):
            x = np.ascontiguousarray(normalise(pixels).transpose(0, 3, 1, 2))  # NHWC uint8 -> NCHW float32
            yield x, self._labels.popleft()
        if epoch == self.cfg.epochs:
            self.loader.close()

    def train_epoch(self, epoch: int) -> EpochStats:
        self.net.train()
        batches, step = self.epoch_input(epoch, lambda: self._batches(epoch), self._train_step)
        return self.run_epoch(epoch, batches, step, _read)

    # --- --data memory / synthetic (tracer.worker.memory_data)
    MEMORY_LOADER = "NumPy batches indexed from the in-memory array, copied into SINGA tensors (examples/cnn)"

    def prepare_memory(self, held: MemorySet) -> None:
        """Nothing to build: SINGA's examples index NumPy batches from the array."""

    def memory_batches(self, epoch: int) -> Any:
        """The files pipeline's order (the same generator's permutation), indexed from RAM."""
        held = self.memory_set
        assert held is not None
        order = self.rng.permutation(len(held.labels))
        for start in range(0, len(order), self.cfg.batch):
            idx = order[start : start + self.cfg.batch]
            yield held.images[idx], held.labels[idx].astype(np.int32)

    def memory_to_device(self, batch: Any) -> Tuple[Any, Any]:
        """Flip and normalise with NumPy, as SINGA's examples do; the step copies the batch into tensors."""
        x, y = batch
        if self.flip_memory:
            x = x.copy()  # the held set stays as decoded
            flip = self.rng.rand(len(y)) < 0.5
            x[flip] = x[flip, :, ::-1, :]
        return np.ascontiguousarray(normalise(x).transpose(0, 3, 1, 2)), y

    def synthetic_batch(self, n: int) -> Tuple[Any, Any, Any]:
        size = self.cfg.image_size
        tx = tensor.Tensor((n, 3, size, size), self.device, tensor.float32)
        tx.gaussian(0.0, 1.0)
        y = self.rng.randint(0, self.cfg.num_classes, n).astype(np.int32)
        ty = tensor.from_numpy(y)
        ty.to_device(self.device)
        return tx, ty, y

    def synthetic_step(self, files_step: Any) -> Any:
        def step(batch: Tuple[Any, Any, Any]) -> Tuple[Any, int]:
            tx, ty, y = batch
            logits, loss = self.net(tx, ty)
            return (loss, logits, y), len(y)

        return step

    def _train_step(self, batch: Any) -> Tuple[Any, int]:
        x, y = batch
        tx = tensor.from_numpy(x)
        ty = tensor.from_numpy(y)
        tx.to_device(self.device)
        ty.to_device(self.device)
        logits, loss = self.net(tx, ty)
        return (loss, logits, y), len(y)


def _read(outputs: Tuple[Any, Any, Any]) -> Tuple[float, float]:
    """The loss and the logits to the host (the step's host-device synchronisation); correct
    predictions are counted there against the labels the batch came with."""
    loss, logits, y = outputs
    predicted = tensor.to_numpy(logits).argmax(axis=1)
    return float(tensor.to_numpy(loss).reshape(-1)[0]), float((predicted == y).sum())
