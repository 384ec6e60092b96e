"""`cached_property` without a lock shared by every instance.

Why: in Python 3.11, `functools.cached_property` computes under one lock per decorated attribute, held for
every instance of the class (python/cpython#87634; Python 3.12 dropped it). The viewer loads runs in threads:
five runs' views were built one at a time, each loader thread waiting for another run's build. This one
takes no lock, as 3.12's does: two threads asking one instance at once may both compute, and the first to
finish is kept.
"""

from __future__ import annotations

import functools
from typing import Any, Generic, TypeVar, overload

T = TypeVar("T")


class cached_property(functools.cached_property[T], Generic[T]):  # noqa: N801 - named as functools' is
    """`functools.cached_property`'s behaviour (kept in the instance's `__dict__`), without its lock."""

    @overload
    def __get__(self, instance: None, owner: type[Any] | None = None) -> cached_property[T]: ...
    @overload
    def __get__(self, instance: object, owner: type[Any] | None = None) -> T: ...

    def __get__(self, instance: object | None, owner: type[Any] | None = None) -> T | cached_property[T]:
        if instance is None:
            return self
        cache = instance.__dict__
        name = self.attrname
        if name is None:
            raise TypeError("cannot use cached_property without calling __set_name__ on it")
        if name in cache:
            value: T = cache[name]
            return value
        value = self.func(instance)
        return cache.setdefault(name, value)  # type: ignore[no-any-return]
