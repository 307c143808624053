/* chat_spec_int.h -- shared inside chat_spec*.c only (chat_spec_util.c): the helpers b11669's
 * specialised parsers (common/parsers/<name>.cpp) have in common. */
#ifndef BANKML_CHAT_SPEC_INT_H
#define BANKML_CHAT_SPEC_INT_H

#include <stddef.h>

#include "base/json.h"
#include "text/chat_gen.h"
#include "text/peg.h"

/* what one specialised init reads and writes */
typedef struct {
    const char *tmpl;           /* the template's source */
    size_t tmpl_len;
    const chat_gen_inputs *in;
    chat_gen_params *out;
    char *err;
    size_t errlen;
    int failed;                 /* err holds the reason */
} csp_ctx;

/* "str" + x (the literal made inside operator+, after x) */
size_t csp_sp(peg_arena *a, const char *s, size_t x);
/* x + "str" */
size_t csp_ps(peg_arena *a, size_t x, const char *s);
/* x << y: x + space() + y (the space made inside operator<<) */
size_t csp_shl(peg_arena *a, size_t x, size_t y);

/* x << "str": the literal, then the space, then the sequence ("str" << x makes x first, then the
 * literal: csp_shl(a, peg_literal_c(a, "str"), x) with x built before) */
size_t csp_shl_s(peg_arena *a, size_t x, const char *s);

/* tools is a non-empty array; json_schema a non-empty object (b11669's has_tools / has_response_format) */
int csp_has_tools(const chat_gen_inputs *in);
int csp_has_schema(const chat_gen_inputs *in);
/* foreach_function's test: {"type": "function", "function": {...}}; *name the function's name
 * (a string), NULL when the tool is skipped */
const json_value *csp_function(const json_value *tool, const char **name, size_t *nlen);
/* common_chat_tool_parameters(function): its "parameters", or NULL for none (no key, null, {}) */
const json_value *csp_parameters(const json_value *function);

/* p.schema(p.json(), name, schema): the schema as b11669's typed node keeps it; a schema it
 * rejects sets c->failed with "JSON schema error at ..." (root: where $refs resolve) */
size_t csp_schema_json(csp_ctx *c, const char *name, const json_value *root, const json_value *schema);

/* p.schema(p.json(), "tool-<index>-schema", common_chat_tool_parameters(function)) */
size_t csp_tool_schema(csp_ctx *c, const json_value *function, size_t index);

/* the property `name` is in the schema's "required" (the typed node's property.required) */
int csp_required(const json_value *params, const char *name, size_t n);
/* common_chat_schema_from_json(params) succeeds (NULL params: yes); else c->failed with b11669's
 * reason and -1 */
int csp_check_params(csp_ctx *c, const json_value *params);
/* A tool's tagged arguments as the XML-style inits build them: csp_check_params, then arg(c, params, j, ud)
 * for each property j in order, the required ones permuted into rule_prefix's rules (chat_peg_permute), the
 * optional ones after them any number of times, in any order; peg_eps (a->oom set) out of memory */
size_t csp_tagged_args(csp_ctx *c, const json_value *params, const char *rule_prefix,
                       size_t (*arg)(csp_ctx *c, const json_value *params, size_t j, void *ud), void *ud);

/* appends to out's lists (0, or -1 out of memory with c->failed set) */
int csp_preserve(csp_ctx *c, const char *tok);
int csp_end_tag(csp_ctx *c, const char *tag);
int csp_trigger(csp_ctx *c, int type, const char *value, size_t n);
/* strdup into c->out's fields; NULL (failed set) when out of memory */
char *csp_strdup(csp_ctx *c, const char *s, size_t n);

/* the inits (chat_spec_<name>.c): CHAT_GEN_OK / _ERROR with c->err */
int chat_spec_qwen3_coder(csp_ctx *c);
int chat_spec_ministral_3(csp_ctx *c);
int chat_spec_gpt_oss(csp_ctx *c);
int chat_spec_functionary_v3_2(csp_ctx *c);
int chat_spec_kimi_k2(csp_ctx *c);
int chat_spec_deepseek_v3_2(csp_ctx *c);
int chat_spec_gemma4(csp_ctx *c);
int chat_spec_gigachat_v3(csp_ctx *c);
int chat_spec_cohere2moe(csp_ctx *c);
int chat_spec_muse_glimmer(csp_ctx *c);
int chat_spec_kimi_k3(csp_ctx *c);
int chat_spec_ling3(csp_ctx *c);
int chat_spec_minicpm5(csp_ctx *c);
int chat_spec_lfm2(csp_ctx *c, int tool_list_tokens);
int chat_spec_minimax_m3(csp_ctx *c);
int chat_spec_k2_horizon(csp_ctx *c);
int chat_spec_llm_jp_harmony(csp_ctx *c);
int chat_spec_translate_gemma(csp_ctx *c);      /* in chat_spec_util.c */

#endif
