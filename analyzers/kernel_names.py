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
from typing import Iterable

NAME_WIDTH = 60  # characters of a short name in a terminal table
WORDS_WIDTH = 80  # ... when only the words in which long names differ are kept
FOLDED = "…"

_ANONYMOUS = re.compile(r"(?:\(anonymous namespace\)|<unnamed>|_GLOBAL__N_\w*)::")
_CAST_BOOL = re.compile(r"\(bool\)([01])\b")
_CAST_INT = re.compile(r"\((?:(?:unsigned|signed) )?(?:char|short|int|long|long long|__int128)\)(-?\d+)")
_INT_SUFFIX = re.compile(r"\b(-?\d+)(?:ull|ul|ll|u|l)\b")
_LAMBDA = re.compile(r"\[lambda\([^()]*\) \(instance (\d+)\)\]|\{lambda\([^()]*\)#(\d+)\}")
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
    `cutlass__5x_cudnn::Kernel<…>`), or the symbol itself."""
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
    return "::".join(parts), [FOLDED] if symbol[i : i + 1] == "I" else []


@functools.lru_cache(maxsize=65536)
def canonical(name: str) -> str:
    """One spelling for a kernel whichever demangler wrote it: anonymous namespaces dropped, literal
    casts and suffixes removed (`(int)4`, `4u` -> `4`; `(bool)1` -> `true`), lambdas as `lambda#N`,
    no space before `*`/`&` or between `> >`."""
    text = demangle(name.strip())
    text = _ANONYMOUS.sub("", text)
    text = _CAST_BOOL.sub(lambda m: "true" if m.group(1) == "1" else "false", text)
    text = _CAST_INT.sub(r"\1", text)
    text = _INT_SUFFIX.sub(r"\1", text)
    text = _LAMBDA.sub(lambda m: f"lambda#{m.group(1) or m.group(2)}", text)
    text = _POINTER_SPACE.sub(r"\1", text)
    text = _OPERATOR_CALL.sub("operator()", text)
    text = _CONST_FIRST.sub(r"\1 const", text)
    while _CLOSING_SPACE.search(text):
        text = _CLOSING_SPACE.sub(">>", text)
    return text


def _split(name: str) -> tuple[str, list[str]]:
    """(qualified function name without template arguments, its top-level template arguments)."""
    text = canonical(name)
    if text.startswith("_Z"):
        return _outer_name(text)
    if text.startswith("void "):
        text = text[5:]
    paren = _depth0(text, "(")
    if paren > 0:
        text = text[:paren]
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


def _fold(text: str, keep_depth: int) -> str:
    """Template arguments deeper than `keep_depth` as `<…>`; parameter lists inside an argument
    (a lambda's enclosing function) dropped; `void ` and namespaces before the last name dropped."""
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
    keep = 2 if len(parts) > 1 and parts[-1].startswith("lambda") else 1
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
    template arguments folded."""
    base, args = _split(name)
    return _fit(base + (f"<{FOLDED}>" if args else ""), width)


def key(name: str) -> str:
    """What identifies a kernel across backends: its canonical name without any parameter list (nsys
    writes `const T1 *` where the GNU demangler writes `float const*`) and without `void `."""
    out, paren = [], 0
    for ch in canonical(name):
        if ch == "(":
            paren += 1
        elif ch == ")":
            paren = max(0, paren - 1)
        elif not paren:
            out.append(ch)
    return re.sub(r"(^|[<,]\s*)void ", r"\1", "".join(out))


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
    for short, members in groups.items():
        found |= _distinguish(members) if len(members) > 1 else {members[0]: short}
    fitted = {k: _fit(text, width) for k, text in found.items()}
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
    then only the words (split at `_`, `::`, `<`, `,`) that not all of the family have, runs of shared
    words as `…`; up to `WORDS_WIDTH` characters (the words that tell kernels apart are not cut)."""
    split = {k: _WORD.split(v) for k, v in labels.items()}
    shared = set.intersection(*(set(w[::2]) for w in split.values()))
    out = {}
    for k, words in split.items():
        kept: list[str] = []
        for i in range(0, len(words), 2):
            if i < 6 or words[i] not in shared:
                if kept and kept[-1] != FOLDED and i > 0:
                    kept.append(words[i - 1])
                kept.append(words[i])
            elif not kept or kept[-1] != FOLDED:
                kept.append(FOLDED)
        out[k] = _fit("".join(kept).replace(FOLDED * 2, FOLDED), max(width, WORDS_WIDTH))
    return out


def _distinguish(members: list[str]) -> dict[str, str]:
    split = {m: _split(m) for m in members}
    base = split[members[0]][0]
    most = max(len(a) for _, a in split.values())
    depth = 1
    label: dict[str, str] = {}
    while True:
        shown = {m: [_fold(a, depth - 1) for a in args] + [""] * (most - len(args)) for m, (_, args) in split.items()}
        differ = [i for i in range(most) if len({tuple(v)[i] for v in shown.values()}) > 1]
        for m, values in shown.items():
            parts: list[str] = []
            for i, v in enumerate(values[: len(split[m][1])]):
                item = v if i in differ else FOLDED
                if not (item == FOLDED and parts and parts[-1] == FOLDED):
                    parts.append(item)
            label[m] = f"{base}<{', '.join(parts)}>" if parts else base
        deepest = max((a.count("<") for _, args in split.values() for a in args), default=0)
        if len(set(label.values())) == len(members) or depth > deepest:
            return label
        depth += 1


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
