#!/usr/bin/env python3
"""Report of bench/refine_check/run.sh: the default configs, the tuned
database as an earlier refinement left it (`before`) and the same database
refined again with the whole-pass check (`after`), whole passes in turns;
with what the refinement's check measured and kept. Writes NAME.md and
NAME.json."""
import argparse
import datetime
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from benchlib import fmt_spread, round_ratio, side_rounds  # noqa: E402

SIDES = ["default", "before", "after"]
OUTCOME = {"kept": "the configs chosen workload by workload stay",
           "fastest_records": "every convolution falls back to its fastest record",
           "defaults": "every convolution falls back to its default config",
           "unchecked": "not checked (no defaults among the sets)"}


def main():
    ap = argparse.ArgumentParser()
    for a in ("raw", "out", "network", "cpu", "commit", "command"):
        ap.add_argument("--" + a, required=True)
    for a in ("rounds", "repeat", "cores"):
        ap.add_argument("--" + a, type=int, required=True)
    a = ap.parse_args()
    rows = side_rounds(a.raw, a.network, SIDES, a.rounds)
    refine = [json.loads(l) for l in open(os.path.join(a.raw, "refine.json")) if l.startswith("{")][-1]
    check = refine.get("check", {})
    med = {s: statistics.median([r[s] for r in rows if r[s]]) for s in SIDES}
    ratios = {"before_vs_default": round_ratio(rows, "before", "default"), "after_vs_default": round_ratio(rows, "after", "default"),
              "after_vs_before": round_ratio(rows, "after", "before")}
    changed = [w for w in refine["workloads"] if w.get("proposed") != w["kept"]]
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    L = [f"# {a.network}: the refinement's whole-pass check against the default configs", "",
         f"Generated {now} by `bench/refine_check/run.sh` at commit {a.commit} on {a.cpu}, {a.cores} cores; "
         "mtgpu through PoCL's CPU device.", "",
         f"Regenerate: `{a.command}`", "",
         f"`before`: the tuned database as its own refinement left it; `after`: a copy refined again by `mtgpu refine "
         f"{a.network}` at this commit, which checks the configs it chose workload by workload in whole passes against "
         "every convolution's fastest record and the default configs and keeps the fastest of the three. Then `mtgpu run "
         f"{a.network}` ({a.repeat} passes, the median) with the default configs (no database), `before` and `after` in turns, "
         f"{a.rounds} rounds, the order rotating; ratios within a round, their median and range over the rounds.", "",
         "| side | pass ms | / default | / before |", "|---|---|---|---|",
         f"| default configs | {med['default']:.2f} | 1.00 | - |",
         f"| before (earlier refinement) | {med['before']:.2f} | {fmt_spread(ratios['before_vs_default'])} | 1.00 |",
         f"| after (refined with the check) | {med['after']:.2f} | {fmt_spread(ratios['after_vs_default'])} | "
         f"{fmt_spread(ratios['after_vs_before'])} |", ""]
    nw = len(refine["workloads"])
    changed_words = f" ({len(changed)} of {nw} workloads change their set)" if changed else ""
    if check:
        L += [f"The check ({check['rounds']} rounds of whole passes inside `mtgpu refine`): the configs chosen workload by workload "
              f"{check['kept_pass_ms']:.2f} ms a pass, the fastest records {check['fastest_pass_ms']:.2f}, the defaults "
              f"{check['default_pass_ms']:.2f}; chosen / defaults {check['kept_vs_default']:.3f}, fastest / defaults "
              f"{check['fastest_vs_default']:.3f}: **{OUTCOME.get(check['outcome'], check['outcome'])}**"
              f"{changed_words}.", ""]
    with open(a.out + ".md", "w") as f:
        f.write("\n".join(L))
    with open(a.out + ".json", "w") as f:
        json.dump({"network": a.network, "commit": a.commit, "cpu": a.cpu, "cores": a.cores, "generated": now, "command": a.command,
                   "rounds": rows, "median_ms": med, "ratios": ratios, "check": check}, f, indent=1)
    print("\n".join(L))


if __name__ == "__main__":
    main()
