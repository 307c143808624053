#!/usr/bin/env python3
"""oracle_cli.py -- bankml's model-reading commands against llama-server b11669, end to end.

For a few models (stories260K: SPM, no template; a generated llama model: starcoder BPE, SmolLM2's template;
a generated qwen3 model: Qwen's BPE and Qwen3's template), starts llama-server once and compares:
  `bankml tokenize MODEL [--no-special]`   with POST /tokenize {"content", "add_special": false, "parse_special"}
  `bankml detokenize MODEL`                with POST /detokenize {"tokens"}
  `bankml chat-template MODEL`             with POST /apply-template {"messages"}
The tokenizer and template suites compare the modules themselves on thousands of cases; this one checks that
the commands wire them as llama-server does (BOS/EOS pieces, the fallback template, special parsing).
"""
import json, os, subprocess, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle  # noqa: E402

BIN = os.path.join(oracle.ROOT, os.environ.get("BANKML_BIN", "bankml"))

TEXTS = ["Hello world", " leading space", "Hello <|im_start|>user\nhi<|im_end|>", "naïve café 🍕 日本語",
         "  two  spaces\n\nand\ttabs", "1234567890 3.14159", "<s>bos text</s>", "", "don't we'll I'd",
         "<|endoftext|><|im_end|>"]

CONVERSATIONS = [
    [{"role": "user", "content": "Hello"}],
    [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi there"}],
    [{"role": "user", "content": "one"}, {"role": "assistant", "content": "two"},
     {"role": "user", "content": "three\nfour"}],
    [{"role": "system", "content": ""}, {"role": "user", "content": "émoji 🍕"}],
    [{"role": "user", "content": "a"}, {"role": "assistant", "content": "<think>\nhmm\n</think>\n\nb"},
     {"role": "user", "content": "c"}],
]


def bankml(args, stdin):
    p = subprocess.run([BIN] + args, input=stdin.encode(), capture_output=True, timeout=120)
    return p.returncode, p.stdout.decode("utf-8", "surrogateescape"), p.stderr.decode("utf-8", "replace")


def main():
    s = oracle.Suite("oracle_cli")
    kit = oracle.kit_or_skip(s)
    shared = oracle.shared_or_skip(s)
    models_dir = oracle.ensure_models(s)
    models = [os.path.join(shared, "models", "stories260K.gguf"),
              os.path.join(models_dir, "llama-e384-f32.gguf"),
              os.path.join(models_dir, "qwen3-e128-q8_0.gguf")]
    for model in models:
        name = os.path.basename(model)
        with oracle.Server.llama(kit, model, ctx=512, name="cli-" + name) as srv:
            for i, text in enumerate(TEXTS):
                for special in (True, False):
                    st, want = srv.post("/tokenize", {"content": text, "add_special": False,
                                                      "parse_special": special})
                    rc, out, err = bankml(["tokenize", model] + ([] if special else ["--no-special"]), text)
                    got = json.loads(out) if rc == 0 else {"exit": rc, "stderr": err}
                    s.equal(f"{name} tokenize #{i} special={special}", got, want)
                    if special and st == 200:
                        ids = want["tokens"]
                        st2, want2 = srv.post("/detokenize", {"tokens": ids})
                        rc, out, err = bankml(["detokenize", model], json.dumps(ids))
                        s.equal(f"{name} detokenize #{i}", {"content": out} if rc == 0 else {"exit": rc}, want2)
            for i, conv in enumerate(CONVERSATIONS):
                st, want = srv.post("/apply-template", {"messages": conv})
                rc, out, err = bankml(["chat-template", model], json.dumps(conv))
                got = {"prompt": out} if rc == 0 else {"exit": rc, "stderr": err}
                s.equal(f"{name} chat-template #{i}", got, want if st == 200 else {"status": st, "body": want})
    s.finish()


if __name__ == "__main__":
    main()
