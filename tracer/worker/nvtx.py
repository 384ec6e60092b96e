"""NVTX ranges around epochs and steps, so that nsys traces can be cut per epoch.

A framework that has its own NVTX binding (torch.cuda.nvtx) passes it in; others fall back to
libnvToolsExt, or to the `libnvtx3interop` of NVIDIA's nvidia-nvtx wheel in the interpreter's
site-packages (PyTorch's CUDA wheels bring it, CPU runs too), through ctypes; without any, ranges are
no-ops. Without nsys attached an NVTX call does nothing; under nsys it is what `--trace-window`'s
capture range starts on (tracer/worker/window.py).
"""

import contextlib
import ctypes
import ctypes.util
import glob
import os
import sys
from typing import Callable, Iterator, Optional


class Nvtx:
    def __init__(self, push: Optional[Callable[[str], object]] = None, pop: Optional[Callable[[], object]] = None):
        if push is None or pop is None:
            push, pop = _ctypes_nvtx()
        self._push = push
        self._pop = pop

    @property
    def enabled(self) -> bool:
        return self._push is not None

    def push(self, name: str) -> None:
        if self._push is not None:
            self._push(name)

    def pop(self) -> None:
        if self._pop is not None:
            self._pop()

    @contextlib.contextmanager
    def range(self, name: str) -> Iterator[None]:
        if self._push is None:
            yield
            return
        self._push(name)
        try:
            yield
        finally:
            self._pop()  # type: ignore[misc]


def _ctypes_nvtx():  # type: ignore[no-untyped-def]
    for name in ("libnvToolsExt.so.1", ctypes.util.find_library("nvToolsExt") or "") + _wheel_libraries():
        if not name:
            continue
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        lib.nvtxRangePushA.argtypes = [ctypes.c_char_p]
        return _encoding(lib.nvtxRangePushA), lib.nvtxRangePop
    return None, None


def _encoding(push):  # type: ignore[no-untyped-def]
    return lambda name: push(name.encode())


WHEEL_LIBRARIES = ("nvidia/*/lib/libnvtx3interop.so.1", "nvidia/nvtx/lib/libnvToolsExt.so.1")


def _wheel_libraries():  # type: ignore[no-untyped-def]
    """NVTX libraries of NVIDIA's wheels on this interpreter's path (nvidia-nvtx and its CUDA 13 layout)."""
    found = []
    for entry in sys.path:
        if os.path.isdir(os.path.join(entry, "nvidia")):
            for pattern in WHEEL_LIBRARIES:
                found += sorted(glob.glob(os.path.join(entry, pattern)))
    return tuple(found)
