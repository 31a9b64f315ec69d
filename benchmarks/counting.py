"""Counting instead of timing, for the benches: the command that runs a process under
valgrind's callgrind with nothing counted until it says so (`command`), the switch the
process throws around its timed part (`callgrind`), and a callgrind output file's
instructions by ELF object (`cost_by_object`, `instructions`). Used by
benchmarks/ab_counts.py (through tf_contender.py), refurbish_tf_bench.py --count and
sweep_bench.py --count."""

import os
import re
import subprocess

NAME = re.compile(r"^\((\d+)\)(?:\s+(.*))?$")


def command(out_file, *options):
    """The valgrind prefix of a command counted into `out_file`: instrumentation off
    until the process turns it on (`callgrind`); `options` are callgrind's own."""
    return ["valgrind", "--tool=callgrind", "--instr-atstart=no", *options,
            f"--callgrind-out-file={out_file}"]


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


def instructions(path):
    """{ELF object's file name: instructions executed in it} from a callgrind output
    file."""
    events, cost = cost_by_object(path)
    ir, out = events.index("Ir"), {}
    for o, c in cost.items():
        name = os.path.basename(o)
        out[name] = out.get(name, 0) + c[ir]
    return out
