#!/usr/bin/env python3
"""oracle_chat_gen.py -- src/text/chat_gen.c (b11669's autoparser generator) against llama.cpp b11669's own.

The oracle is b11669's libllama-common.so in process (testing/kit_chat.cpp under sid-run, as oracle_peg uses
it): common_chat_templates_apply's result for a template and request inputs. bankml's side is
testing/chat_gen_driver.c: chat_specialized, chat_analyze (with the caps testing/kit_chat_analyze.cpp prints,
until template_caps lands), chat_gen with the kit's generation prompt, peg_save of the arena and
peg_build_grammar of it. For every template of ../shared/templates that takes the autoparser path (no
specialised parser) x oracle_peg's input variants, the arena text must equal the kit's byte for byte, and
grammar, grammar_lazy, grammar_triggers, preserved_tokens, additional_stops, supports_thinking,
thinking_start_tag, thinking_end_tags and generation_prompt must be equal.

Three more variants (EXTRA) take the schema writer down its other paths (no parameters, anyOf, $ref into $defs
with a cycle, type lists, enum / const, bounds, formats, tuples, open objects, allOf), as tools and as
response_format. A variant b11669 refuses passes when bankml refuses it too, or when b11669's reason is its
template render raising (the prompt step, which runs before chat_gen in the engine).
Prints `N passed, N failed, N skipped`.
"""
import json, os, subprocess, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle
import oracle_chat_analyze as oca
import oracle_peg as op

ROOT = oracle.ROOT
BUILD = os.path.join(ROOT, "build")
# tools whose schemas take the typed node's other paths: no parameters, anyOf, $ref into $defs, a type list,
# enum and const (string and not), bounds, formats, tuples, closed and open objects
ODD_TOOLS = [
    {"type": "function", "function": {"name": "ping", "description": "No parameters"}},
    {"type": "function", "function": {"name": "odd", "description": "Odd schema", "parameters": {
        "type": "object",
        "properties": {
            "x": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            "y": {"$ref": "#/$defs/Y"},
            "z": {"type": ["integer", "null"], "minimum": 1.5, "exclusiveMaximum": 10},
            "w": {"enum": [1, 2.5, -0]},
            "c": {"const": "k"},
            "d": {"type": "string", "format": "date-time", "maxLength": 30, "pattern": "^[0-9]"},
            "t": {"type": "array", "prefixItems": [{"type": "number"}, {"type": "boolean"}], "minItems": 1},
            "o": {"type": "object", "additionalProperties": {"type": "integer"}},
            "any": {},
            "u": {"allOf": [{}, {"type": "string"}]}},
        "required": ["y", "x"],
        "$defs": {"Y": {"type": "object", "properties": {"q": {"type": "string", "minLength": 2},
                                                           "self": {"$ref": "#/$defs/Y"}}}}}}},
]
EXTRA = [
    ("odd-tools-required", {"tools": ODD_TOOLS, "tool_choice": "required"}, False),
    ("odd-tools-auto-parallel", {"tools": ODD_TOOLS, "tool_choice": "auto", "parallel_tool_calls": True,
                                 "reasoning_format": "auto"}, False),
    ("odd-json-schema", {"json_schema": ODD_TOOLS[1]["function"]["parameters"]}, False),
]
VARIANTS = op.VARIANTS + EXTRA
FIELDS = ["parser", "grammar", "grammar_lazy", "grammar_triggers", "preserved_tokens", "additional_stops",
          "supports_thinking", "thinking_start_tag", "thinking_end_tags", "generation_prompt"]


def main():
    s = oracle.Suite("oracle_chat_gen")
    kit = oracle.kit_or_skip(s)
    shared = oracle.shared_or_skip(s)
    r = subprocess.run(["make", "-s", "build/chat-gen-driver", "build/kit-chat", "build/kit-chat-analyze"], cwd=ROOT,
                       capture_output=True, text=True)
    if not s.check("make build/chat-gen-driver build/kit-chat build/kit-chat-analyze", r.returncode == 0,
                   (r.stdout + r.stderr)[-2000:]):
        s.finish()
    driver = [os.environ.get("CHAT_GEN_DRIVER") or os.path.join(BUILD, "chat-gen-driver")]
    tl = oca.shared_templates(shared)
    only = os.environ.get("ORACLE_CHAT_GEN_ONLY")
    if only:
        tl = [t for t in tl if only in t[0]]
    an = oca.run([kit.tool("sid-run"), os.path.join(BUILD, "kit-chat-analyze"), "", ""], [t for _, t in tl])
    auto = []
    for (name, t), (tag, body) in zip(tl, an):
        j = json.loads(body)
        if tag != "OK" or j["specialized"] != "none":
            continue
        auto.append((name, t.decode("utf-8", "surrogateescape"), j))
    s.check("templates: at least 50 take the autoparser path", len(auto) >= 50, f"{len(auto)}")
    stats = {"equal": 0, "refused": 0, "grammars": 0, "lazy": 0}
    for name, tmpl, ana in auto:
        reqs = [{"template": tmpl, "inputs": op.base_inputs(v, op.USER)} for _, v, _ in VARIANTS]
        want = op.kit_chat_run(kit, reqs)
        dreq = []
        for (vname, v, _), (tag, w) in zip(VARIANTS, want):
            dreq.append({"template": tmpl, "caps": ana["caps"], "bos": "", "eos": "", "inputs": v,
                         "generation_prompt": w.get("generation_prompt", "") if tag == "OK" else ""})
        got = op.run_frames(driver, dreq)
        for (vname, v, _), (wt, w), (gt, g) in zip(VARIANTS, want, got):
            label = f"{name} {vname}"
            if wt != "OK":
                # a render failure (the template raises on these inputs) is the prompt step's, which the engine
                # runs with bankml's own Jinja engine before chat_gen; anything else bankml must refuse too
                render = "While executing" in str(w)
                if gt != "OK" or render:
                    stats["refused"] += 1
                    s.ok(label, "b11669 refuses (" + ("its template render raises: the prompt step's, not chat_gen's"
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
            wf = {k: w[k] for k in FIELDS}
            if s.equal(label, {k: gj[k] for k in FIELDS}, wf):
                stats["equal"] += 1
                stats["grammars"] += bool(w["grammar"])
                stats["lazy"] += bool(w["grammar_lazy"])
    print(f"  {len(auto)} autoparser templates: {stats['equal']} variants equal ({stats['grammars']} with a grammar, "
          f"{stats['lazy']} lazy), {stats['refused']} refused by b11669")
    s.finish()


if __name__ == "__main__":
    main()
