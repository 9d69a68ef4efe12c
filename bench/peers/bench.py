#!/usr/bin/env python3
"""Run every workload on vlad and on every installed peer; print a table.

Called by bench/run.sh (which builds vlad first); standard library only.

    python3 bench/peers/bench.py [--quick | --full] [--reps N] [--rounds K] [--only REGEX]
                                 [--peers LIST] [--timeout S] [--json FILE] [--md FILE]

Times are CPU seconds (user + system of the process, all its threads), the
median over repetitions: the machines this runs on may be shared, and CPU time
is far less disturbed by other load than wall time.  Peers time themselves
(around the workload only: no start-up, no imports, no JIT compilation), and
so does vlad (`vlad --time`: each top-level expression's CPU time; not
start-up, reading, compiling, nor the definitions that build a workload's
input, such as the lists of hvp-sum, which the peers also build untimed).
As the peers run their repetitions in one process and report the median, so
does vlad (`vlad --time --repeat N`); the notes name the rows whose first run
took much longer (fresh memory from the system).
`--vlad-clock process` times vlad as sessions before 22 did: from outside, the
whole process, less the CPU time of an empty program (start-up and prelude), or
for the rows whose input is built first, less that of a program that only
builds it.  The vlad binary is target/release/vlad, or
$VLAD if set (to measure another build).  Every peer's result is checked against
vlad's (or, where vlad has none, Chez's) to a relative 1e-6.
"""
import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
VLAD = os.environ.get("VLAD") or os.path.join(ROOT, "target", "release", "vlad")
VLAD_DIR = os.path.join(HERE, "vlad")
VENV_PY = os.path.join(HERE, ".venv", "bin", "python")

PEERS = ["chez", "chez-load", "chez-interp", "autograd", "jax", "jax-jit", "torch", "cpython"]
PEER_TITLES = {
    "chez": "Chez compiled",
    "chez-load": "Chez loaded",
    "chez-interp": "Chez interpreted",
    "autograd": "autograd",
    "jax": "JAX eager",
    "jax-jit": "JAX jit",
    "torch": "torch.func",
    "cpython": "CPython",
}
VARIANTS = ["FF", "FR", "RF", "RR"]

# ----------------------------------------------------------------------------
# Rows: (key, description).  A result line "RESULT key seconds values..." from
# any job fills the cell of its peer in row `key` (a "-jit" suffix is dropped).
ROWS = [("fib", "fib(30), no AD: the evaluator core")]
ROWS += [(f"saddle-{v}", f"saddle, full solve, {v}") for v in VARIANTS]
ROWS += [(f"saddle-grad-{v}", f"saddle: one outer gradient, {v}") for v in VARIANTS]
ROWS += [(f"particle-{v}", f"particle, full solve, {v}") for v in VARIANTS]
ROWS += [(f"particle-grad-{v}", f"particle: one outer gradient, {v}") for v in VARIANTS]
ROWS += [("hvp-quad-FR", "HVP of 2x²+3xy+4y², per call, fwd-over-rev"),
         ("hvp-quad-RR", "HVP of 2x²+3xy+4y², per call, rev-over-rev")]
for n in (1000, 10000, 100000):
    for m in ("FR", "RR"):
        ROWS.append((f"hvp-sum-{m}-{n}", f"HVP of a sum of n={n} cubes, {m}"))
for n in (1000, 10000, 100000):
    ROWS.append((f"product-R-{n}", f"d/dx of a product of n={n} terms, reverse"))
ROWS.append(("product-F-100000", "d/dx of a product of n=100000 terms, forward"))
for s in (100, 1000, 10000):
    ROWS.append((f"xor-{s}", f"XOR backprop, {s} steps"))

# vlad rows with a primal (the same computation without derivatives), for the
# gradient/primal ratios: row key -> primal file (without .vlad)
PRIMAL = {"hvp-quad-FR": "hvp-quad-primal-10000", "hvp-quad-RR": "hvp-quad-primal-10000"}
for n in (1000, 10000, 100000):
    for m in ("FR", "RR"):
        PRIMAL[f"hvp-sum-{m}-{n}"] = f"hvp-sum-primal-{n}"
    PRIMAL[f"product-R-{n}"] = f"product-primal-{n}"
PRIMAL["product-F-100000"] = "product-primal-100000"
for s in (100, 1000, 10000):
    PRIMAL[f"xor-{s}"] = f"xor-primal-{s}"
# vlad files whose input is built first -> the program that only builds it
# (subtracted instead of the empty program: the peers build it untimed)
SETUP = {}
for n in (1000, 10000, 100000):
    for m in ("FR", "RR", "primal"):
        SETUP[f"hvp-sum-{m}-{n}"] = f"hvp-sum-setup-{n}"
# how many units one vlad run is (per-call rows): key -> divisor
VLAD_UNITS = {"hvp-quad-FR-10000": 10000, "hvp-quad-RR-10000": 10000, "hvp-quad-primal-10000": 10000}


def vlad_not_run(profile):
    """rows vlad leaves out in a profile -> why (shown in the table)"""
    out = {}
    if profile == "quick":
        for k in ("saddle-FF", "saddle-FR", "saddle-RF", "hvp-sum-FR-100000", "hvp-sum-RR-100000"):
            out[k] = "not run (--quick)"
        for v in VARIANTS:
            out[f"particle-{v}"] = "not run (--quick)"
    return out


def vlad_jobs(profile):
    """(file, reps) for vlad; the row key is the file name.  Repetitions run in one
    process (`vlad --repeat`), as Chez runs its 3-5; the full solves take a few
    tenths of a second each."""
    heavy = 3
    jobs = [("fib", 3)]
    jobs += [(f"saddle-{v}", heavy) for v in VARIANTS]
    jobs += [(f"saddle-grad-{v}", 3) for v in VARIANTS]
    jobs += [(f"particle-{v}", heavy) for v in VARIANTS]
    jobs += [(f"particle-grad-{v}", 3) for v in VARIANTS]
    jobs += [("hvp-quad-FR-10000", 3), ("hvp-quad-RR-10000", 3)]
    jobs += [("hvp-sum-FR-1000", 3), ("hvp-sum-RR-1000", 3),
             ("hvp-sum-FR-10000", 3), ("hvp-sum-RR-10000", 3),
             ("hvp-sum-FR-100000", 3), ("hvp-sum-RR-100000", 3)]
    jobs += [("product-R-1000", 3), ("product-R-10000", 3), ("product-R-100000", 3),
             ("product-F-100000", 3)]
    jobs += [("xor-100", 3), ("xor-1000", 3), ("xor-10000", heavy)]
    if profile == "quick":
        skip = set(vlad_not_run("quick"))
        jobs = [(f, 1) for f, _ in jobs if f not in skip]
    return jobs


def peer_jobs(profile):
    """peer -> list of (argv, reps); argv's REPS placeholder is filled in."""
    py = VENV_PY
    cz = ["scheme", "-q", "--script", os.path.join(HERE, "chez", "run.ss")]
    ag = [py, os.path.join(HERE, "python", "autograd_bench.py")]
    jx = [py, os.path.join(HERE, "python", "jax_bench.py")]
    tc = [py, os.path.join(HERE, "python", "torch_bench.py")]
    sizes = ["1000", "10000", "100000"]
    jobs = {}
    jobs["chez"] = [
        (cz + ["compiled", "fib", "@REPS"], 5),
        (cz + ["compiled", "saddle", "saddle", "@REPS"] + VARIANTS, 5),
        (cz + ["compiled", "saddle", "saddle-grad", "@REPS"] + VARIANTS, 5),
        (cz + ["compiled", "particle", "particle", "@REPS"] + VARIANTS, 3),
        (cz + ["compiled", "particle", "particle-grad", "@REPS"] + VARIANTS, 5),
        (cz + ["compiled", "hvp", "quad", "@REPS", "10000"], 5),
    ] + [(cz + ["compiled", "hvp", "sum", "@REPS", n, "FR", "RR"], 3) for n in sizes] + [
        (cz + ["compiled", "product", "@REPS", n, "R"], 5) for n in sizes] + [
        (cz + ["compiled", "product", "@REPS", "100000", "F"], 5)] + [
        (cz + ["compiled", "xor", "@REPS", s], 3) for s in ("100", "1000", "10000")]
    # (the same runs with the library and the workload loaded as Chez's `load`
    # compiles a file: each definition by itself, safe; see chez/run.ss)
    jobs["chez-load"] = [([w if w != "compiled" else "loaded" for w in argv], reps)
                         for argv, reps in jobs["chez"]]
    jobs["chez-interp"] = [
        (cz + ["interpreted", "fib", "@REPS"], 3),
        (cz + ["interpreted", "saddle", "saddle", "@REPS"] + VARIANTS, 1),
        (cz + ["interpreted", "saddle", "saddle-grad", "@REPS"] + VARIANTS, 3),
        (cz + ["interpreted", "particle", "particle-grad", "@REPS"] + VARIANTS, 3),
        (cz + ["interpreted", "hvp", "quad", "@REPS", "10000"], 3),
        (cz + ["interpreted", "hvp", "sum", "@REPS", "10000", "FR", "RR"], 3),
        (cz + ["interpreted", "product", "@REPS", "100000", "R", "F"], 3),
        (cz + ["interpreted", "xor", "@REPS", "10000"], 1),
    ]
    if profile == "full":
        jobs["chez-interp"].append((cz + ["interpreted", "particle", "particle", "@REPS"] + VARIANTS, 1))
    jobs["autograd"] = [
        (ag + ["saddle-grad", "@REPS"] + VARIANTS, 3),
        (ag + ["particle-grad", "@REPS"] + VARIANTS, 1),
        (ag + ["hvp-quad", "@REPS", "1000"], 3),
    ] + [(ag + ["hvp-sum", "@REPS", n, "FR", "RR"], 3) for n in sizes] + [
        (ag + ["product", "@REPS", "1000"], 3), (ag + ["product", "@REPS", "10000"], 1),
        (ag + ["xor", "@REPS", "100"], 3), (ag + ["xor", "@REPS", "1000"], 1)]
    if profile != "quick":
        jobs["autograd"].append((ag + ["saddle", "@REPS", "RR"], 1))
    if profile == "full":
        jobs["autograd"] += [(ag + ["saddle", "@REPS", "FF", "FR", "RF"], 1),
                             (ag + ["particle", "@REPS", "RR"], 1),
                             (ag + ["xor", "@REPS", "10000"], 1),
                             (ag + ["product", "@REPS", "100000"], 1)]
    jobs["jax"] = [
        (jx + ["saddle-grad", "@REPS", "RR"], 1),
        (jx + ["hvp-quad", "@REPS", "200"], 1),
    ] + [(jx + ["hvp-sum", "@REPS", n, "FR", "RR"], 3) for n in sizes] + [
        (jx + ["product", "@REPS", "1000"], 1), (jx + ["xor", "@REPS", "100"], 1)]
    if profile != "quick":
        jobs["jax"] += [(jx + ["particle-grad", "@REPS", "RR"], 1), (jx + ["saddle-grad", "@REPS", "FF"], 1)]
    if profile == "full":
        jobs["jax"] += [(jx + ["saddle-grad", "@REPS", "FR", "RF"], 1),
                        (jx + ["particle-grad", "@REPS", "FF", "FR", "RF"], 1),
                        (jx + ["product", "@REPS", "10000"], 1)]
    jobs["jax-jit"] = [
        (jx + ["hvp-quad", "@REPS", "10000", "jit"], 3),
    ] + [(jx + ["hvp-sum", "@REPS", n, "FR", "RR", "jit"], 5) for n in sizes] + [
        (jx + ["product", "@REPS", n, "jit"], 5) for n in sizes] + [
        (jx + ["xor", "@REPS", s, "jit"], 3) for s in ("100", "1000", "10000")]
    jobs["torch"] = [
        (tc + ["saddle-grad", "@REPS"] + VARIANTS, 3),
        (tc + ["particle-grad", "@REPS", "RR"], 1),
        (tc + ["hvp-quad", "@REPS", "200"], 3),
    ] + [(tc + ["hvp-sum", "@REPS", n, "FR", "RR"], 3) for n in sizes] + [
        (tc + ["product", "@REPS", "1000"], 3), (tc + ["xor", "@REPS", "100"], 3)]
    if profile != "quick":
        jobs["torch"] += [(tc + ["product", "@REPS", "10000"], 1), (tc + ["xor", "@REPS", "1000"], 1)]
    if profile == "full":
        jobs["torch"] += [(tc + ["particle-grad", "@REPS", "FF", "FR", "RF"], 1),
                          (tc + ["saddle", "@REPS", "RR"], 1)]
    jobs["cpython"] = [([py if os.path.exists(py) else sys.executable, "-c",
                        "import sys; sys.path.insert(0, %r); import common;"
                        "common.bench('fib', int(sys.argv[1]), 1, lambda: common.fib(30))"
                        % os.path.join(HERE, "python"), "@REPS"], 3)]
    return jobs


# ----------------------------------------------------------------------------

def available():
    """peer -> None if usable, else the reason it is skipped"""
    out = {}
    chez = shutil.which("scheme")
    out["chez"] = out["chez-load"] = out["chez-interp"] = None if chez else "no `scheme` (bench/peers/install.sh)"
    for peer, mod in (("autograd", "autograd"), ("jax", "jax"), ("jax-jit", "jax"), ("torch", "torch")):
        if not os.path.exists(VENV_PY):
            out[peer] = "no bench/peers/.venv (bench/peers/install.sh)"
            continue
        r = subprocess.run([VENV_PY, "-c", f"import {mod}"], capture_output=True)
        out[peer] = None if r.returncode == 0 else f"python module {mod} not installed"
    out["cpython"] = None
    return out


def child_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


NUM = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


SELF_TIMED = True  # vlad's own --time report (see --vlad-clock)
TIME_LINE = re.compile(r"^time: ([0-9.]+) ms \(.*?(?:; median of \d+ runs: ([0-9.]+)[ 0-9.]* ms)?\)$", re.M)
FIRST_RUN = {}  # vlad file -> each round's first-run time, where `--repeat` ran it several times


def run_vlad(name, reps, timeout, log, metered=True):
    path = os.path.join(VLAD_DIR, name + ".vlad")
    times, values, ops, err = [], None, None, None
    # Timed runs are not metered (metering turns off the evaluator's inline
    # arithmetic); the operation count comes from one more, metered, run, for the
    # rows whose gradient/primal ratios the table shows (unless `metered` is false).
    # Timing itself (`--time`), vlad repeats each expression in one process
    # (`--repeat`) and reports the median, as every peer times its repetitions in
    # one process; timed from outside, each repetition is a process.
    want_ops = metered and re.match(r"(hvp|product|xor)-", name)
    runs = ([(False, reps)] if SELF_TIMED else [(False, 1)] * reps) + ([(True, 1)] if want_ops else [])
    for with_meter, n in runs:
        c0 = child_cpu()
        try:
            if with_meter:
                argv = [VLAD, "--metered", path]
            elif SELF_TIMED:
                argv = [VLAD, "--time", "--repeat", str(n), path]
            else:
                argv = [VLAD, path]
            p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=VLAD_DIR)
        except subprocess.TimeoutExpired:
            return None, None, None, f"timeout > {timeout} s"
        c1 = child_cpu()
        if p.returncode != 0:
            err = f"exit {p.returncode}: " + (p.stderr.strip().splitlines() or [""])[0][:200]
            log.write(f"vlad {name}: {p.stderr}\n")
            return None, None, None, err
        if with_meter:
            m = re.search(r"metered: (\d+) primitive operations", p.stderr)
            ops = int(m.group(1)) if m else None
        else:
            if SELF_TIMED:
                ts = TIME_LINE.findall(p.stderr)
                if not ts:
                    return None, None, None, "no `time:` line from vlad --time"
                # each top-level expression's median, summed (and so their first runs)
                times.append(sum(float(t) for t, _ in ts) / 1e3)
                if n > 1:
                    FIRST_RUN.setdefault(name, []).append(sum(float(f or t) for t, f in ts) / 1e3)
            else:
                times.append(c1 - c0)
            values = [float(x) for x in NUM.findall(p.stdout)]
    return statistics.median(times), values, ops, None


def run_peer(argv, reps, timeout, log):
    argv = [str(reps) if a == "@REPS" else a for a in argv]
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=HERE)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        return parse_results(out), f"timeout > {timeout} s"
    log.write(f"$ {' '.join(argv)}\n{p.stdout}{p.stderr}\n")
    err = None if p.returncode == 0 else f"exit {p.returncode}: " + (p.stderr.strip().splitlines() or [""])[-1][:200]
    return parse_results(p.stdout), err


def parse_results(text):
    res = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[0] == "RESULT":
            key = parts[1][:-4] if parts[1].endswith("-jit") else parts[1]
            res[key] = (float(parts[2]), [float(x) for x in parts[3:]])
    return res


def agree(a, b):
    if a is None or b is None or len(a) != len(b):
        return False
    return all(abs(x - y) <= 1e-6 * max(abs(x), abs(y)) + 1e-12 for x, y in zip(a, b))


def fmt_t(s):
    if s is None:
        return "—"
    if s < 1e-3:
        return f"{s * 1e6:.3g} µs"
    if s < 1:
        return f"{s * 1e3:.3g} ms"
    return f"{s:.3g} s"


def fmt_r(r):
    if r >= 100:
        return f"{r:.0f}×"
    if r >= 10:
        return f"{r:.1f}×"
    return f"{r:.2g}×"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true", help="one repetition, skip the slowest runs (~3 min)")
    g.add_argument("--full", action="store_true",
                   help="also the slow peer runs (autograd and torch on every saddle variant, ...; ~20+ min)")
    ap.add_argument("--reps", type=int, default=None, help="at most this many repetitions of any job")
    ap.add_argument("--only", default=None, help="only rows whose key matches this regular expression")
    ap.add_argument("--peers", default=None, help="comma-separated subset of: " + ",".join(PEERS))
    ap.add_argument("--rounds", type=int, default=1,
                    help="run vlad and the peers this many times, alternately, and report each cell's median "
                         "over the rounds (each round's own figure is a median over its repetitions): ratios "
                         "then hold across the slow and fast phases of a shared machine (default 1)")
    ap.add_argument("--timeout", type=float, default=300, help="seconds allowed to one process (default 300)")
    ap.add_argument("--vlad-clock", choices=("self", "process"), default="self",
                    help="vlad's time: its own report of its top-level expressions' CPU time (`vlad --time`, "
                         "the default: as the peers time themselves), or the whole process's less an empty "
                         "program's (and, for hvp-sum, less a program that only builds the input), as before "
                         "session 22")
    ap.add_argument("--json", default=None, help="also write all results as JSON here")
    ap.add_argument("--md", default=None, help="also write the table (markdown) here")
    ap.add_argument("--log", default=os.path.join(ROOT, "target", "bench-peers.log"), help="raw output log")
    a = ap.parse_args()
    global SELF_TIMED
    SELF_TIMED = a.vlad_clock == "self"
    profile = "quick" if a.quick else "full" if a.full else "standard"
    only = re.compile(a.only) if a.only else None
    peers = a.peers.split(",") if a.peers else PEERS
    cap = (lambda r: min(r, a.reps)) if a.reps else (lambda r: r)
    os.makedirs(os.path.dirname(a.log), exist_ok=True)
    log = open(a.log, "w")
    t_start = time.time()

    def wanted(key):
        return only is None or only.search(key)

    cells = {}      # (row, column) -> seconds
    values = {}     # (row, column) -> values
    errors = {}     # (row, column) -> message
    ops = {}        # vlad file -> metered operations
    vtime = {}      # vlad file -> seconds

    if not os.path.exists(VLAD):
        sys.exit(f"no {VLAD}: run `cargo build --release` (bench/run.sh does)")
    # vlad start-up: an empty program
    base = []
    empty = os.path.join(ROOT, "target", "bench-empty.vlad")
    with open(empty, "w") as f:
        f.write("0\n")
    for _ in range(5):
        c0 = child_cpu()
        subprocess.run([VLAD, empty], capture_output=True)
        base.append(child_cpu() - c0)
    baseline = min(base)  # the least disturbed run
    if SELF_TIMED:
        print(f"vlad start-up (empty program, not counted: vlad times itself): {fmt_t(baseline)}", file=sys.stderr)
    else:
        print(f"vlad start-up (empty program, subtracted): {fmt_t(baseline)}", file=sys.stderr)

    # vlad, then the peers; `--rounds` repeats both, alternately, and each cell
    # is the median of its rounds' medians
    vfiles = vlad_jobs(profile)
    primal_files = sorted({PRIMAL[k] for k in PRIMAL})
    avail = available()
    skipped = {}
    jobs = peer_jobs(profile)
    cell_runs = {}  # (row, column) -> each round's median
    vtime_runs = {}  # vlad file -> each round's median
    rounds = max(a.rounds, 1)
    for rnd in range(rounds):
        if rounds > 1:
            print(f"round {rnd + 1} of {rounds}", file=sys.stderr, flush=True)
        primal_done = set()
        setup_time = {}  # setup file -> this round's CPU time (a median)

        def less_setup(name, s):
            """vlad's time for file `name`: less its setup program's, or the start-up's
            (as it is where vlad times itself)"""
            sf = SETUP.get(name)
            if SELF_TIMED:
                # (its time is not counted, but its operations are still subtracted
                # from the row's metered count, which is the whole program's)
                if sf is not None and rnd == 0 and sf not in ops:
                    _, _, sn, _ = run_vlad(sf, 1, a.timeout, log, metered=True)
                    if sn is not None:
                        ops[sf] = sn
                return s
            if sf is None:
                return max(s - baseline, 0.0)
            if sf not in setup_time:
                ss, _, sn, serr = run_vlad(sf, cap(3), a.timeout, log, metered=(rnd == 0))
                setup_time[sf] = ss if serr is None else baseline
                if rnd == 0 and sn is not None:
                    ops[sf] = sn
                print(f"  vlad {sf} (subtracted from its rows): {fmt_t(max(setup_time[sf] - baseline, 0.0))}",
                      file=sys.stderr, flush=True)
            return max(s - setup_time[sf], 0.0)

        for name, reps in vfiles:
            key = re.sub(r"-10000$", "", name) if name.startswith("hvp-quad") else name
            if not wanted(key) or (key, "vlad") in errors:
                continue
            t0 = time.time()
            s, v, n, err = run_vlad(name, cap(reps), a.timeout, log, metered=(rnd == 0))
            print(f"  vlad {name}: {fmt_t(s) if err is None else err}  [{time.time() - t0:.0f} s wall]",
                  file=sys.stderr, flush=True)
            if err:
                errors[(key, "vlad")] = err
                continue
            s = less_setup(name, s) / VLAD_UNITS.get(name, 1)
            cell_runs.setdefault((key, "vlad"), []).append(s)
            vtime_runs.setdefault(name, []).append(s)
            values[(key, "vlad")] = v
            if rnd == 0:
                ops[name] = n
            pf = PRIMAL.get(key)
            if pf and pf not in primal_done:
                primal_done.add(pf)
                # (as many repetitions as the row, so that both are first runs or
                # medians alike: `--quick` runs one of each)
                ps, _, pn, perr = run_vlad(pf, cap(reps), a.timeout, log, metered=(rnd == 0))
                if perr is None:
                    vtime_runs.setdefault(pf, []).append(less_setup(pf, ps) / VLAD_UNITS.get(pf, 1))
                    if rnd == 0:
                        ops[pf] = pn

        for peer in peers:
            if avail.get(peer):
                if rnd == 0:
                    skipped[peer] = avail[peer]
                    print(f"  {peer}: skipped ({avail[peer]})", file=sys.stderr)
                continue
            for argv, reps in jobs.get(peer, []):
                # which rows will this job fill?  run it if any is wanted
                t0 = time.time()
                probe = " ".join(argv)
                if not any(wanted(k) for k in job_rows(argv)) or (probe, peer) in errors:
                    continue
                res, err = run_peer(argv, cap(reps), a.timeout, log)
                print(f"  {peer} {' '.join(x for x in argv[3:] if x != '@REPS')}: "
                      f"{', '.join(f'{k} {fmt_t(v[0])}' for k, v in res.items()) or '-'}"
                      f"{'  ' + err if err else ''}  [{time.time() - t0:.0f} s wall]",
                      file=sys.stderr, flush=True)
                for k, (s, v) in res.items():
                    if k not in job_rows(argv):
                        print(f"    (unexpected result {k})", file=sys.stderr)
                    cell_runs.setdefault((k, peer), []).append(s)
                    values[(k, peer)] = v
                if err:
                    errors[(probe, peer)] = err
    cells.update({k: statistics.median(xs) for k, xs in cell_runs.items()})
    vtime.update({k: statistics.median(xs) for k, xs in vtime_runs.items()})

    # agreement: each peer against vlad, else against Chez compiled
    disagree = []
    for key, _ in ROWS:
        ref_col = "vlad" if (key, "vlad") in values else "chez" if (key, "chez") in values else None
        if ref_col is None:
            continue
        ref = values[(key, ref_col)]
        for col in ["vlad"] + PEERS:
            if col != ref_col and (key, col) in values and not agree(values[(key, col)], ref):
                disagree.append((key, col, ref_col, values[(key, col)], ref))
    bad = {(k, c) for k, c, *_ in disagree}

    # table
    cols = ["vlad"] + [p for p in peers if p not in skipped]
    lines = []
    hdr = ["workload", "vlad"] + [PEER_TITLES[p] + " (÷vlad)" for p in cols[1:]] + \
          ["vlad grad÷primal time", "vlad grad÷primal ops"]
    lines.append("| " + " | ".join(hdr) + " |")
    lines.append("|" + "|".join(["---"] + ["--:"] * (len(hdr) - 1)) + "|")
    grad_time, grad_ops = {}, {}  # row -> vlad's gradient ÷ primal (time, metered operations)
    for key, desc in ROWS:
        if not wanted(key) or not any((key, c) in cells for c in cols):
            continue
        row = [f"{key}"]
        vs = cells.get((key, "vlad"))
        if vs is not None:
            row.append(fmt_t(vs) + (" ✗" if (key, "vlad") in bad else ""))
        else:
            row.append(errors.get((key, "vlad")) or vlad_not_run(profile).get(key, "—"))
        for c in cols[1:]:
            s = cells.get((key, c))
            if s is None:
                row.append("—")
                continue
            cell = fmt_t(s)
            if vs:
                cell += f" ({fmt_r(s / vs)})"
            if (key, c) in bad:
                cell += " ✗"
            row.append(cell)
        pf = PRIMAL.get(key)
        vname = key + ("-10000" if key.startswith("hvp-quad") else "")
        if pf and vname in vtime and pf in vtime and vtime[pf] > 0:
            grad_time[key] = vtime[vname] / vtime[pf]
            row.append(fmt_r(grad_time[key]))
            # (less the operations that build the input, where the time is less its building)
            so = ops.get(SETUP.get(vname), 0)
            if ops.get(vname) and ops.get(pf) and ops[pf] > so:
                grad_ops[key] = (ops[vname] - so) / (ops[pf] - so)
            row.append(fmt_r(grad_ops[key]) if key in grad_ops else "—")
        else:
            row += ["", ""]
        lines.append("| " + " | ".join(row) + " |")
    table = "\n".join(lines)
    notes = []
    notes.append(f"CPU seconds per run (per call for hvp-quad), median"
                 f"{f' of {rounds} rounds (vlad and the peers alternately)' if rounds > 1 else ''}; "
                 f"(÷vlad) = peer time ÷ vlad time, "
                 f"below 1 means the peer is faster. "
                 + (f"vlad timed by itself (`--time --repeat`: the median of its repetitions in one process, "
                    f"as the peers time theirs; its top-level expressions, not start-up, {fmt_t(baseline)}, "
                    f"nor the definitions that build the input)." if SELF_TIMED
                    else f"vlad start-up {fmt_t(baseline)} subtracted."))
    first = {k: statistics.median(xs) / VLAD_UNITS.get(k, 1) for k, xs in FIRST_RUN.items()}
    slow_first = [f"{k} {fmt_t(first[k])} (median {fmt_t(vtime[k])})" for k in sorted(first)
                  if k in vtime and first[k] > 1.25 * vtime[k]]
    if slow_first:
        notes.append("vlad's first run in its process, where it took over 1.25× the median (fresh memory; "
                     "the peers' first repetitions are not shown either): " + ", ".join(slow_first) + ".")
    for p, why in skipped.items():
        notes.append(f"{PEER_TITLES[p]}: skipped, {why}.")
    for (what, col), err in errors.items():
        notes.append(f"{col}: {what}: {err}")
    if disagree:
        notes.append("DISAGREEMENTS (✗, relative tolerance 1e-6):")
        for key, col, refc, v, ref in disagree:
            notes.append(f"  {key}: {col} gave {v}, {refc} gave {ref}")
    else:
        notes.append("All results agree with vlad's (or, where vlad has none, Chez's) to a relative 1e-6.")
    notes.append(f"Total wall time {time.time() - t_start:.0f} s; profile {profile}; raw output in {a.log}.")
    goals = targets(cells, grad_time, grad_ops, examples_cpu() if wanted("examples") else None)
    head = ("Issue #8's speed targets, by this run (the HVPs' rows are second derivatives, "
            "not gradients: the gradient targets are judged on the product and XOR rows):")
    text = table + "\n\n" + ("\n".join([head] + goals) + "\n\n" if goals else "") + "\n".join(notes)
    print(text)
    if a.md:
        with open(a.md, "w") as f:
            f.write(text + "\n")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"profile": profile, "vlad_clock": a.vlad_clock, "vlad_startup": baseline,
                       "cells": [{"row": k, "column": c, "seconds": s, "values": values.get((k, c))}
                                 for (k, c), s in cells.items()],
                       "vlad_primal": {k: {"seconds": vtime.get(k), "ops": ops.get(k)} for k in primal_files},
                       "vlad_ops": ops, "vlad_first_run": first, "errors": {f"{c}: {k}": e for (k, c), e in errors.items()},
                       "disagreements": [list(map(str, d)) for d in disagree], "targets": goals}, f, indent=1)
    return 1 if disagree else 0


def examples_cpu():
    """CPU seconds of `vlad test` on examples/ (every .vlad in it and its subfolders), or None"""
    c0 = child_cpu()
    r = subprocess.run([VLAD, "test", os.path.join(ROOT, "examples")], capture_output=True)
    return child_cpu() - c0 if r.returncode == 0 else None


def targets(cells, grad_time, grad_ops, examples):
    """issue #8's speed targets, each judged by this run's cells (lines of text;
    a target whose rows were not run is left out)"""
    out = []

    def ratio(key, col):
        v, p = cells.get((key, "vlad")), cells.get((key, col))
        return v / p if v and p else None

    def line(ok, what, figures):
        out.append(f"- {'met' if ok else 'NOT MET'}: {what}: {figures}")

    for w in ("saddle", "particle"):
        for col, how in (("chez", "Chez compiled (whole program, optimize-level 3)"),
                         ("chez-load", "Chez loaded (each definition compiled, safe)")):
            rs = {m: ratio(f"{w}-{m}", col) for m in ("FF", "FR", "RF", "RR")}
            rs = {m: r for m, r in rs.items() if r is not None}
            if rs:
                line(all(r <= 2 for r in rs.values()), f"{w} ≤ 2× {how} (vlad ÷ Chez)",
                     ", ".join(f"{m} {r:.2f}×" for m, r in rs.items()))
    under = {k: cells[(k, "chez-interp")] / cells[(k, "vlad")] for k, _ in ROWS
             if k.startswith(("saddle", "particle")) and (k, "chez-interp") in cells and cells.get((k, "vlad"))}
    if under:
        k = min(under, key=under.get)
        line(under[k] >= 2, "nested AD well under Chez interpreted (at least 2× faster: Chez interpreted ÷ vlad)",
             (f"{under[k]:.1f}× ({k})" if len(under) == 1 else
              f"{min(under.values()):.1f}–{max(under.values()):.1f}× over {len(under)} rows (least: {k})"))
    for m in ("FR", "RR"):
        s = cells.get((f"hvp-quad-{m}", "vlad"))
        if s is not None:
            line(s <= 20e-6, f"HVP of 2x²+3xy+4y², {m}, ≤ 20 µs a call", fmt_t(s))
    for m in ("FR", "RR"):
        big, small = cells.get((f"hvp-sum-{m}-100000", "vlad")), cells.get((f"hvp-sum-{m}-10000", "vlad"))
        if big is not None:
            line(big <= 0.25, f"list HVP, {m}, n = 10⁵, ≤ 0.25 s", fmt_t(big))
        if big and small:
            line(big / small <= 12, f"list HVP, {m}, time at 10⁵ ÷ time at 10⁴ ≤ 12", f"{big / small:.1f}")
    for by, bound, what in ((grad_time, 5, "time"), (grad_ops, 3, "metered operations")):
        rows = [k for k in by if k.startswith(("product", "xor"))]
        if rows:
            worst = max(rows, key=by.get)
            line(by[worst] <= bound, f"gradient ≤ {bound}× its primal's {what}",
                 f"at most {by[worst]:.1f}× ({worst}) over {len(rows)} row{'s' if len(rows) > 1 else ''}")
    r = ratio("fib", "chez-interp")
    if r is not None:
        line(r <= 1, "fib(30) at least as fast as Chez interpreted (vlad ÷ Chez interpreted)", f"{r:.2f}×")
    if examples is not None:
        line(examples < 10, "`vlad test examples` under 10 s (CPU)", fmt_t(examples))
    return out


def job_rows(argv):
    """the row keys a peer job reports (from its argument list)"""
    if "-c" in argv:
        return ["fib"]
    i = next(k for k, w in enumerate(argv) if w == "@REPS")
    if argv[1] == "-q":                       # chez: ... MODE FILE [WHICH] R ARGS
        head, rest = argv[5:i], argv[i + 1:]
        f = head[0]
        if f == "fib":
            return ["fib"]
        if f in ("saddle", "particle"):
            return [f"{head[1]}-{v}" for v in rest]
        if f == "hvp":
            return (["hvp-quad-FR", "hvp-quad-RR"] if head[1] == "quad"
                    else [f"hvp-sum-{m}-{rest[0]}" for m in rest[1:]])
        if f == "product":
            return [f"product-{m}-{rest[0]}" for m in rest[1:]]
        if f == "xor":
            return [f"xor-{rest[0]}"]
    else:                                     # python: SCRIPT WORKLOAD R PARAMS
        w, rest = argv[2], [x for x in argv[i + 1:] if x != "jit"]
        if w in ("saddle", "saddle-grad", "particle", "particle-grad"):
            return [f"{w}-{v}" for v in rest]
        if w == "hvp-quad":
            return ["hvp-quad-FR", "hvp-quad-RR"]
        if w == "hvp-sum":
            return [f"hvp-sum-{m}-{rest[0]}" for m in rest[1:]]
        if w == "product":
            return [f"product-R-{rest[0]}"]
        if w == "xor":
            return [f"xor-{rest[0]}"]
    return []


if __name__ == "__main__":
    sys.exit(main())
