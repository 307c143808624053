#!/usr/bin/env python3
"""bench_forward.py -- `bankml bench` against llama-bench b11669 (haswell backend) on the benchmark shapes.

For each round and each model, alternately: `./bankml bench MODEL --fork build/bench.FORK.json -p P -n N -t T -r R`
then `llama-bench -m MODEL -t T -p P -n N -r R -o json`. Prints the load average with every pair and a Markdown table
of t/s per round and the ratio bankml / llama-bench (min..max over rounds). Writes build/bench-forward.json.

Models: build/bench-models/{smollm2-135m-shape-f16,bonsai-1.7b-shape-q1_0,bonsai-1.7b-shape-q2_0}.gguf and both
shapes' llama-quantize mixes (-q4_k_m, -q6_k, -q4_0) (`make bench-models`), pinned in build/bench.FORK.json.

Usage: python3 testing/bench_forward.py [--rounds 2] [-p 128] [-n 64] [-t 2] [-r 2] [--models a.gguf,b.gguf]
Standard library only."""
import argparse, json, os, subprocess, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle

ROOT = oracle.ROOT
DEFAULT = ["smollm2-135m-shape-f16", "bonsai-1.7b-shape-q1_0", "bonsai-1.7b-shape-q2_0"] + \
    [f"{shape}-{mix}" for shape in ("bonsai-1.7b-shape", "smollm2-135m-shape") for mix in ("q4_k_m", "q6_k", "q4_0")]


def loadavg():
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


def run_bankml(model, a):
    """bankml bench's last line is JSON with pp_tps / tg_tps."""
    exe = os.environ.get("BANKML_BIN") or os.path.join(ROOT, "bankml")
    fork = os.path.join(ROOT, "build", "bench.FORK.json")
    p = subprocess.run([exe, "bench", model, "--fork", fork, "-p", str(a.p), "-n", str(a.n), "-t", str(a.t),
                        "-r", str(a.r)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit(f"bankml bench {model} failed: {p.stderr.strip()[-400:]}")
    j = json.loads(p.stdout.strip().splitlines()[-1])
    return j["pp_tps"], j["tg_tps"]


def run_llama(kit, model, a):
    """llama-bench -o json gives one record per test with avg_ts."""
    p = subprocess.run([os.path.join(kit, "llama-bench"), "-m", model, "-t", str(a.t), "-p", str(a.p),
                        "-n", str(a.n), "-r", str(a.r), "-o", "json"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit(f"llama-bench {model} failed: {p.stderr.strip()[-400:]}")
    pp = tg = None
    for rec in json.loads(p.stdout):
        if rec.get("n_prompt", 0) > 0 and rec.get("n_gen", 0) == 0:
            pp = rec["avg_ts"]
        elif rec.get("n_gen", 0) > 0 and rec.get("n_prompt", 0) == 0:
            tg = rec["avg_ts"]
    return pp, tg


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("-p", type=int, default=128)
    ap.add_argument("-n", type=int, default=64)
    ap.add_argument("-t", type=int, default=2)
    ap.add_argument("-r", type=int, default=2)
    ap.add_argument("--models", default="")
    a = ap.parse_args()
    kit, why = oracle.find_kit()
    if not kit:
        sys.exit(f"bench_forward: no oracle kit: {why}")
    kit = kit.bin
    models = [m for m in a.models.split(",") if m] or \
        [os.path.join(ROOT, "build", "bench-models", m + ".gguf") for m in DEFAULT]
    for m in models:
        if not os.path.exists(m):
            sys.exit(f"bench_forward: {m} is missing (make bench-models)")
    res = {m: {"bankml": [], "llama": [], "load": []} for m in models}
    for rnd in range(a.rounds):
        for m in models:
            la = loadavg()
            b = run_bankml(m, a)
            l = run_llama(kit, m, a)
            res[m]["bankml"].append(b)
            res[m]["llama"].append(l)
            res[m]["load"].append(la)
            print(f"round {rnd + 1} {os.path.basename(m)} load {la}: bankml pp {b[0]:.1f} tg {b[1]:.1f} | "
                  f"llama-bench pp {l[0]:.1f} tg {l[1]:.1f}", flush=True)
    print(f"\n-p {a.p} -n {a.n} -t {a.t} -r {a.r}, {a.rounds} rounds alternating; t/s per round\n")
    print("| model | test | bankml | llama-bench haswell | bankml / llama-bench |")
    print("|---|---|---|---|---|")
    for m in models:
        for i, test in ((0, f"pp{a.p}"), (1, f"tg{a.n}")):
            bs = [x[i] for x in res[m]["bankml"]]
            ls = [x[i] for x in res[m]["llama"]]
            ratios = [b / l for b, l in zip(bs, ls) if l]
            print(f"| {os.path.basename(m)} | {test} | {' / '.join(f'{x:.1f}' for x in bs)} | "
                  f"{' / '.join(f'{x:.1f}' for x in ls)} | {min(ratios):.2f}–{max(ratios):.2f}× |")
    os.makedirs(os.path.join(ROOT, "build"), exist_ok=True)
    with open(os.path.join(ROOT, "build", "bench-forward.json"), "w") as f:
        json.dump({"args": vars(a), "results": res}, f, indent=1)


if __name__ == "__main__":
    main()
