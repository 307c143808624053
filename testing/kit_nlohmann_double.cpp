/*
 * kit_nlohmann_double.cpp -- the oracle for json_put_double(): prints what
 * nlohmann::json::dump() writes for each double, the way llama-server b11669
 * writes probabilities, logprobs and timings.
 *
 * Input: one double per line on stdin as 16 hex digits of its bit pattern
 * (e.g. 3ff0000000000000). Output: one line per input, the dump() text
 * (e.g. 1.0). Exit 2 on a malformed line.
 *
 * Built by testing/oracle_json_double.py with g++ against Debian's
 * nlohmann-json3-dev (3.11.2) or llama.cpp's vendored header (3.12.0); their
 * to_chars() / dump_float() are the same code.
 */
#include <nlohmann/json.hpp>

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

int main()
{
    char line[128];
    std::string out;
    while (std::fgets(line, sizeof line, stdin)) {
        std::uint64_t bits;
        char *end;
        bits = std::strtoull(line, &end, 16);
        if (end == line || (*end != '\n' && *end != '\0')) {
            std::fprintf(stderr, "kit-nlohmann-double: bad line: %s", line);
            return 2;
        }
        double v;
        std::memcpy(&v, &bits, sizeof v);
        out += nlohmann::json(v).dump();
        out += '\n';
        if (out.size() > (1u << 16)) { std::fputs(out.c_str(), stdout); out.clear(); }
    }
    std::fputs(out.c_str(), stdout);
    return 0;
}
