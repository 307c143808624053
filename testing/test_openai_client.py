"""test_openai_client.py -- the official `openai` npm package against `bankml serve` on the demo model.

The test installs `openai` into a temporary folder (`npm install openai`, from the npm registry), writes a small
node script there and runs a chat, a stream and a logprobs request with the client against bankml (greedy, on
loopback). Each answer's exact content (and the logprobs' tokens and values) must equal what a plain HTTP request
with the same body gets. Without npm/node, or when the install fails (no network), the suite is skipped with the
reason; under BANKML_REQUIRE_ORACLE=1 that is a failure.

The bankml binary is BANKML_BIN or ./bankml. Standard library only (plus node and npm)."""
import json, os, shutil, subprocess, sys, tempfile, urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle

S = oracle.Suite("test_openai_client")
BIN = os.environ.get("BANKML_BIN") or os.path.join(oracle.ROOT, "bankml")
MODEL = os.path.join(oracle.ROOT, "models", "demo.gguf")
FORK = os.path.join(oracle.ROOT, "models.FORK.json")

if not shutil.which("npm") or not shutil.which("node"):
    oracle.skip_all("npm or node is not installed", S)
if not os.path.exists(BIN):
    oracle.skip_all(f"{BIN} is not built", S)
if not os.path.exists(MODEL):
    subprocess.run(["make", "demo-model"], cwd=oracle.ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
if not os.path.exists(MODEL):
    oracle.skip_all("models/demo.gguf is missing and `make demo-model` did not make it", S)

tmp = tempfile.mkdtemp(prefix="openai-client-")
p = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--silent", "openai"], cwd=tmp,
                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
if p.returncode != 0 or not os.path.isdir(os.path.join(tmp, "node_modules", "openai")):
    oracle.skip_all(f"npm install openai failed: {p.stdout.strip()[-300:]}", S)
with open(os.path.join(tmp, "node_modules", "openai", "package.json")) as f:
    OPENAI_VERSION = json.load(f)["version"]

MSGS = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Tell me about the sea."}]
SCRIPT = r"""
const OpenAI = require('openai');
const client = new OpenAI({ baseURL: process.argv[2], apiKey: 'none' });
const msgs = JSON.parse(process.argv[3]);
(async () => {
  const out = {};
  const chat = await client.chat.completions.create({ model: 'demo', messages: msgs, max_tokens: 12,
                                                      temperature: 0 });
  out.chat = { content: chat.choices[0].message.content, finish: chat.choices[0].finish_reason,
               usage: chat.usage };
  const stream = await client.chat.completions.create({ model: 'demo', messages: msgs, max_tokens: 12,
                                                        temperature: 0, stream: true,
                                                        stream_options: { include_usage: true } });
  let text = '', finish = null, usage = null, chunks = 0;
  for await (const ch of stream) {
    chunks++;
    if (ch.choices && ch.choices.length) {
      text += ch.choices[0].delta.content || '';
      if (ch.choices[0].finish_reason) finish = ch.choices[0].finish_reason;
    }
    if (ch.usage) usage = ch.usage;
  }
  out.stream = { content: text, finish, usage, chunks };
  const lp = await client.chat.completions.create({ model: 'demo', messages: msgs, max_tokens: 5, temperature: 0,
                                                    logprobs: true, top_logprobs: 3 });
  out.logprobs = { content: lp.choices[0].message.content,
                   logprobs: lp.choices[0].logprobs.content.map(t => ({ token: t.token, logprob: t.logprob,
                     top: t.top_logprobs.map(x => [x.token, x.logprob]) })) };
  console.log(JSON.stringify(out));
})().catch(e => { console.error(String(e && e.stack || e)); process.exit(1); });
"""
with open(os.path.join(tmp, "run.js"), "w") as f:
    f.write(SCRIPT)


def post(port, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


try:
    with oracle.Server.bankml(MODEL, ctx=2048, extra=["--fork", FORK]) as B:
        p = subprocess.run(["node", "run.js", f"http://127.0.0.1:{B.port}/v1", json.dumps(MSGS)], cwd=tmp,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
        if not S.check(f"openai {OPENAI_VERSION}: the node script ran", p.returncode == 0, p.stderr.strip()[-400:]):
            S.finish()
        got = json.loads(p.stdout)
        plain = post(B.port, {"model": "demo", "messages": MSGS, "max_tokens": 12, "temperature": 0})
        want_content = plain["choices"][0]["message"]["content"]
        S.check("plain request: a non-empty answer", bool(want_content), repr(want_content))
        S.equal("chat: content, finish_reason, usage counts",
                (got["chat"]["content"], got["chat"]["finish"], got["chat"]["usage"]["prompt_tokens"],
                 got["chat"]["usage"]["completion_tokens"]),
                (want_content, plain["choices"][0]["finish_reason"], plain["usage"]["prompt_tokens"],
                 plain["usage"]["completion_tokens"]))
        S.equal("stream: joined deltas, finish_reason, usage counts",
                (got["stream"]["content"], got["stream"]["finish"], got["stream"]["usage"]["completion_tokens"]),
                (want_content, plain["choices"][0]["finish_reason"], plain["usage"]["completion_tokens"]))
        S.check("stream: one chunk per token or more", got["stream"]["chunks"] >= plain["usage"]["completion_tokens"],
                f"{got['stream']['chunks']} chunks")
        lp = post(B.port, {"model": "demo", "messages": MSGS, "max_tokens": 5, "temperature": 0, "logprobs": True,
                           "top_logprobs": 3})
        want_lp = [{"token": t["token"], "logprob": t["logprob"],
                    "top": [[x["token"], x["logprob"]] for x in t["top_logprobs"]]}
                   for t in lp["choices"][0]["logprobs"]["content"]]
        S.equal("logprobs: content, tokens, values and top 3", got["logprobs"],
                {"content": lp["choices"][0]["message"]["content"], "logprobs": want_lp})
except oracle.ServerError as e:
    S.fail("bankml serve", str(e))
finally:
    shutil.rmtree(tmp, ignore_errors=True)

S.finish()
