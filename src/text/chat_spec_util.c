/*
 * chat_spec_util.c -- the helpers b11669's specialised parsers share
 * (chat_spec_int.h): builder shorthands in GCC's creation order, the tools'
 * and schemas' readers, and the result lists.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/chat_gen_int.h"
#include "text/chat_peg.h"
#include "text/chat_spec_int.h"

size_t csp_sp(peg_arena *a, const char *s, size_t x)
{
    size_t l = peg_literal_c(a, s);
    return peg_seq2(a, l, x);
}

size_t csp_ps(peg_arena *a, size_t x, const char *s)
{
    size_t l = peg_literal_c(a, s);
    return peg_seq2(a, x, l);
}

size_t csp_shl(peg_arena *a, size_t x, size_t y)
{
    size_t sp = peg_space(a);
    size_t ids[3] = {x, sp, y};
    return peg_sequence(a, ids, 3);
}

int csp_has_tools(const chat_gen_inputs *in)
{
    return in->tools && in->tools->type == JSON_ARRAY && in->tools->n > 0;
}

int csp_has_schema(const chat_gen_inputs *in)
{
    return in->json_schema && in->json_schema->type == JSON_OBJECT && in->json_schema->n > 0;
}

const json_value *csp_function(const json_value *tool, const char **name, size_t *nlen)
{
    const json_value *f = json_get(tool, "function"), *t = json_get(tool, "type");
    if (!f || !t || t->type != JSON_STRING || strcmp(t->str, "function")) return NULL;
    const json_value *n = json_get(f, "name");
    if (!n || n->type != JSON_STRING) return NULL;
    *name = n->str;
    *nlen = n->len;
    return f;
}

const json_value *csp_parameters(const json_value *function)
{
    const json_value *p = json_get(function, "parameters");
    if (!p || p->type == JSON_NULL || (p->type == JSON_OBJECT && p->n == 0)) return NULL;
    return p;
}

size_t csp_schema_json(csp_ctx *c, const char *name, const json_value *root, const json_value *schema)
{
    peg_arena *a = &c->out->arena;
    jbuf sj;
    jbuf_init(&sj);
    if (chat_gen_schema_node_text(root, schema, &sj, c->err, c->errlen)) c->failed = 1;
    size_t js = peg_json(a);
    size_t sc = peg_schema(a, js, name, sj.p ? sj.p : "", sj.len, 0);
    jbuf_free(&sj);
    return sc;
}

static void csp_oom(csp_ctx *c)
{
    if (!c->failed) snprintf(c->err, c->errlen, "out of memory");
    c->failed = 1;
}

char *csp_strdup(csp_ctx *c, const char *s, size_t n)
{
    char *r = malloc(n + 1);
    if (!r) { csp_oom(c); return NULL; }
    if (n) memcpy(r, s, n);
    r[n] = 0;
    return r;
}

static int csp_push(csp_ctx *c, char ***list, size_t *n, const char *s)
{
    char **l = realloc(*list, (*n + 1) * sizeof *l);
    if (!l) { csp_oom(c); return -1; }
    *list = l;
    if (!(l[*n] = csp_strdup(c, s, strlen(s)))) return -1;
    (*n)++;
    return 0;
}

int csp_preserve(csp_ctx *c, const char *tok)
{
    return csp_push(c, &c->out->preserved_tokens, &c->out->npreserved, tok);
}

int csp_end_tag(csp_ctx *c, const char *tag)
{
    chat_gen_params *o = c->out;
    if (!o->thinking_end_tag && !(o->thinking_end_tag = csp_strdup(c, tag, strlen(tag)))) return -1;
    return csp_push(c, &o->thinking_end_tags, &o->nthinking_end_tags, tag);
}

int csp_trigger(csp_ctx *c, int type, const char *value, size_t n)
{
    chat_gen_params *o = c->out;
    chat_gen_trigger *t = realloc(o->triggers, (o->ntriggers + 1) * sizeof *t);
    if (!t) { csp_oom(c); return -1; }
    o->triggers = t;
    t[o->ntriggers].type = type;
    if (!(t[o->ntriggers].value = csp_strdup(c, value, n))) return -1;
    o->ntriggers++;
    return 0;
}

size_t csp_shl_s(peg_arena *a, size_t x, const char *s)
{
    size_t l = peg_literal_c(a, s);
    return csp_shl(a, x, l);
}

size_t csp_tool_schema(csp_ctx *c, const json_value *function, size_t index)
{
    peg_arena *a = &c->out->arena;
    const json_value *params = csp_parameters(function);
    char nm[64];
    snprintf(nm, sizeof nm, "tool-%zu-schema", index);
    if (params) return csp_schema_json(c, nm, params, params);
    /* common_chat_tool_parameters' default, as the typed node writes it */
    static const char empty[] = "{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}";
    size_t js = peg_json(a);
    return peg_schema(a, js, nm, empty, sizeof empty - 1, 0);
}

size_t csp_tagged_args(csp_ctx *c, const json_value *params, const char *rule_prefix,
                       size_t (*arg)(csp_ctx *c, const json_value *params, size_t j, void *ud), void *ud)
{
    peg_arena *a = &c->out->arena;
    size_t *req = NULL, *opt = NULL, nreq = 0, nopt = 0;
    csp_check_params(c, params);                  /* common_chat_schema_from_json: b11669 throws */
    const json_value *props = params && !c->failed && chat_gen_schema_is_object(params) ? json_get(params, "properties") : NULL;
    if (props && props->type == JSON_OBJECT && props->n) {
        req = malloc(props->n * sizeof *req);
        opt = malloc(props->n * sizeof *opt);
        if (!req || !opt) {
            free(req);
            free(opt);
            a->oom = 1;
            return peg_eps(a);
        }
        for (size_t j = 0; j < props->n && !c->failed; j++) {
            size_t r = arg(c, params, j, ud);
            if (csp_required(params, props->keys[j], props->key_lens[j])) req[nreq++] = r;
            else opt[nopt++] = r;
        }
    }
    size_t args = chat_peg_permute(a, rule_prefix, req, nreq);
    if (nopt) args = peg_seq2(a, args, peg_zero_or_more(a, peg_choice(a, opt, nopt)));
    free(req);
    free(opt);
    return args;
}

int csp_required(const json_value *params, const char *name, size_t n)
{
    const json_value *rq = json_get(params, "required");
    for (size_t k = 0; rq && rq->type == JSON_ARRAY && k < rq->n; k++)
        if (rq->items[k]->type == JSON_STRING && rq->items[k]->len == n && !memcmp(rq->items[k]->str, name, n))
            return 1;
    return 0;
}

int csp_check_params(csp_ctx *c, const json_value *params)
{
    if (!params) return 0;
    jbuf chk;
    jbuf_init(&chk);
    int rc = chat_gen_schema_text(params, &chk, c->err, c->errlen);
    jbuf_free(&chk);
    if (rc) c->failed = 1;
    return rc;
}

int chat_spec_translate_gemma(csp_ctx *c)
{
    /* b11669's common_chat_params_init_translate_gemma, measured through the kit (no shared template takes it):
     * literal(generation_prompt) << content(rest()); no grammar, tokens or thinking, whatever the request */
    chat_gen_params *out = c->out;
    peg_arena *a = &out->arena;
    if (!(out->thinking_start_tag = csp_strdup(c, "", 0))) return CHAT_GEN_ERROR;
    size_t gp = peg_literal(a, out->generation_prompt, out->generation_prompt_len);
    size_t root = csp_shl(a, gp, chat_peg_tag(a, "content", peg_rest(a)));
    if (a->oom) { snprintf(c->err, c->errlen, "out of memory"); return CHAT_GEN_ERROR; }
    return peg_build(a, root, c->err, c->errlen) ? CHAT_GEN_ERROR : CHAT_GEN_OK;
}
