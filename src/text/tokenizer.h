/*
 * tokenizer.h -- a GGUF vocabulary and the text <-> token id mappings that
 * llama.cpp b11669 (src/llama-vocab.cpp, src/unicode.cpp) computes for it.
 *
 * Four tokenizer models are reproduced: SentencePiece-style BPE over scores
 * (`tokenizer.ggml.model` = "llama"), byte-level BPE over ranked merges
 * ("gpt2", and "gemma4"'s raw-UTF-8 variant) with hand-written matchers for
 * each pre-tokenizer regex llama.cpp uses for the `.pre` names listed in
 * docs/modules/tokenizer.md, WordPiece ("bert") and Unigram ("t5", with its
 * precompiled charsmap normalizer). Anything else ("rwkv", "plamo2",
 * pre-tokenizers without a matcher here) is refused when the vocabulary
 * loads, with the reason.
 *
 * A vocabulary is immutable once loaded; every function taking a const
 * tok_vocab * may be called from several threads at once.
 */
#ifndef BANKML_TOKENIZER_H
#define BANKML_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "file/gguf.h"
#include "base/json.h"

/* "no token", llama.cpp's LLAMA_TOKEN_NULL. */
#define TOK_NULL (-1)

/* Token attributes, llama_token_attr's bits. */
enum {
    TOK_ATTR_UNDEFINED    = 0,
    TOK_ATTR_UNKNOWN      = 1 << 0,
    TOK_ATTR_UNUSED       = 1 << 1,
    TOK_ATTR_NORMAL       = 1 << 2,
    TOK_ATTR_CONTROL      = 1 << 3,
    TOK_ATTR_USER_DEFINED = 1 << 4,
    TOK_ATTR_BYTE         = 1 << 5,
    TOK_ATTR_NORMALIZED   = 1 << 6,
    TOK_ATTR_LSTRIP       = 1 << 7,
    TOK_ATTR_RSTRIP       = 1 << 8,
    TOK_ATTR_SINGLE_WORD  = 1 << 9
};

/* Vocabulary types, llama_vocab_type's values for the four we play. */
enum { TOK_TYPE_SPM = 1, TOK_TYPE_BPE = 2, TOK_TYPE_WPM = 3, TOK_TYPE_UGM = 4 };

typedef struct tok_vocab tok_vocab;

/* Loads the vocabulary of the GGUF at path (mapped read-only, closed again
 * before returning: the vocabulary keeps copies of what it needs). Returns
 * NULL with a one-line reason in err when the file cannot be read or parsed,
 * when the vocabulary is malformed, or when bankml cannot reproduce its
 * tokenizer ("tokenizer model 'rwkv' is not supported by bankml"). */
tok_vocab *tok_load(const char *path, char *err, size_t errlen);

/* The same from an already parsed header and the file bytes b[0..n) it was
 * parsed from (the map, or a prefix holding every tokenizer array). Nothing
 * is kept pointing into h or b. */
tok_vocab *tok_load_gguf(const gguf_header *h, const uint8_t *b, size_t n,
                         char *err, size_t errlen);

void tok_free(tok_vocab *v);

/* Tokenizes text[0..len) as llama_tokenize(vocab, text, len, ..., add_special,
 * parse_special) does: special-token texts (CONTROL and UNKNOWN tokens only
 * when parse_special, USER_DEFINED always) are cut out first, longest first;
 * add_special adds BOS/EOS as the vocabulary's add_bos/add_eos flags say
 * (WordPiece: always [CLS] first and [SEP] last, as llama.cpp does).
 * Any bytes are accepted (invalid UTF-8 and NUL included). On success
 * returns 0 and sets *ids (malloc'd, free() it; NULL when *n is 0) and *n.
 * Returns -1 with a reason when memory runs out or when llama.cpp itself
 * would fail on the input (a code point above U+10FFFF in a BPE text, a
 * byte with no fallback token); *ids is then NULL and *n 0. */
int tok_tokenize(const tok_vocab *v, const char *text, size_t len, int add_special,
                 int parse_special, int32_t **ids, size_t *n, char *err, size_t errlen);

/* Appends the piece of token id to out, as llama_token_to_piece(vocab, id,
 * buf, len, 0, special): CONTROL and UNKNOWN tokens give nothing unless
 * special; byte tokens give their byte; BPE pieces are decoded back from the
 * byte-to-unicode alphabet, the others have U+2581 turned to spaces.
 * Returns the number of bytes appended, or -1 when id is out of range (out
 * untouched). */
int tok_piece(const tok_vocab *v, int32_t id, int special, jbuf *out);

/* Appends the text of ids[0..n) as llama_detokenize(vocab, ids, n, ...,
 * remove_special, unparse_special) does (leading-space removal for
 * SentencePiece, BOS/EOS removal, the BPE clean-up of spaces before
 * punctuation and contractions). Returns 0, or -1 with a reason when an id
 * is out of range (out then holds nothing new). */
int tok_detokenize(const tok_vocab *v, const int32_t *ids, size_t n, int remove_special,
                   int unparse_special, jbuf *out, char *err, size_t errlen);

/* 1 when id ends generation (llama_vocab_is_eog), else 0. */
int tok_is_eog(const tok_vocab *v, int32_t id);

/* Sizes, flags and special ids (TOK_NULL when the vocabulary has none). */
int32_t tok_n_tokens(const tok_vocab *v);
int tok_type(const tok_vocab *v);                 /* TOK_TYPE_* */
const char *tok_model_name(const tok_vocab *v);   /* tokenizer.ggml.model */
const char *tok_pre_name(const tok_vocab *v);     /* tokenizer.ggml.pre ("" when absent) */
int tok_add_bos(const tok_vocab *v);
int tok_add_eos(const tok_vocab *v);
int tok_add_space_prefix(const tok_vocab *v);
int32_t tok_bos(const tok_vocab *v);
int32_t tok_eos(const tok_vocab *v);
int32_t tok_eot(const tok_vocab *v);
int32_t tok_eom(const tok_vocab *v);
int32_t tok_unk(const tok_vocab *v);
int32_t tok_pad(const tok_vocab *v);
int32_t tok_sep(const tok_vocab *v);
int32_t tok_mask(const tok_vocab *v);
int32_t tok_nl(const tok_vocab *v);               /* the newline token */
int32_t tok_fim_pre(const tok_vocab *v);
int32_t tok_fim_suf(const tok_vocab *v);
int32_t tok_fim_mid(const tok_vocab *v);
int32_t tok_fim_pad(const tok_vocab *v);
int32_t tok_fim_rep(const tok_vocab *v);
int32_t tok_fim_sep(const tok_vocab *v);

/* A token's stored text (not NUL-terminated; *len its length), score and
 * attributes (TOK_ATTR_* after llama-vocab's overrides). Out-of-range ids
 * give NULL / 0 / 0. */
const char *tok_text(const tok_vocab *v, int32_t id, size_t *len);
float tok_score(const tok_vocab *v, int32_t id);
uint32_t tok_attr(const tok_vocab *v, int32_t id);

/* The id of the token whose text is exactly s[0..len), or TOK_NULL. */
int32_t tok_find(const tok_vocab *v, const char *s, size_t len);

#endif
