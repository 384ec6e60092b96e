"""In-process CUDA tracing with CUPTI's Activity API through its C API (`ctypes` on the `libcupti` the
CUDA wheels ship), at Kineto's cost: no Python work per record while the training runs.

Runs inside the worker: Python 3.6 syntax, standard library only. CUDA runtime and driver calls,
kernels, copies and sets are recorded into 4 MB buffers from a bounded pool (when the pool is
exhausted CUPTI drops records and counts them, rather than the pool growing). Each completed buffer's
valid bytes are written to `raw/cupti/buf-NNNNN.bin` as they are (temporary name, then renamed), with
one line in `index.jsonl`; the tracer decodes them after the run, however it ended
(`tracer/tracing/cupti_decode.py`, layouts in `tracer/worker/cupti_layout.py`).

Written here because a later process cannot recover them: `meta.json` at start (CUPTI's version, the
cbid -> name tables of the runtime and driver domains, the clock pair), `kernel_names.json` at stop (a
kernel record holds a `const char *` into CUPTI's memory: the distinct pointers are found by one walk
over the buffers after the flush, as Kineto reads its records after the trace, and read here),
`stop.json` (totals, drops, the collector's own cost), and a `trace_overhead` event.

Kineto's choices: the noisiest calls (cudaGetDevice & co., millions at batch 1) switched off at the
source; shutdown is disable, flush, finalize (a process that exits with CUPTI active was seen to
segfault after a flush).
"""

import bisect
import ctypes
import ctypes.util
import glob
import importlib.util
import json
import os
import threading
import time
from typing import Any, List

from tracer.worker.clock import perf_counter_ns, time_ns
from tracer.worker.schema import (
    CUPTI_ALL_CALLS_ENV,
    CUPTI_BUFFER_FILE,
    CUPTI_CLOCK_FILE,
    CUPTI_INDEX_FILE,
    CUPTI_KERNEL_NAMES_FILE,
    CUPTI_LAYOUT,
    CUPTI_LIBRARY_ENV,
    CUPTI_META_FILE,
    CUPTI_RAW_FORMAT,
    CUPTI_STOP_FILE,
    Event,
)

L = CUPTI_LAYOUT
_thread_ns = getattr(time, "thread_time_ns", perf_counter_ns)  # CPU time of CUPTI's thread, where Python has it
#: Kineto's buffer size and its default cap on activity buffers (128 MB).
BUFFER_BYTES = 4 * 1024 * 1024
MAX_BUFFERS = 32
FLUSH_PERIOD_MS = 2000  # partial buffers come back this often, so a crash loses little
FLUSH_FORCED = 1  # CUPTI_ACTIVITY_FLAG_FLUSH_FORCED
THREAD_ID_SYSTEM = 1  # CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM: OS thread ids, as nsys and the sampler have
#: Calls switched off at the source (Kineto's list and their siblings), by CUPTI's own names; set
#: TRACER_CUPTI_ALL_CALLS=1 to keep them.
NOISY_RUNTIME = (
    "cudaGetDevice_v3020",
    "cudaSetDevice_v3020",
    "cudaGetLastError_v3020",
    "cudaPeekAtLastError_v3020",
    "cudaEventCreate_v3020",
    "cudaEventCreateWithFlags_v3020",
    "cudaEventDestroy_v3020",
)
NOISY_DRIVER = ("cuDevicePrimaryCtxGetState", "cuCtxGetCurrent", "cuKernelGetAttribute")
#: The callback ids probed for names: beyond CUDA 13.0's CUPTI_*_TRACE_CBID_SIZE (523, 807), for newer ones.
MAX_CBID = 2048
LIBRARY_NAMES = ("libcupti.so.13", "libcupti.so.12", "libcupti.so")


class CuptiError(RuntimeError):
    pass


def find_libcupti():
    """The libcupti to load: $TRACER_LIBCUPTI; one already loaded in this process (a framework's own);
    the CUDA wheels' (`nvidia/cu13/lib`, `nvidia/cuda_cupti/lib`), newest major first; the loader's search."""
    path = os.environ.get(CUPTI_LIBRARY_ENV)
    if path:
        return path
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                if "/libcupti.so" in line:
                    return line.split(None, 5)[-1].strip()
    except OSError:
        pass
    found = []
    try:
        spec = importlib.util.find_spec("nvidia")  # the CUDA wheels' namespace package
    except (ImportError, ValueError):
        spec = None
    for base in list(spec.submodule_search_locations or []) if spec else []:
        for sub in ("cu13/lib", "cuda_cupti/lib", "cu12/lib"):
            found += glob.glob(os.path.join(base, sub, "libcupti.so*"))
    for d in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) + ["/usr/local/cuda/extras/CUPTI/lib64"]:
        if d:
            found += glob.glob(os.path.join(d, "libcupti.so*"))
    for name in LIBRARY_NAMES:
        for p in found:
            if os.path.basename(p) == name:
                return p
    if found:
        return sorted(found)[-1]
    return ctypes.util.find_library("cupti")


class Library(object):
    """libcupti's entry points, typed; every call checked (a CuptiError names the call and CUPTI's message)."""

    REQUESTED = ctypes.CFUNCTYPE(
        None, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)
    )
    COMPLETED = ctypes.CFUNCTYPE(
        None, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t
    )

    def __init__(self, path=None):
        path = path or find_libcupti()
        if not path:
            raise CuptiError(
                "no libcupti found (install nvidia-cuda-cupti matching the framework's CUDA, or set %s)"
                % CUPTI_LIBRARY_ENV
            )
        self.path = path
        try:
            self.lib = lib = ctypes.CDLL(path)
        except OSError as e:
            raise CuptiError("cannot load %s: %s" % (path, e)) from None
        u32, size_t, vp = ctypes.c_uint32, ctypes.c_size_t, ctypes.c_void_p
        signatures = {
            "cuptiGetResultString": [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)],
            "cuptiGetVersion": [ctypes.POINTER(u32)],
            "cuptiGetCallbackName": [ctypes.c_int, u32, ctypes.POINTER(ctypes.c_char_p)],
            "cuptiGetTimestamp": [ctypes.POINTER(ctypes.c_uint64)],
            "cuptiSetThreadIdType": [ctypes.c_int],
            "cuptiActivityRegisterCallbacks": [self.REQUESTED, self.COMPLETED],
            "cuptiActivityEnable": [ctypes.c_int],
            "cuptiActivityDisable": [ctypes.c_int],
            "cuptiActivityEnableRuntimeApi": [u32, ctypes.c_uint8],
            "cuptiActivityEnableDriverApi": [u32, ctypes.c_uint8],
            "cuptiActivityFlushAll": [u32],
            "cuptiActivityFlushPeriod": [u32],
            "cuptiActivityGetNumDroppedRecords": [vp, u32, ctypes.POINTER(size_t)],
            "cuptiActivityGetNextRecord": [vp, size_t, ctypes.POINTER(vp)],
            "cuptiFinalize": [],
        }
        for name, argtypes in signatures.items():
            fn = getattr(lib, name, None)
            if fn is not None:
                fn.argtypes = argtypes
                fn.restype = ctypes.c_int

    def has(self, name):
        return getattr(self.lib, name, None) is not None

    def message(self, code):
        text = ctypes.c_char_p()
        if self.has("cuptiGetResultString") and self.lib.cuptiGetResultString(code, ctypes.byref(text)) == 0:
            return (text.value or b"").decode("utf-8", "replace")
        return "CUPTI error %d" % code

    def call(self, name, *args):
        code = getattr(self.lib, name)(*args)
        if code != 0:
            raise CuptiError("%s: %s" % (name, self.message(code)))

    def version(self):
        v = ctypes.c_uint32()
        self.call("cuptiGetVersion", ctypes.byref(v))
        return int(v.value)

    def timestamp(self):
        t = ctypes.c_uint64()
        self.call("cuptiGetTimestamp", ctypes.byref(t))
        return int(t.value)

    def callback_names(self, domain):
        """{cbid: name} of one API domain, from CUPTI itself (ids it does not know are left out)."""
        names = {}
        text = ctypes.c_char_p()
        fn = self.lib.cuptiGetCallbackName
        for cbid in range(1, MAX_CBID):
            if fn(domain, cbid, ctypes.byref(text)) == 0 and text.value:
                names[cbid] = text.value.decode("utf-8", "replace")
        return names

    def dropped(self, stream):
        n = ctypes.c_size_t()
        self.call("cuptiActivityGetNumDroppedRecords", None, stream, ctypes.byref(n))
        return int(n.value)


class BufferPool(object):
    """At most `max_buffers` buffers of `nbytes`, reused; when all are out, `take` gives None and counts it
    (CUPTI then drops records and reports them) instead of growing."""

    def __init__(self, nbytes=BUFFER_BYTES, max_buffers=MAX_BUFFERS):
        self.nbytes = nbytes
        self.max_buffers = max_buffers
        self.exhausted = 0
        self._buffers = {}  # address -> ctypes array, keeping each alive
        self._free = []
        self._lock = threading.Lock()

    def take(self):
        with self._lock:
            if self._free:
                return self._free.pop()
            if len(self._buffers) >= self.max_buffers:
                self.exhausted += 1
                return None
            buf = (ctypes.c_uint8 * self.nbytes)()  # zeroed; 8-byte aligned as CUPTI requires
            address = ctypes.addressof(buf)
            self._buffers[address] = buf
            return address

    def give(self, address):
        with self._lock:
            if address in self._buffers and address not in self._free:
                self._free.append(address)

    @property
    def allocated(self):
        return len(self._buffers)

    @property
    def in_use(self):
        return len(self._buffers) - len(self._free)


class RawWriter(object):
    """Writes buffers as they are (`buf-NNNNN.bin`, temporary name then renamed) and one index line each,
    after the file is in place: a crash leaves whole buffers, each listed or listable."""

    def __init__(self, out_dir):
        self.out_dir = out_dir
        self.buffers = 0
        self.bytes = 0
        self.dropped = 0
        self._lock = threading.Lock()
        self._index = open(os.path.join(out_dir, CUPTI_INDEX_FILE), "a")

    def write(self, address, valid, stream, dropped):
        if not valid and not dropped:
            return
        with self._lock:
            name = None
            if valid:
                name = CUPTI_BUFFER_FILE % self.buffers
                path = os.path.join(self.out_dir, name)
                view = memoryview((ctypes.c_char * valid).from_address(address)).cast("B")
                fd = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                try:
                    done = 0
                    while done < valid:
                        done += os.write(fd, view[done:])
                finally:
                    os.close(fd)
                os.replace(path + ".tmp", path)
                self.buffers += 1
                self.bytes += valid
            self.dropped += dropped
            line = {"file": name, "valid_bytes": valid, "stream": stream, "dropped": dropped, "t_ns": time_ns()}
            self._index.write(json.dumps(line) + "\n")
            self._index.flush()

    def files(self):
        return [os.path.join(self.out_dir, CUPTI_BUFFER_FILE % i) for i in range(self.buffers)]

    def close(self):
        with self._lock:
            self._index.close()


def walk(data, layouts):
    """One pass over a buffer's records: ({kind: count}, {kernel name pointers}, error or None).
    A loop per record, so it runs at stop, never while the training does."""
    sizes = {}
    for kind, (_, fields) in layouts.items():
        sizes[kind] = L.record_size(fields) // 4
    step = [sizes.get(k, 0) for k in range(max(sizes) + 1)]
    name_q = L.field_offset(layouts[L.KIND_CONCURRENT_KERNEL][1], "name") // 8
    n = len(data) // 8 * 8
    view = memoryview(data)[:n]
    u32, u64 = view.cast("I"), view.cast("Q")
    counts = dict((k, 0) for k in sizes)
    pointers = set()
    kernel = L.KIND_CONCURRENT_KERNEL
    i, end, last = 0, n // 4, len(step)
    while i < end:
        k = u32[i]
        s = step[k] if k < last else 0
        if not s or i + s > end:
            return counts, pointers, "record kind %d at byte %d: no layout" % (k, i * 4)
        if k == kernel:
            pointers.add(u64[(i >> 1) + name_q])
        counts[k] += 1
        i += s
    return counts, pointers, None


def readable_ranges():
    """This process's readable mappings, sorted [(start, end)], from /proc/self/maps ([] where there is none)."""
    ranges = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                span, perms = line.split(None, 2)[:2]
                if perms.startswith("r"):
                    start, end = span.split("-")
                    ranges.append((int(start, 16), int(end, 16)))
    except (OSError, ValueError):
        return []
    return sorted(ranges)


def read_names(pointers, ranges=None):
    """CUPTI's kernel name strings at these addresses of this process ({str(address): name}). An address
    outside every readable mapping (a record misread) is skipped rather than crash the worker at its end."""
    ranges = readable_ranges() if ranges is None else ranges
    starts = [r[0] for r in ranges]
    names = {}
    for p in pointers:
        i = bisect.bisect_right(starts, p) - 1
        if p and (not ranges or (i >= 0 and p < ranges[i][1])):
            names[str(p)] = ctypes.string_at(p).decode("utf-8", "replace")
    return names


class CuptiCollector(object):
    def __init__(self, out_dir, reporter, library=None, pool=None):
        self.out_dir = out_dir
        self.reporter = reporter
        self.library_path = library
        self.pid = os.getpid()
        self.pool = pool or BufferPool()
        self.lib = None
        self.writer = None
        self.version = None
        self.errors = []
        self.filtered = []
        self.callback_cpu_ns = 0
        self._enabled = []
        self._clock = []
        self._callbacks = None

    def start(self):
        """Writes the start facts, registers the buffer callbacks, enables the activities; on failure,
        undoes what it did and raises."""
        try:
            self._start()
        except BaseException:
            if self._enabled:
                try:
                    for kind in reversed(self._enabled):
                        self.lib.lib.cuptiActivityDisable(kind)
                    self.lib.lib.cuptiFinalize()
                except Exception:  # noqa: BLE001 - the first error is the one to report
                    pass
                self._enabled = []
            raise

    def _start(self):
        os.makedirs(self.out_dir, exist_ok=True)
        self.lib = lib = Library(self.library_path)
        self.version = lib.version()
        layouts = L.layouts_for(self.version)
        first = self._clock_pair()
        self._clock.append(first)
        _write_json(os.path.join(self.out_dir, CUPTI_CLOCK_FILE), {"offset_ns": first["unix_ns"] - first["cupti_ns"]})
        runtime, driver = lib.callback_names(L.DOMAIN_RUNTIME), lib.callback_names(L.DOMAIN_DRIVER)
        meta = {
            "format": CUPTI_RAW_FORMAT,
            "pid": self.pid,
            "library": lib.path,
            "cupti_version": self.version,
            "layouts_known": layouts is not None,
            "buffer_bytes": self.pool.nbytes,
            "max_buffers": self.pool.max_buffers,
            "clock": first,
            "callback_names": {"runtime": runtime, "driver": driver},
        }
        _write_json(os.path.join(self.out_dir, CUPTI_META_FILE), meta)
        self.writer = RawWriter(self.out_dir)
        lib.call("cuptiSetThreadIdType", THREAD_ID_SYSTEM)
        self._callbacks = (lib.REQUESTED(self._requested), lib.COMPLETED(self._completed))
        _KEEP.append(self._callbacks)  # CUPTI may call them until the process ends
        lib.call("cuptiActivityRegisterCallbacks", *self._callbacks)
        for kind in L.ENABLED_KINDS:
            lib.call("cuptiActivityEnable", kind)
            self._enabled.append(kind)
        if os.environ.get(CUPTI_ALL_CALLS_ENV) != "1":
            self._switch_off("cuptiActivityEnableRuntimeApi", runtime, NOISY_RUNTIME)
            self._switch_off("cuptiActivityEnableDriverApi", driver, NOISY_DRIVER)
        try:
            lib.call("cuptiActivityFlushPeriod", FLUSH_PERIOD_MS)
        except CuptiError as e:  # older CUPTI: buffers then come back only when full
            self.errors.append(str(e))

    def _switch_off(self, function, names, wanted):
        if not self.lib.has(function):
            self.errors.append("%s: not in this CUPTI, the noisy calls stay on" % function)
            return
        cbid_of = dict((name, cbid) for cbid, name in names.items())
        for name in wanted:
            cbid = cbid_of.get(name)
            if cbid is not None:
                self.lib.call(function, cbid, 0)
                self.filtered.append(name)

    def _requested(self, buffer, size, max_records):
        try:
            address = self.pool.take()
        except Exception:  # noqa: BLE001 - never raise into CUPTI's thread
            address = None
        buffer[0] = address
        size[0] = self.pool.nbytes if address else 0
        max_records[0] = 0

    def _completed(self, context, stream, buffer, size, valid):
        cpu0 = _thread_ns()
        try:
            try:
                dropped = self.lib.dropped(stream)
            except CuptiError as e:  # the records are still worth writing
                dropped = 0
                self._error(e)
            self.writer.write(buffer, valid, stream, dropped)
        except Exception as e:  # noqa: BLE001 - raising into CUPTI's thread helps no one; reported at stop
            self._error(e)
        finally:
            self.pool.give(buffer)
            self.callback_cpu_ns += _thread_ns() - cpu0

    def _error(self, e):
        if len(self.errors) < 20:
            self.errors.append("%s: %s" % (type(e).__name__, e))

    def stop(self, before_finalize=None):
        """Disable, flush, resolve kernel names, finalize; then write the stop facts and report the
        collector's own cost. Idempotent; a no-op in forked children (DataLoader workers).
        `before_finalize(collector)`, if given, runs while CUPTI's memory is still valid (the oracle)."""
        if os.getpid() != self.pid or not self._enabled:
            return
        lib = self.lib
        stats = {}
        try:
            for kind in reversed(self._enabled):
                lib.call("cuptiActivityDisable", kind)
            lib.call("cuptiActivityFlushAll", FLUSH_FORCED)
        finally:
            self._enabled = []
            self._clock.append(self._clock_pair())
            try:
                stats = self._resolve_names()
                if before_finalize is not None:
                    before_finalize(self)
            finally:
                lib.lib.cuptiFinalize()
                self.writer.close()
                stats = self._write_stop(stats)
        self.reporter.emit(Event.TRACE_OVERHEAD, backend="cupti", **stats)

    def _resolve_names(self):
        t0 = time.perf_counter()
        layouts = L.layouts_for(self.version)
        counts, pointers = {}, set()
        if layouts is None:
            self.errors.append("no record layout for CUPTI %s: kernel names not resolved" % self.version)
        else:
            for path in self.writer.files():
                with open(path, "rb") as f:
                    c, p, error = walk(f.read(), layouts)
                for k, n in c.items():
                    counts[k] = counts.get(k, 0) + n
                pointers |= p
                if error and len(self.errors) < 20:
                    self.errors.append("%s: %s" % (os.path.basename(path), error))
        names = read_names(pointers)
        _write_json(os.path.join(self.out_dir, CUPTI_KERNEL_NAMES_FILE), names)
        return {
            "records": sum(counts.values()),
            "records_by_kind": dict((str(k), n) for k, n in counts.items()),
            "kernel_names": len(names),
            "names_s": time.perf_counter() - t0,
        }

    def _write_stop(self, stats):
        w = self.writer
        stats = dict(
            stats,
            batches=w.buffers,
            buffer_bytes=w.bytes,
            dropped=w.dropped,
            pool_exhausted=self.pool.exhausted,
            pool_buffers=self.pool.allocated,
            callback_cpu_s=self.callback_cpu_ns / 1e9,
            filtered_calls=self.filtered,
            errors=self.errors[:5],
        )
        _write_json(os.path.join(self.out_dir, CUPTI_STOP_FILE), dict(stats, clock=self._clock, errors=self.errors))
        return stats

    def _clock_pair(self):
        """CUPTI's clock against the Unix clock the events and the sampler use: the decoder aligns with it."""
        unix_before = time_ns()
        cupti_ns = self.lib.timestamp()
        unix_after = time_ns()
        return {"cupti_ns": cupti_ns, "unix_ns": (unix_before + unix_after) // 2}


_KEEP: List[Any] = []


def _write_json(path, data):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1)
    os.replace(tmp, path)


def start(raw_dir, reporter):
    """Starts tracing into `raw_dir/cupti`; the caller calls `.stop()` before the process exits."""
    collector = CuptiCollector(os.path.join(raw_dir, "cupti"), reporter)
    collector.start()
    return collector
