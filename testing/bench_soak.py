"""bench_soak.py -- RSS of `bankml serve` over a mixed soak under concurrency (issue #22.7). A benchmark, not a
test: run by hand, its figures go to docs/PERFORMANCE.md.

    python3 testing/bench_soak.py [--seconds 180] [--clients 4] [--cache-ram MIB] [--ctx 2048]

The demo model (models/demo.gguf) is served with --metrics; CLIENTS threads send, for SECONDS, a mix of
requests with prompts that differ (so the host prompt cache saves and restores): chats and completions, streamed
and not, a tenth of the streams dropped mid-way, tokenize and /props. VmRSS and VmHWM of the server are read from
/proc every 5 s; the closing lines print the samples' first, largest and last values. Loopback only; standard
library only."""
import argparse, json, os, random, socket, sys, threading, time, urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle  # noqa: E402

MODEL = os.path.join(oracle.ROOT, "models", "demo.gguf")
FORK = os.path.join(oracle.ROOT, "models.FORK.json")
WORDS = ("the a cat dog ran sat on mat red blue sky sea why how when one two three story tell me about "
         "little big old new happy sad day night").split()


def rss(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for ln in f:
            if ln.startswith(("VmRSS:", "VmHWM:")):
                k, v = ln.split(":")
                out[k] = int(v.split()[0]) // 1024
    return out.get("VmRSS", 0), out.get("VmHWM", 0)


def post(port, path, body, timeout=120):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def dropped_stream(port, body):
    data = json.dumps(body).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=60) as c:
        c.sendall(b"POST /completion HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(data) + data)
        c.recv(4096)


def client(port, stop, rnd, counts, lock):
    while not stop.is_set():
        prompt = " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(4, 300)))
        k = rnd.random()
        try:
            if k < 0.35:
                st, _ = post(port, "/v1/chat/completions", {"messages": [{"role": "user", "content": prompt}],
                                                            "max_tokens": rnd.randint(1, 64)})
            elif k < 0.6:
                st, _ = post(port, "/completion", {"prompt": prompt, "n_predict": rnd.randint(1, 64),
                                                   "stream": rnd.random() < 0.5})
            elif k < 0.7:
                dropped_stream(port, {"prompt": prompt, "n_predict": 200, "stream": True})
                st = "dropped"
            elif k < 0.85:
                st, _ = post(port, "/tokenize", {"content": prompt})
            else:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/props", timeout=60) as r:
                    st = r.status
        except OSError as e:
            st = type(e).__name__
        with lock:
            counts[st] = counts.get(st, 0) + 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=180)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--cache-ram", type=int, default=None)
    ap.add_argument("--ctx", type=int, default=2048)
    a = ap.parse_args()
    extra = ["--fork", FORK, "--metrics", "-np", "2"]
    if a.cache_ram is not None:
        extra += ["--cache-ram", str(a.cache_ram)]
    with oracle.Server.bankml(MODEL, ctx=a.ctx, extra=extra) as B:
        pid = B.proc.pid
        stop, lock, counts = threading.Event(), threading.Lock(), {}
        ts = [threading.Thread(target=client, args=(B.port, stop, random.Random(i), counts, lock), daemon=True)
              for i in range(a.clients)]
        samples = [(0, *rss(pid))]
        t0 = time.time()
        for t in ts:
            t.start()
        while time.time() - t0 < a.seconds:
            time.sleep(5)
            samples.append((round(time.time() - t0), *rss(pid)))
            print(f"  t={samples[-1][0]:4d} s  RSS {samples[-1][1]:5d} MiB  HWM {samples[-1][2]:5d} MiB", flush=True)
        stop.set()
        for t in ts:
            t.join(timeout=150)
        time.sleep(2)
        samples.append((round(time.time() - t0), *rss(pid)))
        with urllib.request.urlopen(f"http://127.0.0.1:{B.port}/bankml/metrics", timeout=30) as r:
            met = json.loads(r.read())
    label = f"--cache-ram {a.cache_ram}" if a.cache_ram is not None else "default --cache-ram"
    print(f"{label}, {a.clients} clients, {a.seconds} s: requests {dict(sorted(counts.items(), key=str))}")
    print(f"RSS first {samples[0][1]} MiB, largest {max(s[1] for s in samples)} MiB, after {samples[-1][1]} MiB; "
          f"HWM {samples[-1][2]} MiB; completions kept {met.get('kept')}")


if __name__ == "__main__":
    main()
