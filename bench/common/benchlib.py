"""Helpers shared by the Python drivers of bench/: messages, the machine's
CPU model for the reports, the convolutions of zoo networks, the training
tasks a model file's manifest lists, and database snapshots."""
import json
import os
import platform
import sqlite3
import subprocess
import sys


def logger(name):
    """A function printing 'NAME: message' to stderr."""
    def log(msg):
        print(f"{name}: {msg}", file=sys.stderr, flush=True)
    return log


def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


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
