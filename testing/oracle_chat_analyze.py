#!/usr/bin/env python3
"""oracle_chat_analyze.py -- src/text/chat_analyze.c against llama.cpp b11669's own template analysis.

The oracle is b11669 itself, in process: testing/kit_chat_analyze.cpp builds a common_chat_template from the
text with libllama-common.so's own constructor (which runs jinja::caps_get and picks the specialised parser),
runs autoparser::autoparser::analyze_template on it and prints every field of the analysis as JSON, with the
caps and the specialised parser's name. bankml's side is testing/chat_analyze_driver.c (chat_specialized, then
chat_analyze with the caps the kit printed, until template_caps lands). The two JSON objects must be equal
field for field, or both must fail (b11669 throws out of analyze_template: bankml returns -1). Groups:

  templates       every template under ../shared/templates (llama.cpp's 70, the ones read out of ../vocab, the
                  Qwen3 / SmolLM2 / Ollama ones), bos_token and eos_token empty
  tokens          the same with bos_token "<s>" and eos_token "</s>" (templates print them)
  crlf            a few of them with CRLF and CR line ends (the lexer's normalisation, which the substring
                  tests of the workarounds and of the specialised detection read)
  specialized     tiny texts holding each specialised parser's substrings, each with one of them missing, and
                  pairs that two tests both match (which one b11669 tests first)
  edge            templates that raise on every probe, JSON tool calls that do not parse or have no '{', a
                  tagged format, reasoning markers, typed-only content (the probes' string content as one text
                  part): the paths where b11669 throws or skips a step

CHAT_ANALYZE_DRIVER=path runs another build of the driver (an ASan one: see docs/modules/chat_analyze.md).
Prints `N passed, N failed, N skipped`.
"""
import json, os, subprocess, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle

ROOT = oracle.ROOT
BUILD = os.path.join(ROOT, "build")


def frames(texts):
    return b"".join(b"%d\n" % len(t) + t for t in texts)


def unframe(out):
    res, i = [], 0
    while i < len(out):
        j = out.index(b"\n", i)
        tag, n = out[i:j].split(b" ")
        n = int(n)
        res.append((tag.decode(), out[j + 1:j + 1 + n]))
        i = j + 1 + n + 1
    return res


def run(argv, texts):
    r = subprocess.run(argv, input=frames(texts), capture_output=True)
    if r.returncode != 0:
        raise RuntimeError(f"{os.path.basename(argv[1] if len(argv) > 1 else argv[0])} exited {r.returncode}: {r.stderr[-500:]!r}")
    res = unframe(r.stdout)
    if len(res) != len(texts):
        raise RuntimeError(f"{len(res)} answers for {len(texts)} frames")
    return res


def compare(s, group, cases, kit, driver, bos="", eos=""):
    """cases: [(name, template bytes)]"""
    if not cases:
        s.fail(group, "no cases")
        return
    got_kit = run(kit + [bos, eos], [t for _, t in cases])
    ins = []
    for (_, t), (tag, body) in zip(cases, got_kit):
        caps = json.loads(body)["caps"] if tag in ("OK", "ERR") else {}
        ins.append(json.dumps({"template": t.decode("utf-8", "surrogateescape"), "caps": caps, "bos": bos,
                               "eos": eos}).encode("utf-8", "surrogateescape"))
    got_drv = run(driver, ins)
    for (name, _), (kt, kb), (dt, db) in zip(cases, got_kit, got_drv):
        label = f"{group}: {name}"
        if kt == "TMPL":
            s.skip(label, f"b11669 does not parse it: {kb[:200]!r}")
            continue
        want, got = json.loads(kb), json.loads(db)
        if kt == "ERR" or dt == "ERR":
            s.check(label, kt == dt and want["specialized"] == got["specialized"],
                    f"b11669 {kt} {want.get('error', '')!r}, bankml {dt} {got.get('error', '')!r}")
            continue
        s.equal(label, got, want)


def shared_templates(shared):
    base = os.path.join(shared, "templates")
    out = []
    for d, _, fs in sorted(os.walk(base)):
        for f in sorted(fs):
            if f.endswith(".jinja"):
                p = os.path.join(d, f)
                out.append((os.path.relpath(p, base), open(p, "rb").read()))
    return out


# each specialised parser's substring test, in b11669's order (its common_chat_template constructor)
SPECIAL = [
    ("ministral_3", ["[SYSTEM_PROMPT]", "[TOOL_CALLS]", "[ARGS]"], ["[CALL_ID]"]),
    ("llm_jp_harmony", ["chat_format=llm-jp-harmony-v1"], []),
    ("gpt_oss", ["<|channel|>"], []),
    ("muse_glimmer", ["<atem:function_calls>", "<|eom|>"], []),
    ("functionary_v3_2", [">>>all", ">>>${recipient}"], []),
    ("kimi_k2", ["<|tool_calls_section_begin|>", "<|tool_call_begin|>"], []),
    ("kimi_k3", ["<|open|>", "<|close|>", "<|end_of_msg|>"], []),
    ("k2_horizon", ["<|ifm|im_start|>", "<ifm|tool_calls>"], []),
    ("ling3", ["<role>ASSISTANT</role>", "<arg_key>"], []),
    ("cohere2moe", ["<|START_TEXT|>", "<|START_ACTION|>"], []),
    ("lfm2", ["<|tool_list_start|>", "<|tool_list_end|>"], []),
    ("lfm2_5", ["List of tools: ["], ["<|tool_list_start|>"]),
    ("gigachat_v3", ["<|role_sep|>", "<|message_sep|>"], ["<|function_call|>"]),
    ("minimax_m3", ["]<]minimax[>[", "<tool_call>", "<invoke name="], []),
    ("deepseek_v3_2", ["dsml_token", "DSML", "function_calls"], []),
    ("gemma4", ["'<|tool_call>call:'", "{#- OpenAI Chat Completions: #}"], []),
    ("minicpm5", ["Tool usage guidelines:", "<function name=\"", "<param name=\""], []),
    ("translate_gemma", ["[source_lang_code]", "[target_lang_code]"], []),
    ("qwen3_coder", ["<tool_call>", "<function=", "<parameter="], ["'<tool_call><function=' ~ tool_call.name ~ '>'"]),
]


def text(parts):
    return ("plain text\n" + "\n".join(parts) + "\n").encode()


def specialized_cases():
    cases = []
    for name, need, never in SPECIAL:
        cases.append((f"{name}", text(need)))
        if len(need) > 1:
            for i in range(len(need)):
                cases.append((f"{name} without {need[i]!r}", text(need[:i] + need[i + 1:])))
        for n in never:
            cases.append((f"{name} with {n!r}", text(need + [n])))
    cases.append(("deepseek_v3_2 by tool_calls", text(["dsml_token", "DSML", "tool_calls"])))
    cases.append(("gemma4 outdated", text(["'<|tool_call>call:'"])))
    # where two tests match, the earlier one wins
    for i in range(len(SPECIAL) - 1):
        a, b = SPECIAL[i], SPECIAL[i + 1]
        cases.append((f"{a[0]} before {b[0]}", text(a[1] + b[1])))
    cases.append(("crlf between needles", b"[SYSTEM_PROMPT]\r\n[TOOL_CALLS]\r\n[ARGS]\r\n"))
    return cases


def crlf_cases(all_templates):
    pick = ["llama.cpp/Qwen-Qwen3-0.6B.jinja", "llama.cpp/ibm-granite-granite-3.3-2B-Instruct.jinja",
            "llama.cpp/fireworks-ai-llama-3-firefunction-v2.jinja", "llama.cpp/Qwen3-Coder.jinja",
            "llama.cpp/NVIDIA-Nemotron-Nano-v2.jinja"]
    by = dict(all_templates)
    out = []
    for p in pick:
        if p in by:
            t = by[p].replace(b"\r\n", b"\n")
            out.append((p + " CRLF", t.replace(b"\n", b"\r\n")))
            out.append((p + " CR", t.replace(b"\n", b"\r")))
    return out


LOOP = "{%- for m in messages -%}"
EDGE = [
    ("raises on every probe", b"{{ raise_exception('no') }}"),
    ("renders nothing", b""),
    ("plain chatml", b"{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
                     b"{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"),
    ("json call that does not parse",
     (LOOP + "{%- if m.tool_calls -%}<tc>{\"name\": \"{{ m.tool_calls[0].function.name }}\", oops}</tc>"
      "{%- else -%}[{{ m.role }}]{{ m.content }}{%- endif -%}{%- endfor -%}").encode()),
    ("json call without a closing brace",
     (LOOP + "{%- if m.tool_calls -%}<tc>{\"name\": \"{{ m.tool_calls[0].function.name }}\"</tc>"
      "{%- else -%}[{{ m.role }}]{{ m.content }}{%- endif -%}{%- endfor -%}").encode()),
    ("json call without an opening brace",
     (LOOP + "{%- if m.tool_calls -%}<tc>name: \"{{ m.tool_calls[0].function.name }}\"</tc>"
      "{%- else -%}[{{ m.role }}]{{ m.content }}{%- endif -%}{%- endfor -%}").encode()),
    ("json calls, id and array",
     (LOOP + "{%- if m.tool_calls -%}<calls>[{%- for c in m.tool_calls -%}{\"id\": \"{{ c.id }}\", \"name\": "
      "\"{{ c.function.name }}\", \"arguments\": {{ c.function.arguments | tojson }}}{{ ', ' if not loop.last }}"
      "{%- endfor -%}]</calls>{%- else -%}<|{{ m.role }}|>{{ m.content }}<|end|>{%- endif -%}{%- endfor -%}"
      "{%- if add_generation_prompt -%}<|assistant|>{%- endif -%}").encode()),
    ("tagged calls with ids",
     (LOOP + "{%- if m.tool_calls -%}{%- for c in m.tool_calls -%}[CALL]{{ c.function.name }}[ID]{{ c.id }}[ARGS]"
      "{%- for k, v in c.function.arguments.items() -%}<arg={{ k }}>{{ v }}</arg>{%- endfor -%}[/CALL]"
      "{%- endfor -%}{%- else -%}<{{ m.role }}>{{ m.content }}</{{ m.role }}>{%- endif -%}{%- endfor -%}").encode()),
    ("think markers",
     (LOOP + "<{{ m.role }}>{%- if m.reasoning_content -%}<think>{{ m.reasoning_content }}</think>{%- endif -%}"
      "{{ m.content }}</{{ m.role }}>{%- endfor -%}{%- if add_generation_prompt -%}<assistant>"
      "{%- if enable_thinking -%}<think>{%- endif -%}{%- endif -%}").encode()),
    ("typed content only (string content becomes a text part)",
     (LOOP + "{%- set head = m.content[0] if m.content else none -%}<{{ m.role }}>"
      "{%- if m.content is not string and m.content is not none -%}{%- for p in m.content -%}"
      "{%- if p['type'] == 'text' -%}{{ p['text'] }}{%- endif -%}{%- endfor -%}{%- endif -%}"
      "{%- if m.reasoning_content -%}<think>{{ m.reasoning_content }}</think>{%- endif -%}"
      "{%- if m.tool_calls -%}{%- for c in m.tool_calls -%}<tool_call>{{ c.function | tojson }}</tool_call>"
      "{%- endfor -%}{%- endif -%}</{{ m.role }}>{%- endfor -%}{%- if add_generation_prompt -%}<assistant>"
      "{%- endif -%}").encode()),
    ("system prompt with tools", ("{%- if tools -%}<tools>{{ tools | tojson }}</tools>{%- endif -%}" + LOOP +
                                  "{%- if m.tool_calls -%}<tool_call>{{ m.tool_calls[0].function | tojson }}"
                                  "</tool_call>{%- else -%}<{{ m.role }}>{{ m.content }}{%- endif -%}"
                                  "{%- endfor -%}").encode()),
]


def main():
    s = oracle.Suite("oracle_chat_analyze")
    kit = oracle.kit_or_skip(s)
    shared = oracle.shared_or_skip(s)
    r = subprocess.run(["make", "-s", "build/chat-analyze-driver", "build/kit-chat-analyze"], cwd=ROOT,
                       capture_output=True, text=True)
    if not s.check("make build/chat-analyze-driver build/kit-chat-analyze", r.returncode == 0,
                   (r.stdout + r.stderr)[-2000:]):
        s.finish()
    kit_argv = [kit.tool("sid-run"), os.path.join(BUILD, "kit-chat-analyze")]
    driver = [os.environ.get("CHAT_ANALYZE_DRIVER") or os.path.join(BUILD, "chat-analyze-driver")]
    tmpls = shared_templates(shared)
    s.check("templates: at least 78 found", len(tmpls) >= 78, f"{len(tmpls)} under {shared}/templates")
    compare(s, "templates", tmpls, kit_argv, driver)
    compare(s, "tokens", tmpls, kit_argv, driver, "<s>", "</s>")
    compare(s, "crlf", crlf_cases(tmpls), kit_argv, driver)
    compare(s, "specialized", specialized_cases(), kit_argv, driver)
    compare(s, "edge", EDGE, kit_argv, driver)
    s.finish()


if __name__ == "__main__":
    main()
