"""The concurrency cap of an LLM client: a counting semaphore shared by threads and asyncio tasks."""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from typing import Any

__all__ = ["Limiter"]


class Limiter:
    """A counting semaphore shared by threads and by asyncio tasks on any event loop.

    A released slot is handed straight to the oldest waiter (a thread's Event, or a task's future woken
    through its loop), so neither kind can starve the other and no executor thread is tied up waiting.
    """

    def __init__(self, slots: int) -> None:
        self._lock = threading.Lock()
        self._free = slots
        self._waiters: deque[Any] = deque()

    def acquire(self) -> None:
        with self._lock:
            if self._free > 0 and not self._waiters:
                self._free -= 1
                return
            event = threading.Event()
            self._waiters.append(event)
        event.wait()  # the slot is ours once set

    async def aacquire(self) -> None:
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._free > 0 and not self._waiters:
                self._free -= 1
                return
            waiter = (loop, loop.create_future())
            self._waiters.append(waiter)
        try:
            await waiter[1]
        except asyncio.CancelledError:
            with self._lock:
                try:
                    self._waiters.remove(waiter)
                    handed = False
                except ValueError:
                    handed = True  # release() already gave us the slot: pass it on
            if handed:
                self.release()
            raise

    def release(self) -> None:
        with self._lock:
            while self._waiters:
                waiter = self._waiters.popleft()
                if isinstance(waiter, threading.Event):
                    waiter.set()
                    return
                loop, future = waiter
                try:
                    loop.call_soon_threadsafe(_wake, future)
                    return
                except RuntimeError:  # its loop is closed: that waiter is gone
                    continue
            self._free += 1

    def __enter__(self) -> Limiter:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
