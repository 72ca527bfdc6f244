"""Helpers shared by the Python drivers of bench/: messages, the machine's
CPU model for the reports, the convolutions of zoo networks, the training
tasks a model file's manifest lists, database snapshots, and ratios over
rounds (median and range)."""
import json
import os
import platform
import sqlite3
import statistics
import subprocess
import sys


def logger(name):
    """A function printing 'NAME: message' to stderr."""
    def log(msg):
        print(f"{name}: {msg}", file=sys.stderr, flush=True)
    return log


def cpu_caches():
    """The last two cache levels of CPU 0, e.g. "L2 2 MiB/core, L3 480 MiB":
    CPUs of one model name (an "Intel(R) Xeon(R) Processor" of two
    generations) differ there, and the cache sizes decide which kernels win."""
    base = "/sys/devices/system/cpu/cpu0/cache"
    levels = {}
    try:
        for d in sorted(os.listdir(base)):
            if not d.startswith("index"):
                continue
            rd = lambda f: open(os.path.join(base, d, f)).read().strip()
            if rd("type") == "Instruction":
                continue
            size, shared = rd("size"), rd("shared_cpu_list")
            kib = int(size[:-1]) * (1024 if size.endswith("M") else 1) if size[-1] in "KM" else int(size) // 1024
            levels[int(rd("level"))] = (kib, "," not in shared and "-" not in shared)
    except (OSError, ValueError):
        return ""
    parts = []
    for lvl in sorted(levels)[-2:]:
        kib, private = levels[lvl]
        amount = f"{kib // 1024} MiB" if kib % 1024 == 0 else f"{kib} KiB"
        parts.append(f"L{lvl} {amount}{'/core' if private else ''}")
    return ", ".join(parts)


def cpu_model():
    """The CPU's model name with its family, widest vectors and cache sizes,
    for the reports: a cloud CPU's name ("AMD EPYC") alone does not tell a
    Zen 3 from a Zen 4."""
    name = platform.processor() or "unknown"
    fields = {}
    try:
        for line in open("/proc/cpuinfo"):
            key, _, value = line.partition(":")
            key = key.strip()
            if key in ("model name", "cpu family", "model", "flags") and key not in fields:
                fields[key] = value.strip()
            if line.strip() == "":
                break
    except OSError:
        pass
    name = fields.get("model name", name)
    about = []
    if "cpu family" in fields and "model" in fields:
        about.append(f"family {fields['cpu family']} model {fields['model']}")
    flags = fields.get("flags", "").split()
    if flags:
        about.append("AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2")
    caches = cpu_caches()
    if caches:
        about.append(caches)
    return f"{name} ({', '.join(about)})" if about else name


def workloads_of(mtgpu, names):
    """The workloads named in a ';'-separated list: a workload stands for
    itself, a network name for all of its convolutions (`mtgpu tasks`)."""
    out = []
    for n in names.split(";"):
        n = n.strip()
        if not n:
            continue
        if "=" in n:
            out.append(n)
            continue
        txt = subprocess.run([mtgpu, "tasks", n, "--json"], check=True, capture_output=True, text=True).stdout
        out += [json.loads(l)["workload"] for l in txt.splitlines() if l.startswith("{") and '"workload"' in l]
    return list(dict.fromkeys(out))


def check_held_out(tool, model_file, workloads, what="the held-out convolutions"):
    """Exits unless model_file's manifest (model_file.manifest.json) lists no
    training task among workloads; returns the manifest's path."""
    man = model_file + ".manifest.json"
    if not os.path.exists(man):
        sys.exit(f"{tool}: {model_file}: no manifest beside it ({man}); cannot check what it was trained on")
    trained = {t["workload"] for t in json.load(open(man))["dataset"]["task_list"]}
    seen = [w for w in workloads if w in trained]
    if seen:
        sys.exit(f"{tool}: {model_file} was trained on {len(seen)} of {what}, e.g. {seen[0]}")
    return man


def snapshot(src, dst):
    """A consistent copy of a records database that may be being written (SQLite's online backup)."""
    s = sqlite3.connect(f"file:{src}?mode=ro", uri=True)
    d = sqlite3.connect(dst)
    s.backup(d)
    s.close()
    d.close()


def side_rounds(work, net, sides, rounds):
    """Per round, each side's median latency from WORK/NET.SIDE.ROUND.json
    (what `mtgpu run --json` and bench_onednn_net write), None where missing."""
    rows = []
    for r in range(rounds):
        row = {}
        for s in sides:
            p = os.path.join(work, f"{net}.{s}.{r}.json")
            row[s] = json.load(open(p))["median_ms"] if os.path.exists(p) and os.path.getsize(p) else None
        rows.append(row)
    return rows


def spread(values):
    """(median, min, max) of the values that are not None, or None."""
    v = [x for x in values if x is not None]
    return (statistics.median(v), min(v), max(v)) if v else None


def fmt_spread(s, spec=".2f"):
    """A spread as "median (min-max)"; "-" for None."""
    if not s:
        return "-"
    return f"{s[0]:{spec}} ({s[1]:{spec}}-{s[2]:{spec}})"


def round_ratio(rows, a, b):
    """Side a's latency over side b's within each round (one window of the
    machine): (median, min, max) over the rounds, or None."""
    return spread([x[a] / x[b] for x in rows if x[a] and x[b]])


def conv_class(layer):
    """'kvec 1x1 s2 -> 14x14' from a profiled conv layer of `mtgpu run`."""
    kv = dict(p.split("=") for p in layer["workload"].split(","))
    stride = int(kv.get("stride", "1").split("x")[0])
    pad = int(kv.get("pad", "0").split("x")[0])
    h, r = int(kv["h"]), int(kv["r"])
    oh = (h + 2 * pad - r) // stride + 1
    dw = " dw" if int(kv.get("groups", "1")) > 1 else ""
    return f"{layer['template']} {r}x{kv['s']}{dw} s{stride} -> {oh}x{oh}"


def profile_words(run):
    """How `mtgpu run --profile --json` (the parsed object) timed its layers."""
    if run and run.get("profile") == "in_pass":
        return ("each layer timed inside the fused pass from its threads' time-stamp counter: the longest any "
                "thread took for its share")
    return "each kernel timed on the device inside a pass queued as without profiling"
