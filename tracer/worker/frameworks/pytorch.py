"""PyTorch: torchvision models (tracer/worker/models/pytorch.py) and transforms,
torch.utils.data.DataLoader as the input pipeline."""

import os
import random
from typing import Any, Dict, Optional, Tuple

import numpy as np
import torch
import torchvision
from PIL import Image
from torch.utils.data import DataLoader, Dataset, TensorDataset
from torchvision import transforms

from tracer.worker import base
from tracer.worker.base import EpochStats, ParamCount
from tracer.worker.clock import time_ns as wall_ns
from tracer.worker.memory_data import MemorySet
from tracer.worker.models.pytorch import build_model, count_params
from tracer.worker.nvtx import Nvtx
from tracer.worker.ranks import RankEnv, slow_ms, slowed
from tracer.worker.reporting import Reporter
from tracer.worker.schema import DATA_FILES
from tracer.worker.workload import MEAN, STD, ImageList, WorkloadConfig, load_normalised


class ImageFolderList(Dataset):  # type: ignore[type-arg]
    def __init__(self, images: ImageList, transform: Any) -> None:
        self.images = images
        self.transform = transform

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, index: int) -> Tuple[Any, int]:
        with Image.open(self.images.files[index]) as im:
            return self.transform(im.convert("RGB")), self.images.labels[index]


class SharedPipelineList(Dataset):  # type: ignore[type-arg]
    """--pipeline shared: the PIL+NumPy loader every framework can share (identical pixels)."""

    def __init__(self, images: ImageList, size: int) -> None:
        self.images = images
        self.size = size

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, index: int) -> Tuple[Any, int]:
        flip = random.random() < 0.5
        return torch.from_numpy(load_normalised(self.images.files[index], self.size, flip)), self.images.labels[index]


def native_transform(size: int, flip: bool = True) -> Any:
    """torchvision's transforms, as PyTorch users write them; `flip=False` for the pixel-agreement test."""
    steps = [transforms.Resize(size), transforms.CenterCrop(size)]
    if flip:
        steps.append(transforms.RandomHorizontalFlip())
    return transforms.Compose(steps + [transforms.ToTensor(), transforms.Normalize(MEAN, STD)])


def native_resize(size: int) -> Any:
    """The native pipeline's decode-side steps (no flip, no tensor): what --data memory keeps as uint8."""
    return transforms.Compose([transforms.Resize(size), transforms.CenterCrop(size)])


def native_pixels(path: str, size: int) -> Any:
    """One image through the native pipeline without flip, as a CHW float32 array (pixel-agreement test)."""
    with Image.open(path) as im:
        return native_transform(size, flip=False)(im.convert("RGB")).numpy()


def _seed_worker(worker_id: int) -> None:
    seed = torch.initial_seed() % 2**32
    np.random.seed(seed)
    random.seed(seed)


class Trainer(base.Trainer):
    NATIVE_DECODER = "PIL.Image.open (libjpeg)"
    NATIVE_RESIZE = "torchvision Resize (PIL bilinear, antialiased), shorter side, CenterCrop"
    PEAK_MEMORY_SOURCE = "torch.cuda.max_memory_allocated"

    def versions(self) -> Dict[str, str]:
        return {
            "torch": torch.__version__,
            "torchvision": torchvision.__version__,
            "cuda": str(torch.version.cuda),
            "cudnn": str(torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None),
            "numpy": np.__version__,
        }

    def __init__(self, cfg: WorkloadConfig, images: ImageList, reporter: Reporter) -> None:
        base.Trainer.__init__(self, cfg, images, reporter)
        self.ranks = RankEnv.from_environ()
        self.sampler: Any = None  # a --nproc rank's DistributedSampler
        self._at = (0, 0)  # (epoch, step) of the step being dispatched, for the all-reduce hook's rows
        self._memory_loader: Any = None
        self._mean: Any = None
        self._std: Any = None

    def knobs(self) -> Dict[str, object]:
        return {
            "DataLoader.num_workers": self._workers(),
            "DataLoader.prefetch_factor": self._prefetch() if self._workers() > 0 else None,
            "torch.set_num_threads": torch.get_num_threads(),
            "autocast": self.amp_dtype,
        }

    def default_threads(self) -> Optional[int]:
        """The ranks of a --nproc run share the cores (torchrun sets OMP_NUM_THREADS=1 alike)."""
        if self.ranks.world_size > 1:
            return max(1, (os.cpu_count() or 1) // self.ranks.world_size)
        return None

    def set_threads(self, threads: int) -> None:
        torch.set_num_threads(threads)

    def gpu_missing(self) -> str:
        return "" if torch.cuda.is_available() else "torch.cuda.is_available() is False"

    def use_device(self, gpu: bool) -> None:
        if not gpu:
            self.device = torch.device("cpu")
            return
        self.device = torch.device("cuda")
        if self.ranks.world_size > 1:  # one GPU per rank when there are enough
            self.device = torch.device("cuda", self.ranks.local_rank % torch.cuda.device_count())
            torch.cuda.set_device(self.device)
        torch.backends.cudnn.benchmark = True
        self.nvtx = Nvtx(torch.cuda.nvtx.range_push, torch.cuda.nvtx.range_pop)

    def seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def build_training(self) -> ParamCount:
        cfg = self.cfg
        # autocast takes a dtype even when off: the device's, so that a CPU never sees float16
        self.autocast_dtype = getattr(torch, self.AMP_DTYPES[cfg.device])
        self.model = build_model(cfg.model, cfg.num_classes).to(self.device)
        self.loss_fn = torch.nn.CrossEntropyLoss()
        params = count_params(self.model)
        if self.ranks.world_size > 1:
            self._data_parallel()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=cfg.lr, momentum=cfg.momentum)
        if self._pipeline_kind() == "native":
            dataset = ImageFolderList(self.images, native_transform(cfg.image_size))  # type: Any
        else:
            dataset = SharedPipelineList(self.images, cfg.image_size)
        generator = torch.Generator()
        generator.manual_seed(cfg.seed)
        workers = self._workers()
        if self.ranks.world_size > 1:
            from torch.utils.data.distributed import DistributedSampler

            self.sampler = DistributedSampler(
                dataset, num_replicas=self.ranks.world_size, rank=self.ranks.rank, shuffle=True, seed=cfg.seed
            )
        self.loader = DataLoader(
            dataset,
            batch_size=cfg.batch,
            shuffle=self.sampler is None,
            sampler=self.sampler,
            num_workers=workers,
            prefetch_factor=self._prefetch() if workers > 0 else None,
            persistent_workers=workers > 0,
            pin_memory=cfg.device == "gpu",
            worker_init_fn=_seed_worker,
            generator=generator,
        )
        return params

    def finish(self) -> None:
        """Every rank meets the others, then leaves the process group: a rank that exits with the group
        still up can be aborted when its peer's connection closes first (seen as SIGABRT after rank 0's
        last epoch, CI of 28 Nov)."""
        if self.ranks.world_size > 1:
            import torch.distributed as dist

            if dist.is_initialized():
                dist.barrier()
                dist.destroy_process_group()

    def _data_parallel(self) -> None:
        """DistributedDataParallel over gloo (CPU) or NCCL (GPU), with a communication hook that records
        when this rank arrived at each gradient bucket's all-reduce and when it completed here."""
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel

        if self.cfg.data != DATA_FILES:
            raise ValueError("--nproc trains from files only (each rank reads its shard of the images)")
        backend = "nccl" if self.device.type == "cuda" else "gloo"
        dist.init_process_group(backend, rank=self.ranks.rank, world_size=self.ranks.world_size)
        ids = [self.device.index] if self.device.type == "cuda" else None
        # broadcast_buffers=False: the gradient all-reduces (recorded below) are then the step's only collectives;
        # with it, rank 0 would wait in a buffer broadcast at every forward that no hook sees
        self.model = DistributedDataParallel(self.model, device_ids=ids, broadcast_buffers=False)
        world = self.ranks.world_size

        def timed_allreduce(state, bucket):  # type: ignore[no-untyped-def]  # torch checks the annotations
            arrive = wall_ns()
            epoch, step = self._at
            log = self.collective_log
            future = dist.all_reduce(bucket.buffer().div_(world), async_op=True).get_future()

            def done(f: Any) -> Any:
                if log is not None:
                    log.add(epoch, step, "allreduce", arrive, wall_ns())
                return f.value()[0]

            return future.then(done)

        self.model.register_comm_hook(None, timed_allreduce)

    def train_epoch(self, epoch: int) -> EpochStats:
        self.model.train()
        if self.sampler is not None:
            self.sampler.set_epoch(epoch)
        self._at = (epoch, 0)
        ms = slow_ms(self.cfg.slow_loader, self.ranks.rank)
        batches, step = self.epoch_input(epoch, lambda: slowed(self.loader, ms), self._train_step)
        stats = self.run_epoch(epoch, batches, step, _read)
        if self.collective_log is not None:
            self.collective_log.flush()
        return stats

    # --- --data memory / synthetic (tracer.worker.memory_data)
    MEMORY_LOADER = "torch.utils.data.TensorDataset + DataLoader(num_workers=0, shuffle, seeded generator)"

    def decode_uint8(self, path: str, size: int) -> Any:
        if self._pipeline_kind() != "native":
            return base.Trainer.decode_uint8(self, path, size)
        with Image.open(path) as im:
            return np.asarray(native_resize(size)(im.convert("RGB")), dtype=np.uint8)

    def prepare_memory(self, held: MemorySet) -> None:
        """The uint8 set as tensors (no copy), batched by a worker-less DataLoader that shuffles with the
        files loader's seeded generator (so the order is the files pipeline's)."""
        generator = torch.Generator()
        generator.manual_seed(self.cfg.seed)
        self._memory_loader = DataLoader(
            TensorDataset(torch.from_numpy(held.images), torch.from_numpy(held.labels)),
            batch_size=self.cfg.batch,
            shuffle=True,
            num_workers=0,
            pin_memory=self.device.type == "cuda",
            generator=generator,
        )
        self._mean = torch.tensor(MEAN, device=self.device).view(1, 3, 1, 1)
        self._std = torch.tensor(STD, device=self.device).view(1, 3, 1, 1)

    def memory_batches(self, epoch: int) -> Any:
        return self._memory_loader

    def memory_to_device(self, batch: Any) -> Tuple[Any, Any]:
        """uint8 NHWC copied to the device, then ToTensor's and Normalize's arithmetic and a random flip there."""
        x, y = batch
        x = x.to(self.device, non_blocking=True).permute(0, 3, 1, 2).contiguous().float().div(255)
        if self.flip_memory:
            flip = torch.rand(x.shape[0], device=self.device) < 0.5
            x = torch.where(flip.view(-1, 1, 1, 1), x.flip(3), x)
        return x.sub(self._mean).div(self._std), y.to(self.device, non_blocking=True)

    def synthetic_batch(self, n: int) -> Tuple[Any, Any]:
        size = self.cfg.image_size
        x = torch.randn(n, 3, size, size, device=self.device)
        return x, torch.randint(0, self.cfg.num_classes, (n,), device=self.device)

    def _train_step(self, batch: Any) -> Tuple[Any, int]:
        x, y = batch
        x = x.to(self.device, non_blocking=True)
        y = y.to(self.device, non_blocking=True)
        self.optimizer.zero_grad(set_to_none=True)
        with torch.autocast(self.device.type, dtype=self.autocast_dtype, enabled=self.cfg.amp):
            logits = self.model(x)
            loss = self.loss_fn(logits, y)
        loss.backward()
        self.optimizer.step()
        self._at = (self._at[0], self._at[1] + 1)
        return (loss.detach(), logits.detach(), y), int(y.shape[0])

    def _peak_memory_bytes(self) -> Optional[float]:
        return float(torch.cuda.max_memory_allocated(self.device))

    def _finish_epoch(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize()


def _read(outputs: Tuple[Any, Any, Any]) -> Tuple[float, float]:
    """Loss and correct predictions in one copy to the host (argmax of the logits the step computed)."""
    loss, logits, y = outputs
    correct = (logits.argmax(dim=1) == y).sum()
    values = torch.stack([loss.float(), correct.float()]).tolist()
    return float(values[0]), float(values[1])
