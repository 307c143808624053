#!/usr/bin/env python3
"""make_chat_models.py -- the random-weight models testing/oracle_chat_tools.py runs: tiny (E=64, one layer),
UNTIED (a random output matrix, so the greedy answer is no echo of the last token and a grammar's choices vary),
on llama.cpp's real vocabularies with the chat markers real models have as single tokens appended as
user-defined tokens (Qwen3's <think>, </think>, <tool_call>, </tool_call>; Llama 3.1's <|python_tag|> and
<|eom_id|>), as real GGUFs of those families carry them.

    gguf-py testing/make_chat_models.py OUTDIR      # writes chat-qwen, chat-llama, chat-harmony and chat-mistral .gguf (if missing)
    gguf-py testing/make_chat_models.py OUTDIR qwen # only chat-qwen.gguf (testing/oracle_clients_tools.py)

The weights come from make_models.py's splitmix64 generator (the same bits everywhere). Standard library,
numpy and gguf-py."""
import os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf  # noqa: E402
import make_models as mm  # noqa: E402

SHAPE = dict(E=64, L=1, H=2, KV=1, hd=32, FF=128, tied=False, extra=0)
USER = int(gguf.TokenType.USER_DEFINED)
CONTROL = int(gguf.TokenType.CONTROL)


def vocab(shared, which):
    if which == "harmony":
        # GPT-OSS's o200k_harmony is in no shared vocabulary: Qwen's BPE with the harmony markers appended as
        # control tokens, as gpt-oss GGUFs carry them (llama_vocab makes <|return|> and <|call|> end of
        # generation, keeps <|end|> out of it and renders <|channel|>, <|message|>, <|start|>, <|constrain|>)
        v = mm.read_vocab(os.path.join(shared, "vocab", "ggml-vocab-qwen2.gguf"))
        add = ["<|start|>", "<|channel|>", "<|message|>", "<|call|>", "<|end|>", "<|return|>", "<|constrain|>"]
        n = len(v["tokenizer.ggml.tokens"])
        tokens = list(v["tokenizer.ggml.tokens"]) + add
        types = list(v["tokenizer.ggml.token_type"]) + [CONTROL] * len(add)
        assert len(set(tokens)) == len(tokens)
        base = dict(pre="qwen2", bos=151643, eos=n + add.index("<|return|>"), unk=None, pad=151643)
        with open(os.path.join(shared, "templates", "qwen3.chat_template.jinja"), encoding="utf-8") as fh:
            template = fh.read()
        return dict(base, tokens=tokens, types=types, merges=v["tokenizer.ggml.merges"], template=template)
    if which == "mistral":
        # Mistral's tekken is in no shared vocabulary: Llama 3's BPE with the bracket markers appended as control
        # tokens, as Ministral 3 GGUFs carry them
        v = mm.read_vocab(os.path.join(shared, "vocab", "ggml-vocab-llama-bpe.gguf"))
        add = ["[INST]", "[/INST]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]",
               "[TOOL_RESULTS]", "[/TOOL_RESULTS]", "[TOOL_CALLS]", "[ARGS]", "[THINK]", "[/THINK]"]
        tokens = list(v["tokenizer.ggml.tokens"]) + add
        types = list(v["tokenizer.ggml.token_type"]) + [CONTROL] * len(add)
        assert len(set(tokens)) == len(tokens)
        base = dict(pre="llama-bpe", bos=tokens.index("<|begin_of_text|>"), eos=tokens.index("<|eot_id|>"),
                    unk=None, pad=tokens.index("<|end_of_text|>"))
        with open(os.path.join(shared, "templates", "qwen3.chat_template.jinja"), encoding="utf-8") as fh:
            template = fh.read()
        return dict(base, tokens=tokens, types=types, merges=v["tokenizer.ggml.merges"], template=template)
    if which == "qwen":
        v = mm.read_vocab(os.path.join(shared, "vocab", "ggml-vocab-qwen2.gguf"))
        add = ["<tool_call>", "</tool_call>", "<think>", "</think>"]
        base = dict(pre="qwen2", bos=151643, eos=151645, unk=None, pad=151643)
    else:
        v = mm.read_vocab(os.path.join(shared, "vocab", "ggml-vocab-llama-bpe.gguf"))
        add = ["<|python_tag|>", "<|eom_id|>"]
        tokens = v["tokenizer.ggml.tokens"]
        base = dict(pre="llama-bpe", bos=tokens.index("<|begin_of_text|>"), eos=tokens.index("<|eot_id|>"),
                    unk=None, pad=tokens.index("<|end_of_text|>"))
    tokens = list(v["tokenizer.ggml.tokens"]) + add
    types = list(v["tokenizer.ggml.token_type"]) + [USER] * len(add)
    assert len(set(tokens)) == len(tokens)
    with open(os.path.join(shared, "templates", "qwen3.chat_template.jinja"), encoding="utf-8") as fh:
        template = fh.read()   # the server's --chat-template-file replaces it
    return dict(base, tokens=tokens, types=types, merges=v["tokenizer.ggml.merges"], template=template)


def main():
    out = sys.argv[1]
    shared = os.environ.get("BANKML_SHARED") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                                             "shared")
    os.makedirs(out, exist_ok=True)
    only = sys.argv[2:]
    for which, arch, seed in (("qwen", "qwen3", 41), ("llama", "llama", 42), ("harmony", "qwen3", 43),
                             ("mistral", "llama", 44)):
        if only and which not in only:
            continue
        path = os.path.join(out, f"chat-{which}.gguf")
        if os.path.exists(path):
            continue
        spec = dict(SHAPE, name=f"chat-{which}", arch=arch, seed=seed)
        mm.write_base(spec, vocab(shared, which), path + ".tmp", "F16")
        os.replace(path + ".tmp", path)
        print("make_chat_models: wrote", path, flush=True)


if __name__ == "__main__":
    main()
