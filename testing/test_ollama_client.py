"""test_ollama_client.py -- the official `ollama` npm package, installed into a temporary folder and pointed at
`bankml serve`: chat (streamed and not), generate, list, ps, show, create, copy, delete. Skips with a reason when
node/npm or the registry is unavailable (a failure under BANKML_REQUIRE_ORACLE=1). Standard library only."""
import json, os, shutil, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle

S = oracle.Suite("test_ollama_client")
if not shutil.which("npm") or not shutil.which("node"):
    oracle.skip_all("node and npm are not installed", S)
models = oracle.ensure_models(S)
BIN = os.environ.get("BANKML_BIN") or os.path.join(oracle.ROOT, "bankml")
NAME = "qwen3-e128-f32"
MODEL = os.path.join(models, NAME + ".gguf")
tmp = tempfile.mkdtemp(prefix="ollama-client-")
FORK = os.path.join(tmp, "test.FORK.json")
p = subprocess.run([BIN, "pin", MODEL, "--fork", FORK, "--write"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                   text=True)
if p.returncode != 0:
    oracle.skip_all(f"bankml pin failed: {p.stdout.strip()}", S)
npm = subprocess.run(["npm", "install", "--silent", "--no-audit", "--no-fund", "ollama"], cwd=tmp,
                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
if npm.returncode != 0:
    oracle.skip_all(f"npm install ollama failed: {npm.stdout.strip()[-300:]}", S)

SCRIPT = r"""
const { Ollama } = require('ollama');
const o = new Ollama({ host: process.argv[2] });
const M = process.argv[3];
const out = {};
(async () => {
  const step = async (k, f) => { try { out[k] = await f(); } catch (e) { out[k] = { error: String(e.message || e) }; } };
  await step('chat', () => o.chat({ model: M, messages: [{ role: 'user', content: 'Hi' }], options: { temperature: 0, num_predict: 6 } }));
  await step('chat_stream', async () => { let t = '', last = null;
    for await (const p of await o.chat({ model: M, messages: [{ role: 'user', content: 'Hi' }], stream: true, options: { temperature: 0, num_predict: 6 } })) { t += p.message.content; last = p; }
    return { text: t, last }; });
  await step('generate', () => o.generate({ model: M, prompt: 'Hello', options: { temperature: 0, num_predict: 4 } }));
  await step('list', () => o.list());
  await step('ps', () => o.ps());
  await step('show', () => o.show({ model: M }));
  await step('create', () => o.create({ model: 'brief', from: M, system: 'Be brief.', parameters: { temperature: 0 } }));
  await step('copy', () => o.copy({ source: 'brief', destination: 'brief2' }));
  await step('list2', () => o.list());
  await step('chat_derived', () => o.chat({ model: 'brief2', messages: [{ role: 'user', content: 'Hi' }], options: { num_predict: 3 } }));
  await step('delete', () => o.delete({ model: 'brief2' }));
  await step('list3', () => o.list());
  await step('missing', () => o.chat({ model: 'nope', messages: [{ role: 'user', content: 'x' }] }));
  console.log(JSON.stringify(out));
})();
"""
with open(os.path.join(tmp, "client.js"), "w") as f:
    f.write(SCRIPT)

try:
    with oracle.Server.bankml(MODEL, ctx=1024, extra=["--fork", FORK, "--registry", tmp]) as B:
        want_stream = B.post("/api/chat", {"model": NAME, "messages": [{"role": "user", "content": "Hi"}],
                                           "stream": False, "options": {"temperature": 0, "num_predict": 6}})[1]
        # the streamed reference is read directly: for a <think> template a whitespace-only answer streams as ""
        # but comes whole when not streamed (llama-server's parser, reproduced)
        st, raw = B.request("POST", "/api/chat", {"model": NAME, "messages": [{"role": "user", "content": "Hi"}],
                                                  "options": {"temperature": 0, "num_predict": 6}})
        lines = [raw] if isinstance(raw, dict) else [json.loads(l) for l in raw.splitlines() if l]
        want_text = "".join(l["message"]["content"] for l in lines)
        want_gen = B.post("/api/generate", {"model": NAME, "prompt": "Hello", "stream": False,
                                            "options": {"temperature": 0, "num_predict": 4}})[1]
        r = subprocess.run(["node", "client.js", f"http://127.0.0.1:{B.port}", NAME], cwd=tmp,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=180)
        try:
            out = json.loads(r.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            S.fail("client ran", r.stdout[-500:])
            out = None
        if out:
            c = out["chat"]
            S.check("chat", c.get("done") is True and c["message"]["content"] == want_stream["message"]["content"] and
                    c["eval_count"] == want_stream["eval_count"], json.dumps(c)[:300])
            cs = out["chat_stream"]
            S.check("chat streamed", cs.get("last", {}).get("done") is True and
                    st == 200 and lines[-1].get("done") is True and cs.get("text") == want_text and
                    cs["last"]["eval_count"] == want_stream["eval_count"], json.dumps(cs)[:300])
            g = out["generate"]
            S.equal("generate", [g.get("done"), g.get("response"), g.get("prompt_eval_count"), g.get("eval_count")],
                    [True, want_gen["response"], want_gen["prompt_eval_count"], want_gen["eval_count"]])
            S.check("list", [m["name"] for m in out["list"].get("models", [])] == [NAME + ":latest"],
                    json.dumps(out["list"])[:300])
            S.check("ps", [m["name"] for m in out["ps"].get("models", [])] == [NAME + ":latest"],
                    json.dumps(out["ps"])[:300])
            sh = out["show"]
            S.check("show", sh.get("details", {}).get("family") == "qwen3" and "general.architecture" in
                    sh.get("model_info", {}), json.dumps(sh)[:300])
            S.equal("create", out["create"], {"status": "success"})
            S.equal("copy", out["copy"], {"status": "success"})
            S.equal("list after create and copy", sorted(m["name"] for m in out["list2"]["models"]),
                    sorted([NAME + ":latest", "brief:latest", "brief2:latest"]))
            S.check("chat with the copy", out["chat_derived"].get("done") is True, json.dumps(out["chat_derived"]))
            S.equal("delete", out["delete"], {"status": "success"})
            S.equal("list after delete", sorted(m["name"] for m in out["list3"]["models"]),
                    sorted([NAME + ":latest", "brief:latest"]))
            S.equal("unknown model raises Ollama's error", out["missing"], {"error": "model 'nope' not found"})
except oracle.ServerError as e:
    S.fail("server", str(e))
shutil.rmtree(tmp, ignore_errors=True)
S.finish()
