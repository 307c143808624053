/*
 * chat_peg.c -- common_chat_peg_parse and common_chat_peg_mapper of b11669
 * (see chat_peg.h).
 */
#include "text/chat_peg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cp_isspace(unsigned char c);

static const char *cp_names[CHAT_FORMAT_COUNT] = { "Content-only", "peg-simple", "peg-native", "peg-gemma4", "peg-minimax-m3" };

const char *chat_format_name(chat_format f) { return f < CHAT_FORMAT_COUNT ? cp_names[f] : "unknown"; }

int chat_format_from_name(const char *name, chat_format *out)
{
    for (int i = 0; i < CHAT_FORMAT_COUNT; i++)
        if (strcmp(name, cp_names[i]) == 0) { *out = (chat_format)i; return 0; }
    return -1;
}

void chat_msg_init(chat_msg *m)
{
    memset(m, 0, sizeof *m);
    jbuf_init(&m->content);
    jbuf_init(&m->reasoning);
}

static void cp_call_free(chat_tool_call *c)
{
    jbuf_free(&c->name);
    jbuf_free(&c->arguments);
    jbuf_free(&c->id);
}

void chat_msg_free(chat_msg *m)
{
    jbuf_free(&m->content);
    jbuf_free(&m->reasoning);
    for (size_t i = 0; i < m->ncalls; i++) cp_call_free(&m->calls[i]);
    free(m->calls);
    memset(m, 0, sizeof *m);
}

static const char *cp_data(const jbuf *b) { return b->p ? b->p : ""; }

void chat_msg_put_json(const chat_msg *m, jbuf *out)
{
    jbuf_puts(out, "{\"role\":\"assistant\",\"content\":");
    json_put_str_nl(out, cp_data(&m->content), m->content.len);
    jbuf_puts(out, ",\"reasoning_content\":");
    json_put_str_nl(out, cp_data(&m->reasoning), m->reasoning.len);
    jbuf_puts(out, ",\"tool_calls\":[");
    for (size_t i = 0; i < m->ncalls; i++) {
        const chat_tool_call *c = &m->calls[i];
        jbuf_puts(out, i ? ",{\"name\":" : "{\"name\":");
        json_put_str_nl(out, cp_data(&c->name), c->name.len);
        jbuf_puts(out, ",\"arguments\":");
        json_put_str_nl(out, cp_data(&c->arguments), c->arguments.len);
        jbuf_puts(out, ",\"id\":");
        json_put_str_nl(out, cp_data(&c->id), c->id.len);
        jbuf_putc(out, '}');
    }
    jbuf_puts(out, "]}");
}

/* ---- the builder helpers (common_chat_peg_builder) ----
 * Ids follow b11669's evaluation order, measured on the library: a braced list runs left to
 * right, an operator+ or |= evaluates its right operand first. */

size_t chat_peg_tag(peg_arena *a, const char *tag, size_t p)
{
    static const char *atomic_tags[] = { "tool-open", "tool-close", "tool-id", "tool-name", "tool-arg-open", "tool-arg-close",
                                         "tool-arg-name" };
    size_t t = peg_tag(a, tag, p);
    for (size_t i = 0; i < sizeof atomic_tags / sizeof *atomic_tags; i++)
        if (strcmp(tag, atomic_tags[i]) == 0) return peg_atomic(a, t);
    return t;
}

size_t chat_peg_tag_with_safe_content(peg_arena *a, const char *tag_name, const char *marker, size_t p)
{
    size_t chunk, v[2];
    if (!marker[0]) {
        chunk = peg_rule(a, tag_name, peg_tag(a, "content", peg_any(a)), 0);
    } else {
        size_t n = strlen(marker);
        size_t until = peg_until(a, marker, n);                 /* negate(literal(m)) + any() + until(m) */
        size_t any = peg_any(a);
        size_t neg = peg_negate(a, peg_literal(a, marker, n));
        size_t body = peg_seq2(a, peg_seq2(a, neg, any), until);
        chunk = peg_rule(a, tag_name, peg_tag(a, "content", body), 0);
    }
    v[0] = p;
    v[1] = chunk;
    return peg_zero_or_more(a, peg_choice(a, v, 2));
}

typedef struct {
    const char *prefix;
    const size_t *parsers;
    size_t n;
    size_t memo[1u << CHAT_PEG_MAX_PERMUTE];
} cp_perm;

static size_t cp_remaining(peg_arena *a, cp_perm *pm, uint32_t remaining)
{
    if (remaining == 0) return peg_eps(a);
    if (pm->memo[remaining] != PEG_INVALID) return pm->memo[remaining];
    size_t alts = peg_choice(a, NULL, 0);
    for (size_t i = 0; i < pm->n; i++) {
        uint32_t bit = 1u << i;
        if (!(remaining & bit)) continue;
        size_t rest = cp_remaining(a, pm, remaining & ~bit);   /* parsers[i] + remaining_of(...) */
        size_t seq = peg_seq2(a, pm->parsers[i], rest);
        alts = peg_alt2(a, alts, seq);                         /* alternatives |= ... */
    }
    char name[256];
    snprintf(name, sizeof name, "%s-%u", pm->prefix, remaining);
    return pm->memo[remaining] = peg_rule(a, name, alts, 0);
}

size_t chat_peg_permute(peg_arena *a, const char *rule_prefix, const size_t *parsers, size_t n)
{
    if (n == 0) return peg_eps(a);
    if (n == 1 || n > CHAT_PEG_MAX_PERMUTE) return peg_sequence(a, parsers, n);
    cp_perm pm;
    pm.prefix = rule_prefix;
    pm.parsers = parsers;
    pm.n = n;
    for (size_t i = 0; i < sizeof pm.memo / sizeof *pm.memo; i++) pm.memo[i] = PEG_INVALID;
    return cp_remaining(a, &pm, (1u << n) - 1);
}

size_t chat_peg_prefix(peg_arena *a, const char *s, const char *delimiter)
{
    if (!s[0]) return peg_eps(a);
    if (!delimiter[0]) return peg_literal_c(a, s);
    const char *hit = strstr(s, delimiter);
    return peg_literal(a, s, hit ? (size_t)(hit - s) : strlen(s));
}

size_t chat_peg_optspace(peg_arena *a, const char *tag)
{
    size_t n = strlen(tag), lead = n, trail = n;
    for (size_t i = 0; i < n; i++) if (!cp_isspace((unsigned char)tag[i])) { lead = i; break; }
    for (size_t i = n; i > 0; i--) if (!cp_isspace((unsigned char)tag[i - 1])) { trail = i; break; }
    size_t parser = peg_eps(a);
    for (size_t i = 0; i < lead; i++) parser = peg_seq2(a, parser, peg_optional(a, peg_literal(a, tag + i, 1)));
    parser = peg_seq2(a, parser, peg_literal(a, tag + lead, trail > lead ? trail - lead : 0));
    for (size_t i = trail; i < n; i++) parser = peg_seq2(a, parser, peg_optional(a, peg_literal(a, tag + i, 1)));
    return parser;
}

/* ---- the mapper ---- */

typedef struct {
    chat_msg *msg;
    const peg_ast *ast;
    const char *in;
    int has_pending;
    chat_tool_call pending;
    int cur;                        /* -2 none, -1 the pending call, else an index into msg->calls */
    int arg_count;
    int quote_pending;
    jbuf args_buffer;
    int oom;
} cp_mapper;

static int cp_isspace(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

static chat_tool_call *cp_current(cp_mapper *m)
{
    if (m->cur == -1) return &m->pending;
    if (m->cur >= 0) return &m->msg->calls[m->cur];
    return NULL;
}

/* args_target(): before the call has a name, writes go to the buffer */
static jbuf *cp_args_target(cp_mapper *m)
{
    chat_tool_call *c = cp_current(m);
    return (c && c->name.len) ? &c->arguments : &m->args_buffer;
}

static void cp_set(jbuf *b, const char *s, size_t n)
{
    jbuf_reset(b);
    jbuf_put(b, s, n);
}

static int cp_push_call(cp_mapper *m, chat_tool_call *c)
{
    chat_msg *msg = m->msg;
    if (msg->ncalls == msg->cap) {
        size_t cap = msg->cap ? msg->cap * 2 : 4;
        chat_tool_call *n = realloc(msg->calls, cap * sizeof *n);
        if (!n) { m->oom = 1; return -1; }
        msg->calls = n;
        msg->cap = cap;
    }
    chat_tool_call *d = &msg->calls[msg->ncalls++];
    jbuf_init(&d->name);
    jbuf_init(&d->arguments);
    jbuf_init(&d->id);
    jbuf_put(&d->name, cp_data(&c->name), c->name.len);
    jbuf_put(&d->arguments, cp_data(&c->arguments), c->arguments.len);
    jbuf_put(&d->id, cp_data(&c->id), c->id.len);
    return 0;
}

static void cp_reset_pending(cp_mapper *m)
{
    cp_call_free(&m->pending);
    jbuf_init(&m->pending.name);
    jbuf_init(&m->pending.arguments);
    jbuf_init(&m->pending.id);
    m->has_pending = 0;
}

static int cp_brace_depth(const char *s, size_t n)
{
    int depth = 0, in_str = 0, esc = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (esc) { esc = 0; continue; }
        if (c == '\\' && in_str) { esc = 1; continue; }
        if (c == '"') { in_str = !in_str; continue; }
        if (!in_str) {
            if (c == '{') depth++;
            else if (c == '}') depth--;
        }
    }
    return depth;
}

static int cp_word(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'; }

/* normalize_quotes_to_json: Python quoting and literals to JSON */
static void cp_normalize(const char *s, size_t n, jbuf *o)
{
    int sq = 0, dq = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '\\' && i + 1 < n) {
            char nx = s[i + 1];
            if (sq) {
                if (nx == '\'') { jbuf_putc(o, '\''); i++; continue; }
                if (nx == '"') { jbuf_puts(o, "\\\""); i++; continue; }
                jbuf_putc(o, c); jbuf_putc(o, nx); i++;
                continue;
            }
            if (dq) { jbuf_putc(o, c); jbuf_putc(o, nx); i++; continue; }
            jbuf_putc(o, c);
            continue;
        }
        if (c == '"') {
            if (sq) jbuf_puts(o, "\\\"");
            else { dq = !dq; jbuf_putc(o, c); }
        } else if (c == '\'') {
            if (dq) jbuf_putc(o, c);
            else if (sq) { sq = 0; jbuf_putc(o, '"'); }
            else { sq = 1; jbuf_putc(o, '"'); }
        } else if (!sq && !dq && (c == 'T' || c == 'F' || c == 'N') && (i == 0 || !cp_word(s[i - 1]))) {
            static const char *py[3] = { "True", "False", "None" }, *js[3] = { "true", "false", "null" };
            size_t k = 0;
            while (i + k < n && cp_word(s[i + k])) k++;
            int matched = 0;
            for (int w = 0; w < 3 && !matched; w++) {
                size_t pl = strlen(py[w]);
                size_t cmp = k < pl ? k : pl;
                /* py.substr(0, k) == token: k may exceed the literal's length */
                if (k <= pl && memcmp(py[w], s + i, cmp) == 0) {
                    jbuf_put(o, js[w], k < strlen(js[w]) ? k : strlen(js[w]));
                    i += k - 1;
                    matched = 1;
                }
            }
            if (!matched) jbuf_putc(o, c);
        } else {
            jbuf_putc(o, c);
        }
    }
}

static void cp_map(cp_mapper *m, const peg_ast_node *nd)
{
    const char *tag = nd->tag;
    const char *txt = m->in + nd->start;
    size_t tn = nd->end - nd->start;
    if (!tag[0]) return;
    if (strcmp(tag, "reasoning") == 0) peg_node_text(nd, m->in, &m->msg->reasoning);
    if (strcmp(tag, "content") == 0) peg_node_text(nd, m->in, &m->msg->content);

    chat_tool_call *cur = cp_current(m);
    if (strcmp(tag, "tool-open") == 0) {
        cp_reset_pending(m);
        m->has_pending = 1;
        m->cur = -1;
        m->arg_count = 0;
        jbuf_reset(&m->args_buffer);
        m->quote_pending = 0;
    } else if (strcmp(tag, "tool-id") == 0 && cur) {
        size_t n = tn;
        while (n && cp_isspace((unsigned char)txt[n - 1])) n--;
        const char *s = txt;
        if (n >= 2 && s[0] == '"' && s[n - 1] == '"') { s++; n -= 2; }
        cp_set(&cur->id, s, n);
    } else if (strcmp(tag, "tool-name") == 0 && cur) {
        size_t n = tn;
        while (n && cp_isspace((unsigned char)txt[n - 1])) n--;
        cp_set(&cur->name, txt, n);
        if (m->args_buffer.len) {
            cp_set(&cur->arguments, m->args_buffer.p, m->args_buffer.len);
            jbuf_reset(&m->args_buffer);
        } else if (cur->arguments.len == 0) {
            jbuf_putc(&cur->arguments, '{');
        }
        if (m->has_pending) {
            if (cp_push_call(m, &m->pending) == 0) m->cur = (int)m->msg->ncalls - 1;
            cp_reset_pending(m);
        }
    } else if (strcmp(tag, "tool-args") == 0 && cur) {
        size_t n = tn;
        while (n && cp_isspace((unsigned char)txt[n - 1])) n--;
        if (n && txt[0] == '{') cp_set(cp_args_target(m), txt, n);
    } else if (strcmp(tag, "tool-arg-open") == 0) {
        m->quote_pending = 0;
    } else if (strcmp(tag, "tool-arg-name") == 0 && cur) {
        const char *s = txt;
        size_t n = tn;
        if (n && cp_isspace((unsigned char)s[0])) { s++; n--; }      /* trim: one leading, all trailing */
        while (n && cp_isspace((unsigned char)s[n - 1])) n--;
        jbuf *t = cp_args_target(m);
        if (t->len == 0) jbuf_putc(t, '{');
        if (m->arg_count > 0) jbuf_putc(t, ',');
        json_put_str_nl(t, s, n);
        jbuf_putc(t, ':');
        m->arg_count++;
    } else if ((strcmp(tag, "tool-arg-value") == 0 || strcmp(tag, "tool-arg-string-value") == 0) && cur) {
        int is_str = tag[9] == 's';
        jbuf *t = cp_args_target(m);
        if (tn == 0 && is_str) {
            jbuf_putc(t, '"');
            m->quote_pending = 1;
        } else if (tn && is_str) {
            if (!m->quote_pending) { jbuf_putc(t, '"'); m->quote_pending = 1; }
            jbuf e;
            jbuf_init(&e);
            json_put_str_nl(&e, txt, tn);
            if (e.len >= 2) jbuf_put(t, e.p + 1, e.len - 2);
            jbuf_free(&e);
        } else if (tn) {
            cp_normalize(txt, tn, t);
        }
    } else if (strcmp(tag, "tool-arg-close") == 0 && cur) {
        if (m->quote_pending) { jbuf_putc(cp_args_target(m), '"'); m->quote_pending = 0; }
    } else if (strcmp(tag, "tool-close") == 0 && cur) {
        if (cur->name.len == 0 && m->args_buffer.len) {
            cp_set(&cur->arguments, m->args_buffer.p, m->args_buffer.len);
            jbuf_reset(&m->args_buffer);
        }
        if (m->quote_pending) { jbuf_putc(&cur->arguments, '"'); m->quote_pending = 0; }
        for (int d = cp_brace_depth(cp_data(&cur->arguments), cur->arguments.len); d > 0; d--) jbuf_putc(&cur->arguments, '}');
        if (m->has_pending) {
            if (cur->name.len) cp_push_call(m, &m->pending);
            cp_reset_pending(m);
            if (m->cur == -1) m->cur = -2;
        }
    }
}

static void cp_visit(cp_mapper *m, size_t id, int depth)
{
    const peg_ast_node *nd = &m->ast->nodes[id];
    cp_map(m, nd);
    for (size_t i = 0; i < nd->nkids; i++) cp_visit(m, nd->kids[i], depth + 1);
}

static void cp_from_ast(cp_mapper *m, const peg_result *r)
{
    for (size_t i = 0; i < r->nnodes; i++) cp_visit(m, r->nodes[i], 0);
    if (m->has_pending && m->pending.name.len) {
        if (m->args_buffer.len) cp_set(&m->pending.arguments, m->args_buffer.p, m->args_buffer.len);
        if (m->quote_pending && m->pending.arguments.len) jbuf_putc(&m->pending.arguments, '"');
        cp_push_call(m, &m->pending);
        cp_reset_pending(m);
    }
    jbuf *rs = &m->msg->reasoning;
    int all_ws = 1;
    for (size_t i = 0; i < rs->len && all_ws; i++) {
        char c = rs->p[i];
        all_ws = c == ' ' || c == '\n' || c == '\r' || c == '\t';
    }
    if (all_ws) jbuf_reset(rs);
}


/* ---- the gemma4 and minimax-m3 mappers ---- */

/* common_peg_ast_arena::find_by_tag (depth 3 by default) */
static size_t cp_find_tag(const peg_ast *ast, const peg_ast_node *parent, const char *tag, int max_depth)
{
    for (size_t i = 0; i < parent->nkids; i++) {
        const peg_ast_node *c = &ast->nodes[parent->kids[i]];
        if (strcmp(c->tag, tag) == 0) return parent->kids[i];
        if (max_depth > 1) {
            size_t r = cp_find_tag(ast, c, tag, max_depth - 1);
            if (r != PEG_INVALID) return r;
        }
    }
    return PEG_INVALID;
}

/* escape_json_string_inner: the JSON string's text without its quotes */
static void cp_escape_inner(jbuf *o, const char *s, size_t n)
{
    jbuf e;
    jbuf_init(&e);
    json_put_str_nl(&e, s, n);
    if (e.len >= 2) jbuf_put(o, e.p + 1, e.len - 2);
    jbuf_free(&e);
}

static void cp_msg_text(const peg_ast_node *nd, const char *in, chat_msg *msg, const char *tag)
{
    if (strcmp(tag, "reasoning") == 0) peg_node_text(nd, in, &msg->reasoning);
    else peg_node_text(nd, in, &msg->content);
}

static void cp_gemma4_json(const peg_ast *ast, const char *in, size_t id, jbuf *o, int depth)
{
    const peg_ast_node *nd = &ast->nodes[id];
    const char *r = nd->rule, *t = in + nd->start;
    size_t n = nd->end - nd->start;
    if (n == 0 || depth > PEG_MAX_DEPTH) return;
    if (!strcmp(r, "gemma4-number") || !strcmp(r, "gemma4-bool") || !strcmp(r, "gemma4-null") || !strcmp(r, "gemma4-dict-key-name")) {
        jbuf_put(o, t, n);
    } else if (!strcmp(r, "gemma4-string-content")) {
        cp_escape_inner(o, t, n);
    } else if (!strcmp(r, "gemma4-string")) {
        jbuf_putc(o, '"');
        if (nd->nkids) {
            cp_gemma4_json(ast, in, nd->kids[0], o, depth + 1);
            if (!nd->partial) jbuf_putc(o, '"');
        }
    } else if (!strcmp(r, "gemma4-array") || !strcmp(r, "gemma4-dict")) {
        int arr = r[7] == 'a';
        jbuf_putc(o, arr ? '[' : '{');
        for (size_t i = 0; i < nd->nkids; i++) {
            if (i) jbuf_putc(o, ',');
            cp_gemma4_json(ast, in, nd->kids[i], o, depth + 1);
        }
        if (!nd->partial) jbuf_putc(o, arr ? ']' : '}');
    } else if (!strcmp(r, "gemma4-dict-key")) {
        jbuf_putc(o, '"');
        if (nd->nkids) {
            jbuf k;
            jbuf_init(&k);
            cp_gemma4_json(ast, in, nd->kids[0], &k, depth + 1);
            cp_escape_inner(o, k.p ? k.p : "", k.len);
            jbuf_free(&k);
        }
        if (!nd->partial) jbuf_puts(o, "\":");
    } else if (!strcmp(r, "gemma4-dict-kv")) {
        for (size_t i = 0; i < nd->nkids; i++) cp_gemma4_json(ast, in, nd->kids[i], o, depth + 1);
    } else if (!strcmp(r, "gemma4-value")) {
        if (nd->nkids) cp_gemma4_json(ast, in, nd->kids[0], o, depth + 1);
    }
}

static int cp_add_call(chat_msg *msg, const char *name, size_t nn, const jbuf *args)
{
    if (msg->ncalls == msg->cap) {
        size_t cap = msg->cap ? msg->cap * 2 : 4;
        chat_tool_call *c = realloc(msg->calls, cap * sizeof *c);
        if (!c) return -1;
        msg->calls = c;
        msg->cap = cap;
    }
    chat_tool_call *d = &msg->calls[msg->ncalls++];
    jbuf_init(&d->name);
    jbuf_init(&d->arguments);
    jbuf_init(&d->id);
    jbuf_put(&d->name, name, nn);
    jbuf_put(&d->arguments, args->p ? args->p : "", args->len);
    return 0;
}

static void cp_gemma4_visit(const peg_ast *ast, const char *in, size_t id, chat_msg *msg, int *oom, int depth)
{
    const peg_ast_node *nd = &ast->nodes[id];
    if (depth > PEG_MAX_DEPTH) return;
    if (!strcmp(nd->tag, "reasoning") || !strcmp(nd->tag, "content")) { cp_msg_text(nd, in, msg, nd->tag); return; }
    if (!strcmp(nd->tag, "tool")) {
        size_t ni = cp_find_tag(ast, nd, "tool-name", 3), ai = cp_find_tag(ast, nd, "tool-args", 3);
        if (ni != PEG_INVALID && ai != PEG_INVALID && !ast->nodes[ni].partial) {
            const peg_ast_node *nn = &ast->nodes[ni], *an = &ast->nodes[ai];
            jbuf args;
            jbuf_init(&args);
            if (an->nkids) cp_gemma4_json(ast, in, an->kids[0], &args, 0);
            if (cp_add_call(msg, in + nn->start, nn->end - nn->start, &args)) *oom = 1;
            jbuf_free(&args);
        }
        return;
    }
    for (size_t i = 0; i < nd->nkids; i++) cp_gemma4_visit(ast, in, nd->kids[i], msg, oom, depth + 1);
}

static int cp_mm3_is(const char *tag, const char *what) { return strcmp(tag, what) == 0; }

static void cp_mm3_collect(const peg_ast *ast, const peg_ast_node *nd, const char *tag, size_t **out, size_t *n, size_t *cap, int depth)
{
    if (depth > PEG_MAX_DEPTH) return;
    for (size_t i = 0; i < nd->nkids; i++) {
        const peg_ast_node *c = &ast->nodes[nd->kids[i]];
        if (cp_mm3_is(c->tag, tag)) {
            if (*n == *cap) {
                size_t nc = *cap ? *cap * 2 : 8;
                size_t *x = realloc(*out, nc * sizeof *x);
                if (!x) return;
                *out = x;
                *cap = nc;
            }
            (*out)[(*n)++] = nd->kids[i];
        } else {
            cp_mm3_collect(ast, c, tag, out, n, cap, depth + 1);
        }
    }
}

static size_t cp_mm3_value_of(const peg_ast *ast, const peg_ast_node *nd)
{
    for (size_t i = 0; i < nd->nkids; i++) {
        const char *t = ast->nodes[nd->kids[i]].tag;
        if (cp_mm3_is(t, "tool-arg-value") || cp_mm3_is(t, "tool-arg-string-value") || cp_mm3_is(t, "tool-arg-object") ||
            cp_mm3_is(t, "tool-arg-array"))
            return nd->kids[i];
    }
    return PEG_INVALID;
}

static void cp_mm3_container(const peg_ast *ast, const char *in, const peg_ast_node *nd, int is_object, int closed, jbuf *o, int depth);

static void cp_mm3_value(const peg_ast *ast, const char *in, size_t id, int closed, jbuf *o, int depth)
{
    if (id == PEG_INVALID || depth > PEG_MAX_DEPTH) return;
    const peg_ast_node *nd = &ast->nodes[id];
    if (cp_mm3_is(nd->tag, "tool-arg-object")) cp_mm3_container(ast, in, nd, 1, closed, o, depth + 1);
    else if (cp_mm3_is(nd->tag, "tool-arg-array")) cp_mm3_container(ast, in, nd, 0, closed, o, depth + 1);
    else if (cp_mm3_is(nd->tag, "tool-arg-string-value")) {
        jbuf_putc(o, '"');
        cp_escape_inner(o, in + nd->start, nd->end - nd->start);
        if (closed) jbuf_putc(o, '"');
    } else {
        jbuf_put(o, in + nd->start, nd->end - nd->start);
    }
}

static void cp_mm3_container(const peg_ast *ast, const char *in, const peg_ast_node *nd, int is_object, int closed, jbuf *o, int depth)
{
    size_t *ents = NULL, n = 0, cap = 0;
    cp_mm3_collect(ast, nd, is_object ? "tool-arg" : "tool-arg-item", &ents, &n, &cap, depth);
    jbuf_putc(o, is_object ? '{' : '[');
    int comma = 0;
    jbuf t;
    jbuf_init(&t);
    for (size_t i = 0; i < n; i++) {
        const peg_ast_node *e = &ast->nodes[ents[i]];
        jbuf_reset(&t);
        if (is_object) {
            size_t ni = cp_find_tag(ast, e, "tool-arg-name", 3);
            if (ni != PEG_INVALID) {
                json_put_str_nl(&t, in + ast->nodes[ni].start, ast->nodes[ni].end - ast->nodes[ni].start);
                jbuf_putc(&t, ':');
                cp_mm3_value(ast, in, cp_mm3_value_of(ast, e), !e->partial, &t, depth + 1);
            }
        } else {
            cp_mm3_value(ast, in, cp_mm3_value_of(ast, e), !e->partial, &t, depth + 1);
        }
        if (t.len == 0) continue;
        if (comma) jbuf_putc(o, ',');
        comma = 1;
        jbuf_put(o, t.p, t.len);
    }
    jbuf_free(&t);
    free(ents);
    if (closed) jbuf_putc(o, is_object ? '}' : ']');
}

static void cp_mm3_visit(const peg_ast *ast, const char *in, size_t id, chat_msg *msg, int *oom, int depth)
{
    const peg_ast_node *nd = &ast->nodes[id];
    if (depth > PEG_MAX_DEPTH) return;
    if (!strcmp(nd->tag, "reasoning") || !strcmp(nd->tag, "content")) { cp_msg_text(nd, in, msg, nd->tag); return; }
    if (!strcmp(nd->tag, "tool")) {
        size_t ni = cp_find_tag(ast, nd, "tool-name", 3);
        if (ni != PEG_INVALID) {
            jbuf args;
            jbuf_init(&args);
            cp_mm3_container(ast, in, nd, 1, !nd->partial, &args, depth + 1);
            if (cp_add_call(msg, in + ast->nodes[ni].start, ast->nodes[ni].end - ast->nodes[ni].start, &args)) *oom = 1;
            jbuf_free(&args);
        }
        return;
    }
    for (size_t i = 0; i < nd->nkids; i++) cp_mm3_visit(ast, in, nd->kids[i], msg, oom, depth + 1);
}

int chat_peg_parse(const peg_arena *arena, chat_format format, const char *generation_prompt, size_t gp_len,
                   const char *text, size_t len, int is_partial, chat_msg *out, char *err, size_t errlen)
{
    chat_msg_init(out);
    peg_arena dflt;
    int own = 0;
    if (!arena || arena->n == 0) {                       /* content(rest()) + end() */
        peg_init(&dflt);
        size_t rest = peg_rest(&dflt);
        size_t content = peg_tag(&dflt, "content", rest);
        size_t body = peg_seq2(&dflt, content, peg_end(&dflt));
        if (peg_build(&dflt, body, err, errlen)) { peg_free(&dflt); return CHAT_PEG_LIMIT; }
        arena = &dflt;
        own = 1;
    }
    jbuf in;
    jbuf_init(&in);
    jbuf_put(&in, generation_prompt ? generation_prompt : "", gp_len);
    jbuf_put(&in, text, len);
    const char *input = in.p ? in.p : "";
    peg_ast ast;
    peg_result r;
    int rc = CHAT_PEG_OK;
    if (peg_parse(arena, input, in.len, 0, PEG_LENIENT, &ast, &r, err, errlen)) {
        rc = CHAT_PEG_LIMIT;
    } else if (r.type == PEG_FAIL && !(is_partial && r.end > 0)) {
        snprintf(err, errlen, "The model produced output that does not match the expected %s format", chat_format_name(format));
        rc = CHAT_PEG_NO_MATCH;
    } else if (format == CHAT_FORMAT_PEG_GEMMA4 || format == CHAT_FORMAT_PEG_MINIMAX_M3) {
        int oom = 0;
        for (size_t i = 0; i < r.nnodes; i++) {
            if (format == CHAT_FORMAT_PEG_GEMMA4) cp_gemma4_visit(&ast, input, r.nodes[i], out, &oom, 0);
            else cp_mm3_visit(&ast, input, r.nodes[i], out, &oom, 0);
        }
        if (oom) { snprintf(err, errlen, "out of memory while mapping the answer"); rc = CHAT_PEG_LIMIT; }
    } else {
        cp_mapper m;
        memset(&m, 0, sizeof m);
        m.msg = out;
        m.ast = &ast;
        m.in = input;
        m.cur = -2;
        jbuf_init(&m.args_buffer);
        jbuf_init(&m.pending.name);
        jbuf_init(&m.pending.arguments);
        jbuf_init(&m.pending.id);
        cp_from_ast(&m, &r);
        cp_call_free(&m.pending);
        jbuf_free(&m.args_buffer);
        if (m.oom) { snprintf(err, errlen, "out of memory while mapping the answer"); rc = CHAT_PEG_LIMIT; }
    }
    peg_ast_free(&ast);
    jbuf_free(&in);
    if (own) peg_free(&dflt);
    return rc;
}

/* ---- stream deltas (common_chat_msg_diff::compute_diffs) ---- */

/* string_diff: 0 with the new part in *d, -1 with the error */
static int cp_string_diff(const jbuf *last, const jbuf *cur, jbuf *d, jbuf *err)
{
    jbuf_reset(d);
    const char *l = cp_data(last), *c = cp_data(cur);
    if (last->len == 0) { jbuf_put(d, c, cur->len); return 0; }
    if (cur->len >= last->len && memcmp(c, l, last->len) == 0) { jbuf_put(d, c + last->len, cur->len - last->len); return 0; }
    if (last->len >= cur->len && memcmp(l, c, cur->len) == 0) return 0;     /* a partial stop word erased */
    jbuf_puts(err, "Invalid diff: '");
    jbuf_put(err, l, last->len);
    jbuf_puts(err, "' not found at start of '");
    jbuf_put(err, c, cur->len);
    jbuf_putc(err, '\'');
    return -1;
}

static int cp_jeq(const jbuf *a, const jbuf *b)
{
    return a->len == b->len && (a->len == 0 || memcmp(a->p, b->p, a->len) == 0);
}

static chat_msg_delta *cp_delta(chat_msg_delta **arr, size_t *n, size_t *cap)
{
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 4;
        chat_msg_delta *x = realloc(*arr, nc * sizeof *x);
        if (!x) return NULL;
        *arr = x;
        *cap = nc;
    }
    chat_msg_delta *d = &(*arr)[(*n)++];
    memset(d, 0, sizeof *d);
    jbuf_init(&d->reasoning_delta);
    jbuf_init(&d->content_delta);
    jbuf_init(&d->call.name);
    jbuf_init(&d->call.arguments);
    jbuf_init(&d->call.id);
    d->tool_index = PEG_INVALID;
    return d;
}

void chat_msg_deltas_free(chat_msg_delta *d, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        jbuf_free(&d[i].reasoning_delta);
        jbuf_free(&d[i].content_delta);
        cp_call_free(&d[i].call);
    }
    free(d);
}

static int cp_diffs(const chat_msg *prev, const chat_msg *cur, chat_msg_delta **arr, size_t *n, size_t *cap, jbuf *err)
{
    chat_msg_delta *d;
    if (!cp_jeq(&prev->reasoning, &cur->reasoning)) {
        if (!(d = cp_delta(arr, n, cap))) goto oom;
        if (cp_string_diff(&prev->reasoning, &cur->reasoning, &d->reasoning_delta, err)) return -1;
    }
    if (!cp_jeq(&prev->content, &cur->content)) {
        if (!(d = cp_delta(arr, n, cap))) goto oom;
        if (cp_string_diff(&prev->content, &cur->content, &d->content_delta, err)) return -1;
    }
    if (cur->ncalls < prev->ncalls) {
        jbuf_puts(err, "Invalid diff: now finding less tool calls!\n");
        for (int w = 0; w < 2; w++) {
            const chat_msg *m = w ? cur : prev;
            jbuf_printf(err, "  %s (%zu):\n", w ? "Current" : "Previous", m->ncalls);
            for (size_t i = 0; i < m->ncalls; i++) {
                jbuf_puts(err, "    - name: '");
                jbuf_put(err, cp_data(&m->calls[i].name), m->calls[i].name.len);
                jbuf_puts(err, "', args: '");
                jbuf_put(err, cp_data(&m->calls[i].arguments), m->calls[i].arguments.len);
                jbuf_puts(err, "'\n");
            }
        }
        jbuf_puts(err, "  Current msg text content:\n");
        jbuf_put(err, cp_data(&cur->content), cur->content.len);
        jbuf_putc(err, '\n');
        return -1;
    }
    if (prev->ncalls) {
        size_t idx = prev->ncalls - 1;
        const chat_tool_call *pf = &prev->calls[idx], *nf = &cur->calls[idx];
        if (!cp_jeq(&pf->name, &nf->name) && pf->name.len && nf->name.len &&
            !(nf->name.len >= pf->name.len && memcmp(nf->name.p, pf->name.p, pf->name.len) == 0)) {
            jbuf_puts(err, "Invalid diff: tool call mismatch!");
            return -1;
        }
        jbuf args;
        jbuf_init(&args);
        if (cp_string_diff(&pf->arguments, &nf->arguments, &args, err)) { jbuf_free(&args); return -1; }
        int changed = !cp_jeq(&pf->id, &nf->id) || !cp_jeq(&pf->name, &nf->name);
        if (args.len || changed) {
            if (!(d = cp_delta(arr, n, cap))) { jbuf_free(&args); goto oom; }
            d->tool_index = idx;
            if (changed) {
                jbuf_put(&d->call.id, cp_data(&nf->id), nf->id.len);
                jbuf_put(&d->call.name, cp_data(&nf->name), nf->name.len);
            }
            jbuf_put(&d->call.arguments, cp_data(&args), args.len);
        }
        jbuf_free(&args);
    }
    for (size_t idx = prev->ncalls; idx < cur->ncalls; idx++) {
        if (!(d = cp_delta(arr, n, cap))) goto oom;
        d->tool_index = idx;
        const chat_tool_call *c = &cur->calls[idx];
        jbuf_put(&d->call.name, cp_data(&c->name), c->name.len);
        jbuf_put(&d->call.arguments, cp_data(&c->arguments), c->arguments.len);
        jbuf_put(&d->call.id, cp_data(&c->id), c->id.len);
    }
    return 0;
oom:
    jbuf_puts(err, "out of memory while computing the stream's deltas");
    return -1;
}

int chat_msg_diffs(const chat_msg *prev, const chat_msg *cur, chat_msg_delta **out, jbuf *err)
{
    chat_msg_delta *arr = NULL;
    size_t n = 0, cap = 0;
    *out = NULL;
    jbuf_reset(err);
    if (cp_diffs(prev, cur, &arr, &n, &cap, err)) {
        chat_msg_deltas_free(arr, n);
        return -1;
    }
    *out = arr;
    return (int)n;
}
