/*
 * kit_nlohmann_str.cpp -- the oracle for json_put_str_nl(): prints what
 * llama-server b11669 writes for a string, nlohmann::json's
 * dump(-1, ' ', false, error_handler_t::replace) (common_json::dump_safe,
 * behind safe_json_to_str).
 *
 * Input: one string per line on stdin as hex digits of its bytes (an empty
 * line is the empty string). Output: one line per input, the dump() bytes
 * as hex. Exit 2 on a malformed line.
 *
 * Built by testing/oracle_json_str.py with g++ against Debian's
 * nlohmann-json3-dev (3.11.2) or llama.cpp's vendored header (3.12.0).
 */
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstring>
#include <string>

static int unhex(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

int main()
{
    static const char hex[] = "0123456789abcdef";
    std::string line, out;
    int c;
    for (;;) {
        line.clear();
        while ((c = std::getchar()) != EOF && c != '\n') line += (char)c;
        if (c == EOF && line.empty()) break;
        if (line.size() % 2) { std::fprintf(stderr, "kit-nlohmann-str: odd line\n"); return 2; }
        std::string s;
        for (size_t i = 0; i < line.size(); i += 2) {
            int hi = unhex(line[i]), lo = unhex(line[i + 1]);
            if (hi < 0 || lo < 0) { std::fprintf(stderr, "kit-nlohmann-str: bad hex\n"); return 2; }
            s += (char)(hi * 16 + lo);
        }
        std::string d = nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        for (unsigned char b : d) { out += hex[b >> 4]; out += hex[b & 15]; }
        out += '\n';
        if (out.size() > (1u << 16)) { std::fputs(out.c_str(), stdout); out.clear(); }
        if (c == EOF) break;
    }
    std::fputs(out.c_str(), stdout);
    return 0;
}
