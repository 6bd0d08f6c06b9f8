#!/usr/bin/env python3
"""Compares two `tilec bench --json` files case by case (same GPU, same run): the time ratio
new/old per case, the cold compile times, and which cases only one of them has.

    python3 bench/compare-runs.py OLD.json NEW.json
"""
import json
import sys


def cases(path):
    with open(path) as f:
        doc = json.load(f)
    return {(c["kernel"], c["dtype"], c["label"]): c for c in doc["cases"]}


def main():
    old, new = cases(sys.argv[1]), cases(sys.argv[2])
    print(f"{'kernel':<12} {'dtype':<6} {'case':<34} {'old ms':>9} {'new ms':>9} {'new/old':>8} "
          f"{'old cfg':<28} {'new cfg':<28} {'compile old/new ms':>18}")
    for key in sorted(old.keys() | new.keys()):
        o, n = old.get(key), new.get(key)
        if o is None or n is None:
            print(f"{key[0]:<12} {key[1]:<6} {key[2]:<34} only in {'new' if o is None else 'old'}")
            continue
        ratio = n["median_ms"] / o["median_ms"]
        print(f"{key[0]:<12} {key[1]:<6} {key[2]:<34} {o['median_ms']:>9.4f} {n['median_ms']:>9.4f} "
              f"{ratio:>8.3f} {o['config']:<28} {n['config']:<28} "
              f"{o['compile_ms']:>8.1f}/{n['compile_ms']:<8.1f}")


if __name__ == "__main__":
    main()
