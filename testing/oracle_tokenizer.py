#!/usr/bin/env python3
"""Oracle suite for the tokenizer (src/text/tokenizer*.c) against llama.cpp b11669's tokenizer.

For every vocabulary in ../shared/vocab (ggml-vocab-*.gguf) and
../shared/models/stories260K.gguf:
  corpus   each test string of X.gguf.inp tokenizes to the ids on the same
           line of X.gguf.out (llama.cpp's tests/test-tokenizer-0: add_special
           and parse_special both false);
  info     the special ids, flags, every token's attributes, end-of-generation
           flag and piece (with and without special) equal libllama's;
  fuzz     N seeded strings (default 2000) over many Unicode ranges, white
           space runs, digits, contractions, invalid UTF-8, NUL bytes and the
           vocabulary's own special-token texts, each tokenized with and
           without special parsing (add_special random), compared id for id
           with libllama loaded in-process (testing/kit_tokenize.c);
  detok    random id sequences detokenized under all four remove_special /
           unparse_special settings, compared byte for byte.
Derived vocabularies (testing/make_pretok_vocabs.py, written with the kit's gguf-py into
/tmp/bankml-oracle-tok/derived): llama-bpe's tokens and merges under the pre-tokenizer names no shared
vocabulary carries (Mistral's `tekken`, `gpt-4o` and its aliases `llama4`, `kanana2`, `talkie`,
`minimax-m2`): info, fuzz (with words that switch letter case) and detok as above, and llama-bpe's corpus
strings compared with libllama's ids (their .out is llama-bpe's, not theirs). The aliases run a tenth of
the fuzz (same matcher, their own flags).
Every vocabulary here must load: SentencePiece, byte-level BPE, WordPiece
(bert-bge) and Unigram (nomic-bert-moe) are all played, so a refusal at load
is a failure (and the vocabulary's other checks are not run).

Usage: python3 testing/oracle_tokenizer.py [--n 2000] [--seed 1] [--vocab NAME]
Builds /tmp/bankml-oracle-tok/{kit_tokenize,tokenizer_driver} with gcc.
Prints per-vocabulary counts, then "N passed, N failed, N skipped"; exits 1
on any failure.
"""
import argparse
import glob
import os
import random
import subprocess
import sys
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.environ.get("BANKML_SHARED", os.path.join(ROOT, "..", "shared"))
KIT = os.environ.get("BANKML_ORACLE_DIR", os.path.expanduser("~/.cache/bankml-oracle"))
OUT = "/tmp/bankml-oracle-tok"

passed = failed = skipped = 0


def build():
    os.makedirs(OUT, exist_ok=True)
    inc = os.path.join(KIT, "root/usr/include")
    lib = os.path.join(KIT, "root/usr/lib/x86_64-linux-gnu")
    kit = os.path.join(OUT, "kit_tokenize")
    drv = os.path.join(OUT, "tokenizer_driver")
    subprocess.run(["gcc", "-O2", "-I" + inc, "-o", kit, os.path.join(ROOT, "testing/kit_tokenize.c"),
                    "-L" + lib, "-lllama", "-Wl,--allow-shlib-undefined"], check=True)
    subprocess.run(["gcc", "-std=gnu11", "-D_GNU_SOURCE", "-O2", "-I" + os.path.join(ROOT, "src"),
                    "-I" + os.path.join(ROOT, "include"), "-o", drv,
                    os.path.join(ROOT, "testing/tokenizer_driver.c"),
                    *sorted(glob.glob(os.path.join(ROOT, "src/text/*.c"))),
                    os.path.join(ROOT, "src/file/gguf.c"), os.path.join(ROOT, "src/base/json.c"),
                    os.path.join(ROOT, "src/base/base.c"), "-lm"], check=True)
    return [os.path.join(KIT, "bin/sid-run"), kit], [drv]


def run(cmd, vocab, mode, data=b""):
    p = subprocess.run(cmd + [vocab, mode], input=data, stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, timeout=300)
    return p.returncode, p.stdout


def tok_requests(items):
    """items: list of (parse_special, add_special, bytes)"""
    return b"".join(b"%d %d %d\n" % (p, a, len(t)) + t + b"\n" for p, a, t in items)


# ---- the fuzz corpus -------------------------------------------------------

RANGES = [
    (0x20, 0x7E), (0xA0, 0xFF), (0x100, 0x24F), (0x250, 0x2FF), (0x300, 0x36F), (0x370, 0x3FF),
    (0x400, 0x4FF), (0x530, 0x58F), (0x590, 0x5FF), (0x600, 0x6FF), (0x900, 0x97F), (0xE00, 0xE7F),
    (0x10A0, 0x10FF), (0x1100, 0x11FF), (0x1E00, 0x1EFF), (0x2000, 0x206F), (0x2070, 0x209F),
    (0x20A0, 0x20CF), (0x2100, 0x214F), (0x2190, 0x22FF), (0x2460, 0x24FF), (0x2500, 0x25FF),
    (0x2600, 0x27BF), (0x3000, 0x303F), (0x3040, 0x30FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF),
    (0xAC00, 0xD7A3), (0xE000, 0xE0FF), (0xF900, 0xFAFF), (0xFB00, 0xFB4F), (0xFE30, 0xFE4F),
    (0xFF00, 0xFFEF), (0xFFF0, 0xFFFF), (0x10000, 0x1007F), (0x10400, 0x1044F), (0x1D400, 0x1D7FF),
    (0x1F300, 0x1F64F), (0x1F680, 0x1F6FF), (0x1F900, 0x1F9FF), (0x20000, 0x2A6DF), (0xE0000, 0xE007F),
    (0x3FFF0, 0x3FFFF), (0x10FFF0, 0x10FFFF),
]
SPACES = [" ", "  ", "   ", "\t", "\n", "\r", "\r\n", "\n\n", "\v", "\f", "\x1c", "\x1f", "\u00a0",
          "\u0085", "\u1680", "\u2000", "\u2009", "\u200b", "\u2028", "\u3000", " \n ", "\t\t\n"]
WORDS = ["Hello", "world", "hello", "WORLD", "the", "The", "llama", "cpp", "token", "don't", "I'm",
         "we're", "they've", "you'll", "he'd", "it's", "IT'S", "Y'ALL", "'s", "'t", "'re", "'ve", "'m",
         "'ll", "'d", "'S", "'T", "'RE", "'Ll", "'x", "''", "naïve", "café", "Ñandú", "straße",
         "Привет", "мир", "Γειά", "שלום", "مرحبا", "नमस्ते", "สวัสดี", "こんにちは", "カタカナ", "你好",
         "世界", "안녕하세요", "🦙", "🚀", "😶‍🌫️", "✅", "👍🏽", "e\u0301", "a\u0308\u0301", "ﬁ", "Ａｂｃ",
         "１２３", "$", "+", "<=>", "^", "~", "|", "`", "@", "#", "%", "&", "*", "(", ")", "[", "]",
         "{", "}", "...", "…", "—", "–", "«", "»", "¿", "¡", "、", "。", "，", "！", "？", "：", "；",
         "<s>", "</s>", "<unk>", "<0x0A>", "▁", "▁▁", "Ġ", "Ċ", "[UNK]", "<|endoftext|>", "<|im_start|>",
         "<|im_end|>", "<|eot_id|>", "<|begin_of_text|>", "<mask>", "http://example.com/a?b=c&d=1",
         "x_1 = f(y)*2;", "if (a < b) { return -1; }", "def f(x):\n    return x", "\\n", "\\\\",
         "C++", "a.b.c", "3.14159", "1,000,000", "0x7FFF", "v1.2.3", "e-mail", "#include <stdio.h>"]
INVALID = [b"\x80", b"\xbf", b"\xc3", b"\xc3(", b"\xe2\x82", b"\xe2\x82(", b"\xf0\x9f\x98", b"\xf8",
           b"\xfe", b"\xff", b"\xc0\x80", b"\xe0\x80\xaf", b"\xed\xa0\x80", b"\xf0\x80\x80\x80",
           b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\xc1\xbf", b"\x00", b"a\x00b", b"\x00\x00"]


# letter-case switches for the Tekken / GPT-4o regexes (upper runs, then lower; non-ASCII letters are both)
CASE_WORDS = ["HelloWorld", "camelCaseWord", "HTTPServer", "XMLHttpRequest", "iPhone", "McDonald's", "DON'T",
              "ÉCOLE", "École", "éCOLE", "naïveTÉ", "ΑθήναΣ", "ΣΑΣ", "ПриВЕТ", "ǅemal", "ǈǉǊ", "ABCdef",
              "ABC", "aBC", "AbC'S", "Ab'Re", "x/y/z", "a\r\n/b", "1/2\n", "?/\r\n/", " /\n", "日本Go",
              "Go日本", "ÀB", "aÀ", "I'LL", "you'VE", "ﬁNE", "Ωmega", "µs", "Ǆ", "123456789", "١٢٣٤",
              "\u2163\u2164", "x\u0301Y", "A\u0301b", "ÉCole", "ÀBcd", "ÜberMensch", "ñSmith", "çaVa", "ÖlTanker",
              " ÉCOLEs", "ßTHE", "ΣHello", "ÅNew", "ÆTHER", "éLAN", "øKEY", "MÉTROpolis",
              # a non-ASCII letter, then ASCII capitals, then a small letter: one piece (collapsed, the non-ASCII
              # letter is a capital too), across llama-bpe's merges ÓN, ÇÃO, ΔE, İN, ÜR (ids differ otherwise)
              "ÓNa", "İNe", "ÇÃOs", " ΔEx", "ÜRkiye", " BİLgi", "ACIÓNes"]


def rand_cp(rng):
    lo, hi = rng.choice(RANGES)
    return chr(rng.randint(lo, hi))


def fuzz_string(rng, specials, words=None):
    parts = []
    words = words or WORDS
    # mostly short strings; one in 25 is long (40-150 parts)
    for _ in range(rng.randint(40, 150) if rng.random() < 0.04 else rng.randint(1, 12)):
        r = rng.random()
        if r < 0.18:
            parts.append(rng.choice(words).encode())
        elif r < 0.33:
            parts.append("".join(rand_cp(rng) for _ in range(rng.randint(1, 6))).encode("utf-8", "surrogatepass"))
        elif r < 0.48:
            parts.append("".join(rng.choice(SPACES) for _ in range(rng.randint(1, 4))).encode())
        elif r < 0.58:
            parts.append(str(rng.randint(0, 10 ** rng.randint(1, 12))).encode())
        elif r < 0.68 and specials:
            parts.append(rng.choice(specials))
        elif r < 0.75:
            parts.append(rng.choice(INVALID))
        elif r < 0.85:
            parts.append(bytes(rng.choice(b" abcxyzABC019'.,!?-_\t\n") for _ in range(rng.randint(1, 8))))
        else:
            w = rng.choice(words)
            parts.append((" " + w if rng.random() < 0.5 else w + " ").encode())
    return b"".join(parts)


# ---- checks ------------------------------------------------------------------

def check(name, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAIL %s %s" % (name, detail))


def corpus_cases(inp):
    raw = open(inp, "rb").read()
    sep = b"\n__ggml_vocab_test__\n"
    cases, pos = [], 0
    while pos < len(raw):
        nx = raw.find(sep, pos)
        if nx < 0:
            cases.append(raw[pos:])
            break
        cases.append(raw[pos:nx])
        pos = nx + len(sep)
    return cases


def corpus_vs_kit(vname, vocab, inp, kit, drv):
    """The corpus strings of another vocabulary (inp), ids compared with libllama's."""
    cases = corpus_cases(inp)
    req = tok_requests([(0, 0, c) for c in cases])
    _, a = run(kit, vocab, "tok", req)
    _, b = run(drv, vocab, "tok", req)
    la, lb = a.split(b"\n"), b.split(b"\n")
    ok = 0
    for i, c in enumerate(cases):
        x = la[i].strip() if i < len(la) else b"<missing>"
        y = lb[i].strip() if i < len(lb) else b"<missing>"
        ok += x == y
        check("%s corpus #%d" % (vname, i), x == y, "%r: llama %s bankml %s" % (c[:60], x[:200], y[:200]))
    return ok, len(cases)


def corpus(vname, vocab, drv):
    inp, outp = vocab + ".inp", vocab + ".out"
    if not os.path.exists(inp):
        return None
    cases = corpus_cases(inp)
    want = [ln.strip() for ln in open(outp, "rb").read().split(b"\n")]
    want = want[:len(cases)]
    rc, got = run(drv, vocab, "tok", tok_requests([(0, 0, c) for c in cases]))
    got = got.split(b"\n")
    ok = 0
    for i, c in enumerate(cases):
        g = got[i].strip() if i < len(got) else b"<missing>"
        good = g == want[i]
        ok += good
        check("%s corpus #%d" % (vname, i), good, "%r: got %s want %s" % (c[:60], g[:200], want[i][:200]))
    return ok, len(cases)


def info(vname, vocab, kit, drv):
    _, a = run(kit, vocab, "info")
    _, b = run(drv, vocab, "info")
    la, lb = a.split(b"\n"), b.split(b"\n")
    bad = [i for i in range(max(len(la), len(lb))) if (la[i] if i < len(la) else None) != (lb[i] if i < len(lb) else None)]
    detail = ""
    if bad:
        i = bad[0]
        detail = "%d lines differ; first: llama %r bankml %r" % (
            len(bad), la[i][:120] if i < len(la) else None, lb[i][:120] if i < len(lb) else None)
    check("%s info" % vname, not bad, detail)
    specials = []
    for ln in lb[17:]:
        f = ln.split(b" ")
        if len(f) == 5 and int(f[1]) & (1 | 8 | 16) and f[3] != b"-":
            specials.append(bytes.fromhex(f[3].decode()))
    return specials, len(lb) - 18


def fuzz(vname, vocab, kit, drv, n, seed, specials, words=None):
    rng = random.Random(seed * 1000003 + zlib.crc32(vname.encode()))
    items = []
    for _ in range(n):
        s = fuzz_string(rng, specials[:400] if len(specials) > 400 else specials, words)
        items.append((0, rng.randint(0, 1), s))
        items.append((1, rng.randint(0, 1), s))
    req = tok_requests(items)
    _, a = run(kit, vocab, "tok", req)
    _, b = run(drv, vocab, "tok", req)
    la, lb = a.split(b"\n"), b.split(b"\n")
    ok = 0
    shown = 0
    for i, it in enumerate(items):
        x = la[i] if i < len(la) else b"<missing>"
        y = lb[i] if i < len(lb) else b"<missing>"
        good = x == y
        ok += good
        if good:
            check("", True)
        else:
            global failed
            failed += 1
            if shown < 5:
                shown += 1
                print("FAIL %s fuzz #%d p=%d a=%d %r\n  llama  %s\n  bankml %s" % (
                    vname, i, it[0], it[1], it[2][:120], x[:300], y[:300]))
    return ok, len(items)


def detok(vname, vocab, kit, drv, n_tokens, seed):
    rng = random.Random(seed * 7919 + zlib.crc32(vname.encode()))
    lines = []
    for _ in range(300):
        k = rng.randint(0, 12)
        ids = [rng.randrange(n_tokens) if rng.random() < 0.8 else rng.randrange(min(n_tokens, 300))
               for _ in range(k)]
        for r in (0, 1):
            for u in (0, 1):
                lines.append(b"%d %d %d\n%s\n" % (r, u, k, " ".join(map(str, ids)).encode()))
    req = b"".join(lines)
    _, a = run(kit, vocab, "detok", req)
    _, b = run(drv, vocab, "detok", req)
    la, lb = a.split(b"\n")[:len(lines)], b.split(b"\n")[:len(lines)]
    ok = sum(1 for i in range(len(lines)) if i < len(la) and i < len(lb) and la[i] == lb[i])
    check("%s detok" % vname, ok == len(lines), "%d of %d equal" % (ok, len(lines)))
    return ok, len(lines)


def main():
    global skipped
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--vocab", default=None)
    args = ap.parse_args()
    if not os.path.exists(os.path.join(KIT, "bin/sid-run")):
        print("oracle kit missing (sh ../shared/oracle/install.sh)")
        print("0 passed, 0 failed, 1 skipped")
        return 0
    kit, drv = build()
    vocabs = sorted(glob.glob(os.path.join(SHARED, "vocab", "ggml-vocab-*.gguf")))
    stories = os.path.join(SHARED, "models", "stories260K.gguf")
    if os.path.exists(stories):
        vocabs.append(stories)
    derived_dir = os.path.join(OUT, "derived")
    p = subprocess.run([os.path.join(KIT, "bin/gguf-py"), os.path.join(ROOT, "testing/make_pretok_vocabs.py"),
                        derived_dir, SHARED], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    check("derived vocabularies written", p.returncode == 0, p.stdout[-800:])
    derived = sorted(glob.glob(os.path.join(derived_dir, "ggml-vocab-*.gguf")))
    vocabs += derived
    if args.vocab:
        vocabs = [v for v in vocabs if args.vocab in os.path.basename(v)]
    for vocab in vocabs:
        vname = os.path.basename(vocab)[:-len(".gguf")].replace("ggml-vocab-", "")
        rc, out = run(drv, vocab, "info")
        if rc != 0:
            reason = out.decode(errors="replace").strip()
            check("%s load" % vname, False, reason)
            print("%-15s refused: %s" % (vname, reason[8:]))
            continue
        specials, n_tokens = info(vname, vocab, kit, drv)
        if vocab in derived:
            c = corpus_vs_kit(vname, vocab, os.path.join(SHARED, "vocab", "ggml-vocab-llama-bpe.gguf.inp"), kit, drv)
            main_name = vname in ("tekken", "gpt-4o")
            f = fuzz(vname, vocab, kit, drv, args.n if main_name else max(1, args.n // 10), args.seed, specials,
                     WORDS + CASE_WORDS * 3)
        else:
            c = corpus(vname, vocab, drv)
            f = fuzz(vname, vocab, kit, drv, args.n, args.seed, specials)
        d = detok(vname, vocab, kit, drv, n_tokens, args.seed)
        print("%-15s corpus %s  fuzz %d/%d  detok %d/%d" % (
            vname, "%d/%d" % c if c else "-", f[0], f[1], d[0], d[1]))
    print("%d passed, %d failed, %d skipped" % (passed, failed, skipped))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
