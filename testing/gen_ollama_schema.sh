#!/bin/sh
# gen_ollama_schema.sh -- writes testing/schemas/ollama-v0.13.3/*.json, the goldens of
# Ollama v0.13.3's schema converter: its vendored llama.cpp (17f7f4ba)
# common/json-schema-to-grammar.cpp and nlohmann json, taken from an Ollama git
# mirror (OLLAMA_GIT, default /work/.mirror/ollama+ollama/repo) at tag v0.13.3, built with
# g++ (libstdc++: its unordered_map decides the rules' order) beside
# testing/kit_ollama_schema.cpp, and run on every schema of testing/schemas/*.json and
# testing/schemas/ollama_extra.json. CI needs only the committed goldens.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
git_dir=${OLLAMA_GIT:-/work/.mirror/ollama+ollama/repo}
tag=v0.13.3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/nlohmann"
for f in common/json-schema-to-grammar.cpp common/json-schema-to-grammar.h vendor/nlohmann/json.hpp vendor/nlohmann/json_fwd.hpp; do
    git -C "$git_dir" show "$tag:llama/llama.cpp/$f" > "$tmp/$(basename "$f")"
done
mv "$tmp/json.hpp" "$tmp/json_fwd.hpp" "$tmp/nlohmann/"
printf '#pragma once\n#include <string>\n#include <vector>\nstd::string string_join(const std::vector<std::string> &, const std::string &);\nstd::vector<std::string> string_split(const std::string &, const std::string &);\nstd::string string_repeat(const std::string &, size_t);\n' > "$tmp/common.h"
g++ -std=c++17 -O1 -w -I"$tmp" "$tmp/json-schema-to-grammar.cpp" "$here/kit_ollama_schema.cpp" -o "$tmp/kit"
commit=$(git -C "$git_dir" rev-parse "$tag^{commit}")
python3 - "$tmp/kit" "$here/schemas" "$commit" "$(g++ -dumpfullversion)" <<'PY'
import json, subprocess, sys, os
kit, sdir, commit, gxx = sys.argv[1:5]
out_dir = os.path.join(sdir, "ollama-v0.13.3")
os.makedirs(out_dir, exist_ok=True)
for lst in ("llama_cpp_tests.json", "own.json", "ollama_extra.json"):
    cases = json.load(open(os.path.join(sdir, lst)))["cases"]
    inp = "".join(json.dumps(c["schema"]) + "\n" for c in cases)
    res = subprocess.run([kit], input=inp.encode(), capture_output=True, check=True).stdout.decode().splitlines()
    assert len(res) == len(cases), (lst, len(res), len(cases))
    rows = []
    for c, r in zip(cases, res):
        row = {"name": c["name"], "schema": c["schema"]}
        row.update(json.loads(r))
        rows.append(row)
    doc = {"source": "Ollama %s (commit %s) llama/llama.cpp/common/json-schema-to-grammar.cpp, g++ %s, "
                      "run by testing/gen_ollama_schema.sh on testing/schemas/%s" % ("v0.13.3", commit, gxx, lst),
           "cases": rows}
    with open(os.path.join(out_dir, lst), "w") as f:
        json.dump(doc, f, indent=1, ensure_ascii=False)
        f.write("\n")
    kinds = {}
    for r in rows:
        k = next(x for x in ("grammar", "grammar_hex", "error", "crash", "hang") if x in r)
        kinds[k] = kinds.get(k, 0) + 1
    print(lst, len(rows), kinds)
PY
