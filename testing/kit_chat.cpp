/*
 * kit_chat.cpp -- the oracle for src/text/peg*.c and chat_peg.c: llama.cpp
 * b11669's chat layer (common/chat.cpp, its PEG parser common/peg-parser.cpp,
 * the chat mapper common/chat-peg-parser.cpp) from libllama-common.so, run in
 * process. Reusable by any suite (testing/oracle_peg.py has the Python side:
 * kit_chat_run()).
 *
 * Input on stdin: frames "<decimal length>\n<that many bytes of JSON>", each
 *   {"template": "...jinja source...", "bos": "<s>", "eos": "</s>",
 *    "inputs": {"messages": [...], "tools": [...], "tool_choice": "auto",
 *               "reasoning_format": "auto", "enable_thinking": true,
 *               "chat_template_kwargs": {"k": <json>}, "json_schema": <json>,
 *               "add_generation_prompt": true, "parallel_tool_calls": false},
 *    "answers": ["text", ...],          optional: texts to parse
 *    "prefixes": true}                  optional: also parse every byte prefix
 *                                       of each answer as partial
 * Consecutive frames with the same template, bos and eos share one
 * common_chat_templates_init (the template's analysis runs once).
 * Every "inputs" key is optional (b11669's defaults: tool_choice auto,
 * reasoning_format none, enable_thinking true, add_generation_prompt true).
 * Output, one frame per input:
 *   "OK <n>\n<n bytes of JSON>\n"   the result (below)
 *   "ERR <n>\n<n bytes>\n"          the what() of the exception init/apply threw
 *   "PARSE <n>\n<n bytes>\n"        the frame is not JSON, or lacks "template"
 * The result JSON:
 *   {"format": "peg-native", "prompt", "generation_prompt", "grammar", "grammar_lazy",
 *    "grammar_triggers": [{"type": 1, "value": "...", "token": -1}], "preserved_tokens": [...],
 *    "additional_stops": [...], "supports_thinking", "thinking_start_tag", "thinking_end_tags": [...],
 *    "parser": "<arena text>"  ("" when b11669 left the arena empty),
 *    "parser_grammar": build_grammar of the arena with the lazy flag as apply used it,
 *    "schema_check": [names of schema parsers whose node this kit could not write back exactly],
 *    "parses": [{"final": MSG, "partial": MSG, "prefixes": [MSG for prefix 0..len-1], "stream": [STEP...]}]}
 *   MSG = {"role", "content", "reasoning_content", "tool_calls": [{"name","arguments","id"}]}
 *         or {"error": "<what()>"}
 * "final" parses the whole answer with is_partial false, "partial" with is_partial true.
 * "stream" (with "prefixes"): for byte prefixes 1..len as partial, then the whole as final, the
 * deltas of common_chat_msg_diff::compute_diffs against the last message that parsed (an empty
 * assistant message at first): STEP = [{"reasoning_content_delta", "content_delta",
 * "tool_call_index" (-1: none), "name", "arguments", "id"}, ...], or {"error": parse error},
 * or {"diff_error": compute_diffs' exception}.
 *
 * b11669 keeps the parser as a common_peg_arena object (common_chat_params.parser) and has
 * no text form of it any more (v0.5.0's save()/load() are gone from the library). The
 * arena text is therefore written here, in v0.5.0's save() format
 *   {"parsers":[{"type":"literal","literal":"x"},...],"rules":{"name":id,...},"root":id}
 * (nlohmann's dump; the rules ordered by parser id, where v0.5.0 wrote its unordered_map's
 * order), with one addition:
 * a schema parser carries "schema": the JSON schema of its node, written back from the
 * typed node (common/json-schema.h) -- the C side converts it with its own json_schema.c.
 * The kit checks each written-back schema by converting it with the library and comparing
 * with the library's grammar for the node itself; names that differ go to "schema_check".
 *
 * Declarations: b11669's common_chat_params (its prompt is a common_chat_prompt of parts) / common_chat_parser_params / common_chat_input
 * differ from v0.5.0's chat.h (the checkout of ../shared/oracle/llama-src.sh), so the chat
 * structs are declared below as b11669 has them (checked against nm -DC of the library:
 * common_chat_peg_parse(common_peg_arena const&, common_chat_input const&, bool,
 * common_chat_parser_params const&)); the PEG structs and common_json come from v0.5.0's
 * peg-parser.h, json.h, json-schema.h (the variant's 21 alternatives match the library's
 * common_peg_arena::add_parser signature). Built by testing/oracle.mk (build/kit-chat) and
 * run under sid-run.
 */
#include "peg-parser.h"
#include "json-schema-to-grammar.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

/* ---- b11669's chat declarations (common/chat.h, common/common.h) ---- */
typedef int32_t llama_token;
struct llama_model;

enum common_reasoning_format {
    COMMON_REASONING_FORMAT_NONE,
    COMMON_REASONING_FORMAT_AUTO,
    COMMON_REASONING_FORMAT_DEEPSEEK_LEGACY,
    COMMON_REASONING_FORMAT_DEEPSEEK,
};
enum common_grammar_trigger_type { COMMON_GRAMMAR_TRIGGER_TYPE_TOKEN };
struct common_grammar_trigger {
    common_grammar_trigger_type type;
    std::string value;
    llama_token token = -1;
};
struct common_chat_tool_call { std::string name, arguments, id; };
struct common_chat_msg_content_part { std::string type, text; };
struct common_chat_msg {
    std::string role, content;
    std::vector<common_chat_msg_content_part> content_parts;
    std::vector<common_chat_tool_call> tool_calls;
    std::string reasoning_content, tool_name, tool_call_id;
};
struct common_chat_tool { std::string name, description, parameters; };
struct common_chat_msg_diff {
    std::string reasoning_content_delta;
    std::string content_delta;
    size_t tool_call_index = std::string::npos;
    common_chat_tool_call tool_call_delta;
    static std::vector<common_chat_msg_diff> compute_diffs(const common_chat_msg &prv, const common_chat_msg &cur);
};
enum common_chat_tool_choice { COMMON_CHAT_TOOL_CHOICE_AUTO };
enum common_chat_format { COMMON_CHAT_FORMAT_CONTENT_ONLY };
enum common_chat_continuation { COMMON_CHAT_CONTINUATION_NONE };
enum common_chat_role { COMMON_CHAT_ROLE_UNKNOWN };
struct common_chat_msg_delimiter {
    common_chat_role role = COMMON_CHAT_ROLE_UNKNOWN;
    std::string delimiter;
    std::vector<llama_token> tokens;
};
struct common_chat_msg_delimiters { std::vector<common_chat_msg_delimiter> delimiters; };
struct common_chat_templates_inputs {
    std::vector<common_chat_msg> messages;
    std::string grammar;
    std::string json_schema;
    bool add_generation_prompt = true;
    common_chat_continuation continue_final_message = COMMON_CHAT_CONTINUATION_NONE;
    bool use_jinja = true;
    std::vector<common_chat_tool> tools;
    common_chat_tool_choice tool_choice = COMMON_CHAT_TOOL_CHOICE_AUTO;
    bool parallel_tool_calls = false;
    common_reasoning_format reasoning_format = COMMON_REASONING_FORMAT_NONE;
    bool enable_thinking = true;
    std::chrono::system_clock::time_point now = std::chrono::system_clock::now();
    std::map<std::string, std::string> chat_template_kwargs;
    bool add_bos = false;
    bool add_eos = false;
    bool force_pure_content = false;
};
/* b11669 keeps the prompt in parts (measured: 40-byte parts, a string then a flag that is
 * set on the parts that came from message text); str() joins them. */
struct common_chat_prompt_part { std::string text; bool from_message = false; };
struct common_chat_prompt {
    std::vector<common_chat_prompt_part> parts;
    std::string str() const;
};
struct common_chat_params {
    common_chat_format format = COMMON_CHAT_FORMAT_CONTENT_ONLY;
    common_chat_prompt prompt;
    std::string grammar;
    bool grammar_lazy = false;
    std::string generation_prompt;
    bool supports_thinking = false;
    std::string thinking_start_tag;
    std::vector<std::string> thinking_end_tags;
    std::vector<common_grammar_trigger> grammar_triggers;
    std::vector<std::string> preserved_tokens;
    std::vector<std::string> additional_stops;
    common_peg_arena parser;
    common_chat_msg_delimiters message_delimiters;
};
struct common_chat_input {
    std::string text;
    std::vector<llama_token> tokens;
    common_chat_input() = default;
    explicit common_chat_input(std::string t) : text(std::move(t)), tokens(text.size(), -1) {}
};
struct common_chat_parser_params {
    common_chat_format format = COMMON_CHAT_FORMAT_CONTENT_ONLY;
    common_chat_input generation_prompt;
    bool debug = false;
    common_peg_arena parser = {};
};
struct common_chat_templates;
void common_chat_templates_free(struct common_chat_templates *tmpls);
struct common_chat_templates_deleter { void operator()(common_chat_templates *t) { common_chat_templates_free(t); } };
typedef std::unique_ptr<struct common_chat_templates, common_chat_templates_deleter> common_chat_templates_ptr;
common_chat_templates_ptr common_chat_templates_init(const struct llama_model *model, const std::string &tmpl,
                                                     const std::string &bos, const std::string &eos);
common_chat_params common_chat_templates_apply(const common_chat_templates *tmpls, const common_chat_templates_inputs &inputs);
const char *common_chat_format_name(common_chat_format format);
common_chat_msg common_chat_peg_parse(const common_peg_arena &src, const common_chat_input &input, bool is_partial,
                                      const common_chat_parser_params &params);
common_reasoning_format common_reasoning_format_from_name(const std::string &format);
common_chat_tool_choice common_chat_tool_choice_parse_oaicompat(const std::string &tool_choice);
std::vector<common_chat_msg> common_chat_msgs_parse_oaicompat(const common_json &messages);
std::vector<common_chat_tool> common_chat_tools_parse_oaicompat(const common_json &tools);

/* the arena's private members, in declaration order (peg-parser.h) */
struct kit_arena_view {
    std::vector<common_peg_parser_variant> parsers;
    std::unordered_map<std::string, common_peg_parser_id> rules;
    common_peg_parser_id root;
};
static_assert(sizeof(kit_arena_view) == sizeof(common_peg_arena), "arena layout");

static void put(const char *tag, const std::string &s)
{
    std::printf("%s %zu\n", tag, s.size());
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fputc('\n', stdout);
}

/* ---- a typed schema node written back as JSON schema ---- */
static common_json kit_schema_json(const common_chat_schema &s, common_json &defs);

static common_json kit_schema_list(const std::vector<common_chat_schema_ptr> &v, common_json &defs)
{
    common_json a = common_json::array();
    for (const auto &c : v) a.push_back(kit_schema_json(*c, defs));
    return a;
}

static common_json kit_schema_json(const common_chat_schema &s, common_json &defs)
{
    common_json j = common_json::object();
    switch (s.kind()) {
    case common_chat_schema::KIND_ANY: break;
    case common_chat_schema::KIND_REF: {
        const auto &r = static_cast<const common_chat_schema_ref &>(s);
        j["$ref"] = r.ref;
        std::string pre = "#/$defs/";
        if (r.target && r.ref.compare(0, pre.size(), pre) == 0) {
            std::string k = r.ref.substr(pre.size());
            if (!defs.contains(k)) {
                defs[k] = common_json::object();
                common_json d = kit_schema_json(*r.target, defs);
                defs[k] = d;
            }
        }
        break;
    }
    case common_chat_schema::KIND_ANY_OF:
        j["anyOf"] = kit_schema_list(static_cast<const common_chat_schema_any_of &>(s).children, defs);
        break;
    case common_chat_schema::KIND_ALL_OF:
        j["allOf"] = kit_schema_list(static_cast<const common_chat_schema_all_of &>(s).children, defs);
        break;
    case common_chat_schema::KIND_CONST: j["const"] = static_cast<const common_chat_schema_const &>(s).value; break;
    case common_chat_schema::KIND_ENUM: {
        common_json a = common_json::array();
        for (const auto &v : static_cast<const common_chat_schema_enum &>(s).values) a.push_back(v);
        j["enum"] = a;
        break;
    }
    case common_chat_schema::KIND_NULL: j["type"] = "null"; break;
    case common_chat_schema::KIND_BOOLEAN: j["type"] = "boolean"; break;
    case common_chat_schema::KIND_NUMBER: j["type"] = "number"; break;
    case common_chat_schema::KIND_INTEGER: {
        const auto &n = static_cast<const common_chat_schema_integer &>(s);
        j["type"] = "integer";
        if (n.minimum != INT64_MIN) j["minimum"] = n.minimum;
        if (n.maximum != INT64_MAX) j["maximum"] = n.maximum;
        break;
    }
    case common_chat_schema::KIND_STRING: {
        const auto &n = static_cast<const common_chat_schema_string &>(s);
        static const char *fmt[] = { "", "uuid", "date", "time", "date-time" };
        j["type"] = "string";
        if (!n.pattern.empty()) j["pattern"] = n.pattern;
        if (n.format > 0 && n.format < 5) j["format"] = fmt[n.format];
        if (n.min_length) j["minLength"] = n.min_length;
        if (n.max_length >= 0) j["maxLength"] = n.max_length;
        break;
    }
    case common_chat_schema::KIND_ARRAY: {
        const auto &n = static_cast<const common_chat_schema_array &>(s);
        j["type"] = "array";
        if (n.items && n.items->kind() != common_chat_schema::KIND_ANY) j["items"] = kit_schema_json(*n.items, defs);
        if (n.min_items) j["minItems"] = n.min_items;
        if (n.max_items >= 0) j["maxItems"] = n.max_items;
        break;
    }
    case common_chat_schema::KIND_TUPLE:
        j["type"] = "array";
        j["prefixItems"] = kit_schema_list(static_cast<const common_chat_schema_tuple &>(s).items, defs);
        break;
    case common_chat_schema::KIND_OBJECT: {
        const auto &n = static_cast<const common_chat_schema_object &>(s);
        j["type"] = "object";
        common_json props = common_json::object();
        common_json req = common_json::array();
        for (const auto &p : n.properties) {
            props[p.name] = kit_schema_json(*p.schema, defs);
            if (p.required) req.push_back(p.name);
        }
        j["properties"] = props;
        if (!req.empty()) j["required"] = req;
        if (!n.additional_properties) j["additionalProperties"] = false;
        else if (n.additional_properties->kind() != common_chat_schema::KIND_ANY)
            j["additionalProperties"] = kit_schema_json(*n.additional_properties, defs);
        break;
    }
    }
    return j;
}

static std::string kit_schema_text(const common_chat_schema &s)
{
    common_json defs = common_json::object();
    common_json j = kit_schema_json(s, defs);
    if (!defs.empty()) j["$defs"] = defs;
    return j.dump();
}

static std::string kit_grammar_of_node(const std::string &name, const common_chat_schema &node)
{
    return build_grammar([&](const common_grammar_builder &b) { b.add_schema(name, node); });
}

/* ---- the arena in v0.5.0's save() format ---- */
static common_json kit_ids(const std::vector<common_peg_parser_id> &v)
{
    common_json a = common_json::array();
    for (auto id : v) a.push_back(id);
    return a;
}

static common_json kit_strs(const std::vector<std::string> &v)
{
    common_json a = common_json::array();
    for (const auto &s : v) a.push_back(s);
    return a;
}

static common_json kit_parser_json(const common_peg_parser_variant &variant, std::vector<std::string> &bad)
{
    return std::visit([&](const auto &p) -> common_json {
        using T = std::decay_t<decltype(p)>;
        common_json j = common_json::object();
        if constexpr (std::is_same_v<T, common_peg_epsilon_parser>) { j["type"] = "epsilon"; }
        else if constexpr (std::is_same_v<T, common_peg_start_parser>) { j["type"] = "start"; }
        else if constexpr (std::is_same_v<T, common_peg_end_parser>) { j["type"] = "end"; }
        else if constexpr (std::is_same_v<T, common_peg_literal_parser>) { j["type"] = "literal"; j["literal"] = p.literal; }
        else if constexpr (std::is_same_v<T, common_peg_sequence_parser>) { j["type"] = "sequence"; j["children"] = kit_ids(p.children); }
        else if constexpr (std::is_same_v<T, common_peg_choice_parser>) { j["type"] = "choice"; j["children"] = kit_ids(p.children); }
        else if constexpr (std::is_same_v<T, common_peg_repetition_parser>) {
            j["type"] = "repetition"; j["child"] = p.child; j["min_count"] = p.min_count; j["max_count"] = p.max_count;
        }
        else if constexpr (std::is_same_v<T, common_peg_and_parser>) { j["type"] = "and"; j["child"] = p.child; }
        else if constexpr (std::is_same_v<T, common_peg_not_parser>) { j["type"] = "not"; j["child"] = p.child; }
        else if constexpr (std::is_same_v<T, common_peg_any_parser>) { j["type"] = "any"; }
        else if constexpr (std::is_same_v<T, common_peg_space_parser>) { j["type"] = "space"; }
        else if constexpr (std::is_same_v<T, common_peg_chars_parser>) {
            common_json r = common_json::array();
            for (const auto &x : p.ranges) {
                common_json o = common_json::object();
                o["start"] = x.start; o["end"] = x.end;
                r.push_back(o);
            }
            j["type"] = "chars"; j["pattern"] = p.pattern; j["ranges"] = r; j["negated"] = p.negated;
            j["min_count"] = p.min_count; j["max_count"] = p.max_count;
        }
        else if constexpr (std::is_same_v<T, common_peg_string_parser>) { j["type"] = "string"; j["delimiter"] = std::string(1, p.delimiter); }
        else if constexpr (std::is_same_v<T, common_peg_until_parser>) { j["type"] = "until"; j["delimiters"] = kit_strs(p.delimiters); }
        else if constexpr (std::is_same_v<T, common_peg_schema_parser>) {
            j["type"] = "schema"; j["child"] = p.child; j["name"] = p.name; j["raw"] = p.raw;
            if (p.node) {
                std::string text = kit_schema_text(*p.node);
                j["schema"] = common_json::parse(text);
                std::string want, got;
                try { want = kit_grammar_of_node(p.name, *p.node); } catch (const std::exception &e) { want = std::string("ERR ") + e.what(); }
                try {
                    auto doc = common_chat_schema_from_json(common_json::parse(text));
                    got = kit_grammar_of_node(p.name, *doc.root);
                } catch (const std::exception &e) { got = std::string("ERR ") + e.what(); }
                if (want != got) bad.push_back(p.name);
            }
        }
        else if constexpr (std::is_same_v<T, common_peg_rule_parser>) {
            j["type"] = "rule"; j["name"] = p.name; j["child"] = p.child; j["trigger"] = p.trigger;
        }
        else if constexpr (std::is_same_v<T, common_peg_ref_parser>) { j["type"] = "ref"; j["name"] = p.name; }
        else if constexpr (std::is_same_v<T, common_peg_atomic_parser>) { j["type"] = "atomic"; j["child"] = p.child; }
        else if constexpr (std::is_same_v<T, common_peg_tag_parser>) { j["type"] = "tag"; j["child"] = p.child; j["tag"] = p.tag; }
        else if constexpr (std::is_same_v<T, common_peg_gbnf_parser>) { j["type"] = "gbnf"; j["child"] = p.child; j["grammar"] = p.grammar; }
        else if constexpr (std::is_same_v<T, common_peg_ac_parser>) { j["type"] = "ac"; j["child"] = p.child; j["delimiters"] = kit_strs(p.delimiters); }
        return j;
    }, variant);
}

static std::string kit_arena_text(const common_peg_arena &arena, std::vector<std::string> &bad)
{
    const kit_arena_view &v = reinterpret_cast<const kit_arena_view &>(arena);
    if (v.parsers.empty()) return "";
    common_json parsers = common_json::array();
    for (const auto &p : v.parsers) parsers.push_back(kit_parser_json(p, bad));
    /* the rules by parser id: the order does not depend on the unordered_map's hashing */
    std::vector<std::pair<common_peg_parser_id, std::string>> byid;
    for (const auto &kv : v.rules) byid.emplace_back(kv.second, kv.first);
    std::sort(byid.begin(), byid.end());
    common_json rules = common_json::object();
    for (const auto &r : byid) rules[r.second] = r.first;
    common_json j = common_json::object();
    j["parsers"] = parsers;
    j["rules"] = rules;
    j["root"] = v.root;
    return j.dump();
}

static common_json kit_msg(const common_chat_msg &m)
{
    common_json j = common_json::object();
    j["role"] = m.role;
    j["content"] = m.content;
    j["reasoning_content"] = m.reasoning_content;
    common_json calls = common_json::array();
    for (const auto &c : m.tool_calls) {
        common_json o = common_json::object();
        o["name"] = c.name; o["arguments"] = c.arguments; o["id"] = c.id;
        calls.push_back(o);
    }
    j["tool_calls"] = calls;
    return j;
}

static common_json kit_parse(const common_chat_params &cp, const std::string &text, bool partial)
{
    common_chat_parser_params pp;
    pp.format = cp.format;
    pp.generation_prompt = common_chat_input(cp.generation_prompt);
    try {
        return kit_msg(common_chat_peg_parse(cp.parser, common_chat_input(text), partial, pp));
    } catch (const std::exception &e) {
        common_json j = common_json::object();
        j["error"] = std::string(e.what());
        return j;
    }
}

/* the last template's state: frames for one template in a row share its init (and its analysis) */
static std::string kit_last_key;
static common_chat_templates_ptr kit_last;

/* the stream of one answer, as the server meets it: every byte prefix parsed as partial, then the whole
 * as final, each diffed against the last message that parsed (an empty assistant message first) */
static common_json kit_stream(const common_chat_params &cp, const std::string &text)
{
    common_chat_parser_params pp;
    pp.format = cp.format;
    pp.generation_prompt = common_chat_input(cp.generation_prompt);
    common_chat_msg prev;
    prev.role = "assistant";
    common_json steps = common_json::array();
    for (size_t n = 1; n <= text.size() + 1; n++) {
        bool final_step = n == text.size() + 1;
        common_chat_msg cur;
        try {
            cur = common_chat_peg_parse(cp.parser, common_chat_input(text.substr(0, final_step ? text.size() : n)), !final_step, pp);
        } catch (const std::exception &e) {
            common_json j = common_json::object();
            j["error"] = std::string(e.what());
            steps.push_back(j);
            continue;
        }
        try {
            auto diffs = common_chat_msg_diff::compute_diffs(prev, cur);
            common_json a = common_json::array();
            for (const auto &d : diffs) {
                common_json o = common_json::object();
                o["reasoning_content_delta"] = d.reasoning_content_delta;
                o["content_delta"] = d.content_delta;
                o["tool_call_index"] = d.tool_call_index == std::string::npos ? (long long)-1 : (long long)d.tool_call_index;
                o["name"] = d.tool_call_delta.name;
                o["arguments"] = d.tool_call_delta.arguments;
                o["id"] = d.tool_call_delta.id;
                a.push_back(o);
            }
            steps.push_back(a);
            prev = cur;
        } catch (const std::exception &e) {
            common_json j = common_json::object();
            j["diff_error"] = std::string(e.what());
            steps.push_back(j);
        }
    }
    return steps;
}

static std::string kit_run(const common_json &req)
{
    std::string bos = req.contains("bos") ? req["bos"].get<std::string>() : std::string();
    std::string eos = req.contains("eos") ? req["eos"].get<std::string>() : std::string();
    std::string key = req["template"].get<std::string>() + '\0' + bos + '\0' + eos;
    if (!kit_last || key != kit_last_key) {
        kit_last.reset();
        kit_last_key.clear();
        kit_last = common_chat_templates_init(nullptr, req["template"].get<std::string>(), bos, eos);
        kit_last_key = key;
    }
    common_chat_templates *tmpls_raw = kit_last.get();
    common_json in = req.contains("inputs") ? req["inputs"] : common_json::object();
    common_chat_templates_inputs inputs;
    inputs.now = std::chrono::system_clock::from_time_t(1767225600); /* 2026-01-01, reproducible strftime_now */
    if (in.contains("messages")) inputs.messages = common_chat_msgs_parse_oaicompat(in["messages"]);
    if (in.contains("tools")) inputs.tools = common_chat_tools_parse_oaicompat(in["tools"]);
    if (in.contains("tool_choice")) inputs.tool_choice = common_chat_tool_choice_parse_oaicompat(in["tool_choice"].get<std::string>());
    if (in.contains("reasoning_format")) inputs.reasoning_format = common_reasoning_format_from_name(in["reasoning_format"].get<std::string>());
    if (in.contains("enable_thinking")) inputs.enable_thinking = in["enable_thinking"].get<bool>();
    if (in.contains("add_generation_prompt")) inputs.add_generation_prompt = in["add_generation_prompt"].get<bool>();
    if (in.contains("parallel_tool_calls")) inputs.parallel_tool_calls = in["parallel_tool_calls"].get<bool>();
    if (in.contains("json_schema")) inputs.json_schema = in["json_schema"].dump();
    if (in.contains("chat_template_kwargs"))
        for (const auto &kv : in["chat_template_kwargs"].items()) inputs.chat_template_kwargs[kv.key()] = kv.value().dump();
    common_chat_params cp = common_chat_templates_apply(tmpls_raw, inputs);

    common_json out = common_json::object();
    out["format"] = std::string(common_chat_format_name(cp.format));
    out["prompt"] = cp.prompt.str();
    out["generation_prompt"] = cp.generation_prompt;
    out["grammar"] = cp.grammar;
    out["grammar_lazy"] = cp.grammar_lazy;
    common_json trig = common_json::array();
    for (const auto &t : cp.grammar_triggers) {
        common_json o = common_json::object();
        o["type"] = (int) t.type; o["value"] = t.value; o["token"] = t.token;
        trig.push_back(o);
    }
    out["grammar_triggers"] = trig;
    out["preserved_tokens"] = kit_strs(cp.preserved_tokens);
    out["additional_stops"] = kit_strs(cp.additional_stops);
    out["supports_thinking"] = cp.supports_thinking;
    out["thinking_start_tag"] = cp.thinking_start_tag;
    out["thinking_end_tags"] = kit_strs(cp.thinking_end_tags);
    std::vector<std::string> bad;
    out["parser"] = kit_arena_text(cp.parser, bad);
    std::string pg;
    if (cp.parser.size()) {
        try {
            pg = build_grammar([&](const common_grammar_builder &b) { cp.parser.build_grammar(b, cp.grammar_lazy); });
        } catch (const std::exception &e) { pg = std::string("ERR ") + e.what(); }
    }
    out["parser_grammar"] = pg;
    out["schema_check"] = kit_strs(bad);
    common_json parses = common_json::array();
    bool prefixes = req.contains("prefixes") && req["prefixes"].get<bool>();
    if (req.contains("answers")) {
        for (const auto &a : req["answers"]) {
            std::string text = a.get<std::string>();
            common_json r = common_json::object();
            r["final"] = kit_parse(cp, text, false);
            r["partial"] = kit_parse(cp, text, true);
            if (prefixes) {
                common_json pl = common_json::array();
                for (size_t n = 0; n < text.size(); n++) pl.push_back(kit_parse(cp, text.substr(0, n), true));
                r["prefixes"] = pl;
                r["stream"] = kit_stream(cp, text);
            }
            parses.push_back(r);
        }
    }
    out["parses"] = parses;
    return out.dump();
}

int main()
{
    for (;;) {
        size_t n = 0;
        int c, digits = 0;
        while ((c = std::getchar()) != EOF && c >= '0' && c <= '9') { n = n * 10 + (size_t)(c - '0'); digits++; }
        if (c == EOF && digits == 0) break;
        if (c != '\n' || digits == 0) { std::fprintf(stderr, "kit-chat: bad frame\n"); return 2; }
        std::string text(n, '\0');
        if (n && std::fread(&text[0], 1, n, stdin) != n) { std::fprintf(stderr, "kit-chat: short frame\n"); return 2; }
        common_json req;
        try {
            req = common_json::parse(text);
            if (!req.is_object() || !req.contains("template")) throw std::runtime_error("frame lacks \"template\"");
        } catch (const std::exception &e) {
            put("PARSE", e.what());
            std::fflush(stdout);
            continue;
        }
        try {
            put("OK", kit_run(req));
        } catch (const std::exception &e) {
            put("ERR", e.what());
        }
        std::fflush(stdout);
    }
    return 0;
}
