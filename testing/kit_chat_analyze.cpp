/*
 * kit_chat_analyze.cpp -- the oracle for src/text/chat_analyze.c: llama.cpp
 * b11669's differential template analysis, autoparser::autoparser::
 * analyze_template(const common_chat_template &) from libllama-common.so, run
 * in process, and the template's jinja::caps (jinja::caps_get, which
 * common_chat_template's constructor runs) and the specialised format b11669's
 * constructor picks for it (common_chat_try_specialized_template dispatches on
 * it).
 *
 * Usage: kit-chat-analyze BOS EOS   (the bos_token / eos_token strings the
 * template sees). Input on stdin: frames "<decimal length>\n<that many bytes
 * of template text>". Output, one frame per input:
 *   "OK <n>\n<n bytes of JSON>\n"   the analysis (fields named as b11669 names
 *                                    them, nested as autoparser nests them)
 *   "ERR <n>\n<n bytes of JSON>\n"  analyze_template threw: {"error": what(),
 *                                    "caps": ..., "specialized": ...}
 *   "TMPL <n>\n<n bytes>\n"         the template did not lex or parse
 * Exit 2 on a malformed frame.
 *
 * ABI (checked against the binary, see docs/modules/chat_analyze.md): the
 * autoparser struct's layout in llama.cpp-src's header is the binary's (the
 * offsets collect_preserved_tokens and ~autoparser use agree up to
 * additional_stops at 1072). common_chat_template is larger in b11669 than in
 * the header: its constructor also stores, at offset 0x98, a pointer to the
 * specialised common_chat_params_init_* it detected (or null), so the kit
 * builds it in an oversized buffer, never destroys it, and names that pointer
 * with dladdr.
 */
#include "chat-auto-parser.h"
#include "jinja/caps.h"

#include <dlfcn.h>
#include <cxxabi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

static void put(const char *tag, const std::string &s)
{
    std::printf("%s %zu\n", tag, s.size());
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
}

static std::string q(const std::string &s)
{
    std::string o = "\"";
    for (unsigned char c : s) {
        switch (c) {
        case '"': o += "\\\""; break;
        case '\\': o += "\\\\"; break;
        case '\n': o += "\\n"; break;
        case '\r': o += "\\r"; break;
        case '\t': o += "\\t"; break;
        default:
            if (c < 0x20) {
                char b[8];
                std::snprintf(b, sizeof b, "\\u%04x", c);
                o += b;
            } else {
                o += (char)c;
            }
        }
    }
    return o + "\"";
}

static std::string b(bool v) { return v ? "true" : "false"; }

static std::string list(const std::vector<std::string> &v)
{
    std::string o = "[";
    for (size_t i = 0; i < v.size(); i++) o += (i ? "," : "") + q(v[i]);
    return o + "]";
}

static std::string caps_json(const jinja::caps &c)
{
    return "{\"supports_tools\":" + b(c.supports_tools) + ",\"supports_tool_calls\":" + b(c.supports_tool_calls) +
           ",\"supports_system_role\":" + b(c.supports_system_role) +
           ",\"supports_parallel_tool_calls\":" + b(c.supports_parallel_tool_calls) +
           ",\"supports_preserve_reasoning\":" + b(c.supports_preserve_reasoning) +
           ",\"supports_reasoning_effort\":" + b(c.supports_reasoning_effort) +
           ",\"supports_string_content\":" + b(c.supports_string_content) +
           ",\"supports_typed_content\":" + b(c.supports_typed_content) +
           ",\"supports_object_arguments\":" + b(c.supports_object_arguments) + "}";
}

static const char *rmode(autoparser::reasoning_mode m)
{
    switch (m) {
    case autoparser::reasoning_mode::NONE: return "NONE";
    case autoparser::reasoning_mode::TAG_BASED: return "TAG_BASED";
    case autoparser::reasoning_mode::TOOLS_ONLY: return "TOOLS_ONLY";
    }
    return "UNKNOWN";
}

static const char *cmode(autoparser::content_mode m)
{
    switch (m) {
    case autoparser::content_mode::PLAIN: return "PLAIN";
    case autoparser::content_mode::ALWAYS_WRAPPED: return "ALWAYS_WRAPPED";
    case autoparser::content_mode::WRAPPED_WITH_REASONING: return "WRAPPED_WITH_REASONING";
    }
    return "UNKNOWN";
}

static const char *tmode(autoparser::tool_format m)
{
    switch (m) {
    case autoparser::tool_format::NONE: return "NONE";
    case autoparser::tool_format::JSON_NATIVE: return "JSON_NATIVE";
    case autoparser::tool_format::TAG_WITH_JSON: return "TAG_WITH_JSON";
    case autoparser::tool_format::TAG_WITH_TAGGED: return "TAG_WITH_TAGGED";
    }
    return "UNKNOWN";
}

static const char *idpos(autoparser::call_id_position m)
{
    switch (m) {
    case autoparser::call_id_position::NONE: return "NONE";
    case autoparser::call_id_position::PRE_FUNC_NAME: return "PRE_FUNC_NAME";
    case autoparser::call_id_position::BETWEEN_FUNC_AND_ARGS: return "BETWEEN_FUNC_AND_ARGS";
    case autoparser::call_id_position::POST_ARGS: return "POST_ARGS";
    }
    return "UNKNOWN";
}

static std::string analysis_json(const autoparser::autoparser &a)
{
    const auto &f = a.tools.format;
    const auto &fn = a.tools.function;
    const auto &ar = a.tools.arguments;
    const auto &id = a.tools.call_id;
    std::string o = "{";
    o += "\"user_start\":" + q(a.user_start) + ",\"assistant_start\":" + q(a.assistant_start);
    o += ",\"reasoning\":{\"mode\":" + q(rmode(a.reasoning.mode)) + ",\"start\":" + q(a.reasoning.start) +
         ",\"end\":" + q(a.reasoning.end) + "}";
    o += ",\"content\":{\"mode\":" + q(cmode(a.content.mode)) + ",\"start\":" + q(a.content.start) +
         ",\"end\":" + q(a.content.end) + ",\"requires_nonnull_content\":" + b(a.content.requires_nonnull_content) + "}";
    o += ",\"tools\":{\"format\":{\"mode\":" + q(tmode(f.mode)) + ",\"section_start\":" + q(f.section_start) +
         ",\"section_end\":" + q(f.section_end) + ",\"per_call_start\":" + q(f.per_call_start) +
         ",\"per_call_end\":" + q(f.per_call_end) + ",\"fun_name_is_key\":" + b(f.fun_name_is_key) +
         ",\"tools_array_wrapped\":" + b(f.tools_array_wrapped) +
         ",\"openai_wrapper_trigger\":" + b(f.openai_wrapper_trigger) + ",\"function_field\":" + q(f.function_field) +
         ",\"name_field\":" + q(f.name_field) + ",\"args_field\":" + q(f.args_field) + ",\"id_field\":" + q(f.id_field) +
         ",\"gen_id_field\":" + q(f.gen_id_field) + ",\"parameter_order\":" + list(f.parameter_order) + "}";
    o += ",\"function\":{\"name_prefix\":" + q(fn.name_prefix) + ",\"name_suffix\":" + q(fn.name_suffix) +
         ",\"args_separator\":" + q(fn.args_separator) + ",\"close\":" + q(fn.close) + "}";
    o += ",\"arguments\":{\"start\":" + q(ar.start) + ",\"end\":" + q(ar.end) + ",\"name_prefix\":" + q(ar.name_prefix) +
         ",\"name_suffix\":" + q(ar.name_suffix) + ",\"value_prefix\":" + q(ar.value_prefix) +
         ",\"value_suffix\":" + q(ar.value_suffix) + ",\"separator\":" + q(ar.separator) +
         ",\"tolerate_intertag_whitespace\":" + b(ar.tolerate_intertag_whitespace) + "}";
    o += ",\"call_id\":{\"pos\":" + q(idpos(id.pos)) + ",\"prefix\":" + q(id.prefix) + ",\"suffix\":" + q(id.suffix) + "}}";
    o += ",\"analysis_complete\":" + b(a.analysis_complete);
    o += ",\"preserved_tokens\":" + list(a.preserved_tokens) + ",\"additional_stops\":" + list(a.additional_stops);
    return o + "}";
}

/* the name of the common_chat_params_init_* the constructor stored, without the prefix */
static std::string specialized(const unsigned char *tmpl)
{
    void *fp;
    std::memcpy(&fp, tmpl + 0x98, sizeof fp);
    if (!fp) return "none";
    Dl_info info;
    if (!dladdr(fp, &info)) return "unknown";
    /* the three lambdas of b11669's constructor (offsets in this build's libllama-common.so.0.7.0) */
    size_t off = (size_t)((const char *)fp - (const char *)info.dli_fbase);
    if (off == 0x26a3b0) return "lfm2";
    if (off == 0x26a370) return "lfm2_5";
    if (off == 0x279ac0) return "gemma4_outdated";
    if (!info.dli_sname) return "unknown";
    int st = 0;
    char *d = abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &st);
    std::string name = st == 0 && d ? d : info.dli_sname;
    std::free(d);
    size_t p = name.find('(');
    if (p != std::string::npos) name = name.substr(0, p);
    const std::string pre = "common_chat_params_init_";
    if (name.compare(0, pre.size(), pre) == 0) name = name.substr(pre.size());
    return name;
}

/* the library's own constructor (the header's inline one lacks b11669's detection) */
typedef void (*ctor_fn)(void *, const std::string &, const std::string &, const std::string &);

int main(int argc, char **argv)
{
    ctor_fn ctor = reinterpret_cast<ctor_fn>(dlsym(RTLD_DEFAULT,
        "_ZN20common_chat_templateC1ERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEES7_S7_"));
    if (!ctor) { std::fprintf(stderr, "kit-chat-analyze: no common_chat_template constructor in the library\n"); return 2; }
    std::string bos = argc > 1 ? argv[1] : "", eos = argc > 2 ? argv[2] : "";
    for (;;) {
        size_t n = 0;
        int c, digits = 0;
        while ((c = std::getchar()) != EOF && c >= '0' && c <= '9') { n = n * 10 + (size_t)(c - '0'); digits++; }
        if (c == EOF && digits == 0) break;
        if (c != '\n' || digits == 0) { std::fprintf(stderr, "kit-chat-analyze: bad frame\n"); return 2; }
        std::string text(n, '\0');
        if (n && std::fread(&text[0], 1, n, stdin) != n) { std::fprintf(stderr, "kit-chat-analyze: short frame\n"); return 2; }
        /* b11669's common_chat_template is bigger than the header's: build it in room to spare, leak it */
        unsigned char *room = static_cast<unsigned char *>(std::calloc(1, 4096));
        common_chat_template *tmpl = reinterpret_cast<common_chat_template *>(room);
        try {
            ctor(room, text, bos, eos);
        } catch (const std::exception &e) {
            put("TMPL", e.what());
            continue;
        }
        std::string head = "\"caps\":" + caps_json(tmpl->original_caps()) + ",\"specialized\":" + q(specialized(room));
        autoparser::autoparser *a = new autoparser::autoparser();
        try {
            a->analyze_template(*tmpl);
        } catch (const std::exception &e) {
            put("ERR", "{" + head + ",\"error\":" + q(e.what()) + "}");
            continue;
        }
        std::string body = analysis_json(*a);
        put("OK", "{" + head + "," + body.substr(1));
        delete a;
    }
    return 0;
}
