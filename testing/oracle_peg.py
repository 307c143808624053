#!/usr/bin/env python3
"""oracle_peg.py -- src/text/peg*.c, chat_peg.c and src/sampling/peg_grammar.c against llama.cpp b11669's chat layer.

The oracle is b11669's libllama-common.so in process (testing/kit_chat.cpp under sid-run): for a template and
request inputs it gives what common_chat_templates_apply returns (format, prompt, generation prompt, grammar,
grammar_lazy, triggers, preserved tokens, its PEG arena written as text) and what common_chat_peg_parse makes
of answers, final and partial. bankml's side is testing/peg_driver.c: peg_load of that arena text, peg_save
(byte-equal to the text), peg_build_grammar (byte-equal to the library's build_grammar of the same arena, with
the lazy flag apply used; src/sampling/grammar.c must read it), and chat_peg_parse of the same answers.

For every template of ../shared/templates (the *.jinja files) x the input variants of VARIANTS (no tools;
tools with tool_choice auto / required / none; parallel calls; reasoning_format auto / deepseek / none;
enable_thinking false; json_schema), answers that exercise the format: plain text; a reasoning block closed
and left open (with the template's own thinking tags); the tool call the template itself renders for an
assistant message with tool_calls (its own syntax), with and without reasoning before it, and broken copies
of it. Every answer is parsed final and partial; the answers of four variants (prefixes True) also at every
byte prefix and as a stream of compute_diffs deltas (the streaming case). Groups print one line each; a template b11669 refuses (init or apply
throws) counts as a pass when bankml has nothing to compare (its error is printed).

kit_chat_run(kit, requests) is the reusable entry: frames in, results out (see kit_chat.cpp's header).
Prints `N passed, N failed, N skipped`.
"""
import glob, json, os, subprocess, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle

ROOT = oracle.ROOT
BUILD = os.path.join(ROOT, "build")

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
     "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                    "unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "add", "description": "Adds numbers",
     "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "number"},
                    "flags": {"type": "array", "items": {"type": "boolean"}}}, "required": ["a", "b"]}}},
]
USER = [{"role": "user", "content": "What is the weather in Paris?"}]
CALL = {"role": "assistant", "content": "", "tool_calls": [
    {"type": "function", "id": "call_1", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"unit\": \"c\"}"}}]}
CALL2 = {"role": "assistant", "content": "", "tool_calls": [
    {"type": "function", "id": "call_1", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
    {"type": "function", "id": "call_2", "function": {"name": "add", "arguments": "{\"a\": 1, \"b\": 2.5, \"flags\": [true]}"}}]}
SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}, "n": {"type": "integer"}}, "required": ["answer"]}

# name, inputs, prefixes (parse every byte prefix too)
VARIANTS = [
    ("plain", {}, False),
    ("tools-auto", {"tools": TOOLS, "tool_choice": "auto"}, True),
    ("tools-required", {"tools": TOOLS, "tool_choice": "required"}, True),
    ("tools-none", {"tools": TOOLS, "tool_choice": "none"}, False),
    ("tools-parallel", {"tools": TOOLS, "tool_choice": "auto", "parallel_tool_calls": True}, False),
    ("reasoning-auto", {"reasoning_format": "auto"}, True),
    ("reasoning-deepseek-tools", {"reasoning_format": "deepseek", "tools": TOOLS}, False),
    ("reasoning-none", {"reasoning_format": "none"}, False),
    ("thinking-off", {"reasoning_format": "auto", "enable_thinking": False, "chat_template_kwargs": {"enable_thinking": False}}, True),
    ("json-schema", {"json_schema": SCHEMA}, False),
]


def frames(objs):
    out = []
    for o in objs:
        b = json.dumps(o).encode()
        out.append(b"%d\n" % len(b) + b)
    return b"".join(out)


def unframe(out):
    res, i = [], 0
    while i < len(out):
        j = out.index(b"\n", i)
        tag, n = out[i:j].split(b" ")
        n = int(n)
        res.append((tag.decode(), out[j + 1:j + 1 + n]))
        i = j + 1 + n + 1
    return res


def run_frames(argv, objs, timeout=900):
    r = subprocess.run(argv, input=frames(objs), capture_output=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"{os.path.basename(argv[-1])} exited {r.returncode}: {r.stderr[-800:]!r}")
    return unframe(r.stdout)


def kit_chat_run(kit, requests):
    """b11669's chat layer for each request (kit_chat.cpp's frame): a list of ("OK", dict) or (tag, text)."""
    res = run_frames([kit.tool("sid-run"), os.path.join(BUILD, "kit-chat")], requests)
    return [(t, json.loads(b) if t == "OK" else b.decode("utf-8", "replace")) for t, b in res]


def templates():
    shared = oracle.find_shared()
    files = sorted(glob.glob(os.path.join(shared, "templates", "**", "*.jinja"), recursive=True))
    return [(os.path.relpath(f, os.path.join(shared, "templates")), open(f, encoding="utf-8").read()) for f in files]


def base_inputs(extra, messages):
    d = {"messages": messages}
    d.update(extra)
    return d


def tool_call_texts(kit, tmpl, extra):
    """The answer texts the template renders for an assistant tool call: its prompt with the call minus the
    prompt that asks for the answer (when one starts with the other)."""
    reqs = []
    for call in (CALL, CALL2):
        reqs.append({"template": tmpl, "inputs": base_inputs(extra, USER)})
        reqs.append({"template": tmpl, "inputs": dict(base_inputs(extra, USER + [call]), add_generation_prompt=False)})
    try:
        res = kit_chat_run(kit, reqs)
    except RuntimeError:
        return []
    out = []
    for k in range(0, len(res), 2):
        (t1, a), (t2, b) = res[k], res[k + 1]
        if t1 != "OK" or t2 != "OK":
            continue
        pa, pb = a["prompt"], b["prompt"]
        if pb.startswith(pa) and len(pb) > len(pa):
            out.append(pb[len(pa):])
        elif pb.startswith(pa.rstrip()) and len(pb) > len(pa.rstrip()):
            out.append(pb[len(pa.rstrip()):])
    return out


def answers_for(meta, calls):
    start = meta.get("thinking_start_tag") or "<think>"
    ends = meta.get("thinking_end_tags") or ["</think>"]
    end = ends[0]
    a = ["Hello, world!", "", "  Paris is sunny.\n\nBye.", "\u00e9t\u00e9 \u2600\ufe0f done"]
    a += [start + "I should answer." + end + "It is sunny.", "Thinking it over." + end + "Answer.", start + "unfinished thought"]
    for c in calls[:2]:
        a.append(c)
        a.append(start + "Call the tool." + end + c)
        stripped = c.rstrip()
        for tail in ("<|im_end|>", "<|eot_id|>", "<|eom_id|>", "</s>", "<|end|>", "<end_of_turn>"):
            if stripped.endswith(tail):
                stripped = stripped[: -len(tail)].rstrip()
        if stripped != c:
            a.append(stripped)
        brace = stripped.find("{")
        if brace >= 0:
            a.append(stripped[:brace] + "{\"city\": }" + stripped[brace + 1:])   # broken arguments
        a.append(stripped[: max(1, len(stripped) * 2 // 3)])                       # cut short
    seen, out = set(), []
    for x in a:
        if x not in seen:
            seen.add(x)
            out.append(x)
    return out


def main():
    s = oracle.Suite("oracle_peg")
    kit = oracle.kit_or_skip(s)
    oracle.shared_or_skip(s)
    r = subprocess.run(["make", "-s", "build/peg-driver", "build/kit-chat"], cwd=ROOT, capture_output=True, text=True)
    if not s.check("make build/peg-driver build/kit-chat", r.returncode == 0, (r.stdout + r.stderr)[-2000:]):
        s.finish()
    driver = [os.environ.get("PEG_DRIVER") or os.path.join(BUILD, "peg-driver")]   # PEG_DRIVER: e.g. an ASan build
    tl = templates()
    only = os.environ.get("ORACLE_PEG_ONLY")
    if only:
        tl = [t for t in tl if only in t[0]]
    stats = {"arenas": 0, "saves": 0, "grammars": 0, "parses": 0, "refused": 0, "schema_check": 0, "calls": 0, "reasoning": 0,
             "errors": 0, "apply_grammar_same": 0, "apply_grammar_other": 0,
             "steps": 0, "deltas": 0, "diff_errors": 0}
    for name, tmpl in tl:
        # pass 1: apply for every variant, to learn tags and the template's own tool-call text
        metas = kit_chat_run(kit, [{"template": tmpl, "inputs": base_inputs(v, USER)} for _, v, _ in VARIANTS])
        calls = tool_call_texts(kit, tmpl, {"tools": TOOLS})
        reqs, labels = [], []
        for (vname, v, pref), (tag, meta) in zip(VARIANTS, metas):
            if tag != "OK":
                stats["refused"] += 1
                s.ok(f"{name} {vname}", "b11669 refuses: " + json.dumps(str(meta)[:100]))
                continue
            reqs.append({"template": tmpl, "inputs": base_inputs(v, USER), "answers": answers_for(meta, calls), "prefixes": pref})
            labels.append(vname)
        if not reqs:
            continue
        try:
            want = kit_chat_run(kit, reqs)
        except RuntimeError as e:
            s.fail(f"{name} kit", str(e)[:300])
            continue
        dreq = []
        for req, (tag, w) in zip(reqs, want):
            dreq.append({"parser": w.get("parser", "") if tag == "OK" else "", "lazy": bool(w.get("grammar_lazy")) if tag == "OK" else False,
                         "format": w.get("format", "") if tag == "OK" else "", "generation_prompt": w.get("generation_prompt", "") if tag == "OK" else "",
                         "answers": req["answers"], "prefixes": req["prefixes"]})
        try:
            got = [json.loads(b) for _, b in run_frames(driver, dreq)]
        except (RuntimeError, ValueError) as e:
            s.fail(f"{name} driver", str(e)[:300])
            continue
        for vname, (tag, w), g in zip(labels, want, got):
            label = f"{name} {vname}"
            if tag != "OK":
                s.ok(label, "b11669 refuses: " + json.dumps(str(w)[:100]))
                continue
            errs = []
            if w["parser"]:
                stats["arenas"] += 1
                if g["save"] != w["parser"]:
                    errs.append(f"save differs: {oracle.short(g['save'], 200)}")
                else:
                    stats["saves"] += 1
                if w["schema_check"]:
                    stats["schema_check"] += 1
                    errs.append(f"kit could not write schemas back: {w['schema_check']}")
                if w["parser_grammar"] and g["grammar"] != w["parser_grammar"]:
                    errs.append(f"grammar differs:\n  got  {oracle.short(g['grammar'], 600)}\n  want {oracle.short(w['parser_grammar'], 600)}")
                elif w["parser_grammar"]:
                    stats["grammars"] += 1
                if w["grammar"]:
                    same = w["grammar"] == w["parser_grammar"]
                    stats["apply_grammar_same" if same else "apply_grammar_other"] += 1
                if g.get("grammar_ok"):
                    errs.append(f"grammar.c refuses the grammar: {g['grammar_ok']}")
            for i, (pw, pg) in enumerate(zip(w["parses"], g["parses"])):
                for k in ("final", "partial"):
                    stats["parses"] += 1
                    stats["calls"] += bool(pw[k].get("tool_calls"))
                    stats["reasoning"] += bool(pw[k].get("reasoning_content"))
                    stats["errors"] += "error" in pw[k]
                    if pw[k] != pg[k]:
                        errs.append(f"answer {i} {k}: {json.dumps(req_answer(reqs, labels, vname, i))[:160]}\n  got  {json.dumps(pg[k])[:300]}\n  want {json.dumps(pw[k])[:300]}")
                if len(pw.get("stream", [])) != len(pg.get("stream", [])):
                    errs.append(f"answer {i} stream has {len(pg.get('stream', []))} steps, want {len(pw.get('stream', []))}")
                for j, (a, b) in enumerate(zip(pw.get("stream", []), pg.get("stream", []))):
                    stats["steps"] += 1
                    stats["deltas"] += len(a) if isinstance(a, list) else 0
                    stats["diff_errors"] += isinstance(a, dict) and "diff_error" in a
                    if a != b:
                        errs.append(f"answer {i} stream step {j}\n  got  {json.dumps(b)[:300]}\n  want {json.dumps(a)[:300]}")
                        break
                for j, (a, b) in enumerate(zip(pw.get("prefixes", []), pg.get("prefixes", []))):
                    stats["parses"] += 1
                    if a != b:
                        errs.append(f"answer {i} prefix {j}\n  got  {json.dumps(b)[:300]}\n  want {json.dumps(a)[:300]}")
                        break
            if errs:
                s.fail(label, f"{len(errs)} mismatches")
                for e in errs[:6]:
                    print("        " + e.replace("\n", "\n        "))
            else:
                s.ok(label, f"{w['format']}, {len(w['parses'])} answers")
    print(f"  {stats['saves']}/{stats['arenas']} arenas saved byte-equal, {stats['grammars']} grammars byte-equal, "
          f"{stats['parses']} parses compared (whole answers: {stats['calls']} with tool calls, {stats['reasoning']} with "
          f"reasoning, {stats['errors']} b11669 errors), {stats['refused']} variants refused by b11669; "
          f"apply's grammar is the arena's in {stats['apply_grammar_same']} variants, another in {stats['apply_grammar_other']}; "
          f"{stats['steps']} stream steps ({stats['deltas']} deltas, {stats['diff_errors']} compute_diffs errors) equal")
    s.finish()


def req_answer(reqs, labels, vname, i):
    for r, l in zip(reqs, labels):
        if l == vname:
            return r["answers"][i]
    return None


if __name__ == "__main__":
    main()
