"""One training step of a user's JAX script counted by XLA's own cost analysis.

A JAX step is the jitted calls a script makes between two batches of a recorded pass (`device.py` watches
`jax.jit`'s functions). Each outermost call made in the second step the probe sees is lowered and compiled
again with the same arguments (`fn.lower(*args).compile()`: JAX's compilation cache hands back the
executable the call itself used) and its `cost_analysis()["flops"]` summed; the sum is written as one
`flops` event when that step ends. The first step (compilation) and the steady epochs pay nothing: the
step counted is in the first epoch, which the steady phase leaves out.

What XLA counts is XLA's convention, not FlopCounterMode's: every elementwise op (1 FLOP an element, the
optimizer's update in the step included), and the multiply-adds with a convolution's zero padding left
out (docs/guide/flops.md). A step with a call XLA cannot analyse, or no jitted call at all, is "not
counted", with why; work outside jitted functions (eager ops) is not seen.

Python 3.6 syntax, standard library only; jax is the script's own, reached through the function given.
"""

from .names import schema

COUNTER = "XLA's cost_analysis() of the jitted calls in the second step"
STEP = 2  # the step counted: the second the probe sees (the first compiles)


class JaxStepCounter(object):
    """Counts the jitted calls of one step (see the module's docstring); `depth` > 0 inside a call or a
    lowering, where nested jitted functions are traced, not called."""

    def __init__(self, recorder):
        self.recorder = recorder
        self.depth = 0
        self.flops = 0.0
        self.calls = 0
        self.why = None  # type: object  # the first reason a call could not be counted
        self.done = False
        recorder.step_hook = self.step_ended

    def counting(self):  # type: () -> bool
        rec = self.recorder
        active = rec.active
        return (
            not self.done
            and self.depth == 0
            and rec.steps_taken == STEP - 1
            and active is not None
            and getattr(active, "recording", False)
        )

    def count(self, fn, args, kwargs, leaves):  # type: (object, tuple, dict, object) -> None
        """One outermost call of the counted step, before it runs (its donated inputs are still there);
        `leaves`: jax's tree_leaves."""
        self.depth += 1
        try:
            if any(_traced(leaf) for leaf in leaves((args, kwargs))):
                raise ValueError("called inside an eager transformation (grad, vmap), whose work is not jitted")
            found = fn.lower(*args, **kwargs).compile().cost_analysis()  # type: ignore[attr-defined]
            if isinstance(found, (list, tuple)):  # older jax: one dict per program
                found = found[0] if found else None
            flops = found.get("flops") if isinstance(found, dict) else None
            if flops is None or flops < 0:
                raise ValueError("XLA's cost analysis gave no flops for %s" % _name(fn))
            self.flops += float(flops)
            self.calls += 1
        except Exception as e:  # noqa: BLE001 - a call not analysed: the step is not counted, and says why
            if self.why is None:
                self.why = "%s: %s: %s" % (_name(fn), type(e).__name__, e)
        finally:
            self.depth -= 1

    def step_ended(self):  # type: () -> None
        """The recorder took a step: at the counted one's end, its count (or why there is none)."""
        if self.done or self.recorder.steps_taken < STEP:
            return
        self.done = True
        if self.why is not None:
            why = "a jitted call could not be analysed (%s)" % self.why
        elif not self.calls:
            return  # no jitted call in the step: not a JAX step (a PyTorch script that imported jax)
        elif self.flops <= 0:
            why = "XLA's cost analysis counted no FLOPs in the step's %d jitted calls" % self.calls
        else:
            fields = {schema.FLOPS_PER_STEP: int(self.flops), schema.FLOPS_COUNTER: COUNTER}
            self.recorder.emit(schema.Event.FLOPS, **fields)
            return
        self.recorder.emit(schema.Event.FLOPS, **{schema.FLOPS_NOT_COUNTED: why})


def _traced(leaf):  # type: (object) -> bool
    return any(c.__name__ == "Tracer" for c in type(leaf).__mro__)


def _name(fn):  # type: (object) -> str
    return str(getattr(fn, "__name__", None) or getattr(getattr(fn, "__wrapped__", None), "__name__", "a function"))
