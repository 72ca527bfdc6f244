"""Runs the replays of bench/scheduler_replay/run.sh and writes its report."""
import argparse
import json
import os
import statistics
import subprocess
import time

import benchlib

log = benchlib.logger("scheduler_replay")


def replay(exe, net, db, trials, seed, model, early_stop=None):
    """One simulated tuning: (summary, per-record lines)."""
    cmd = [exe, "tune", net, "--simulate", db, "--no-db", "--trials", str(trials), "--seed", str(seed), "--cost-model", model, "--json"]
    if early_stop is not None:
        cmd += ["--early-stop", str(early_stop)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    lines = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    if p.returncode != 0 or not lines or lines[-1].get("type") != "summary":
        raise SystemExit(f"scheduler_replay: {' '.join(cmd)} failed (exit {p.returncode}): {p.stderr.strip()[-400:]}")
    return lines[-1], [l for l in lines[:-1] if l.get("type") == "record"]


def covered_ms(summary, covered):
    """The sum of best time x count over the tasks the recording covers; 0
    when one of them has no valid config yet."""
    tasks = [t for t in summary["tasks"] if t["workload"] in covered]
    if any(t["best_ms"] <= 0 for t in tasks):
        return 0
    return sum(t["best_ms"] * t["count"] for t in tasks)


def on_final_template(summary, records):
    """The share of the trials spent on the template each task ended on."""
    final = {t["workload"]: t["template"] for t in summary["tasks"]}
    return sum(r["template"] == final.get(r["workload"]) for r in records) / max(len(records), 1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True)
    ap.add_argument("--head", required=True)
    ap.add_argument("--base-rev", required=True)
    ap.add_argument("--head-rev", required=True)
    ap.add_argument("--per-task", required=True)
    ap.add_argument("--seeds", type=int, required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--command", required=True)
    ap.add_argument("pairs", nargs="+")
    a = ap.parse_args()
    med = statistics.median
    rows = []
    for pair in a.pairs:
        net, db = pair.split("=", 1)
        # everything the recording holds, measured: what a perfect search would reach
        full, _ = replay(a.head, net, db, 10 ** 6, 1, "random", early_stop=0)
        # tasks the recording holds no valid config of stay out of every sum
        covered = {t["workload"] for t in full["tasks"] if t["best_ms"] > 0}
        ntasks = len(covered)
        best_ms = covered_ms(full, covered)
        for model in a.models.split():
            for per_task in [int(x) for x in a.per_task.split()]:
                trials = per_task * ntasks
                res = {}
                for side, exe in (("base", a.base), ("head", a.head)):
                    ms, share = [], []
                    for seed in range(1, a.seeds + 1):
                        s, recs = replay(exe, net, db, trials, seed, model)
                        ms.append(covered_ms(s, covered))
                        share.append(on_final_template(s, recs))
                    res[side] = {"network_ms": ms, "on_final_template": share}
                # 0: a task with no valid config measured yet (the budget ran out in the first rounds)
                if 0 in res["head"]["network_ms"] + res["base"]["network_ms"]:
                    raise SystemExit(f"scheduler_replay: {net} at {per_task} trials per task leaves a task unmeasured; "
                                     "give PER_TASK budgets that cover every template's first round")
                ratios = [h / b for h, b in zip(res["head"]["network_ms"], res["base"]["network_ms"])]
                row = {"network": net, "recording": db, "device": full["fingerprint"], "tasks": ntasks,
                       "tasks_not_recorded": len(full["tasks"]) - ntasks, "model": model,
                       "per_task": per_task, "trials": trials, "best_recorded_ms": best_ms,
                       "recorded_configs": full["trials_done"], "seeds": a.seeds, "sides": res,
                       "head_over_base": {"median": med(ratios), "min": min(ratios), "max": max(ratios),
                                          "head_faster_seeds": sum(r < 1 for r in ratios), "equal_seeds": sum(r == 1 for r in ratios)}}
                rows.append(row)
                b, h = med(res["base"]["network_ms"]), med(res["head"]["network_ms"])
                log(f"{net} {model} {per_task}/task: base {b:.3f} ms, head {h:.3f} ms, best recorded {best_ms:.3f}")
    out = {"command": a.command, "base": a.base_rev, "head": a.head_rev, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "machine": benchlib.cpu_model(), "rows": rows}
    os.makedirs(a.out, exist_ok=True)
    json.dump(out, open(f"{a.out}/{a.name}.json", "w"), indent=1)
    lines = [f"# Tuning in replay: {a.base_rev} (base) against {a.head_rev} (head)", "",
             f"`{a.command}` ({out['date']}, run on {out['machine']}; the times are the recordings', not this machine's).",
             "Each side replays the same recording with the same seeds; the network time is the sum over the tasks the recording",
             "holds (tasks; the trials per task count those) of the fastest time measured x the task's count. 'gap' is the median time over the best the recording holds (every recorded",
             "config measured); 'on final' is the share of trials spent on the template each task ended on.", "",
             "| network (tasks) | recording (device) | model | trials/task | base ms | head ms | head/base (range) | head faster / equal seeds | gap base | gap head | on final base | on final head |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        b, h = med(r["sides"]["base"]["network_ms"]), med(r["sides"]["head"]["network_ms"])
        hb = r["head_over_base"]
        best = r["best_recorded_ms"]
        lines.append(f"| {r['network']} ({r['tasks']}) | `{r['recording']}` ({r['device']}, {r['recorded_configs']} configs) | {r['model']} | {r['per_task']} | "
                     f"{b:.3f} | {h:.3f} | {hb['median']:.3f} ({hb['min']:.3f}-{hb['max']:.3f}) | {hb['head_faster_seeds']} / {hb['equal_seeds']} of {r['seeds']} | "
                     f"{b / best:.3f} | {h / best:.3f} | {med(r['sides']['base']['on_final_template']):.0%} | {med(r['sides']['head']['on_final_template']):.0%} |")
    open(f"{a.out}/{a.name}.md", "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
