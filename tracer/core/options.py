"""Every run option, declared once: name, type, default, bounds, choices, help, and who receives it.

`RunSpec` is that declaration. Each field carries its bounds as pydantic constraints and an `Opt`
that says how it meets users. From it come the `tracer profile` flags (`add_arguments`), the keys a
campaign plan accepts (`plan_options`), the validation of a spec from either (`validate_spec`), and the
configuration sent to the worker (`worker_config`). Adding an option is adding one field here.

pydantic validates (it reads `Annotated` constraints on a plain dataclass, so the spec stays a frozen
dataclass that serialises like every other record); it is also what checks plan files.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import math
import os
import re
from dataclasses import dataclass
from typing import Annotated, Any, Callable, Literal, Mapping, get_args, get_origin, get_type_hints

import pydantic
from pydantic import AfterValidator, Field

from tracer.core.errors import UserError
from tracer.core.frameworks import FRAMEWORKS, framework_info
from tracer.core.schema import AUTOTUNE, FAULT_KINDS
from tracer.core.window import check_text as check_window
from tracer.core.window import worker_window

DEFAULT_IMAGE_SIZE = 224
CORES = os.cpu_count() or 1
CORE_MULTIPLE = 4  # loader processes beyond 4 per core only thrash (each holds a copy of the pipeline's memory)
MAX_PARALLEL = CORE_MULTIPLE * CORES
# Threads are cheap, and oversubscribing the cores on purpose is an experiment the diagnosis reads.
MAX_THREADS = 16 * CORES
DAY_S = 86400
# Linux counts CPU time in clock ticks of 10 ms (SC_CLK_TCK 100): above 100 Hz every sample sees 0 or 1
# tick per process, and the sampler's psutil reads took 24 % of the training's CPU at 1000 Hz.
MAX_SAMPLE_HZ = 100
MODELS = ("alexnet", "mobilenet_v2", "resnet50", "vgg16")
MIN_IMAGE_SIZE = {"alexnet": 64, "mobilenet_v2": 32, "resnet50": 32, "vgg16": 32}
"""Per model, the smallest `--image-size` it trains at: AlexNet's three 3x3/2 max-pools after its 11x11/4
convolution leave nothing below 63 px (every framework fails after its import); the others stride 32."""
BATCH_NORM_MODELS = ("mobilenet_v2", "resnet50")
MIN_BATCH_NORM_VALUES = 4
"""A batch-norm model's last feature map is image_size // 32 square; its batch norm needs at least this many
values per channel (batch x map area): at 32 px, batch 1 is an error in training and batch 2 diverges."""
TRACE_NEEDS: dict[str, tuple[str, tuple[str, ...], str]] = {
    "torch": ("framework", ("pytorch",), "--trace torch is the PyTorch profiler: it traces --framework pytorch only"),
    "cupti": ("device", ("gpu",), "--trace cupti records CUDA activity: it needs --device gpu"),
}
"""What a trace backend needs of the spec wherever the spec comes from (a flag or a plan)."""
DEVICES = ("cpu", "gpu")
TRACE_BACKENDS = ("none", "nsys", "cupti", "torch", "native")
GPU_THREAD_MODES = ("global", "gpu_private", "gpu_shared")


@dataclass(frozen=True)
class Opt:
    """How one `RunSpec` field meets users."""

    help: str
    flag: str = ""  # default: --field-name
    cli: bool = True  # a `tracer profile` flag
    plan: bool = True  # a key a campaign plan may set (in [knobs] or as an axis)
    worker: bool = True  # sent to the worker in its configuration
    frameworks: tuple[str, ...] = ()  # the frameworks that accept it; () = all
    hidden: bool = False  # left out of --help (test hooks)
    required: bool = False  # a required flag (fields without a default may still come from --case)
    noun: str = ""  # what a value is called in messages ("unknown trace backend 'x'"); default: the name
    to_worker: Callable[[Any], Any] | None = None  # the form the worker gets the value in (default: as it is)
    only_why: str = ""  # why only `frameworks` take it, said when another framework is given it
    command: bool = False  # also measures a user's command (`tracer profile -- COMMAND`); else built-in only


def _opt(hint: Any) -> Opt:
    for meta in get_args(hint)[1:]:
        if isinstance(meta, Opt):
            return meta
    raise TypeError(f"RunSpec field without an Opt: {hint!r}")


FiniteFloat = Field(allow_inf_nan=False)


@dataclass(frozen=True)
class RunSpec:
    """Everything that defines what was trained and how it was measured (the `spec` of run.json)."""

    framework: Annotated[str, Opt("the framework to train with (see `tracer env list`)", required=True)]
    model: Annotated[
        Literal["alexnet", "mobilenet_v2", "resnet50", "vgg16"], Opt("the model to train (overrides the case's)")
    ]
    dataset: Annotated[
        str,
        Field(min_length=1),
        Opt(
            "small (791 images), big (6003) or a folder with one sub-folder per class (overrides the case's)",
            worker=False,  # the worker gets the resolved folder, dataset_dir
        ),
    ]
    device: Annotated[Literal["cpu", "gpu"], Opt("cpu (default) or gpu")] = "cpu"
    batch: Annotated[int, Field(ge=1, le=4096), Opt("batch size")] = 1
    epochs: Annotated[int, Field(ge=1, le=100_000), Opt("epochs")] = 1
    limit: Annotated[
        int | None,
        Field(ge=1, le=10_000_000),
        Opt("train on the first N images only (balanced across classes)"),
    ] = None
    image_size: Annotated[
        int,
        Field(ge=32, le=2048),
        Opt(
            "side of the square input in pixels: at least 32 (AlexNet 64; MobileNetV2 and ResNet-50 at 32 px"
            " need a batch of 4)"
        ),
    ] = DEFAULT_IMAGE_SIZE
    num_classes: Annotated[int, Field(ge=2), Opt("classes of the classifier", cli=False, plan=False)] = 3
    lr: Annotated[float, Field(gt=0, le=10, allow_inf_nan=False), Opt("SGD learning rate")] = 0.001
    momentum: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False), Opt("SGD momentum, 0 to 1")] = 0.9
    seed: Annotated[int, Field(ge=0, le=2**32 - 1), Opt("seed for weights, shuffling and flips")] = 0
    on_divergence: Annotated[
        Literal["stop", "continue"],
        Opt(
            "at the first NaN or infinite loss: stop (the run ends as diverged) or continue training"
            " (still marked diverged, its speed never ranked)",
            noun="divergence action",
        ),
    ] = "stop"
    case: Annotated[
        str | None, Opt("a named case, SimpleBig or ComplexSmall (gives model and dataset)", worker=False, plan=False)
    ] = None
    trace: Annotated[
        Literal["none", "nsys", "cupti", "torch", "native"],
        Opt("trace backend", worker=False, noun="trace backend", command=True),
    ] = "none"
    trace_window: Annotated[
        str | None,
        AfterValidator(check_window),
        Opt(
            "what the trace records: epochs (2, 2-3), steps of one epoch (2:100-200) or all; the rest of the run"
            " is sampled, not traced (default: epoch 2 for traced runs of more than 3 epochs, else all; beside a"
            " command: --trace torch only, default all)",
            to_worker=worker_window,  # the parsed bounds, None for the whole run
            command=True,
        ),
    ] = None
    sample_hz: Annotated[
        float,
        Field(ge=0, le=MAX_SAMPLE_HZ, allow_inf_nan=False),
        Opt(
            f"sampling rate of CPU/RAM/threads/GPU in Hz, 0 switches sampling off, at most {MAX_SAMPLE_HZ}"
            " (CPU times move in 10 ms clock ticks)",
            worker=False,
            command=True,
        ),
    ] = 10.0
    timeout_s: Annotated[
        float | None,
        Field(ge=0.001, le=30 * DAY_S, allow_inf_nan=False),
        Opt(
            "stop the training after this many seconds (the run ends as timeout)",
            flag="--timeout",
            worker=False,
            command=True,
        ),
    ] = None
    stall_s: Annotated[
        float,
        Field(ge=0, le=30 * DAY_S, allow_inf_nan=False),
        Opt(
            "end the run as stalled, with its processes' stacks in raw/, after this many seconds without"
            " progress (no event, no step, no CPU in its process tree); 0 never",
            flag="--stall-after",
            worker=False,
            command=True,
        ),
    ] = 180.0
    workers: Annotated[
        Annotated[int, Field(ge=0, le=MAX_PARALLEL)] | Literal["autotune"] | None,
        Opt(
            "parallel decode workers of the input pipeline, the same for every framework (default: min(cores - 1, 8));"
            " 'autotune' lets tf.data choose (TensorFlow only)"
        ),
    ] = None
    prefetch: Annotated[
        int | None, Field(ge=0, le=1024), Opt("batches ready ahead per loader worker (default 2; 0 with 0 workers)")
    ] = None
    pipeline: Annotated[
        Literal["native", "shared"],
        Opt(
            "native: each framework decodes and resizes with its own operators; "
            "shared: every framework uses the same PIL loader (identical pixels)"
        ),
    ] = "native"
    data: Annotated[
        Literal["files", "memory", "synthetic"],
        Opt(
            "where batches come from: files (the framework's pipeline from the JPEGs), memory (decoded once"
            " before the first epoch, then batched from RAM), synthetic (one random batch made on the device)",
            noun="data mode",
        ),
    ] = "files"
    sync_every: Annotated[
        int | None,
        Field(ge=1, le=100_000),
        Opt("read the loss (a host-device sync) every N steps (default: 1 on CPU, 20 on GPU)"),
    ] = None
    threads: Annotated[int | None, Field(ge=1, le=MAX_THREADS), Opt("intra-op threads of the framework")] = None
    amp: Annotated[bool, Opt("mixed precision", frameworks=tuple(name for name, f in FRAMEWORKS.items() if f.amp))] = (
        False
    )
    gpu_thread_mode: Annotated[
        Literal["global", "gpu_private", "gpu_shared"] | None,
        Opt("TensorFlow's GPU thread mode, e.g. gpu_private", frameworks=("tensorflow",)),
    ] = None
    pyspy: Annotated[
        bool,
        Opt(
            "record the worker's Python stacks (all threads) with py-spy into raw/pyspy.speedscope.json",
            worker=False,
            command=True,
        ),
    ] = False
    nsys_sampling: Annotated[
        bool,
        Opt(
            "with --trace nsys: also CPU IP sampling and context switches of the process tree (costs more)",
            worker=False,
            command=True,
        ),
    ] = False
    inject_fault: Annotated[
        str | None,
        AfterValidator(check_fault),
        Opt("a deliberate worker failure KIND@EPOCH, for testing (raise, segfault, exit, hang ...)", hidden=True),
    ] = None
    nproc: Annotated[
        int,
        Field(ge=1, le=64),
        Opt(
            "processes (ranks) of data-parallel training: PyTorch DistributedDataParallel, gloo on the CPU, NCCL "
            "on GPUs (one GPU per rank); each rank trains its shard of the data",
            frameworks=("pytorch",),
            only_why=(
                "the built-in workload trains data-parallel with PyTorch DistributedDataParallel only; the other "
                "frameworks' multi-process training is not built in (profile your own with `tracer profile -- "
                "torchrun ...`)"
            ),
        ),
    ] = 1
    slow_loader: Annotated[
        str | None,
        Opt(
            "a deliberately slow input pipeline RANK:MS (that rank's loader waits MS ms per batch), for testing",
            hidden=True,
            frameworks=("pytorch",),
        ),
    ] = None


@functools.cache
def spec_fields(spec_type: type = RunSpec) -> dict[str, tuple[Any, Opt, dataclasses.Field[Any]]]:
    """field name -> (annotated type, its Opt, the dataclass field), in declaration order. Cached:
    evaluating the type hints is a tenth of a second, and every flag and check asks (do not mutate)."""
    hints = get_type_hints(spec_type, include_extras=True)
    return {f.name: (hints[f.name], _opt(hints[f.name]), f) for f in dataclasses.fields(spec_type)}


def flag_of(name: str, spec_type: type = RunSpec) -> str:
    opt = spec_fields(spec_type)[name][1]
    return opt.flag or "--" + name.replace("_", "-")


def _base_type(hint: Any) -> Any:
    """`Annotated[int | None, ...]` -> int; `Literal[...]` stays."""
    inner = get_args(hint)[0] if get_origin(hint) is Annotated else hint
    args = [a for a in get_args(inner) if a is not type(None)]
    if args and get_origin(inner) is not Literal and len(args) == 1:
        return args[0]
    return inner


def _choices(hint: Any) -> tuple[Any, ...] | None:
    base = _base_type(hint)
    if get_origin(base) is Literal:
        return get_args(base)
    inner = get_args(hint)[0] if get_origin(hint) is Annotated else hint
    for a in get_args(inner):
        if get_origin(a) is Literal:
            return get_args(a)
    return None


def add_arguments(
    parser: argparse.ArgumentParser, spec_type: type = RunSpec, extra_help: Mapping[str, str] | None = None
) -> None:
    """One `tracer profile` flag per CLI option. Values are checked later by `validate_spec`
    (argparse only converts), so the CLI and a plan refuse the same values with the same words.
    `extra_help` adds what only a higher layer knows (the installed frameworks, the trace backends)."""
    for name, (hint, opt, f) in spec_fields(spec_type).items():
        if not opt.cli:
            continue
        help_text = argparse.SUPPRESS if opt.hidden else opt.help
        if extra_help and name in extra_help and not opt.hidden:
            help_text = f"{help_text}: {extra_help[name]}"
        if opt.frameworks:
            help_text = help_text if opt.hidden else f"{help_text} [{', '.join(opt.frameworks)} only]"
        flag = flag_of(name, spec_type)
        base = _base_type(hint)
        if f.default not in (dataclasses.MISSING, None, False) and not opt.hidden:
            help_text = f"{help_text} (default {f.default})"
        if base is bool:
            parser.add_argument(flag, dest=name, action="store_true", help=help_text)
            continue
        kwargs: dict[str, Any] = {"dest": name, "help": help_text, "metavar": flag[2:].replace("-", "_").upper()}
        choices = _choices(hint)
        if choices is not None and not opt.hidden:
            kwargs["help"] = f"{help_text}; one of: {', '.join(map(str, choices))}"
        if base in (int, float):
            kwargs["type"] = ascii_int if base is int else ascii_float
        if opt.required:
            kwargs["required"] = True
        elif f.default is not dataclasses.MISSING:
            kwargs["default"] = f.default
        parser.add_argument(flag, **kwargs)


_INT = re.compile(r"[+-]?[0-9]+")
_FLOAT = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?|[+-]?(inf|infinity|nan)", re.IGNORECASE)


def ascii_int(text: str) -> int:
    """A whole number as people type one: ASCII digits only (Python's int() also takes `1_0` and `٤`)."""
    if not _INT.fullmatch(text.strip()):
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number (digits 0-9)")
    return int(text)


def ascii_float(text: str) -> float:
    """A number in ASCII digits, `.` and an exponent (no `1_0`, no other scripts' digits)."""
    if not _FLOAT.fullmatch(text.strip()):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number (digits 0-9, a point, an exponent)")
    return float(text)


def command_options(spec_type: type = RunSpec) -> tuple[str, ...]:
    """The spec fields that measure a user's command too (the rest describe the built-in workload)."""
    return tuple(name for name, (_, opt, _) in spec_fields(spec_type).items() if opt.command)


def plan_options(spec_type: type = RunSpec) -> dict[str, Any]:
    """The options a campaign plan may set, with their annotated types (for the plan model)."""
    return {name: hint for name, (hint, opt, _) in spec_fields(spec_type).items() if opt.plan}


def validate_spec(values: Mapping[str, Any], spec_type: type = RunSpec) -> Any:
    """A checked spec, or a `UserError` naming the flag and the rule it broke."""
    try:
        return pydantic.TypeAdapter(spec_type).validate_python(dict(values))
    except pydantic.ValidationError as e:
        raise UserError(describe_error(e.errors()[0], spec_type)) from None


def validate_options(values: Mapping[str, Any]) -> None:
    """Checks some options alone (a command's measuring options: no framework, model or dataset to make up),
    with the words and bounds `validate_spec` uses; a `UserError` naming the flag and the rule it broke."""
    try:
        _options_adapter(tuple(values)).validate_python(dict(values))
    except pydantic.ValidationError as e:
        raise UserError(describe_error(e.errors()[0])) from None


@functools.cache
def _options_adapter(names: tuple[str, ...]) -> pydantic.TypeAdapter[Any]:
    fields = spec_fields()
    return pydantic.TypeAdapter(
        dataclasses.make_dataclass("Options", [(n, fields[n][0], fields[n][2]) for n in names], frozen=True)
    )


def describe_error(error: Mapping[str, Any], spec_type: type = RunSpec) -> str:
    """One pydantic error as one line in the words of the flag a user typed."""
    loc = [str(part) for part in error.get("loc", ()) if not str(part).isdigit()]
    name = loc[0] if loc else ""
    fields = spec_fields(spec_type)
    label = flag_of(name, spec_type) if name in fields else name
    noun = (fields[name][1].noun if name in fields else "") or name.replace("_", " ")
    value, ctx, kind = error.get("input"), error.get("ctx") or {}, str(error.get("type", ""))
    if isinstance(value, float) and not math.isfinite(value):
        return f"{label} must be a finite number, not {value}"
    if kind == "value_error":  # a field's own check (AfterValidator) says what is wrong
        return f"{label}: {ctx.get('error', error.get('msg'))}"
    if kind == "literal_error":
        choices = _choices(fields[name][0]) if name in fields else ()
        return f"unknown {noun} '{value}': choose one of {', '.join(map(str, choices or ()))}"
    bounds = {"greater_than_equal": "at least", "greater_than": "more than", "less_than_equal": "at most"}
    if kind == "string_too_short":
        return f"{label} is empty: give a value"
    if kind in bounds:
        limit = ctx.get("ge", ctx.get("gt", ctx.get("le")))
        return f"{label} must be {bounds[kind]} {limit} (got {value})"
    message = str(error.get("msg", "is not valid")).replace("Input should be", "must be")
    return f"{label} {message[0].lower() + message[1:]} (got {value!r})"


def check_fault(text: str | None) -> str | None:
    """`--inject-fault KIND@EPOCH[:RANK]`: a kind the worker knows, an epoch from 1, with --nproc a rank."""
    if text is None or text == "":
        return text
    kind, at, where = text.partition("@")
    epoch, colon, rank = where.partition(":")

    def counting(n: str, least: int) -> bool:
        return n.isascii() and n.isdigit() and int(n) >= least

    if kind not in FAULT_KINDS or (at and not counting(epoch, 1)) or (colon and not counting(rank, 0)):
        raise ValueError(
            f"{text!r}: give KIND@EPOCH[:RANK], KIND one of {', '.join(FAULT_KINDS)}, EPOCH from 1, RANK from 0"
        )
    return text


def check_frameworks(spec: RunSpec, spec_type: type = RunSpec) -> None:
    """Refuses an option that the chosen framework does not take (its worker would ignore it)."""
    for name, (_, opt, f) in spec_fields(spec_type).items():
        if opt.frameworks and spec.framework not in opt.frameworks and getattr(spec, name) != f.default:
            why = f": {opt.only_why}" if opt.only_why else ""
            raise UserError(f"{flag_of(name, spec_type)} applies to {', '.join(opt.frameworks)} only{why}")


AUTOTUNE_FRAMEWORKS = ("tensorflow",)  # whose pipeline chooses its own parallelism (tf.data.AUTOTUNE)


def cross_field_problem(values: Mapping[str, Any]) -> str:
    """The first rule between options that `values` (spec fields by name; absent ones at their defaults)
    breaks, in the words of the flags, or ''. `tracer profile` and a campaign plan's cells are checked
    with it, so a plan is refused at load for what the command line refuses."""
    fields = spec_fields()
    value = {name: values.get(name, f.default) for name, (_, _, f) in fields.items()}
    framework = value["framework"]
    for name, (_, opt, f) in fields.items():
        if opt.frameworks and framework not in opt.frameworks and value[name] != f.default:
            why = f": {opt.only_why}" if opt.only_why else ""
            return f"{flag_of(name)} applies to {', '.join(opt.frameworks)} only{why}"
    if value["workers"] == AUTOTUNE and framework not in AUTOTUNE_FRAMEWORKS:
        return f"--workers autotune is tf.data's AUTOTUNE; {framework} has no such thing: give a worker count"
    if value["nsys_sampling"] and value["trace"] != "nsys":
        return f"{flag_of('nsys_sampling')} applies to --trace nsys only"
    return _model_problem(value) or _trace_problem(value)


def _model_problem(value: Mapping[str, Any]) -> str:
    """The model's smallest image (`MIN_IMAGE_SIZE`), and its last batch norm's values per channel."""
    model, size, batch = value["model"], value["image_size"], value["batch"]
    if size < MIN_IMAGE_SIZE.get(model, 0):
        smallest = MIN_IMAGE_SIZE[model]
        return f"--image-size {size}: {model} needs at least {smallest} px; give {smallest} or more"
    area = (size // 32) ** 2
    if model in BATCH_NORM_MODELS and batch * area < MIN_BATCH_NORM_VALUES:
        return (
            f"--image-size {size} with --batch {batch}: {model}'s last batch norm would see {batch * area}"
            f" value(s) per channel (at least {MIN_BATCH_NORM_VALUES}); give --image-size 64 or"
            f" --batch {-(-MIN_BATCH_NORM_VALUES // max(area, 1))}"
        )
    return ""


def _trace_problem(value: Mapping[str, Any]) -> str:
    """What the trace backend needs of the spec (`TRACE_NEEDS`)."""
    need = TRACE_NEEDS.get(value["trace"])
    if need is not None and value[need[0]] not in need[1]:
        return f"{need[2]}, not --{need[0]} {value[need[0]]}"
    return ""


def check_spec(spec: RunSpec) -> None:
    """A `UserError` for the first rule between options the spec breaks (`cross_field_problem`)."""
    why = cross_field_problem(dataclasses.asdict(spec))
    if why:
        raise UserError(why)


def worker_config(spec: Any, **extra: Any) -> dict[str, Any]:
    """The configuration the worker trains from: every option marked for it, plus what the runner adds."""
    spec_type: type = type(spec)
    config = {
        name: opt.to_worker(getattr(spec, name)) if opt.to_worker else getattr(spec, name)
        for name, (_, opt, _) in spec_fields(spec_type).items()
        if opt.worker
    }
    config["worker_module"] = framework_info(spec.framework).worker_module
    config.update(extra)
    return config
