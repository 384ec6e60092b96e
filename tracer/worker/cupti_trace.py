"""In-process CUDA tracing with CUPTI's Activity API (NVIDIA's `cupti-python`), for any framework.

Runs inside the worker, so it imports only the standard library and `cupti` (Python 3.8 syntax).
CUDA runtime and driver calls, kernels, copies and sets are recorded. CUPTI hands back full buffers
(and partial ones every FLUSH_PERIOD_MS); each becomes one batch file `raw/cupti/batch-NNNNN.json`
(columns, names interned), written as it comes (temporary name, then renamed, so a crash leaves only
whole batches). After the run, however it ended, the tracer turns each into
`raw/cupti/records-NNNNN.parquet`, the format `analyzers.tables` defines (tracer/tracing/cupti.py).
`raw/cupti/clock.json` ({"offset_ns": unix - cupti}, taken at start) puts CUPTI's clock on the Unix one.

Cost control, as Kineto does: the noisiest runtime/driver calls (cudaGetDevice & co., millions at
batch 1) are switched off at the source; per record the callback only appends a tuple. The
collector's own cost (records, batches, callback CPU time) is reported as a `trace_overhead` event.

Shutdown order matters: activities disabled, buffers flushed, `cupti.finalize()`; a process that
exits with CUPTI still active was seen to segfault after `activity_flush_all`.
"""

import json
import os
import threading
import time

from tracer.worker.schema import CUPTI_ALL_CALLS_ENV, MEMCPY_NAMES, Event
from tracer.worker.schema import CUPTI_COLUMNS as COLUMNS

KINDS = ("RUNTIME", "DRIVER", "CONCURRENT_KERNEL", "MEMCPY", "MEMSET")
#: Calls switched off at the source (Kineto's list and their siblings); set TRACER_CUPTI_ALL_CALLS=1 to keep them.
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
BUFFER_BYTES = 8 * 1024 * 1024
FLUSH_PERIOD_MS = 2000
BATCH_FORMAT = "dl-tracer-cupti-batch/1"


class CuptiCollector:
    def __init__(self, out_dir, reporter, cupti_module=None):
        if cupti_module is None:
            from cupti import cupti as cupti_module  # noqa: N813 - the binding's own name
        self.c = cupti_module
        self.out_dir = out_dir
        self.reporter = reporter
        self.pid = os.getpid()
        self.records = 0
        self.batches = 0
        self.callback_cpu_ns = 0
        self.callback_wall_ns = 0
        self.errors = []
        self.filtered = []
        self._lock = threading.Lock()
        self._names = {}
        self._enabled = []
        self._clock = []
        k = self.c.ActivityKind
        self._runtime, self._driver = int(k.RUNTIME), int(k.DRIVER)
        self._kernel, self._memcpy, self._memset = int(k.CONCURRENT_KERNEL), int(k.MEMCPY), int(k.MEMSET)

    def start(self):
        """Registers the buffer callbacks and enables the activities; on failure, undoes what it did."""
        try:
            self._start()
        except BaseException:
            if self._enabled:
                try:
                    for kind in self._enabled:
                        self.c.activity_disable(kind)
                    self.c.finalize()
                except Exception:  # noqa: BLE001 - the first error is the one to report
                    pass
                self._enabled = []
            raise

    def _start(self):
        c = self.c
        os.makedirs(self.out_dir, exist_ok=True)
        first = self._clock_pair()
        self._clock.append(first)
        _write_json(os.path.join(self.out_dir, "clock.json"), {"offset_ns": first["unix_ns"] - first["cupti_ns"]})
        c.set_thread_id_type(c.ActivityThreadIdType.SYSTEM)  # OS thread ids, as nsys and the sampler have
        c.activity_register_callbacks(self._buffer_requested, self._buffer_completed)
        for name in KINDS:
            kind = getattr(c.ActivityKind, name)
            c.activity_enable(kind)
            self._enabled.append(kind)
        if os.environ.get(CUPTI_ALL_CALLS_ENV) != "1":
            self._switch_off(c.activity_enable_runtime_api, getattr(c, "runtime_api_trace_cbid", None), NOISY_RUNTIME)
            self._switch_off(c.activity_enable_driver_api, getattr(c, "driver_api_trace_cbid", None), NOISY_DRIVER)
        try:
            c.activity_flush_period(FLUSH_PERIOD_MS)
        except Exception as e:  # noqa: BLE001 - older CUPTI: buffers then come back only when full
            self.errors.append("activity_flush_period: %s" % e)

    def _switch_off(self, enable_api, cbids, names):
        if cbids is None:
            return
        for name in names:
            cbid = getattr(cbids, name, None)
            if cbid is None:
                continue
            enable_api(int(cbid), 0)
            self.filtered.append(name)

    def stop(self):
        """Disable, flush, finalize; then report the collector's own cost. Idempotent; a no-op in
        forked children (DataLoader workers), which inherit the object but not CUPTI's threads."""
        if os.getpid() != self.pid or not self._enabled:
            return
        c = self.c
        try:
            for kind in reversed(self._enabled):
                c.activity_disable(kind)
            c.activity_flush_all(1)
        finally:
            self._enabled = []
            self._clock.append(self._clock_pair())
            c.finalize()
            self._write_meta()
        self.reporter.emit(
            Event.TRACE_OVERHEAD,
            backend="cupti",
            records=self.records,
            batches=self.batches,
            callback_cpu_s=self.callback_cpu_ns / 1e9,
            callback_wall_s=self.callback_wall_ns / 1e9,
            filtered_calls=self.filtered,
            errors=self.errors[:5],
        )

    def _clock_pair(self):
        """CUPTI's clock against the Unix clock the events and the sampler use: the ingest aligns with it."""
        unix_before = time.time_ns()
        cupti_ns = int(self.c.get_timestamp())
        unix_after = time.time_ns()
        return {"cupti_ns": cupti_ns, "unix_ns": (unix_before + unix_after) // 2}

    def _buffer_requested(self):
        return BUFFER_BYTES, 0

    def _buffer_completed(self, activities):
        cpu0, wall0 = time.thread_time_ns(), time.perf_counter_ns()
        try:
            api, kernels, copies, sets = [], [], [], []
            runtime, driver, kernel, memcpy, memset = (
                self._runtime,
                self._driver,
                self._kernel,
                self._memcpy,
                self._memset,
            )
            for a in activities:
                k = a.kind
                if k == runtime or k == driver:
                    api.append((k, a.cbid, a.start, a.end, a.process_id, a.thread_id, a.correlation_id))
                elif k == kernel:
                    kernels.append((a.name, a.start, a.end, a.device_id, a.stream_id, a.correlation_id))
                elif k == memcpy:
                    copies.append((a.copy_kind, a.start, a.end, a.device_id, a.stream_id, a.correlation_id, a.bytes))
                elif k == memset:
                    sets.append((a.start, a.end, a.device_id, a.stream_id, a.correlation_id, a.bytes))
            if api or kernels or copies or sets:
                self._write_batch(api, kernels, copies, sets)
        except Exception as e:  # noqa: BLE001 - raising into CUPTI's thread helps no one; reported at stop
            if len(self.errors) < 20:
                self.errors.append("%s: %s" % (type(e).__name__, e))
        finally:
            self.callback_cpu_ns += time.thread_time_ns() - cpu0
            self.callback_wall_ns += time.perf_counter_ns() - wall0

    def _name_index(self, key, names, index):
        """Index of a name in this batch's `names`; CUPTI names resolved once per process."""
        i = index.get(key)
        if i is None:
            name = self._names.get(key)
            if name is None:
                name = self._resolve(key)
                self._names[key] = name
            i = index[key] = len(names)
            names.append(name)
        return i

    def _resolve(self, key):
        c = self.c
        what, value = key
        try:
            if what == "api":
                kind, cbid = value
                domain = c.CallbackDomain.DRIVER_API if kind == self._driver else c.CallbackDomain.RUNTIME_API
                return str(c.get_callback_name(domain, cbid))
            if what == "memcpy":
                return MEMCPY_NAMES.get(value, "Unknown")
        except Exception:  # noqa: BLE001 - an unknown id keeps its number
            pass
        return "%s_%s" % (what, value)

    def _write_batch(self, api, kernels, copies, sets):
        """Rows to columns in bulk (zip, comprehensions): no Python call per record."""
        names, index = [], {}
        pid = self.pid
        parts = []
        if api:
            ks, cbids, starts, ends, pids, tids, corrs = (list(c) for c in zip(*api))
            keys = list(zip(ks, cbids))
            lut = dict((key, self._name_index(("api", key), names, index)) for key in set(keys))
            kind_of = {self._runtime: "runtime", self._driver: "driver"}
            parts.append(
                (
                    [kind_of[k] for k in ks],
                    [lut[key] for key in keys],
                    starts,
                    ends,
                    pids,
                    tids,
                    corrs,
                    None,
                    None,
                    None,
                )
            )
        if kernels:
            knames, starts, ends, devs, streams, corrs = (list(c) for c in zip(*kernels))
            lut = dict((name, _literal(name, names, index)) for name in set(knames))
            parts.append(
                (
                    ["kernel"] * len(knames),
                    [lut[n] for n in knames],
                    starts,
                    ends,
                    [pid] * len(knames),
                    None,
                    corrs,
                    devs,
                    streams,
                    None,
                )
            )
        if copies:
            copy_kinds, starts, ends, devs, streams, corrs, nbytes = (list(c) for c in zip(*copies))
            lut = dict((ck, self._name_index(("memcpy", ck), names, index)) for ck in set(copy_kinds))
            parts.append(
                (
                    ["memcpy"] * len(starts),
                    [lut[ck] for ck in copy_kinds],
                    starts,
                    ends,
                    [pid] * len(starts),
                    None,
                    corrs,
                    devs,
                    streams,
                    nbytes,
                )
            )
        if sets:
            starts, ends, devs, streams, corrs, nbytes = (list(c) for c in zip(*sets))
            n = len(starts)
            parts.append(
                (
                    ["memset"] * n,
                    [_literal("memset", names, index)] * n,
                    starts,
                    ends,
                    [pid] * n,
                    None,
                    corrs,
                    devs,
                    streams,
                    nbytes,
                )
            )
        cols = dict((name, []) for name in COLUMNS)
        for part in parts:
            n = len(part[0])
            for name, values in zip(COLUMNS, part):
                cols[name].extend(values if values is not None else [None] * n)
        with self._lock:
            seq = self.batches
            self.batches += 1
            self.records += len(cols["kind"])
        batch = {"format": BATCH_FORMAT, "pid": pid, "seq": seq, "names": names, "columns": cols}
        path = os.path.join(self.out_dir, "batch-%05d.json" % seq)
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(batch, f, separators=(",", ":"))
        os.replace(tmp, path)

    def _write_meta(self):
        meta = {
            "format": BATCH_FORMAT,
            "pid": self.pid,
            "clock": self._clock,
            "records": self.records,
            "batches": self.batches,
            "callback_cpu_ns": self.callback_cpu_ns,
            "callback_wall_ns": self.callback_wall_ns,
            "filtered_calls": self.filtered,
            "errors": self.errors,
        }
        _write_json(os.path.join(self.out_dir, "meta.json"), meta)


def _write_json(path, data):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1)
    os.replace(tmp, path)


def _literal(name, names, index):
    key = ("literal", name)
    i = index.get(key)
    if i is None:
        i = index[key] = len(names)
        names.append(name)
    return i


def start(raw_dir, reporter):
    """Starts tracing into `raw_dir/cupti`; the caller calls `.stop()` before the process exits."""
    collector = CuptiCollector(os.path.join(raw_dir, "cupti"), reporter)
    collector.start()
    return collector
