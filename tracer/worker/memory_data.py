"""--data memory and --data synthetic, shared by every framework's worker (Python 3.6 syntax).

`memory`: before the first epoch (its own `decode` phase and events, never inside an epoch) the set is
decoded and resized once with the framework's own decoder (`decode_uint8`) into one uint8 array
(N, H, W, 3) in host memory. Each epoch then shuffles and batches it with the framework's own dataset
and batching (`memory_batches`: data wait), and the step copies the batch to the device, flips and
normalises it with the framework's own operators (`memory_to_device`: compute), as a user of that
framework feeds a set held in RAM.
`synthetic`: one random batch of the right shape made once on the device (`synthetic_batch`), handed to
the step every time: no decode, no copy; the framework's compute ceiling.

Same model, loss, optimiser, seed, step count and step timing in the three modes (`base.Trainer.run_epoch`).
"""

import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, Iterable, Iterator, List, NamedTuple, Optional, Tuple

from tracer.worker.schema import DATA_FILES, DATA_MEMORY, DATA_MODES, DATA_SYNTHETIC, Event

CHANNELS = 3
ALIGN_BYTES = 64  # Eigen's largest alignment (EIGEN_MAX_ALIGN_BYTES)
DECODE_PHASE = "decode"  # the phase name (Event.PHASE) of --data memory's decode, before the first epoch
SYNTHETIC_INPUT = "random batch made once on the device"


def set_bytes(images: int, size: int) -> int:
    """Bytes of `images` decoded images of size x size x 3 as uint8: what --data memory holds."""
    return images * size * size * CHANNELS


def step_sizes(images: int, batch: int) -> List[int]:
    """The batch size of every step of an epoch (the last one short), as the files pipelines batch."""
    full, rest = divmod(images, batch)
    return [batch] * full + ([rest] if rest else [])


class MemorySet(NamedTuple):
    images: Any  # numpy uint8 (N, H, W, 3)
    labels: Any  # numpy int64 (N,)
    seconds: float  # wall time of the decode

    @property
    def nbytes(self) -> int:
        return int(self.images.nbytes + self.labels.nbytes)


def decode_set(
    files: List[str], labels: List[int], size: int, decode: Callable[[str], Any], threads: int = 1
) -> MemorySet:
    """Every file through `decode` (one HWC uint8 array of size x size x 3 each) into one array that is
    allocated once and filled in place (no list of images, no stacked copy: resident memory grows by the
    set's size); in `threads` threads where the decoder releases the GIL (PIL, OpenCV, TF eager)."""
    import numpy as np

    start = time.perf_counter()
    out = aligned_empty((len(files), size, size, CHANNELS))

    def one(index: int) -> None:
        image = np.asarray(decode(files[index]))
        if image.shape != (size, size, CHANNELS):
            raise ValueError("decoded %s to shape %s, expected %s" % (files[index], image.shape, out.shape[1:]))
        out[index] = image

    if threads > 1 and len(files) > 1:
        with ThreadPoolExecutor(max_workers=threads) as pool:
            list(pool.map(one, range(len(files))))
    else:
        for index in range(len(files)):
            one(index)
    return MemorySet(out, np.asarray(labels, dtype=np.int64), time.perf_counter() - start)


def aligned_empty(shape: Tuple[int, ...], align: int = ALIGN_BYTES) -> Any:
    """An uninitialised uint8 array whose data starts on an `align`-byte boundary: TensorFlow takes such
    an array over by DLPack without a copy (it refuses one that is not aligned for Eigen)."""
    import numpy as np

    n = 1
    for side in shape:
        n *= side
    raw = np.empty(n + align, dtype=np.uint8)
    offset = (-raw.ctypes.data) % align
    return raw[offset : offset + n].reshape(shape)


def shared_decode_uint8(path: str, size: int) -> Any:
    """The shared PIL loader's pixels before normalisation (workload.load_normalised without its last
    steps): the decoder of SINGA and JAX, and of every framework under --pipeline shared."""
    import numpy as np
    from PIL import Image

    from tracer.worker.workload import resize_and_crop

    with Image.open(path) as im:
        return np.asarray(resize_and_crop(im, size), dtype=np.uint8)


class DataModes(object):
    """The three data modes as hooks of `base.Trainer`. A framework module overrides `decode_uint8`
    (its native decoder), `prepare_memory`, `memory_batches`, `memory_to_device` and `synthetic_batch`,
    and routes its epoch through `epoch_input`; everything else (the decode phase, its events, the batch
    cache) is here. `base.Trainer.__init__` sets the attributes declared below."""

    MEMORY_LOADER = ""  # what batches the set in memory, for run.json ("" : the framework has no memory mode)
    DECODE_THREADS = 0  # threads decoding the set; 0: the loader budget; 1 where the decoder is not thread-safe
    flip_memory = True  # random horizontal flips of --data memory (off in the first-batch agreement test)

    cfg: Any  # the run's WorkloadConfig
    images: Any  # its ImageList
    reporter: Any
    nvtx: Any
    memory_set: Optional[MemorySet]  # --data memory: the decoded set, once prepare_data made it
    synthetic_cache: Dict[int, Any]  # --data synthetic: the device batch of each step size

    def data_mode(self) -> str:
        mode = self.cfg.data or DATA_FILES
        if mode not in DATA_MODES:
            raise ValueError("--data %s: give one of %s" % (mode, ", ".join(DATA_MODES)))
        return str(mode)

    def data_knobs(self) -> Dict[str, object]:
        """run.json knobs of the data mode; memory and synthetic use no loader workers."""
        mode = self.data_mode()
        if mode == DATA_FILES:
            return {"data": mode}
        knobs = {"data": mode, "loader_workers": 0, "prefetch": 0}  # type: Dict[str, object]
        if mode == DATA_MEMORY:
            knobs["memory_loader"] = self.MEMORY_LOADER
        else:
            knobs.update(decoder="none", resize="none", synthetic_input=SYNTHETIC_INPUT)
        return knobs

    def prepare_data(self) -> None:
        """After build, before the first epoch: memory decodes the set (the `decode` phase), synthetic
        makes its batch (or its two, when the last step is short) on the device; files does nothing."""
        mode = self.data_mode()
        cfg = self.cfg
        images = self.images
        if mode == DATA_MEMORY:
            reporter = self.reporter
            reporter.emit(Event.PHASE, name=DECODE_PHASE)
            reporter.emit(Event.DECODE, state="start", images=len(images))
            threads = self.DECODE_THREADS or max(1, _int_or(self._loader_workers(), os.cpu_count() or 1))  # type: ignore[attr-defined]
            size = cfg.image_size
            with self.nvtx.range(DECODE_PHASE):
                held = decode_set(
                    list(images.files), list(images.labels), size, lambda p: self.decode_uint8(p, size), threads
                )
            self.memory_set = held
            self._release_files_input()
            self.prepare_memory(held)  # the framework's dataset and loader over the set, not in the first epoch
            reporter.emit(
                Event.DECODE,
                state="end",
                images=len(images),
                bytes=held.nbytes,
                seconds=held.seconds,
                threads=threads,
                shape=list(held.images.shape),
            )
        elif mode == DATA_SYNTHETIC:
            self._release_files_input()
            for n in sorted(set(step_sizes(len(images), cfg.batch))):
                self.synthetic_cache[n] = self.synthetic_batch(n)

    def epoch_input(
        self, epoch: int, files_batches: Callable[[], Iterable[Any]], files_step: Callable[[Any], Tuple[Any, int]]
    ) -> Tuple[Iterable[Any], Callable[[Any], Tuple[Any, int]]]:
        """(batches, step) for `run_epoch`: files as the framework built them; memory batches from RAM
        with the copy, flip and normalisation inside the step; synthetic the same device batch each step."""
        mode = self.data_mode()
        if mode == DATA_MEMORY:
            to_device = self.memory_to_device

            def memory_step(batch: Any) -> Tuple[Any, int]:
                return files_step(to_device(batch))

            return self.memory_batches(epoch), memory_step
        if mode == DATA_SYNTHETIC:
            return self._synthetic_batches(), self.synthetic_step(files_step)
        return files_batches(), files_step

    def _synthetic_batches(self) -> Iterator[Any]:
        for n in step_sizes(len(self.images), self.cfg.batch):
            yield self.synthetic_cache[n]

    def _release_files_input(self) -> None:
        """The files pipeline is not used in this mode: drop it (a gluon DataLoader's worker pool with it)."""
        for name in ("loader", "dataset"):
            if getattr(self, name, None) is not None:
                setattr(self, name, None)

    # --- per framework
    def decode_uint8(self, path: str, size: int) -> Any:
        """One image decoded and resized (no flip, no normalisation) as HWC uint8: the shared PIL loader
        unless the framework decodes natively (its files pipeline's decoder, so the pixels are the same)."""
        return shared_decode_uint8(path, size)

    def prepare_memory(self, held: MemorySet) -> None:
        """Builds the framework's dataset and loader over the decoded set (once, before the first epoch)."""
        raise NotImplementedError("--data memory is not implemented for this framework")

    def memory_batches(self, epoch: int) -> Iterable[Any]:
        """This epoch's batches of the set, shuffled and batched by what `prepare_memory` built."""
        raise NotImplementedError("--data memory is not implemented for this framework")

    def memory_to_device(self, batch: Any) -> Any:
        """One batch from memory_batches -> what the files step takes (on the device, flipped, normalised)."""
        raise NotImplementedError("--data memory is not implemented for this framework")

    def synthetic_batch(self, n: int) -> Any:
        """`n` random images and labels made on the device, in the form the files step takes."""
        raise NotImplementedError("--data synthetic is not implemented for this framework")

    def synthetic_step(self, files_step: Callable[[Any], Tuple[Any, int]]) -> Callable[[Any], Tuple[Any, int]]:
        return files_step


def _int_or(value: Any, default: int) -> int:
    """The loader budget as a decode thread count (tf.data's autotune: `default`)."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return default
