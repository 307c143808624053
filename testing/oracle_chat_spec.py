#!/usr/bin/env python3
"""oracle_chat_spec.py -- src/text/chat_spec*.c (b11669's specialised chat parsers) against llama.cpp b11669's own.

The oracle is b11669's libllama-common.so in process (testing/kit_chat.cpp under sid-run): what
common_chat_templates_apply returns for a template that takes one of common/parsers/'s inits
(common_chat_params_init_<name>, named by build/kit-chat-analyze's "specialized"). bankml's side is
testing/chat_gen_driver.c (chat_specialized, chat_gen_specialized with the kit's generation prompt, peg_save of
the arena, peg_build_grammar of it).

For every template of ../shared/templates whose parser is ported (PORTED) x oracle_peg's input variants +
oracle_chat_gen's EXTRA (odd schemas): format, the arena text byte for byte, grammar, grammar_lazy, triggers,
preserved tokens, additional stops, supports_thinking, thinking tags and generation prompt equal. Then parses:
the answers oracle_peg builds (plain text, reasoning blocks closed and open, the tool call the template renders
for one and two calls, with reasoning before, without the end of turn, broken, cut short), final and partial,
every byte prefix and the stream of compute_diffs deltas in four variants, parsed by the kit with b11669's arena
and by testing/peg_driver.c with the arena bankml built (its text, read back): the messages (content,
reasoning_content, tool calls' name / arguments / id) and deltas equal.

A template whose parser is not ported must be refused by chat_gen_specialized with CHAT_GEN_UNSUPPORTED and a
reason (checked once per template). Prints `N passed, N failed, N skipped`.
"""
import json, os, subprocess, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle
import oracle_chat_analyze as oca
import oracle_chat_gen as ocg
import oracle_peg as op

ROOT = oracle.ROOT
BUILD = os.path.join(ROOT, "build")
# inits no shared template takes, reached with a template that passes b11669's substring test
SYNTH = [
    ("synthetic/translate_gemma.jinja",
     "{#- [source_lang_code] [target_lang_code] -#}{% for m in messages %}<start_of_turn>{{ m.role }}\n"
     "{{ m.content }}<end_of_turn>\n{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"),
    ("synthetic/k2_horizon.jinja",
     "{#- <|ifm|im_start|> <ifm|tool_calls> -#}{% for m in messages %}<|ifm|im_start|>{{ m.role }}\n{{ m.content }}"
     "<|ifm|im_end|>{% endfor %}{% if add_generation_prompt %}<|ifm|im_start|>assistant\n{% endif %}"),
    ("synthetic/llm_jp_harmony.jinja",
     "{#- chat_format=llm-jp-harmony-v1 -#}{% for m in messages %}<|start|>{{ m.role }}<|message|>{{ m.content }}<|end|>"
     "{% endfor %}{% if add_generation_prompt %}<|start|>assistant{% endif %}"),
]
PORTED = {"qwen3_coder", "ministral_3", "gpt_oss", "functionary_v3_2", "kimi_k2", "deepseek_v3_2", "gemma4", "gemma4_outdated", "gigachat_v3", "cohere2moe", "muse_glimmer", "kimi_k3", "ling3", "minicpm5", "lfm2", "lfm2_5", "minimax_m3", "translate_gemma", "k2_horizon", "llm_jp_harmony"}
FIELDS = ["format"] + ocg.FIELDS
# the variants whose answers are parsed too (oracle_peg's, with their prefix flag)
PARSED = {v[0] for v in op.VARIANTS}
# end-of-turn tokens oracle_peg does not strip from a rendered call
TAILS = ("<\uff5cend\u2581of\u2581sentence\uff5c>", "<|call|>")
DS = "\uff5cDSML\uff5c"
# answers in each parser's own format beyond the template's rendered calls (reasoning into calls, content before
# calls, two calls, an unknown function)
W = '{"city": "Paris"}'
A = '{"a": 1, "b": 2.5}'
OWN = {
    "gpt_oss": [
        "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>Sunny.",
        "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>" + W,
        "<|channel|>commentary to=functions.add <|constrain|>json<|message|>" + A,
        "<|channel|>commentary<|message|>Let me check.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather<|message|>" + W,
        " to=functions.nope<|channel|>commentary<|message|>{}",
    ],
    "functionary_v3_2": ["all\nLet me check.>>>get_weather\n" + W, "get_weather\n" + W + ">>>add\n" + A, "all\nJust text."],
    "kimi_k2": [
        "<think>Call it.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>" + W,
        "Sure.<|tool_call_begin|>functions.add:3<|tool_call_argument_begin|>" + A + "<|tool_call_end|>",
        "<think>x</think>Two.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>" + W +
        "<|tool_call_end|><|tool_call_begin|>functions.add:1<|tool_call_argument_begin|>" + A + "<|tool_call_end|><|tool_calls_section_end|>",
    ],
    "cohere2moe": [
        "Think.<|END_THINKING|><|START_ACTION|>[{\"tool_call_id\": \"0\", \"tool_name\": \"get_weather\", \"parameters\": " + W + "}]<|END_ACTION|>",
        "<|END_THINKING|><|START_ACTION|>[{\"tool_call_id\": \"0\", \"tool_name\": \"get_weather\", \"parameters\": " + W +
        "}, {\"tool_call_id\": \"1\", \"tool_name\": \"add\", \"parameters\": " + A + "}]<|END_ACTION|><|END_OF_TURN_TOKEN|>",
        "Hmm<|END_THINKING|><|START_TEXT|>Sunny.<|END_TEXT|>",
    ],
    "muse_glimmer": [
        " to=self<|message|>Think.<|eom|><|start|>assistant to=user<|message|>Sunny.<|eot|>",
        " to=self<|message|>Think.<|eom|><|start|>assistant to=get_weather<|message|><atem:function_calls>\n<atem:invoke "
        "name=\"get_weather\">\n<atem:parameter name=\"city\">Paris</atem:parameter>\n</atem:invoke>\n</atem:function_calls>",
        " to=user<|message|>```json\n{\"answer\": \"x\"}\n```",
    ],
    "minicpm5": [
        "<think>Call.</think>\n<function name=\"get_weather\"><param name=\"city\">Paris</param></function>",
        "Sure. <function name=\"get_weather\"><param name=\"city\"><![CDATA[a</param>b]]></param></function>\n"
        "<function name=\"add\"><param name=\"a\">1</param><param name=\"b\">2.5</param></function>",
    ],
    "ling3": [
        "Think.<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call><|role_end|>",
        "x</think>Text.<tool_call>add<arg_key>b</arg_key><arg_value>2.5</arg_value><arg_key>a</arg_key><arg_value>1</arg_value></tool_call>",
    ],
    "lfm2": [
        "<think>Call.</think><|tool_call_start|>[get_weather(city=\"Paris\")]<|tool_call_end|>",
        "Text<|tool_call_start|>[get_weather(city='Paris'), add(a=1, b=2.5, flags=[true, False])]<|tool_call_end|>",
    ],
    "minimax_m3": [
        "<mm:think>Think.</mm:think>]<]minimax[>[<tool_call>\n]<]minimax[>[<invoke name=\"add\">\n]<]minimax[>[<a>1]<]minimax[>[</a>\n"
        "]<]minimax[>[<b>2.5]<]minimax[>[</b>\n]<]minimax[>[<flags>]<]minimax[>[<item>true]<]minimax[>[</item>\n"
        "]<]minimax[>[<item>false]<]minimax[>[</item>]<]minimax[>[</flags>\n]<]minimax[>[</invoke>\n]<]minimax[>[</tool_call>",
        "</mm:think>Text.]<]minimax[>[<tool_call>]<]minimax[>[<invoke name=\"get_weather\">]<]minimax[>[<city>Paris]<]minimax[>[</city>"
        "]<]minimax[>[</invoke>]<]minimax[>[</tool_call>",
    ],
    "k2_horizon": [
        "<ifm|think>Hm.</ifm|think>Sure.<ifm|tool_calls><ifm|tool_call>get_weather\n<ifm|arg_key>city</ifm|arg_key>"
        "<ifm|arg_value>Paris</ifm|arg_value></ifm|tool_call></ifm|tool_calls>",
        "<ifm|tool_calls><ifm|tool_call>add\n <ifm|arg_key>b</ifm|arg_key><ifm|arg_value>2.5</ifm|arg_value>"
        " <ifm|arg_key>a</ifm|arg_key><ifm|arg_value>1</ifm|arg_value></ifm|tool_call> <ifm|tool_call>get_weather\n"
        "<ifm|arg_key>city</ifm|arg_key><ifm|arg_value>Oslo</ifm|arg_value></ifm|tool_call></ifm|tool_calls>",
    ],
    "llm_jp_harmony": [
        "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>Sunny.",
        "<|channel|>analysis<|message|>Think.<|end|><|start|> assistant to=functions.get_weather<|channel|>commentary json<|message|>" + W,
        "<|channel|> commentary to=functions.add <|constrain|> json<|message|> " + A,
    ],
    "gigachat_v3": ["Sure.<|message_sep|>\n\nfunction call<|role_sep|>\n{\"name\": \"add\", \"arguments\": " + A + "}"],
    "deepseek_v3_2": [
        "Let me look.</think>\n\n<" + DS + "function_calls>\n<" + DS + "invoke name=\"get_weather\">\n<" + DS +
        "parameter name=\"city\" string=\"true\">Paris</" + DS + "parameter>\n</" + DS + "invoke>\n</" + DS + "function_calls>",
        "Straight in\n\n<" + DS + "function_calls>\n<" + DS + "invoke name=\"add\">\n<" + DS + "parameter name=\"a\" string=\"false\">1</" +
        DS + "parameter>\n<" + DS + "parameter name=\"b\" string=\"false\">2.5</" + DS + "parameter>\n</" + DS + "invoke>\n</" + DS + "function_calls>",
        "</think>Content first.\n\n<" + DS + "tool_calls>\n<" + DS + "invoke name=\"get_weather\">\n<" + DS +
        "parameter name=\"city\" string=\"true\">Paris</" + DS + "parameter>\n</" + DS + "invoke>\n</" + DS + "tool_calls>",
    ],
}


# response_format beside tools, and an empty schema object (b11669's inits test the schema differently)
MORE = [
    ("tools-auto-json-schema", {"tools": op.TOOLS, "tool_choice": "auto", "json_schema": op.SCHEMA}, False),
    ("tools-required-json-schema", {"tools": op.TOOLS, "tool_choice": "required", "json_schema": op.SCHEMA}, False),
    ("json-schema-empty", {"json_schema": {}}, False),
]


OWN["lfm2_5"] = OWN["lfm2"]


# tools whose schemas b11669's readers reject (or take as they are): the error text must be b11669's too
HOSTILE = [
    ("hostile-no-parameters", {"tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "auto"}, False),
    ("hostile-property-not-object", {"tools": [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"a": 7}}}}], "tool_choice": "required"}, False),
    ("hostile-unknown-type", {"tools": [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"a": {"type": "strin"}}}}}], "tool_choice": "auto"}, False),
    ("hostile-empty-anyof", {"tools": [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"a": {"anyOf": []}}}}}], "tool_choice": "auto"}, False),
]
HOSTILE_NAMES = {v[0] for v in HOSTILE}


def strip_tails(calls):
    out = []
    for c in calls:
        for t in TAILS:
            if c.endswith(t):
                c = c[: -len(t)]
        out.append(c)
    return out


def compare_parses(s, label, w, g, stats):
    errs, n = [], 0
    for i, (pw, pg) in enumerate(zip(w["parses"], g["parses"])):
        for k in ("final", "partial"):
            n += 1
            stats["calls"] += len(pw[k].get("tool_calls") or [])
            stats["reasoning"] += bool(pw[k].get("reasoning_content"))
            stats["errors"] += "error" in pw[k]
            if pw[k] != pg[k]:
                errs.append(f"answer {i} {k}\n  got  {json.dumps(pg[k])[:300]}\n  want {json.dumps(pw[k])[:300]}")
        for j, (a, b) in enumerate(zip(pw.get("prefixes", []), pg.get("prefixes", []))):
            n += 1
            if a != b:
                errs.append(f"answer {i} prefix {j}\n  got  {json.dumps(b)[:300]}\n  want {json.dumps(a)[:300]}")
                break
        if len(pw.get("stream", [])) != len(pg.get("stream", [])):
            errs.append(f"answer {i} stream has {len(pg.get('stream', []))} steps, want {len(pw.get('stream', []))}")
        for j, (a, b) in enumerate(zip(pw.get("stream", []), pg.get("stream", []))):
            n += 1
            if a != b:
                errs.append(f"answer {i} stream step {j}\n  got  {json.dumps(b)[:300]}\n  want {json.dumps(a)[:300]}")
                break
    if len(w["parses"]) != len(g["parses"]):
        errs.append(f"{len(g['parses'])} answers parsed, want {len(w['parses'])}")
    if errs:
        s.fail(label, f"{len(errs)} parse mismatches")
        for e in errs[:6]:
            print("        " + e.replace("\n", "\n        "))
    else:
        s.ok(label, f"{n} parses and stream steps equal")
    return n if not errs else 0


def main():
    s = oracle.Suite("oracle_chat_spec")
    kit = oracle.kit_or_skip(s)
    shared = oracle.shared_or_skip(s)
    r = subprocess.run(["make", "-s", "build/chat-gen-driver", "build/peg-driver", "build/kit-chat",
                        "build/kit-chat-analyze"], cwd=ROOT, capture_output=True, text=True)
    if not s.check("make the drivers and kits", r.returncode == 0, (r.stdout + r.stderr)[-2000:]):
        s.finish()
    driver = [os.environ.get("CHAT_GEN_DRIVER") or os.path.join(BUILD, "chat-gen-driver")]
    peg_driver = [os.environ.get("PEG_DRIVER") or os.path.join(BUILD, "peg-driver")]
    tl = oca.shared_templates(shared) + [(n, t.encode()) for n, t in SYNTH]
    an = oca.run([kit.tool("sid-run"), os.path.join(BUILD, "kit-chat-analyze"), "", ""], [t for _, t in tl])
    spec, other = [], []
    for (name, t), (tag, body) in zip(tl, an):
        if tag != "OK":
            continue
        j = json.loads(body)
        if j["specialized"] == "none":
            continue
        (spec if j["specialized"] in PORTED else other).append((name, t.decode("utf-8", "surrogateescape"), j["specialized"]))
    only = os.environ.get("ORACLE_CHAT_SPEC_ONLY")
    if only:
        spec = [x for x in spec if only in x[0]]
    s.check("templates: the ported parsers take at least 25", len(spec) >= 25 or only, f"{len(spec)}")

    got = op.run_frames(driver, [{"template": t, "inputs": {}, "generation_prompt": ""} for _, t, _ in other])
    for (name, _, sp), (tag, body) in zip(other, got):
        s.check(f"{name} ({sp}) refused", tag == "UNSUP" and sp.encode() in body, f"{tag} {body[:200]!r}")

    stats = {"equal": 0, "refused": 0, "grammars": 0, "lazy": 0, "parses": 0, "calls": 0, "reasoning": 0, "errors": 0}
    variants = op.VARIANTS + ocg.EXTRA + MORE + HOSTILE
    for name, tmpl, sp in spec:
        calls = strip_tails(op.tool_call_texts(kit, tmpl, {"tools": op.TOOLS}))
        metas = op.kit_chat_run(kit, [{"template": tmpl, "inputs": op.base_inputs(v, op.USER)} for _, v, _ in variants])
        reqs = []
        for (vname, v, pref), (tag, meta) in zip(variants, metas):
            req = {"template": tmpl, "inputs": op.base_inputs(v, op.USER)}
            if tag == "OK" and vname in PARSED:
                req["answers"] = op.answers_for(meta, calls) + OWN.get(sp, [])
                req["prefixes"] = pref
            reqs.append(req)
        want = op.kit_chat_run(kit, reqs)
        dreq = [{"template": tmpl, "inputs": v, "generation_prompt": w.get("generation_prompt", "") if wt == "OK" else ""}
                for (_, v, _), (wt, w) in zip(variants, want)]
        got = op.run_frames(driver, dreq)
        preq, plabels = [], []
        for (vname, v, _), req, (wt, w), (gt, g) in zip(variants, reqs, want, got):
            label = f"{name} {vname}"
            if wt != "OK" and vname in HOSTILE_NAMES and "While executing" not in str(w):
                s.check(label + " refused in b11669's words", gt == "ERR" and g.decode("utf-8", "replace") == str(w),
                        f"bankml {gt} {g[:160]!r}, b11669 {str(w)[:160]!r}")
                stats["refused"] += 1
                continue
            if wt != "OK":
                render = "While executing" in str(w)
                if gt != "OK" or render:
                    stats["refused"] += 1
                    s.ok(label, "b11669 refuses (" + ("its template render raises: the prompt step's"
                                                      if render else f"bankml too: {g[:80]!r}") + ")")
                else:
                    s.fail(label, f"b11669 refuses ({str(w)[:100]}), bankml answers")
                continue
            if gt != "OK":
                s.fail(label, f"bankml {gt}: {g[:300]!r}")
                continue
            if w.get("schema_check"):
                s.fail(label, f"the kit could not write these schemas back exactly: {w['schema_check']}")
                continue
            gj = json.loads(g)
            if not s.equal(label, {k: gj[k] for k in FIELDS}, {k: w[k] for k in FIELDS}):
                continue
            stats["equal"] += 1
            stats["grammars"] += bool(w["grammar"])
            stats["lazy"] += bool(w["grammar_lazy"])
            if "answers" in req:
                preq.append({"parser": gj["parser"], "lazy": gj["grammar_lazy"], "format": gj["format"],
                             "generation_prompt": gj["generation_prompt"], "answers": req["answers"],
                             "prefixes": req["prefixes"]})
                plabels.append((label, w))
        if preq:
            pgot = [json.loads(b) for _, b in op.run_frames(peg_driver, preq)]
            for (label, w), g in zip(plabels, pgot):
                stats["parses"] += compare_parses(s, label + " parses", w, g, stats)
    print(f"  {len(spec)} templates on ported parsers: {stats['equal']} variants equal ({stats['grammars']} with a "
          f"grammar, {stats['lazy']} lazy), {stats['refused']} refused by b11669; {stats['parses']} parses and stream "
          f"steps equal (whole answers: {stats['calls']} tool calls, {stats['reasoning']} with reasoning, "
          f"{stats['errors']} b11669 errors); {len(other)} templates on parsers not ported refused with the reason")
    s.finish()


if __name__ == "__main__":
    main()
