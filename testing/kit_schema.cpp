/*
 * kit_schema.cpp -- the oracle for src/sampling/json_schema.c: llama.cpp
 * b11669's own JSON schema -> GBNF converter, json_schema_to_grammar(const
 * common_json &, bool force_gbnf = false) from libllama-common.so, run in
 * process (the call llama-server's "json_schema" field makes).
 *
 * Input on stdin: frames "<decimal length>\n<that many bytes of JSON text>".
 * Output, one frame per input:
 *   "OK <n>\n<n bytes of grammar>\n"    the converter's text
 *   "ERR <n>\n<n bytes>\n"              the what() of the exception it threw
 *   "PARSE <n>\n<n bytes>\n"            common_json::parse refused the text
 * Exit 2 on a malformed frame.
 *
 * common_json is a pimpl over nlohmann's ordered_json, so only llama.cpp's
 * own headers are needed (common/json.h, common/json-schema-to-grammar.h
 * from ~/.cache/llama.cpp-src); the nlohmann ABI stays inside the library.
 * Built by testing/oracle_schema.py with g++ and run under the kit's sid-run
 * (the library needs Debian unstable's libstdc++ and glibc).
 */
#include "json-schema-to-grammar.h"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

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
        if (c != '\n' || digits == 0) { std::fprintf(stderr, "kit-schema: bad frame\n"); return 2; }
        std::string text(n, '\0');
        if (n && std::fread(&text[0], 1, n, stdin) != n) { std::fprintf(stderr, "kit-schema: short frame\n"); return 2; }
        common_json schema;
        try {
            schema = common_json::parse(text);
        } catch (const std::exception &e) {
            put("PARSE", e.what());
            continue;
        }
        try {
            put("OK", json_schema_to_grammar(schema));
        } catch (const std::exception &e) {
            put("ERR", e.what());
        }
        std::fflush(stdout);
    }
    return 0;
}
