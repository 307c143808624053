#!/usr/bin/env python3
"""oracle_schema.py -- src/sampling/json_schema.c against llama.cpp b11669's own JSON schema -> GBNF converter.

The oracle is b11669's json_schema_to_grammar() itself, called in process from the kit's libllama-common.so by
testing/kit_schema.cpp (built with g++ against llama.cpp's headers, run under sid-run); bankml's side is
testing/schema_driver.c (json.c's parser, then json_schema_to_gbnf). Both read the same JSON texts and answer
with the grammar or the exception's text; the two must be byte for byte equal, grammar or error. Groups:

  llama.cpp-tests   every schema of llama.cpp's tests/test-json-schema-to-grammar.cpp (testing/schemas/
                    llama_cpp_tests.json, taken from the source as data)
  own               bankml's schemas, every construct and refusal (testing/schemas/own.json)
  generated         GENERATED random schemas from a small grammar of schema constructs (seed SEED): types
                    and type arrays, objects with names from a pool that collides on purpose (reserved
                    names, "*", "", unicode, quotes), required and additionalProperties, arrays, tuples,
                    counts (some invalid), strings with lengths, formats and patterns (valid, unsupported
                    and invalid ones), integer bounds (int64 edges, fractions, exclusives), enum and const
                    with random JSON values, anyOf/oneOf/allOf, $defs with $refs (recursive ones too)
  bankml-limits     what b11669 cannot answer (an allOf $ref cycle recurses until its stack ends; a schema
                    nested deeper than JSON_SCHEMA_MAX_DEPTH): bankml refuses with its reason, no kit run.
                    A generated schema that crashes the kit (an allOf inlining, through a $ref, a schema
                    that contains it: b11669 recurses until its stack ends) must be refused by bankml
                    (JSON_SCHEMA_LIMIT); it counts as CRASH in the group's line
  llama-server      a handful of schemas posted to llama-server b11669's /completion (stories260K): its
                    generation_settings.grammar equals bankml's grammar, and a refusal's 400 message equals
                    `Field 'json_schema': "json_schema": ` + bankml's text; {} is {"type":"object"} there
                    (json_schema_to_gbnf's JSON_SCHEMA_FIELD flag)

Texts the kit's nlohmann refuses to parse (1e400: out_of_range.406) are not converter cases; the request
parser (src/api/serve.c) refuses them first, as llama-server does. Prints `N passed, N failed, N skipped`.
"""
import json, os, random, subprocess, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle

ROOT = oracle.ROOT
BUILD = os.path.join(ROOT, "build")
SEED = 20250611
GENERATED = 3000


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
        raise RuntimeError(f"{os.path.basename(argv[-1])} exited {r.returncode}: {r.stderr[-500:]!r}")
    return unframe(r.stdout)


# ---- the generated schemas ----

NAMES = ["a", "b", "name", "id", "root", "string", "number", "value", "char", "space", "dot", "item", "*", "",
         "and", "also", "a-b", "a b", "é", "名", "q\"uote", "back\\slash", "x1", "alternative-0", "kv", "rest"]
PATTERNS = ["^abc$", "^[a-z]+$", "^[0-9]{2,4}$", "^(ab|cd)*e?$", "^.+$", "^a.b.c$", "^(?:xy){3}z{1,}$",
            "^\\d+$", "^(?=a)b$", "abc", "^a{,3}b{2}$", "^(a$", "^a)$", "^[abc$", "^ab\\$", "^*a$", "^{2}$",
            "^a{x}$", "^\\.\\*\\[x\\]$", "^\"q\"$", "^[\\x41-\\x5A]{1,2}[\\-\\]]$", "^é+名?$", "^(a(b(c)))$",
            "^a]$", "^a{1,2,3}$", "^(ab){2}(ab){3}$", "^[^\"\\\\]*$", "^a|b|c$", "^((a|b){2}c)+$", "^\\u00e9\\n$"]


class Gen:
    def __init__(self, seed):
        self.r = random.Random(seed)
        self.defs = []

    def value(self, d=0):
        r = self.r
        k = r.randrange(9 if d < 2 else 6)
        if k == 0: return None
        if k == 1: return r.choice([True, False])
        if k == 2: return r.choice([0, 1, -1, 7, 42, 10 ** 12, -(2 ** 63), 2 ** 64 - 1])
        if k == 3: return r.choice([0.5, -2.25, 1e-7, 3.0, 1e21, 0.1])
        if k in (4, 5): return r.choice(["x", "red", "", "with \"q\"", "new\nline", "é", "\u0001", "a\\b", "名"])
        if k in (6, 7): return [self.value(d + 1) for _ in range(r.randrange(3))]
        return {r.choice(NAMES): self.value(d + 1) for _ in range(r.randrange(3))}

    def bound(self):
        r = self.r
        return r.choice([0, 1, 3, 9, 10, 25, 99, 100, 1234, -1, -5, -100, -99999, 2 ** 63 - 1, -(2 ** 63),
                         r.randrange(-10 ** 6, 10 ** 6), r.randrange(-10 ** 18, 10 ** 18), 1.5, -2.5, 1e3]) \
            if r.random() < 0.98 else "3"

    def count(self):
        r = self.r
        return r.choice([0, 1, 2, 3, 5, 0, 1, 2, -1, 2.0]) if r.random() < 0.97 else r.choice([-3, "2", 2 ** 32 + 1])

    def obj(self, d):
        r = self.r
        s = {}
        if r.random() < 0.8: s["type"] = "object"
        if r.random() < 0.85:
            s["properties"] = {r.choice(NAMES): self.schema(d + 1) for _ in range(r.randrange(6))}
        if r.random() < 0.6 and "properties" in s:
            names = list(s["properties"]) + ["zz"]
            s["required"] = r.sample(names, r.randrange(len(names) + 1))
        if r.random() < 0.4:
            s["additionalProperties"] = r.choice([True, False, {"type": "integer"}, {}, self.schema(d + 1)])
        return s

    def schema(self, d=0):
        r = self.r
        if d > 4:
            return {"type": r.choice(["string", "integer", "number", "boolean", "null"])}
        k = r.randrange(20)
        if k < 4: return self.obj(d)
        if k == 4:
            s = {"type": "array"}
            if r.random() < 0.8: s["items"] = self.schema(d + 1)
            if r.random() < 0.5: s["minItems"] = self.count()
            if r.random() < 0.5: s["maxItems"] = self.count()
            return s
        if k == 5:
            return {"type": "array", r.choice(["prefixItems", "items"]): [self.schema(d + 1) for _ in range(r.randrange(1, 4))]}
        if k == 6:
            s = {"type": "string"}
            if r.random() < 0.5: s["minLength"] = self.count()
            if r.random() < 0.5: s["maxLength"] = self.count()
            if r.random() < 0.3: s["format"] = r.choice(["date", "time", "date-time", "uuid", "uuid3", "email", "uuid7"])
            return s
        if k == 7:
            s = {"pattern": r.choice(PATTERNS)}
            if r.random() < 0.7: s["type"] = "string"
            return s
        if k == 8:
            s = {"type": "integer"}
            for key in r.sample(["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"], r.randrange(3)):
                s[key] = self.bound()
            return s
        if k == 9: return {"type": r.choice(["number", "boolean", "null", "string", "integer"])}
        if k == 10: return {"enum": [self.value() for _ in range(r.randrange(1, 5))]}
        if k == 11: return {"const": self.value()}
        if k == 12: return {r.choice(["anyOf", "oneOf"]): [self.schema(d + 1) for _ in range(r.randrange(1, 4))]}
        if k == 13:
            parts = [r.choice([self.obj(d + 1), {"enum": ["a", "b", 1]}, {"enum": ["b", 1, "c"]},
                               {"anyOf": [self.obj(d + 2), self.obj(d + 2)]}]) for _ in range(r.randrange(1, 4))]
            if self.defs and r.random() < 0.4: parts.append({"$ref": "#/$defs/" + r.choice(self.defs)})
            return {"allOf": parts}
        if k == 14:
            s = self.schema(d + 1)
            if not isinstance(s, dict):
                s = {}
            s["type"] = r.sample(["string", "integer", "null", "object", "array", "boolean"], r.randrange(1, 4))
            return s
        if k in (15, 16) and self.defs:
            return {"$ref": "#/$defs/" + r.choice(self.defs)}
        if k == 17 and r.random() < 0.4:
            return r.choice([{}, {"type": "strin"}, {"type": 3}, {"enum": []}, {"anyOf": []}, {"properties": []},
                             {"$ref": "http://x/y"}, {"$ref": "#/$defs/none"}, {"minLength": -1}, {"type": []}, 5])
        return {"type": r.choice(["string", "integer", "boolean"])}

    def document(self):
        r = self.r
        self.defs = []
        defs = {}
        if r.random() < 0.35:
            self.defs = r.sample(["A", "B", "node", "ünï", "x y"], r.randrange(1, 4))
            for n in self.defs:
                defs[n] = self.schema(1)
                while isinstance(defs[n], dict) and "$ref" in defs[n]:   # no pure $ref cycles (see bankml-limits)
                    defs[n] = self.schema(1)
        s = self.schema(0)
        if defs and isinstance(s, dict):
            s["$defs"] = defs
        return json.dumps(s, ensure_ascii=r.random() < 0.3).encode()


def load(name):
    with open(os.path.join(ROOT, "testing", "schemas", name), encoding="utf-8") as f:
        return [(c["name"], c["schema"].encode()) for c in json.load(f)["cases"]]


def run_kit(argv, texts):
    """The kit's frames; a text that crashes b11669 (a stack overflow: an allOf that inlines a schema
    containing it recurses without end) gets ("CRASH", b"") and the run goes on after it."""
    out = []
    while len(out) < len(texts):
        r = subprocess.run(argv, input=frames(texts[len(out):]), capture_output=True)
        got = unframe(r.stdout)
        out += got
        if r.returncode == 0:
            break
        if r.returncode > 0 or len(out) >= len(texts):
            raise RuntimeError(f"kit-schema exited {r.returncode}: {r.stderr[-500:]!r}")
        out.append(("CRASH", b""))
    return out


def compare(s, group, cases, kit_argv, driver_argv):
    texts = [t for _, t in cases]
    try:
        want = run_kit(kit_argv, texts)
        got = run(driver_argv, texts)
    except (RuntimeError, OSError) as e:
        s.fail(f"{group}: run", str(e))
        return
    if not s.check(f"{group}: frame counts", len(want) == len(got) == len(texts),
                   f"{len(texts)} in, kit {len(want)}, bankml {len(got)}"):
        return
    bad = shown = unparsed = 0
    tags = {}
    for (name, text), w, g in zip(cases, want, got):
        if w[0] == "PARSE":
            unparsed += 1
            continue
        tags[w[0]] = tags.get(w[0], 0) + 1
        if w == g or (w[0] == "CRASH" and g[0] == "LIMIT"):
            s.passed += 1
            continue
        s.failed += 1
        bad += 1
        if shown < 8:
            shown += 1
            print(f"FAIL  {group} {name}: {text[:300].decode(errors='replace')}")
            print(f"        b11669 {w[0]}: {w[1][:600].decode(errors='replace')!r}")
            print(f"        bankml {g[0]}: {g[1][:600].decode(errors='replace')!r}")
    print(f"{'ok   ' if not bad else 'FAIL '} {group}: {len(texts) - unparsed - bad}/{len(texts) - unparsed} identical "
          f"({', '.join(f'{v} {k}' for k, v in sorted(tags.items()))}; {unparsed} not JSON to nlohmann)", flush=True)


def limits(s, driver):
    deep = '{"type":"array","items":' * 250 + '{}' + '}' * 250
    chain = {"$defs": {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} if i < 300 else {"type": "string"} for i in range(301)},
             "$ref": "#/$defs/d0"}
    cases = [
        ("allOf $ref cycle", json.dumps({"$defs": {"a": {"$ref": "#/$defs/a"}}, "allOf": [{"$ref": "#/$defs/a"}]}),
         "LIMIT", "the JSON schema nests deeper than 200 levels (counting each $ref followed); bankml refuses it"),
        ("nesting 250 (json.c allows 128)", deep, "PARSE", None),
        ("$ref chain of 300", json.dumps(chain), "LIMIT",
         "the JSON schema nests deeper than 200 levels (counting each $ref followed); bankml refuses it"),
        ("$ref chain of 150", json.dumps({"$defs": {k: v for k, v in chain["$defs"].items()}, "$ref": "#/$defs/d150"}),
         "OK", None),
    ]
    got = run(driver, [c[1].encode() for c in cases])
    for (name, _, tag, text), g in zip(cases, got):
        s.check(f"bankml-limits: {name}", g[0] == tag and (text is None or g[1].decode() == text),
                f"want {tag} {text!r}, bankml {g[0]} {g[1][:200]!r}")


def server(s, kit, driver_field):
    shared = oracle.find_shared()
    model = os.path.join(shared, "models", "stories260K.gguf") if shared else None
    if not model or not os.path.exists(model):
        s.skip("llama-server", "no ../shared/models/stories260K.gguf")
        return
    schemas = [{}, {"type": "object", "properties": {"a": {"type": "integer", "minimum": 1, "maximum": 20}},
                    "required": ["a"]},
               {"type": "array", "items": {"type": "string", "format": "date"}, "minItems": 1, "maxItems": 2},
               {"$defs": {"n": {"type": "object", "properties": {"next": {"$ref": "#/$defs/n"}}}}, "$ref": "#/$defs/n"},
               {"type": "string", "pattern": "^[a-z]{2}\\.x$"}, {"enum": ["x", 1, None]},
               {"type": "strin"}, {"type": "string", "pattern": "^(a$"}, "text", [1]]
    got = run(driver_field, [json.dumps(x).encode() for x in schemas])
    with oracle.Server.llama(kit, model, name="llama-schema") as srv:
        for sch, g in zip(schemas, got):
            st, body = srv.post("/completion", {"prompt": "Once", "n_predict": 1, "temperature": 0, "json_schema": sch})
            name = f"llama-server: {json.dumps(sch)[:70]}"
            if g[0] == "OK":
                s.check(name, st == 200 and body.get("generation_settings", {}).get("grammar") == g[1].decode(),
                        f"status {st}, llama-server {str(body)[:300]}, bankml {g[1][:300]!r}")
            else:
                want = "Field 'json_schema': \"json_schema\": " + g[1].decode()
                msg = body.get("error", {}).get("message") if isinstance(body, dict) else None
                s.check(name, st == 400 and msg == want, f"status {st}, llama-server {msg!r}, bankml {want!r}")


def main():
    s = oracle.Suite("oracle_schema")
    kit = oracle.kit_or_skip(s)
    oracle.shared_or_skip(s)
    r = subprocess.run(["make", "-s", "build/schema-driver", "build/kit-schema"], cwd=ROOT, capture_output=True, text=True)
    if not s.check("make build/schema-driver build/kit-schema", r.returncode == 0, (r.stdout + r.stderr)[-2000:]):
        s.finish()
    kit_argv = [kit.tool("sid-run"), os.path.join(BUILD, "kit-schema")]
    driver = [os.path.join(BUILD, "schema-driver")]
    compare(s, "llama.cpp-tests", load("llama_cpp_tests.json"), kit_argv, driver)
    compare(s, "own", load("own.json"), kit_argv, driver)
    g = Gen(SEED)
    compare(s, "generated", [(f"#{i}", g.document()) for i in range(GENERATED)], kit_argv, driver)
    limits(s, driver)
    server(s, kit, driver + ["field"])
    s.finish()


if __name__ == "__main__":
    main()
