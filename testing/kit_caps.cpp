/*
 * kit_caps.cpp -- the oracle for src/text/template_caps.c: llama.cpp b11669's
 * own template capabilities, as llama-server's /props reports them
 * (common_chat_templates_init with the template as the override, then
 * common_chat_templates_get_caps: jinja::caps_get's probes, run in process
 * from the kit's libllama-common.so).
 *
 * Input on stdin: frames "<decimal length>\n<that many bytes of template>".
 * Output, one frame per input:
 *   "OK <n>\n<n bytes: name=0|1 lines in the map's order>\n"
 *   "ERR <n>\n<n bytes>\n"   the what() of the exception (the template does not parse)
 * With KIT_CAPS_THINKING set, OK's text ends with supports_enable_thinking=0|1
 * (common_chat_templates_support_enable_thinking: the template's
 * supports_thinking, llama-server's default enable_thinking).
 * Exit 2 on a malformed frame. Built by testing/oracle.mk with llama.cpp's
 * common/chat.h only for the declarations below (std::string and
 * std::map are the only types that cross), run under the kit's sid-run.
 */
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <memory>
#include <string>

struct llama_model;
struct common_chat_templates;
struct common_chat_templates_deleter { void operator()(common_chat_templates *t); };
typedef std::unique_ptr<common_chat_templates, common_chat_templates_deleter> common_chat_templates_ptr;

common_chat_templates_ptr common_chat_templates_init(const llama_model *model, const std::string &tmpl,
                                                     const std::string &bos, const std::string &eos);
std::map<std::string, bool> common_chat_templates_get_caps(const common_chat_templates *t);
bool common_chat_templates_support_enable_thinking(const common_chat_templates *t);
void common_chat_templates_free(common_chat_templates *t);
void common_chat_templates_deleter::operator()(common_chat_templates *t) { common_chat_templates_free(t); }

static void put(const char *tag, const std::string &s)
{
    std::printf("%s %zu\n", tag, s.size());
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fputc('\n', stdout);
}

int main()
{
    for (;;) {
        size_t n = 0;
        int c, digits = 0;
        while ((c = std::getchar()) != EOF && c >= '0' && c <= '9') { n = n * 10 + (size_t)(c - '0'); digits++; }
        if (c == EOF && digits == 0) break;
        if (c != '\n' || digits == 0) { std::fprintf(stderr, "kit-caps: bad frame\n"); return 2; }
        std::string text(n, '\0');
        if (n && std::fread(&text[0], 1, n, stdin) != n) { std::fprintf(stderr, "kit-caps: short frame\n"); return 2; }
        try {
            auto t = common_chat_templates_init(nullptr, text, "<s>", "</s>");
            std::string out;
            for (const auto &kv : common_chat_templates_get_caps(t.get()))
                out += kv.first + "=" + (kv.second ? "1" : "0") + "\n";
            if (getenv("KIT_CAPS_THINKING"))
                out += std::string("supports_enable_thinking=") +
                       (common_chat_templates_support_enable_thinking(t.get()) ? "1" : "0") + "\n";
            put("OK", out);
        } catch (const std::exception &e) {
            put("ERR", e.what());
        }
        std::fflush(stdout);
    }
    return 0;
}
