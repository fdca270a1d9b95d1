#!/usr/bin/env python3
"""Compares two record directories of tests/support/through_server.rs: one JSON line per
answer, per test. Prints each test's count of answers and the first difference of each test
that differs; exits 1 when any test differs or is missing from one side."""
import json
import re
import sys
from pathlib import Path


def load(d):
    return {p.stem: [json.loads(l) for l in p.read_text().splitlines()]
            for p in Path(d).glob("*.jsonl")} if Path(d).is_dir() else {}


# Ids as object keys (a map by step id): the records mask ids in values only.
ID_KEY = re.compile(r"\b([a-z]+_)?[0-9A-HJKMNP-TV-Z]{26}\b")


def masked_keys(d):
    return {ID_KEY.sub(r"\1<id>", k): v for k, v in d.items()}


# What a command the tests run prints that differs from run to run: nanosecond clock
# readings (`date +%s%N`) and the content hashes naming hunks that hold them.
CLOCK = re.compile(r"\b\d{16,}\b")
HUNK = re.compile(r"\b[0-9a-f]{12}\b")
# The shortest unique prefixes of ids (their length depends on the other ids of the run).
SHORT_ID = re.compile(r"\b01[0-9A-HJKMNP-TV-Z]{6,23}\b")


def masked_text(s):
    return SHORT_ID.sub("<id>", HUNK.sub("<hunk>", CLOCK.sub("<clock>", s)))


def first_difference(a, b, path="data"):
    if isinstance(a, dict) and isinstance(b, dict):
        a, b = masked_keys(a), masked_keys(b)
    if type(a) is not type(b):
        return f"{path}: {json.dumps(a)[:200]} != {json.dumps(b)[:200]}"
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return f"{path}.{k}: only on the {'in-process' if k in a else 'server'} side"
            d = first_difference(a[k], b[k], f"{path}.{k}")
            if d:
                return d
        return None
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{path}: {len(a)} items != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            d = first_difference(x, y, f"{path}[{i}]")
            if d:
                return d
        return None
    if isinstance(a, str):
        a, b = masked_text(a), masked_text(b)
    return None if a == b else f"{path}: {json.dumps(a)[:200]} != {json.dumps(b)[:200]}"


def in_process_only(d):
    """The tests that ended through the server because they test what only a process driving
    its own plans does (tests/support/through_server.rs, `in_process_only`), with why."""
    return {p.name[: -len(".in-process-only")]: p.read_text()
            for p in Path(d).glob("*.in-process-only")} if Path(d).is_dir() else {}


def main():
    local, served = load(sys.argv[1]), load(sys.argv[2])
    only_local = in_process_only(sys.argv[2])
    for test, why in sorted(only_local.items()):
        print(f"IN PROCESS ONLY {test}: {why}")
    same = differ = 0
    for test in sorted((set(local) | set(served)) - set(only_local)):
        a, b = local.get(test), served.get(test)
        if a is None or b is None:
            differ += 1
            print(f"DIFF {test}: recorded {'only in process' if b is None else 'only through the server'}")
            continue
        problem = None
        if len(a) != len(b):
            problem = f"{len(a)} answers in process, {len(b)} through the server"
        else:
            for i, (x, y) in enumerate(zip(a, b)):
                if x["code"] != y["code"]:
                    problem = f"answer {i} ({' '.join(x['args'])}): exit {x['code']} != {y['code']}"
                    break
                d = first_difference(x["data"], y["data"])
                if d:
                    problem = f"answer {i} ({' '.join(x['args'])}): {d}"
                    break
        if problem:
            differ += 1
            print(f"DIFF {test}: {problem}")
        else:
            same += 1
    answers = sum(len(v) for v in local.values())
    print(f"tests with equal data: {same}, differing: {differ}, answers compared: {answers}")
    sys.exit(1 if differ or not same else 0)


if __name__ == "__main__":
    main()
