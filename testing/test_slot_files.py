"""test_slot_files.py -- bankml's own rules for slot files and the slot routes, black-box through `bankml serve`
on stories260K (../shared) and a random qwen3 model (build/models): what llama-server does not check and bankml
refuses, each refusal followed by an answer that computes its whole prompt (--cache-ram 0: no host prompt cache
to supply a prefix).

- the sidecar FILE.bankml.json beside every save (the model's sha256, the slot context, the cache type, the
  file's sha256), written atomically (no temporary file left);
- refused on restore, the slot then empty: another model (sidecar; without one, its rows), another context, a
  damaged file (its sha256), a truncated one, trailing bytes, tokens outside the vocabulary, cells out of
  position order, media chunks, another ggsq version, another slot count (-np), a damaged sidecar; a file
  without a sidecar (llama-server's, or a plain token list of older servers) restores on its structure;
- the flags: --slot-save-path must name a directory (llama-server's message, exit 1), --slot-dir creates it,
  both at once refused; without either POST /slots/:id is llama-server's 501; --no-slots makes GET /slots 501;
- a save that cannot write (its directory gone): 500 with the reason;
- a client that leaves mid-answer: the slot's has_next_token stays true (llama-server's reset keeps it).

The bankml binary is BANKML_BIN or ./bankml. Standard library only."""
import hashlib, http.client, json, os, shutil, socket, struct, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle

S = oracle.Suite("test_slot_files")
shared = oracle.shared_or_skip(S)
models = oracle.ensure_models(S)
BIN = os.environ.get("BANKML_BIN") or os.path.join(oracle.ROOT, "bankml")
STORIES = os.path.join(shared, "models", "stories260K.gguf")
QWEN = os.path.join(models, "qwen3-e128-f32.gguf")
tmp = tempfile.mkdtemp(prefix="test-slotfiles-")
FORK = os.path.join(tmp, "t.FORK.json")
for m in (STORIES, QWEN):
    p = subprocess.run([BIN, "pin", m, "--fork", FORK, "--write"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    if p.returncode != 0:
        oracle.skip_all(f"bankml pin --write {m} failed: {p.stdout.strip()}", S)

A = "Once upon a time there was a little girl named Lily. She loved to play"


def serve(model, d, np=1, extra=(), name="bankml-slotfiles"):
    flags = ["--fork", FORK, "-np", str(np), "--cache-ram", "0"] + (["--slot-save-path", d] if d else []) + list(extra)
    return oracle.Server.bankml(model, ctx=512, extra=flags, name=name)


def err(r):
    return [r[0], r[1]["error"]["message"] if isinstance(r[1], dict) and "error" in r[1] else r[1]]


def fresh_answer(B, label):
    """After a refusal: the slot holds nothing, so the next answer computes its whole prompt."""
    st, js = B.get("/slots")
    S.equal(f"{label}: the slot is empty", js[0].get("n_prompt_tokens", 0), 0)
    st, js = B.post("/completion", {"prompt": A, "n_predict": 4, "temperature": 0, "id_slot": 0})
    S.equal(f"{label}: the next answer computes its whole prompt", [st, js.get("timings", {}).get("cache_n")], [200, 0])


def refused(B, label, name, want):
    st, js = B.post("/slots/0?action=restore", {"filename": name})
    msg = js.get("error", {}).get("message", "") if isinstance(js, dict) else str(js)
    S.check(f"{label}: refused (400 Unable to restore slot: ...{want}...)",
            st == 400 and msg.startswith("Unable to restore slot: ") and want in msg, f"{st} {msg}")
    fresh_answer(B, label)


def rewrite(src, dst, fn):
    with open(src, "rb") as f:
        b = bytearray(f.read())
    fn(b)
    with open(dst, "wb") as f:
        f.write(b)


d1 = os.path.join(tmp, "save1")
os.mkdir(d1)
try:
    with serve(STORIES, d1) as B:
        st, js = B.post("/completion", {"prompt": A, "n_predict": 8, "temperature": 0})
        S.equal("the saved answer", st, 200)
        st, js = B.post("/slots/0?action=save", {"filename": "a.bin"})
        S.equal("save", [st, js.get("n_saved"), js.get("filename")], [200, 27, "a.bin"])
        left = sorted(os.listdir(d1))
        S.equal("the save leaves the file and its sidecar, no temporary file", left, ["a.bin", "a.bin.bankml.json"])
        side = json.load(open(os.path.join(d1, "a.bin.bankml.json")))
        raw = open(os.path.join(d1, "a.bin"), "rb").read()
        S.equal("the sidecar names the model, context, cache type and the file's sha256",
                {k: side.get(k) for k in ("model_sha256", "n_ctx", "cache_type_k", "cache_type_v", "n_tokens",
                                          "file_bytes", "file_sha256")},
                {"model_sha256": oracle.sha256_file(STORIES), "n_ctx": 512, "cache_type_k": "f16",
                 "cache_type_v": "f16", "n_tokens": 27, "file_bytes": len(raw),
                 "file_sha256": hashlib.sha256(raw).hexdigest()})
        st, js = B.post("/slots/0?action=restore", {"filename": "a.bin"})
        S.equal("restore", [st, js.get("n_restored"), js.get("n_read")], [200, 27, len(raw)])
        st, js = B.post("/completion", {"prompt": A + " with", "n_predict": 4, "temperature": 0})
        S.equal("after restore the prompt's 20 tokens are reused", js.get("timings", {}).get("cache_n"), 20)

        def with_side(name, fix_side=None, fix_file=None):
            shutil.copy(os.path.join(d1, "a.bin"), os.path.join(d1, name))
            if fix_file:
                rewrite(os.path.join(d1, name), os.path.join(d1, name), fix_file)
            sd = dict(side)
            if fix_side:
                fix_side(sd)
            if fix_side is not False:
                json.dump(sd, open(os.path.join(d1, name + ".bankml.json"), "w"))

        with_side("other-model.bin", lambda sd: sd.update(model_sha256="0" * 64))
        refused(B, "another model (sidecar)", "other-model.bin", "another model")
        with_side("other-ctx.bin", lambda sd: sd.update(n_ctx=4096))
        refused(B, "another context (sidecar)", "other-ctx.bin", "4096-cell slot context")
        with_side("other-type.bin", lambda sd: sd.update(cache_type_k="q8_0"))
        refused(B, "another cache type (sidecar)", "other-type.bin", "q8_0")
        flip = lambda b: b.__setitem__(len(b) - 5, b[len(b) - 5] ^ 1)
        with_side("damaged.bin", None, flip)
        refused(B, "a damaged file (its sha256)", "damaged.bin", "changed since bankml saved it")
        with_side("damaged-nosidecar.bin", False, flip)
        st, js = B.post("/slots/0?action=restore", {"filename": "damaged-nosidecar.bin"})
        S.equal("without a sidecar a damaged KV row passes the structural checks (llama-server's too)", st, 200)
        with_side("bad-side.bin", False)
        open(os.path.join(d1, "bad-side.bin.bankml.json"), "w").write("{not json")
        refused(B, "a damaged sidecar", "bad-side.bin", "sidecar")
        with_side("trailing.bin", False, lambda b: b.extend(b"\0\0\0\0"))
        refused(B, "trailing bytes (llama-server restores them)", "trailing.bin", "trailing bytes")
        with_side("truncated.bin", False, lambda b: b.__delitem__(slice(len(b) - 100, None)))
        refused(B, "a truncated file", "truncated.bin", "truncated")
        with_side("vocab.bin", False, lambda b: b.__setitem__(slice(28, 32), struct.pack("<i", 100000)))
        refused(B, "a token outside the vocabulary", "vocab.bin", "Invalid tokens in slot save file")
        # cell 1's position: after the 4 + 27 + 4 packed words and the stream and cell counts
        cell0 = 12 + 4 * 31 + 8
        with_side("order.bin", False, lambda b: b.__setitem__(slice(cell0 + 12, cell0 + 16), struct.pack("<i", 7)))
        refused(B, "cells out of position order", "order.bin", "position")
        with_side("media.bin", False, lambda b: b.__setitem__(slice(12 + 4 * 30, 12 + 4 * 31), struct.pack("<I", 1)))
        refused(B, "media chunks", "media.bin", "media")
        with_side("version.bin", False, lambda b: b.__setitem__(slice(4, 8), struct.pack("<I", 3)))
        refused(B, "another ggsq version", "version.bin", "ggsq version 4")
        def legacy(b):   # the plain token list of older servers (llama-server's test_slot_restore_legacy_token_list)
            n = struct.unpack_from("<I", b, 20)[0]
            b[8:12 + 4 * (n + 4)] = struct.pack("<I", n) + bytes(b[24:24 + 4 * n])
        with_side("legacy.bin", False, legacy)
        st, js = B.post("/slots/0?action=restore", {"filename": "legacy.bin"})
        S.equal("a plain token list (no sidecar) restores", [st, js.get("n_restored")], [200, 27])
        st, js = B.post("/completion", {"prompt": A + " with", "n_predict": 4, "temperature": 0})
        S.equal("after the plain list the prompt's 20 tokens are reused", js.get("timings", {}).get("cache_n"), 20)
        S.equal("an invalid filename", err(B.post("/slots/0?action=restore", {"filename": "a\\b"})),
                [400, "Invalid filename"])
        # the directory gone: the save cannot write, and says why
        d_gone = d1 + ".gone"
        os.rename(d1, d_gone)
        st, js = B.post("/slots/0?action=save", {"filename": "x.bin"})
        msg = js.get("error", {}).get("message", "") if isinstance(js, dict) else ""
        S.check("a save that cannot write: 500 Unable to save slot: cannot write ...",
                st == 500 and msg.startswith("Unable to save slot: cannot write"), f"{st} {msg}")
        os.rename(d_gone, d1)
        # a client that leaves mid-answer: has_next_token stays set
        c = socket.create_connection(("127.0.0.1", B.port))
        body = json.dumps({"prompt": A, "n_predict": 400, "stream": True, "ignore_eos": True, "temperature": 0})
        c.sendall(f"POST /completion HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  f"Content-Length: {len(body)}\r\n\r\n{body}".encode())
        c.recv(4096)
        c.close()
        for _ in range(200):
            st, js = B.get("/slots")
            if not js[0]["is_processing"]:
                break
            time.sleep(0.02)
        nt = js[0].get("next_token", [{}])[0]
        S.equal("after a client left: idle, has_next_token true, counters reset",
                [js[0]["is_processing"], nt.get("has_next_token"), nt.get("n_decoded"), nt.get("n_remain")],
                [False, True, 0, -1])
        shutil.copy(os.path.join(d1, "a.bin"), os.path.join(tmp, "stories-a.bin"))
except oracle.ServerError as e:
    S.fail("stories260K server", str(e))

# another model's file without a sidecar: its rows say so; another -np: its stream count
d2 = os.path.join(tmp, "save2")
os.mkdir(d2)
try:
    shutil.copy(os.path.join(tmp, "stories-a.bin"), os.path.join(d2, "stories.bin"))
    with serve(QWEN, d2) as B:
        B.post("/completion", {"prompt": A, "n_predict": 2, "temperature": 0})
        refused(B, "another model's file (no sidecar)", "stories.bin", "another model")
    with serve(STORIES, d2, np=2) as B:
        refused(B, "a file from -np 1 in a server with -np 2", "stories.bin", "-np 1")
except oracle.ServerError as e:
    S.fail("qwen3 / -np 2 server", str(e))


def start_fails(label, flags, want_rc, want_msg):
    p = subprocess.run([BIN, "serve", STORIES, "--fork", FORK, "--listen", "127.0.0.1:0", *flags],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
    S.check(label, p.returncode == want_rc and want_msg in p.stdout, f"rc {p.returncode}: {p.stdout.strip()[-300:]}")


start_fails("--slot-save-path of a missing directory: llama-server's message, exit 1",
            ["--slot-save-path", os.path.join(tmp, "nope")], 1, "not a directory: ")
start_fails("--slot-save-path and --slot-dir together: refused", ["--slot-save-path", d1, "--slot-dir", d2], 2,
            "name one directory")
made = os.path.join(tmp, "made")
try:
    with serve(STORIES, None, extra=["--slot-dir", made]) as B:
        S.check("--slot-dir creates its directory", os.path.isdir(made))
        st, js = B.post("/slots/0?action=save", {"filename": "z.bin"})
        S.equal("--slot-dir: saves go there", [st, sorted(os.listdir(made))], [200, ["z.bin", "z.bin.bankml.json"]])
    with serve(STORIES, None, extra=["--no-slots"]) as B:
        S.equal("without --slot-save-path: POST /slots/0 is llama-server's 501",
                err(B.post("/slots/0?action=save", {"filename": "z.bin"})),
                [501, "This server does not support slots action. Start it with `--slot-save-path`"])
        S.equal("--no-slots: GET /slots is llama-server's 501", err(B.get("/slots")),
                [501, "This server does not support slots endpoint. Start it with `--slots`"])
except oracle.ServerError as e:
    S.fail("flag servers", str(e))

shutil.rmtree(tmp, ignore_errors=True)
S.finish()
