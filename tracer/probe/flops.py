"""One training step of a user's PyTorch script counted with PyTorch's own FLOP counter.

`torch.utils.flop_counter.FlopCounterMode` is entered when the script's first optimizer step returns and
left when its second one does: it sees the second step's forward, backward and update, and nothing of the
first (whose start the probe cannot know) nor of the later ones. That step is in the first epoch, which
the steady phase leaves out, so the counter's own cost stays off the timed steps (a script of one epoch
has no steady phase apart: its first steps are in it, and the run says so). The count is written as one
`flops` event; a script whose second step never comes, or a torch without the counter, gets a `flops`
event saying why it was not counted.

Python 3.6 syntax, standard library only; torch is the script's own, reached through the module given.
"""

import importlib

from .names import schema

COUNTER = "torch.utils.flop_counter.FlopCounterMode, the second optimizer step"


def count_torch_step(torch, recorder):
    """Registers the optimizer hook that counts the second step (torch >= 2.1 has the counter). Both modules
    are imported by name: `torch.optim.optimizer` is not yet an attribute when torch has just loaded."""
    try:
        register = importlib.import_module("torch.optim.optimizer").register_optimizer_step_post_hook
        FlopCounterMode = importlib.import_module("torch.utils.flop_counter").FlopCounterMode  # noqa: N806
    except (ImportError, AttributeError) as e:
        why = "this torch has no FlopCounterMode (%s: %s)" % (type(e).__name__, e)
        recorder.emit(schema.Event.FLOPS, **{schema.FLOPS_NOT_COUNTED: why})
        return
    state = {"steps": 0, "mode": None, "handle": None}

    def after_step(optimizer, args, kwargs):
        state["steps"] += 1
        if state["steps"] == 1:
            mode = FlopCounterMode(display=False)
            mode.__enter__()
            state["mode"] = mode
        elif state["steps"] == 2 and state["mode"] is not None:
            mode, state["mode"] = state["mode"], None
            mode.__exit__(None, None, None)
            state["handle"].remove()
            flops = int(mode.get_total_flops())
            if flops > 0:
                recorder.emit(schema.Event.FLOPS, **{schema.FLOPS_PER_STEP: flops, schema.FLOPS_COUNTER: COUNTER})
            else:
                why = "the counter saw no matrix product or convolution in the step"
                recorder.emit(schema.Event.FLOPS, **{schema.FLOPS_NOT_COUNTED: why})

    state["handle"] = register(after_step)
