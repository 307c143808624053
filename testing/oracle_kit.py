#!/usr/bin/env python3
"""oracle_kit.py -- smoke tests of the oracle kit itself (llama.cpp b11669), so that every later oracle
suite stands on tools known to work here:

  (a) llama-server answers a chat (temperature 0, max_tokens 8) on every generated model, and a
      /completion on ../shared/models/stories260K.gguf (no template), whose answer is a recorded literal;
      one streamed chat is read as server-sent events;
  (b) build/ggml-oracle (in-process ggml under sid-run) reproduces a recorded ggml_vec_dot_f16 result bit
      for bit, and dequantize(quantize(row)) of fixed rows hashes to recorded sha256s; mul_mat, rms_norm,
      rope_ext, swiglu, soft_max and flash_attn_ext run and meet exact properties; build/kit-llama-dump
      (whole model through libllama, every graph tensor dumped) gives llama-debug's logits bit for bit;
  (c) every generated model's sha256 equals testing/models.sha256, and regenerating one model of each
      graph into a temporary folder gives the same bytes.

Models are made first if missing (`make models`). Answers are written to build/oracle-logs/kit-chat.jsonl.
Without the kit or ../shared the suite skips itself (fails under BANKML_REQUIRE_ORACLE=1).
"""
import hashlib, math, os, shutil, struct, subprocess, sys, tempfile, time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle  # noqa: E402

s = oracle.Suite("oracle_kit")
shared = oracle.shared_or_skip(s)
kit = oracle.kit_or_skip(s)

# ---------------------------------------------------------------- recorded literals (computed once with
# the kit, llama.cpp b11669 on libggml-cpu-haswell; a change means the kit changed)

# ggml_vec_dot_f16 over n = 67 (two 32-wide SIMD steps and a tail of 3): x[i] = f16((i+1)/3), y[i] = f16(1/(i+2))
VEC_DOT_F16_BITS = 0x41a881d0  # 21.063385009765625
# sha256 of dequantize(quantize(row)) (ggml_quantize_chunk, then to_float) of the row r[i] = ((37 i) % 101 - 50) / 7
ROUNDTRIP_SHA = {
    "q8_0": "bcae8f43eed27da978b08442e219cb8c79a39c93d5476a0a8228c0a88212251b",
    "q1_0": "59ef50d4748eb215095c08199984aaf87ffb8bb155fe3476f90f66b45c75a3c2",
    "q2_0": "7d1f0372eff1d4db4960902bc5d70bb57886363fd91c23458f4acca5e2f40bed",
}
# sha256 of the CPU backend's from_float of that row into Q8_0 (how mul_mat quantizes activations)
Q8_0_CPU_SHA = "add22c666b61d4c4ef07b9dae8d4821e57c85cb3cd1f85b7e28c2938d40db3cb"
# llama-server /completion on stories260K: "Once upon a time", temperature 0, 8 tokens
STORIES_SHA256 = "270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d"  # ../shared/models/SOURCES.md
STORIES_ANSWER = ", there was a little girl"


def f16s(vals):
    return struct.pack(f"<{len(vals)}e", *vals)


def f32s(vals):
    return struct.pack(f"<{len(vals)}f", *vals)


def floats(b):
    return list(struct.unpack(f"<{len(b) // 4}f", b))


def bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


# ---------------------------------------------------------------- (b) in-process ggml

def ggml_tests():
    try:
        g = oracle.Ggml(kit)
    except Exception as e:
        s.fail("build/ggml-oracle builds", str(e))
        return
    s.ok("build/ggml-oracle builds")
    try:
        ggml_checks(g)
    finally:
        g.close()


def ggml_checks(g):
    n = 67
    x = f16s([(i + 1) / 3 for i in range(n)])
    y = f16s([1 / (i + 2) for i in range(n)])
    got = floats(g("vec_dot", "f16", n, x, y))
    exact = sum(struct.unpack("<e", x[2 * i:2 * i + 2])[0] * struct.unpack("<e", y[2 * i:2 * i + 2])[0]
                for i in range(n))
    s.check("vec_dot f16 n=67 near the exact sum", len(got) == 1 and abs(got[0] - exact) < 1e-4 * abs(exact),
            f"got {got}, exact {exact}")
    if VEC_DOT_F16_BITS is None:
        s.fail("vec_dot f16 n=67 bits", f"no literal recorded; the kit gives 0x{bits(got[0]):08x} ({got[0]!r})")
    else:
        s.equal("vec_dot f16 n=67 bits", f"0x{bits(got[0]):08x}", f"0x{VEC_DOT_F16_BITS:08x}")

    row = f32s([((37 * i) % 101 - 50) / 7 for i in range(256)])
    for t, want in ROUNDTRIP_SHA.items():
        q = g("quantize", t, 256, row)
        back = g("dequantize", t, 256, q)
        h = hashlib.sha256(back).hexdigest()
        if want is None:
            s.fail(f"{t} dequantize(quantize(row)) sha256", f"no literal recorded; the kit gives {h}")
        else:
            s.equal(f"{t} dequantize(quantize(row)) sha256", h, want)
    qc = g("quantize_cpu", "q8_0", 256, row)
    h = hashlib.sha256(qc).hexdigest()
    if Q8_0_CPU_SHA is None:
        s.fail("q8_0 CPU from_float sha256", f"no literal recorded; the kit gives {h}")
    else:
        s.equal("q8_0 CPU from_float sha256", h, Q8_0_CPU_SHA)

    # mul_mat through a graph: one column is each row's vec_dot with the activation quantized by the CPU
    # backend's from_float (no repacking of these types on AVX2); threads do not change a one-column result
    K, M = 256, 7
    w = f32s([(((i * 7919) % 211) - 105) / 97 for i in range(K * M)])
    xs = [f32s([(((i * 104729 + c * 31) % 193) - 96) / 61 for i in range(K)]) for c in range(3)]
    for t in ("f32", "f16", "bf16", "q8_0", "q1_0", "q2_0"):
        wq = g("quantize", t, K, w)
        one = g("mul_mat", t, K, wq, xs[0])
        vdt = {"f32": "f32", "f16": "f16", "bf16": "bf16"}.get(t, "q8_0")
        xq = g("quantize_cpu", vdt, K, xs[0])
        dots = g("vec_dot", t, K, wq, xq)
        s.equal(f"mul_mat {t} one column == vec_dot rows (bits)", one.hex(), dots.hex())
        two = g("mul_mat", t, K, wq, xs[0], threads=2)
        s.equal(f"mul_mat {t} one column, -t 1 == -t 2 (bits)", two.hex(), one.hex())
        # many columns (a prompt batch): each column has the bits of its one-column product (measured
        # on this kit for these types; bankml's prefill may rely on it)
        many = g("mul_mat", t, K, wq, b"".join(xs), threads=2)
        cols = [g("mul_mat", t, K, wq, xc) for xc in xs]
        s.equal(f"mul_mat {t} three columns == three single columns (bits)", many.hex(), b"".join(cols).hex())

    # rms_norm: close to the float64 value; rope_ext at position 0 is the identity, bit for bit
    r = floats(g("rms_norm", 256, "1e-5", row))
    v = floats(row)
    scale = 1 / math.sqrt(sum(a * a for a in v) / 256 + 1e-5)
    s.check("rms_norm near float64", max(abs(a - b * scale) for a, b in zip(r, v)) < 1e-5)
    q = f32s([((i * 13) % 29 - 14) / 5 for i in range(64 * 4 * 2)])
    pos = struct.pack("<2i", 0, 5)
    for mode in (0, 2):
        ro = g("rope_ext", 64, 4, mode, "1000000", q, pos)
        s.check(f"rope_ext mode {mode}: position 0 unchanged (bits)", ro[:64 * 4 * 4] == q[:64 * 4 * 4])
        s.check(f"rope_ext mode {mode}: position 5 rotated", ro[64 * 4 * 4:] != q[64 * 4 * 4:])
    gate, up = f32s(v[:128]), f32s(v[128:])
    sw = floats(g("swiglu", 128, gate, up))
    want = [a / (1 + math.exp(-a)) * b for a, b in zip(v[:128], v[128:])]
    s.check("swiglu near float64", max(abs(a - b) for a, b in zip(sw, want)) < 1e-4)
    # soft_max_ext over 5 keys, 3 tokens, 2 heads with a causal mask: masked entries are 0, rows sum to 1
    mask = f16s([0.0 if j <= t + 2 else -math.inf for t in range(3) for j in range(5)])
    sm = floats(g("soft_max", 5, 3, "0.125", f32s(v[:30]), mask))
    rows = [sm[i * 5:(i + 1) * 5] for i in range(6)]
    s.check("soft_max masked entries are 0", all(rw[j] == 0.0 for i, rw in enumerate(rows)
                                                 for j in range(5) if j > i % 3 + 2))
    s.check("soft_max rows sum to 1", all(abs(sum(rw) - 1) < 1e-6 for rw in rows))
    # flash_attn_ext with one key: the answer is that key's value (softmax of one score is 1), exactly
    D, H, HKV = 64, 4, 2
    fq = f32s(v[:D * H])
    kv_k = f16s([x / 4 for x in v[:D * HKV]])
    kv_v = f16s([x / 8 for x in v[D * HKV:2 * D * HKV]])
    fa = floats(g("flash_attn_ext", D, H, HKV, "0.125", fq, kv_k, kv_v, f16s([0.0]), threads=2))
    vv = list(struct.unpack(f"<{D * HKV}e", kv_v))
    want = [vv[(h // (H // HKV)) * D + d] for h in range(H) for d in range(D)]
    s.check("flash_attn_ext one key == its value (bits)", fa == want)
    # one query token: from 512 keys on, the CPU backend splits the keys across threads and reduces the
    # partial sums (split-KV), so the bits depend on the thread count; below 512 they do not
    for nkv, differs in ((511, False), (512, True)):
        fk = f16s([((i * 7) % 23 - 11) / 9 for i in range(D * HKV * nkv)])
        fv = f16s([((i * 5) % 19 - 9) / 7 for i in range(D * HKV * nkv)])
        fm = f16s([0.0] * nkv)
        a1 = g("flash_attn_ext", D, H, HKV, "0.125", fq, fk, fv, fm, threads=1)
        a2 = g("flash_attn_ext", D, H, HKV, "0.125", fq, fk, fv, fm, threads=2)
        s.check(f"flash_attn_ext 1 token, {nkv} keys: -t 1 and -t 2 {'differ' if differs else 'agree'}",
                (a1 != a2) == differs)


# ---------------------------------------------------------------- (c) model files

def model_tests(models):
    listed = oracle.model_list()
    bad = []
    for want, name in listed:
        path = os.path.join(models, name)
        got = oracle.sha256_file(path) if os.path.exists(path) else "missing"
        if got != want:
            bad.append(f"{name}: {got}, want {want}")
    s.check(f"{len(listed)} generated models match testing/models.sha256", not bad, "; ".join(bad))
    s.equal("stories260K.gguf sha256", oracle.sha256_file(os.path.join(shared, "models", "stories260K.gguf")),
            STORIES_SHA256)
    # regenerate one model of each graph (llama, qwen3: all six types) into a temporary folder
    tmp = tempfile.mkdtemp(prefix="bankml-models-")
    try:
        t0 = time.time()
        p = subprocess.run([kit.tool("gguf-py"), os.path.join(oracle.HERE, "make_models.py"), "--kit", kit.bin,
                            "--shared", shared, "--only", "llama-e200-odd", "--only", "qwen3-e128", tmp],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
        if not s.check("regenerate llama-e200-odd and qwen3-e128", p.returncode == 0, p.stdout[-2000:]):
            return
        want = dict((n, h) for h, n in listed)
        names = sorted(f for f in os.listdir(tmp) if f.endswith(".gguf"))
        diffs = [f for f in names if oracle.sha256_file(os.path.join(tmp, f)) != want.get(f)]
        s.check(f"regenerated {len(names)} files are byte-identical ({time.time() - t0:.0f} s)",
                len(names) == 9 and not diffs, f"differ: {diffs}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ---------------------------------------------------------------- (a) llama-server answers

CHAT = {"messages": [{"role": "user", "content": "Hello! Who are you?"}], "temperature": 0, "max_tokens": 8}


def chat_one(path):
    """Starts llama-server on one model, asks one chat, stops it: (name, record or error text, seconds)."""
    name = os.path.basename(path)
    t0 = time.time()
    try:
        with oracle.Server.llama(kit, path, ctx=256) as srv:
            status, body = srv.post("/v1/chat/completions", CHAT)
            if status != 200:
                return name, f"status {status}: {oracle.short(body, 300)}", time.time() - t0
            ch = body["choices"][0]
            rec = {"model": name, "content": ch["message"]["content"], "finish_reason": ch["finish_reason"],
                   "usage": {k: body["usage"][k] for k in ("prompt_tokens", "completion_tokens")}}
            return name, rec, time.time() - t0
    except Exception as e:
        return name, f"{type(e).__name__}: {e}", time.time() - t0


def server_tests(models):
    paths = [os.path.join(models, n) for _, n in oracle.model_list()]
    records = []
    t0 = time.time()
    # two servers at a time: startup (vocabulary loading) is single-threaded
    with ThreadPoolExecutor(max_workers=2) as pool:
        for name, rec, secs in pool.map(chat_one, paths):
            if isinstance(rec, str):
                s.fail(f"chat {name}", rec)
                continue
            u = rec["usage"]
            ok = (isinstance(rec["content"], str) and rec["finish_reason"] in ("length", "stop")
                  and 1 <= u["completion_tokens"] <= 8 and u["prompt_tokens"] > 5)
            s.check(f"chat {name} ({secs:.1f} s)", ok, oracle.short(rec, 300))
            records.append(rec)
    print(f"  ({len(paths)} servers in {time.time() - t0:.1f} s)")
    oracle.write_jsonl(os.path.join(oracle.LOG_DIR, "kit-chat.jsonl"), records)

    stories = os.path.join(shared, "models", "stories260K.gguf")
    try:
        with oracle.Server.llama(kit, stories, ctx=256) as srv:
            status, body = srv.post("/completion", {"prompt": "Once upon a time", "n_predict": 8,
                                                    "temperature": 0})
            content = body.get("content") if isinstance(body, dict) else None
            if STORIES_ANSWER is None:
                s.fail("stories260K /completion", f"no literal recorded; the kit gives {content!r}")
            else:
                s.equal("stories260K /completion", [status, content], [200, STORIES_ANSWER])
            # the same request streamed: the `data:` events' pieces make the same text
            status, events = srv.stream("/completion", {"prompt": "Once upon a time", "n_predict": 8,
                                                        "temperature": 0, "stream": True})
            text = "".join(e.get("content", "") for e in events if isinstance(e, dict))
            s.equal("stories260K /completion streamed", [status, text], [200, content])
    except Exception as e:
        s.fail("stories260K /completion", f"{type(e).__name__}: {e}")


def dump_tests():
    """build/kit-llama-dump writes the same last-position logits as llama-debug --save-logits (two routes
    into libllama agree bit for bit) and one file per graph tensor."""
    p = subprocess.run(["make", "-s", "build/kit-llama-dump"], cwd=oracle.ROOT, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, errors="replace")
    if not s.check("build/kit-llama-dump builds", p.returncode == 0, p.stdout[-2000:]):
        return
    stories = os.path.join(shared, "models", "stories260K.gguf")
    tmp = tempfile.mkdtemp(prefix="bankml-dump-")
    try:
        p = subprocess.run([kit.tool("llama-debug"), "-m", stories, "-p", "Once upon a time", "-t", "2",
                            "--save-logits", "--logits-output-dir", tmp], cwd=tmp, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, errors="replace")
        toks = os.path.join(tmp, "llamacpp-stories260K-tokens.bin")
        if not s.check("llama-debug --save-logits", p.returncode == 0 and os.path.exists(toks), p.stdout[-1500:]):
            return
        out = os.path.join(tmp, "dump")
        p = subprocess.run([kit.tool("sid-run"), os.path.join(oracle.ROOT, "build", "kit-llama-dump"), "-n", "1",
                            stories, toks, out], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           errors="replace")
        if not s.check("kit-llama-dump stories260K", p.returncode == 0, p.stdout[-1500:]):
            return
        with open(os.path.join(tmp, "llamacpp-stories260K.bin"), "rb") as f:
            want = f.read()
        with open(os.path.join(out, "step0", "logits.f32"), "rb") as f:
            got = f.read()
        s.check("kit-llama-dump logits == llama-debug logits (bits)", got == want and len(got) == 512 * 4,
                f"{len(got)} vs {len(want)} bytes")
        with open(os.path.join(out, "step1", "index.txt")) as f:
            index = [line.split() for line in f]
        names = [r[1] for r in index]
        s.check("kit-llama-dump step1 has every layer's output", all(f"l_out-{i}" in names for i in range(5))
                and "result_output" in names, f"{len(names)} tensors")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ggml_tests()
    dump_tests()
    models = oracle.ensure_models(s)
    model_tests(models)
    server_tests(models)
    s.finish()


main()
