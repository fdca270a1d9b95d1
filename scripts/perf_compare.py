#!/usr/bin/env python3
"""Times two commands side by side for scripts/perf.sh: N interleaved runs (ours, baseline,
ours, ...), each with its stdout read through a pipe, and prints one line:

    ours_ms baseline_ms ours_peak_kib baseline_peak_kib ours_stdout_bytes baseline_stdout_bytes

(medians of the times, the largest peak resident set of each side, the stdout size of its last
run). Usage: perf_compare.py N OURS... -- BASELINE...   A command that fails exits non-zero."""
import os, subprocess, sys, time


def run(cmd):
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    size = 0
    while True:
        chunk = p.stdout.read(1 << 16)
        if not chunk:
            break
        size += len(chunk)
    _, status, usage = os.wait4(p.pid, 0)
    ms = (time.perf_counter() - t) * 1000
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"failed: {' '.join(cmd)}")
    return ms, usage.ru_maxrss, size


def main():
    n = int(sys.argv[1])
    rest = sys.argv[2:]
    cut = rest.index("--")
    sides = [rest[:cut], rest[cut + 1:]]
    times, peaks, sizes = [[], []], [0, 0], [0, 0]
    run(sides[0]); run(sides[1])  # warm the page cache
    for _ in range(n):
        for i, cmd in enumerate(sides):
            ms, peak, size = run(cmd)
            times[i].append(ms)
            peaks[i] = max(peaks[i], peak)
            sizes[i] = size
    med = [sorted(t)[len(t) // 2] for t in times]
    print(f"{med[0]:.1f} {med[1]:.1f} {peaks[0]} {peaks[1]} {sizes[0]} {sizes[1]}")


main()
