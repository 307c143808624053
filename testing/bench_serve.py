#!/usr/bin/env python3
"""bench_serve.py -- serving speed: `bankml serve` against llama-server b11669 through HTTP.

For each model, one server at a time (so they never share the two cores), both run with -t 2 -c 2048 -np 1
(--llama-threads 2 --ctx 2048 for bankml):

  * TTFT and tokens/s: streamed POST /completion, a fixed English prompt, n_predict 32 (default), greedy,
    cache_prompt false (every request evaluates its whole prompt); one warm-up, then --reps requests (5).
    TTFT is measured at the client from sending the request to the first token event; tokens/s is
    (events - 1) over the time from the first to the last token event. The server's own figures
    (timings.prompt_per_second, timings.predicted_per_second) are reported beside them.
  * /health overhead: --health (500) sequential GETs, each on a new loopback connection with
    Connection: close, timed from the send to the close; median and p99.

Models: build/bench-models/smollm2-135m-shape-f16.gguf (pinned in build/bench.FORK.json; `make bench-models`
if missing) and the generated build/models/qwen3-e128-f32.gguf (pinned into a temporary FORK.json). Prints a
Markdown table with the load average before and after, and writes build/bench-serve.json.

Usage: python3 testing/bench_serve.py [--reps 5] [--n-predict 32] [--health 500] [--models a.gguf,b.gguf]
Standard library only."""
import argparse, http.client, json, os, platform, socket, statistics, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle

ROOT = oracle.ROOT
PROMPT = ("The old lighthouse keeper climbed the narrow stairs every evening to light the lamp. From the top he "
          "could see the whole bay: the fishing boats coming home, the gulls circling above the harbour and the "
          "dark line of the hills where the sun went down. One night a storm came in from the sea.")


def percentile(xs, p):
    """The nearest-rank percentile of xs (p in 0..100)."""
    s = sorted(xs)
    k = max(0, min(len(s) - 1, int(round(p / 100.0 * len(s) + 0.5)) - 1))
    return s[k]


def stream_completion(port, n_predict):
    """One streamed /completion: (ttft_s, tokens_per_s or None, events, final timings)."""
    body = json.dumps({"prompt": PROMPT, "n_predict": n_predict, "temperature": 0, "cache_prompt": False,
                       "stream": True}).encode()
    s = socket.create_connection(("127.0.0.1", port), timeout=600)
    t0 = time.perf_counter()
    s.sendall(b"POST /completion HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))
    buf, times, timings, done = b"", [], None, False
    while not done:
        b = s.recv(65536)
        now = time.perf_counter()
        if not b:
            break
        buf += b
        while b"\n" in buf:
            line, _, buf = buf.partition(b"\n")
            line = line.strip()
            if not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            if payload == b"[DONE]":
                done = True
                break
            try:
                ev = json.loads(payload)
            except ValueError:
                continue
            if ev.get("content") or ev.get("tokens"):
                times.append(now)
            if ev.get("stop"):
                timings = ev.get("timings")
                done = True
                break
    s.close()
    if not times:
        raise RuntimeError(f"no token event from port {port}")
    tps = (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 and times[-1] > times[0] else None
    return times[0] - t0, tps, len(times), timings or {}


def health_latencies(port, n):
    out = []
    req = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    for _ in range(n):
        t0 = time.perf_counter()
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(req)
        while s.recv(65536):
            pass
        s.close()
        out.append(time.perf_counter() - t0)
    return out


def measure(srv, args):
    stream_completion(srv.port, args.n_predict)   # warm-up
    runs = [stream_completion(srv.port, args.n_predict) for _ in range(args.reps)]
    health = health_latencies(srv.port, args.health)
    tps = [r[1] for r in runs if r[1]]
    return {
        "ttft_ms": statistics.median(r[0] for r in runs) * 1e3,
        "tokens_per_s": statistics.median(tps) if tps else None,
        "events": statistics.median(r[2] for r in runs),
        "server_prompt_tps": statistics.median(r[3].get("prompt_per_second", 0) for r in runs),
        "server_predicted_tps": statistics.median(r[3].get("predicted_per_second", 0) for r in runs),
        "prompt_n": runs[0][3].get("prompt_n"),
        "health_median_us": statistics.median(health) * 1e6,
        "health_p99_us": percentile(health, 99) * 1e6,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--n-predict", type=int, default=32)
    ap.add_argument("--health", type=int, default=500)
    ap.add_argument("--models", default="")
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "bench-serve.json"))
    args = ap.parse_args()

    kit, why = oracle.find_kit()
    if not kit:
        print(f"bench_serve: no oracle kit ({why}); nothing to compare against")
        return 1
    binary = os.environ.get("BANKML_BIN") or os.path.join(ROOT, "bankml")
    bench_fork = os.path.join(ROOT, "build", "bench.FORK.json")
    smol = os.path.join(ROOT, "build", "bench-models", "smollm2-135m-shape-f16.gguf")
    gen = os.path.join(oracle.MODELS_DIR, "qwen3-e128-f32.gguf")
    models = [m for m in args.models.split(",") if m] or [gen, smol]
    if smol in models and not os.path.exists(smol):
        subprocess.run(["make", "-s", "bench-models"], cwd=ROOT)
    if gen in models and not os.path.exists(gen):
        oracle.ensure_models()
    tmp = tempfile.mkdtemp(prefix="bench-serve-")
    tmp_fork = os.path.join(tmp, "bench-serve.FORK.json")

    load0 = os.getloadavg()
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    rows = []
    for m in models:
        if not os.path.exists(m):
            print(f"bench_serve: {m} is missing; skipped", flush=True)
            continue
        fork = bench_fork if os.path.dirname(os.path.abspath(m)).endswith("bench-models") else tmp_fork
        if fork == tmp_fork:
            p = subprocess.run([binary, "pin", m, "--fork", tmp_fork, "--write"], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
            if p.returncode != 0:
                print(f"bench_serve: bankml pin {m}: {p.stdout.strip()}")
                return 1
        name = os.path.basename(m).replace(".gguf", "")
        for who, srv in (("llama-server", oracle.Server.llama(kit, m, ctx=2048, name=f"bench-llama-{name}")),
                         ("bankml", oracle.Server.bankml(m, ctx=2048, extra=["--fork", fork], binary=binary,
                                                         name=f"bench-bankml-{name}"))):
            with srv:
                r = measure(srv, args)
            r.update(model=name, server=who, load=os.getloadavg()[0])
            rows.append(r)
            print(f"{name:32s} {who:13s} TTFT {r['ttft_ms']:8.1f} ms  {r['tokens_per_s'] or 0:7.1f} tok/s  "
                  f"(server: prompt {r['server_prompt_tps']:.0f} tok/s, gen {r['server_predicted_tps']:.1f} tok/s, "
                  f"{r['prompt_n']} prompt tokens)  /health {r['health_median_us']:.0f} / "
                  f"{r['health_p99_us']:.0f} us  load {r['load']:.2f}", flush=True)
    load1 = os.getloadavg()
    rec = {"started": started, "ended": time.strftime("%Y-%m-%d %H:%M:%S"), "load_before": load0,
           "load_after": load1, "cpu": platform.processor() or platform.machine(), "nproc": os.cpu_count(),
           "reps": args.reps, "n_predict": args.n_predict, "health_gets": args.health, "rows": rows}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(rec, f, indent=1)
    print()
    print(f"{started} .. {rec['ended']}; load average before {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}, "
          f"after {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}; {args.reps} requests after a warm-up, "
          f"n_predict {args.n_predict}; /health x {args.health}")
    print()
    print("| model | server | TTFT (ms) | tokens/s | server prompt tok/s | server gen tok/s | `/health` median (µs) "
          "| `/health` p99 (µs) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['server']} | {r['ttft_ms']:.1f} | {r['tokens_per_s'] or 0:.1f} | "
              f"{r['server_prompt_tps']:.0f} | {r['server_predicted_tps']:.1f} | {r['health_median_us']:.0f} | "
              f"{r['health_p99_us']:.0f} |")
    print(f"\n(written to {os.path.relpath(args.out, ROOT)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
