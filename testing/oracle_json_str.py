#!/usr/bin/env python3
"""oracle_json_str.py -- the answer string writers of src/base/json.c against the encoders they copy.

llama-server b11669 writes every string with nlohmann::json's dump(-1, ' ', false, error_handler_t::replace)
(common_json::dump_safe behind safe_json_to_str); Ollama writes every answer with Go's encoding/json Marshal.
A token's bytes need not be UTF-8 (byte tokens, a character cut at max_tokens), so the writers must replace
exactly as those do. This suite builds testing/kit_nlohmann_str.cpp with g++ against each nlohmann header
found (Debian's nlohmann-json3-dev 3.11.2 from testing/install_deps.sh, llama.cpp's vendored 3.12.0 in
~/.cache/llama.cpp-src/vendor; BANKML_NLOHMANN_INCLUDE names another), builds testing/kit_go_str.go with
`go build` when Go is installed (Debian 12's golang-go is Go 1.19, which writes \\b and \\f as \\u0008 and
\\u000c where the Go >= 1.22 Ollama is built with writes \\b and \\f: the Go kit's output is mapped for that one
difference, and only when the toolchain is older than 1.22), builds testing/json_str_driver.c with json.c, feeds
them the same strings and compares the bytes line by line.

The strings, by group (each string is one test per writer):
  bytes-1         every 1-byte string
  bytes-2         every 2-byte string
  bytes-3         every first and second byte with 16 third bytes (each range edge, ASCII, leads)
  bytes-4         every 4-byte lead (and E0, ED, C2, 80, FF) with every second byte and 30 tails
  edges           each code point at a length edge (U+0000, U+007F, U+0080, U+07FF, U+0800, U+D7FF, U+E000,
                  U+FFFD, U+FFFF, U+10000, U+10FFFF), overlong forms of U+0000, U+007F, U+07FF, U+FFFF,
                  surrogates ED A0 80 .. ED BF BF (and CESU pairs), > U+10FFFF (F4 90 80 80, F5 .., F7 BF BF BF,
                  5- and 6-byte forms), each valid character cut after 1, 2, 3 bytes at the end and in the
                  middle, every escape (controls, quote, backslash, DEL, / , < > &, U+2028, U+2029)
  mixed           30,000 random strings (fixed seed) of 0 to 40 pieces: valid characters of each length,
                  ASCII text, controls, quotes, HTML bytes, U+2028/9, lone continuation bytes, leads, cut
                  characters, surrogates, overlongs, random bytes

json_text_peg (the chat parser's UTF-8 walk) against the table measured on llama-server b11669.
Besides the encoders: json_text_nl (the decoded text, for hashes) against Python's
bytes.decode('utf-8', 'replace'), json_text_go against Go's per-byte U+FFFD rule (the decode of the Go kit's
output when Go is here), json_utf8_valid_len against Python's decoder. Without g++ or a header the nlohmann
part is skipped with the reason, without Go the Go part (failures under BANKML_REQUIRE_ORACLE=1).
Prints `N passed, N failed, N skipped`; exits 1 on a failure.
"""
import json, os, random, re, shutil, subprocess, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle

ROOT = oracle.ROOT
BUILD = os.path.join(ROOT, "build")
DRIVER = os.path.join(BUILD, "json-str-driver")
GOKIT = os.path.join(BUILD, "kit-go-str")
CFLAGS = ["-std=gnu11", "-D_GNU_SOURCE", "-Iinclude", "-Isrc", "-Itests", "-pthread", "-O2",
          "-Wall", "-Wextra", "-Werror"]
SEED = 20240612


def cut(cp):
    """the UTF-8 bytes of code point cp, without the checks Python's encoder makes (surrogates, overlongs)"""
    if cp < 0x80:
        return bytes([cp])
    if cp < 0x800:
        return bytes([0xC0 | cp >> 6, 0x80 | cp & 63])
    if cp < 0x10000:
        return bytes([0xE0 | cp >> 12, 0x80 | cp >> 6 & 63, 0x80 | cp & 63])
    return bytes([0xF0 | cp >> 18, 0x80 | cp >> 12 & 63, 0x80 | cp >> 6 & 63, 0x80 | cp & 63])


def groups():
    g = {}
    g["bytes-1"] = [bytes([a]) for a in range(256)]
    g["bytes-2"] = [bytes([a, b]) for a in range(256) for b in range(256)]
    thirds = [0x00, 0x22, 0x41, 0x5C, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC2, 0xE0, 0xF0, 0xFF]
    g["bytes-3"] = [bytes([a, b, c]) for a in range(0x80, 0x100) for b in range(256) for c in thirds] + \
                   [bytes([a, b, c]) for a in (0x00, 0x41, 0x7F) for b in range(0x80, 0x100) for c in thirds]
    tails = [bytes([c, d]) for c in (0x80, 0x8F, 0x90, 0xBF, 0x41, 0xC0) for d in (0x80, 0xBF, 0x41, 0xC0, 0xFF)]
    g["bytes-4"] = [bytes([a, b]) + t for a in (0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xF7, 0xF8, 0xE0, 0xED, 0xC2, 0x80, 0xFF)
                    for b in range(256) for t in tails]
    e = []
    for cp in (0, 0x7F, 0x80, 0x7FF, 0x800, 0xD7FF, 0xE000, 0xFFFD, 0xFFFF, 0x10000, 0x10FFFF, 0x20AC, 0x1F600):
        c = cut(cp)
        e.append(c)
        for k in range(1, len(c)):
            e += [c[:k], c[:k] + b"a", b"x" + c[:k], c[:k] + c, c[:k] + c[:k], c[:k] + b"\"", c + c[:k]]
    e += [b"\xC0\x80", b"\xC1\xBF", b"\xE0\x80\x80", b"\xE0\x81\xBF", b"\xE0\x9F\xBF", b"\xF0\x80\x80\x80",
          b"\xF0\x8F\xBF\xBF", b"\xF8\x88\x80\x80\x80", b"\xFC\x84\x80\x80\x80\x80", b"\xFE", b"\xFF\xFE",
          b"\xF4\x90\x80\x80", b"\xF5\x80\x80\x80", b"\xF7\xBF\xBF\xBF", b"\xED\xA0\x80\xED\xB0\x80",
          b"\xED\xAF\xBF\xED\xBF\xBF", b"\xEF\xBB\xBF", b"\xEF\xBF\xBE"]
    e += [cut(cp) for cp in range(0xD800, 0xE000, 0x3F)] + [cut(0xD800), cut(0xDBFF), cut(0xDC00), cut(0xDFFF)]
    e += [cut(cp) for cp in range(0x110000, 0x200000, 0x11111)]
    e += [bytes([c]) + b"x" for c in range(0x20)] + [b"a\"b\\c/d<e>f&g\x7fh", "\u2028\u2029".encode(),
                                                    "x\u2028y\u2029z\u2027\u202a".encode(), b""]
    g["edges"] = e
    rng = random.Random(SEED)
    pieces = [lambda: bytes([rng.randrange(0x20, 0x7F)]) * rng.randint(1, 4),
              lambda: rng.choice([b"\"", b"\\", b"/", b"<", b">", b"&", b"\x7f", b"\n", b"\t", b"\r", b"\b", b"\f"]),
              lambda: bytes([rng.randrange(0x20)]),
              lambda: chr(rng.randrange(0x80, 0x800)).encode(),
              lambda: chr(rng.choice([rng.randrange(0x800, 0xD800), rng.randrange(0xE000, 0x10000)])).encode(),
              lambda: chr(rng.randrange(0x10000, 0x110000)).encode(),
              lambda: rng.choice(["\u2028", "\u2029", "\ufffd", "\u20ac"]).encode(),
              lambda: bytes([rng.randrange(0x80, 0xC0)]),
              lambda: bytes([rng.randrange(0xC0, 0x100)]),
              lambda: cut(rng.randrange(0x80, 0x110000))[:rng.randint(1, 3)],
              lambda: cut(rng.randrange(0xD800, 0xE000)),
              lambda: rng.choice([b"\xC0\x80", b"\xE0\x80\x80", b"\xF0\x80\x80\x80", b"\xF4\x90\x80\x80"]),
              lambda: bytes(rng.randrange(256) for _ in range(rng.randint(1, 6)))]
    g["mixed"] = [b"".join(rng.choice(pieces)() for _ in range(rng.randint(0, 40))) for _ in range(30000)]
    return g


def run(argv, data):
    r = subprocess.run(argv, input=data, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"{os.path.basename(argv[0])} exited {r.returncode}: {r.stderr[-500:]}")
    return r.stdout.split("\n")[:-1]


def headers():
    inc = os.environ.get("BANKML_NLOHMANN_INCLUDE")
    cands = [inc] if inc else ["/usr/include", os.path.expanduser("~/.cache/llama.cpp-src/vendor")]
    return [c for c in cands if c and os.path.exists(os.path.join(c, "nlohmann", "json.hpp"))]


def header_version(inc):
    try:
        with open(os.path.join(inc, "nlohmann", "json.hpp")) as f:
            for line in f:
                if "version " in line:
                    return line.split("version", 1)[1].strip()
    except OSError:
        pass
    return "?"


def go_tool():
    go = shutil.which("go")
    if not go:
        for p in ("/usr/lib/go/bin/go", "/usr/local/go/bin/go"):
            if os.path.exists(p):
                go = p
    return go


def go_fix(line, old_go):
    """Go < 1.22 writes \\b and \\f as \\u0008 and \\u000c; map them to what Go >= 1.22 writes."""
    if not old_go:
        return line
    b = bytes.fromhex(line)
    out, i = bytearray(), 0
    while i < len(b):
        if b[i] == 0x5C:
            esc = b[i:i + 6] if b[i + 1] == 0x75 else b[i:i + 2]
            out += {b"\\u0008": b"\\b", b"\\u000c": b"\\f"}.get(esc, esc)
            i += len(esc)
        else:
            out.append(b[i])
            i += 1
    return out.hex()


def compare(s, label, g, order, want, got, show):
    i = 0
    for k in order:
        bad = 0
        for x in g[k]:
            if want[i] == got[i]:
                s.passed += 1
            else:
                bad += 1
                s.failed += 1
                if show[0] < 30:
                    show[0] += 1
                    print(f"FAIL  {label} {k} {x.hex()}: want {want[i]}, bankml {got[i]}")
            i += 1
        print(f"{'ok   ' if not bad else 'FAIL '} {label} {k}: {len(g[k]) - bad}/{len(g[k])} identical", flush=True)


def main():
    s = oracle.Suite("oracle_json_str")
    cc = os.environ.get("CC", "gcc")
    os.makedirs(BUILD, exist_ok=True)
    r = subprocess.run([cc] + CFLAGS + ["-o", DRIVER, "testing/json_str_driver.c", "src/base/json.c", "-lm"],
                       cwd=ROOT, capture_output=True, text=True)
    if not s.check("build json-str-driver", r.returncode == 0, r.stderr[-2000:]):
        s.finish()
    g = groups()
    order = list(g)
    alls = [x for k in order for x in g[k]]
    data = "".join(x.hex() + "\n" for x in alls)
    n = len(alls)
    show = [0]

    # json_text_nl, json_utf8_valid_len: Python's decoder (the same maximal-subpart practice)
    want = [x.decode("utf-8", "replace").encode().hex() for x in alls]
    compare(s, "text-nl/python", g, order, want, run([DRIVER, "text-nl"], data), show)
    def valid_len(x):
        try:
            x.decode("utf-8")
            return len(x)
        except UnicodeDecodeError as e:
            return e.start
    want = [str(valid_len(x)).encode().hex() for x in alls]
    compare(s, "valid/python", g, order, want, run([DRIVER, "valid"], data), show)
    # json_put_str_nl must be JSON whose value is json_text_nl's text
    got_nl = run([DRIVER, "nl"], data)
    bad = [x for x, o in zip(alls, got_nl) if json.loads(bytes.fromhex(o).decode("utf-8")) !=
           x.decode("utf-8", "replace")]
    s.check("nl: every output parses (json.loads) to the replaced text", not bad, f"{len(bad)} differ, e.g. "
            f"{bad[0].hex() if bad else ''}")

    # json_text_peg: what llama-server b11669's chat answers held, measured on the binary (forced with
    # logit_bias and presence_penalty on stories260K's byte tokens, non-streamed chat content before nlohmann)
    peg = [("41e08042", "41efbfbd42"), ("41eda08042", "41eda08042"), ("41f09f42", "41efbfbd42"), ("41e282", "41"),
           ("4142c3", "4142"), ("41f580", "41"), ("414280", "4142efbfbd"), ("4142c0", "4142"), ("41e080", "41"),
           ("41f880", "41efbfbdefbfbd"), ("4142eda0", "4142")]
    got = run([DRIVER, "text-peg"], "".join(x + "\n" for x, _ in peg))
    for (x, w), o in zip(peg, got):
        s.check(f"text-peg {x} (measured on llama-server)", o == w, f"want {w}, bankml {o}")

    gxx = shutil.which("g++")
    hs = headers()
    if not gxx or not hs:
        s.skip("nlohmann", "g++ not found" if not gxx else
               "nlohmann/json.hpp not found (run testing/install_deps.sh, or set BANKML_NLOHMANN_INCLUDE)")
    for inc in hs:
        kit = os.path.join(BUILD, "kit-nlohmann-str-" + re.sub(r"[^0-9a-z]+", "-", header_version(inc)))
        flags = [] if os.path.realpath(inc) == "/usr/include" else ["-isystem", inc]
        r = subprocess.run([gxx, "-std=c++17", "-O2"] + flags + ["-o", kit,
                           os.path.join(ROOT, "testing", "kit_nlohmann_str.cpp")], capture_output=True, text=True)
        if not s.check(f"build kit-nlohmann-str ({inc} {header_version(inc)})", r.returncode == 0, r.stderr[-2000:]):
            continue
        want = run([kit], data)
        if not s.check("line counts", len(want) == n == len(got_nl), f"{n} in, kit {len(want)}, bankml {len(got_nl)}"):
            continue
        compare(s, f"nlohmann {header_version(inc)}", g, order, want, got_nl, show)

    go = go_tool()
    got_go = run([DRIVER, "go"], data)
    want = []
    for o in got_go:
        t = bytes.fromhex(o)
        want.append(json.loads(t.decode("utf-8")).encode("utf-8", "surrogatepass").hex())
    compare(s, "text-go/go-output", g, order, want, run([DRIVER, "text-go"], data), show)
    if not go:
        s.skip("go", "no Go toolchain (Debian: apt-get install golang-go)")
        s.finish()
    ver = subprocess.run([go, "version"], capture_output=True, text=True).stdout
    m = re.search(r"go1\.(\d+)", ver)
    old_go = bool(m) and int(m.group(1)) < 22
    env = dict(os.environ, GOFLAGS="-mod=mod", GO111MODULE="off", GOCACHE=os.environ.get("GOCACHE") or
               os.path.join(BUILD, "go-cache"))
    r = subprocess.run([go, "build", "-o", GOKIT, os.path.join(ROOT, "testing", "kit_go_str.go")],
                       capture_output=True, text=True, env=env)
    if not s.check(f"build kit-go-str ({ver.strip()})", r.returncode == 0, r.stderr[-2000:]):
        s.finish()
    want = [go_fix(o, old_go) for o in run([GOKIT], data)]
    if s.check("go line counts", len(want) == n == len(got_go), f"{n} in, kit {len(want)}, bankml {len(got_go)}"):
        compare(s, "go" + (" (\\b \\f as Go >= 1.22)" if old_go else ""), g, order, want, got_go, show)
    s.finish()


if __name__ == "__main__":
    main()
