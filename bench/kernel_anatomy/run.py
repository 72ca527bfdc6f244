#!/usr/bin/env python3
"""Where a generated kernel's time goes: each case's kernel (`mtgpu conv
--source`, its default config unless the case names one) timed in turns with
copies of its source edited to take away one cost at a time, by
bench_anatomy (process CPU time per run over the device's compute units: the
time stolen from this virtual machine falls outside it). The variants:

  generated           the kernel as mtgpu prints it
  input in cache      the input channel planes 16 floats apart instead of
                      h*w, in loads and prefetches (1x1 layers: each
                      work-group's input stays in L1)
  weights in cache    every work-group reads the weights of the first few
                      channels and the first channel block
  both in cache       the two above
  ... no prefetch     and kvec's input prefetches removed
  ... reduction x10   and the reduction loop run 10 times over (accumulating
                      on): the work before and after it (zeroing, the
                      stores, the work-group's launch) weighs a tenth
  interior only       (padded kvec layers) every tile through the copy of
                      the reduction without column tests (reads past the
                      image's border land in the program's margin)
and, timed in the same turns and the same way, a kernel of independent
16-lane FMA chains: the peak the fractions are taken against.

Only the first variant computes the convolution; the others are timing
experiments (their outputs differ). A variant whose pattern is not in the
source is left out and said so.

    bench/kernel_anatomy/run.py        (under a minute on the 2-core machine of 2026-12-05)

Environment: BUILD_DIR [build-new, else build-bench, else build], ROUNDS [6],
RUNS [10] per round, OUT [bench/kernel_anatomy/results] gets kernel_anatomy.md
and kernel_anatomy.json, CASES [empty: the cases below; avx2: kvec's two
tiles for 8-lane vectors, into kernel_anatomy_avx2.md and .json; flat7:
the 8-lane default on 7x7 1x1 layers, into kernel_anatomy_flat7.md and
.json; first: MobileNetV2's three 112x112 layers, as generated and with
the input in cache, into kernel_anatomy_first.md and .json]. Exit status 0 when every case ran, 2 on an unknown CASES."""
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import benchlib  # noqa: E402

log = benchlib.logger("kernel_anatomy")

# (layer, workload, template, config or None for the default)
CASES = [
    ("ResNet-50 layer1.0.conv3", "n=1,c=64,h=56,w=56,k=256,r=1,s=1,stride=1,pad=0", "gemm", None),
    ("ResNet-50 layer1.1.conv1", "n=1,c=256,h=56,w=56,k=64,r=1,s=1,stride=1,pad=0", "kvec", None),
    ("ResNet-50 layer2.1.conv1", "n=1,c=512,h=28,w=28,k=128,r=1,s=1,stride=1,pad=0", "kvec", None),
    ("ResNet-50 layer3.1.conv3", "n=1,c=256,h=14,w=14,k=1024,r=1,s=1,stride=1,pad=0", "kvec", None),
    ("ResNet-50 layer2.0.conv2", "n=1,c=128,h=56,w=56,k=128,r=3,s=3,stride=2,pad=1", "kvec", None),
    ("ResNet-50 conv1", "n=1,c=3,h=224,w=224,k=64,r=7,s=7,stride=2,pad=3", "kvec", None),
    # the 7x7 1x1 layers with the configs tuning gave them (databases of 85b272e)
    ("ResNet-50 layer4.1.conv1", "n=1,c=2048,h=7,w=7,k=512,r=1,s=1,stride=1,pad=0", "kvec",
     "thread_k=1,vec=16,reg_k=4,thread_y=1,reg_y=1,thread_x=1,reg_x=7,unroll_rs=2,unroll_explicit=0"),
    ("ResNet-50 layer4.1.conv3", "n=1,c=512,h=7,w=7,k=2048,r=1,s=1,stride=1,pad=0", "kvec",
     "thread_k=1,vec=16,reg_k=4,thread_y=1,reg_y=1,thread_x=1,reg_x=7,unroll_rs=0,unroll_explicit=0"),
    ("MobileNetV2 features.15.conv.2", "n=1,c=960,h=7,w=7,k=160,r=1,s=1,stride=1,pad=0", "kvec",
     "thread_k=1,vec=16,reg_k=2,thread_y=1,reg_y=1,thread_x=1,reg_x=7,unroll_rs=1,unroll_explicit=1"),
]

# CASES=avx2: 8-lane vectors (AVX2's 16 registers), kvec's 16-lane default
# tile (2 channel vectors x 7 columns) against the 8-lane rule's 1 vector x
# 2 rows x 7 columns, on the layers where that rule applies
AVX2_TILES = (("2 x 7", "thread_k=1,vec=8,reg_k=2,thread_y=1,reg_y=1,thread_x=1,reg_x=7,unroll_rs=1,unroll_explicit=1"),
              ("1 x 2 x 7", "thread_k=1,vec=8,reg_k=1,thread_y=1,reg_y=2,thread_x=1,reg_x=7,unroll_rs=1,unroll_explicit=1"))
AVX2_CASES = [(f"{layer}, {tile}", wl, "kvec", config) for layer, wl in (
    ("ResNet-50 layer4.1.conv1", "n=1,c=2048,h=7,w=7,k=512,r=1,s=1,stride=1,pad=0"),
    ("ResNet-50 layer4.1.conv3", "n=1,c=512,h=7,w=7,k=2048,r=1,s=1,stride=1,pad=0"),
    ("ResNet-50 layer2.0.conv2", "n=1,c=128,h=56,w=56,k=128,r=3,s=3,stride=2,pad=1"),
    ("ResNet-50 conv1", "n=1,c=3,h=224,w=224,k=64,r=7,s=7,stride=2,pad=3"),
) for tile, config in AVX2_TILES]

# CASES=flat7: the 8-lane default (two channel vectors x 5 pixels of the
# flattened image) on the 7x7 1x1 layers of MobileNetV2 and ResNet-50
FLAT7_CASES = [(layer, wl, "kvec", None) for layer, wl in (
    ("MobileNetV2 features.15.conv.2", "n=1,c=960,h=7,w=7,k=160,r=1,s=1,stride=1,pad=0"),
    ("MobileNetV2 features.16.conv.0.0", "n=1,c=160,h=7,w=7,k=960,r=1,s=1,stride=1,pad=0"),
    ("MobileNetV2 features.18.0", "n=1,c=320,h=7,w=7,k=1280,r=1,s=1,stride=1,pad=0"),
    ("ResNet-50 layer4.1.conv1", "n=1,c=2048,h=7,w=7,k=512,r=1,s=1,stride=1,pad=0"),
)]

# CASES=first: MobileNetV2's first three convolutions (112x112 outputs) at
# their default configs, as generated and with the input in cache only: the
# other copies do not measure what they say on these kernels (gemm's with
# every work-group reading the same 64 weights ran slower than as generated,
# 0.45 against 0.35 ms on the 16 -> 96 layer: loads 4 KiB apart from the
# output stores wait on them; its reduction is unrolled, so x10 repeats
# another loop; stem's loops have other names)
FIRST_VARIANTS = ("generated", "input in cache")
FIRST_CASES = [(layer, wl, template, None) for layer, wl, template in (
    ("MobileNetV2 features.0.0", "n=1,c=3,h=224,w=224,k=32,r=3,s=3,stride=2,pad=1", "stem"),
    ("MobileNetV2 features.1.conv.1", "n=1,c=32,h=112,w=112,k=16,r=1,s=1,stride=1,pad=0", "gemm"),
    ("MobileNetV2 features.2.conv.0.0", "n=1,c=16,h=112,w=112,k=96,r=1,s=1,stride=1,pad=0", "gemm"),
)]

PREFETCH = re.compile(r"#if defined\(__clang__\) && defined\(__x86_64__\)\n[^\n]*__builtin_prefetch[^\n]*\n#endif\n")
# The reduction loop over input channels: kvec's c, gemm's rco.
RED_LOOP = re.compile(r"for \(long ((?:c|rco)_\d+) = 0; \1 < (\d+); \+\+\1\) \{")
# kvec's test that a tile's columns lie inside the image.
INTERIOR = re.compile(r"if \(\(\(\(\(x0_\d+ \* \d+L\) \+ \(-\d+L\)\) >= 0L\) && [^\n]*\) \{\n")


# Independent FMA chains as wide as the device's vectors, as
# mt_device_measure_peak times them, but timed here in turns with the kernels
# and by CPU time like them: the peak the fractions are taken against
# (16-lane chains in 8-lane registers spill: 24 of AVX2's 16).
PEAK_GROUPS, PEAK_ITERS, PEAK_CHAINS = 64, 4096, 12


def peak_source(lanes):
    return """__kernel __attribute__((reqd_work_group_size(1, 1, 1)))
void fma_peak(__global const float *restrict input, __global const float *restrict weight, __global float *restrict output) {
    const float%d x = vload%d(0, input), y = vload%d(1, weight);
%s
    for (int i = 0; i < %d; i++) {
%s
    }
    vstore%d(%s, 0, output + %d * get_group_id(0));
}
""" % (lanes, lanes, lanes, "\n".join("    float%d a%d = x + %d.0f;" % (lanes, i, i) for i in range(PEAK_CHAINS)), PEAK_ITERS,
       "\n".join("        a%d = fma(x, y, a%d);" % (i, i) for i in range(PEAK_CHAINS)), lanes, " + ".join("a%d" % i for i in range(PEAK_CHAINS)), lanes)


def device_lanes(mtgpu):
    """The first device's native float vector width (16 where it cannot be read)."""
    out = subprocess.run([mtgpu, "devices", "--json"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.startswith("{") and '"native_vector_width"' in line:
            width = json.loads(line)["native_vector_width"]
            return 16 if width >= 16 else 8 if width >= 8 else 4
    return 16


def parse_workload(text):
    d = dict(kv.split("=") for kv in text.split(","))
    n, c, h, w, k = (int(d.get(x, 1)) for x in ("n", "c", "h", "w", "k"))
    r, s = int(d.get("r", 1)), int(d.get("s", 1))
    stride, pad = int(d.get("stride", 1)), int(d.get("pad", 0))
    oh, ow = (h + 2 * pad - r) // stride + 1, (w + 2 * pad - s) // stride + 1
    return dict(n=n, c=c, h=h, w=w, k=k, r=r, s=s, oh=oh, ow=ow, flops=2.0 * n * k * oh * ow * c * r * s)


def source_of(mtgpu, wl, template, config):
    out = subprocess.run([mtgpu, "conv", wl, "--template", template, "--config", config or "default", "--source"], check=True,
                         capture_output=True, text=True).stdout
    head = re.search(r"^// (\S+) (\S+)\n// launch: (\d+)x(\d+)x(\d+) work-groups of (\d+)x(\d+)x(\d+) work-items\n", out, re.M)
    body = re.search(r"// ---- OpenCL C ----\n(.*?)\n// ---- CUDA C ----", out, re.S)
    if not head or not body:
        raise RuntimeError(f"{wl}: no OpenCL source and launch in `mtgpu conv --source`'s output")
    g = [int(x) for x in head.groups()[2:5]]
    b = [int(x) for x in head.groups()[5:8]]
    return head.group(2), body.group(1) + "\n", g, b


def input_in_cache(src, wl):
    """Input planes 16 floats apart, in the loads and in kvec's prefetches of
    later channels alike (so that those fetch the lines the loads will use)."""
    plane = wl["h"] * wl["w"]
    pat = re.compile(r"\(((?:c|rco)_\d+) \* %dL\)" % plane)
    ahead = re.compile(r"\(\(((?:c|rco)_\d+) \+ (\d+)L\) \* %dL\)" % plane)
    return ahead.sub(r"((\1 + \2L) * 16L)", pat.sub(r"(\1 * 16L)", src)) if pat.search(src) else None


def weights_in_cache(src):
    lines, hit = [], False
    for line in src.split("\n"):
        if "weight" in line and ("wb" in line or "w_row" in line or "wnext" in line):
            new = re.sub(r"\bwb(\d+)_\d+\b", r"(\1L * 4096L)", line)
            new = re.sub(r"\bwnext_\d+\b", "0L", new)  # kvec's prefetch of the next group's weights
            new = re.sub(r"\bw_row_\d+\b", "0L", new)
            new = re.sub(r"\b((?:c|rco)_\d+)\b", r"(\1 & 7L)", new)
            hit |= new != line
            line = new
        lines.append(line)
    return "\n".join(lines) if hit else None


def variants(src, wl):
    out = [("generated", src)]
    i = input_in_cache(src, wl)
    ww = weights_in_cache(src)
    out.append(("input in cache", i))
    out.append(("weights in cache", ww))
    both = weights_in_cache(i) if i else None
    out.append(("both in cache", both))
    prefetches = both is not None and PREFETCH.search(both) is not None
    nopf = PREFETCH.sub("", both) if prefetches else both
    out.append(("both in cache, no prefetch", nopf if prefetches else None))
    x10 = RED_LOOP.sub(lambda m: "for (long rep_x10 = 0; rep_x10 < 10; ++rep_x10) " + m.group(0), nopf) if nopf and RED_LOOP.search(nopf) else None
    out.append(("both in cache, no prefetch, reduction x10", x10))
    out.append(("interior only", INTERIOR.sub("if (1) {\n", src, count=1) if INTERIOR.search(src) else None))
    return out


def main():
    mtgpu_dir = next((d for d in (os.environ.get("BUILD_DIR"), "build-new", "build-bench", "build") if d and os.path.exists(os.path.join(d, "mtgpu"))), None)
    if not mtgpu_dir or not os.path.exists(os.path.join(mtgpu_dir, "bench_anatomy")):
        log("no build with mtgpu and bench_anatomy (set BUILD_DIR)")
        return 1
    mtgpu, host = os.path.join(mtgpu_dir, "mtgpu"), os.path.join(mtgpu_dir, "bench_anatomy")
    rounds, runs = os.environ.get("ROUNDS", "6"), os.environ.get("RUNS", "10")
    out_dir = os.environ.get("OUT", "bench/kernel_anatomy/results")
    case_set = os.environ.get("CASES", "")
    sets = {"": (CASES, "kernel_anatomy"), "avx2": (AVX2_CASES, "kernel_anatomy_avx2"), "flat7": (FLAT7_CASES, "kernel_anatomy_flat7"),
            "first": (FIRST_CASES, "kernel_anatomy_first")}
    if case_set not in sets:
        log(f"CASES={case_set}: unknown (empty, avx2, flat7 or first)")
        return 2
    cases, out_name = sets[case_set]
    lanes = device_lanes(mtgpu)
    peak_flops = 2.0 * lanes * PEAK_GROUPS * PEAK_ITERS * PEAK_CHAINS
    os.makedirs(out_dir, exist_ok=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True).stdout.strip()
    results, rc = [], 0
    with tempfile.TemporaryDirectory(prefix="mtgpu-anatomy-") as tmp:
        for layer, wl_text, template, config in cases:
            wl = parse_workload(wl_text)
            cfg, src, grid, block = source_of(mtgpu, wl_text, template, config)
            vs = variants(src, wl)
            if case_set == "first":
                vs = [(name, text) for name, text in vs if name in FIRST_VARIANTS]
            args, names, missing = [], [], []
            for j, (name, text) in enumerate(vs):
                if text is None:
                    missing.append(name)
                    continue
                path = os.path.join(tmp, f"v{j}.cl")
                with open(path, "w") as f:
                    f.write(text)
                args += [path, "x".join(map(str, grid)), "x".join(map(str, block))]
                names.append(name)
            peak_path = os.path.join(tmp, "peak.cl")
            with open(peak_path, "w") as f:
                f.write(peak_source(lanes))
            args += [peak_path, f"{PEAK_GROUPS}x1x1", "1x1x1"]
            nin = wl["n"] * wl["c"] * wl["h"] * wl["w"]
            nw = (wl["k"] + 15) // 16 * 16 * wl["c"] * wl["r"] * wl["s"] + 64 * 1024
            nout = wl["n"] * wl["k"] * wl["oh"] * wl["ow"]
            log(f"{layer} ({template} {cfg}): {len(names)} variants")
            p = subprocess.run([host, "--input", str(nin), "--weights", str(nw), "--output", str(nout), "--rounds", rounds, "--runs", runs] + args,
                               capture_output=True, text=True)
            if p.returncode != 0:
                log(f"{layer}: bench_anatomy failed: {p.stderr.strip()}")
                rc = 1
                continue
            rows = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
            head, rows, peak_row = rows[0], rows[1:-1], rows[-1]
            peak = peak_flops / (peak_row["cpu_ms_median"] * 1e6)
            case = dict(layer=layer, workload=wl_text, template=template, config=cfg, grid=grid, block=block, gflop=wl["flops"] / 1e9,
                        peak_gflops=peak, device=head["device"], left_out=missing, variants=[])
            for name, row in zip(names, rows):
                flops = wl["flops"] * (10 if name.endswith("x10") else 1)
                gf = flops / (row["cpu_ms_median"] * 1e6) if row["cpu_ms_median"] > 0 else 0.0
                case["variants"].append(dict(name=name, cpu_ms=row["cpu_ms_median"], cpu_ms_min=row["cpu_ms_min"], wall_ms=row["wall_ms_median"],
                                             wall_ms_min=row["wall_ms_min"], gflops=gf, of_peak=gf / peak if peak else None, runs=row["runs"]))
            results.append(case)

    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    doc = dict(generated=when, commit=commit + ("+changes" if dirty else ""), cpu=benchlib.cpu_model(), peak_lanes=lanes, rounds=int(rounds), runs=int(runs), cases=results)
    with open(os.path.join(out_dir, out_name + ".json"), "w") as f:
        json.dump(doc, f, indent=1)
    md = [f"# Where the generated kernels' time goes\n",
          f"Generated {when} by `bench/kernel_anatomy/run.py` at commit {doc['commit']} on {doc['cpu']}; mtgpu through PoCL's CPU device. "
          f"Each case: its kernel and edited copies of it timed in turns by `bench_anatomy`, {rounds} rounds of {runs} runs each; "
          "times are medians of process CPU time per run over the device's compute units (stolen time left out), GFLOP/s count the "
          f"convolution's direct FLOPs (ten times over for `reduction x10`), against the FMA peak: a kernel of 12 independent {lanes}-lane FMA "
          "chains per work-item (the device's vector width) timed in the same turns, the same way. "
          "Only `generated` computes the convolution; the other rows take one cost away at a time (see run.py).\n"]
    for case in results:
        md.append(f"\n## {case['layer']}: `{case['workload']}`\n")
        md.append(f"{case['template']} `{case['config']}`, {case['grid'][0]}x{case['grid'][1]}x{case['grid'][2]} work-groups; "
                  f"{case['gflop']:.3f} GFLOP; FMA peak {case['peak_gflops']:.0f} GFLOP/s.\n")
        md.append("| variant | CPU ms | wall ms | GFLOP/s | of peak |\n|---|---|---|---|---|")
        for v in case["variants"]:
            of_peak = f"{100 * v['of_peak']:.0f}%" if v["of_peak"] is not None else ""
            md.append(f"| {v['name']} | {v['cpu_ms']:.3f} | {v['wall_ms']:.3f} | {v['gflops']:.0f} | {of_peak} |")
        if case["left_out"]:
            md.append(f"\nNot applicable to this kernel: {', '.join(case['left_out'])}.")
    text = "\n".join(md) + "\n"
    with open(os.path.join(out_dir, out_name + ".md"), "w") as f:
        f.write(text)
    print(text)
    return rc


if __name__ == "__main__":
    sys.exit(main())
