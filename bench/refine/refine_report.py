#!/usr/bin/env python3
"""Report of bench/refine/run.sh: NAME.json and NAME.md from its work directory.

usage: refine_report.py WORK ROUNDS NETWORK DB REV OUT NAME
"""
import json
import os
import statistics
import sys
import time


def last_json(path):
    return [json.loads(line) for line in open(path) if line.startswith("{")][-1]


def main():
    work, rounds, net, db, rev, out, name = sys.argv[1:]
    rounds = int(rounds)
    r1 = last_json(f"{work}/refine1.json")
    r2 = last_json(f"{work}/refine2.json")
    sets = r1["sets"]
    rows = []
    for w1, w2 in zip(r1["workloads"], r2["workloads"]):
        assert w1["workload"] == w2["workload"]
        kept = sets.index(w1["kept"])
        rows.append({"workload": w1["workload"], "layers": w1["layers"], "run1_ms": w1["ms"], "same_as": w1["same_as"],
                     "kept": w1["kept"], "template": w1["template"], "config": w1["config"],
                     "run2_fastest_ms": w2["ms"][0], "run2_kept_ms": w2["ms"][kept]})
    changed = [r for r in rows if r["kept"] != sets[0]]
    run2_fastest = sum(r["run2_fastest_ms"] for r in rows)
    run2_kept = sum(r["run2_kept_ms"] for r in rows)
    walls = {w: [last_json(f"{work}/run-{w}-{i}.json")["median_ms"] for i in range(1, rounds + 1)] for w in ("orig", "refined")}
    med = {w: statistics.median(v) for w, v in walls.items()}
    res = {"network": net, "database": db, "revision": rev, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "sets": sets, "passes": r1["passes"], "refine_wall_s": r1["wall_s"], "stored": r1["stored"],
           "run1_fastest_ms": r1["fastest_ms"], "run1_kept_ms": r1["chosen_ms"],
           "run2_fastest_ms": run2_fastest, "run2_kept_ms": run2_kept,
           "wall_ms": walls, "wall_median_ms": med, "workloads": rows}
    os.makedirs(out, exist_ok=True)
    json.dump(res, open(f"{out}/{name}.json", "w"), indent=1)

    lines = [f"# In-network refinement of {net}'s tuned configs",
             "",
             f"Generated {res['date']} by `bench/refine/run.sh {db}` (revision {rev}). "
             f"`mtgpu refine {net}` timed {len(sets)} candidate sets inside the network ({', '.join(sets)}: "
             "recN = each convolution's N-th fastest record by its own time, default = the default configs), "
             f"{r1['passes']} profiled passes each in blocks taken in turns, and kept per workload the set whose layers took "
             f"the least device time (another set than rec1 only when faster by 3%); it took {r1['wall_s']:.1f} s and stored "
             f"{r1['stored']} preferences. Then the same sets were timed again (`--dry-run`), and `mtgpu run` "
             f"ran the database before and after, in turns, {rounds} times each.",
             "",
             "| | fastest records (rec1) | kept configs | ratio |",
             "|---|---|---|---|",
             f"| convolutions, device ms, run 1 (picked on these) | {r1['fastest_ms']:.2f} | {r1['chosen_ms']:.2f} | "
             f"{r1['fastest_ms'] / r1['chosen_ms']:.3f}x |",
             f"| convolutions, device ms, run 2 (fresh, unbiased) | {run2_fastest:.2f} | {run2_kept:.2f} | "
             f"{run2_fastest / run2_kept:.3f}x |",
             f"| whole pass, wall ms (`mtgpu run`, median of {rounds} runs) | {med['orig']:.2f} | {med['refined']:.2f} | "
             f"{med['orig'] / med['refined']:.3f}x |",
             "",
             f"Wall time per run, before: {', '.join(f'{v:.2f}' for v in walls['orig'])} ms; "
             f"after: {', '.join(f'{v:.2f}' for v in walls['refined'])} ms.",
             "",
             f"## The {len(changed)} workloads whose kept config is not the fastest record",
             "",
             "Device ms inside the network, summed over the workload's layers; `=recN`: the same config as that set.",
             "",
             "| workload | layers | " + " | ".join(f"{s} (run 1)" for s in sets) + " | kept | run 2: rec1 | run 2: kept |",
             "|---|---|" + "---|" * len(sets) + "---|---|---|"]
    for r in changed:
        cells = [f"={sets[r['same_as'][i]]}" if r["same_as"][i] != i else f"{r['run1_ms'][i]:.3f}" for i in range(len(sets))]
        lines.append(f"| {r['workload']} | {r['layers']} | " + " | ".join(cells) +
                     f" | {r['kept']} | {r['run2_fastest_ms']:.3f} | {r['run2_kept_ms']:.3f} |")
    lines += ["", f"Regenerate: `bench/refine/run.sh DB` (DB: a tuned {net} database without preferences, e.g. from "
              f"`mtgpu tune {net} --refine 0 --db DB`)."]
    open(f"{out}/{name}.md", "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
