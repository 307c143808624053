"""Writes testing/schemas/ollama_extra.json: schemas for the ways Ollama v0.13.3's vendored converter
(llama.cpp 17f7f4ba) differs from b11669's, run by testing/gen_ollama_schema.sh beside the other lists."""
import json, os

C = []
def add(name, schema):
    C.append({"name": name, "schema": schema if isinstance(schema, str) else json.dumps(schema)})

add("minItems boolean (get<int> takes it)", {"type": "array", "items": {"type": "string"}, "minItems": True})
add("minItems string (type_error)", {"type": "array", "items": {"type": "string"}, "minItems": "2"})
add("maxItems float (not an integer: unbounded)", {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3.5})
add("minItems negative", {"type": "array", "items": {"type": "null"}, "minItems": -2, "maxItems": 2})
add("minItems int min (wraps)", '{"type": "array", "items": {}, "minItems": -2147483648, "maxItems": -2147483648}')
add("minItems float out of int range", {"type": "array", "items": {"type": "boolean"}, "minItems": 1e20})
add("minLength boolean", {"type": "string", "minLength": True, "maxLength": 4})
add("minLength float truncates", {"type": "string", "minLength": 2.7})
add("maxLength zero", {"type": "string", "maxLength": 0})
add("minimum boolean (type_error)", {"type": "integer", "minimum": True})
add("minimum float truncates", {"type": "integer", "minimum": 1.5, "maximum": 20.9})
add("exclusive bounds", {"type": "integer", "exclusiveMinimum": -10, "exclusiveMaximum": 10})
add("minimum above maximum", {"type": "integer", "minimum": 50, "maximum": 7})
add("minimum int64 min (no bound: runtime_error)", '{"type": "integer", "minimum": -9223372036854775808}')
add("minimum big unsigned", '{"type": "integer", "minimum": 18446744073709551615}')
add("negative range", {"type": "integer", "minimum": -123, "maximum": -7})
add("properties an array (items() keys are indices)", {"properties": [{"type": "string"}, {"type": "number"}], "required": ["0"]})
add("properties a string (one item, key \"\")", {"properties": "abc"})
add("property null schema (empty: object)", {"properties": {"a": None, "b": []}})
add("property true schema (unrecognized)", {"properties": {"a": True}})
add("enum a scalar", {"enum": 5})
add("enum an object (its values)", {"enum": {"x": "a", "y": 2}})
add("enum null (none)", {"enum": None})
add("const float forms", {"properties": {"a": {"const": 1e2}, "b": {"const": -0.0}, "c": {"const": [1, {"k": "v"}]}}})
add("oneOf and anyOf (oneOf wins)", {"oneOf": [{"type": "string"}], "anyOf": [{"type": "number"}]})
add("oneOf at root names alternative-", {"oneOf": [{"type": "string"}, {"type": "integer"}, {"const": "x"}]})
add("type array", {"type": ["string", "null", "integer"], "minLength": 2})
add("type value primitive", {"type": "value"})
add("type char primitive", {"properties": {"c": {"type": "char"}, "u": {"type": "uuid"}, "d": {"type": "decimal-part"}}})
add("type unknown", {"type": "strin"})
add("format uuid3 untyped", {"format": "uuid3"})
add("format uuid in property", {"properties": {"id": {"type": "string", "format": "uuid"}}})
add("formats date time date-time", {"properties": {"d": {"format": "date"}, "t": {"type": "string", "format": "time"},
                                                   "dt": {"format": "date-time"}}, "required": ["d", "t", "dt"]})
add("format unknown", {"type": "string", "format": "email"})
add("format not string at depth", {"properties": {"a": {"format": []}}})
add("reserved property names", {"properties": {"string": {"type": "string"}, "root": {"type": "integer"}, "space": {}}})
add("allOf enum intersection", {"allOf": [{"enum": ["a", "b", "c"]}, {"enum": ["b", "c", "d"]}]})
add("allOf enum no intersection", {"allOf": [{"enum": ["a"]}, {"enum": ["b"]}, {"properties": {"x": {}}}]})
add("allOf with anyOf and ref", {"$defs": {"p": {"properties": {"a": {"type": "string"}}}},
                                 "allOf": [{"$ref": "#/$defs/p"}, {"anyOf": [{"properties": {"b": {"type": "integer"}}},
                                                                             {"properties": {"c": {"type": "boolean"}}}]}]})
add("allOf an object (its values)", {"allOf": {"x": {"properties": {"a": {}}}}})
add("allOf self ref (unbounded recursion)", {"$defs": {"a": {"allOf": [{"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"})
add("allOf type string", {"type": "string", "allOf": [{"properties": {"q": {"type": "null"}}}]})
add("prefixItems tuple", {"prefixItems": [{"type": "string"}, {"type": "integer"}]})
add("items array tuple typed", {"type": "array", "items": [{"type": "boolean"}, {"const": 3}]})
add("additionalProperties schema", {"additionalProperties": {"type": "number"}})
add("additionalProperties false alone", {"additionalProperties": False})
add("additionalProperties 1 (not true)", {"type": "object", "additionalProperties": 1})
add("additionalProperties true with props", {"properties": {"a": {}, "ab": {}, "b": {"type": "string"}}, "required": ["b"],
                                             "additionalProperties": True})
add("additionalProperties keys with prefixes", {"properties": {"and": {}, "also": {}, "a": {}}, "additionalProperties": {"type": "integer"}})
add("property named star", {"properties": {"*": {"type": "string"}, "x": {}}, "additionalProperties": True})
add("property named empty", {"properties": {"": {"type": "string"}}, "additionalProperties": False})
add("empty key with additional", {"properties": {"": {}}, "additionalProperties": True})
add("non-ASCII keys with additional (byte trie)", {"properties": {"é": {}, "名前": {"type": "string"}}, "additionalProperties": True})
add("required non-strings skipped", {"properties": {"a": {}, "b": {}}, "required": ["b", 3, None]})
add("many properties (rehash)", {"type": "object", "properties": {"p%03d" % i: {"type": ["string", "integer"][i % 2]} for i in range(300)},
                                 "required": ["p%03d" % i for i in range(0, 300, 3)]})
add("ref https with fragment", {"$ref": "https://example.com/s.json#/definitions/a"})
add("ref https without fragment", {"$ref": "https://example.com/s.json"})
add("ref https empty fragment", {"properties": {"a": {"$ref": "https://example.com/s.json#"}}})
add("ref unsupported", {"$ref": "#foo"})
add("ref relative unsupported", {"$ref": "other.json#/a"})
add("ref to missing", {"$ref": "#/definitions/nope"})
add("ref into array", {"$defs": {"list": [{"type": "string"}, {"type": "integer"}]}, "$ref": "#/$defs/list/1"})
add("ref array index bad", {"$defs": {"list": [{"type": "string"}]}, "$ref": "#/$defs/list/x"})
add("ref array index 1abc", {"$defs": {"list": [{"type": "string"}, {"type": "null"}]}, "$ref": "#/$defs/list/1abc"})
add("ref array index -1", {"$defs": {"list": [{"type": "string"}]}, "$ref": "#/$defs/list/-1"})
add("ref recursive", {"$defs": {"node": {"properties": {"v": {"type": "integer"}, "next": {"$ref": "#/$defs/node"}}}},
                      "$ref": "#/$defs/node"})
add("ref siblings ignored", {"$defs": {"s": {"type": "string"}}, "$ref": "#/$defs/s", "type": "integer"})
add("ref twice same target", {"$defs": {"s": {"type": "string"}}, "properties": {"a": {"$ref": "#/$defs/s"}, "b": {"$ref": "#/$defs/s"}}})
add("ref name clash", {"definitions": {"a-b": {"type": "string"}, "a_b": {"type": "integer"}},
                       "properties": {"x": {"$ref": "#/definitions/a-b"}, "y": {"$ref": "#/definitions/a_b"}}})
add("ref pointer escapes not decoded", {"$defs": {"a~1b": {"type": "null"}}, "$ref": "#/$defs/a~1b"})
for i, (nm, pat) in enumerate([
        ("unanchored", "abc"), ("start only", "^abc"), ("empty anchors", "^$"), ("top-level close paren cuts", "^a)b$"),
        ("unclosed group", "^(abc$"), ("unbalanced square", "^[abc$"), ("curly open", "^a{2,}$"), ("curly upper only", "^a{,3}$"),
        ("curly invalid", "^a{x}$"), ("curly three values", "^a{1,2,3}$"), ("curly unterminated", "^a{2$"),
        ("group repeat", "^(ab){2}c{3}$"), ("digit escape kept raw", "^\\d+$"), ("escaped dot", "^a\\.b$"),
        ("quote", "^a\"b$"), ("curly out of range", "^a{99999999999}$"), ("dot star", "^.*x.$"), ("alternation", "^(a|bc)|d$"),
        ("class escapes", "^[\\]a-z\\\\]+$"), ("caret and dollar literal", "^a^b$c$"), ("stray close curly", "^a}$"),
        ("trailing backslash", "^ab\\$"), ("multi-char literal repeat", "^abc+$"), ("curly after group twice", "^(a){2}(a){3}$"),
        ("dot repeated", "^.{2,5}$"), ("non-ascii", "^é+ñ$")]):
    add("pattern " + nm, {"type": "string", "pattern": pat})
add("pattern untyped in property", {"properties": {"code": {"pattern": "^[A-Z]{3}-[0-9]{2}$"}}, "required": ["code"]})
add("pattern with type integer (ignored)", {"type": "integer", "pattern": "^1$"})

json.dump({"source": "bankml's schemas for Ollama v0.13.3's converter (testing/gen_ollama_schema.sh); "
                     "written by testing/schemas/make_ollama_extra.py", "cases": C},
          open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ollama_extra.json"), "w"), indent=1, ensure_ascii=False)
print(len(C))
