"""`tracer.core.cached.cached_property`: computed once per instance, kept, and one instance's computing
never holds up another's (functools' in Python 3.11 does: one lock for every instance)."""

from __future__ import annotations

import threading

from tracer.core.cached import cached_property


class Slow:
    def __init__(self, release: threading.Event) -> None:
        self.release = release
        self.calls = 0

    @cached_property
    def part(self) -> int:
        self.calls += 1
        self.release.wait()
        return id(self)


def test_computed_once_and_kept_in_the_instance() -> None:
    ready = threading.Event()
    ready.set()
    one = Slow(ready)
    assert one.part == id(one) and one.part == id(one)
    assert one.calls == 1 and one.__dict__["part"] == id(one)
    assert isinstance(Slow.part, cached_property)


def test_one_instance_computing_does_not_hold_up_another() -> None:
    held, free = threading.Event(), threading.Event()
    free.set()
    blocked, other = Slow(held), Slow(free)
    first = threading.Thread(target=lambda: blocked.part, daemon=True)
    first.start()
    while not blocked.calls:  # the first thread is inside `part`, waiting for `held`
        threading.Event().wait(0.01)
    done = threading.Event()
    second = threading.Thread(target=lambda: (other.part, done.set()), daemon=True)
    second.start()
    finished = done.wait(60)  # generous: this asks whether it ends at all, not how fast
    held.set()
    first.join(60)
    assert finished, "the second instance waited for the first one's computation"
    assert blocked.part == id(blocked) and other.part == id(other)
