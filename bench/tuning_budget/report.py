"""Writes the tables of bench/tuning_budget/run.sh: the network at the default
configs, tuned at the default budget and tuned on to a larger one, timed in
turns (the ratios taken within a round); per convolution inside the network;
and, from the records, what the tuner itself measured of each task's
default config against its fastest config at either budget."""
import argparse
import datetime
import json
import os
import sqlite3
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "common"))
from benchlib import fmt_spread, spread  # noqa: E402

SIDES = ("default", "base", "more")


def load_runs(raw, rounds):
    """runs[side][round]: the JSON of `mtgpu run --profile --json`."""
    runs = {s: [] for s in SIDES}
    for s in SIDES:
        for r in range(rounds):
            p = os.path.join(raw, f"run-{s}-{r}.json")
            if not os.path.exists(p) or not os.path.getsize(p):
                sys.exit(f"tuning_budget: missing {p}")
            runs[s].append(json.load(open(p)))
    return runs


def per_workload(run):
    """Convolution device ms summed per workload inside one pass, with the template that ran it."""
    out = {}
    for layer in run["layers"]:
        if layer.get("kind") != "conv2d":
            continue
        ms, n, tmpl = out.get(layer["workload"], (0.0, 0, layer.get("template", "?")))
        out[layer["workload"]] = (ms + layer["ms"], n + 1, tmpl)
    return out


def cold_ms(con, workload, template, config):
    row = con.execute("SELECT r.median_ms FROM records r JOIN workloads w ON w.id = r.workload_id WHERE w.text = ? AND r.template = ? "
                      "AND r.config = ? AND r.status = 'ok' AND r.source LIKE 'measured-cold%'", (workload, template, config)).fetchone()
    return row[0] if row else None


def fastest_cold(con, workload):
    row = con.execute("SELECT r.template, r.median_ms FROM records r JOIN workloads w ON w.id = r.workload_id WHERE w.text = ? "
                      "AND r.status = 'ok' AND r.source LIKE 'measured-cold%' ORDER BY r.median_ms LIMIT 1", (workload,)).fetchone()
    return row if row else (None, None)


def trials_of(con, workload):
    return con.execute("SELECT COUNT(*) FROM records r JOIN workloads w ON w.id = r.workload_id WHERE w.text = ?", (workload,)).fetchone()[0]


def jsonl(path):
    return [json.loads(l) for l in open(path) if l.startswith("{")]


def main():
    ap = argparse.ArgumentParser()
    for a in ("work", "raw", "out", "network", "db", "cpu", "commit", "command", "templates"):
        ap.add_argument("--" + a, required=True)
    for a in ("per-task", "tasks", "tune-s", "rounds", "repeat", "cores"):
        ap.add_argument("--" + a, type=int, required=True)
    a = ap.parse_args()
    runs = load_runs(a.raw, a.rounds)
    label = {"default": "default configs", "base": "tuned, 32 per task", "more": f"tuned on, {a.per_task} per task"}

    # Whole passes: each side's median pass, the ratios within each round.
    net = {s: [r["median_ms"] for r in runs[s]] for s in SIDES}
    ratio = {s: spread([x / d for x, d in zip(net[s], net["default"])]) for s in SIDES}
    more_base = spread([m / b for m, b in zip(net["more"], net["base"])])
    conv = {s: [r["conv_ms"] for r in runs[s]] for s in SIDES}
    conv_ratio = {s: spread([x / d for x, d in zip(conv[s], conv["default"])]) for s in SIDES}
    peak = spread([r["peak_gflops"] for s in SIDES for r in runs[s]])

    # Per workload inside the network: device ms summed over its layers, ratios within each round.
    pw = {s: [per_workload(r) for r in runs[s]] for s in SIDES}
    rows = []
    for wl in pw["default"][0]:
        d = [x[wl][0] for x in pw["default"]]
        cells = {"workload": wl, "layers": pw["default"][0][wl][1]}
        for s in SIDES:
            v = [x[wl][0] for x in pw[s]]
            cells[s] = {"template": pw[s][0][wl][2], "ms": statistics.median(v),
                        "vs_default": spread([x / y for x, y in zip(v, d)])}
        rows.append(cells)
    rows.sort(key=lambda c: -c["default"]["ms"])

    # What the tuner measured (timed alone, weights evicted): default config against fastest record.
    best_default = jsonl(os.path.join(a.raw, "best-default.json"))
    base = sqlite3.connect(f"file:{a.work}/base.db?mode=ro", uri=True)
    more = sqlite3.connect(f"file:{a.work}/more.db?mode=ro", uri=True)
    recs = []
    for b in best_default:
        wl, n = b["workload"], b["count"]
        dflt = cold_ms(more, wl, b["template"], b["config"])
        fb, fm = fastest_cold(base, wl), fastest_cold(more, wl)
        recs.append({"workload": wl, "count": n, "default_template": b["template"], "default_ms": dflt,
                     "records_base": trials_of(base, wl), "records_more": trials_of(more, wl),
                     "fastest_base_template": fb[0], "fastest_base_ms": fb[1],
                     "fastest_more_template": fm[0], "fastest_more_ms": fm[1]})
    full = [r for r in recs if r["default_ms"] and r["fastest_base_ms"] and r["fastest_more_ms"]]
    sums = {k: sum(r["count"] * r[k] for r in full) for k in ("default_ms", "fastest_base_ms", "fastest_more_ms")}

    summary = jsonl(os.path.join(a.raw, "tune_more_summary.json"))
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    L = [f"# {a.network}: does a larger tuning budget make tuning matter?", "",
         f"Generated {now} by `bench/tuning_budget/run.sh` at commit {a.commit} on {a.cpu}, {a.cores} cores; mtgpu through PoCL's CPU device.",
         f"Database tuned at `mtgpu tune`'s defaults: {a.db}. Its copy was tuned on to {a.per_task} measurements per task "
         f"({a.tasks} tasks, {a.tasks * a.per_task} in all, templates: {a.templates}; the refinement again at the end) in {a.tune_s} s.", "",
         f"Regenerate: `{a.command}`", "",
         f"Each round runs `mtgpu run {a.network} --profile` ({a.repeat} passes) with the default configs (no database), "
         f"the database as tuned and the copy tuned on, in turns, the order rotating; {a.rounds} rounds. "
         "A ratio is taken within a round (one window of the machine); tables give its median and range over the rounds. "
         f"FMA peak measured by the runs: {peak[0]:.0f} GFLOP/s ({peak[1]:.0f}-{peak[2]:.0f}).", "",
         "| side | pass ms | pass / default | convolutions ms | convolutions / default |", "|---|---|---|---|---|"]
    for s in SIDES:
        L.append(f"| {label[s]} | {statistics.median(net[s]):.2f} | {fmt_spread(ratio[s])} | {statistics.median(conv[s]):.2f} | {fmt_spread(conv_ratio[s])} |")
    L += ["", f"Tuned on against tuned at the default budget, whole pass: {fmt_spread(more_base)}.", "",
          "## What the tuner measured", "",
          "Per task, from the records (each config timed alone with its weights evicted, as `mtgpu tune` measures): "
          "the default config's time against the fastest record's at either budget. Network sums weight each task by its layers.", "",
          "| workload | layers | default | default ms | records (32 / more) | fastest at 32 | default / fastest | fastest tuned on | default / fastest |",
          "|---|---|---|---|---|---|---|---|---|"]
    for r in recs:
        def cell(t, ms):
            return f"{t} {ms:.3f}" if ms else "-"
        def rat(ms):
            return f"{r['default_ms'] / ms:.2f}" if ms and r["default_ms"] else "-"
        L.append(f"| `{r['workload']}` | {r['count']} | {r['default_template']} | {r['default_ms'] or 0:.3f} | {r['records_base']} / {r['records_more']} | "
                 f"{cell(r['fastest_base_template'], r['fastest_base_ms'])} | {rat(r['fastest_base_ms'])} | "
                 f"{cell(r['fastest_more_template'], r['fastest_more_ms'])} | {rat(r['fastest_more_ms'])} |")
    if full:
        L += ["", f"Network sums over the {len(full)} tasks with all three records: default {sums['default_ms']:.2f} ms, "
              f"fastest at 32 per task {sums['fastest_base_ms']:.2f} ms (default / fastest {sums['default_ms'] / sums['fastest_base_ms']:.2f}), "
              f"tuned on {sums['fastest_more_ms']:.2f} ms ({sums['default_ms'] / sums['fastest_more_ms']:.2f})."]
    L += ["", "## Inside the network", "",
          "Per workload, the device time of its layers summed (median over the rounds), largest at the default configs first.", "",
          "| workload | layers | default | ms | tuned (32) | ms | / default | tuned on | ms | / default |", "|---|---|---|---|---|---|---|---|---|---|"]
    for c in rows:
        L.append(f"| `{c['workload']}` | {c['layers']} | {c['default']['template']} | {c['default']['ms']:.3f} | "
                 f"{c['base']['template']} | {c['base']['ms']:.3f} | {fmt_spread(c['base']['vs_default'])} | "
                 f"{c['more']['template']} | {c['more']['ms']:.3f} | {fmt_spread(c['more']['vs_default'])} |")
    open(a.out + ".md", "w").write("\n".join(L) + "\n")
    json.dump({"network": a.network, "commit": a.commit, "cpu": a.cpu, "cores": a.cores, "generated": now, "command": a.command,
               "per_task": a.per_task, "tasks": a.tasks, "tune_s": a.tune_s, "rounds": a.rounds, "repeat": a.repeat,
               "pass_ms": net, "conv_ms": conv, "pass_vs_default": ratio, "conv_vs_default": conv_ratio, "more_vs_base": more_base,
               "peak_gflops": peak, "records": recs, "record_sums": sums, "workloads": rows, "tune_summary": summary},
              open(a.out + ".json", "w"), indent=1)
    print("\n".join(L[:20]))


if __name__ == "__main__":
    main()
