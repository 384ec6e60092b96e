"""Mends, at run time, the three defects of PyPI's only SINGA build (`singa==3.0.0.dev1`, cp36 wheel).

That wheel's SWIG module (`singa.singa_wrap`, SWIG 3.0.10) was built without `-py3` and without
NumPy's `numpy.i` typemaps, so SINGA's own Python layer cannot run on it:
1. NumPy copies: `Tensor.CopyFloatDataFromHostPtr(array)` / `GetFloatValue(n)` (and the Int ones), which
   `tensor.from_numpy`, `to_numpy` and the softmax loss call with the typemapped signatures, demand a raw
   SWIG `float *`/`int *` plus a count: `TypeError: ... missing 1 required positional argument: 'num'`.
2. `/=` on a `singa_wrap.Tensor`: only Python 2's `__idiv__` is defined, so Python 3 has no in-place
   division (`SoftMaxCrossEntropy.forward` fails with "unsupported operand type(s) for /=").
3. BatchNorm training on CPU: `CpuBatchNormForwardTraining` / `CpuBatchNormBackwardx` return a
   `std::vector<singa::Tensor>` that has no SWIG wrapper: an opaque pointer comes back
   ("'SwigPyObject' object is not iterable").
Each mend gives the methods the behaviour the Python layer expects, reusing the wheel's own compiled
code (through ctypes over SWIG's runtime structures: nothing rebuilt). `apply()` probes each defect
first and mends only those present, so a fixed SINGA build is left alone. Nothing here is needed by
any other framework; the worker for SINGA calls `apply()` on import.
"""

import contextlib
import ctypes
import sys
from typing import Any, Callable, Dict, Iterator, List

import numpy as np
from singa import singa_wrap, tensor

NUMPY_COPIES = "numpy copies"
ITRUEDIV = "in-place division"
BATCHNORM_CPU_TRAINING = "batchnorm cpu training"


class _SwigPyObject(ctypes.Structure):
    """SWIG's SwigPyObject: the `this` of every wrapped object (PyObject_HEAD, then SWIG's fields)."""

    _fields_ = [
        ("ob_refcnt", ctypes.c_ssize_t),
        ("ob_type", ctypes.c_void_p),
        ("ptr", ctypes.c_void_p),
        ("ty", ctypes.c_void_p),
        ("own", ctypes.c_int),
        ("next", ctypes.c_void_p),
    ]


class _SwigTypeInfo(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("str", ctypes.c_char_p),
        ("dcast", ctypes.c_void_p),
        ("cast", ctypes.c_void_p),
        ("clientdata", ctypes.c_void_p),
        ("owndata", ctypes.c_int),
    ]


class _SwigModuleInfo(ctypes.Structure):
    _fields_ = [("types", ctypes.POINTER(ctypes.POINTER(_SwigTypeInfo))), ("size", ctypes.c_size_t)]


_types_by_name: Dict[str, int] = {}  # SWIG type name ("_p_float") -> its swig_type_info address


def _swig_type(name: str) -> int:
    """The address of SWIG's type record `name`, from the type table SWIG publishes in a capsule."""
    if not _types_by_name:
        get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
        get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
        get_name = ctypes.pythonapi.PyCapsule_GetName
        get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
        for module_name, module in list(sys.modules.items()):
            capsule = getattr(module, "type_pointer_capsule", None) if module_name.startswith("swig_runtime") else None
            if capsule is None:
                continue
            address = get_pointer(capsule, get_name(capsule))
            info = ctypes.cast(address, ctypes.POINTER(_SwigModuleInfo)).contents
            for i in range(info.size):
                record = info.types[i]
                _types_by_name[record.contents.name.decode()] = ctypes.cast(record, ctypes.c_void_p).value or 0
    return _types_by_name[name]


@contextlib.contextmanager
def _swig_pointer(array: Any, type_name: str) -> Iterator[Any]:
    """A SWIG pointer of type `type_name` to `array`'s buffer, for the duration of the block: a wrapped
    object's SwigPyObject re-aimed at the buffer, then pointed back so that its own object is freed."""
    holder = singa_wrap.VecInt(1)
    this = holder.this
    raw = _SwigPyObject.from_address(id(this))
    saved = raw.ptr, raw.ty, raw.own
    raw.ptr, raw.ty, raw.own = array.ctypes.data, _swig_type(type_name), 0
    try:
        yield this
    finally:
        raw.ptr, raw.ty, raw.own = saved


def _copy_from_host(original: Callable[..., Any], dtype: Any, type_name: str) -> Callable[..., Any]:
    def copy(self: Any, src: Any, offset: int = 0) -> Any:
        """numpy.i's `(IN_ARRAY1, DIM1)` signature: copy a NumPy array into the tensor."""
        array = np.ascontiguousarray(src, dtype=dtype).reshape(-1)
        with _swig_pointer(array, type_name) as pointer:
            return original(self, pointer, array.size, offset)

    return copy


def _get_value(original: Callable[..., Any], dtype: Any, type_name: str) -> Callable[..., Any]:
    def get(self: Any, num: int) -> Any:
        """numpy.i's `(ARGOUT_ARRAY1, DIM1)` signature: the tensor's first `num` values as a NumPy array."""
        out = np.empty(int(num), dtype=dtype)
        with _swig_pointer(out, type_name) as pointer:
            original(self, pointer, out.size)
        return out

    return get


_NUMPY_METHODS = {
    "CopyFloatDataFromHostPtr": (_copy_from_host, np.float32, "_p_float"),
    "CopyIntDataFromHostPtr": (_copy_from_host, np.int32, "_p_int"),
    "GetFloatValue": (_get_value, np.float32, "_p_float"),
    "GetIntValue": (_get_value, np.int32, "_p_int"),
}


def numpy_copy_defects() -> List[str]:
    """The NumPy-copy methods that refuse their typemapped signature (all four on the PyPI wheel)."""
    found: List[str] = []
    for name, (_, dtype, _) in sorted(_NUMPY_METHODS.items()):
        probe = tensor.Tensor((1,), dtype=tensor.float32 if dtype == np.float32 else tensor.int32)
        probe.set_value(0)  # SINGA aborts the process on reading a tensor never written
        try:
            if name.startswith("Copy"):
                getattr(probe.data, name)(np.zeros(1, dtype=dtype))
            else:
                getattr(probe.data, name)(1)
        except TypeError:
            found.append(name)
    return found


def mend_numpy_copies(names: List[str]) -> None:
    for name in names:
        make, dtype, type_name = _NUMPY_METHODS[name]
        setattr(singa_wrap.Tensor, name, make(getattr(singa_wrap.Tensor, name), dtype, type_name))


def itruediv_defect() -> bool:
    return not hasattr(singa_wrap.Tensor, "__itruediv__")


def mend_itruediv() -> None:
    """Python 3's `/=` is `__itruediv__`; the wheel's `__idiv__` is the same C++ operator/=."""
    singa_wrap.Tensor.__itruediv__ = singa_wrap.Tensor.__idiv__


_BATCHNORM_FUNCTIONS = ("CpuBatchNormForwardTraining", "CpuBatchNormBackwardx")
_BATCHNORM_OUTPUTS = 3  # both return three tensors: (y, mean, var) and (dx, dscale, dbias)


def _unpack_tensor_vector(result: Any) -> List[Any]:
    """The three singa::Tensor of an unwrapped std::vector<Tensor>, as Python-owned tensors: each element's
    bytes are swapped with those of a fresh default Tensor (libstdc++'s members are relocatable), so the
    data's shared pointers move to Python; the vector, now of empty tensors, is left (a few hundred bytes)."""
    raw = _SwigPyObject.from_address(id(result))
    raw.own = 0  # SWIG has no destructor for it: without this it warns of a leak on every call
    start, finish = (ctypes.c_size_t * 2).from_address(raw.ptr or 0)  # the vector's begin and end
    size = (finish - start) // _BATCHNORM_OUTPUTS
    if size <= 0 or size * _BATCHNORM_OUTPUTS != finish - start:
        raise RuntimeError("unexpected std::vector<singa::Tensor> layout: %r..%r" % (start, finish))
    scratch = ctypes.create_string_buffer(size)
    out: List[Any] = []
    for i in range(_BATCHNORM_OUTPUTS):
        fresh = singa_wrap.Tensor()
        mine = _SwigPyObject.from_address(id(fresh.this)).ptr
        theirs = start + i * size
        ctypes.memmove(scratch, mine, size)
        ctypes.memmove(mine, theirs, size)
        ctypes.memmove(theirs, scratch, size)
        out.append(fresh)
    return out


def _returning_tensors(original: Callable[..., Any]) -> Callable[..., List[Any]]:
    def call(*args: Any) -> List[Any]:
        return _unpack_tensor_vector(original(*args))

    return call


def batchnorm_defect() -> bool:
    """Runs CPU BatchNorm training once on a 1x2x1x1 input: does a sequence come back? (Two channels:
    with one, the wheel's DNNL path aborts on a size check.)"""
    x = tensor.Tensor((1, 2, 1, 1))
    x.set_value(1.0)
    scale, bias, mean, var = (tensor.Tensor((2,)) for _ in range(4))
    for t, value in ((scale, 1.0), (bias, 0.0), (mean, 0.0), (var, 1.0)):
        t.set_value(value)
    handle = singa_wrap.BatchNormHandle(0.9, x.data)
    result = singa_wrap.CpuBatchNormForwardTraining(handle, x.data, scale.data, bias.data, mean.data, var.data)
    if isinstance(result, (tuple, list)):
        return False
    _unpack_tensor_vector(result)  # frees its tensors
    return True


def mend_batchnorm() -> None:
    for name in _BATCHNORM_FUNCTIONS:
        setattr(singa_wrap, name, _returning_tensors(getattr(singa_wrap, name)))


APPLIED: List[str] = []  # the mends applied in this process, in order


def apply() -> List[str]:
    """Mends each defect found (once per process); returns the names of those mended."""
    if APPLIED:
        return list(APPLIED)
    if itruediv_defect():
        mend_itruediv()
        APPLIED.append(ITRUEDIV)
    broken = numpy_copy_defects()
    if broken:
        mend_numpy_copies(broken)
        APPLIED.append(NUMPY_COPIES)
    if batchnorm_defect():
        mend_batchnorm()
        APPLIED.append(BATCHNORM_CPU_TRAINING)
    return list(APPLIED)
