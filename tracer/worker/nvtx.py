"""NVTX ranges around epochs and steps, so that nsys traces can be cut per epoch.

A framework that has its own NVTX binding (torch.cuda.nvtx) passes it in; others fall back to
libnvToolsExt through ctypes; without either, ranges are no-ops (CPU runs, no CUDA toolkit).
"""

import contextlib
import ctypes
import ctypes.util
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
    for name in ("libnvToolsExt.so.1", ctypes.util.find_library("nvToolsExt") or ""):
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
