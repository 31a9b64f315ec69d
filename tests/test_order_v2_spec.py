"""Order version 2 (docs/FORMAT.md §5.8) reimplemented in Python from the text alone,
checked against the golden values printed there and against the CLI's
`order --order-version 2` (instance-based, page-aware, sharded, several page sizes).

Nothing here is taken from the Rust code: if the two disagree, the text is not precise
enough or one of them is wrong.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import parse_order, run_ok

M64 = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15


def mix64(z: int) -> int:
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def round_keys(seed: int, epoch: int, purpose: int, extra: int) -> list[int]:
    h = 0
    for w in (seed, epoch, purpose, extra):
        h = mix64(((h ^ w) + GAMMA) & M64)
    keys = []
    for _ in range(12):
        h = (h + GAMMA) & M64
        keys.append(mix64(h))
    return keys


class Bijection:
    def __init__(self, n: int, keys: list[int]):
        b = max(2, (n - 1).bit_length()) if n > 1 else 2
        self.n, self.keys = n, keys
        self.c = b // 2
        self.mask_r = (1 << self.c) - 1
        self.mask_l = (1 << (b - self.c)) - 1

    def _e(self, x: int) -> int:
        left, right = x >> self.c, x & self.mask_r
        for i in range(0, 12, 2):
            left ^= mix64(right ^ self.keys[i]) & self.mask_l
            right ^= mix64(left ^ self.keys[i + 1]) & self.mask_r
        return (left << self.c) | right

    def _d(self, y: int) -> int:
        left, right = y >> self.c, y & self.mask_r
        for i in range(10, -1, -2):
            right ^= mix64(left ^ self.keys[i + 1]) & self.mask_r
            left ^= mix64(right ^ self.keys[i]) & self.mask_l
        return (left << self.c) | right

    def __call__(self, x: int) -> int:
        y = self._e(x)
        while y >= self.n:
            y = self._e(y)
        return y

    def inverse(self, y: int) -> int:
        x = self._d(y)
        while x >= self.n:
            x = self._d(x)
        return x


def ids_per_unit(page: int, n: int, total_bytes: int) -> int:
    if total_bytes == 0:
        return 1
    return max(1, page * n // total_bytes)


def order_v2(n: int, seed: int, epoch: int, page_aware: bool = False, c: int = 1,
             num_shards: int = 1, shard_index: int = 0) -> list[int]:
    lo = n * shard_index // num_shards
    hi = n * (shard_index + 1) // num_shards
    if not page_aware:
        pi = Bijection(n, round_keys(seed, epoch, 4, 0))
        return [pi(p) for p in range(lo, hi)]
    m = -(-n // c)
    r = n - (m - 1) * c
    pi_u = Bijection(m, round_keys(seed, epoch, 5, 0))
    s = pi_u.inverse(m - 1)
    out = []
    for p in range(lo, hi):
        if p < s * c:
            j, o = p // c, p % c
        else:
            q = p - s * c
            if q < r:
                j, o = s, q
            else:
                j, o = s + 1 + (q - r) // c, (q - r) % c
        u = pi_u(j)
        length = r if u == m - 1 else c
        out.append(u * c + Bijection(length, round_keys(seed, epoch, 6, u))(o))
    return out


def test_golden_values_of_the_text():
    assert mix64(GAMMA) == 0xE220A8397B1DCDAF
    assert order_v2(10, 42, 0) == [9, 5, 6, 8, 3, 4, 0, 2, 1, 7]
    assert order_v2(10, 42, 1) == [6, 1, 3, 4, 8, 9, 2, 5, 0, 7]
    assert order_v2(50, 42, 0, True, 7)[:15] == [48, 43, 46, 44, 47, 42, 45, 17, 14, 20, 19, 18, 16, 15, 31]
    pi = Bijection(M64, round_keys(1, 0, 4, 0))
    assert [pi(p) for p in range(4)] == [
        14685068322112458734, 6810966675425185576, 10050291127393755489, 11451829945180286981,
    ]


@pytest.mark.parametrize("n", [1, 2, 3, 10, 37, 100])
@pytest.mark.parametrize("c", [1, 3, 7])
def test_python_orders_are_permutations(n, c):
    for page_aware in (False, True):
        whole = order_v2(n, 5, 2, page_aware, c)
        assert sorted(whole) == list(range(n))
        parts = [order_v2(n, 5, 2, page_aware, c, 3, k) for k in range(3)]
        assert sum(parts, []) == whole


@pytest.mark.parametrize("page_size", [512, 4096])
@pytest.mark.parametrize("name", ["mixed.tfrecord", "sizes.tfrecord"])
def test_cli_matches_the_text(indexed, name, page_size):
    data, offsets = indexed(name)
    n = len(offsets)
    c = ids_per_unit(page_size, n, os.path.getsize(data))
    for seed, epoch in [(0, 0), (42, 3)]:
        for page_aware in (False, True):
            for shards in (1, 3):
                for k in range(shards):
                    args = ["--seed", seed, "--epoch", epoch, "--page-size", page_size,
                            "--order-version", 2]
                    if page_aware:
                        args.append("--page-aware")
                    if shards > 1:
                        args += ["--num-shards", shards, "--shard-index", k]
                    got = parse_order(run_ok("order", data, *args))
                    want = order_v2(n, seed, epoch, page_aware, c, shards, k)
                    assert got == want, (name, page_size, seed, epoch, page_aware, shards, k)


def test_cli_order_version_1_is_the_default(indexed):
    data, _ = indexed("mixed.tfrecord")
    default = parse_order(run_ok("order", data, "--seed", 9))
    assert parse_order(run_ok("order", data, "--seed", 9, "--order-version", 1)) == default
    assert parse_order(run_ok("order", data, "--seed", 9, "--order-version", 2)) != default
