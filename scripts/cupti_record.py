"""Records CUPTI buffers on a GPU for the decoder's CPU tests, with an oracle that is not our layout table.

    PYTHONPATH=<repo>:/tmp/site python3 scripts/cupti_record.py OUTDIR

Each case runs in its own process (CUPTI is set up once per process): a torchvision AlexNet (3 classes,
SGD, synthetic data on the GPU) trains a few steps untraced, then the same number under the in-worker
collector (`tracer.worker.cupti_trace`), which writes `OUTDIR/<case>/cupti/` as a run would
(buf-NNNNN.bin, index.jsonl, meta.json, clock.json, kernel_names.json, stop.json).

The oracle (`OUTDIR/<case>/oracle.json.gz`), made in the same process before `cuptiFinalize`: each
written buffer walked by CUPTI itself (`cuptiActivityGetNextRecord`: record offsets and kinds), and each
record's fields read by cupti-python's own generated record classes (`ActivityAPI.from_ptr(...)`, ...),
kernel names included. A second oracle: case `b1-cupti-python` runs the batch-1 steps again with
cupti-python as the collector (its decoded activity objects) and writes per-(kind, name) counts, to
compare with what our decoder makes of case `b1` (same steps, so the same calls per step).

Cases: b1 (batch 1, 40 steps, Kineto's 4 MB buffers) and b16 (batch 16, 20 steps, 64 KB buffers so that the
records span several). Everything finishes in under 2 minutes;
a summary is printed at the end and written to OUTDIR/summary.json.
"""

import ctypes
import gzip
import json
import os
import statistics
import subprocess
import sys
import time

CASES = (("b1", 1, 40), ("b16", 16, 20))
CUPTI_PYTHON_CASE = ("b1-cupti-python", 1, 40)
CHILD_TIMEOUT_S = 35
SMALL_BUFFER_BYTES = 64 * 1024
WARMUP_STEPS = 5
IMAGE = 224
KIND_NAMES = {1: "memcpy", 2: "memset", 4: "driver", 5: "runtime", 10: "kernel"}


def main(argv):
    if len(argv) >= 2 and argv[1] == "--child":
        name, batch, steps, out = argv[2], int(argv[3]), int(argv[4]), argv[5]
        return child(name, batch, steps, out)
    if len(argv) != 2:
        print("usage: python3 scripts/cupti_record.py OUTDIR", file=sys.stderr)
        return 2
    out = os.path.abspath(argv[1])
    os.makedirs(out, exist_ok=True)
    t0 = time.time()
    results = {}
    for name, batch, steps in CASES + (CUPTI_PYTHON_CASE,):
        case_dir = os.path.join(out, name)
        os.makedirs(case_dir, exist_ok=True)
        cmd = [sys.executable, os.path.abspath(__file__), "--child", name, str(batch), str(steps), case_dir]
        started = time.time()
        try:
            done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=CHILD_TIMEOUT_S)
            rc, log = done.returncode, done.stdout.decode("utf-8", "replace")
        except subprocess.TimeoutExpired as e:
            rc, log = "timeout", (e.output or b"").decode("utf-8", "replace")
        with open(os.path.join(case_dir, "child.log"), "w") as f:
            f.write(log)
        summary_path = os.path.join(case_dir, "summary.json")
        result = {"rc": rc, "wall_s": round(time.time() - started, 1)}
        if os.path.exists(summary_path):
            with open(summary_path) as f:
                result.update(json.load(f))
        else:
            result["log_tail"] = log[-2000:]
        results[name] = result
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(results, f, indent=1)
    print_summary(results, time.time() - t0, out)
    return 0 if all(r["rc"] == 0 for r in results.values()) else 1


def print_summary(results, wall, out):
    print(f"== CUPTI recording: {out} ({wall:.0f} s)")
    for name, r in results.items():
        print("-- {}: rc={}, {:.1f} s".format(name, r["rc"], r["wall_s"]))
        for key in (
            "device",
            "cupti_version",
            "library",
            "untraced_ms_per_step",
            "traced_ms_per_step",
            "stop",
            "oracle",
            "counts",
            "error",
            "log_tail",
        ):
            if key in r:
                print(f"   {key}: {json.dumps(r[key])[:1500]}")
    total = 0
    for dirpath, _, files in os.walk(out):
        total += sum(os.path.getsize(os.path.join(dirpath, f)) for f in files)
    print(f"== output: {total / 1e6:.2f} MB under {out}")


def child(name, batch, steps, out):
    summary = {"case": name, "batch": batch, "steps": steps}
    try:
        _child(name, batch, steps, out, summary)
        rc = 0
    except BaseException as e:  # noqa: BLE001 - a recording that fails says why in the summary
        import traceback

        traceback.print_exc()
        summary["error"] = f"{type(e).__name__}: {e}"
        rc = 1
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    sys.stdout.flush()
    os._exit(rc)  # no interpreter teardown with CUPTI loaded


def _child(name, batch, steps, out, summary):
    import torch
    import torchvision

    torch.backends.cudnn.benchmark = True
    device = torch.device("cuda")
    summary["device"] = torch.cuda.get_device_name(0)
    summary["torch"] = torch.__version__
    model = torchvision.models.alexnet(num_classes=3).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.001, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    x = torch.randn(batch, 3, IMAGE, IMAGE, device=device)
    y = torch.randint(0, 3, (batch,), device=device)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return float(loss.item())  # the host reads the loss every step, as the worker does

    def timed(n):
        times = []
        for _ in range(n):
            t = time.perf_counter()
            step()
            times.append((time.perf_counter() - t) * 1e3)
        return round(statistics.median(times), 3)

    for _ in range(WARMUP_STEPS):
        step()
    torch.cuda.synchronize()
    summary["untraced_ms_per_step"] = timed(steps)
    if name.endswith("cupti-python"):
        summary["counts"] = _cupti_python_run(out, steps, timed, summary)
        return
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from tracer.worker import cupti_trace
    from tracer.worker.reporting import Reporter

    reporter = Reporter(os.path.join(out, "events.jsonl"))
    # b16 with small buffers, so that the recording spans several (records never straddle two)
    pool = cupti_trace.BufferPool(nbytes=SMALL_BUFFER_BYTES) if batch > 1 else None
    collector = cupti_trace.CuptiCollector(os.path.join(out, "cupti"), reporter, pool=pool)
    collector.start()
    summary["library"] = collector.lib.path
    summary["cupti_version"] = collector.version
    summary["traced_ms_per_step"] = timed(steps)
    torch.cuda.synchronize()
    collector.stop(before_finalize=lambda c: _oracle(c, out, summary))
    reporter.close()
    with open(os.path.join(out, "cupti", "stop.json")) as f:
        stop = json.load(f)
    summary["stop"] = dict(
        (k, stop.get(k))
        for k in (
            "records_by_kind",
            "batches",
            "buffer_bytes",
            "dropped",
            "pool_exhausted",
            "kernel_names",
            "names_s",
            "callback_cpu_s",
            "errors",
        )
    )


def _cupti_classes():
    """cupti-python's record classes by activity kind, the newest kernel record version it has."""
    from cupti import cupti as c

    kernels = sorted(
        (n for n in dir(c) if n.startswith("ActivityKernel") and n[len("ActivityKernel") :].isdigit()),
        key=lambda n: int(n[len("ActivityKernel") :]),
    )
    return {
        1: c.ActivityMemcpy6,
        2: c.ActivityMemset4,
        4: c.ActivityAPI,
        5: c.ActivityAPI,
        10: getattr(c, kernels[-1]),
    }, kernels[-1]


FIELDS = {
    "api": ("cbid", "start", "end", "process_id", "thread_id", "correlation_id", "return_value"),
    "kernel": (
        "start",
        "end",
        "device_id",
        "context_id",
        "stream_id",
        "correlation_id",
        "grid_x",
        "grid_y",
        "grid_z",
        "block_x",
        "block_y",
        "block_z",
        "registers_per_thread",
        "name",
    ),
    "memcpy": ("copy_kind", "bytes", "start", "end", "device_id", "stream_id", "correlation_id"),
    "memset": ("value", "bytes", "start", "end", "device_id", "stream_id", "correlation_id"),
}
_HOLD = []
GROUP = {1: "memcpy", 2: "memset", 4: "api", 5: "api", 10: "kernel"}


def _oracle(collector, out, summary):
    """Each buffer walked by cuptiActivityGetNextRecord, each record read by cupti-python's classes."""
    t0 = time.perf_counter()
    lib = collector.lib.lib
    oracle = {"walk": "cuptiActivityGetNextRecord", "buffers": {}, "records": {}}
    try:
        classes, kernel_class = _cupti_classes()
        oracle["fields"] = "cupti-python {} ({})".format(_version("cupti-python"), kernel_class)
    except Exception as e:  # noqa: BLE001 - the walk alone is still an oracle for offsets and kinds
        classes = None
        oracle["fields"] = None
        oracle["fields_error"] = f"{type(e).__name__}: {e}"
    records = dict((g, dict((f, []) for f in ("file", "offset", "kind") + FIELDS[g])) for g in FIELDS)
    for path in collector.writer.files():
        with open(path, "rb") as f:
            data = f.read()
        buf = (ctypes.c_uint8 * max(len(data), 8)).from_buffer_copy(data.ljust(8, b"\0"))
        base = ctypes.addressof(buf)
        rec = ctypes.c_void_p(None)
        offsets, kinds = [], []
        status = 0
        while True:
            status = lib.cuptiActivityGetNextRecord(base, len(data), ctypes.byref(rec))
            if status != 0:
                break
            kind = ctypes.c_uint32.from_address(rec.value).value
            offsets.append(rec.value - base)
            kinds.append(kind)
            if classes is None or kind not in classes:
                continue
            obj = classes[kind].from_ptr(rec.value)
            _HOLD.append(obj)  # freed, these objects ask cupti-python's buffer manager for a buffer it never had
            cols = records[GROUP[kind]]
            cols["file"].append(os.path.basename(path))
            cols["offset"].append(rec.value - base)
            cols["kind"].append(kind)
            for field in FIELDS[GROUP[kind]]:
                value = getattr(obj, field)
                cols[field].append(value if isinstance(value, (int, str)) or value is None else int(value))
        oracle["buffers"][os.path.basename(path)] = {"offsets": offsets, "kinds": kinds, "end_status": status}
    oracle["records"] = records
    with gzip.open(os.path.join(out, "oracle.json.gz"), "wt") as f:
        json.dump(oracle, f)
    # the same buffers through the collector's own stdlib walk: kinds and counts must agree with CUPTI's
    from tracer.worker import cupti_trace

    layouts = cupti_trace.L.layouts_for(collector.version)
    agree = True
    for path in collector.writer.files():
        with open(path, "rb") as f:
            counts, _, error = cupti_trace.walk(f.read(), layouts)
        cupti_counts = {}
        for k in oracle["buffers"][os.path.basename(path)]["kinds"]:
            cupti_counts[k] = cupti_counts.get(k, 0) + 1
        agree = agree and error is None and dict((k, n) for k, n in counts.items() if n) == cupti_counts
    summary["oracle"] = {
        "records_by_kind": dict((g, len(c["offset"])) for g, c in records.items()),
        "walks_agree": agree,
        "fields": oracle["fields"],
        "fields_error": oracle.get("fields_error"),
        "seconds": round(time.perf_counter() - t0, 2),
    }


def _version(dist):
    try:
        from importlib import metadata

        return metadata.version(dist)
    except Exception:  # noqa: BLE001
        return "?"


def _cupti_python_run(out, steps, timed, summary):
    """The same steps with cupti-python as the collector: counts per (kind, name) of its decoded records."""
    from cupti import cupti as c

    from tracer.worker.cupti_trace import NOISY_DRIVER as noisy_drv
    from tracer.worker.cupti_trace import NOISY_RUNTIME as noisy_rt

    counts = {}
    K = c.ActivityKind
    runtime, driver, kernel, memcpy, memset = (
        int(K.RUNTIME),
        int(K.DRIVER),
        int(K.CONCURRENT_KERNEL),
        int(K.MEMCPY),
        int(K.MEMSET),
    )
    names = {}

    def completed(activities):
        for a in activities:
            k = int(a.kind)
            if k in (runtime, driver):
                key = (k, int(a.cbid))
                if key not in names:
                    dom = c.CallbackDomain.DRIVER_API if k == driver else c.CallbackDomain.RUNTIME_API
                    names[key] = str(c.get_callback_name(dom, int(a.cbid)))
                label = ("driver" if k == driver else "runtime", names[key])
            elif k == kernel:
                label = ("kernel", str(a.name))
            elif k == memcpy:
                label = ("memcpy", str(int(a.copy_kind)))
            elif k == memset:
                label = ("memset", "memset")
            else:
                label = ("other", str(k))
            counts[label] = counts.get(label, 0) + 1

    c.set_thread_id_type(c.ActivityThreadIdType.SYSTEM)
    c.activity_register_callbacks(lambda: (4 * 1024 * 1024, 0), completed)
    kinds = [K.RUNTIME, K.DRIVER, K.CONCURRENT_KERNEL, K.MEMCPY, K.MEMSET]
    for kind in kinds:
        c.activity_enable(kind)
    for n in noisy_rt:
        cbid = getattr(c.runtime_api_trace_cbid, n, None)
        if cbid is not None:
            c.activity_enable_runtime_api(int(cbid), 0)
    for n in noisy_drv:
        cbid = getattr(c.driver_api_trace_cbid, n, None)
        if cbid is not None:
            c.activity_enable_driver_api(int(cbid), 0)
    summary["traced_ms_per_step"] = timed(steps)
    import torch

    torch.cuda.synchronize()
    for kind in reversed(kinds):
        c.activity_disable(kind)
    c.activity_flush_all(1)
    c.finalize()
    rows = [{"kind": k, "name": n, "count": v} for (k, n), v in sorted(counts.items())]
    with open(os.path.join(out, "counts.json"), "w") as f:
        json.dump(
            {
                "source": "cupti-python {} activity objects".format(_version("cupti-python")),
                "steps": steps,
                "rows": rows,
            },
            f,
            indent=0,
        )
    by_kind = {}
    for (k, _), v in counts.items():
        by_kind[k] = by_kind.get(k, 0) + v
    return by_kind


if __name__ == "__main__":
    sys.exit(main(sys.argv))
