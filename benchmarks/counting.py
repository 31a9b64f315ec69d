"""Counting instead of timing, for the benches: valgrind's callgrind switched on around
the timed part of a process (`callgrind`), and a callgrind output file's instructions by
ELF object (`cost_by_object`). Used by benchmarks/ab_counts.py (through tf_contender.py)
and refurbish_tf_bench.py --count."""

import os
import re
import subprocess

NAME = re.compile(r"^\((\d+)\)(?:\s+(.*))?$")


def callgrind(state):
    """Turns callgrind's instrumentation of this process "on" or "off"
    (BENCH_CALLGRIND=1), through `callgrind_control` (vgdb). It polls for the answer
    instead of waiting in a system call, so the process is running when valgrind takes
    the command (the way this was tried, 2026-11-29). With tf_contender's `consume`,
    the spin is ~2 M instructions in all, under 0.1 % of row 1's counted epoch."""
    if os.environ.get("BENCH_CALLGRIND") != "1":
        return
    p = subprocess.Popen(["callgrind_control", "--instr=" + state, str(os.getpid())],
                         stdout=subprocess.DEVNULL)
    while p.poll() is None:
        pass
    if p.returncode != 0:
        raise SystemExit(f"callgrind_control --instr={state}: exit {p.returncode}")


def cost_by_object(path):
    """(events, {ELF object: [self cost per event]}) from a callgrind output file.

    Self cost only: the line after a `calls=` line is the call's inclusive cost, which
    the callee's own lines already count."""
    names, cost, events = {}, {}, None
    obj, after_call = "?", False
    with open(path) as f:
        for line in f:
            if line.startswith("events:"):
                events = line.split()[1:]
            elif line.startswith(("ob=", "cob=")):
                key, _, rest = line.rstrip("\n").partition("=")
                m = NAME.match(rest)
                if m and m.group(2) is not None:
                    names[m.group(1)] = m.group(2)
                if key == "ob":
                    obj = names.get(m.group(1), "?") if m else rest
            elif line.startswith("calls="):
                after_call = True
            elif line[:1].isdigit() or line[:1] in "+-*":
                if after_call:
                    after_call = False
                    continue
                row = cost.setdefault(obj, [0] * len(events))
                for i, v in enumerate(line.split()[1:]):
                    row[i] += int(v)
    return events, cost

