// kit_ollama_schema.cpp -- runs Ollama v0.13.3's vendored json_schema_to_grammar
// (llama/llama.cpp/common/json-schema-to-grammar.cpp, compiled from the mirror by
// testing/gen_ollama_schema.sh) as Ollama's schema_to_grammar (llama/sampling_ext.cpp)
// calls it: parse the bytes with nlohmann::ordered_json, convert, any std::exception is
// a failure. Input: one JSON string per line (a schema's bytes). Output: one JSON object
// per line: {"grammar": text} (or {"grammar_hex": hex} when the text is not UTF-8), {"error": what()}, {"crash": signal} or {"hang": 1}
// (each schema runs in its own child, killed after 10 s).
#include <nlohmann/json.hpp>
#include "json-schema-to-grammar.h"

#include <csignal>
#include <cstdio>
#include <iostream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

// The three common.cpp helpers the converter calls, written here (semantics of v0.13.3's common.cpp).
std::string string_join(const std::vector<std::string> & parts, const std::string & sep)
{
    std::string r;
    for (size_t i = 0; i < parts.size(); i++) { if (i) r += sep; r += parts[i]; }
    return r;
}
std::vector<std::string> string_split(const std::string & s, const std::string & delim)
{
    std::vector<std::string> out;
    size_t from = 0;
    for (size_t at; (at = s.find(delim, from)) != std::string::npos; from = at + delim.size()) out.push_back(s.substr(from, at - from));
    out.push_back(s.substr(from));
    return out;
}
std::string string_repeat(const std::string & s, size_t n)
{
    std::string r;
    while (n--) r += s;
    return r;
}

static std::string run_one(const std::string & text)
{
    nlohmann::ordered_json res;
    try {
        auto schema = nlohmann::ordered_json::parse(text);
        std::string g = json_schema_to_grammar(schema);
        try {
            nlohmann::ordered_json(g).dump();
            res["grammar"] = g;
        } catch (const std::exception &) {         // not UTF-8 (a byte trie of a non-ASCII key): hex
            static const char hex[] = "0123456789abcdef";
            std::string h;
            for (unsigned char ch : g) { h += hex[ch >> 4]; h += hex[ch & 15]; }
            res["grammar_hex"] = h;
        }
    } catch (const std::exception & e) {
        res["error"] = std::string(e.what());
    }
    return res.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

int main()
{
    std::string line;
    while (std::getline(std::cin, line)) {
        std::string text = nlohmann::ordered_json::parse(line).get<std::string>();
        int fd[2];
        if (pipe(fd)) return 1;
        pid_t pid = fork();
        if (pid == 0) {
            close(fd[0]);
            alarm(10);
            std::string out = run_one(text);
            size_t off = 0;
            while (off < out.size()) { ssize_t w = write(fd[1], out.data() + off, out.size() - off); if (w <= 0) _exit(3); off += (size_t)w; }
            _exit(0);
        }
        close(fd[1]);
        std::string got;
        char buf[65536];
        for (ssize_t r; (r = read(fd[0], buf, sizeof buf)) > 0;) got.append(buf, (size_t)r);
        close(fd[0]);
        int st = 0;
        waitpid(pid, &st, 0);
        if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM) std::cout << "{\"hang\":1}\n";
        else if (WIFSIGNALED(st)) std::cout << "{\"crash\":" << WTERMSIG(st) << "}\n";
        else std::cout << got << "\n";
        std::cout.flush();
    }
    return 0;
}
