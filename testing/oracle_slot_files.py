"""oracle_slot_files.py -- GET /slots and slot files (POST /slots/:id?action=save|restore|erase) against
llama-server b11669: both started with --slot-save-path (each its own directory), -t 2 -c 512 --jinja --metrics,
-np 1 and -np 2, on stories260K and a random qwen3 model.

On both servers, the same requests in the same order; after each kind of task GET /slots must be equal as a whole
(task ids included: b11669 counts a task for each /slots, /metrics, slot action and completion, one per decode step
while a slot works, one for a request its fields refuse, three for one over the context): greedy, seeded,
streamed, stopped by a stop string, n_predict 0, a chat, a refused field, a prompt over the context,
fail_on_no_slot, and (last, as its polls move the ids) while a streamed task runs (what moves with time masked). Then save (the answers, and the
two files byte for byte), erase, restore and a request sharing the prefix (the same answer, counts, cache_n), each
server's file restored by the other with the same continuation, the same after a restart of both, and the
errors both give (ids, actions, bodies, file names, damaged files), each followed by an equal answer.

The bankml binary is BANKML_BIN or ./bankml. Standard library only."""
import os, shutil, subprocess, sys, tempfile, threading, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle

CTX = 512
S = oracle.Suite("oracle_slot_files")
kit = oracle.kit_or_skip(S)
models = oracle.ensure_models(S)
shared = oracle.shared_or_skip(S)
BIN = os.environ.get("BANKML_BIN") or os.path.join(oracle.ROOT, "bankml")
MODELS = [os.path.join(shared, "models", "stories260K.gguf"), os.path.join(models, "qwen3-e128-f32.gguf")]

tmp = tempfile.mkdtemp(prefix="oracle-slotfiles-")
FORK = os.path.join(tmp, "test.FORK.json")
for m in MODELS:
    p = subprocess.run([BIN, "pin", m, "--fork", FORK, "--write"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    if p.returncode != 0:
        oracle.skip_all(f"bankml pin --write {m} failed: {p.stdout.strip()}", S)

A = "Once upon a time there was a little girl named Lily. She loved to play"
TIMES = ("save_ms", "restore_ms")


def servers(path, np, ldir, bdir):
    largv = [kit.tool("llama-server"), "-m", path, "--host", "127.0.0.1", "--port", "{port}", "-t", "2", "-c", str(CTX),
             "--jinja", "--no-webui", "--metrics", "-np", str(np), "--slot-save-path", ldir]
    return (oracle.Server(largv, name="llama-slotfiles"),
            oracle.Server.bankml(path, ctx=CTX, extra=["--fork", FORK, "--metrics", "-np", str(np),
                                                       "--slot-save-path", bdir]))


def cview(body):
    if not isinstance(body, dict) or "timings" not in body:
        return body
    out = {k: body.get(k) for k in ("content", "id_slot", "tokens_cached", "tokens_predicted", "tokens_evaluated",
                                    "stop_type", "truncated", "choices", "usage")}
    out["timings"] = {k: body["timings"].get(k) for k in ("cache_n", "prompt_n", "predicted_n")}
    return out


def untimed(body):
    if isinstance(body, dict) and isinstance(body.get("timings"), dict):
        body = dict(body, timings={k: v for k, v in body["timings"].items() if k not in TIMES})
    return body


def same(L, B, label, method, path, body=None, view=cview):
    rl, rb = L.request(method, path, body), B.request(method, path, body)
    S.equal(label, [rb[0], view(rb[1])], [rl[0], view(rl[1])])
    return rl


def slots(L, B, label, query=""):
    same(L, B, f"{label}: GET /slots{query}", "GET", "/slots" + query, view=lambda x: x)


def running(L, B, label):
    """A streamed task that runs while GET /slots is asked: the decoding counters masked."""
    body = {"prompt": A, "n_predict": 120, "temperature": 0, "stream": True, "ignore_eos": True}
    got = {}

    def go(name, srv):
        got[name] = srv.stream("/completion", body)

    views = []
    for name, srv in (("L", L), ("B", B)):
        t = threading.Thread(target=go, args=(name, srv))
        t.start()
        snap = None
        for i in range(100000):   # until the task shows, for as long as it runs (a loaded machine is slow to start)
            if i >= 400 and not t.is_alive():
                break
            st, js = srv.get("/slots")
            if st == 200 and any(s.get("is_processing") for s in js):
                snap = js
                break
            time.sleep(0.002)
        t.join()
        # what moves with time: the decoding counters, the prompt's progress, and the ids (the polls take some)
        mask = ("n_decoded", "n_remain", "has_new_line", "has_next_token")
        moving = ("n_prompt_tokens", "n_prompt_tokens_processed", "n_prompt_tokens_cache", "id_task")
        views.append([{k: ({kk: "*" for kk in mask} if k == "next_token" else
                           "*" if k in moving else v) for k, v in s.items()} for s in snap or []])
    S.equal(f"{label}: GET /slots while a task runs", views[1], views[0])
    S.check(f"{label}: a slot shows is_processing", any(s.get("is_processing") for s in views[1]), str(views[1]))
    S.equal(f"{label}: the running task's answer", [got["B"][0], len(got["B"][1])], [got["L"][0], len(got["L"][1])])


def tasks(L, B, label, chat):
    slots(L, B, f"{label} fresh")
    slots(L, B, f"{label} fresh, asked again")
    kinds = [("greedy", {"prompt": A, "n_predict": 8, "temperature": 0}),
             ("seeded", {"prompt": A + " outside", "n_predict": 10, "seed": 3, "temperature": 0.8}),
             ("stop string", {"prompt": A, "n_predict": 30, "temperature": 0, "stop": [" the"]}),
             ("n_predict 0", {"prompt": "The dog ran", "n_predict": 0, "temperature": 0}),
             ("refused field", {"prompt": A, "top_k": "x"}),
             ("over the context", {"prompt": "x " * 600, "n_predict": 4})]
    for name, body in kinds:
        same(L, B, f"{label} /completion {name}", "POST", "/completion", body)
        slots(L, B, f"{label} after {name}")
    st = [s.stream("/completion", {"prompt": "The dog ran to the park", "n_predict": 6, "temperature": 0,
                                   "stream": True})[0] for s in (L, B)]
    S.equal(f"{label} streamed status", st[1], st[0])
    slots(L, B, f"{label} after streamed")
    same(L, B, f"{label} chat", "POST", "/v1/chat/completions",
         {"messages": [{"role": "user", "content": chat}], "max_tokens": 5, "temperature": 0})
    slots(L, B, f"{label} after chat")
    st = [s.get("/metrics")[0] for s in (L, B)]
    S.equal(f"{label} /metrics status", st[1], st[0])
    slots(L, B, f"{label} after /metrics", "?fail_on_no_slot=1")


def files(L, B, ldir, bdir, label, np):
    # the conversation both save: slot 0 (np 2: slot 1 too, the other stream's cells in its file)
    same(L, B, f"{label} the saved prompt", "POST", "/completion", {"prompt": A, "n_predict": 12, "temperature": 0,
                                                                   "id_slot": 0})
    for sid in range(np):
        same(L, B, f"{label} save slot {sid}", "POST", f"/slots/{sid}?action=save", {"filename": f"s{sid}.bin"},
             view=untimed)
        with open(os.path.join(ldir, f"s{sid}.bin"), "rb") as f1, open(os.path.join(bdir, f"s{sid}.bin"), "rb") as f2:
            a, b = f1.read(), f2.read()
        S.check(f"{label} slot {sid}'s file equals llama-server's byte for byte ({len(a)} bytes)", a == b,
                f"bankml {len(b)} bytes, llama-server {len(a)}; first difference at "
                f"{next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))}")
    same(L, B, f"{label} erase slot 0", "POST", "/slots/0?action=erase", {})
    slots(L, B, f"{label} after erase")
    same(L, B, f"{label} restore slot 0", "POST", "/slots/0?action=restore", {"filename": "s0.bin"}, view=untimed)
    slots(L, B, f"{label} after restore")
    cont = {"prompt": A + " with her", "n_predict": 10, "temperature": 0, "id_slot": 0}
    same(L, B, f"{label} after restore: the prefix reused", "POST", "/completion", cont)
    slots(L, B, f"{label} after the continuation")
    # each server's file restored by the other (no sidecar comes with llama-server's)
    shutil.copy(os.path.join(ldir, "s0.bin"), os.path.join(bdir, "cross.bin"))
    shutil.copy(os.path.join(bdir, "s0.bin"), os.path.join(ldir, "cross.bin"))
    same(L, B, f"{label} restore the other server's file", "POST", "/slots/0?action=restore",
         {"filename": "cross.bin"}, view=untimed)
    same(L, B, f"{label} after the cross restore: the prefix reused", "POST", "/completion", cont)
    # the errors both give, each followed by an equal answer
    with open(os.path.join(ldir, "s0.bin"), "rb") as f:
        whole = f.read()
    for d in (ldir, bdir):
        with open(os.path.join(d, "short.bin"), "wb") as f:
            f.write(whole[:len(whole) // 2])
        with open(os.path.join(d, "magic.bin"), "wb") as f:
            f.write(b"GGSQ" + whole[4:])
    errs = [("0?action=restore", {"filename": "missing.bin"}), ("0?action=restore", {"filename": "short.bin"}),
            ("0?action=restore", {"filename": "magic.bin"}), ("0?action=save", {"filename": "../x.bin"}),
            ("0?action=save", {"filename": "a/b"}), ("0?action=save", {"filename": ""}),
            ("0?action=save", {"filename": "x."}), ("0?action=save", {"filename": " x"}),
            ("0?action=save", {"filename": "a:b"}), ("0?action=save", {"filename": "é\u2215"}),
            ("0?action=save", {"filename": "x" * 256}), ("0?action=save", {}), ("0?action=save", {"filename": 5}),
            ("0?action=save", "not json"), ("0?action=save", [1]), ("x?action=save", {"filename": "a"}),
            ("99999999999?action=erase", {}), ("0?action=bogus", {"filename": "a"}), ("0", {"filename": "a"})]
    for i, (q, body) in enumerate(errs):
        rl, rb = L.post(f"/slots/{q}", body), B.post(f"/slots/{q}", body)
        if isinstance(rl[1], dict) and str(rl[1].get("error", {}).get("message", "")).startswith("Unable to restore"):
            # the reason after the prefix is bankml's own words
            view = lambda r: [r[0], r[1]["error"]["message"].split(":")[0], r[1]["error"]["type"]] \
                if isinstance(r[1], dict) and "error" in r[1] else r
            S.equal(f"{label} error {q} {body!r}"[:120], view(rb), view(rl))
        else:
            S.equal(f"{label} error {q} {body!r}"[:120], list(rb), list(rl))
    same(L, B, f"{label} after the errors: an answer", "POST", "/completion", cont)
    slots(L, B, f"{label} after the errors")
    # ids that wrap: /slots/<np> is slot 0, /slots/-1 slot np-1 (stoi, then % slots as size_t)
    same(L, B, f"{label} save through a wrapped id", "POST", f"/slots/{np}?action=save", {"filename": "w.bin"},
         view=untimed)
    same(L, B, f"{label} erase through -1", "POST", "/slots/-1?action=erase", {})
    same(L, B, f"{label} erase ' 1x' (stoi)", "POST", "/slots/1x?action=erase", {})
    running(L, B, label)   # last: how many polls it takes moves the task ids


def restart(path, np, ldir, bdir, label, cont):
    L, B = servers(path, np, ldir, bdir)
    with L, B:
        slots(L, B, f"{label} after a restart")
        same(L, B, f"{label} after a restart: restore", "POST", "/slots/0?action=restore", {"filename": "s0.bin"},
             view=untimed)
        same(L, B, f"{label} after a restart: the prefix reused", "POST", "/completion", cont)
        same(L, B, f"{label} after a restart: the other's file", "POST", "/slots/0?action=restore",
             {"filename": "cross.bin"}, view=untimed)
        same(L, B, f"{label} after a restart: its continuation", "POST", "/completion", cont)
        slots(L, B, f"{label} after a restart, at the end")


for path in MODELS:
    base = os.path.basename(path)
    for np in (1, 2):
        label = f"{base} -np {np}"
        ldir, bdir = tempfile.mkdtemp(dir=tmp), tempfile.mkdtemp(dir=tmp)
        try:
            L, B = servers(path, np, ldir, bdir)
            with L, B:
                tasks(L, B, label, "Tell me a story about a cat.")
                files(L, B, ldir, bdir, label, np)
            restart(path, np, ldir, bdir, label, {"prompt": A + " with her", "n_predict": 10, "temperature": 0,
                                                  "id_slot": 0})
        except oracle.ServerError as e:
            S.fail(label, str(e))

shutil.rmtree(tmp, ignore_errors=True)
S.finish()
