#!/usr/bin/env python3
"""Writes vocab-only GGUFs for the pre-tokenizers that ../shared/vocab has no vocabulary of (issue 20: Mistral's
`tekken`, `gpt-4o` and the names b11669 gives the same regex set), each a copy of a shared vocabulary with only
`tokenizer.ggml.pre` changed, so that llama.cpp b11669 and bankml split the same text with that name's regexes and
merge it with the same byte-level BPE tokens.

Run with the oracle kit's gguf-py:  gguf-py testing/make_pretok_vocabs.py OUTDIR [SHARED [NAME...]]
Writes OUTDIR/ggml-vocab-<pre>.gguf (from llama-bpe: byte-level BPE, 128,256 tokens, cased letters) for each name
(or only the NAMEs given); a file newer than this script is kept.
"""
import os
import sys

import gguf

# name -> the shared vocabulary it is copied from
DERIVED = {"tekken": "llama-bpe", "gpt-4o": "llama-bpe", "llama4": "llama-bpe", "kanana2": "llama-bpe",
           "talkie": "llama-bpe", "minimax-m2": "llama-bpe"}


def copy_vocab(src, dst, pre):
    r = gguf.GGUFReader(src)
    arch = bytes(r.fields["general.architecture"].parts[r.fields["general.architecture"].data[0]]).decode()
    w = gguf.GGUFWriter(dst + ".tmp", arch)
    for name, f in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        if name == "tokenizer.ggml.pre":
            w.add_string(name, pre)
            continue
        vt = f.types[0]
        if vt == gguf.GGUFValueType.ARRAY:
            et = f.types[1]
            if et == gguf.GGUFValueType.STRING:
                w.add_array(name, [bytes(f.parts[i]).decode("utf-8", "surrogateescape") for i in f.data])
            else:
                w.add_array(name, [f.parts[i].tolist()[0] for i in f.data])
        elif vt == gguf.GGUFValueType.STRING:
            w.add_string(name, bytes(f.parts[f.data[0]]).decode("utf-8"))
        elif vt == gguf.GGUFValueType.BOOL:
            w.add_bool(name, bool(f.parts[f.data[0]][0]))
        elif vt == gguf.GGUFValueType.FLOAT32:
            w.add_float32(name, float(f.parts[f.data[0]][0]))
        elif vt == gguf.GGUFValueType.INT32:
            w.add_int32(name, int(f.parts[f.data[0]][0]))
        else:
            w.add_uint32(name, int(f.parts[f.data[0]][0]))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    os.replace(dst + ".tmp", dst)


def main():
    out = sys.argv[1]
    shared = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared")
    os.makedirs(out, exist_ok=True)
    names = sys.argv[3:] or list(DERIVED)
    for pre in names:
        base = DERIVED[pre]
        src = os.path.join(shared, "vocab", f"ggml-vocab-{base}.gguf")
        dst = os.path.join(out, f"ggml-vocab-{pre}.gguf")
        if not os.path.exists(dst) or os.path.getmtime(dst) < os.path.getmtime(os.path.abspath(__file__)):
            copy_vocab(src, dst, pre)
    return 0


if __name__ == "__main__":
    sys.exit(main())
