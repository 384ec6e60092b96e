"""How a GPU kernel is named in every table: one rule for nsys, CUPTI and Kineto names.

nsys writes EDG-style demangled names (`at::native::<unnamed>::f<(int)4, (bool)1>(T1 *)`), Kineto
writes GNU ones (`at::native::(anonymous namespace)::f<4, true>(float*)`) and CUPTI hands over the
mangled symbol (`_ZN2at6native...`). `demangle` turns a symbol into the GNU form (cxxfilt, the C++
runtime's own demangler); `canonical` then writes both forms alike, so one kernel has one name
whatever backend traced it. `short_name` keeps the function's qualified name (anonymous namespaces
dropped, template arguments folded, no return type or parameters), and `short_names` gives every
name in a table a label no other name in it has: kernels that fold to the same label get the
shortest suffix that tells them apart (the template arguments that differ, no more).
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from typing import Callable, Iterable

NAME_WIDTH = 60  # characters of a short name in a terminal table
WORDS_WIDTH = 80  # ... when only the words in which long names differ are kept
FOLDED = "…"

_ANONYMOUS = re.compile(r"(?:\(anonymous namespace\)|<unnamed>|_GLOBAL__N_\w*)::")
_CAST_BOOL = re.compile(r"\(bool\)([01])\b")
_CAST_INT = re.compile(r"\((?:(?:unsigned|signed) )?(?:char|short|int|long|long long|__int128)\)(-?\d+)")
_INT_SUFFIX = re.compile(r"\b(-?\d+)(?:ull|ul|ll|u|l)\b")
_LAMBDA = re.compile(r"\[lambda\(([^()]*)\) \(instance (\d+)\)\]|\{lambda\(([^()]*)\)#(\d+)\}")
_POINTER_SPACE = re.compile(r"\s+([*&])")
_CLOSING_SPACE = re.compile(r">\s+>")
_OPERATOR_CALL = re.compile(r"operator\s*\(\)")
_CONST_FIRST = re.compile(r"(?<![\w:])const ([A-Za-z_]\w*)(?![\w:<])")


@functools.lru_cache(maxsize=65536)
def demangle(name: str) -> str:
    """The GNU demangled form of an Itanium symbol (`_Z...`); any other name as it is."""
    if not name.startswith("_Z"):
        return name
    import cxxfilt  # here: only CUPTI's mangled names need it

    try:
        return str(cxxfilt.demangle(name))
    except cxxfilt.InvalidName:
        return name


_SOURCE_NAME = re.compile(r"(\d+)")


def _outer_name(symbol: str) -> tuple[str, list[str]]:
    """What a symbol the demangler refuses (some 1,600-character CUTLASS ones: c++filt refuses them
    too) still says plainly: its nested name (`_ZN17cutlass__5x_cudnn6KernelI...` ->
    `cutlass__5x_cudnn::Kernel`) and, as one template argument, the names and numbers of the rest
    in order (`ImplicitGemmConvolution GemmShape 128 128 32 ...`), which tell such kernels apart."""
    if not symbol.startswith("_ZN"):
        return symbol, []
    parts, i = [], 3
    while i < len(symbol) and symbol[i].isdigit():
        digits = _SOURCE_NAME.match(symbol, i)
        assert digits is not None
        length, i = int(digits.group(1)), digits.end()
        parts.append(symbol[i : i + length])
        i += length
    if not parts:
        return symbol, []
    if symbol[i : i + 1] != "I":
        return "::".join(parts), []
    return "::".join(parts), [" ".join(_mangled_words(symbol, i)) or FOLDED]


_MANGLED_WORD = re.compile(r"(\d+)|L[ijlmsthbcx](n?\d+)E|[ST][0-9A-Z]*_")
"""A source name's length, an integer literal, or a substitution (`S1_`, `T_`: no word of its own)."""


def _mangled_words(symbol: str, i: int) -> list[str]:
    """Source names (`9GemmShape` -> GemmShape) and integer literals (`Li128E` -> 128) of a symbol."""
    words: list[str] = []
    while i < len(symbol):
        m = _MANGLED_WORD.match(symbol, i)
        if m is None:
            i += 1
        elif m.group(2) is None and m.group(1) is None:
            i = m.end()
        elif m.group(1) is not None:
            end = m.end() + int(m.group(1))
            words.append(symbol[m.end() : end])
            i = end
        else:
            words.append(m.group(2).replace("n", "-"))
            i = m.end()
    return words


@functools.lru_cache(maxsize=65536)
def canonical(name: str) -> str:
    """One spelling for a kernel whichever demangler wrote it: anonymous namespaces dropped, literal
    casts and suffixes removed (`(int)4`, `4u` -> `4`; `(bool)1` -> `true`), lambdas as `lambda(float)#N`,
    no space before `*`/`&` or between `> >`."""
    text = demangle(name.strip())
    text = _ANONYMOUS.sub("", text)
    text = _CAST_BOOL.sub(lambda m: "true" if m.group(1) == "1" else "false", text)
    text = _CAST_INT.sub(r"\1", text)
    text = _INT_SUFFIX.sub(r"\1", text)
    text = _POINTER_SPACE.sub(r"\1", text)
    text = _LAMBDA.sub(lambda m: f"lambda({m.group(1) or m.group(3) or ''})#{m.group(2) or m.group(4)}", text)
    text = _OPERATOR_CALL.sub("operator()", text)
    text = _CONST_FIRST.sub(r"\1 const", text)
    while _CLOSING_SPACE.search(text):
        text = _CLOSING_SPACE.sub(">>", text)
    return text


def _split(name: str) -> tuple[str, list[str]]:
    """(qualified function name without template arguments, its top-level template arguments, a
    lambda functor among them written as `_functor` names it)."""
    text = canonical(name)
    if text.startswith("_Z"):
        return _outer_name(text)
    base, args = _template(_signature_cut(text))
    return base, [_functor(a) for a in args]


def _signature_cut(text: str) -> str:
    """`void f<...>(params)` -> `f<...>`."""
    text = text.removeprefix("void ")
    paren = _depth0(text, "(")
    return text[:paren] if paren > 0 else text


def _template(text: str) -> tuple[str, list[str]]:
    """`a::f<x, y<z>>` -> (`a::f`, [`x`, `y<z>`]); a name without template arguments -> (name, [])."""
    if not text.endswith(">"):
        return text, []
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        if text[i] == ">":
            depth += 1
        elif text[i] == "<":
            depth -= 1
            if depth == 0:
                return text[:i], _args(text[i + 1 : -1])
    return text, []


_LAMBDA_PARAMS = re.compile(r"lambda\(([^()]*)\)#(\d+)$")


def _functor(arg: str) -> str:
    """A template argument that is a lambda (PyTorch's elementwise kernels take one: `at::native::
    neg_kernel_cuda(at::TensorIteratorBase&)::lambda()#2::operator() const::lambda(float)#1`) named by
    the function it was written in and the types it takes: `neg_kernel_cuda[float]`; the op, which the
    lambda's own number never says. Template arguments holding one keep it, namespaces dropped
    (`gpu_kernel_impl_nocast<neg_kernel_cuda[float]>`, `BinaryFunctor<long, long, long,
    minimum_kernel_cuda[long]>`). Any other argument as it is."""
    if "lambda(" not in arg:
        return arg
    text = _without_params(arg.removeprefix("void "))
    parts = _split_scope(text)
    first = next((i for i, p in enumerate(parts) if p.startswith("lambda(")), -1)
    owner = parts[:first] if first >= 0 else parts
    while len(owner) > 1 and owner[-1].startswith("operator"):
        owner = owner[:-1]
    base, args = _template("::".join(owner))
    name = _split_scope(base)[-1]
    shown = f"{name}<{', '.join(_functor(a) for a in args)}>" if args else name
    if first < 0:
        return shown
    params = _LAMBDA_PARAMS.search(parts[-1])
    types = list(dict.fromkeys(_split_scope(p)[-1] for p in _args(params.group(1)) if p)) if params else []
    number = f"#{params.group(2)}" if params and params.group(2) != "1" else ""  # the second lambda of one function
    return f"{shown}[{'/'.join(types)}]{number}" if types or number else shown


_OP = re.compile(r"(\w+)(?:<[^<>\[\]]*>)?\[([^\]]*)\]")


_IDENTIFIER = re.compile(r"(\w+)(<[^<>\[\]]*>)?")
_NOT_AN_OP = frozenset(
    "float double int long short char bool unsigned signed true false void Half BFloat16 complex c10 at native "
    "detail std array Array memory cuda".split()
)


def _op(functor: str) -> str:
    """The shortest name of what a `_functor` does: the innermost function that wrote a lambda, with the
    types it takes (`sum_functor[float]` of `ReduceOp<float, func_wrapper_t<float, sum_functor<...>
    [float]>, ...>`), else the last named type in it that is not a scalar (`MulFunctor<float>` of
    `gpu_kernel_impl<BinaryFunctor<float, float, float, MulFunctor<float>>>[int]`)."""
    found = _OP.findall(functor)
    if found:
        name, types = found[-1]
        return f"{name}[{types}]"
    named = [
        m.group(0) for m in _IDENTIFIER.finditer(functor) if m.group(1) not in _NOT_AN_OP and not m.group(1).isdigit()
    ]
    return named[-1] if named else _fold(functor, 1)


def _depth0(text: str, char: str) -> int:
    """Index of the first `char` outside template brackets and parentheses opened before it."""
    depth = 0
    for i, ch in enumerate(text):
        if ch == char and depth == 0:
            return i
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth = max(0, depth - 1)
    return -1


def _args(inner: str) -> list[str]:
    out, depth, start = [], 0, 0
    for i, ch in enumerate(inner):
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(inner[start:i].strip())
            start = i + 1
    out.append(inner[start:].strip())
    return out


def _fold(text: str, keep_depth: int, scopes: int = 1) -> str:
    """Template arguments deeper than `keep_depth` as `<…>`; parameter lists inside an argument
    (a lambda's enclosing function) dropped; `void ` and namespaces before the last `scopes` names dropped."""
    out, depth, paren = [], 0, 0
    for ch in text:
        if ch == "(":
            paren += 1
            continue
        if ch == ")":
            paren -= 1
            continue
        if paren:
            continue
        if ch == "<":
            depth += 1
            if depth == keep_depth + 1:
                out.append("<" + FOLDED)
                continue
        elif ch == ">":
            depth -= 1
            if depth == keep_depth:
                out.append(">")
                continue
        if depth <= keep_depth:
            out.append(ch)
    folded = "".join(out).removeprefix("void ")
    parts = _split_scope(folded)
    keep = max(scopes, 2 if len(parts) > 1 and parts[-1].startswith("lambda") else 1)
    return "::".join(parts[-keep:])


def _split_scope(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif depth == 0 and text.startswith("::", i):
            parts.append(text[start:i])
            start = i + 2
            i += 1
        i += 1
    parts.append(text[start:])
    return parts


def short_name(name: str, width: int = NAME_WIDTH) -> str:
    """`void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, ...>(float*, ...)` reads
    as `at::native::cunn_SoftMaxForward<…>`: no return type, parameters or anonymous namespace,
    template arguments folded, except a lambda functor, which names the op (`vectorized_elementwise_
    kernel<…, neg_kernel_cuda[float], …>`)."""
    base, args = _split(name)
    if not args:
        return _fit(base, width)
    raw = _template(_signature_cut(canonical(name)))[1] if "lambda" in name else []
    functors = [i for i, a in enumerate(raw) if "lambda(" in a and i < len(args)]
    label = _with_args(base, args, functors, lambda a: a)
    if len(label) > width:
        label = _with_args(base, args, functors, _op)
    return _fit(label, width)


def _with_args(base: str, args: list[str], shown: list[int], form: Callable[[str], str]) -> str:
    """`base<…, form(args[i]) for i in shown, …>`, each run of other arguments as one `…`."""
    parts: list[str] = []
    for i, arg in enumerate(args):
        item = form(arg) if i in shown else FOLDED
        if not (item == FOLDED and parts and parts[-1] == FOLDED):
            parts.append(item)
    return f"{base}<{', '.join(parts)}>"


def key(name: str) -> str:
    """What identifies a kernel across backends: its canonical name without any parameter list (nsys
    writes `const T1 *` where the GNU demangler writes `float const*`) and without `void `; a lambda
    keeps the types it takes (`lambda(float)#1`), which tell PyTorch's kernels of one op apart."""
    return re.sub(r"(^|[<,]\s*)void ", r"\1", _without_params(canonical(name)))


def _without_params(text: str) -> str:
    """Parameter lists dropped, but for a lambda's (`f(int)::lambda(float)#1` -> `f::lambda(float)#1`)."""
    out: list[str] = []
    paren = 0
    for i, ch in enumerate(text):
        if ch == "(":
            if paren == 0 and text.endswith("lambda", 0, i):
                out.append(ch)
                paren = -1  # inside a lambda's own list: kept
                continue
            paren += 1 if paren >= 0 else 0
        elif ch == ")":
            if paren == -1:
                out.append(ch)
                paren = 0
                continue
            paren = max(0, paren - 1)
        elif paren == 0 or paren == -1:
            out.append(ch)
    return "".join(out)


def short_names(names: Iterable[str], width: int = NAME_WIDTH) -> dict[str, str]:
    """A label for each name, unique among these names: the short name, and where several kernels
    share it, the template arguments in which they differ (others as `…`), unfolded only as deep as
    needed; a label still too long keeps the words in which the kernels differ. Kernels alike in all
    that (overloads, which differ in parameters only) are numbered in the order given. A symbol and
    its demangled form, or nsys's and Kineto's spelling of one kernel, get the same label from the
    same set of other names."""
    by_key: dict[str, list[str]] = {}
    for n in dict.fromkeys(names):
        by_key.setdefault(key(n), []).append(n)
    groups: dict[str, list[str]] = {}
    for k in by_key:
        groups.setdefault(short_name(k, width=10**6), []).append(k)
    found: dict[str, str] = {}
    fitted: dict[str, str] = {}
    for short, members in groups.items():
        if len(members) > 1:
            found |= _distinguish(members)
            fitted |= {k: _fit(found[k], width) for k in members}
        else:  # alone: its own short name at this width (a functor by its op where the whole is too long)
            found[members[0]] = short
            fitted[members[0]] = short_name(members[0], width)
    count = Counter(fitted.values())
    families: dict[str, dict[str, str]] = {}
    for k, text in found.items():
        if count[fitted[k]] > 1:
            families.setdefault("".join(_WORD.split(text)[:5]), {})[k] = text
    label = dict(fitted)
    for family in families.values():
        label |= _words_that_differ(family, width)
    out: dict[str, str] = {}
    count = Counter(label.values())
    seen: Counter[str] = Counter()
    for k, spellings in by_key.items():
        canon = list(dict.fromkeys(canonical(n) for n in spellings))
        for n in spellings:
            own = label[k]
            if count[own] > 1 or len(canon) > 1:
                seen[own] += 1
                own = _fit(own, width - 4) + f" #{seen[own]}"
            out[n] = own
    return out


_WORD = re.compile(r"([_:<>, ]+)")


def _words_that_differ(labels: dict[str, str], width: int) -> dict[str, str]:
    """Labels of one family (same first three words) that collide when cut to `width`: the first three words,
    then the words (split at `_`, `::`, `<`, `,`, space) that not all of the family have (a word met twice
    counts twice: `GemmShape<64, 64, 32>` beside `<64, 128, 16>`), the first of them only, as many as make
    the labels unique; the rest as `…`, up to `WORDS_WIDTH` characters (`sm90_xmma_dgrad…tilesize128x128x32
    …on…`)."""
    split = {k: _WORD.split(v) for k, v in labels.items()}
    counted = {k: _counted(words) for k, words in split.items()}
    shared = set.intersection(*(set(c) for c in counted.values()))
    own = {k: [i for i, c in zip(range(0, len(split[k]), 2), counted[k]) if c not in shared] for k in split}
    out: dict[str, str] = {}
    for count in range(1, max(len(v) for v in own.values()) + 1):
        out = {k: _kept_words(words, {0, 2, 4, *own[k][:count]}, max(width, WORDS_WIDTH)) for k, words in split.items()}
        if len(set(out.values())) == len(out):
            break
    out = out or {k: _kept_words(words, {0, 2, 4}, max(width, WORDS_WIDTH)) for k, words in split.items()}
    alike: dict[str, list[str]] = {}
    for k, text in out.items():
        alike.setdefault(text, []).append(k)
    for members in alike.values():  # still alike: the words that differ among these alone
        if 1 < len(members) < len(labels):
            out |= _words_that_differ({k: labels[k] for k in members}, width)
    return out


def _counted(words: list[str]) -> list[tuple[str, int]]:
    """Each word (every other item of a `_WORD.split`) with how often it came before."""
    seen: Counter[str] = Counter()
    out = []
    for w in words[::2]:
        out.append((w, seen[w]))
        seen[w] += 1
    return out


def _kept_words(words: list[str], keep: set[int], limit: int) -> str:
    kept: list[str] = []
    for i in range(0, len(words), 2):
        if i in keep:
            if kept and kept[-1] != FOLDED and i > 0:
                kept.append(words[i - 1])
            kept.append(words[i])
        elif not kept or kept[-1] != FOLDED:
            kept.append(FOLDED)
    text = "".join(kept)
    return text if len(text) <= limit else text[: limit - 1] + FOLDED


def _distinguish(members: list[str]) -> dict[str, str]:
    """Labels for kernels of one short name: the template arguments in which they differ, unfolded one
    level deeper at a time, and at each depth with as many of their namespaces as it takes
    (`device_kernel<fp8_ptp128c::GemmKernel>` beside `device_kernel<bf16::GemmKernel>`)."""
    split = {m: _split(m) for m in members}
    base = split[members[0]][0]
    most = max(len(a) for _, a in split.values())
    deepest = max((a.count("<") for _, args in split.values() for a in args), default=0)
    label: dict[str, str] = {}
    for depth in range(1, deepest + 2):
        scopes = max(
            (len(_split_scope(_fold(a, depth - 1, 10**6))) for _, args in split.values() for a in args), default=1
        )
        for scope in range(1, max(1, min(scopes, MAX_SCOPES)) + 1):
            label = _labels_at(split, base, most, depth, scope)
            if len(set(label.values())) == len(members):
                return label
    return label


MAX_SCOPES = 6
"""Namespaces of a template argument shown at most, to tell kernels apart."""


def _labels_at(split: dict[str, tuple[str, list[str]]], base: str, most: int, depth: int, scope: int) -> dict[str, str]:
    def form(arg: str) -> str:  # a functor first by its op, then unfolded like any other argument
        if "[" not in arg:
            return _fold(arg, depth - 1, scope)
        return _op(arg) if depth == 1 else _fold(arg, depth - 2, scope)

    shown = {m: [form(a) for a in args] + [""] * (most - len(args)) for m, (_, args) in split.items()}
    differ = [i for i in range(most) if len({tuple(v)[i] for v in shown.values()}) > 1]
    label: dict[str, str] = {}
    for m, values in shown.items():
        parts: list[str] = []
        for i, v in enumerate(values[: len(split[m][1])]):
            item = v if i in differ or "[" in split[m][1][i] else FOLDED  # a functor names the op: always shown
            if not (item == FOLDED and parts and parts[-1] == FOLDED):
                parts.append(item)
        label[m] = f"{base}<{', '.join(parts)}>" if parts else base
    return label


def _fit(label: str, width: int) -> str:
    """Namespaces dropped from the front, then the middle cut, until the label fits `width`."""
    while len(label) > width:
        parts = _split_scope(label)
        if len(parts) < 2:
            break
        label = "::".join(parts[1:])
    if len(label) > width:
        keep = width - 1
        label = label[: keep // 2] + FOLDED + label[-(keep - keep // 2) :]
    return label
