#!/usr/bin/env python3
"""oracle_legacy_templates.py -- `bankml serve --no-jinja` against llama-server b11669's built-in (legacy,
non-Jinja) chat formats, byte for byte.

Three parts:

  in process   testing/legacy_driver.c built twice: on bankml's src/text/template_legacy.c, and with
               -DUSE_LLAMA on libllama.so's own llama_chat_apply_template / llama_chat_builtin_templates
               (run under the kit's sid-run: the library llama-server itself calls). The list of built-in
               names is compared, then every template text -- the 54 names, every file in
               ../shared/templates (detection from real Jinja sources), and a probe string for each
               branch of llm_chat_detect_template -- on every conversation below, with and without the
               assistant prefix. One test per template text (all its cases equal).
  per name     llama-server -c 256 --no-jinja --chat-template NAME and bankml serve with the same flags,
               on stories260K: /apply-template on the HTTP conversations (system first, none, multi-turn,
               assistant last, empty content, content parts, a developer role, two assistants at the end,
               which llama-server refuses), and a greedy chat; status and body equal.
  per file     --no-jinja --chat-template-file F: the files llama-server cannot map to a format are refused
               by both at start (llama-server's own two lines); a few that it maps are served and compared
               as above; and a GGUF with its own undetectable template, whose every render is llama-server's
               500 "this custom template is not supported, try using --jinja".

llama-server's answers are cached in build/legacy-oracle/, keyed by the server binary, the flags and the
requests, so a second run starts no llama-server at all.
"""
import glob, hashlib, json, os, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import oracle  # noqa: E402

ROOT = oracle.ROOT
BUILD = os.path.join(ROOT, "build")
CACHE = os.path.join(BUILD, "legacy-oracle")
BIN = os.environ.get("BANKML_BIN") or os.path.join(ROOT, "bankml")

S = oracle.Suite("oracle_legacy_templates")
kit = oracle.kit_or_skip(S)
shared = oracle.shared_or_skip(S)
MODEL = os.path.join(shared, "models", "stories260K.gguf")

# ---------------------------------------------------------------- part 1: in process

SYS = ("system", "  You are terse.\n")
RAW_CONVS = [
    [], [("user", "Hello")], [SYS, ("user", "Hi")],
    [SYS, ("user", " a "), ("assistant", " b\n"), ("user", "c")],
    [("assistant", "only")], [("user", "")], [("system", ""), ("user", "x")],
    [SYS, SYS, ("user", "u"), ("assistant", "v")],
    [("user", "q"), ("system", "late system"), ("user", "r")],
    [("tool", "res"), ("developer", "dev"), ("function", "f"), ("assistant_tool_call", "{}"), ("model", "m"),
     ("", "empty role"), ("ipython", "py")],
    [("user", "Ünïcödé 中文 🎉\t"), ("assistant", "\n\t ok \r\n")],
    [("user", "a"), ("assistant", "b"), ("user", "c"), ("assistant", "d")],
]

# one text per branch of llm_chat_detect_template (and the near misses around them)
PROBES = [
    "<|im_start|>", "<|im_start|><|im_sep|>", "<|im_start|><end_of_utterance>", "mistral", "mistralX [INST]",
    "[INST]", "[INST][SYSTEM_PROMPT]", "[INST]' [INST] ' + system_message", "[INST][AVAILABLE_TOOLS]",
    "[INST][AVAILABLE_TOOLS]\"[INST]\"", "[INST]<<SYS>>", "[INST]bos_token + '[INST]", "[INST] content.strip()",
    "<|assistant|><|end|>", "[gMASK]<sop>", "<|assistant|><|user|>", "<|assistant|><|user|><|tool_declare|>",
    "<|assistant|><|user|></s>", "<|{{ item['role'] }}|><|begin_of_image|>", "<|user|><|endoftext|>",
    "bos_token + message['role']", "<start_of_turn>", "'\\n\\nAssistant: ' + eos_token", "GPT4 Correct ",
    "USER: ASSISTANT: ", "USER: ASSISTANT: SYSTEM: ", "### Instruction:<|EOT|>", "### Instruction:",
    "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>", "<|start_header_id|><|end_header_id|>", "[gMASK]sop", "<用户>",
    "'Assistant: ' + message['content'] + eos_token", "<｜Assistant｜><｜User｜><｜end▁of▁sentence｜>",
    "[|system|][|assistant|][|endofturn|]", "[|system|][|assistant|][|endofturn|][|tool|]", "rwkv-world",
    "{{- 'User: ' + message['content']|trim + '\\n\\n' -}}", "<|start_of_role|>",
    "<|start_of_role|><tool_call>", "<|start_of_role|><tools>g4_default_system_message",
    "message['role'] + additional_special_tokens[0] + message['content'] + additional_special_tokens[1]",
    "<|role_start|>", " Ассистент:", "<role>ASSISTANT</role>'HUMAN'", "<role>ASSISTANT</role>\"HUMAN\"<think>",
    "<role>ASSISTANT</role><role>HUMAN</role><|role_end|>", "<|header_start|><|header_end|>",
    "<|endofuserprompt|>", "<|extra_0|><|extra_4|>", "<|start|><|channel|>",
    "<｜hy_Assistant｜><｜hy_begin▁of▁sentence｜>", "<｜hy_Assistant｜><｜hy_place▁holder▁no▁3｜>",
    "<|im_assistant|>assistant<|im_middle|>", "<seed:bos>", "'Assistant: '  + message['content'] + '<|separator|>",
    "[unused9]系统：[unused10]", "<|begin|><|end|><|content|>", "", "nonsense", "Llama3", "llama3 ",
    "chatml\0tail", "<|im_sta\0rt|>",
]


def build_drivers():
    inc, lib = kit.include, kit.lib
    src = os.path.join(ROOT, "testing", "legacy_driver.c")
    os.makedirs(BUILD, exist_ok=True)
    kit_exe, ours = os.path.join(BUILD, "kit-chat-legacy"), os.path.join(BUILD, "legacy-driver")
    cmds = [["cc", "-std=gnu11", "-D_GNU_SOURCE", "-O2", "-DUSE_LLAMA", "-I" + inc, "-o", kit_exe, src, "-L" + lib,
             "-l:libllama.so.0", "-l:libggml.so.0", "-l:libggml-base.so.0", "-lm", "-Wl,--allow-shlib-undefined"],
            ["cc", "-std=gnu11", "-D_GNU_SOURCE", "-O2", "-Wall", "-Wextra", "-Werror", "-I" + os.path.join(ROOT, "include"),
             "-I" + os.path.join(ROOT, "src"), "-o", ours, src, os.path.join(ROOT, "src/text/template_legacy.c"),
             os.path.join(ROOT, "src/base/base.c"), os.path.join(ROOT, "src/base/json.c"), "-lm", "-pthread"]]
    for c in cmds:
        r = subprocess.run(c, capture_output=True, text=True)
        if r.returncode:
            oracle.skip_all("cannot build legacy_driver:\n" + r.stderr[-800:], S)
    return kit_exe, ours


def encode_case(tmpl, conv, add):
    out = b"C %d %d %d\n" % (len(tmpl), add, len(conv)) + tmpl
    for r, c in conv:
        r, c = r.encode(), c.encode()
        out += b"%d %d\n" % (len(r), len(c)) + r + c
    return out


def split_results(raw):
    """the driver's R records: [(res, bytes), ...]"""
    res, i = [], 0
    while i < len(raw):
        nl = raw.index(b"\n", i)
        _, code, n = raw[i:nl].split(b" ")
        n = int(n)
        res.append((int(code), raw[nl + 1:nl + 1 + n]))
        i = nl + 1 + n + 1
    return res


def in_process():
    kit_exe, ours = build_drivers()
    run_kit = lambda data: subprocess.run([kit.tool("sid-run"), kit_exe], input=data, capture_output=True, check=True).stdout
    run_ours = lambda data: subprocess.run([ours], input=data, capture_output=True, check=True).stdout
    want_names, got_names = run_kit(b"L\n"), run_ours(b"L\n")
    names = [n for n in want_names.decode().split("\n") if n and n != "END"]
    S.equal("llama_chat_builtin_templates: the list, in its order", got_names.decode(), want_names.decode())
    texts = [("name " + n, n.encode()) for n in names]
    tdir = os.path.join(shared, "templates")
    for f in sorted(glob.glob(os.path.join(tdir, "**", "*.jinja"), recursive=True) +
                    glob.glob(os.path.join(tdir, "**", "*.txt"), recursive=True)):
        with open(f, "rb") as fh:
            texts.append(("file " + os.path.relpath(f, tdir), fh.read()))
    texts += [("probe " + repr(p), p.encode()) for p in PROBES]
    blob = b"".join(encode_case(t, c, a) for _, t in texts for c in RAW_CONVS for a in (0, 1))
    want, got = split_results(run_kit(blob)), split_results(run_ours(blob))
    per = 2 * len(RAW_CONVS)
    detected = {}
    for k, (label, _) in enumerate(texts):
        w, g = want[k * per:(k + 1) * per], got[k * per:(k + 1) * per]
        detected[label] = w[0][0] >= 0
        bad = [i for i in range(per) if w[i] != g[i]]
        S.check(f"in process: {label}", not bad, f"case {bad[:1]}: got {g[bad[0]] if bad else ''!r} want "
                f"{w[bad[0]] if bad else ''!r}")
    print(f"  in process: {len(texts)} texts x {per} cases, {sum(detected.values())} mapped to a format by llama.cpp")
    return names, detected


# ---------------------------------------------------------------- parts 2 and 3: the servers

u = lambda c: {"role": "user", "content": c}
a = lambda c: {"role": "assistant", "content": c}
SY = {"role": "system", "content": " Be brief. "}
HTTP_CONVS = [
    [u("Hello")], [SY, u("Tell me a story")], [SY, u("Q1"), a(" A1 "), u("Q2")], [u("Hi"), a("Once upon a")],
    [u("")], [SY, u([{"type": "text", "text": "part one"}, {"type": "text", "text": ""},
                     {"type": "text", "text": "part two"}])],
    [{"role": "developer", "content": "dev"}, u("x"), {"role": "assistant", "content": None}, u("y")],
    [u("a"), a("b"), a("c")], [],
]
CHAT = {"messages": [SY, u("Tell me a story")], "max_tokens": 6, "temperature": 0}
CHAT2 = {"messages": [u("Hi"), a("Once upon a")], "max_tokens": 6, "temperature": 0}


def requests():
    reqs = [("POST", "/apply-template", {"messages": c}) for c in HTTP_CONVS]
    return reqs + [("POST", "/v1/chat/completions", CHAT), ("POST", "/v1/chat/completions", CHAT2)]


def view(path, st, body):
    if path == "/v1/chat/completions" and st == 200 and isinstance(body, dict):
        return st, body["choices"][0]["message"]["content"], body["choices"][0]["finish_reason"], body["usage"]
    return st, body


with open(kit.tool("llama-server"), "rb") as fh:
    BIN_ID = hashlib.sha256(fh.read()).hexdigest()[:16]
FORK = os.path.join(BUILD, "legacy-oracle.FORK.json")


def llama_answers(flags, reqs, model=MODEL):
    """llama-server's (start error, [answers]) for these flags and requests; cached."""
    with open(model, "rb") as fh:
        mid = hashlib.sha256(fh.read()).hexdigest()
    key = hashlib.sha256(json.dumps([BIN_ID, mid, flags, reqs]).encode()).hexdigest()
    path = os.path.join(CACHE, key + ".json")
    if os.path.exists(path):
        with open(path) as fh:
            return json.load(fh)
    argv = [kit.tool("llama-server"), "-m", model, "--host", "127.0.0.1", "--port", "{port}", "-t", "2", "-c",
            "256", "-np", "1", "--no-webui", "--no-warmup", *flags]
    L = oracle.Server(argv, name="llama-legacy")
    try:
        L.start()
    except oracle.ServerError as e:
        out = [str(e), None]
    else:
        try:
            out = [None, [view(p, *L.request(m, p, b)) for m, p, b in reqs]]
        finally:
            L.stop()
    out = json.loads(json.dumps(out))
    os.makedirs(CACHE, exist_ok=True)
    with open(path, "w") as fh:
        json.dump(out, fh)
    return out


def compare(label, flags, model=MODEL, reqs=None):
    reqs = reqs or requests()
    err, want = llama_answers(flags, reqs, model)
    B = oracle.Server([BIN, "serve", "-m", model, "--host", "127.0.0.1", "--port", "{port}", "--fork", FORK, "-t", "2",
                       "-c", "256", "-np", "1", *flags], name="bankml-legacy")
    try:
        B.start()
    except oracle.ServerError as e:
        if err:
            S.ok(f"{label}: both refuse to start")
        else:
            S.fail(f"{label}: bankml does not start", str(e)[-300:])
        return
    try:
        if err:
            S.fail(f"{label}: bankml starts, llama-server does not", err[-300:])
            return
        for (m, p, b), w in zip(reqs, want):
            got = view(p, *B.request(m, p, b))
            S.equal(f"{label}: {p} {short(b)}", json.loads(json.dumps(got)), w)
    finally:
        B.stop()


def short(b):
    return oracle.short(json.dumps(b.get("messages", b)), 60)


def start_error(flags):
    """(exit code, stderr lines) of a server that refuses its flags before loading a model"""
    r = subprocess.run(flags, capture_output=True, text=True, timeout=60)
    return r.returncode, [ln for ln in (r.stdout + r.stderr).splitlines() if "error" in ln or "note:" in ln]


SERVE_FILES = ("llama.cpp/Qwen-Qwen3-0.6B.jinja", "llama.cpp/meta-llama-Llama-3.1-8B-Instruct.jinja",
               "llama.cpp/mistralai-Mistral-Nemo-Instruct-2407.jinja", "from-gguf/ggml-vocab-phi-3.chat_template.jinja")


def files_part(detected):
    """the files llama.cpp maps to no format (found in process): both refuse at start; a few others served"""
    tdir = os.path.join(shared, "templates")
    for f in sorted(glob.glob(os.path.join(tdir, "**", "*.jinja"), recursive=True)):
        name = os.path.relpath(f, tdir)
        if not detected.get("file " + name):
            rc_l, lines_l = start_error([kit.tool("llama-server"), "-m", MODEL, "--no-jinja", "--chat-template-file", f])
            rc_b, lines_b = start_error([BIN, "serve", "-m", MODEL, "--fork", FORK, "--no-jinja",
                                         "--chat-template-file", f, "--port", "1"])
            S.check(f"file {name}: refused at start as llama-server ({rc_l}): its two lines",
                    rc_b != 0 and rc_l != 0 and any(ln.endswith(lines_l[-1]) for ln in lines_b) and
                    any(ln.endswith(lines_l[0]) for ln in lines_b), f"{lines_b[:2]} vs {lines_l[:2]}")
        elif name in SERVE_FILES:
            compare(f"file {name}", ["--no-jinja", "--chat-template-file", f])


def gguf_part():
    """a GGUF with an undetectable template of its own; one with a llama3-like one"""
    script = os.path.join(os.path.dirname(kit.tool("gguf-py")), "..", "root", "usr", "lib", "python3",
                          "dist-packages", "gguf", "scripts", "gguf_new_metadata.py")
    out = {}
    for tag, tmpl in (("unk", "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"),
                      ("l3", "{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>"
                             "{{ m.content }}{% endfor %}")):
        path = os.path.join(BUILD, f"legacy-stories-{tag}.gguf")
        if not os.path.exists(path):
            r = subprocess.run([kit.tool("gguf-py"), script, MODEL, path, "--chat-template", tmpl, "--force"],
                               capture_output=True, text=True)
            if r.returncode:
                S.skip(f"gguf with its own template ({tag})", "gguf_new_metadata: " + r.stderr[-200:])
                continue
        subprocess.run([BIN, "pin", path, "--fork", FORK, "--write"], check=True, stdout=subprocess.DEVNULL)
        out[tag] = path
    reqs = [("POST", "/apply-template", {"messages": [SY, u("hi")]}), ("POST", "/v1/chat/completions", CHAT),
            ("POST", "/apply-template", {"messages": [u("a"), a("b"), a("c")]})]
    for tag, path in out.items():
        compare(f"gguf template ({tag})", ["--no-jinja"], model=path, reqs=reqs)


def main():
    subprocess.run([BIN, "pin", MODEL, "--fork", FORK, "--write"], check=True, stdout=subprocess.DEVNULL)
    names, detected = in_process()
    only = os.environ.get("LEGACY_ONLY")
    for n in names:
        if only and only not in n:
            continue
        compare(f"--chat-template {n}", ["--no-jinja", "--chat-template", n])
    rc_l, lines_l = start_error([kit.tool("llama-server"), "-m", MODEL, "--no-jinja", "--chat-template", "nonsense"])
    rc_b, lines_b = start_error([BIN, "serve", "-m", MODEL, "--fork", FORK, "--no-jinja", "--chat-template", "nonsense"])
    S.check("--chat-template nonsense --no-jinja: llama-server's two lines, both exit", rc_l != 0 and rc_b != 0 and
            len(lines_l) == 2 and all(any(b.endswith(ln) for b in lines_b) for ln in lines_l), f"{lines_b} vs {lines_l}")
    if not only:
        files_part(detected)
        gguf_part()
    S.finish()


main()
