#!/usr/bin/env python3
"""bench_kv_types.py -- decode speed per KV cache type: `bankml bench -ctk T -ctv T` against llama-bench b11669
(haswell backend) with the same types and flash attention on.

For each round and each type T, the two programs one after the other (bankml first in even rounds, llama-bench first
in odd ones, so neither always runs on the warmer machine):
  ./bankml bench MODEL --fork build/bench.FORK.json -ctk T -ctv T -p 0 -n N -t 2 -r R
  llama-bench -m MODEL -ctk T -ctv T -fa 1 -t 2 -p 0 -n N -r R -o json
each with the UTC time it started and the 1-minute load average then (the machine may be shared: the figures are
only as good as the load says). Prints a Markdown table of tgN t/s per round and the ratio bankml / llama-bench, and
writes build/bench-kv-types.json. f32 is not among the types: llama-bench b11669 does not take it
(`error: invalid parameter for argument: -ctk`; its ggml_type_from_name knows f16, bf16 and the quantized types).

Model: build/bench-models/smollm2-135m-shape-f16.gguf (`make bench-models`), pinned in build/bench.FORK.json.

Usage: python3 testing/bench_kv_types.py [--rounds 2] [-n 64] [-r 3] [-t 2] [--types f16,q8_0] [--model M.gguf]
Standard library only."""
import argparse, json, os, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle

ROOT = oracle.ROOT
TYPES = ["f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1"]


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def stamp():
    return time.strftime("%H:%M:%S", time.gmtime()), loadavg()


def run_bankml(model, t, a):
    exe = os.environ.get("BANKML_BIN") or os.path.join(ROOT, "bankml")
    fork = os.path.join(ROOT, "build", "bench.FORK.json")
    p = subprocess.run([exe, "bench", model, "--fork", fork, "-ctk", t, "-ctv", t, "-p", "0", "-n", str(a.n),
                        "-t", str(a.t), "-r", str(a.r)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit(f"bankml bench -ctk {t} failed: {p.stderr.strip()[-400:]}")
    j = json.loads(p.stdout.strip().splitlines()[-1])
    if (j["type_k"], j["type_v"]) != (t, t):
        sys.exit(f"bankml bench ran {j['type_k']}/{j['type_v']}, not {t}")
    return j["tg_tps"]


def run_llama(kit, model, t, a):
    p = subprocess.run([os.path.join(kit, "llama-bench"), "-m", model, "-ctk", t, "-ctv", t, "-fa", "1",
                        "-t", str(a.t), "-p", "0", "-n", str(a.n), "-r", str(a.r), "-o", "json"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit(f"llama-bench -ctk {t} failed: {p.stderr.strip()[-400:]}")
    for rec in json.loads(p.stdout):
        if rec.get("n_gen", 0) > 0 and rec.get("n_prompt", 0) == 0:
            if (rec.get("type_k"), rec.get("type_v")) != (t, t):
                sys.exit(f"llama-bench ran {rec.get('type_k')}/{rec.get('type_v')}, not {t}")
            return rec["avg_ts"]
    sys.exit(f"llama-bench -ctk {t}: no generation record")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("-n", type=int, default=64)
    ap.add_argument("-r", type=int, default=3)
    ap.add_argument("-t", type=int, default=2)
    ap.add_argument("--types", default=",".join(TYPES))
    ap.add_argument("--model", default=os.path.join(ROOT, "build", "bench-models", "smollm2-135m-shape-f16.gguf"))
    a = ap.parse_args()
    kit, why = oracle.find_kit()
    if not kit:
        sys.exit(f"bench_kv_types: no oracle kit: {why}")
    if not os.path.exists(a.model):
        sys.exit(f"bench_kv_types: {a.model} is missing (make bench-models)")
    types = [t for t in a.types.split(",") if t]
    res = {t: [] for t in types}
    for rnd in range(a.rounds):
        for t in types:
            row = {}
            order = ("bankml", "llama") if rnd % 2 == 0 else ("llama", "bankml")
            for who in order:
                at, la = stamp()
                tps = run_bankml(a.model, t, a) if who == "bankml" else run_llama(kit.bin, a.model, t, a)
                row[who] = {"at": at, "load": la, "tg_tps": tps}
                print(f"round {rnd + 1} {t:7s} {who:6s} {at} UTC load {la:5.2f}: tg{a.n} {tps:8.2f} t/s",
                      flush=True)
            res[t].append(row)
    with open(os.path.join(ROOT, "build", "bench-kv-types.json"), "w") as f:
        json.dump({"model": a.model, "n": a.n, "r": a.r, "t": a.t, "results": res}, f, indent=1)
    print(f"\n| -ctk/-ctv | bankml tg{a.n} (t/s, per round) | llama-bench tg{a.n} | bankml / llama-bench | "
          "UTC, load average (bankml; llama-bench) |")
    print("|---|---|---|---|---|")
    for t in types:
        rows = res[t]
        ratios = [r["bankml"]["tg_tps"] / r["llama"]["tg_tps"] for r in rows]
        when = "; ".join(f"{r['bankml']['at']} {r['bankml']['load']:.1f}, {r['llama']['at']} "
                         f"{r['llama']['load']:.1f}" for r in rows)
        bk = " / ".join("%.1f" % r["bankml"]["tg_tps"] for r in rows)
        ll = " / ".join("%.1f" % r["llama"]["tg_tps"] for r in rows)
        print(f"| {t} | {bk} | {ll} | {min(ratios):.2f}–{max(ratios):.2f} | {when} |")


if __name__ == "__main__":
    main()
