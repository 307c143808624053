#!/usr/bin/env python3
"""oracle_sampler.py -- bankml's sampler (src/sampling/sampler.c) against llama.cpp b11669.

Three parts, one count line:
  1. chain: testing/kit_sampler.c builds llama-server's default chain with libllama's own
     llama_sampler_init_* and bankml's from the same parameters; identical logits (9 shapes, vocabularies
     of 2 to 151,936 tokens) and histories; every draw and every candidate the chain leaves (ids, logit
     and probability bits, order, the sorted flag) must agree. VARIANTS x 4 histories, one test each.
  2. refusals and resolution: llama-server on stories260K answers POST /completion for bad and odd
     sampling fields; bankml's sampler_resolve must refuse with the same message, and for accepted
     requests resolve the same values as llama-server's generation_settings (float bits).
  3. end to end: stories260K through libllama in-process, drawn by bankml's sampler, against
     llama-server's /completion with the same seed: identical tokens and logprobs (float bits), raw
     n_probs and post_sampling_probs.

Prints `N passed, N failed, N skipped`; exits 1 on a failure.
"""
import json, os, shutil, struct, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle

ROOT = oracle.ROOT
EXE = os.path.join(ROOT, "build", "kit-sampler")

NEUTRAL = {"top_k": 0, "top_p": 1.0, "min_p": 0.0, "temperature": 1.0}


def N(**kw):
    """a variant with every truncating sampler off, so the one under test acts alone"""
    d = dict(NEUTRAL)
    d.update(kw)
    return d


# (name, request fields, vocabulary size, logit shape)
VARIANTS = [
    ("default", {}, 151936, "normal"),
    ("default-ties", {}, 151936, "ties"),
    ("default-onebit", {}, 151936, "onebit"),
    ("default-wide", {}, 151936, "wide"),
    ("default-small", {}, 300, "normal"),
    ("default-2tok", {}, 2, "normal"),
    ("greedy", {"temperature": 0}, 151936, "normal"),
    ("greedy-ties", {"temperature": 0}, 4096, "ties"),
    ("greedy-flat", {"temperature": 0}, 1000, "flat"),
    ("temp-0.3", {"temperature": 0.3}, 32000, "normal"),
    ("temp-1.5", {"temperature": 1.5}, 32000, "normal"),
    ("temp-100", N(temperature=100), 4096, "normal"),
    ("temp-1e-3", N(temperature=1e-3), 4096, "tiny"),
    ("temp-alone-1.7", N(temperature=1.7), 151936, "wide"),
    ("neutral", N(), 151936, "normal"),
    ("neutral-neginf", N(), 32000, "neginf"),
]
for k in (1, 2, 40, 128, 129, 1000, 151935, 151936, 200000):
    VARIANTS.append((f"top-k-{k}", N(top_k=k), 151936, "normal" if k % 2 else "ties"))
VARIANTS.append(("top-k-1-flat", N(top_k=1), 1000, "flat"))
VARIANTS.append(("top-k-129-onebit", N(top_k=129), 151936, "onebit"))
for p in (0.0, 0.1, 0.5, 0.9, 0.95, 0.999):
    VARIANTS.append((f"top-p-{p}", N(top_p=p), 151936, "normal"))
VARIANTS += [
    ("top-p-0.9-small", N(top_p=0.9), 1000, "ties"),
    ("top-p-0.99-wide", N(top_p=0.99), 151936, "wide"),
    ("top-p-0.999999-flat", N(top_p=0.999999), 2000, "flat"),
    ("top-p-after-k", N(top_k=40, top_p=0.5), 151936, "normal"),
    ("top-p-min-keep-5", N(top_p=0.1, min_keep=5), 151936, "peaked"),
    ("top-p-min-keep-300", N(top_p=0.5, min_keep=300), 151936, "normal"),
]
for p in (0.01, 0.05, 0.2, 0.9, 1.0):
    VARIANTS.append((f"min-p-{p}", N(min_p=p), 151936, "normal"))
VARIANTS += [
    ("min-p-keep-3", N(min_p=0.9, min_keep=3), 151936, "peaked"),
    ("min-p-keep-1000", N(min_p=0.5, min_keep=1000), 151936, "normal"),
    ("min-p-sorted", N(top_k=50, min_p=0.3), 151936, "normal"),
    ("min-p-neginf", N(min_p=0.1), 4096, "neginf"),
]
for p in (0.0, 0.2, 0.5, 0.9, 0.99):
    VARIANTS.append((f"typical-{p}", N(typical_p=p), 4096 if p < 0.9 else 151936, "normal"))
VARIANTS += [
    ("typical-onebit", N(typical_p=0.7), 2000, "onebit"),
    ("typical-keep-2", N(typical_p=0.1, min_keep=2), 4096, "peaked"),
    ("typical-after-k", N(top_k=100, typical_p=0.6), 151936, "ties"),
    ("typical-neginf", N(typical_p=0.8), 3000, "neginf"),
]
for n in (0.5, 1.0, 2.0, 3.0):
    VARIANTS.append((f"top-n-sigma-{n}", N(top_n_sigma=n), 151936, "normal" if n != 2.0 else "neginf"))
VARIANTS += [
    ("top-n-sigma-flat", N(top_n_sigma=1.0), 500, "flat"),
    ("top-n-sigma-default-chain", {"top_n_sigma": 1.5}, 151936, "wide"),
    ("xtc-1-0.1", N(xtc_probability=1.0, xtc_threshold=0.1), 4096, "peaked"),
    ("xtc-0.5-0.05", N(xtc_probability=0.5, xtc_threshold=0.05), 4096, "wide"),
    ("xtc-1-0.5", N(xtc_probability=1.0, xtc_threshold=0.5), 1000, "peaked"),
    ("xtc-off-0.51", N(xtc_probability=1.0, xtc_threshold=0.51), 1000, "peaked"),
    ("xtc-keep-4000", N(xtc_probability=1.0, xtc_threshold=0.01, min_keep=4000), 4096, "wide"),
    ("xtc-default-chain", {"xtc_probability": 0.7, "xtc_threshold": 0.1}, 151936, "peaked"),
    ("xtc-big", N(xtc_probability=0.9, xtc_threshold=0.001), 151936, "wide"),
    ("dynatemp-0.5", {"dynatemp_range": 0.5}, 151936, "normal"),
    ("dynatemp-2-exp-0.5", N(dynatemp_range=2.0, dynatemp_exponent=0.5), 4096, "normal"),
    ("dynatemp-0.8-exp-2", {"temperature": 0.5, "dynatemp_range": 0.8, "dynatemp_exponent": 2.0}, 32000, "wide"),
    ("dynatemp-temp-0", {"temperature": 0.0, "dynatemp_range": 1.0}, 4096, "ties"),
    ("dynatemp-flat", N(dynatemp_range=0.3), 300, "flat"),
    ("dynatemp-large", N(dynatemp_range=0.7, dynatemp_exponent=1.3), 151936, "normal"),
    ("pen-repeat-1.1", {"repeat_penalty": 1.1}, 300, "repeat"),
    ("pen-repeat-1.5", {"repeat_penalty": 1.5}, 151936, "repeat"),
    ("pen-repeat-0.8", {"repeat_penalty": 0.8}, 300, "repeat"),
    ("pen-repeat-1e30", N(repeat_penalty=1e30), 300, "repeat"),
    ("pen-freq", {"frequency_penalty": 0.5}, 300, "repeat"),
    ("pen-freq-neg", {"frequency_penalty": -0.5}, 300, "repeat"),
    ("pen-presence", {"presence_penalty": 1.0}, 300, "repeat"),
    ("pen-presence-neg", {"presence_penalty": -1.0}, 300, "repeat"),
    ("pen-all", {"repeat_penalty": 1.2, "frequency_penalty": 0.3, "presence_penalty": 0.4}, 151936, "repeat"),
    ("pen-last-1", {"repeat_penalty": 1.5, "repeat_last_n": 1}, 300, "repeat"),
    ("pen-last-8", {"repeat_penalty": 1.5, "repeat_last_n": 8}, 300, "repeat"),
    ("pen-last-0", {"repeat_penalty": 1.5, "repeat_last_n": 0}, 300, "repeat"),
    ("pen-last-100000", N(repeat_penalty=1.3, repeat_last_n=100000, presence_penalty=0.2), 300, "repeat"),
    ("pen-neutral-1.0", {"repeat_penalty": 1.0, "repeat_last_n": 16}, 300, "repeat"),
    ("dry", {"dry_multiplier": 0.8}, 151936, "repeat"),
    ("dry-allowed-0", {"dry_multiplier": 0.8, "dry_allowed_length": 0}, 151936, "repeat"),
    ("dry-allowed-1", {"dry_multiplier": 1.0, "dry_allowed_length": 1}, 151936, "repeat"),
    ("dry-allowed-4", {"dry_multiplier": 2.0, "dry_allowed_length": 4}, 151936, "repeat"),
    ("dry-base-1", {"dry_multiplier": 0.8, "dry_base": 1.0}, 151936, "repeat"),
    ("dry-base-3", {"dry_multiplier": 0.5, "dry_base": 3.0}, 151936, "repeat"),
    ("dry-base-100", N(dry_multiplier=0.5, dry_base=100.0, dry_allowed_length=1), 151936, "repeat"),
    ("dry-base-below-1", {"dry_multiplier": 0.8, "dry_base": 0.5}, 151936, "repeat"),
    ("dry-last-8", {"dry_multiplier": 0.8, "dry_penalty_last_n": 8}, 151936, "repeat"),
    ("dry-last-0", {"dry_multiplier": 0.8, "dry_penalty_last_n": 0}, 151936, "repeat"),
    ("dry-neg-mult", N(dry_multiplier=-0.5, dry_allowed_length=1), 151936, "repeat"),
    ("dry-breakers-nl-the", {"dry_multiplier": 0.8, "dry_sequence_breakers": ["\n", "the"]}, 151936, "repeat"),
    ("dry-breakers-multi", {"dry_multiplier": 0.8, "dry_sequence_breakers": [" a", "xyz", "ing the"]}, 151936, "repeat"),
    ("dry-breakers-long", {"dry_multiplier": 0.8, "dry_sequence_breakers": ["a" * 50, ":"]}, 151936, "repeat"),
    ("dry-breakers-empty-str", {"dry_multiplier": 0.8, "dry_sequence_breakers": ["", "*"]}, 151936, "repeat"),
    ("dry-small-vocab", {"dry_multiplier": 0.8, "dry_allowed_length": 1}, 300, "repeat"),
    ("dry-pen", {"dry_multiplier": 0.8, "repeat_penalty": 1.2, "presence_penalty": 0.3}, 151936, "repeat"),
    ("all-on", {"repeat_penalty": 1.1, "frequency_penalty": 0.1, "presence_penalty": 0.1, "dry_multiplier": 0.5,
                "top_n_sigma": 2.0, "top_k": 100, "typical_p": 0.9, "top_p": 0.9, "min_p": 0.02,
                "xtc_probability": 0.5, "xtc_threshold": 0.1, "dynatemp_range": 0.3, "temperature": 0.9},
     151936, "repeat"),
    ("all-on-keep", {"repeat_penalty": 1.1, "dry_multiplier": 0.5, "top_n_sigma": 3.0, "top_k": 0, "typical_p": 0.95,
                     "top_p": 0.8, "min_p": 0.05, "xtc_probability": 1.0, "xtc_threshold": 0.05, "min_keep": 3},
     32000, "wide"),
    ("typ-top-p-min-p", N(typical_p=0.9, top_p=0.9, min_p=0.05), 151936, "normal"),
    ("typ-xtc-dyn", N(typical_p=0.8, xtc_probability=1.0, xtc_threshold=0.05, dynatemp_range=0.5), 4096, "wide"),
    ("k-p-m-t", {"top_k": 20, "top_p": 0.85, "min_p": 0.0, "temperature": 0.5}, 151936, "normal"),
    ("sigma-k-greedy", {"top_n_sigma": 1.0, "temperature": 0.0}, 151936, "ties"),
    ("min-keep-100000", {"min_keep": 100000}, 151936, "normal"),
    ("min-keep-1", {"min_keep": 1, "top_p": 0.0}, 151936, "normal"),
    ("seed-0", {"seed": 0}, 151936, "normal"),
    ("seed-max-1", {"seed": 4294967294}, 151936, "normal"),
    ("seed-12345-flat", {"seed": 12345}, 151936, "flat"),
    ("tiny-logits", {}, 151936, "tiny"),
    ("neginf-default", {}, 151936, "neginf"),
    ("top-k-1-dyn", {"top_k": 1, "dynatemp_range": 0.5}, 4096, "normal"),
    ("samplers-default-names", {"samplers": ["penalties", "dry", "top_n_sigma", "top_k", "typ_p", "top_p", "min_p",
                                             "xtc", "temperature"]}, 4096, "normal"),
    ("samplers-default-chars", {"samplers": "edskypmxt"}, 4096, "normal"),
]

# histories: none; a short prompt; a repeating pattern; a long one with DRY's breakers (qwen2: 198 "\n",
# 25 ":", 1 '"', 9 "*")
HISTORIES = [
    [],
    [1, 40, 1050, 278, 3403, 11],
    [100, 200, 300, 400, 100, 200, 300, 400, 100, 200, 300],
    ([264, 3974, 13876, 25, 198] * 6 + [1, 9, 42, 42, 42, 1532, 264, 3974, 13876, 25] * 5
     + [17, 18, 19, 20, 17, 18, 19] * 10)[:160],
]


def chain_cases():
    cases = []
    for vi, (name, params, nv, dist) in enumerate(VARIANTS):
        for hi, hist in enumerate(HISTORIES):
            p = dict(params)
            p.setdefault("seed", 1000 + 7 * vi + hi)
            shape = dist if hi % 2 == 0 or dist == "repeat" else ["normal", "ties", "wide", "onebit"][vi % 4]
            cases.append({"name": f"{name}/h{hi}", "params": p, "n_vocab": nv, "dist": shape,
                          "steps": 6 if nv > 50000 else 12, "hist": [t % nv for t in hist],
                          "seed": 31 * vi + hi})
    return cases


# requests llama-server refuses (message compared) or resolves (generation_settings compared)
REQUESTS = [
    {"top_k": "x"}, {"top_p": "0.5"}, {"min_p": [1]}, {"temperature": "hot"}, {"top_n_sigma": {}},
    {"repeat_last_n": -1}, {"repeat_last_n": -2.5}, {"dry_allowed_length": -1}, {"dry_penalty_last_n": -1},
    {"min_keep": -1}, {"min_keep": 1e10}, {"repeat_penalty": 0}, {"repeat_penalty": -1},
    {"repeat_penalty": 1e-39}, {"dry_sequence_breakers": []}, {"dry_sequence_breakers": "x"},
    {"dry_sequence_breakers": [1]}, {"dry_sequence_breakers": ["a", 2]}, {"seed": "a"}, {"dry_base": "a"},
    {"xtc_probability": "a"}, {"n_probs": "3"}, {"logprobs": "3"}, {"adaptive_decay": 1.0},
    {"adaptive_decay": -0.5}, {"post_sampling_probs": 1}, {"samplers": ["top_k", 3]},
    {"typical_p": True, "dry_multiplier": "x"},
    # accepted: values compared with generation_settings
    {"top_k": -1}, {"top_k": 1.5}, {"top_k": 1e12}, {"top_k": 4294967336}, {"top_p": True}, {"top_p": 2},
    {"min_p": -1}, {"temperature": -1}, {"temperature": 1e39}, {"xtc_probability": 7, "xtc_threshold": -3},
    {"frequency_penalty": 1e39}, {"presence_penalty": -1e39}, {"repeat_penalty": 1e39},
    {"typical_p": None, "top_n_sigma": 2.5}, {"seed": -1}, {"seed": -1.5}, {"seed": 4294967297},
    {"seed": 1e20}, {"n_probs": -3}, {"n_probs": 2, "logprobs": 3}, {"logprobs": 4}, {"logprobs": True},
    {"dry_base": 0.5}, {"dry_base": 1e39}, {"dry_multiplier": 0.8, "dry_sequence_breakers": ["a", "bc"]},
    {"dynatemp_range": 0.3, "dynatemp_exponent": -2}, {"repeat_last_n": 2147483647}, {"mirostat": -4},
    {"min_keep": 3.99}, {"post_sampling_probs": True}, {"samplers": "edskypmxt"},
    {"repeat_penalty": 1.0000001}, {"temperature": 0.1234567891}, {"top_p": 1e-46},
]

# bankml's own refusals (llama-server runs these; bankml does not reproduce them)
OWN_REFUSALS = [
    ({"mirostat": 1}, "mirostat: not reproduced; bankML reproduces llama-server's default sampler chain"),
    ({"mirostat": 7}, "mirostat: not reproduced; bankML reproduces llama-server's default sampler chain"),
    ({"samplers": ["top_k", "temperature"]}, "samplers: a custom sampler order is not reproduced; bankML runs "
     "llama-server's default order (penalties, dry, top-n-σ, top-k, typical-p, top-p, min-p, xtc, temperature)"),
    ({"samplers": "kt"}, "samplers: a custom sampler order is not reproduced; bankML runs "
     "llama-server's default order (penalties, dry, top-n-σ, top-k, typical-p, top-p, min-p, xtc, temperature)"),
]

# end to end on stories260K: (name, /completion fields)
E2E = [
    ("default-probs", {"prompt": "Once upon a time", "n_predict": 24, "seed": 5, "n_probs": 5}),
    ("greedy-probs", {"prompt": "The little dog", "n_predict": 20, "seed": 1, "temperature": 0, "n_probs": 3}),
    ("hot-probs-all", {"prompt": "Lily saw a", "n_predict": 20, "seed": 9, "temperature": 1.5, "n_probs": 600}),
    ("penalties-prompt", {"prompt": "Tom and Tom and Tom and", "n_predict": 24, "seed": 3, "repeat_penalty": 1.5,
                          "frequency_penalty": 0.5, "presence_penalty": 0.5, "n_probs": 4}),
    ("dry", {"prompt": "the cat sat on the mat. the cat sat on the", "n_predict": 24, "seed": 4,
             "dry_multiplier": 1.0, "dry_allowed_length": 1, "n_probs": 2}),
    ("typical-xtc", {"prompt": "One day", "n_predict": 24, "seed": 11, "typical_p": 0.7, "xtc_probability": 0.9,
                     "xtc_threshold": 0.05, "n_probs": 3}),
    ("dynatemp-sigma", {"prompt": "She was very", "n_predict": 24, "seed": 12, "dynatemp_range": 0.6,
                        "top_n_sigma": 1.5, "n_probs": 3}),
    ("top-k-1", {"prompt": "Once upon a time", "n_predict": 16, "seed": 13, "top_k": 1, "n_probs": 1}),
    ("post-probs", {"prompt": "Once upon a time", "n_predict": 20, "seed": 14, "n_probs": 5,
                    "post_sampling_probs": True}),
    ("post-probs-xtc", {"prompt": "The sun", "n_predict": 20, "seed": 15, "n_probs": 10, "xtc_probability": 1.0,
                        "xtc_threshold": 0.05, "post_sampling_probs": True}),
    ("logprobs-alias", {"prompt": "He wanted to", "n_predict": 16, "seed": 16, "logprobs": 3, "top_p": 0.5}),
    ("no-probs", {"prompt": "A big", "n_predict": 24, "seed": 17, "min_p": 0.2, "temperature": 1.2}),
]


def run_kit(kit, *args, timeout=300):
    p = subprocess.run([kit.tool("sid-run"), EXE, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, errors="replace", timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"kit-sampler {args[0]}: {p.stderr.strip()[-2000:] or 'exit %d' % p.returncode}")
    return p.stdout


def build(kit):
    src = [os.path.join(ROOT, f) for f in ("testing/kit_sampler.c", "src/sampling/sampler.c", "src/base/json.c", "src/base/base.c")]
    if os.path.exists(EXE) and all(os.path.getmtime(EXE) >= os.path.getmtime(f)
                                   for f in src + [os.path.join(ROOT, "src/sampling/sampler.h")]):
        return
    os.makedirs(os.path.dirname(EXE), exist_ok=True)
    cmd = [os.environ.get("CC", "gcc"), "-std=gnu11", "-D_GNU_SOURCE", "-DSAMPLER_NO_GGUF", "-O2", "-Wall",
           "-Wextra", "-Werror", "-I" + os.path.join(ROOT, "src"), "-I" + kit.include, "-o", EXE, *src,
           "-L" + kit.lib, "-l:libllama.so.0", "-l:libggml.so.0", "-l:libggml-base.so.0", "-lm",
           "-Wl,--allow-shlib-undefined"]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        raise RuntimeError("building kit-sampler failed:\n" + p.stdout[-3000:])


def f32(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


FLOAT_FIELDS = ["temperature", "top_p", "min_p", "top_n_sigma", "xtc_probability", "xtc_threshold", "typical_p",
                "dynatemp_range", "dynatemp_exponent", "repeat_penalty", "frequency_penalty", "presence_penalty",
                "dry_multiplier", "dry_base"]
INT_FIELDS = ["seed", "top_k", "n_probs", "min_keep", "repeat_last_n", "dry_allowed_length", "dry_penalty_last_n",
              "mirostat"]


def main():
    s = oracle.Suite("oracle_sampler")
    kit = oracle.kit_or_skip(s)
    shared = oracle.shared_or_skip(s)
    vocab = os.path.join(shared, "vocab", "ggml-vocab-qwen2.gguf")
    model = os.path.join(shared, "models", "stories260K.gguf")
    try:
        build(kit)
    except RuntimeError as e:
        s.fail("build kit-sampler", str(e))
        s.finish()
    tmp = tempfile.mkdtemp(prefix="oracle-sampler-")

    # 1. the chain, in process
    cases = chain_cases()
    path = os.path.join(tmp, "chain.jsonl")
    oracle.write_jsonl(path, cases)
    if not os.path.exists(vocab):
        s.skip("chain", f"no {vocab}")
    else:
        out = run_kit(kit, "chain", vocab, path, timeout=600)
        seen = set()
        for line in out.splitlines():
            if line.startswith("ok "):
                name = line.split()[1]
                seen.add(name)
                s.ok("chain " + name)
            elif line.startswith("FAIL "):
                name = line.split()[1].rstrip(":")
                seen.add(name)
                s.fail("chain " + name, line[5:])
        for c in cases:
            if c["name"] not in seen:
                s.fail("chain " + c["name"], "no result")
        print(f"chain: {len(VARIANTS)} variants x {len(HISTORIES)} histories = {len(cases)} cases", flush=True)

    # 2. refusals and resolution against llama-server
    reqs = []
    for r in REQUESTS:
        body = {"prompt": "Once", "n_predict": 1, "seed": 1}
        body.update(r)
        reqs.append(body)
    rpath = os.path.join(tmp, "requests.jsonl")
    with open(rpath, "w") as f:
        for r in reqs + [r for r, _ in OWN_REFUSALS]:
            f.write(json.dumps(r) + "\n")
    ours = [json.loads(l) for l in run_kit(kit, "resolve", rpath).splitlines()]
    for (r, msg), got in zip(OWN_REFUSALS, ours[len(reqs):]):
        s.equal(f"own refusal {json.dumps(r)}", got.get("error"), msg)
    e2e_want = {}
    if not os.path.exists(model):
        s.skip("llama-server", f"no {model}")
    else:
        n_refused = 0
        with oracle.Server.llama(kit, model, ctx=256) as srv:
            for r, body, got in zip(REQUESTS, reqs, ours):
                st, b = srv.post("/completion", body)
                name = f"resolve {json.dumps(r)}"
                if st != 200:
                    n_refused += 1
                    want = b.get("error", {}).get("message") if isinstance(b, dict) else b
                    s.equal(name + f" (llama-server {st})", got.get("error"), want)
                    continue
                if "error" in got:
                    s.fail(name, f"bankml refuses ({got['error']}), llama-server answers 200")
                    continue
                gs = b["generation_settings"]
                want = {k: gs[k] for k in INT_FIELDS}
                # nlohmann prints a non-finite float as null
                want.update({k: f32(gs[k]) if gs[k] is not None else "non-finite" for k in FLOAT_FIELDS})
                got = dict(got)
                for k in FLOAT_FIELDS:
                    if got[k] & 0x7f800000 == 0x7f800000:
                        got[k] = "non-finite"
                want["dry_sequence_breakers"] = gs["dry_sequence_breakers"]
                want["post_sampling_probs"] = gs["post_sampling_probs"]
                s.equal(name, {k: got[k] for k in want}, want)
            print(f"refusals: {n_refused} requests refused by llama-server, each compared", flush=True)
            # 3. end to end
            for name, req in E2E:
                body = dict(req)
                body.update({"cache_prompt": False, "return_tokens": True})
                st, b = srv.post("/completion", body)
                e2e_want[name] = (st, b)
        epath = os.path.join(tmp, "e2e.jsonl")
        oracle.write_jsonl(epath, [{"name": n, "request": r, "n_ctx": 256} for n, r in E2E])
        got = {g["name"]: g for g in map(json.loads, run_kit(kit, "e2e", model, epath).splitlines())}
        n_lp = 0
        for name, req in E2E:
            st, b = e2e_want[name]
            g = got.get(name)
            if st != 200 or not g or "error" in g:
                s.fail(f"e2e {name}", f"llama-server {st}: {str(b)[:200]}; bankml {g}")
                continue
            s.equal(f"e2e {name} tokens", g["tokens"], b["tokens"])
            post = req.get("post_sampling_probs", False)
            key, tkey = ("prob", "top_probs") if post else ("logprob", "top_logprobs")
            if "completion_probabilities" in b:
                n_lp += 1
                want = [[e["id"], f32(e[key]), [[t["id"], f32(t[key])] for t in e[tkey]]]
                        for e in b["completion_probabilities"]]
                s.equal(f"e2e {name} {key}s", g["probs"], want)
            else:
                s.equal(f"e2e {name} no probabilities", g["probs"], [])
        print(f"end to end: {len(E2E)} requests, {n_lp} with probabilities", flush=True)
    shutil.rmtree(tmp, ignore_errors=True)
    s.finish()


if __name__ == "__main__":
    main()
