/*
 * chat_gen_schema.c -- a tool's or response_format's JSON schema as b11669
 * keeps it in a schema parser: common_chat_schema_from_json's typed node
 * (common/json-schema.cpp), written back as JSON schema in the form
 * testing/kit_chat.cpp prints it (the arena's text form, see peg.h). The
 * writer walks the schema as the builder does and prints what the node would
 * give back: an object with properties and no additionalProperties comes out
 * closed ("additionalProperties":false); enum and const drop the type; a type
 * list becomes anyOf; $ref targets under #/$defs/ are collected in $defs.
 * Failures carry b11669's words ("JSON schema error at #/...: ...").
 */
#include "text/chat_gen_int.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const json_value *root;
    jbuf defs;                  /* "k":{...},... */
    char **seen;                /* $defs keys written or being written */
    size_t nseen;
    char *err;
    size_t errlen;
    int failed, depth;
} cs_state;

static int cs_fail(cs_state *s, const char *path, const char *msg)
{
    if (!s->failed) snprintf(s->err, s->errlen, "JSON schema error at %s: %s", path, msg);
    s->failed = 1;
    return -1;
}

static int cs_is_int_text(const json_value *v)
{
    return v->type == JSON_NUMBER && !strpbrk(v->str, ".eE");
}

/* nlohmann's dump of a parsed value: integers as read, doubles its way, compact separators */
static void cs_value(jbuf *b, const json_value *v)
{
    switch (v->type) {
    case JSON_NULL: jbuf_puts(b, "null"); break;
    case JSON_FALSE: jbuf_puts(b, "false"); break;
    case JSON_TRUE: jbuf_puts(b, "true"); break;
    case JSON_NUMBER:
        if (cs_is_int_text(v)) jbuf_puts(b, strcmp(v->str, "-0") ? v->str : "0");
        else { double d = 0; json_as_double(v, &d); json_put_double(b, d); }
        break;
    case JSON_STRING: json_put_str_nl(b, v->str, v->len); break;
    case JSON_ARRAY:
        jbuf_putc(b, '[');
        for (size_t i = 0; i < v->n; i++) { if (i) jbuf_putc(b, ','); cs_value(b, v->items[i]); }
        jbuf_putc(b, ']');
        break;
    case JSON_OBJECT:
        jbuf_putc(b, '{');
        for (size_t i = 0; i < v->n; i++) {
            if (i) jbuf_putc(b, ',');
            json_put_str_nl(b, v->keys[i], v->key_lens[i]);
            jbuf_putc(b, ':');
            cs_value(b, v->items[i]);
        }
        jbuf_putc(b, '}');
        break;
    }
}

static const json_value *cs_get(const json_value *o, const char *k)
{
    return o && o->type == JSON_OBJECT ? json_get(o, k) : NULL;
}

static int cs_node(cs_state *s, const json_value *sc, const json_value *type_override, const char *path, jbuf *out);

static int cs_count(cs_state *s, const json_value *sc, const char *key, const char *path, long long def, long long *out)
{
    const json_value *v = cs_get(sc, key);
    *out = def;
    if (!v) return 0;
    int64_t n;
    if (!cs_is_int_text(v) || !json_as_i64(v, &n) || n < 0) {
        char m[96];
        snprintf(m, sizeof m, "%s must be a non-negative integer", key);
        return cs_fail(s, path, m);
    }
    *out = n;
    return 0;
}

static int cs_format(const json_value *sc)
{
    const json_value *f = cs_get(sc, "format");
    if (!f || f->type != JSON_STRING) return 0;
    const char *x = f->str;
    if (!strcmp(x, "date")) return 2;
    if (!strcmp(x, "time")) return 3;
    if (!strcmp(x, "date-time")) return 4;
    if (!strcmp(x, "uuid") || (f->len == 5 && !strncmp(x, "uuid", 4) && x[4] >= '1' && x[4] <= '5')) return 1;
    return 0;
}

static int cs_list(cs_state *s, const char *kw, const json_value *alts, const char *path, jbuf *out)
{
    if (!alts || alts->type != JSON_ARRAY) return cs_fail(s, path, "must be an array of schemas");
    if (!alts->n) return cs_fail(s, path, "must not be empty");
    jbuf_printf(out, "{\"%s\":[", kw);
    for (size_t i = 0; i < alts->n; i++) {
        char p[512];
        snprintf(p, sizeof p, "%s/%zu", path, i);
        if (i) jbuf_putc(out, ',');
        if (cs_node(s, alts->items[i], NULL, p, out)) return -1;
    }
    jbuf_puts(out, "]}");
    return 0;
}

static int cs_object(cs_state *s, const json_value *sc, const char *path, jbuf *out)
{
    const json_value *props = cs_get(sc, "properties"), *req = cs_get(sc, "required"), *add = cs_get(sc, "additionalProperties");
    if (!props && (!add || add->type == JSON_TRUE)) {
        /* no properties, any additional ones: b11669's converter gives the node the primitive object rule, which
         * {"type":"object"} alone gets here */
        jbuf_puts(out, "{\"type\":\"object\"}");
        return 0;
    }
    jbuf_puts(out, "{\"type\":\"object\",\"properties\":{");
    if (props && props->type != JSON_OBJECT) return cs_fail(s, path, "properties must be an object");
    jbuf rq;
    jbuf_init(&rq);
    for (size_t i = 0; props && i < props->n; i++) {
        char p[512];
        snprintf(p, sizeof p, "%s/properties/%s", path, props->keys[i]);
        if (i) jbuf_putc(out, ',');
        json_put_str_nl(out, props->keys[i], props->key_lens[i]);
        jbuf_putc(out, ':');
        if (cs_node(s, props->items[i], NULL, p, out)) { jbuf_free(&rq); return -1; }
        int required = 0;
        for (size_t k = 0; req && req->type == JSON_ARRAY && k < req->n; k++)
            if (req->items[k]->type == JSON_STRING && req->items[k]->len == props->key_lens[i] &&
                !memcmp(req->items[k]->str, props->keys[i], props->key_lens[i])) required = 1;
        if (required) { if (rq.len) jbuf_putc(&rq, ','); json_put_str_nl(&rq, props->keys[i], props->key_lens[i]); }
    }
    jbuf_putc(out, '}');
    if (rq.len) { jbuf_puts(out, ",\"required\":["); jbuf_put(out, rq.p, rq.len); jbuf_putc(out, ']'); }
    jbuf_free(&rq);
    if (add) {
        if (add->type == JSON_FALSE) jbuf_puts(out, ",\"additionalProperties\":false");
        else if (add->type == JSON_OBJECT) {
            char p[512];
            snprintf(p, sizeof p, "%s/additionalProperties", path);
            jbuf sub;
            jbuf_init(&sub);
            if (cs_node(s, add, NULL, p, &sub)) { jbuf_free(&sub); return -1; }
            if (!(sub.len == 2 && !memcmp(sub.p, "{}", 2))) { jbuf_puts(out, ",\"additionalProperties\":"); jbuf_put(out, sub.p, sub.len); }
            jbuf_free(&sub);
        } else if (add->type != JSON_TRUE) return cs_fail(s, path, "additionalProperties must be a boolean or a schema");
    } else if (props) {
        jbuf_puts(out, ",\"additionalProperties\":false");
    }
    jbuf_putc(out, '}');
    return 0;
}

static int cs_array(cs_state *s, const json_value *sc, const char *path, jbuf *out)
{
    const json_value *items = cs_get(sc, "items");
    const char *key = "items";
    if (!items) { items = cs_get(sc, "prefixItems"); key = "prefixItems"; }
    char p[512];
    if (items && items->type == JSON_ARRAY) {
        jbuf_puts(out, "{\"type\":\"array\",\"prefixItems\":[");
        for (size_t i = 0; i < items->n; i++) {
            snprintf(p, sizeof p, "%s/%s/%zu", path, key, i);
            if (i) jbuf_putc(out, ',');
            if (cs_node(s, items->items[i], NULL, p, out)) return -1;
        }
        jbuf_puts(out, "]}");
        return 0;
    }
    jbuf_puts(out, "{\"type\":\"array\"");
    if (items) {
        snprintf(p, sizeof p, "%s/%s", path, key);
        jbuf sub;
        jbuf_init(&sub);
        if (cs_node(s, items, NULL, p, &sub)) { jbuf_free(&sub); return -1; }
        if (!(sub.len == 2 && !memcmp(sub.p, "{}", 2))) { jbuf_puts(out, ",\"items\":"); jbuf_put(out, sub.p, sub.len); }
        jbuf_free(&sub);
    }
    long long mn, mx;
    if (cs_count(s, sc, "minItems", path, 0, &mn) || cs_count(s, sc, "maxItems", path, -1, &mx)) return -1;
    if (mn) jbuf_printf(out, ",\"minItems\":%lld", mn);
    if (mx >= 0) jbuf_printf(out, ",\"maxItems\":%lld", mx);
    jbuf_putc(out, '}');
    return 0;
}

static int cs_string(cs_state *s, const json_value *sc, const char *path, jbuf *out)
{
    static const char *fmt[] = {"", "uuid", "date", "time", "date-time"};
    const json_value *pat = cs_get(sc, "pattern");
    if (pat && pat->type != JSON_STRING) return cs_fail(s, path, "pattern must be a string");
    const json_value *f = cs_get(sc, "format");
    if (f && f->type != JSON_STRING) return cs_fail(s, path, "format must be a string");
    long long mn, mx;
    if (cs_count(s, sc, "minLength", path, 0, &mn) || cs_count(s, sc, "maxLength", path, -1, &mx)) return -1;
    jbuf_puts(out, "{\"type\":\"string\"");
    if (pat && pat->len) { jbuf_puts(out, ",\"pattern\":"); json_put_str_nl(out, pat->str, pat->len); }
    int fi = cs_format(sc);
    if (fi) jbuf_printf(out, ",\"format\":\"%s\"", fmt[fi]);
    if (mn) jbuf_printf(out, ",\"minLength\":%lld", mn);
    if (mx >= 0) jbuf_printf(out, ",\"maxLength\":%lld", mx);
    jbuf_putc(out, '}');
    return 0;
}

static int cs_bound(cs_state *s, const json_value *v, const char *key, const char *path, int round_up, long long *out)
{
    int64_t n;
    if (cs_is_int_text(v) && json_as_i64(v, &n)) { *out = n; return 0; }
    double d;
    if (v->type != JSON_NUMBER || !json_as_double(v, &d)) {
        char m[96];
        snprintf(m, sizeof m, "%s must be a number", key);
        return cs_fail(s, path, m);
    }
    *out = (long long)(round_up ? ceil(d) : floor(d));
    return 0;
}

static int cs_integer(cs_state *s, const json_value *sc, const char *path, jbuf *out)
{
    long long mn = INT64_MIN, mx = INT64_MAX;
    const json_value *v;
    if ((v = cs_get(sc, "minimum"))) { if (cs_bound(s, v, "minimum", path, 1, &mn)) return -1; }
    else if ((v = cs_get(sc, "exclusiveMinimum"))) { if (cs_bound(s, v, "exclusiveMinimum", path, 0, &mn)) return -1; mn++; }
    if ((v = cs_get(sc, "maximum"))) { if (cs_bound(s, v, "maximum", path, 0, &mx)) return -1; }
    else if ((v = cs_get(sc, "exclusiveMaximum"))) { if (cs_bound(s, v, "exclusiveMaximum", path, 1, &mx)) return -1; mx--; }
    jbuf_puts(out, "{\"type\":\"integer\"");
    if (mn != INT64_MIN) jbuf_printf(out, ",\"minimum\":%lld", mn);
    if (mx != INT64_MAX) jbuf_printf(out, ",\"maximum\":%lld", mx);
    jbuf_putc(out, '}');
    return 0;
}

/* resolve_ref: "#/a/b/0" from the root */
static const json_value *cs_resolve(cs_state *s, const char *ref, const char *path)
{
    const json_value *t = s->root;
    const char *p = ref + 2;
    while (*p) {
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        char sel[256];
        snprintf(sel, sizeof sel, "%.*s", (int)(n < 255 ? n : 255), p);
        char m[640];
        if (t->type == JSON_OBJECT && json_get(t, sel)) t = json_get(t, sel);
        else if (t->type == JSON_ARRAY) {
            char *end;
            unsigned long long idx = strtoull(sel, &end, 10);
            if (end == sel || idx >= t->n) {
                snprintf(m, sizeof m, "cannot resolve $ref %s, %s is out of range", ref, sel);
                cs_fail(s, path, m);
                return NULL;
            }
            t = t->items[idx];
        } else {
            snprintf(m, sizeof m, "cannot resolve $ref %s, %s not found", ref, sel);
            cs_fail(s, path, m);
            return NULL;
        }
        if (!e) break;
        p = e + 1;
    }
    return t;
}

static int cs_ref(cs_state *s, const json_value *v, const char *path, jbuf *out)
{
    if (v->type != JSON_STRING) return cs_fail(s, path, "$ref must be a string");
    if (strncmp(v->str, "#/", 2)) {
        char m[512];
        snprintf(m, sizeof m, "unsupported $ref %s, only references into the same document are supported", v->str);
        return cs_fail(s, path, m);
    }
    const json_value *target = cs_resolve(s, v->str, path);
    if (!target) return -1;
    jbuf_puts(out, "{\"$ref\":");
    json_put_str_nl(out, v->str, v->len);
    jbuf_putc(out, '}');
    if (strncmp(v->str, "#/$defs/", 8)) return 0;
    const char *k = v->str + 8;
    for (size_t i = 0; i < s->nseen; i++) if (!strcmp(s->seen[i], k)) return 0;
    char **l = realloc(s->seen, (s->nseen + 1) * sizeof *l);
    if (!l) return cs_fail(s, path, "out of memory");
    s->seen = l;
    if (!(l[s->nseen] = strdup(k))) return cs_fail(s, path, "out of memory");
    s->nseen++;
    /* the kit reserves the key (ordered: this entry first) and fills it after the target */
    size_t at = s->defs.len;
    if (at) jbuf_putc(&s->defs, ',');
    json_put_cstr_nl(&s->defs, k);
    jbuf_putc(&s->defs, ':');
    size_t mark = s->defs.len;
    jbuf body;
    jbuf_init(&body);
    jbuf saved = s->defs;           /* nested defs go after this one */
    jbuf_init(&s->defs);
    int rc = cs_node(s, target, NULL, v->str, &body);
    jbuf nested = s->defs;
    s->defs = saved;
    jbuf_put(&s->defs, body.p, body.len);
    (void)mark;
    if (nested.len) { jbuf_putc(&s->defs, ','); jbuf_put(&s->defs, nested.p, nested.len); }
    jbuf_free(&body);
    jbuf_free(&nested);
    return rc;
}

static int cs_node(cs_state *s, const json_value *sc, const json_value *type_override, const char *path, jbuf *out)
{
    if (++s->depth > 64) { s->depth--; return cs_fail(s, path, "nested too deeply"); }
    int rc = -1;
    const json_value *type = type_override ? type_override : cs_get(sc, "type"), *v;
    char p[512];
    if (!sc || sc->type != JSON_OBJECT) { rc = cs_fail(s, path, "schema must be an object"); goto done; }
    if ((v = json_get(sc, "$ref"))) { rc = cs_ref(s, v, path, out); goto done; }
    if ((v = json_get(sc, "oneOf")) || (v = json_get(sc, "anyOf"))) {
        snprintf(p, sizeof p, "%s/%s", path, json_get(sc, "oneOf") ? "oneOf" : "anyOf");
        rc = cs_list(s, "anyOf", v, p, out);
        goto done;
    }
    if (type && type->type == JSON_ARRAY) {
        if (!type->n) { rc = cs_fail(s, path, "type must not be empty"); goto done; }
        jbuf_puts(out, "{\"anyOf\":[");
        for (size_t i = 0; i < type->n; i++) {
            snprintf(p, sizeof p, "%s/type/%zu", path, i);
            if (i) jbuf_putc(out, ',');
            if (cs_node(s, sc, type->items[i], p, out)) goto done;
        }
        jbuf_puts(out, "]}");
        rc = 0;
        goto done;
    }
    if ((v = json_get(sc, "const"))) { jbuf_puts(out, "{\"const\":"); cs_value(out, v); jbuf_putc(out, '}'); rc = 0; goto done; }
    if ((v = json_get(sc, "enum"))) {
        if (v->type != JSON_ARRAY || !v->n) { rc = cs_fail(s, path, "enum must be a non-empty array"); goto done; }
        jbuf_puts(out, "{\"enum\":");
        cs_value(out, v);
        jbuf_putc(out, '}');
        rc = 0;
        goto done;
    }
    if (type && type->type != JSON_NULL && type->type != JSON_STRING) {
        rc = cs_fail(s, path, "type must be a string or an array of strings");
        goto done;
    }
    const char *tn = type && type->type == JSON_STRING ? type->str : "";
    const json_value *add = json_get(sc, "additionalProperties");
    int has_props = json_get(sc, "properties") || (add && add->type != JSON_TRUE);
    const json_value *all = json_get(sc, "allOf");
    snprintf(p, sizeof p, "%s/allOf", path);
    if (!tn[0]) {
        if (has_props) rc = cs_object(s, sc, path, out);
        else if (all) rc = cs_list(s, "allOf", all, p, out);
        else if (json_get(sc, "items") || json_get(sc, "prefixItems")) rc = cs_array(s, sc, path, out);
        else if (json_get(sc, "pattern") || json_get(sc, "minLength") || json_get(sc, "maxLength") || cs_format(sc))
            rc = cs_string(s, sc, path, out);
        else { jbuf_puts(out, "{}"); rc = 0; }
    } else if (!strcmp(tn, "object")) rc = !has_props && all ? cs_list(s, "allOf", all, p, out) : cs_object(s, sc, path, out);
    else if (!strcmp(tn, "string")) rc = all ? cs_list(s, "allOf", all, p, out) : cs_string(s, sc, path, out);
    else if (!strcmp(tn, "array")) rc = cs_array(s, sc, path, out);
    else if (!strcmp(tn, "integer")) rc = cs_integer(s, sc, path, out);
    else if (!strcmp(tn, "number")) { jbuf_puts(out, "{\"type\":\"number\"}"); rc = 0; }
    else if (!strcmp(tn, "boolean")) { jbuf_puts(out, "{\"type\":\"boolean\"}"); rc = 0; }
    else if (!strcmp(tn, "null")) { jbuf_puts(out, "{\"type\":\"null\"}"); rc = 0; }
    else {
        char m[300];
        snprintf(m, sizeof m, "unrecognized type %s", tn);
        rc = cs_fail(s, path, m);
    }
done:
    s->depth--;
    return rc;
}

int chat_gen_schema_text(const json_value *schema, jbuf *out, char *err, size_t errlen)
{
    return chat_gen_schema_node_text(schema, schema, out, err, errlen);
}

int chat_gen_schema_node_text(const json_value *root, const json_value *schema, jbuf *out, char *err, size_t errlen)
{
    cs_state s;
    memset(&s, 0, sizeof s);
    s.root = root;
    s.err = err;
    s.errlen = errlen;
    jbuf_init(&s.defs);
    jbuf body;
    jbuf_init(&body);
    int rc = cs_node(&s, schema, NULL, "#", &body);
    if (rc == 0) {
        if (s.defs.len) {
            body.len--;             /* the root is an object: "$defs" goes last */
            if (body.len > 1) jbuf_putc(&body, ',');
            jbuf_puts(&body, "\"$defs\":{");
            jbuf_put(&body, s.defs.p, s.defs.len);
            jbuf_puts(&body, "}}");
        }
        jbuf_put(out, body.p, body.len);
    }
    jbuf_free(&body);
    jbuf_free(&s.defs);
    for (size_t i = 0; i < s.nseen; i++) free(s.seen[i]);
    free(s.seen);
    return rc;
}

/* ---- may_be_string, on the schema as build_node reads it ---- */

static int cs_has_props(const json_value *sc)
{
    const json_value *add = json_get(sc, "additionalProperties");
    return json_get(sc, "properties") || (add && add->type != JSON_TRUE);
}

/* the node build_node makes is common_chat_schema_any */
static int cs_is_any(const json_value *sc)
{
    if (!sc || sc->type != JSON_OBJECT) return 0;
    const json_value *t = json_get(sc, "type");
    if (json_get(sc, "$ref") || json_get(sc, "oneOf") || json_get(sc, "anyOf") || json_get(sc, "const") ||
        json_get(sc, "enum") || (t && t->type != JSON_NULL))
        return 0;
    return !cs_has_props(sc) && !json_get(sc, "allOf") && !json_get(sc, "items") && !json_get(sc, "prefixItems") &&
           !json_get(sc, "pattern") && !json_get(sc, "minLength") && !json_get(sc, "maxLength") && !cs_format(sc);
}

typedef struct { const json_value *root; const char *refs[64]; size_t n; } cs_walk;

static int cs_may_string(cs_walk *w, const json_value *sc, const json_value *type_override);

static int cs_all_of_string(cs_walk *w, const json_value *all)
{
    if (!all || all->type != JSON_ARRAY) return 0;
    int any = 0;
    for (size_t i = 0; i < all->n; i++) {
        if (cs_is_any(all->items[i])) continue;
        if (!cs_may_string(w, all->items[i], NULL)) return 0;
        any = 1;
    }
    return any;
}

static int cs_may_string(cs_walk *w, const json_value *sc, const json_value *type_override)
{
    if (!sc || sc->type != JSON_OBJECT) return 0;
    const json_value *v, *type = type_override ? type_override : json_get(sc, "type");
    if ((v = json_get(sc, "$ref"))) {
        if (v->type != JSON_STRING || strncmp(v->str, "#/", 2)) return 0;
        for (size_t i = 0; i < w->n; i++) if (!strcmp(w->refs[i], v->str)) return 0;   /* a cycle: not a string */
        if (w->n == 64) return 0;
        char e[64];
        cs_state s;
        memset(&s, 0, sizeof s);
        s.root = w->root;
        s.err = e;
        s.errlen = sizeof e;
        const json_value *t = cs_resolve(&s, v->str, "#");
        if (!t) return 0;
        w->refs[w->n++] = v->str;
        int r = cs_may_string(w, t, NULL);
        w->n--;
        return r;
    }
    if ((v = json_get(sc, "oneOf")) || (v = json_get(sc, "anyOf"))) {
        for (size_t i = 0; v->type == JSON_ARRAY && i < v->n; i++) if (cs_may_string(w, v->items[i], NULL)) return 1;
        return 0;
    }
    if (type && type->type == JSON_ARRAY) {
        for (size_t i = 0; i < type->n; i++) if (cs_may_string(w, sc, type->items[i])) return 1;
        return 0;
    }
    if ((v = json_get(sc, "const"))) return v->type == JSON_STRING;
    if ((v = json_get(sc, "enum"))) {
        for (size_t i = 0; v->type == JSON_ARRAY && i < v->n; i++) if (v->items[i]->type == JSON_STRING) return 1;
        return 0;
    }
    const char *tn = type && type->type == JSON_STRING ? type->str : "";
    const json_value *all = json_get(sc, "allOf");
    if (!tn[0]) {
        if (cs_has_props(sc)) return 0;
        if (all) return cs_all_of_string(w, all);
        if (json_get(sc, "items") || json_get(sc, "prefixItems")) return 0;
        return json_get(sc, "pattern") || json_get(sc, "minLength") || json_get(sc, "maxLength") || cs_format(sc);
    }
    if (!strcmp(tn, "object")) return !cs_has_props(sc) && all ? cs_all_of_string(w, all) : 0;
    if (!strcmp(tn, "string")) return all ? cs_all_of_string(w, all) : 1;
    return 0;
}

int chat_gen_schema_may_be_string(const json_value *root, const json_value *schema)
{
    cs_walk w;
    memset(&w, 0, sizeof w);
    w.root = root;
    return cs_may_string(&w, schema, NULL);
}

int chat_gen_schema_is_object(const json_value *schema)
{
    /* build_node's dispatch down to build_object (the caller has built the schema once: it is valid) */
    if (!schema || schema->type != JSON_OBJECT) return 0;
    const json_value *t = json_get(schema, "type");
    if (json_get(schema, "$ref") || json_get(schema, "oneOf") || json_get(schema, "anyOf") ||
        (t && t->type == JSON_ARRAY) || json_get(schema, "const") || json_get(schema, "enum"))
        return 0;
    const char *tn = t && t->type == JSON_STRING ? t->str : "";
    if (!tn[0]) return cs_has_props(schema);
    if (!strcmp(tn, "object")) return cs_has_props(schema) || !json_get(schema, "allOf");
    return 0;
}

/* ---- value_types, on the schema as build_node reads it ---- */

static unsigned cs_json_type(const json_value *v)
{
    switch (v->type) {
    case JSON_NULL: return 1u << CHAT_SCHEMA_NULL;
    case JSON_TRUE: case JSON_FALSE: return 1u << CHAT_SCHEMA_BOOLEAN;
    case JSON_NUMBER: return 1u << (cs_is_int_text(v) ? CHAT_SCHEMA_INTEGER : CHAT_SCHEMA_NUMBER);
    case JSON_STRING: return 1u << CHAT_SCHEMA_STRING;
    case JSON_ARRAY: return 1u << CHAT_SCHEMA_ARRAY;
    case JSON_OBJECT: return 1u << CHAT_SCHEMA_OBJECT;
    }
    return 0;
}

static unsigned cs_types(cs_walk *w, const json_value *sc, const json_value *type_override);

static unsigned cs_all_of_types(cs_walk *w, const json_value *all)
{
    unsigned t = CHAT_SCHEMA_ALL_TYPES;
    for (size_t i = 0; all->type == JSON_ARRAY && i < all->n; i++) t &= cs_types(w, all->items[i], NULL);
    return t;
}

static unsigned cs_types(cs_walk *w, const json_value *sc, const json_value *type_override)
{
    if (!sc || sc->type != JSON_OBJECT) return 0;
    const json_value *v, *type = type_override ? type_override : json_get(sc, "type");
    if ((v = json_get(sc, "$ref"))) {
        if (v->type != JSON_STRING || strncmp(v->str, "#/", 2)) return 0;
        for (size_t i = 0; i < w->n; i++) if (!strcmp(w->refs[i], v->str)) return 0;   /* a cycle: no type */
        if (w->n == 64) return 0;
        char e[64];
        cs_state s;
        memset(&s, 0, sizeof s);
        s.root = w->root;
        s.err = e;
        s.errlen = sizeof e;
        const json_value *t = cs_resolve(&s, v->str, "#");
        if (!t) return 0;
        w->refs[w->n++] = v->str;
        unsigned r = cs_types(w, t, NULL);
        w->n--;
        return r;
    }
    unsigned r = 0;
    if ((v = json_get(sc, "oneOf")) || (v = json_get(sc, "anyOf"))) {
        for (size_t i = 0; v->type == JSON_ARRAY && i < v->n; i++) r |= cs_types(w, v->items[i], NULL);
        return r;
    }
    if (type && type->type == JSON_ARRAY) {
        for (size_t i = 0; i < type->n; i++) r |= cs_types(w, sc, type->items[i]);
        return r;
    }
    if ((v = json_get(sc, "const"))) return cs_json_type(v);
    if ((v = json_get(sc, "enum"))) {
        for (size_t i = 0; v->type == JSON_ARRAY && i < v->n; i++) r |= cs_json_type(v->items[i]);
        return r;
    }
    const char *tn = type && type->type == JSON_STRING ? type->str : "";
    const json_value *all = json_get(sc, "allOf");
    if (!tn[0]) {
        if (cs_has_props(sc)) return 1u << CHAT_SCHEMA_OBJECT;
        if (all) return cs_all_of_types(w, all);
        if (json_get(sc, "items") || json_get(sc, "prefixItems")) return 1u << CHAT_SCHEMA_ARRAY;
        if (json_get(sc, "pattern") || json_get(sc, "minLength") || json_get(sc, "maxLength") || cs_format(sc))
            return 1u << CHAT_SCHEMA_STRING;
        return CHAT_SCHEMA_ALL_TYPES;
    }
    if (!strcmp(tn, "object")) return !cs_has_props(sc) && all ? cs_all_of_types(w, all) : 1u << CHAT_SCHEMA_OBJECT;
    if (!strcmp(tn, "string")) return all ? cs_all_of_types(w, all) : 1u << CHAT_SCHEMA_STRING;
    if (!strcmp(tn, "array")) return 1u << CHAT_SCHEMA_ARRAY;
    if (!strcmp(tn, "integer")) return 1u << CHAT_SCHEMA_INTEGER;
    if (!strcmp(tn, "number")) return 1u << CHAT_SCHEMA_NUMBER | 1u << CHAT_SCHEMA_INTEGER;
    if (!strcmp(tn, "boolean")) return 1u << CHAT_SCHEMA_BOOLEAN;
    if (!strcmp(tn, "null")) return 1u << CHAT_SCHEMA_NULL;
    return 0;
}

unsigned chat_gen_schema_value_types(const json_value *root, const json_value *schema)
{
    cs_walk w;
    memset(&w, 0, sizeof w);
    w.root = root;
    return cs_types(&w, schema, NULL);
}

/* ---- the node's kind and its typed variants (for walkers over the typed node) ---- */

int chat_gen_schema_kind(const json_value *sc, const json_value *type_override)
{
    if (!sc || sc->type != JSON_OBJECT) return CHAT_SK_ANY;
    const json_value *type = type_override ? type_override : json_get(sc, "type");
    if (json_get(sc, "$ref")) return CHAT_SK_REF;
    if (json_get(sc, "oneOf") || json_get(sc, "anyOf")) return CHAT_SK_ANY_OF;
    if (type && type->type == JSON_ARRAY) return CHAT_SK_ANY_OF;
    if (json_get(sc, "const")) return CHAT_SK_CONST;
    if (json_get(sc, "enum")) return CHAT_SK_ENUM;
    const char *tn = type && type->type == JSON_STRING ? type->str : "";
    const json_value *all = json_get(sc, "allOf"), *items = json_get(sc, "items");
    int tuple = (items && items->type == JSON_ARRAY) || (!items && json_get(sc, "prefixItems"));
    if (!tn[0]) {
        if (cs_has_props(sc)) return CHAT_SK_OBJECT;
        if (all) return CHAT_SK_ALL_OF;
        if (items || json_get(sc, "prefixItems")) return tuple ? CHAT_SK_TUPLE : CHAT_SK_ARRAY;
        if (json_get(sc, "pattern") || json_get(sc, "minLength") || json_get(sc, "maxLength") || cs_format(sc))
            return CHAT_SK_STRING;
        return CHAT_SK_ANY;
    }
    if (!strcmp(tn, "object")) return !cs_has_props(sc) && all ? CHAT_SK_ALL_OF : CHAT_SK_OBJECT;
    if (!strcmp(tn, "string")) return all ? CHAT_SK_ALL_OF : CHAT_SK_STRING;
    if (!strcmp(tn, "array")) return tuple ? CHAT_SK_TUPLE : CHAT_SK_ARRAY;
    if (!strcmp(tn, "integer")) return CHAT_SK_INTEGER;
    if (!strcmp(tn, "number")) return CHAT_SK_NUMBER;
    if (!strcmp(tn, "boolean")) return CHAT_SK_BOOLEAN;
    if (!strcmp(tn, "null")) return CHAT_SK_NULL;
    return CHAT_SK_ANY;
}

int chat_gen_schema_may_be_string_typed(const json_value *root, const json_value *schema, const json_value *type_override)
{
    cs_walk w;
    memset(&w, 0, sizeof w);
    w.root = root;
    return cs_may_string(&w, schema, type_override);
}

int chat_gen_schema_node_text_typed(const json_value *root, const json_value *schema, const json_value *type_override,
                                    jbuf *out, char *err, size_t errlen)
{
    if (!type_override) return chat_gen_schema_node_text(root, schema, out, err, errlen);
    cs_state s;
    memset(&s, 0, sizeof s);
    s.root = root;
    s.err = err;
    s.errlen = errlen;
    jbuf_init(&s.defs);
    jbuf body;
    jbuf_init(&body);
    int rc = cs_node(&s, schema, type_override, "#", &body);
    if (rc == 0) {
        if (s.defs.len) {
            body.len--;
            if (body.len > 1) jbuf_putc(&body, ',');
            jbuf_puts(&body, "\"$defs\":{");
            jbuf_put(&body, s.defs.p, s.defs.len);
            jbuf_puts(&body, "}}");
        }
        jbuf_put(out, body.p, body.len);
    }
    jbuf_free(&body);
    jbuf_free(&s.defs);
    for (size_t i = 0; i < s.nseen; i++) free(s.seen[i]);
    free(s.seen);
    return rc;
}
