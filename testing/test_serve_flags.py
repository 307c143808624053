"""test_serve_flags.py -- `bankml serve` takes llama-server b11669's command line: every option's exit code and
message (refused ones from the table itself), spellings (--long=value, negations, LLAMA_ARG_* variables),
--help from the same table, docs/modules/main.md's table equal to `bankml help serve --markdown`, and the peer
suite's tinyllama2 command line (utils.py's ServerProcess.start) served as it is (-b 32 -np 2 included), with llama-server's 501s for --no-slots, no --metrics and no --props.
Standard library only; needs ../shared/models/stories260K.gguf for the server cases (skipped without it)."""
import http.client, json, os, re, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle

S = oracle.Suite("test_serve_flags")
BIN = os.environ.get("BANKML_BIN") or os.path.join(oracle.ROOT, "bankml")
ENV = {k: v for k, v in os.environ.items() if not k.startswith("LLAMA_ARG_") and k not in ("LLAMA_API_KEY",)}
USAGE = ("usage: bankml serve [MODEL] [llama-server's options] [--fork F] [--registry DIR] [--listen H:P] "
         "[--upstream H:P] [--keep-alive D] [--allow-origin O] [--pool-threads N] [--native]\n")


def run(args, env=None, timeout=30):
    e = dict(ENV)
    e.update(env or {})
    p = subprocess.run([BIN, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e,
                       timeout=timeout)
    return p.returncode, p.stdout, p.stderr


# ---- --help: from the table, never a server
rc, out, err = run(["serve", "--help"], timeout=10)
S.equal("serve --help: exit 0, nothing on stderr", (rc, err), (0, ""))
S.check("serve --help: the usage line first", out.startswith(USAGE.replace("usage: ", "usage: ", 1)), out[:200])
rc2, out2, _ = run(["help", "serve"])
S.equal("help serve: the same text as serve --help", (rc2, out2), (0, out))
for flag, line in (("-c, --ctx-size, --ctx N   (env LLAMA_ARG_CTX_SIZE)", "KV cells per slot"),
                   ("--slots, --no-slots   (env LLAMA_ARG_ENDPOINT_SLOTS)", "llama-server's: reproduced"),
                   ("-ngl, --gpu-layers, --n-gpu-layers N   (env LLAMA_ARG_N_GPU_LAYERS)",
                    "llama-server's: accepted, changes no answer: a CPU build has no device"),
                   ("-fa, --flash-attn on|off|auto   (env LLAMA_ARG_FLASH_ATTN)",
                    "llama-server's: reproduced for on, auto; otherwise refused")):
    i = out.find("\n  " + flag + "\n")
    S.check(f"serve --help lists {flag.split()[0]} with its meaning and disposition",
            i >= 0 and line in out[i:i + 600], out[i:i + 300] if i >= 0 else "not listed")
S.check("serve --help: every option has a default or none, never '(default: )'", "(default: )" not in out)
for cmd in ("guard", "sha256", "pin", "verify", "tokenize", "detokenize", "chat-template", "bench", "generate"):
    rc, o, e = run([cmd, "--help"])
    rc2, o2, _ = run(["help", cmd])
    S.check(f"{cmd} --help: exit 0, usage first, equal to help {cmd}",
            rc == 0 and e == "" and o.startswith("usage: bankml " + cmd) and (rc2, o2) == (0, o), f"{rc} {e!r}")
rc, o, e = run(["help", "nope"])
S.equal("help nope: exit 1, why", (rc, e.splitlines()[0]), (1, "bankml help: unknown command nope"))

# ---- the docs' table is the binary's
rc, md, _ = run(["help", "serve", "--markdown"])
doc = open(os.path.join(oracle.ROOT, "docs", "modules", "main.md")).read()
S.check("docs/modules/main.md holds `bankml help serve --markdown` verbatim", rc == 0 and md in doc,
        "regenerate it: ./bankml help serve --markdown")

# ---- parse errors (exit 1) and refusals (exit 2): exact messages
CASES = [
    (["serve", "--lisen"], {}, 1, "bankml serve: unknown option --lisen\n" + USAGE),
    (["serve", "stray", "more"], {}, 1, "bankml serve: unexpected argument more\n" + USAGE),
    (["serve", "--port"], {}, 1, "bankml serve: --port needs a value (PORT)\n" + USAGE),
    (["serve", "--port=abc"], {}, 1, "bankml serve: --port takes a whole number from 0 to 65535, not abc\n" + USAGE),
    (["serve", "--no-slots=1"], {}, 1, "bankml serve: --no-slots takes no value\n" + USAGE),
    (["serve", "-c", "x"], {}, 1, "bankml serve: -c takes a whole number from 0 to 16777216, not x\n" + USAGE),
    (["serve", "--temp", "hot"], {}, 1, "bankml serve: --temp wants a number, not hot\n"),
    (["serve", "-fa", "off"], {}, 2, "bankml serve: refused -fa off: measured on b11669's CPU build: on and auto give "
                                     "the same bits, off other ones; bankml plays the flash path\n"),
    (["serve", "--flash-attn=off"], {}, 2, "bankml serve: refused -fa off: measured on b11669's CPU build: on and "
                                           "auto give the same bits, off other ones; bankml plays the flash path\n"),
    (["serve"], {"LLAMA_ARG_FLASH_ATTN": "off"}, 2,
     "bankml serve: refused LLAMA_ARG_FLASH_ATTN=off: measured on b11669's CPU build: on and auto give the same "
     "bits, off other ones; bankml plays the flash path\n"),
    (["serve", "-nr"], {}, 2, "bankml serve: refused -nr: repacking picks the kernels, so bits: bankml plays "
                              "llama-server's default (repacked); --no-repack is not reproduced\n"),
    (["serve"], {"LLAMA_ARG_NO_REPACK": "1"}, 2,
     "bankml serve: refused LLAMA_ARG_NO_REPACK: repacking picks the kernels, so bits: bankml plays llama-server's "
     "default (repacked); --no-repack is not reproduced\n"),
    (["serve"], {"LLAMA_ARG_ENDPOINT_SLOTS": "maybe"}, 1,
     "bankml serve: the environment variable LLAMA_ARG_ENDPOINT_SLOTS wants 1, true, on, enabled, 0, false, off or "
     "disabled, not maybe\n"),
    (["serve", "-ctk", "q9"], {}, 1, "bankml serve: error while handling argument \"-ctk\": Unsupported cache type: q9 "
                                     "(allowed: f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1)\n"),
    (["serve", "-fa", "off", "-ctv", "q8_0"], {}, 2, "bankml serve: quantized V cache requires flash_attn to be "
                                                     "enabled (-ctv q8_0 with -fa off)\n"),
    (["serve"], {"BANKML_CACHE_TYPE": "Q8_0"}, 1, "bankml serve: BANKML_CACHE_TYPE=Q8_0: Unsupported cache type "
                                                  "(allowed: f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1)\n"),
    (["serve", "--reasoning-format", "bogus"], {}, 2,
     "bankml serve: refused --reasoning-format bogus: b11669 knows none, auto, deepseek and deepseek-legacy (it exits "
     "on another name)\n"),
    (["serve", "-tb", "3"], {}, 2, "bankml serve: refused -tb 3: bankml plays prompts with the -t split (its threads "
                                   "decide bits); give -tb equal to -t (2) or leave it out\n"),
    (["serve", "--mirostat", "2"], {}, 2, "bankml serve: refused the server-wide sampling flags: mirostat: not "
                                          "reproduced; bankML reproduces llama-server's default sampler chain\n"),
    (["serve", "-c", "0"], {}, 2, "bankml serve: -c 0 reads the model's context length: name the model (-m FILE)\n"),
    (["serve", "--no-jinja", "--chat-template", "nonsense"], {}, 2,
     "bankml serve: error: the supplied chat template is not supported: nonsense\n"
     "note: llama.cpp was started without --jinja, we only support commonly used templates\n"),
    (["serve", "--host", "/tmp/x.sock"], {}, 2, "bankml serve: refused --host /tmp/x.sock: a UNIX socket is not "
                                                "reproduced; give TCP addresses\n"),
    (["serve", "--host", "a,b,c,d"], {}, 2, "bankml serve: refused --host a,b,c,d: at most 3 addresses\n"),
    (["serve", "--host", " , "], {}, 2, "bankml serve: refused --host \" , \": no address\n"),
    (["serve", "a.gguf", "-m", "b.gguf"], {}, 2,
     "bankml serve: two models: a.gguf and b.gguf (name one; more are served with --registry)\n"),
    (["serve", "--cache-ram", "0", "/nonexistent.gguf"], {}, 1,
     "bankml serve: cannot read /nonexistent.gguf: No such file or directory\n"),
    (["serve", "--backend_sampling"], {}, 2, "bankml serve: refused --backend_sampling: backend sampling is not "
                                             "reproduced\n"),
]
for args, env, want_rc, want_err in CASES:
    rc, o, e = run(args, env)
    S.equal(f"{' '.join(args)} {env or ''}: exit {want_rc} and its message", (rc, e), (want_rc, want_err))

# every refused row of the table is refused with its own reason, by its first spelling
rows = [r for r in md.splitlines() if r.startswith("| `") and "| refused |" in r]
S.check("the table refuses something", len(rows) > 50, str(len(rows)))
bad = []
for r in rows:
    cells = [c.strip() for c in r.strip("|").split(" | ")]
    m = re.match(r"`([^`]+)`(?:.*?`)?(?: (\S.*))?$", cells[0])
    flag = m.group(1)
    has_value = not cells[0].endswith("`")
    args = ["serve", flag] + (["x"] if has_value else [])
    rc, o, e = run(args)
    want = f"bankml serve: refused {flag}{' x' if has_value else ''}: {cells[3]}\n"
    if (rc, e) != (2, want):
        bad.append((args, rc, e, want))
S.check(f"each of the {len(rows)} refused options: exit 2 with its reason", not bad, repr(bad[:2]))

# ---- the server cases
shared = oracle.find_shared()
MODEL = os.path.join(shared, "models", "stories260K.gguf") if shared else None
if not MODEL or not os.path.exists(MODEL):
    S.skip("the peer command line", "no ../shared/models/stories260K.gguf")
    S.finish()
tmp = tempfile.mkdtemp(prefix="serve-flags-")
FORK = os.path.join(tmp, "t.FORK.json")
subprocess.run([BIN, "pin", MODEL, "--fork", FORK, "--write"], check=True, stdout=subprocess.DEVNULL)

# utils.py's ServerProcess.start for ServerPreset.tinyllama2, then the shim's --fork
PEER = ["--port", "{port}", "--temp", "0.8", "--seed", "42", "--host", "127.0.0.1", "--offline", "--model", MODEL,
        "--batch-size", "32", "--no-slots", "--alias", "tinyllama-2", "--ctx-size", "512", "--parallel", "2",
        "--n-predict", "64", "--no-jinja", "--fork", FORK]
argv = [BIN, "serve"] + PEER
with oracle.Server(argv, name="bankml-peer-line") as B:
    S.equal("the peer suite's tinyllama2 command line as it is (-b 32 -np 2 included) serves: /health", B.get("/health"),
            (200, {"status": "ok"}))
    S.equal("--no-slots: GET /slots is llama-server's 501", B.get("/slots"),
            (501, {"error": {"code": 501, "message": "This server does not support slots endpoint. Start it with "
                                                     "`--slots`", "type": "not_supported_error"}}))
    S.equal("no --metrics: GET /metrics is llama-server's 501", B.get("/metrics"),
            (501, {"error": {"code": 501, "message": "This server does not support metrics endpoint. Start it with "
                                                     "`--metrics`", "type": "not_supported_error"}}))
    S.equal("no --props: POST /props is llama-server's 501", B.post("/props", {"x": 1}),
            (501, {"error": {"code": 501, "message": "This server does not support changing global properties. "
                                                     "Start it with `--props`", "type": "not_supported_error"}}))
    st, p = B.get("/props")
    gs = p.get("default_generation_settings", {}).get("params", {}) if st == 200 else {}
    S.equal("/props: the endpoint switches and the server-wide seed and temperature",
            (st, p.get("endpoint_slots"), p.get("endpoint_metrics"), p.get("endpoint_props"), gs.get("seed"),
             gs.get("temperature"), gs.get("n_predict")), (200, False, False, False, 42, 0.800000011920929, -1))
    st, r = B.post("/completion", {"prompt": "Once upon a time"})
    S.equal("-n 64: a request without n_predict stops at 64", (st, r.get("tokens_predicted"), r.get("stop_type")),
            (200, 64, "limit"))
    st, r = B.post("/completion", {"prompt": "Once upon a time", "n_predict": -1})
    S.equal("-n 64 and n_predict -1: refused with the reason", (st, r["error"]["message"]),
            (400, "n_predict -1 on a server started with -n 64 is not reproduced (llama-server stops at 64 tokens "
                  "and reports -1): leave n_predict out, or give a budget"))
with oracle.Server([BIN, "serve", MODEL, "--fork", FORK, "--port", "{port}", "--metrics", "--slots"],
                   name="bankml-metrics") as B:
    st, body = B.get("/metrics")
    S.check("--metrics: GET /metrics answers 200", st == 200 and "llamacpp:prompt_tokens_total" in body, str(st))
    st, p = B.get("/props")
    S.equal("--metrics --slots: /props says so", (p.get("endpoint_metrics"), p.get("endpoint_slots")), (True, True))
with oracle.Server([BIN, "serve", "--fork", FORK, "--port", "{port}"], name="bankml-env",
                   env=dict(ENV, LLAMA_ARG_MODEL=MODEL, LLAMA_ARG_ENDPOINT_METRICS="1", LLAMA_ARG_N_PREDICT="3")) as B:
    S.equal("LLAMA_ARG_MODEL, LLAMA_ARG_ENDPOINT_METRICS=1, LLAMA_ARG_N_PREDICT=3: read as the flags",
            (B.get("/metrics")[0], B.post("/completion", {"prompt": "Once"})[1].get("tokens_predicted")), (200, 3))
# llama-server's list of addresses, one listener each on the same port (the command line beats LLAMA_ARG_HOST)
port = oracle.free_port()
with oracle.Server([BIN, "serve", MODEL, "--fork", FORK, "--port", str(port), "--host", "127.0.0.1, ::1"],
                   name="bankml-hosts", port=port, env=dict(ENV, LLAMA_ARG_HOST="192.0.2.1")) as B:
    got = []
    for host in ("127.0.0.1", "::1"):
        c = http.client.HTTPConnection(host, port, timeout=10)
        c.request("GET", "/health")
        r = c.getresponse()
        got.append((r.status, r.read()))
        c.close()
    S.equal("--host 127.0.0.1,::1 over LLAMA_ARG_HOST: both addresses answer on the one port", got,
            [(200, b'{"status":"ok"}'), (200, b'{"status":"ok"}')])
KEYS = os.path.join(tmp, "keys.txt")
with open(KEYS, "w") as f:
    f.write("# a comment\nK2\n\nK3\n")
with oracle.Server([BIN, "serve", MODEL, "--fork", FORK, "--port", "{port}", "--api-key", "K1", "--api-key-file",
                    KEYS], name="bankml-keys") as B:
    got = [B.get("/props")[0]] + [B.get("/props", headers={"Authorization": "Bearer " + k})[0]
                                  for k in ("K1", "K2", "K3", "# a comment", "")]
    S.equal("--api-key K1 --api-key-file (K2, K3, a comment, a blank line): 401 without, 200 with each key",
            got, [401, 200, 200, 200, 401, 401])
S.finish()
