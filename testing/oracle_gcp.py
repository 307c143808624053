"""oracle_gcp.py -- llama-server b11669's Vertex AI prediction route (AIP_MODE=PREDICTION: POST /predict with
{"instances": [...]}, each naming its route in "@requestFormat") against llama-server itself, side by side on
stories260K (-t 2 -c 512 -np 1 --seed 42): the predictions of completions, chat, tokenize, props, slots,
apply-template, messages count, health and metrics instances, a streamed instance forced whole, each
instance-level error, each body-level error; AIP_PREDICT_ROUTE and AIP_HEALTH_ROUTE given without their '/',
AIP_HTTP_PORT replacing --port, and the start error when the predict route is taken.

Several instances are compared only where their order cannot change an answer (b11669 runs them on threads of
its own; bankml one after another). Standard library only. Ends with "N passed, N failed, N skipped"."""
import json, os, subprocess, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle  # noqa: E402

S = oracle.Suite("oracle_gcp")
kit = oracle.kit_or_skip(S)
shared = oracle.shared_or_skip(S)
BIN = os.environ.get("BANKML_BIN") or os.path.join(oracle.ROOT, "bankml")
MODEL = os.path.join(shared, "models", "stories260K.gguf")
CLOCK = ("timings", "created", "id", "system_fingerprint", "bankml_receipt", "id_task", "t_start", "t_load",
         "build_info", "model_path", "model", "name", "media_marker")
FLAGS = ["--seed", "42"]

CHAT = {"@requestFormat": "chatCompletions", "max_tokens": 8, "temperature": 0,
        "messages": [{"role": "user", "content": "What is the meaning of life?"}]}
CASES = [
    ("chat", [CHAT]),
    ("chat streamed (forced whole)", [dict(CHAT, stream=True)]),
    ("completions (/v1/completions)", [{"@requestFormat": "completions", "prompt": "Once", "max_tokens": 4,
                                         "temperature": 0}]),
    ("completion", [{"@requestFormat": "completion", "prompt": "Once upon", "n_predict": 4, "temperature": 0}]),
    ("a path", [{"@requestFormat": "/v1/completions", "prompt": "Once", "max_tokens": 3, "temperature": 1,
                 "seed": 3}]),
    ("tokenize, health, apply-template, count", [
        {"@requestFormat": "tokenize", "content": "Once upon"}, {"@requestFormat": "health"},
        {"@requestFormat": "/health"}, {"@requestFormat": "tokenize"},
        {"@requestFormat": "applyTemplate", "messages": [{"role": "user", "content": "hi"}]},
        {"@requestFormat": "messagesCountTokens", "model": "x", "messages": [{"role": "user", "content": "hi"}]},
        {"@requestFormat": "detokenize", "tokens": [403, 1]}]),
    ("props, slots, metrics", [{"@requestFormat": "props"}, {"@requestFormat": "/props"},
                               {"@requestFormat": "slots"}, {"@requestFormat": "metrics"}]),
    ("instance errors", [{"@requestFormat": "nope"}, {"x": 1}, 5, [], {"@requestFormat": 7},
                         {"@requestFormat": "completion"}]),
    ("none", []),
]
BODIES = ['{"instances":[]}', '[]', '{"instances":{}}', '{"instances":5}', 'xx', '',
          json.dumps({"instances": [{"@requestFormat": "health"}] * 129}),
          json.dumps({"instances": [{"@requestFormat": "health"}] * 128})]


def post_raw(srv, path, body):
    return srv.request("POST", path, body=body)


def run_pair():
    ports = [oracle.free_port(), oracle.free_port()]
    env = [dict(os.environ, AIP_MODE="PREDICTION", AIP_HTTP_PORT=str(p), AIP_HEALTH_ROUTE="hc",
                AIP_PREDICT_ROUTE="pred") for p in ports]
    fork = oracle.pinned_fork(MODEL, prefix="oracle-gcp-")
    # --port is another number: AIP_HTTP_PORT replaces it
    L = oracle.Server([kit.tool("llama-server"), "-m", MODEL, "--host", "127.0.0.1", "--port", "1",
                       "-t", "2", "-c", "512", "-np", "1", "--no-webui", *FLAGS],
                      name="llama-gcp", port=ports[0], env=env[0])
    B = oracle.Server([BIN, "serve", MODEL, "--host", "127.0.0.1", "--port", "1", "--llama-threads", "2",
                       "-c", "512", "--fork", fork, *FLAGS], name="bankml-gcp", port=ports[1], env=env[1])
    oracle.start_both(L, B)
    try:
        for label, inst in CASES:
            want = L.post("/pred", {"instances": inst})
            got = B.post("/pred", {"instances": inst})
            for p in got[1].get("predictions", []) if isinstance(got[1], dict) else []:
                if isinstance(p, dict) and "default_generation_settings" in p:   # bankML's own n_ctx (Savante)
                    S.equal(f"{label}: bankML's n_ctx is the slot's", p.pop("n_ctx", None),
                            p["default_generation_settings"]["n_ctx"])
            S.equal(label, oracle.strip_answer(got, CLOCK), oracle.strip_answer(want, CLOCK))
        for body in BODIES:
            S.equal(f"body {body[:40]!r}", oracle.strip_answer(post_raw(B, "/pred", body), CLOCK),
                    oracle.strip_answer(post_raw(L, "/pred", body), CLOCK))
        S.equal("GET /hc (AIP_HEALTH_ROUTE)", B.get("/hc"), L.get("/hc"))
        S.equal("GET /predict is no route", B.get("/predict")[0], L.get("/predict")[0])
    finally:
        L.stop()
        B.stop()
    # the predict route taken by a route of llama-server's: both stop at start
    env = dict(os.environ, AIP_MODE="PREDICTION", AIP_HTTP_PORT=str(oracle.free_port()), AIP_PREDICT_ROUTE="/health")
    lp = subprocess.run([kit.tool("llama-server"), "-m", MODEL, "-t", "2", "-c", "512", "--no-webui"], env=env,
                        capture_output=True, text=True, timeout=60)
    bp = subprocess.run([BIN, "serve", MODEL, "--fork", fork, "--host", "127.0.0.1"], env=env,
                        capture_output=True, text=True, timeout=60)
    words = "AIP_PREDICT_ROUTE=/health conflicts with an existing llama-server route"
    S.check("AIP_PREDICT_ROUTE=/health: both exit 1 with llama-server's words",
            lp.returncode == 1 and bp.returncode == 1 and words in lp.stderr + lp.stdout and words in bp.stderr,
            f"llama {lp.returncode} / bankml {bp.returncode}: {bp.stderr[-300:]!r}")
    env["AIP_HTTP_PORT"] = "http"
    bp = subprocess.run([BIN, "serve", MODEL, "--fork", fork, "--host", "127.0.0.1"], env=env,
                        capture_output=True, text=True, timeout=60)
    S.check("AIP_HTTP_PORT=http is refused (llama-server's stoi throws)", bp.returncode != 0 and
            "AIP_HTTP_PORT=http is not a port" in bp.stderr, bp.stderr[-300:])


S.run("harness", run_pair)
S.finish()
