"""Facts about a script's model the probe can read for free, sent as a `loader` event under
`schema.MODEL_FACTS`: the class count of a classifier (the chance-level rule's ln(classes)); where none
is read, that rule gives no verdict rather than guess."""

from .names import schema


def _say(recorder, classes):  # type: (object, int) -> None
    if classes > 1 and not getattr(recorder, "classes_said", False):
        recorder.classes_said = True
        recorder.emit(schema.Event.LOADER, probe=schema.MODEL_FACTS, knobs={schema.CLASSES: classes})


def keras_classes(recorder, model):
    """A Keras classifier's output width, where its loss is a cross-entropy."""
    try:
        loss = getattr(model, "loss", None)
        name = loss if isinstance(loss, str) else type(loss).__name__
        if "categorical" in str(name).lower():
            _say(recorder, int(model.outputs[0].shape[-1]))
    except Exception:  # noqa: BLE001 - not said: no chance-level verdict
        pass


def torch_classes(torch, recorder):
    """The first `cross_entropy` call's logits width (dimension 1), then the function handed back: one
    call pays a check, the rest nothing (`nn.CrossEntropyLoss` looks the function up on each call)."""
    functional = torch.nn.functional
    original = functional.cross_entropy

    def cross_entropy(input, *args, **kwargs):
        functional.cross_entropy = original
        try:
            if input.dim() >= 2:
                _say(recorder, int(input.shape[1]))
        except Exception:  # noqa: BLE001
            pass
        return original(input, *args, **kwargs)

    cross_entropy.__wrapped__ = original
    functional.cross_entropy = cross_entropy
