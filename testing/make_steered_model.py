#!/usr/bin/env python3
"""make_steered_model.py -- a copy of make_chat_models.py's chat-qwen.gguf whose greedy answer walks a chain of
chosen tokens, for the Ollama tools/think oracle (testing/oracle_ollama_tools.py): Ollama's API has no
logit_bias, so the model itself must call tools and open reasoning blocks.

    gguf-py testing/make_steered_model.py IN.gguf OUT.gguf

The layer's attention output and FFN down projections are zeroed, so the last hidden state is the current
token's embedding; then the output row of each chain's next token is that embedding (times the output norm's
weight), scaled to dominate every other logit:

    "\\n" -> <think> -> "ok" -> </think> -> "\\n\\n" -> <tool_call> -> "\\n",   </tool_call> -> <|im_end|>

Qwen3's generation prompt ends in "\\n" (thinking on: a reasoning block, then a call) or, with thinking off,
in "</think>\\n\\n" (a call at once). "<tool_call>\\n" is the lazy grammar's trigger; inside the call the grammar
chooses among the random rows (the "\\n" -> <think> step is not allowed there). numpy and
gguf-py only."""
import shutil, sys

import numpy as np
import gguf


def main():
    src, out = sys.argv[1], sys.argv[2]
    shutil.copyfile(src, out + ".tmp")
    r = gguf.GGUFReader(out + ".tmp", "r+")
    f = r.fields["tokenizer.ggml.tokens"]
    tokens = [bytes(f.parts[i]).decode("utf-8") for i in f.data]
    ids = {t: tokens.index(t) for t in ("\u010a", "\u010a\u010a", "<think>", "ok", "</think>", "<tool_call>",
                                        "</tool_call>", "<|im_end|>")}
    t = {x.name: x for x in r.tensors}
    for name in ("blk.0.attn_output.weight", "blk.0.ffn_down.weight"):
        t[name].data[...] = 0
    emb = np.array(t["token_embd.weight"].data, dtype=np.float32)
    g = np.array(t["output_norm.weight"].data, dtype=np.float32)
    outw = t["output.weight"].data
    chain = [("\u010a", "<think>"), ("<think>", "ok"), ("ok", "</think>"), ("</think>", "\u010a\u010a"),
             ("\u010a\u010a", "<tool_call>"), ("<tool_call>", "\u010a"), ("</tool_call>", "<|im_end|>")]
    for a, b in chain:
        v = emb[ids[a]] * g
        outw[ids[b]] = (v / np.linalg.norm(v) * 40.0).astype(outw.dtype)
    del r
    shutil.move(out + ".tmp", out)
    print("make_steered_model: wrote", out, flush=True)


if __name__ == "__main__":
    main()
