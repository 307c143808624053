"""test_js_clients.py -- the streaming helpers of three JS SDKs against `bankml serve`.

npm installs (from the npm registry, into a temporary folder; a few seconds) the official `openai` package (6.x),
Vercel's AI SDK (`ai` 5.x with `@ai-sdk/openai-compatible` 1.x) and LangChain JS (`@langchain/openai` 1.x with
`@langchain/core`), then one node script runs against bankml (greedy, loopback):

  - openai `chat.completions.stream()` (the helper that reads `choices` of every event and threw on bankml's
    former receipt-only event): its finalChatCompletion() content, finish_reason and usage;
  - AI SDK `streamText` with `createOpenAICompatible`: its text and finishReason, once cut by max tokens
    (`length`) and once ended by a stop sequence (`stop`), with usage included;
  - LangChain `ChatOpenAI.stream`: the chunks' content joined.

Each must equal what a plain non-streamed HTTP request with the same body gets (content, finish reason, token
counts). On stories260K (../shared/models) an answer that holds bytes that are not UTF-8 (a seeded request whose
tokens include byte tokens) goes through the openai client non-streamed and streamed and through the AI SDK: each
content must equal the plain body's as Python's json.loads reads it, and hold U+FFFD. Without npm/node, or when
the install fails, the suite is skipped with the reason (a failure under BANKML_REQUIRE_ORACLE=1).

The bankml binary is BANKML_BIN or ./bankml. Standard library only (plus node and npm)."""
import json, os, shutil, subprocess, sys, tempfile, urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle

S = oracle.Suite("test_js_clients")
BIN = os.environ.get("BANKML_BIN") or os.path.join(oracle.ROOT, "bankml")
MODEL = os.path.join(oracle.ROOT, "models", "demo.gguf")
FORK = os.path.join(oracle.ROOT, "models.FORK.json")
PKGS = ["openai@6", "ai@5", "@ai-sdk/openai-compatible@1", "@langchain/openai@1", "@langchain/core@1"]

if not shutil.which("npm") or not shutil.which("node"):
    oracle.skip_all("npm or node is not installed", S)
if not os.path.exists(BIN):
    oracle.skip_all(f"{BIN} is not built", S)
if not os.path.exists(MODEL):
    subprocess.run(["make", "demo-model"], cwd=oracle.ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
if not os.path.exists(MODEL):
    oracle.skip_all("models/demo.gguf is missing and `make demo-model` did not make it", S)

tmp = tempfile.mkdtemp(prefix="js-clients-")
p = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--silent"] + PKGS, cwd=tmp,
                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
if p.returncode != 0 or not os.path.isdir(os.path.join(tmp, "node_modules", "@langchain", "openai")):
    oracle.skip_all(f"npm install {' '.join(PKGS)} failed: {p.stdout.strip()[-300:]}", S)
VERS = {}
for name in ("openai", "ai", "@ai-sdk/openai-compatible", "@langchain/openai"):
    with open(os.path.join(tmp, "node_modules", name, "package.json")) as f:
        VERS[name] = json.load(f)["version"]

SCRIPT = r"""
const OpenAI = require('openai');
const { streamText } = require('ai');
const { createOpenAICompatible } = require('@ai-sdk/openai-compatible');
const { ChatOpenAI } = require('@langchain/openai');
const [base, cfgText] = process.argv.slice(2);
const cfg = JSON.parse(cfgText);
(async () => {
  const out = {};
  const client = new OpenAI({ baseURL: base, apiKey: 'none' });
  const req = { model: cfg.model || 'demo', messages: cfg.msgs, max_tokens: cfg.max, temperature: 0, ...cfg.extra };
  if (cfg.plain) {
    const c = await client.chat.completions.create(req);
    out.plain = c.choices[0].message.content;
  }
  const st = client.chat.completions.stream({ ...req, stream_options: { include_usage: true } });
  let deltas = '';
  st.on('content', (d) => { deltas += d; });
  const fin = await st.finalChatCompletion();
  out.helper = { content: fin.choices[0].message.content, deltas, finish: fin.choices[0].finish_reason,
                 usage: fin.usage || null };
  const prov = createOpenAICompatible({ name: 'bankml', baseURL: base, includeUsage: true });
  const runAi = async (extra) => {
    const r = streamText({ model: prov.chatModel(cfg.model || 'demo'), messages: cfg.msgs, temperature: 0,
                           maxOutputTokens: cfg.max, ...extra,
                           providerOptions: { bankml: cfg.extra || {} } });
    let parts = 0, errors = [];
    for await (const p of r.fullStream) { parts++; if (p.type === 'error') errors.push(String(p.error)); }
    return { text: await r.text, finish: await r.finishReason, usage: await r.usage, errors };
  };
  out.ai = await runAi({});
  if (cfg.stop) out.aiStop = await runAi({ stopSequences: [cfg.stop] });
  if (cfg.langchain) {
    const lc = new ChatOpenAI({ model: 'demo', apiKey: 'none', configuration: { baseURL: base }, temperature: 0,
                                maxTokens: cfg.max });
    let text = '', n = 0;
    for await (const ch of await lc.stream(cfg.msgs.map(m => [m.role, m.content]))) { text += ch.content; n++; }
    out.langchain = { text, chunks: n };
  }
  console.log(JSON.stringify(out));
})().catch(e => { console.error(String(e && e.stack || e)); process.exit(1); });
"""
with open(os.path.join(tmp, "run.js"), "w") as f:
    f.write(SCRIPT)


def post(port, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read().decode("utf-8"))


def run_js(port, cfg):
    p = subprocess.run(["node", "run.js", f"http://127.0.0.1:{port}/v1", json.dumps(cfg)], cwd=tmp,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=180)
    if p.returncode != 0:
        raise RuntimeError(p.stderr.strip()[-600:])
    return json.loads(p.stdout)


LABEL = ", ".join(f"{k} {v}" for k, v in VERS.items())
MSGS = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Tell me about the sea."}]
try:
    with oracle.Server.bankml(MODEL, ctx=2048, extra=["--fork", FORK], name="js-clients-demo") as B:
        plain = post(B.port, {"model": "demo", "messages": MSGS, "max_tokens": 12, "temperature": 0})
        want = plain["choices"][0]["message"]["content"]
        words = want.split()
        S.check("plain request: an answer of several words, cut by max_tokens",
                len(words) >= 3 and plain["choices"][0]["finish_reason"] == "length", repr(plain)[:300])
        stop = words[1] if len(words) >= 3 else "."
        stopped = post(B.port, {"model": "demo", "messages": MSGS, "max_tokens": 12, "temperature": 0, "stop": [stop]})
        try:
            got = run_js(B.port, {"msgs": MSGS, "max": 12, "stop": stop, "langchain": True})
        except Exception as e:
            S.fail(f"{LABEL}: the node script ran", str(e))
            S.finish()
        S.ok(f"{LABEL}: the node script ran")
        S.equal("openai chat.completions.stream(): final content, streamed deltas, finish_reason, usage",
                [got["helper"]["content"], got["helper"]["deltas"], got["helper"]["finish"],
                 (got["helper"]["usage"] or {}).get("completion_tokens")],
                [want, want, "length", plain["usage"]["completion_tokens"]])
        S.equal("AI SDK streamText: text, finishReason length, usage, no error part",
                [got["ai"]["text"], got["ai"]["finish"], got["ai"]["usage"].get("outputTokens"), got["ai"]["errors"]],
                [want, "length", plain["usage"]["completion_tokens"], []])
        S.equal("AI SDK streamText with a stop sequence: text, finishReason stop, no error part",
                [got["aiStop"]["text"], got["aiStop"]["finish"], got["aiStop"]["errors"]],
                [stopped["choices"][0]["message"]["content"], "stop", []])
        S.check("the stop sequence ended the plain answer", stopped["choices"][0]["finish_reason"] == "stop",
                repr(stopped["choices"][0]))
        S.equal("LangChain ChatOpenAI.stream: joined chunks", got["langchain"]["text"], want)
        S.check("LangChain ChatOpenAI.stream: one chunk per token or more",
                got["langchain"]["chunks"] >= plain["usage"]["completion_tokens"], str(got["langchain"]))
except oracle.ServerError as e:
    S.fail("bankml serve", str(e))

shared = oracle.find_shared()
STORIES = os.path.join(shared, "models", "stories260K.gguf") if shared else None
if not STORIES or not os.path.exists(STORIES):
    S.skip("invalid UTF-8 through the clients", "../shared/models/stories260K.gguf not found")
else:
    fork = os.path.join(tmp, "stories.FORK.json")
    p = subprocess.run([BIN, "pin", STORIES, "--fork", fork, "--write"], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    try:
        with oracle.Server.bankml(STORIES, ctx=512, extra=["--fork", fork], name="js-clients-stories") as B:
            # seed 8, nearly uniform sampling: a control byte, a lone continuation byte (U+FFFD), a cut lead
            # byte that the chat answer drops (measured on llama-server: testing/oracle_bytes.py)
            extra = {"top_k": 0, "top_p": 1, "min_p": 0, "seed": 8}
            msgs = [{"role": "user", "content": "Hi"}]
            body = dict(extra, messages=msgs, max_tokens=3, temperature=50)
            want = post(B.port, body)["choices"][0]["message"]["content"]
            S.check("stories260K seed 8: the plain answer holds U+FFFD", "\ufffd" in want, repr(want))
            got = run_js(B.port, {"msgs": msgs, "max": 3, "extra": dict(extra, temperature=50), "plain": True,
                                  "model": "stories260k"})
            S.equal("openai client on invalid bytes: create() and stream() content equal the plain body's",
                    [got["plain"], got["helper"]["content"]], [want, want])
    except (oracle.ServerError, RuntimeError) as e:
        S.fail("invalid UTF-8 through the clients", str(e))

shutil.rmtree(tmp, ignore_errors=True)
S.finish()
