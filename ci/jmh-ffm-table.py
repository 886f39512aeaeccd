#!/usr/bin/env python3
"""The table of ci/jmh-ffm.sh from its JMH results: python3 ci/jmh-ffm-table.py DIR (DIR/CONFIG-ROUND.json).

Per benchmark and configuration: the median of every measured iteration of every round, and the range of the
rounds' own medians. Then the ratios 25 ffm / 25 unsafe (one JVM, the two classes) and 25 ffm / 17 unsafe (what a
user moving from Java 17 to 25 gets), each the median of the rounds' own ratios (round r's ffm median over round r's
unsafe median: the configurations of one round ran within minutes of each other, so a machine whose load moves
between rounds moves both) with their range. Medians, because on a shared machine a stall lands on single
iterations. Only rounds that every configuration completed count."""
import glob
import json
import os
import statistics
import sys

d = sys.argv[1]
configs = [c for c in ("17unsafe", "25unsafe", "25ffm") if glob.glob(os.path.join(d, c + "-*.json"))]
complete = set.intersection(*[{os.path.basename(f).split("-", 1)[1] for f in glob.glob(os.path.join(d, c + "-*.json"))
                               if os.path.getsize(f) > 0} for c in configs])
order = sorted(complete, key=lambda x: int(x.split(".")[0]))
samples, rounds, units = {}, {}, {}
for c in configs:
    for r in order:
        for b in json.load(open(os.path.join(d, f"{c}-{r}"))):
            name = b["benchmark"].rsplit(".", 1)[1]
            raw = [x for fork in b["primaryMetric"]["rawData"] for x in fork]
            samples.setdefault(name, {}).setdefault(c, []).extend(raw)
            rounds.setdefault(name, {}).setdefault(c, []).append(statistics.median(raw))
            units[name] = b["primaryMetric"]["scoreUnit"]
n = max(len(v) for b in rounds.values() for v in b.values())
print(f"median of every iteration (range of the {n} rounds' medians)")
print("| benchmark | unit |" + "".join(f" {c[:2]} {c[2:]} |" for c in configs)
      + " 25 ffm / 25 unsafe |" + (" 25 ffm / 17 unsafe |" if "17unsafe" in configs else ""))
print("|---|---|" + "---:|" * len(configs) + "---:|" + ("---:|" if "17unsafe" in configs else ""))
for name in samples:
    med = {c: statistics.median(samples[name][c]) for c in configs}
    row = f"| {name} | {units[name]} |"
    for c in configs:
        r = rounds[name][c]
        row += f" {med[c]:.1f} ({min(r):.1f}–{max(r):.1f}) |"
    for base in ("25unsafe", "17unsafe"):
        if base in configs:
            q = [f / u for f, u in zip(rounds[name]["25ffm"], rounds[name][base])]
            row += f" {statistics.median(q):.3f} ({min(q):.3f}–{max(q):.3f}) |"
    print(row)
