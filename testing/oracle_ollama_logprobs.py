"""oracle_ollama_logprobs.py -- logprobs and top_logprobs on Ollama's /api/chat and /api/generate (spec §2.6,
bankML 0.4.2) against llama-server b11669's /v1/chat/completions and /completion on the same prompt
(stories260K, -t 2 -c 512 -np 1, greedy and seeded): each entry's token, bytes and logprob equal llama-server's
(the logprob's float64 written as Go's encoding/json writes it), top_logprobs 0 (the chosen token only), 1, 5
and 20; streamed, every token's line carries its entry (a logprobs-only line when it released no text) and the
lines' entries are the whole answer's; the refusals (top_logprobs out of 0..20, a non-integer, a non-boolean
logprobs) and top_logprobs without logprobs ignored. Standard library only. Ends with
"N passed, N failed, N skipped"."""
import http.client, json, os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle  # noqa: E402

S = oracle.Suite("oracle_ollama_logprobs")
kit = oracle.kit_or_skip(S)
shared = oracle.shared_or_skip(S)
MODEL = os.path.join(shared, "models", "stories260K.gguf")
MSGS = [{"role": "user", "content": "Tell me a story"}]


def go_float(x):
    """A float64 as Go's encoding/json writes it."""
    if x == 0:
        return "0"
    a = abs(x)
    r = repr(float(x))
    if a < 1e-6 or a >= 1e21:
        m, e = ("%.17e" % x).split("e")
        for p in range(1, 18):
            t = "%.*e" % (p - 1, x)
            if float(t) == x:
                m, e = t.split("e")
                break
        ex = int(e)
        return f"{m}e{'-' if ex < 0 else '+'}{abs(ex) if ex < 0 or ex >= 10 else '0' + str(ex)}"
    if "e" in r:   # Python's repr switches to exponents earlier: write the digits out
        from decimal import Decimal
        r = format(Decimal(r), "f")
    return r[:-2] if r.endswith(".0") else r


def raw_floats(text):
    """The logprob literals as written, in order."""
    out, key = [], '"logprob":'
    i = text.find(key)
    while i >= 0:
        j = i + len(key)
        k = j
        while k < len(text) and text[k] in "-+.0123456789eE":
            k += 1
        out.append(text[j:k])
        i = text.find(key, k)
    return out


def entries_llama(lp, n_top):
    """llama-server's logprobs.content as Ollama's entries."""
    out = []
    for c in lp["content"]:
        e = {"token": c["token"], "logprob": c["logprob"]}
        if c["bytes"]:
            e["bytes"] = c["bytes"]
        if n_top:
            e["top_logprobs"] = [dict({"token": t["token"], "logprob": t["logprob"]},
                                      **({"bytes": t["bytes"]} if t["bytes"] else {})) for t in c["top_logprobs"]]
        out.append(e)
    return out


def run():
    fork = oracle.pinned_fork(MODEL, prefix="oracle-olp-")
    L, B = oracle.start_both(oracle.Server.llama(kit, MODEL, name="llama-olp"),
                             oracle.Server.bankml(MODEL, extra=["--fork", fork], name="bankml-olp"))
    try:
        for n_top, opts in ((0, {"temperature": 0}), (1, {"temperature": 0}), (5, {"temperature": 1, "seed": 3}),
                            (20, {"temperature": 0.8, "seed": 7})):
            for route in ("/api/chat", "/api/generate"):
                body = {"model": "stories260k", "stream": False, "logprobs": True, "top_logprobs": n_top,
                        "options": dict(opts, num_predict=8)}
                if route == "/api/chat":
                    body["messages"] = MSGS
                    lbody = {"messages": MSGS, "max_tokens": 8, "logprobs": True, "top_logprobs": max(n_top, 1),
                             **opts}
                    lpath = "/v1/chat/completions"
                else:
                    body["prompt"] = "Tell me a story"
                    # /api/generate renders the prompt as a user turn too: the same chat on llama-server
                    lbody = {"messages": MSGS, "max_tokens": 8, "logprobs": True, "top_logprobs": max(n_top, 1),
                             **opts}
                    lpath = "/v1/chat/completions"
                st, want = L.post(lpath, lbody)
                st2, got = B.post(route, body)
                label = f"{route} top_logprobs {n_top} {json.dumps(opts)}"
                if not S.check(label + ": 200", st == 200 and st2 == 200, f"{st} {st2} {str(got)[:200]}"):
                    continue
                w = entries_llama(want["choices"][0]["logprobs"], n_top)
                S.equal(label + ": entries equal llama-server's", got.get("logprobs"), w)
                # the raw bytes: every logprob literal is Go's form of its value
                c = http.client.HTTPConnection("127.0.0.1", B.port, timeout=60)
                c.request("POST", route, body=json.dumps(body), headers={"Content-Type": "application/json"})
                rawtext = c.getresponse().read().decode()
                c.close()
                lits = raw_floats(rawtext)
                bad = [x for x in lits if go_float(float(x)) != x]
                S.check(label + ": logprobs written as Go writes float64", lits and not bad, str(bad[:5]))
                # streamed: a line per reported token, its entry on it, the entries the whole answer's
                body["stream"] = True
                c = http.client.HTTPConnection("127.0.0.1", B.port, timeout=60)
                c.request("POST", route, body=json.dumps(body), headers={"Content-Type": "application/json"})
                lines = [json.loads(x) for x in c.getresponse().read().decode().splitlines() if x.strip()]
                c.close()
                parts = [ln for ln in lines if not ln.get("done")]
                streamed = [e for ln in parts for e in ln.get("logprobs", [])]
                S.check(label + ": streamed, one entry per line", all(len(ln.get("logprobs", [])) == 1 for ln in parts)
                        and "logprobs" not in lines[-1], json.dumps(lines)[:300])
                S.equal(label + ": streamed entries equal the whole answer's", streamed, got.get("logprobs"))
        for extra, msg in (({"top_logprobs": 21}, "top_logprobs must be between 0 and 20"),
                           ({"top_logprobs": -1}, "top_logprobs must be between 0 and 20"),
                           ({"top_logprobs": 1.5}, "json: cannot unmarshal number 1.5 into Go struct field "
                                                   "ChatRequest.top_logprobs of type int"),
                           ({"logprobs": "yes"}, "json: cannot unmarshal string into Go struct field "
                                                 "ChatRequest.logprobs of type bool")):
            body = dict({"model": "stories260k", "messages": MSGS, "logprobs": True, "stream": False}, **extra)
            S.equal(f"/api/chat {json.dumps(extra)}: 400", B.post("/api/chat", body), (400, {"error": msg}))
        st, got = B.post("/api/chat", {"model": "stories260k", "messages": MSGS, "stream": False, "top_logprobs": 99,
                                       "options": {"num_predict": 2}})
        S.check("top_logprobs without logprobs: ignored, no logprobs", st == 200 and "logprobs" not in got,
                str(got)[:200])
    finally:
        L.stop()
        B.stop()


S.run("harness", run)
S.finish()
