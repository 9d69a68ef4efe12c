#!/usr/bin/env python3
"""CPU time of two vlad builds on the same programs, run alternately.

    tools/abtime.py N BIN_A BIN_B PROGRAM...

Runs each program N times with each binary, A and B alternating (A first on
even rounds, B first on odd ones, so that a drift of the machine falls on both),
and prints per program the median and the minimum CPU time (user + system of
the whole process, from getrusage) of each, and B's change against A. Relative
paths in PROGRAM are taken from the current directory (run it in
bench/peers/vlad for the workloads' includes). On a shared machine the medians
move with its load; the minimum is the steadier figure. Instruction counts
(tools/icount.sh) are steadier still, but miss stalls and cache effects.
"""
import resource
import statistics
import subprocess
import sys


def cpu_ms(binary, program):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([binary, program], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) * 1000


def main():
    if len(sys.argv) < 5 or not sys.argv[1].isdigit():
        sys.exit(__doc__)
    n, a, b, programs = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]
    print(f"{'program':30s} {'median A':>9s} {'median B':>9s} {'change':>8s}   {'min A':>8s} {'min B':>8s} {'change':>8s}")
    for p in programs:
        t = {a: [], b: []}
        for i in range(n):
            for x in (a, b) if i % 2 == 0 else (b, a):
                t[x].append(cpu_ms(x, p))
        ma, mb = statistics.median(t[a]), statistics.median(t[b])
        na, nb = min(t[a]), min(t[b])
        print(f"{p:30s} {ma:7.1f}ms {mb:7.1f}ms {(mb / ma - 1) * 100:+7.1f}%   {na:6.1f}ms {nb:6.1f}ms {(nb / na - 1) * 100:+7.1f}%")


main()
