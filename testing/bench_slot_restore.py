#!/usr/bin/env python3
"""bench_slot_restore.py -- restoring a saved slot against recomputing its prompt, `bankml serve` and llama-server
b11669 (`-t 2 -c 2048 -np 1 -ctk T -ctv T --slot-save-path D`), one server at a time.

For each cache type and each server: a warm-up request, then R times: erase slot 0 and send a ~1,000-token prompt
(`n_predict` 1, greedy): the prefill (the server's timings.prompt_ms and the request's wall time). Then the slot is
saved once, and R times: erase, `POST /slots/0?action=restore` (its timings.restore_ms and wall time), and the same
prompt again, which must come back with cache_n = the prompt's tokens − 1 (the restored cells reused). Each figure
with its UTC time and the 1-minute load average (the machine may be shared). Medians are printed as a Markdown table
and written to build/bench-slot-restore.json.

Model: build/bench-models/smollm2-135m-shape-f16.gguf (`make bench-models`), pinned in build/bench.FORK.json.

Usage: python3 testing/bench_slot_restore.py [-r 3] [--types f16,q8_0] [--model M.gguf]
Standard library only."""
import argparse, json, os, statistics, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle

ROOT = oracle.ROOT
PROMPT = "The quick brown fox jumps over the lazy dog while the cat watches from the old wooden fence. " * 50


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def timed(srv, path, body):
    t0 = time.monotonic()
    st, j = srv.post(path, body, timeout=600)
    wall = (time.monotonic() - t0) * 1000.0
    if st != 200:
        sys.exit(f"{srv.name} {path}: {st} {j}")
    return j, wall


def measure(srv, reps):
    body = {"prompt": PROMPT, "n_predict": 1, "temperature": 0, "cache_prompt": True}
    timed(srv, "/completion", {"prompt": "Hello", "n_predict": 1})   # warm-up
    out = {"prefill_ms": [], "prefill_wall_ms": [], "restore_ms": [], "restore_wall_ms": [], "load": [],
           "at": time.strftime("%H:%M:%S", time.gmtime())}
    n_prompt = None
    for _ in range(reps):
        timed(srv, "/slots/0?action=erase", {})
        out["load"].append(loadavg())
        j, wall = timed(srv, "/completion", body)
        n_prompt = j["timings"]["prompt_n"]
        if j["timings"]["cache_n"] != 0:
            sys.exit(f"{srv.name}: the prefill reused {j['timings']['cache_n']} cells after an erase")
        out["prefill_ms"].append(j["timings"]["prompt_ms"])
        out["prefill_wall_ms"].append(wall)
    j, _ = timed(srv, "/slots/0?action=save", {"filename": "bench.bin"})
    out["n_saved"], out["n_written"] = j.get("n_saved"), j.get("n_written")
    for _ in range(reps):
        timed(srv, "/slots/0?action=erase", {})
        out["load"].append(loadavg())
        j, wall = timed(srv, "/slots/0?action=restore", {"filename": "bench.bin"})
        out["restore_ms"].append(j["timings"]["restore_ms"])
        out["restore_wall_ms"].append(wall)
        j, _ = timed(srv, "/completion", body)
        if j["timings"]["cache_n"] != n_prompt - 1:
            sys.exit(f"{srv.name}: after the restore cache_n {j['timings']['cache_n']}, not {n_prompt - 1}")
    out["n_prompt"] = n_prompt
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-r", type=int, default=3)
    ap.add_argument("--types", default="f16,q8_0")
    ap.add_argument("--model", default=os.path.join(ROOT, "build", "bench-models", "smollm2-135m-shape-f16.gguf"))
    a = ap.parse_args()
    kit, why = oracle.find_kit()
    if not kit:
        sys.exit(f"bench_slot_restore: no oracle kit: {why}")
    fork = os.path.join(ROOT, "build", "bench.FORK.json")
    res = {}
    for t in [x for x in a.types.split(",") if x]:
        fl = ["-ctk", t, "-ctv", t]
        for who in ("llama", "bankml"):
            d = tempfile.mkdtemp(prefix="bench-restore-")
            if who == "llama":
                srv = oracle.Server.llama(kit, a.model, ctx=2048, extra=[*fl, "--slot-save-path", d])
            else:
                srv = oracle.Server.bankml(a.model, ctx=2048, extra=["--fork", fork, *fl, "--slot-save-path", d])
            srv.start()
            try:
                r = measure(srv, a.r)
            finally:
                srv.stop()
            res[f"{t} {who}"] = r
            med = {k: statistics.median(r[k]) for k in ("prefill_ms", "prefill_wall_ms", "restore_ms",
                                                         "restore_wall_ms")}
            print(f"{t} {who:6s} {r['at']} UTC load {min(r['load']):.1f}-{max(r['load']):.1f}: {r['n_prompt']} "
                  f"tokens, prefill {med['prefill_ms']:.1f} ms (wall {med['prefill_wall_ms']:.1f}), restore "
                  f"{med['restore_ms']:.1f} ms (wall {med['restore_wall_ms']:.1f}), file {r['n_written']} bytes",
                  flush=True)
    with open(os.path.join(ROOT, "build", "bench-slot-restore.json"), "w") as f:
        json.dump(res, f, indent=1)
    print("\n| -ctk/-ctv | server | prompt tokens | prefill ms (server; wall) | restore ms (server; wall) | "
          "file bytes | prefill / restore (wall) | UTC, load average |")
    print("|---|---|---|---|---|---|---|---|")
    for k, r in res.items():
        t, who = k.split()
        pm, pw = statistics.median(r["prefill_ms"]), statistics.median(r["prefill_wall_ms"])
        rm, rw = statistics.median(r["restore_ms"]), statistics.median(r["restore_wall_ms"])
        print(f"| {t} | {'llama-server' if who == 'llama' else 'bankml'} | {r['n_prompt']} | {pm:.1f}; {pw:.1f} | "
              f"{rm:.1f}; {rw:.1f} | {r['n_written']:,} | {pw / rw:.0f}× | {r['at']}, "
              f"{min(r['load']):.1f}–{max(r['load']):.1f} |")


if __name__ == "__main__":
    main()
