#!/usr/bin/env python3
"""bench/launch_gaps: PoCL's text trace of `mtgpu run` summarised per pass
(--summarise TRACE: a JSON object on stdout), then the report over the
rounds (--raw: NAME.md and NAME.json).

A trace line is `ns | EV ID n | DEV d | CQ q | ndrange_kernel | STATE | ... |
name=KERNEL` with STATE one of queued, submitted, running, complete. The
timed passes are the last PASSES x LAUNCHES kernel commands (the warm-up
passes and the build come before)."""
import argparse
import datetime
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from benchlib import fmt_spread, spread  # noqa: E402

STATES = ("queued", "submitted", "running", "complete")


def read_trace(path):
    """Kernel commands in the order they were queued: [{state: ns, "name": kernel}]."""
    cmds = {}
    with open(path, errors="replace") as f:
        for line in f:
            p = [x.strip() for x in line.split("|")]
            if len(p) < 6 or p[4] != "ndrange_kernel" or p[5] not in STATES:
                continue
            try:
                ev = int(p[1].split()[-1])
                cmd = cmds.setdefault(ev, {})
                cmd[p[5]] = int(p[0])
            except ValueError:
                continue
            name = next((x[5:] for x in p[6:] if x.startswith("name=")), None)
            if name:
                cmd["name"] = name
    return [c for _, c in sorted(cmds.items()) if all(s in c for s in STATES)]


def summarise(trace, launches, passes):
    cmds = read_trace(trace)
    if len(cmds) < launches * passes:
        sys.exit(f"launch_gaps: the trace has {len(cmds)} complete kernel commands, fewer than {passes} passes of {launches}")
    cmds = cmds[-launches * passes:]
    out = []
    for p in range(passes):
        c = cmds[p * launches:(p + 1) * launches]
        gaps = [(b["running"] - a["complete"]) / 1e3 for a, b in zip(c, c[1:])]
        out.append({"span_us": (c[-1]["complete"] - c[0]["running"]) / 1e3,
                    "running_us": sum((x["complete"] - x["running"]) / 1e3 for x in c),
                    "gaps_us": gaps,
                    "submitted_to_running_us": [(x["running"] - x["submitted"]) / 1e3 for x in c[1:]],
                    "complete_to_next_submitted_us": [(b["submitted"] - a["complete"]) / 1e3 for a, b in zip(c, c[1:])],
                    "kernels": [x.get("name", "?") for x in c]})
    return {"launches": launches, "passes": out}


def report(a):
    R = range(a.rounds)
    gaps = [json.load(open(os.path.join(a.raw, f"gaps-{r}.json"))) for r in R]
    traced = [json.load(open(os.path.join(a.raw, f"traced-{r}.json")))["median_ms"] for r in R]
    untraced = [json.load(open(os.path.join(a.raw, f"untraced-{r}.json")))["median_ms"] for r in R]
    launches = gaps[0]["launches"]

    def per_round(f):  # median over a round's passes of f(pass)
        return [statistics.median(f(p) for p in g["passes"]) for g in gaps]

    span = per_round(lambda p: p["span_us"])
    running = per_round(lambda p: p["running_us"])
    gap_sum = per_round(lambda p: sum(p["gaps_us"]))
    gap_med = [statistics.median(x for p in g["passes"] for x in p["gaps_us"]) for g in gaps]
    sub_run = [statistics.median(x for p in g["passes"] for x in p["submitted_to_running_us"]) for g in gaps]
    done_sub = [statistics.median(x for p in g["passes"] for x in p["complete_to_next_submitted_us"]) for g in gaps]
    # The gap before each kernel, by the kernel that starts after it.
    by_kernel = {}
    for g in gaps:
        for p in g["passes"]:
            for name, x in zip(p["kernels"][1:], p["gaps_us"]):
                by_kernel.setdefault(name, []).append(x)
    kernels = sorted(({"kernel": k, "launches_per_pass": len(v) // (a.rounds * len(gaps[0]["passes"])),
                       "gap_us": statistics.median(v)} for k, v in by_kernel.items()), key=lambda x: -x["gap_us"])
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    res = {"generated": now, "commit": a.commit, "cpu": a.cpu, "cores": a.cores, "network": a.network, "database": a.db,
           "rounds": a.rounds, "repeat": a.repeat, "command": a.command, "launches": launches,
           "pass_ms": {"untraced": spread(untraced), "traced": spread(traced)},
           "traced_over_untraced": spread([t / u for t, u in zip(traced, untraced)]),
           "span_us": spread(span), "running_us": spread(running), "gaps_us_sum": spread(gap_sum),
           "gap_us_median": spread(gap_med), "submitted_to_running_us_median": spread(sub_run),
           "complete_to_next_submitted_us_median": spread(done_sub), "by_kernel": kernels}
    with open(a.out + ".json", "w") as f:
        json.dump(res, f, indent=1)
    L = [f"# {a.network}: the time between its kernels, from PoCL's trace", "",
         f"Generated {now} by `bench/launch_gaps/run.sh` at commit {a.commit} on {a.cpu}, {a.cores} cores; "
         f"mtgpu through PoCL's CPU device; database: {a.db}.", "",
         f"Regenerate: `{a.command}`", "",
         f"Each round: `mtgpu run {a.network} --repeat {a.repeat}` with `POCL_TRACING=text` and without, in turns, {a.rounds} rounds. "
         f"From the trace, per timed pass ({launches} kernel launches): the span from the first kernel's start to the last one's "
         "completion, the kernels' running time (PoCL's `running` to `complete`: what a profiling event measures), the gaps "
         "between one kernel's completion and the next one's start, split into completion to the next command's submission "
         "(its dependency resolved) and submission to start (a worker taking it up). Medians over a round's passes, then "
         "median and range over the rounds.", "",
         "| | value |", "|---|---|",
         f"| pass without tracing, ms | {fmt_spread(spread(untraced))} |",
         f"| pass traced, ms (tracing's cost: x{spread([t / u for t, u in zip(traced, untraced)])[0]:.2f}) | {fmt_spread(spread(traced))} |",
         f"| traced pass, first start to last completion, us | {fmt_spread(spread(span), '.0f')} |",
         f"| kernels running, us | {fmt_spread(spread(running), '.0f')} |",
         f"| gaps between kernels, us per pass | {fmt_spread(spread(gap_sum), '.0f')} |",
         f"| gap before a kernel, median us | {fmt_spread(spread(gap_med), '.1f')} |",
         f"| of which completion to the next one's submission, median us | {fmt_spread(spread(done_sub), '.1f')} |",
         f"| of which submission to start, median us | {fmt_spread(spread(sub_run), '.1f')} |",
         "", "The gap before a kernel by the kernel that starts after it (median over every pass):", "",
         "| kernel | launches per pass | gap, us |", "|---|---|---|"]
    L += [f"| {k['kernel']} | {k['launches_per_pass']} | {k['gap_us']:.1f} |" for k in kernels]
    with open(a.out + ".md", "w") as f:
        f.write("\n".join(L) + "\n")
    print("\n".join(L[:20]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--summarise", help="a PoCL text trace: print its timed passes as JSON")
    ap.add_argument("--launches-from", help="`mtgpu run --json` output of the traced run (its launches per pass)")
    ap.add_argument("--passes", type=int)
    for x in ("raw", "out", "network", "db", "cpu", "commit", "command"):
        ap.add_argument("--" + x)
    for x in ("rounds", "repeat", "cores"):
        ap.add_argument("--" + x, type=int)
    a = ap.parse_args()
    if a.summarise:
        run = json.load(open(a.launches_from))
        launches = run.get("launches_fused", run["launches"])
        json.dump(summarise(a.summarise, launches, a.passes), sys.stdout)
        return
    if not all((a.raw, a.out, a.network, a.rounds)):
        ap.error("--raw, --out, --network and --rounds, or --summarise")
    report(a)


if __name__ == "__main__":
    main()
