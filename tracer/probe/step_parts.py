"""A PyTorch step of a user's command in parts, as the host sees them, for nothing more than two clock
reads per `backward()` and per `optimizer.step()`:

- forward: from the batch handed out to the step's first `backward()` call (the forward pass and the loss);
- backward: inside `backward()` (under DDP its gradient all-reduce too: a rank that waits for a slower
  one waits here);
- optimizer: inside `optimizer.step()` (torch's global optimizer step hooks);
- arrive_ns: when the step called `backward()`. Under data-parallel training the gradients' all-reduce
  begins there, so the rank that arrives last holds the others back: the straggler, found from these
  arrivals where no collective is recorded (analyzers/figures/ranks.py).

One row per step the recorder adds (same epoch, step, rank and start as the steps table) to
samples/step_parts-<pid>.csv; the tracer joins the files when the run ends. Module forward hooks would
split the forward pass by module but cost a call per module; they are not used.
"""

import atexit
import importlib
import os

from .names import schema
from .recorder import perf, wall_ns

FLUSH_ROWS = 256


class StepParts(object):
    """The parts of the step under way in one process, and the rows of the steps already added."""

    def __init__(self, recorder):
        self.rec = recorder
        self.pid = os.getpid()
        self.arrive_ns = 0  # wall clock of the step's first backward() (0: none yet)
        self.backward_s = 0.0
        self.optimizer_s = 0.0
        self.depth = 0  # backward() inside backward() (a custom Function's) is counted once
        self._opt_start = 0.0
        self._rows = []  # type: list
        self._file = None  # type: object

    # --- what the hooks see
    def backward(self, call, args, kwargs):
        outer = self.depth == 0
        if outer and not self.arrive_ns:
            self.arrive_ns = wall_ns()
        self.depth += 1
        t = perf()
        try:
            return call(*args, **kwargs)
        finally:
            self.depth -= 1
            if outer:
                self.backward_s += perf() - t

    def optimizer_pre(self, optimizer, args, kwargs):
        self._opt_start = perf()

    def optimizer_post(self, optimizer, args, kwargs):
        if self._opt_start:
            self.optimizer_s += perf() - self._opt_start
            self._opt_start = 0.0

    # --- what the recorder does
    def step_added(self, start_ns, wait_s):  # type: (int, object) -> None
        """The recorder added a step: its parts as one row, and the next step's parts from zero."""
        rec = self.rec
        if os.getpid() == self.pid:
            forward = ""
            if self.arrive_ns:
                ready_ns = start_ns + int((wait_s or 0.0) * 1e9)
                forward = "%.9f" % max(0.0, (self.arrive_ns - ready_ns) / 1e9)
            arrive = "%d" % self.arrive_ns if self.arrive_ns else ""
            self._rows.append(
                "%d,%d,%d,%d,%s,%.9f,%.9f,%s\n"
                % (rec.epoch, rec.step - 1, rec.rank, start_ns, forward, self.backward_s, self.optimizer_s, arrive)
            )
            if len(self._rows) >= FLUSH_ROWS:
                self.flush()
        self.arrive_ns, self.backward_s, self.optimizer_s = 0, 0.0, 0.0

    def flush(self):  # type: () -> None
        if not self._rows or os.getpid() != self.pid:
            self._rows = [] if os.getpid() != self.pid else self._rows
            return
        try:
            if self._file is None:
                name = "%s%s%d.csv" % (schema.STEP_PARTS_TABLE, schema.PROBE_STEPS_SEPARATOR, self.pid)
                self._file = open(os.path.join(self.rec.run_dir, schema.SAMPLES_DIR, name), "a")
                if self._file.tell() == 0:
                    self._file.write(",".join(schema.STEP_PART_COLUMNS) + "\n")
            self._file.write("".join(self._rows))
            self._file.flush()
        except (OSError, ValueError):
            pass
        self._rows = []


def patch_torch(torch, recorder):
    """Registers the parts' hooks; called first in the probe's torch patch, so the optimizer's post hook
    runs before the one that may close an optimizer-counted step (its time then falls in that step)."""
    parts = StepParts(recorder)
    backward_call = torch.Tensor.backward

    def backward(self, *args, **kwargs):
        return parts.backward(backward_call, (self,) + args, kwargs)

    backward.__wrapped__ = backward_call
    torch.Tensor.backward = backward
    try:
        optim = importlib.import_module("torch.optim.optimizer")
        optim.register_optimizer_step_pre_hook(parts.optimizer_pre)
        optim.register_optimizer_step_post_hook(parts.optimizer_post)
    except (ImportError, AttributeError):  # torch < 2.0: no global optimizer hooks, no optimizer part
        pass
    add_step, end_epoch, close = recorder.add_step, recorder.end_epoch, recorder.close

    def add_step_with_parts(probe, start_ns, wait_s, compute_s, n):
        add_step(probe, start_ns, wait_s, compute_s, n)
        parts.step_added(start_ns, wait_s)

    def end_epoch_with_parts(*args, **kwargs):  # the recorder's own signature, whatever it takes
        end_epoch(*args, **kwargs)
        parts.flush()

    def close_with_parts():
        close()
        parts.flush()

    recorder.add_step = add_step_with_parts
    recorder.end_epoch = end_epoch_with_parts
    recorder.close = close_with_parts
    atexit.register(close_with_parts)  # before the recorder's own (atexit runs the last registered first)
    return parts
