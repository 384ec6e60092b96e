"""When an asynchronous framework's step is done, observed without changing how the script runs (JAX).

A jitted call returns before its work is done: a loop timed on the host sees each step end at its
dispatch, and the work queued behind the epoch's last dispatch drains after the epoch. So `jax.jit`'s
functions are wrapped: each call made inside a recording pass hands its outputs to a watcher thread,
which waits for them (`block_until_ready` on its own thread: the script's thread never waits for it)
and notes when each call's outputs were ready. A step then ends when the later of its host work and
its outputs are done, and an epoch when its last step's outputs are (`Recorder.device_step`).

An output donated to a later call before the watcher reached it cannot be waited on; the call's other
outputs (the loss, metrics) come from the same execution and are. A call whose outputs are all gone is
taken as done when the next one observed is (calls complete in order on a device)."""

import atexit
import threading
import time

from .flops_jax import JaxStepCounter

#: How long the process's exit waits for the watcher to see the last outputs (the script's own end
#: usually waited for them already: a loss printed, `block_until_ready`).
EXIT_WAIT_S = 30.0

wall_ns = getattr(time, "time_ns", lambda: int(time.time() * 1e9))


class Watcher(object):
    """The thread that waits for jitted calls' outputs, in dispatch order."""

    def __init__(self, tree_leaves):
        self._leaves = tree_leaves
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
                leaves = [x for x in self._leaves(outputs) if type(x).__name__ == "ArrayImpl"]
            except Exception:  # noqa: BLE001
                leaves = []
            outputs = None
            for leaf in leaves:
                try:
                    leaf.block_until_ready()
                except Exception:  # noqa: BLE001 - donated or deleted: its siblings say when the call was done
                    pass
            leaves = None
            with self._cond:
                self._ready_ns[number] = wall_ns()
                self.done = number
                self._cond.notify_all()


def patch_jax(jax, recorder):
    """`jax.jit` handing out functions whose calls in a recording pass are watched (see the docstring),
    and the second step's calls counted (`flops_jax`). A call inside another's tracing (or the counter's
    lowering) is traced, not run: it is passed through."""
    original = jax.jit
    counter = JaxStepCounter(recorder)
    leaves = jax.tree_util.tree_leaves
    state = {}  # type: dict

    def watcher():
        if "watcher" not in state:
            state["watcher"] = Watcher(leaves)
            recorder.watcher = state["watcher"]
        return state["watcher"]

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
            active = recorder.active
            if active is not None and getattr(active, "recording", False):
                recorder.dispatched(watcher().put(out))
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

    def catch_up():  # type: () -> None
        """At exit, before JAX's own exit handlers (registered before this one, so run after it): the
        script's thread waits here, not holding the interpreter, so the watcher notes the last outputs
        when they are ready rather than when the exit's own work lets it run."""
        if "watcher" in state:
            state["watcher"].wait(state["watcher"].dispatched, EXIT_WAIT_S)

    atexit.register(catch_up)


class _Bound(object):
    __slots__ = ("_f", "_obj")

    def __init__(self, f, obj):
        self._f, self._obj = f, obj

    def __call__(self, *args, **kwargs):
        return self._f(self._obj, *args, **kwargs)


def patch_jax_version(jax, recorder):
    recorder.frameworks["jax"] = str(getattr(jax, "__version__", ""))
    patch_jax(jax, recorder)
