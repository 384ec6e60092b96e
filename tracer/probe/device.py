"""When an asynchronous framework's step is done, observed without changing how the script runs (JAX,
MXNet's engine).

A jitted call returns before its work is done: a loop timed on the host sees each step end at its
dispatch, and the work queued behind the epoch's last dispatch drains after the epoch. So `jax.jit`'s
functions are wrapped: each call made inside a recording pass hands its outputs to a watcher thread,
which waits for them (`block_until_ready` on its own thread: the script's thread never waits for it)
and notes when each call's outputs were ready. A step then ends when the later of its host work and
its outputs are done, and an epoch when its last step's outputs are (`Recorder.device_step`).

An output donated to a later call before the watcher reached it cannot be waited on; the call's other
outputs (the loss, metrics) come from the same execution and are. A call whose outputs are all gone is
taken as done when the next one observed is (calls complete in order on a device).

MXNet's engine defers the same way, on the CPU too: `Trainer.step` returns once the updates are queued.
Each update made in a recording pass hands a marker of its parameters to the watcher, which waits for it
(`wait_to_read`, on its own thread); a step ends when its first parameter is updated (`_update_marker`:
one engine copy of one value a step, queued behind the update)."""

import atexit
import threading
import time

from .flops_jax import JaxStepCounter

#: How long the process's exit waits for the watcher to see the last outputs (the script's own end
#: usually waited for them already: a loss printed, `block_until_ready`).
EXIT_WAIT_S = 30.0

wall_ns = getattr(time, "time_ns", lambda: int(time.time() * 1e9))


def _block(leaf):  # type: (object) -> None
    leaf.block_until_ready()


class Watcher(object):
    """The thread that waits for watched calls' outputs, in dispatch order: `leaves(outputs)` gives the
    arrays to wait for, `wait(array)` waits for one."""

    def __init__(self, leaves, wait=_block):
        self._leaves = leaves
        self._wait = wait
        self._cond = threading.Condition()
        self._queue = []  # type: list
        self.dispatched = 0  # calls handed over so far: a call's number is its position
        self.done = 0  # calls whose outputs were seen ready
        self._ready_ns = {}  # type: dict  # call number -> wall ns its outputs were ready
        self._thread = threading.Thread(target=self._run, name="dl-tracer-device-watch")
        self._thread.daemon = True
        self._thread.start()

    def put(self, outputs):  # type: (object) -> int
        with self._cond:
            self.dispatched += 1
            self._queue.append((self.dispatched, outputs))
            self._cond.notify()
            return self.dispatched

    def ready_ns(self, number):  # type: (int) -> object
        """When call `number`'s outputs were ready (wall ns), None while not yet seen."""
        with self._cond:
            return self._ready_ns.get(number) if number <= self.done else None

    def forget(self, number):  # type: (int) -> None
        with self._cond:
            for n in [n for n in self._ready_ns if n <= number]:
                del self._ready_ns[n]

    def wait(self, number, timeout):  # type: (int, float) -> None
        """Until call `number` is seen (at exit only: the script itself never waits here)."""
        end = time.time() + timeout
        with self._cond:
            while self.done < number and time.time() < end:
                self._cond.wait(0.05)

    def _run(self):  # type: () -> None
        while True:
            with self._cond:
                while not self._queue:
                    self._cond.wait()
                number, outputs = self._queue.pop(0)
            try:
                leaves = list(self._leaves(outputs))
            except Exception:  # noqa: BLE001
                leaves = []
            outputs = None
            for leaf in leaves:
                try:
                    self._wait(leaf)
                except Exception:  # noqa: BLE001 - donated or deleted: its siblings say when the call was done
                    pass
            leaves = None
            with self._cond:
                self._ready_ns[number] = wall_ns()
                self.done = number
                self._cond.notify_all()


def watching(recorder, leaves, wait=_block):
    """`put(outputs)`: hands a call made in a recording pass to this process's watcher (made at the first
    call), so its step ends when they are ready. At exit the script's thread waits for the last ones,
    before the framework's own exit handlers (registered before this one, so run after it), not holding
    the interpreter: the watcher notes them when they are ready, not when the exit lets it run."""
    state = {}  # type: dict

    def put(outputs):  # type: (object) -> None
        active = recorder.active
        if active is None or not getattr(active, "recording", False):
            return
        if "watcher" not in state:
            state["watcher"] = Watcher(leaves, wait)
            recorder.watcher = state["watcher"]
        recorder.dispatched(state["watcher"].put(outputs))

    def catch_up():  # type: () -> None
        if "watcher" in state:
            state["watcher"].wait(state["watcher"].dispatched, EXIT_WAIT_S)

    atexit.register(catch_up)
    return put


def patch_jax(jax, recorder):
    """`jax.jit` handing out functions whose calls in a recording pass are watched (see the docstring),
    and the second step's calls counted (`flops_jax`). A call inside another's tracing (or the counter's
    lowering) is traced, not run: it is passed through."""
    original = jax.jit
    counter = JaxStepCounter(recorder)
    leaves = jax.tree_util.tree_leaves
    put = watching(recorder, lambda out: [x for x in leaves(out) if type(x).__name__ == "ArrayImpl"])

    class Watched(object):
        """A jitted function, called as itself; its other attributes (`lower`, `trace` ...) its own."""

        def __init__(self, fn):
            self.__wrapped__ = fn

        def __call__(self, *args, **kwargs):
            if counter.depth:
                return self.__wrapped__(*args, **kwargs)
            if counter.counting():
                counter.count(self.__wrapped__, args, kwargs, leaves)
            counter.depth += 1
            try:
                out = self.__wrapped__(*args, **kwargs)
            finally:
                counter.depth -= 1
            put(out)
            return out

        def __getattr__(self, name):
            return getattr(self.__wrapped__, name)

        def __get__(self, obj, objtype=None):  # a jitted method binds as the function it wraps
            return self if obj is None else _Bound(self, obj)

    def jit(*args, **kwargs):
        fn = original(*args, **kwargs)
        return Watched(fn) if callable(fn) else fn

    jit.__wrapped__ = original
    jit.__doc__ = original.__doc__
    jax.jit = jit


def _update_marker(trainer):  # type: (object) -> object
    """A copy of one value of the first trained parameter (the first layer's: the last its backward
    reaches), queued behind this update: a fresh array, ready when the update is done. The parameter itself
    is updated in place, so a wait on it begun after the next update was queued would wait for that too."""
    for p in getattr(trainer, "_params", ()):
        if p.grad_req != "null":
            return p.list_data()[0].reshape((-1,))[0:1].copy()
    return None


def _wait_to_read(array):  # type: (object) -> None
    array.wait_to_read()


def patch_mxnet_trainer(trainer_module, recorder):
    """`Trainer.step` and `update` hand the parameters they updated to the watcher (see the docstring)."""
    put = watching(recorder, lambda marker: [marker], _wait_to_read)
    cls = trainer_module.Trainer

    def watched(original):
        def update(self, *args, **kwargs):
            out = original(self, *args, **kwargs)
            active = recorder.active
            if active is not None and getattr(active, "recording", False):
                try:
                    marker = _update_marker(self)
                except Exception:  # noqa: BLE001 - not watched: the step ends on the host
                    marker = None
                if marker is not None:
                    put(marker)
            return out

        update.__wrapped__ = original
        update.__doc__ = original.__doc__
        return update

    for name in ("step", "update"):
        setattr(cls, name, watched(getattr(cls, name)))


class _Bound(object):
    __slots__ = ("_f", "_obj")

    def __init__(self, f, obj):
        self._f, self._obj = f, obj

    def __call__(self, *args, **kwargs):
        return self._f(self._obj, *args, **kwargs)


def patch_jax_version(jax, recorder):
    recorder.frameworks["jax"] = str(getattr(jax, "__version__", ""))
    patch_jax(jax, recorder)
