"""Each framework's four models, apart from its trainer (`tracer.worker.frameworks`): one module per
framework, named in `tracer.core.frameworks` (`models_module`).

Every module declares `MODELS`, one entry per model of `tracer.core.options.MODELS` (a dict literal, so a
test can read its keys without the framework), and `model_params(name, num_classes, image_size)`: the
parameter counts of the model exactly as a run builds it, which the parity test holds to torchvision's.
"""

from typing import NamedTuple


class ParamCount(NamedTuple):
    trainable: int
    total: int
