"""Where this process sits in the v1 memory controller: for tests and the bench row
that make child memory cgroups (tests/test_memory_limit.py, benchmarks/
cold_cgroup_bench.py). The engine reads the limits itself (storage/local/memory_limit.rs);
this only finds the directory to make children in."""

from __future__ import annotations

from pathlib import Path


def v1_memory_dir() -> Path | None:
    """This process's cgroup directory under the v1 memory controller, if mounted."""
    try:
        cgroups = Path("/proc/self/cgroup").read_text().splitlines()
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    for line in cgroups:
        _, controllers, path = line.split(":", 2)
        if "memory" not in controllers.split(","):
            continue
        for m in mounts:
            left, _, right = m.partition(" - ")
            left, right = left.split(), right.split()
            if len(right) >= 3 and right[0] == "cgroup" and "memory" in right[2].split(","):
                root, point = left[3], left[4]
                rel = path[len(root):] if root != "/" and path.startswith(root) else path
                return Path(point) / rel.lstrip("/")
    return None
