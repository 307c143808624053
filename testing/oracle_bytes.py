#!/usr/bin/env python3
"""oracle_bytes.py -- answers holding bytes that are not UTF-8, byte for byte against llama-server b11669.

stories260K has byte tokens (<0x00>..<0xFF>, ids 3..258): a lone continuation byte, a lead byte without its
continuation, an overlong or surrogate pair of bytes. llama-server writes every string with nlohmann's
dump_safe (error_handler_t::replace): each ill-formed sequence becomes one U+FFFD, a character cut at the end
of a string one U+FFFD; token texts in probabilities are cut at an incomplete end first (validate_utf8), and
/tokenize's pieces are a string when is_valid_utf8 passes, else a byte array. This suite sends the same
requests to llama-server and to `bankml serve` (-t 2 -c 512 -np 1 --jinja) and compares:

  - every body (and every streamed event) byte for byte, after masking only what differs per run (timings'
    values, created, id, system_fingerprint) and removing bankml's own `bankml_receipt` member;
  - that Python's json.loads and node's JSON.parse parse every body and event of both servers;
  - that the answers really hold U+FFFD (the requests are chosen so they do).

The requests: /detokenize of byte-token runs (cut characters, lone continuations, overlongs, surrogates,
> U+10FFFF, mixed with text); /tokenize with_pieces of text the vocabulary lacks (byte fallback); /completion
with a prompt of byte-token ids, greedy and seeded (temperature 50, top_k 0, top_p 1, min_p 0: nearly uniform, so
byte tokens are drawn), n_predict 1..3 so characters are cut at the limit, with and without n_probs, streamed and
not; the same through /v1/chat/completions (with logprobs). Prints `N passed, N failed, N skipped`.
"""
import json, os, re, shutil, subprocess, sys, tempfile, http.client

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle

S = oracle.Suite("oracle_bytes")
kit = oracle.kit_or_skip(S)
shared = oracle.shared_or_skip(S)
BIN = os.environ.get("BANKML_BIN") or os.path.join(oracle.ROOT, "bankml")
MODEL = os.path.join(shared, "models", "stories260K.gguf")
tmp = tempfile.mkdtemp(prefix="oracle-bytes-")
FORK = os.path.join(tmp, "test.FORK.json")
p = subprocess.run([BIN, "pin", MODEL, "--fork", FORK, "--write"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                   text=True)
if p.returncode != 0:
    oracle.skip_all(f"bankml pin --write failed: {p.stdout.strip()}", S)


def B(*bs):
    """the byte tokens of stories260K for these bytes"""
    return [b + 3 for b in bs]


TEXT = [261, 325]   # " a" "ri": plain tokens to mix in
RANDOM = {"temperature": 50, "top_k": 0, "top_p": 1, "min_p": 0}
DETOK = [B(0xE2), B(0xE2, 0x82), B(0xE2, 0x82, 0xAC), B(0x80), B(0xBF, 0x80), B(0xC0, 0x80), B(0xC1, 0xBF),
         B(0xE0, 0x80, 0x80), B(0xED, 0xA0, 0x80), B(0xED, 0x9F, 0xBF), B(0xF4, 0x90, 0x80, 0x80), B(0xF5, 0x80),
         B(0xF0, 0x9F, 0x98), B(0xF0, 0x9F, 0x98, 0x80), B(0xFF), B(0xFE, 0xFF), TEXT + B(0xE2, 0x28) + TEXT,
         B(0x80) + TEXT + B(0xE2) + B(0x25) + TEXT, B(0xC3) + B(0xA9) + B(0xC3), B(0x22, 0x5C, 0x09, 0x0D, 0x08, 0x0C),
         B(0x7F, 0x01, 0x1F)]
TOKENIZE = ["日本語", "a€b", "x\u0301y", "😀!", "\u2028<>&", "tab\there"]


def requests():
    out = []
    for t in DETOK:
        out.append(("/detokenize", {"tokens": t}, False))
    for t in TOKENIZE:
        out.append(("/tokenize", {"content": t, "with_pieces": True}, False))
    prompts = [[1] + B(0xE2, 0x82), [1] + B(0xC3), [1, 400] + B(0x80)]
    for pr in prompts:
        for n in (1, 2, 3):
            out.append(("/completion", {"prompt": pr, "n_predict": n, "temperature": 0}, False))
    for seed in (5, 7, 8, 9, 10, 13, 21):
        for n in (2, 3):
            for st in (False, True):
                out.append(("/completion", dict(RANDOM, prompt="Once", n_predict=n, seed=seed, stream=st), st))
            out.append(("/completion", dict(RANDOM, prompt="Once", n_predict=n, seed=seed, n_probs=2), False))
    for seed in (1, 2, 3, 4, 5, 6, 7, 8):
        for st in (False, True):
            for lp in (False, True):
                body = dict(RANDOM, messages=[{"role": "user", "content": "Hi"}], max_tokens=3, seed=seed, stream=st)
                if lp:
                    body.update(logprobs=True, top_logprobs=2)
                out.append(("/v1/chat/completions", body, st))
    return out


MASKS = [(re.compile(rb'"(prompt_ms|prompt_per_token_ms|prompt_per_second|predicted_ms|predicted_per_token_ms|'
                     rb'predicted_per_second)":[-0-9.e+]+'), rb'"\1":0'),
         (re.compile(rb'"created":\d+'), rb'"created":0'),
         (re.compile(rb'"id":"chatcmpl-[A-Za-z0-9]+"'), rb'"id":"chatcmpl-"'),
         (re.compile(rb'"system_fingerprint":"[^"]*"'), rb'"system_fingerprint":""'),
         (re.compile(rb',"bankml_receipt":\{[^{}]*\}'), b"")]


def mask(b):
    for r, s in MASKS:
        b = r.sub(s, b)
    return b


def post(port, path, body, stream):
    """(status, [raw body] or [raw data of each event])"""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        r = c.getresponse()
        raw = r.read()
    finally:
        c.close()
    if not stream or b"text/event-stream" not in (r.getheader("Content-Type") or "").encode():
        return r.status, [raw]
    return r.status, [ln[5:].lstrip(b" ") for ln in raw.split(b"\n") if ln.startswith(b"data:")]


def run_all(srv, reqs):
    return [post(srv.port, path, body, st) for path, body, st in reqs]


def main():
    reqs = requests()
    try:
        with oracle.Server.llama(kit, MODEL, ctx=512, name="bytes-llama") as L:
            want = run_all(L, reqs)
        with oracle.Server.bankml(MODEL, ctx=512, extra=["--fork", FORK], name="bytes-bankml") as M:
            got = run_all(M, reqs)
    except oracle.ServerError as e:
        S.fail("servers", str(e))
        S.finish()
    bodies = []
    n_fffd = 0
    for (path, body, st), (ws, wb), (gs, gb) in zip(reqs, want, got):
        name = f"{path} {json.dumps(body, ensure_ascii=False)}"
        wm, gm = [mask(x) for x in wb], [mask(x) for x in gb]
        same = ws == gs and wm == gm
        detail = ""
        if not same:
            detail = f"status {ws}/{gs}, {len(wb)}/{len(gb)} parts"
            for i, (a, b) in enumerate(zip(wm, gm)):
                if a != b:
                    detail += f"\n        part {i}: llama-server {a[:600]!r}\n        bankml       {b[:600]!r}"
                    break
        S.check(name, same, detail)
        for x in wb + gb:
            if x != b"[DONE]":
                bodies.append(x)
        n_fffd += any("\ufffd".encode() in x for x in wb)
    bad = []
    for x in bodies:
        try:
            json.loads(x.decode("utf-8"))
        except ValueError as e:
            bad.append(f"{e}: {x[:200]!r}")
    S.check(f"json.loads parses all {len(bodies)} bodies and events", not bad, "; ".join(bad[:3]))
    node = shutil.which("node")
    if not node:
        S.skip("JSON.parse", "node not found")
    else:
        path = os.path.join(tmp, "bodies.bin")
        with open(path, "wb") as f:
            for x in bodies:
                f.write(len(x).to_bytes(4, "little") + x)
        js = ("const b=require('fs').readFileSync(process.argv[1]);let o=0,n=0,bad=[];"
              "while(o<b.length){const l=b.readUInt32LE(o);o+=4;const s=new TextDecoder('utf-8',{fatal:true})"
              ".decode(b.subarray(o,o+l));o+=l;n++;try{JSON.parse(s)}catch(e){bad.push(e.message)}}"
              "console.log(JSON.stringify({n,bad}))")
        r = subprocess.run([node, "-e", js, path], capture_output=True, text=True)
        try:
            res = json.loads(r.stdout)
        except ValueError:
            res = {"n": -1, "bad": [r.stderr[-500:]]}
        S.check(f"node JSON.parse (and a fatal UTF-8 decode) of all {len(bodies)} bodies and events",
                res["n"] == len(bodies) and not res["bad"], str(res)[:800])
    S.check("the answers hold U+FFFD (the requests reach invalid bytes)", n_fffd >= 20, f"only {n_fffd}")
    S.finish()


main()
