#!/usr/bin/env python3
"""A seeded background load: keeps N cores busy with a changing mix of work,
the drift of a shared CI machine, for benchmarks such as scripts/bench-paired.sh.

Usage: scripts/load.py [--cores N] [--seed S] [--seconds T]

Each of N worker processes runs phases drawn from its own generator (seeded by
S and the worker's index, so a seed gives the same schedule every time): a
phase lasts 0.2 to 3 s and is one of
  spin    integer arithmetic (one core at 100%),           weight 0.45
  memory  copies of a 32 MiB buffer (cache and DRAM traffic), weight 0.35
  pause   idle (the load drops, as a neighbour finishing), weight 0.20
so the machine's speed changes from second to second and from minute to
minute, the way it does beside other jobs. It runs until SIGTERM/SIGINT, or
for T seconds. Nothing is written; the exit status is 0.
"""
import argparse
import multiprocessing
import random
import signal
import sys
import time

PHASES = (("spin", 0.45), ("memory", 0.35), ("pause", 0.20))
BUFFER_BYTES = 32 << 20


def spin(until):
    x = 1
    while time.monotonic() < until:
        for _ in range(10000):
            x = (x * 6364136223846793005 + 1442695040888963407) & 0xFFFFFFFFFFFFFFFF


def memory(until, source, target):
    while time.monotonic() < until:
        target[:] = source


def worker(index, seed, stop_at):
    rng = random.Random(seed * 1000003 + index)
    source = bytearray(rng.randbytes(1 << 16)) * (BUFFER_BYTES >> 16)
    target = bytearray(BUFFER_BYTES)
    names = [name for name, _ in PHASES]
    weights = [weight for _, weight in PHASES]
    while stop_at is None or time.monotonic() < stop_at:
        kind = rng.choices(names, weights)[0]
        until = time.monotonic() + rng.uniform(0.2, 3.0)
        if stop_at is not None:
            until = min(until, stop_at)
        if kind == "spin":
            spin(until)
        elif kind == "memory":
            memory(until, source, target)
        else:
            time.sleep(max(0.0, until - time.monotonic()))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cores", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the schedule (default 1)")
    parser.add_argument("--seconds", type=float, default=None,
                        help="stop after this long (default: until killed)")
    args = parser.parse_args()
    if args.cores < 1 or args.cores > 1024:
        parser.error("--cores must be 1..1024")
    stop_at = None if args.seconds is None else time.monotonic() + args.seconds
    workers = [multiprocessing.Process(target=worker, args=(i, args.seed, stop_at), daemon=True)
               for i in range(args.cores)]
    for w in workers:
        w.start()

    def stop(signum, frame):
        for w in workers:
            w.terminate()
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for w in workers:
        w.join()


if __name__ == "__main__":
    main()
