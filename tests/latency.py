"""Injected object-read latency that repeats (shared by tests/gcs_emulator.py and
tests/s3_server.py, and through them by the latency benchmarks).

`KeyedLatency(median_ms, sigma, seed).delay(obj, byte_range)`: the delay of one read,
a function of the seed and the read itself (the object and its byte range), never of
the order in which concurrent requests happen to arrive. So a run repeats: the same
reads wait the same times. sigma 0 is a constant delay; otherwise a lognormal draw of
median `median_ms` and log-space sigma `sigma`, seeded by a hash of (seed, object,
range).

`Straggler`: a read held on purpose, for a test that needs one read to finish after
others (instead of hoping a random delay makes it so). While armed, every read of an
object covering a chosen byte waits until the test releases it.
"""

from __future__ import annotations

import hashlib
import random
import threading


def parse_range(header: str | None) -> tuple[int, float]:
    """(first, last) byte of an HTTP `Range: bytes=first-last` header; the whole object
    without one (or with one this does not parse)."""
    if header and header.startswith("bytes="):
        first, _, last = header[len("bytes="):].partition("-")
        try:
            return int(first or 0), (int(last) if last else float("inf"))
        except ValueError:
            pass
    return 0, float("inf")


class KeyedLatency:
    """Delays keyed on request identity (see the module docs)."""

    def __init__(self, median_ms: float, sigma: float = 0.0, seed: int = 0):
        self.median_s = median_ms / 1000.0
        self.sigma = sigma
        self.seed = seed

    def delay(self, obj: str, byte_range: str | None) -> float:
        """Seconds the read of `byte_range` (a Range header, or None) of `obj` waits."""
        if self.median_s <= 0:
            return 0.0
        if not self.sigma:
            return self.median_s
        key = f"{self.seed}\0{obj}\0{byte_range or ''}".encode()
        draw = int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little")
        return self.median_s * random.Random(draw).lognormvariate(0.0, self.sigma)


class Straggler:
    """While armed, reads of an object whose name ends with `obj` covering byte `offset`
    wait until `release` (or `deadline_s`, so a test that never releases cannot hang its
    server; `timed_out` then says so)."""

    def __init__(self, deadline_s: float = 300.0):
        self.deadline_s = deadline_s
        self._lock = threading.Lock()
        self._target: tuple[str, int] | None = None
        self._released = threading.Event()
        self._released.set()
        self.held = 0
        self.timed_out = False

    def arm(self, obj: str, offset: int) -> None:
        with self._lock:
            self._target = (obj, offset)
            self._released = threading.Event()
            self.held = 0
            self.timed_out = False

    def release(self) -> int:
        """Lets the held reads go; returns how many reads were held since `arm`."""
        with self._lock:
            self._target = None
            self._released.set()
            return self.held

    def wait_if_held(self, obj: str, byte_range: str | None) -> None:
        with self._lock:
            target, released = self._target, self._released
            if target is None:
                return
            first, last = parse_range(byte_range)
            if not (obj.endswith(target[0]) and first <= target[1] <= last):
                return
            self.held += 1
        if not released.wait(self.deadline_s):
            self.timed_out = True
