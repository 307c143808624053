#!/usr/bin/env python3
"""oracle_templates.py -- bankml's chat templates against llama-server b11669's /apply-template.

For every template in ../shared/templates/llama.cpp (and from-gguf/, and the two at the top of
../shared/templates), llama-server is started once with
`--chat-template-file T --jinja` on a tiny model (stories260K) and asked to apply the template to the
conversations below; bankml renders the same conversations through testing/template_driver.c (built
here from src/text/*.c -- the template files, and the tokenizer they link with -- and what those need
from src/base and src/file). Each conversation is one test:

  pass     both give the same bytes, or both refuse (the template raises, say)
  FAIL     the bytes differ, or bankml renders what llama-server refuses
  refused  bankml refuses with a reason what llama-server renders: printed, counted neither way
  skip     llama-server does not start with the template (printed with its reason)

llama-server's answers are cached in build/template-oracle/<sha256>.jsonl, keyed by the template, the
conversations and the server binary, so a second run needs no server at all.

Usage: python3 testing/oracle_templates.py [--only SUBSTRING] [--table docs/modules/template.md]
"""
import glob, hashlib, json, os, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import oracle  # noqa: E402

ROOT = oracle.ROOT
BUILD = os.path.join(ROOT, "build")
CACHE = os.path.join(BUILD, "template-oracle")
NOW = int(time.time())   # llama-server uses the real clock for strftime_now and datetime


def conversations():
    """At least 20 deterministic conversations: with and without system, multi-turn, multi-line,
    Unicode, empty contents, <think> blocks, typed content parts, developer role."""
    S = {"role": "system", "content": "You are a helpful assistant."}
    u = lambda c: {"role": "user", "content": c}
    a = lambda c: {"role": "assistant", "content": c}
    convs = [
        [u("Hello!")],
        [S, u("Hello!")],
        [u("What is 2+2?"), a("4"), u("And 3+3?")],
        [S, u("Hi"), a("Hello! How can I help?"), u("Tell me a joke.")],
        [u("Line one\nLine two\n\nLine four")],
        [S, u("Ünïcödé: ñ, 中文, 日本語, العربية, emoji 🎉🚀, math ∑∫")],
        [u("")],
        [{"role": "system", "content": ""}, u("Empty system prompt above.")],
        [u("Think first."), a("<think>\nLet me think.\nYes.\n</think>\n\nThe answer is 42."), u("Why?")],
        [S, u("Q1"), a("<think>reasoning</think>A1"), u("Q2"), a("<think>\n\n</think>\n\nA2"), u("Q3")],
        [u("  leading and trailing spaces  "), a("\tTabbed answer\t"), u("\n\nnewlines first")],
        [u("Quotes \" and ' and backslash \\ and braces {{ x }} {% if %} {# c #}")],
        [u("Special tokens in text: <|im_end|> <|eot_id|> </s> <s> [INST]")],
        [u([{"type": "text", "text": "Part one."}, {"type": "text", "text": "Part two."}])],
        [{"role": "developer", "content": "Developer instructions."}, u("Hi")],
        [S, u("a"), a("b"), u("c"), a("d"), u("e"), a("f"), u("g")],
        [u("JSON: {\"key\": [1, 2, 3], \"nested\": {\"a\": null}}")],
        [S, u("Hi"), a(""), u("You said nothing?")],
        [u("Reason about this."), {"role": "assistant", "content": "Done.",
                                   "reasoning_content": "Hidden reasoning."}, u("Next.")],
        [{"role": "system", "content": "Multi-line\nsystem\nprompt."}, u("ok")],
        [u("x" * 300)],
        [S, u("Über-long: " + "äöü " * 40)],
    ]
    cases = []
    for i, c in enumerate(convs):
        case = {"messages": c, "chat_template_kwargs": {"enable_thinking": i % 2 == 0}}
        if i % 5 == 4:
            case["add_generation_prompt"] = False
        cases.append(case)
    return cases


def build_driver(suite):
    os.makedirs(BUILD, exist_ok=True)
    exe = os.path.join(BUILD, "template_driver")
    # every file of src/text (so a split there needs no edit here) and what they need below it
    srcs = [os.path.join(ROOT, "testing/template_driver.c")] + sorted(glob.glob(os.path.join(ROOT, "src/text/*.c"))) + \
        [os.path.join(ROOT, p) for p in ("src/file/gguf.c", "src/base/json.c", "src/base/base.c")]
    deps = srcs + glob.glob(os.path.join(ROOT, "src/text/*.h"))
    if os.path.exists(exe) and all(os.path.getmtime(exe) > os.path.getmtime(s) for s in deps):
        return exe
    cmd = ["gcc", "-std=gnu11", "-D_GNU_SOURCE", "-I" + os.path.join(ROOT, "include"),
           "-I" + os.path.join(ROOT, "src"), "-O2", "-o", exe, *srcs, "-lm"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        oracle.skip_all("cannot build template_driver:\n" + r.stderr, suite)
    return exe


def server_answers(kit, model, tpath, cases, key):
    """[(ok, prompt-or-error)] from llama-server, or (None, reason) when it refuses the template."""
    path = os.path.join(CACHE, key + ".jsonl")
    if os.path.exists(path):
        with open(path) as f:
            rows = [json.loads(l) for l in f]
        if rows and "startup_error" in rows[0]:
            return None, rows[0]["startup_error"], rows[0].get("props", {})
        return [(r["ok"], r["v"]) for r in rows[1:]], None, rows[0].get("props", {})
    srv = oracle.Server.llama(kit, model, ctx=2048, extra=["--chat-template-file", tpath],
                              name="tmpl-" + os.path.basename(tpath)[:40], start_timeout=60)
    os.makedirs(CACHE, exist_ok=True)
    try:
        srv.start()
    except oracle.ServerError as e:
        reason = str(e).strip().splitlines()
        err = [l for l in reason if "error" in l.lower() or "exception" in l.lower()]
        msg = (err[-1] if err else reason[0])[:300]
        with open(path, "w") as f:
            f.write(json.dumps({"startup_error": msg}) + "\n")
        return None, msg, {}
    try:
        st, props = srv.get("/props")
        props = {k: props.get(k) for k in ("bos_token", "eos_token", "chat_template_caps")} \
            if isinstance(props, dict) else {}
        out = []
        for c in cases:
            st, body = srv.post("/apply-template", c)
            if st == 200 and isinstance(body, dict) and "prompt" in body:
                out.append((True, body["prompt"]))
            else:
                msg = body.get("error", {}).get("message", str(body)) if isinstance(body, dict) else str(body)
                out.append((False, msg))
    finally:
        srv.stop()
    with open(path, "w") as f:
        f.write(json.dumps({"props": props}) + "\n")
        for ok, v in out:
            f.write(json.dumps({"ok": ok, "v": v}) + "\n")
    return out, None, props


def first_diff(a, b):
    i = 0
    while i < min(len(a), len(b)) and a[i] == b[i]:
        i += 1
    return f"at byte {i}: bankml {a[i:i + 60]!r} vs llama-server {b[i:i + 60]!r}"


def main():
    args = sys.argv[1:]
    only = args[args.index("--only") + 1] if "--only" in args else None
    table_path = args[args.index("--table") + 1] if "--table" in args else None
    s = oracle.Suite("oracle_templates")
    shared = oracle.shared_or_skip(s)
    kit = oracle.kit_or_skip(s)
    model = os.path.join(shared, "models", "stories260K.gguf")
    tdir = os.path.join(shared, "templates", "llama.cpp")
    exe = build_driver(s)
    cases = conversations()
    conv_blob = json.dumps(cases, sort_keys=True).encode()
    server_bin = kit.tool("llama-server")
    with open(server_bin, "rb") as f:
        bin_id = hashlib.sha256(f.read()).hexdigest()
    tdirs = [tdir, os.path.join(shared, "templates", "from-gguf"), os.path.join(shared, "templates")]
    names = [os.path.join(d, n) for d in tdirs if os.path.isdir(d)
             for n in sorted(os.listdir(d)) if n.endswith(".jinja")]
    if only:
        names = [n for n in names if only in n]
    table, refused_total = [], 0
    for tpath in names:
        name = os.path.relpath(tpath, os.path.join(shared, "templates"))
        with open(tpath, "rb") as f:
            tbytes = f.read()
        key = hashlib.sha256(tbytes + b"\0" + conv_blob + b"\0" + bin_id.encode()
                             + b"\0" + str(NOW // 86400).encode()).hexdigest()
        answers, startup_err, props = server_answers(kit, model, tpath, cases, key)
        if answers is None:
            s.skip(name, "llama-server refuses the template: " + startup_err)
            table.append((name, 0, 0, 0, len(cases), "llama-server does not start: " + startup_err[:80]))
            continue
        spec = {"bos_token": props.get("bos_token") or "<s>", "eos_token": props.get("eos_token") or "</s>",
                "add_bos": True, "add_eos": False, "now": NOW, "cases": cases}
        cpath = os.path.join(BUILD, "template-cases.json")
        with open(cpath, "w") as f:
            json.dump(spec, f)
        r = subprocess.run([exe, tpath, cpath], capture_output=True, text=True, timeout=120)
        mine = [json.loads(l) for l in r.stdout.splitlines()]
        if r.returncode != 0 or len(mine) != len(cases):
            s.fail(name, f"template_driver exited {r.returncode}: {r.stderr[-300:]}")
            table.append((name, 0, len(cases), 0, 0, "driver crashed"))
            continue
        p = fl = rf = 0
        notes = set()
        for i, ((sok, sv), m) in enumerate(zip(answers, mine)):
            tname = f"{name} #{i}"
            if sok and m["ok"]:
                if sv == m["prompt"]:
                    p += 1
                    s.ok(tname)
                else:
                    fl += 1
                    s.fail(tname, first_diff(m["prompt"], sv))
            elif not sok and not m["ok"]:
                p += 1
                s.ok(tname, "both refuse")
                notes.add("both refuse some: " + sv[:60])
            elif sok and not m["ok"]:
                rf += 1
                refused_total += 1
                print(f"refused {tname}: {m['error']}", flush=True)
                notes.add("refused: " + m["error"][:80])
            else:
                fl += 1
                s.fail(tname, "llama-server refuses but bankml renders: " + sv[:200])
        table.append((name, p, fl, rf, 0, "; ".join(sorted(notes))[:160]))
    print(f"{refused_total} conversations refused by bankml (counted neither way)")
    if table_path:
        write_table(table_path, table, len(cases))
    s.finish()


def write_table(path, table, ncases):
    """Replaces the text between the oracle-table markers in the module doc."""
    lines = ["<!-- oracle-table-begin -->",
             f"| template | pass | fail | refused | skipped | note |", "|---|---|---|---|---|---|"]
    for name, p, fl, rf, sk, note in table:
        lines.append(f"| {name} | {p}/{ncases} | {fl} | {rf} | {sk} | {note.replace('|', '/')} |")
    lines.append("<!-- oracle-table-end -->")
    block = "\n".join(lines)
    with open(path) as f:
        doc = f.read()
    a, b = doc.find("<!-- oracle-table-begin -->"), doc.find("<!-- oracle-table-end -->")
    if a < 0 or b < 0:
        doc = doc.rstrip("\n") + "\n\n" + block + "\n"
    else:
        doc = doc[:a] + block + doc[b + len("<!-- oracle-table-end -->"):]
    with open(path, "w") as f:
        f.write(doc)


if __name__ == "__main__":
    main()
