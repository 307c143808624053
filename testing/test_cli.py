#!/usr/bin/env python3
"""Black-box tests of the bankml command line: outputs, messages and exit codes.

Runs ./bankml (or $BANKML_BIN) on synthetic GGUF files written here and on the
real files in ../shared/models. Prints one line per check and, last,
"N passed, N failed, N skipped".
"""
import hashlib, json, os, shutil, struct, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BIN = os.path.abspath(os.path.join(ROOT, os.environ.get("BANKML_BIN", "bankml")))
SHARED = os.environ.get("BANKML_SHARED") or os.path.join(ROOT, "..", "shared")
VERSION = "0.1.0"

counts = {"passed": 0, "failed": 0, "skipped": 0}


def check(name, cond, detail=""):
    if cond:
        counts["passed"] += 1
        print(f"ok   {name}")
    else:
        counts["failed"] += 1
        print(f"FAIL {name}: {detail}")


def skip(name, why):
    counts["skipped"] += 1
    print(f"skip {name}: {why}")


def run(*args, stdin=None):
    p = subprocess.run([BIN, *args], input=stdin, capture_output=True, timeout=120)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def expect(name, args, rc, out=None, err=None, out_prefix=None):
    got_rc, got_out, got_err = run(*args)
    problems = []
    if got_rc != rc:
        problems.append(f"exit {got_rc}, want {rc}")
    if out is not None and got_out != out:
        problems.append(f"stdout {got_out!r}, want {out!r}")
    if out_prefix is not None and not got_out.startswith(out_prefix):
        problems.append(f"stdout {got_out!r} does not start with {out_prefix!r}")
    if err is not None and got_err != err:
        problems.append(f"stderr {got_err!r}, want {err!r}")
    check(name, not problems, "; ".join(problems))
    return got_out


# ---- a small GGUF writer (the §4.5 synthetic builder) ----

def gstr(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def gguf_bytes(name, types, layout=(1, 2), extra_kv=(), n=16384, magic=b"GGUF"):
    """KV general.architecture=qwen3, general.name, general.alignment=32; 1-D tensors of n elements."""
    kv = [("general.architecture", 8, gstr("qwen3")), ("general.name", 8, gstr(name)),
          ("general.alignment", 4, struct.pack("<I", 32))] + list(extra_kv)
    out = bytearray(magic + struct.pack("<IQQ", 3, len(types), len(kv)))
    for k, t, v in kv:
        out += gstr(k) + struct.pack("<I", t) + v
    off = 0
    sizes = []
    for i, t in enumerate(types):
        el, by = layout if (t == 42 or t >= 142) else (1, 2)
        size = n // el * by
        out += gstr(f"t{i}") + struct.pack("<I", 1) + struct.pack("<Q", n) + struct.pack("<IQ", t, off)
        sizes.append(size)
        off += (size + 31) // 32 * 32
    out += b"\0" * ((-len(out)) % 32)
    for s in sizes:
        out += b"\x01" * s + b"\0" * ((-s) % 32)
    return bytes(out)


def main():
    if not os.access(BIN, os.X_OK):
        check("binary exists", False, f"{BIN} is not built")
        return
    tmp = tempfile.mkdtemp(prefix="bankml-cli-")
    try:
        tests(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def write(tmp, name, data):
    p = os.path.join(tmp, name)
    with open(p, "wb") as f:
        f.write(data)
    return p


def tests(tmp):
    # --- version, help, usage ---
    for v in ("version", "--version", "-V"):
        expect(f"version via {v}", [v], 0, out=f"bankml {VERSION}\n", err="")
    out = expect("help exits 0", ["help"], 0)
    check("help lists guard, sha256, pin, verify",
          all(f"bankml {c}" in out for c in ("guard FILE", "sha256 FILE", "pin FILE", "verify FILE")), out)
    rc, out, err = run()
    check("no command: usage on stderr, exit 1", rc == 1 and err.startswith("bankml ") and "usage:" in err, (rc, err))
    rc, out, err = run("frobnicate")
    check("unknown command: exit 1", rc == 1 and err.startswith("bankml: unknown command frobnicate\n"), (rc, err))
    expect("guard without FILE", ["guard"], 1, out="",
           err="bankml guard: missing argument\nusage: bankml guard FILE [--engine mainline|prism] [--json]\n")
    expect("guard with a bad engine", ["guard", "x.gguf", "--engine", "vulkan"], 1, out="",
           err="bankml guard: --engine takes mainline or prism, not vulkan\n"
               "usage: bankml guard FILE [--engine mainline|prism] [--json]\n")
    expect("guard with an unknown option", ["guard", "x.gguf", "--frob"], 1, out="",
           err="bankml guard: unknown option --frob\nusage: bankml guard FILE [--engine mainline|prism] [--json]\n")
    expect("guard --engine without value", ["guard", "x.gguf", "--engine"], 1, out="",
           err="bankml guard: --engine needs a value (mainline|prism)\nusage: bankml guard FILE [--engine mainline|prism] [--json]\n")
    # serve and generate share the one parser: unknown options and stray arguments are errors, never ignored
    rc, out, err = run("serve", "--frob")
    check("serve with an unknown option: exit 1, its usage", rc == 1 and out == "" and
          err.startswith("bankml serve: unknown option --frob\nusage: bankml serve [MODEL] [llama-server's options] "), (rc, err))
    rc, out, err = run("serve", "a.gguf", "b.gguf")
    check("serve with two models: exit 1", rc == 1 and err.startswith("bankml serve: unexpected argument b.gguf\n"),
          (rc, err))
    rc, out, err = run("serve", "--ctx", "x")
    check("serve --ctx x: exit 1 with the range", rc == 1 and
          err.startswith("bankml serve: --ctx takes a whole number from 0 to 16777216, not x\n"), (rc, err))
    rc, out, err = run("generate", "m.gguf", "--tmep", "1")
    check("generate with a misspelt flag: exit 1", rc == 1 and
          err.startswith("bankml generate: unknown option --tmep\nusage: bankml generate MODEL "), (rc, err))
    rc, out, err = run("generate")
    check("generate without MODEL: exit 1", rc == 1 and err.startswith("bankml generate: missing argument\n"),
          (rc, err))
    expect("pin without --fork", ["pin", "x.gguf"], 1, out="",
           err="bankml pin: --fork FORK.json is required\nusage: bankml pin FILE --fork FORK.json [--write]\n")
    expect("verify without --fork", ["verify", "x.gguf"], 1, out="",
           err="bankml verify: --fork FORK.json is required\n"
               "usage: bankml verify FILE --fork FORK.json [--engine mainline|prism] [--json]\n")
    expect("sha256 with two files", ["sha256", "a", "b"], 1, out="",
           err="bankml sha256: unexpected argument b\nusage: bankml sha256 FILE\n")

    # --- guard on synthetic files ---
    q1 = write(tmp, "Bonsai-1.7B.gguf", gguf_bytes("Bonsai-1.7B", [41, 1], (128, 18)))
    expect("guard t1 text", ["guard", q1], 0, out="play F16:1 Q1_0:1\n", err="")
    expect("guard t1 json", ["guard", q1, "--json"], 0, err="",
           out='{"gguf_version": 3, "arch": "qwen3", "name": "Bonsai-1.7B", "tensors": 2, '
               '"types": {"F16": 1, "Q1_0": 1}, "engine": "mainline", "reasons": [], "verdict": "play"}\n')
    legacy = write(tmp, "Ternary-Bonsai-1.7B.gguf", gguf_bytes("Ternary-Bonsai-1.7B", [42, 42], (128, 34)))
    expect("guard t3 legacy Q2_0 refuses", ["guard", legacy], 2, err="",
           out="refuse Q2_0:2\n  - 2 Q2_0 tensors smaller than group-64 layout: legacy group-128 Prism file, "
               "use *-Q2_0_g64.gguf or *-PQ2_0.gguf\n")
    fork = write(tmp, "fork.gguf", gguf_bytes("Bonsai-8B", [142], (128, 34)))
    expect("guard t4 fork type on mainline", ["guard", fork], 2, err="",
           out="refuse PQ2_0:1\n  - PQ2_0/PTQ1_0 are PrismML-fork types; mainline and llama.rn refuse them\n")
    expect("guard t5 fork type on prism", ["guard", fork, "--engine", "prism"], 0, out="play PQ2_0:1\n", err="")
    b2 = write(tmp, "b2.gguf", gguf_bytes("Ternary Bonsai 2 27B", [42], (64, 18)))
    expect("guard t6 Bonsai 2 on mainline", ["guard", b2], 2, err="",
           out="refuse Q2_0:1\n  - Bonsai 2 weights are in a rotated basis and need the fork's Hadamard transform; "
               "mainline loads the Q2_0 band silently and outputs gibberish\n")
    u32 = lambda v: struct.pack("<I", v)
    kvs = [("qwen3.block_count", 4, u32(36)), ("qwen3.attention.head_count_kv", 4, u32(8)),
           ("qwen3.attention.key_length", 4, u32(128))]
    b8 = write(tmp, "Bonsai-8B.gguf", gguf_bytes("Bonsai-8B", [41], (128, 18), kvs))
    out = expect("guard t8 kv bytes", ["guard", b8, "--json"], 0, err="")
    try:
        check("guard t8 kv_f16_bytes_per_token = 147456", json.loads(out)["kv_f16_bytes_per_token"] == 147456, out)
    except ValueError:
        check("guard t8 json parses", False, out)
    whole = gguf_bytes("Bonsai-1.7B", [41, 1], (128, 18))
    trunc = write(tmp, "trunc.gguf", whole[:40])
    out = expect("guard t9 truncated: exit 3", ["guard", trunc, "--json"], 3, err="")
    try:
        j = json.loads(out)
        check("guard t9 need_more shape", list(j) == ["verdict", "bytes_needed"] and j["verdict"] == "need_more"
              and j["bytes_needed"] > 40, out)
    except ValueError:
        check("guard t9 json parses", False, out)
    bad = write(tmp, "bad.gguf", gguf_bytes("x", [0], magic=b"GGUX"))
    expect("guard bad magic", ["guard", bad], 2, out="refuse \n  - not a GGUF file\n", err="")
    expect("guard missing file", ["guard", os.path.join(tmp, "nope.gguf")], 1, out="",
           err=f"bankml guard: cannot read {tmp}/nope.gguf: No such file or directory (os error 2)\n")
    expect("guard on a directory", ["guard", tmp], 1, out_prefix="")

    # --- sha256 ---
    expect("sha256 of a synthetic file", ["sha256", q1], 0, err="",
           out=f"{hashlib.sha256(whole).hexdigest()}  {q1}\n")
    expect("sha256 missing file", ["sha256", os.path.join(tmp, "nope")], 1, out="",
           err=f"bankml sha256: cannot read {tmp}/nope: No such file or directory\n")
    models = os.path.join(SHARED, "models")
    real = sorted(f for f in os.listdir(models) if f.endswith(".gguf")) if os.path.isdir(models) else []
    if not real:
        skip("sha256 equals sha256sum on ../shared/models", "../shared/models is absent")
    if "stories260K.gguf" in real:
        p = os.path.join(models, "stories260K.gguf")
        expect("guard stories260K", ["guard", p], 0, out="play F32:48\n", err="")
        expect("guard stories260K json", ["guard", p, "--json"], 0, err="",
               out='{"gguf_version": 3, "arch": "llama", "name": "llama", "tensors": 48, "types": {"F32": 48}, '
                   '"engine": "mainline", "reasons": [], "kv_f16_bytes_per_token": 640, "verdict": "play"}\n')
    for f in real:
        p = os.path.join(models, f)
        want = subprocess.run(["sha256sum", p], capture_output=True, text=True).stdout
        expect(f"sha256 {f} equals sha256sum", ["sha256", p], 0, out=want, err="")

    # --- pin and verify ---
    forkjson = os.path.join(tmp, "t.FORK.json")
    sha = hashlib.sha256(whole).hexdigest()
    expect("pin --write creates the FORK.json", ["pin", q1, "--fork", forkjson, "--write"], 0,
           out=f"pinned {sha}\n", err="")
    with open(forkjson) as f:
        doc = json.load(f)
    check("FORK.json entry", doc == {"files": [{"path": "Bonsai-1.7B.gguf", "bytes": len(whole), "sha256": sha}]},
          doc)
    expect("pin check pinned", ["pin", q1, "--fork", forkjson], 0, out=f"pinned {sha}\n", err="")
    expect("verify text", ["verify", q1, "--fork", forkjson], 0, out=f"play pinned {sha}\n", err="")
    expect("verify json", ["verify", q1, "--fork", forkjson, "--json"], 0, err="",
           out='{"verdict": "play", "guard": "play", "engine": "mainline", "model_sha256": "%s", "bankml": "%s", '
               '"arch": "qwen3", "name": "Bonsai-1.7B", "types": {"F16": 1, "Q1_0": 1}}\n' % (sha, VERSION))
    expect("pin: no record", ["pin", b8, "--fork", forkjson], 2, err="",
           out="refuse: Bonsai-8B.gguf has no sha256 record in FORK.json: unpinned, refused (if it is the file you "
               f"mean to run, pin it: bankml pin {b8} --fork {forkjson} --write)\n")
    expect("verify: no record", ["verify", b8, "--fork", forkjson], 2, err="",
           out="refuse: Bonsai-8B.gguf has no sha256 record in FORK.json: unpinned, refused (if it is the file you "
               f"mean to run, pin it: bankml pin {b8} --fork {forkjson} --write)\n")
    wrong = "0" * 64
    with open(forkjson, "w") as f:
        json.dump({"kind": "test", "files": [{"path": "x/Bonsai-1.7B.gguf", "bytes": 1, "sha256": wrong}]}, f)
    expect("pin: mismatch", ["pin", q1, "--fork", forkjson], 2, err="",
           out=f"refuse: Bonsai-1.7B.gguf sha256 {sha} != pinned {wrong}: refused\n")
    expect("verify json: mismatch", ["verify", q1, "--fork", forkjson, "--json"], 2, err="",
           out='{"verdict": "refuse", "reason": "Bonsai-1.7B.gguf sha256 %s != pinned %s: refused", '
               '"bankml": "%s"}\n' % (sha, wrong, VERSION))
    expect("pin --write replaces the entry", ["pin", q1, "--fork", forkjson, "--write"], 0,
           out=f"pinned {sha}\n", err="")
    with open(forkjson) as f:
        doc = json.load(f)
    check("FORK.json keeps other keys", doc == {"kind": "test", "files": [
        {"path": "Bonsai-1.7B.gguf", "bytes": len(whole), "sha256": sha}]}, doc)
    expect("verify: guard refusal first", ["verify", legacy, "--fork", forkjson], 2, err="",
           out="refuse: guard refused: 2 Q2_0 tensors smaller than group-64 layout: legacy group-128 Prism file, "
               "use *-Q2_0_g64.gguf or *-PQ2_0.gguf\n")
    rc, out, err = run("verify", trunc, "--fork", forkjson)
    check("verify: truncated file exits 3", rc == 3 and out.startswith("refuse: guard needs ")
          and out.endswith(" header bytes: file truncated\n"), (rc, out))
    expect("verify: missing file exits 1", ["verify", os.path.join(tmp, "nope.gguf"), "--fork", forkjson], 1,
           out=f"refuse: cannot read {tmp}/nope.gguf: No such file or directory (os error 2)\n", err="")
    expect("verify: unreadable FORK.json exits 1", ["verify", q1, "--fork", os.path.join(tmp, "none.json")], 1,
           out=f"refuse: cannot read {tmp}/none.json: No such file or directory\n", err="")
    expect("pin: unreadable FORK.json exits 1", ["pin", q1, "--fork", os.path.join(tmp, "none.json")], 1, out="",
           err=f"bankml pin: cannot read {tmp}/none.json: No such file or directory\n")
    notjson = write(tmp, "bad.FORK.json", b"{\"files\": [")
    rc, out, err = run("pin", q1, "--fork", notjson)
    check("pin: FORK.json not JSON refuses with a reason", rc == 2 and out.startswith(f"refuse: {notjson}: ")
          and out.endswith(": refused\n"), (rc, out, err))

    # --- tokenize, detokenize, chat-template (the guard runs first) ---
    stories = os.path.join(models, "stories260K.gguf")
    if os.path.exists(stories):
        def piped(name, args, stdin, rc, out, err=""):
            p = subprocess.run([BIN, *args], input=stdin.encode(), capture_output=True, timeout=60)
            got = (p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace"))
            check(name, got == (rc, out, err), f"got {got!r}, want {(rc, out, err)!r}")
        piped("tokenize stories260K", ["tokenize", stories], "Once upon a time", 0,
              '{"tokens": [403,407,261,378]}\n')
        piped("detokenize stories260K", ["detokenize", stories], "[403, 407]", 0, " Once upon")
        piped("detokenize an object with tokens", ["detokenize", stories], '{"tokens": [261, 378]}', 0, " a time")
        piped("detokenize bad JSON", ["detokenize", stories], "[1,2", 2, "",
              "bankml detokenize: invalid JSON at byte 4: unexpected end of input, expected ',' or ']'\n")
        piped("detokenize an id out of range", ["detokenize", stories], "[5, 99999]", 2, "",
              "bankml detokenize: token 1 is not an id of this vocabulary (0 to 511)\n")
        piped("chat-template falls back to ChatML", ["chat-template", stories, "--no-generation-prompt"],
              '{"messages": [{"role": "user", "content": "hi"}]}', 0, "<|im_start|>user\nhi<|im_end|>\n")
        piped("tokenize a missing model", ["tokenize", os.path.join(tmp, "nope.gguf")], "x", 1, "",
              f"bankml tokenize: cannot read {tmp}/nope.gguf: No such file or directory (os error 2)\n")
        piped("tokenize a guard-refused model", ["tokenize", legacy], "x", 2, "",
              f"bankml tokenize: {legacy}: the guard says refuse: 2 Q2_0 tensors smaller than group-64 layout: "
              "legacy group-128 Prism file, use *-Q2_0_g64.gguf or *-PQ2_0.gguf\n")
    else:
        skip("tokenize/detokenize/chat-template on stories260K", "../shared/models is absent")

    # --- bench: arguments checked, and the gates run before anything is measured ---
    expect("bench with a bad -p", ["bench", q1, "-p", "x"], 1, out="",
           err="bankml bench: -p takes a whole number from 0 to 1048576, not x\n"
               "usage: bankml bench MODEL [-p N] [-n N] [-t N] [-r N] [-ctk TYPE] [-ctv TYPE] [--fork F.json]\n")
    expect("bench with -t 0", ["bench", q1, "-t", "0"], 1, out="",
           err="bankml bench: -t takes a whole number from 1 to 256, not 0\n"
               "usage: bankml bench MODEL [-p N] [-n N] [-t N] [-r N] [-ctk TYPE] [-ctv TYPE] [--fork F.json]\n")
    expect("bench with an unknown cache type", ["bench", q1, "-ctv", "q9"], 1, out="",
           err="bankml bench: -ctv q9: Unsupported cache type (allowed: f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, "
               "q5_0, q5_1)\n")
    expect("bench refuses an unpinned model", ["bench", b8, "--fork", forkjson], 2, out="",
           err="bankml bench: refuse: Bonsai-8B.gguf has no sha256 record in FORK.json: unpinned, refused (if it is "
               f"the file you mean to run, pin it: bankml pin {b8} --fork {forkjson} --write)\n")

    # --- create: a derived model over a pinned one, or a refusal ---
    reg = os.path.join(tmp, "registry")
    os.makedirs(reg)
    shutil.copy(forkjson, os.path.join(reg, "bonsai.FORK.json"))
    shutil.copy(q1, os.path.join(reg, "Bonsai-1.7B.gguf"))
    mf = write(tmp, "Modelfile", b"FROM Bonsai-1.7B.gguf\nSYSTEM You are terse.\nPARAMETER temperature 0.5\n")
    rc, out, err = run("create", "terse", "-f", mf, "--registry", reg)
    check("create writes a manifest", rc == 0 and os.path.exists(os.path.join(reg, "terse.MODEL.json"))
          and out.startswith(f"bankml create: terse:latest written to {reg}/terse.MODEL.json"), (rc, out, err))
    bad_mf = write(tmp, "Modelfile.bad", b"FROM Bonsai-8B.gguf\n")
    rc, out, err = run("create", "bad", "-f", bad_mf, "--registry", reg)
    check("create refuses a base that is not pinned", rc == 2 and err.startswith("bankml create: ")
          and not os.path.exists(os.path.join(reg, "bad.MODEL.json")), (rc, out, err))
    rc, out, err = run("create", "x")
    check("create without -f prints its usage", rc == 1 and "usage: bankml create NAME -f Modelfile" in err, (rc, err))

    # --- the demo model and the root models.FORK.json ---
    demo = os.path.join(ROOT, "models", "demo.gguf")
    if not os.path.exists(demo):
        subprocess.run(["make", "-s", "-C", ROOT, "demo-model"], capture_output=True)
    if os.path.exists(demo):
        rc, out, err = run("verify", demo, "--fork", os.path.join(ROOT, "models.FORK.json"))
        check("demo model verifies against models.FORK.json", rc == 0 and out.startswith("play pinned "), (rc, out))
        rc, out, err = run("bench", demo, "-p", "8", "-n", "4", "-r", "1", "-t", "1")
        try:
            j = json.loads(out.splitlines()[-1])
            ok = rc == 0 and j["n_prompt"] == 8 and j["n_gen"] == 4 and j["pp_tps"] > 0 and j["tg_tps"] > 0
        except (ValueError, IndexError, KeyError):
            ok = False
        check("bench on the demo model ends with its JSON line", ok, (rc, out, err))
        rc, out, err = run("bench", demo, "-p", "0", "-n", "2", "-r", "1", "-t", "1", "-ctk", "iq4_nl", "-ctv", "q8_0")
        try:
            j = json.loads(out.splitlines()[-1])
            ok = rc == 0 and (j["type_k"], j["type_v"], j["n_prompt"]) == ("iq4_nl", "q8_0", 0) and j["tg_tps"] > 0
        except (ValueError, IndexError, KeyError):
            ok = False
        check("bench -ctk iq4_nl -ctv q8_0 names its cache types", ok, (rc, out, err))
        def gen(args):
            p = subprocess.run([BIN, "generate", demo, *args], input=b"hi", capture_output=True, timeout=60)
            return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
        got = gen(["--sample", "--top-k", "0.5x", "--max", "2"])
        check("generate: a sampling flag that is not a number", got == (1, "", "bankml generate: --top-k wants a number, "
              "not 0.5x\n"), got)
        got = gen(["--sample", "--repeat-penalty", "-1", "--max", "2"])
        check("generate: llama-server's refusal of a sampling value", got == (2, "", "bankml generate: Failed to "
              "initialize samplers: penalty_repeat must be finite and greater than 0\n"), got)
        rc, out, err = gen(["--max", "3", "--json"])
        try:
            j = json.loads(out)
            ok = rc == 0 and j["completion_tokens"] == 3 and j["finish_reason"] == "length" and j["prompt_tokens"] > 0
        except ValueError:
            ok = False
        check("generate --json on the demo model", ok, (rc, out, err))
    else:
        check("make demo-model writes models/demo.gguf", False, "models/demo.gguf is missing")


main()
print(f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped")
sys.exit(1 if counts["failed"] else 0)
