/*
 * ollama.c -- Ollama's /api/ routes on the engine, and derived models
 * (`bankml create`, /api/create, /api/copy, /api/delete). See ollama.h and
 * docs/modules/ollama.md.
 *
 * A request flows one way: serve.c frames it, this file turns Ollama's
 * fields into one engine_request (messages, the sampler's fields, stop
 * list, limit), and the engine runs it in its slot under its lock. Nothing
 * here touches a model except through engine.h.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bankml.h"
#include "base/base.h"
#include "file/gguf.h"
#include "base/json.h"
#include "engine/engine.h"
#include "api/ollama.h"
#include "file/pin.h"
#include "sampling/sampler.h"
#include "api/serve.h"
#include "base/sha256.h"

#define OL_NDJSON "application/x-ndjson"

/* ------------------------------------------------------------------ pure parts */

static void rfc3339_parts(int64_t sec, long nsec, char out[40])
{
    time_t t = (time_t)sec;
    struct tm tm;
    gmtime_r(&t, &tm);
    snprintf(out, 40, "%04d-%02d-%02dT%02d:%02d:%02d.%09dZ", (tm.tm_year + 1900) % 10000, (tm.tm_mon + 1) % 100,
             tm.tm_mday % 100, tm.tm_hour % 100, tm.tm_min % 100, tm.tm_sec % 100, (int)(nsec % 1000000000));
}

void ollama_rfc3339(int64_t unix_ns, char out[40])
{
    int64_t s = unix_ns / 1000000000, ns = unix_ns % 1000000000;
    if (ns < 0) ns += 1000000000, s--;
    rfc3339_parts(s, (long)ns, out);
}

/* Go's time.ParseDuration accepts a sign, then one or more number+unit
 * pairs (or a bare "0"); Ollama also takes a plain number of seconds as a
 * string. Both end up here because clients send either. */
int ollama_parse_duration(const char *s, size_t n, int64_t *ms)
{
    char buf[128];
    if (n == 0 || n >= sizeof buf) return -1;
    memcpy(buf, s, n);
    buf[n] = 0;
    if (strlen(buf) != n) return -1;
    /* a plain number: seconds */
    {
        char *end;
        double v = strtod(buf, &end);
        if (end != buf && !*end && isfinite(v) && !isspace((unsigned char)buf[0])) {
            double m = v * 1000.0;
            if (m > 9.2e18 || m < -9.2e18) return -1;
            *ms = (int64_t)m;
            return 0;
        }
    }
    const char *p = buf;
    int neg = 0;
    if (*p == '-' || *p == '+') neg = *p++ == '-';
    if (!strcmp(p, "0")) {
        *ms = 0;
        return 0;
    }
    if (!*p) return -1;
    double total_ns = 0;
    while (*p) {
        const char *q = p;
        double v = 0, scale = 1;
        int digits = 0;
        while (*q >= '0' && *q <= '9') v = v * 10 + (*q++ - '0'), digits++;
        if (*q == '.') {
            q++;
            while (*q >= '0' && *q <= '9') scale /= 10, v += (*q++ - '0') * scale, digits++;
        }
        if (!digits) return -1;
        static const struct { const char *u; double ns; } units[] = {
            {"ns", 1}, {"us", 1e3}, {"\xc2\xb5s", 1e3}, {"\xce\xbcs", 1e3}, {"ms", 1e6},
            {"s", 1e9}, {"m", 60e9}, {"h", 3600e9}};
        size_t best = 0, bl = 0;
        for (size_t k = 0; k < sizeof units / sizeof units[0]; k++) {
            size_t ul = strlen(units[k].u);
            if (!strncmp(q, units[k].u, ul) && ul > bl) {
                /* "m" must not eat the "m" of "ms" */
                best = k;
                bl = ul;
            }
        }
        if (!bl) return -1;
        total_ns += v * units[best].ns;
        p = q + bl;
    }
    if (total_ns > 9.2e18) return -1;
    *ms = (int64_t)(total_ns / 1e6);
    if (neg) *ms = -*ms;
    return 0;
}

int ollama_keep_alive(const json_value *v, int64_t def_ms, int64_t *ms, char *err, size_t errlen)
{
    if (!v || v->type == JSON_NULL || (v->type == JSON_STRING && v->len == 0)) {
        *ms = def_ms;
        return 0;
    }
    if (v->type == JSON_NUMBER) {
        double d;
        json_as_double(v, &d);
        if (!isfinite(d) || d > 9.2e15 || d < -9.2e15) {
            bk_err(err, errlen, "keep_alive %s: not a duration (\"5m\", \"1h\", seconds, 0 or -1)", v->str);
            return -1;
        }
        *ms = (int64_t)(d * 1000.0);
    } else if (v->type == JSON_STRING) {
        if (ollama_parse_duration(v->str, v->len, ms) != 0) {
            bk_err(err, errlen, "keep_alive \"%.100s\": not a duration (\"5m\", \"1h\", seconds, 0 or -1)", v->str);
            return -1;
        }
    } else {
        bk_err(err, errlen, "keep_alive must be a duration string or a number of seconds");
        return -1;
    }
    if (*ms < 0) *ms = -1;
    return 0;
}

int ollama_name_matches(const char *name, const char *asked)
{
    size_t nn = strlen(name), an = strlen(asked);
    if (!strcasecmp(name, asked)) return 1;
    return an == nn + 7 && !strncasecmp(asked, name, nn) && !strcasecmp(asked + nn, ":latest");
}

int ollama_name_check(const char *asked, char *out, size_t outlen, char *err, size_t errlen)
{
    size_t n = strlen(asked);
    const char *colon = strchr(asked, ':');
    if (colon) {
        if (strcasecmp(colon, ":latest")) {
            bk_err(err, errlen, "%s: the only tag bankml keeps is :latest", asked);
            return -1;
        }
        n = (size_t)(colon - asked);
    }
    if (n == 0 || n > 128) {
        bk_err(err, errlen, "a model name has 1 to 128 characters");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)asked[i];
        if (!isalnum(c) && c != '.' && c != '_' && c != '-') {
            bk_err(err, errlen, "%.*s: a model name is letters, digits, '.', '_' and '-'", (int)n, asked);
            return -1;
        }
    }
    if (n >= 5 && !strncasecmp(asked + n - 5, ".gguf", 5)) {
        bk_err(err, errlen, "%.*s: a derived model's name does not end in .gguf", (int)n, asked);
        return -1;
    }
    if (n >= outlen) {
        bk_err(err, errlen, "name too long");
        return -1;
    }
    for (size_t i = 0; i < n; i++) out[i] = (char)tolower((unsigned char)asked[i]);
    out[n] = 0;
    return 0;
}

/* One part of model.ParseName's result (types/model/name.go, isValidPart):
 * 1 to 80 characters (350 for the host), the first a letter, digit or '_',
 * then also '-' and '_', '.' except in the namespace, ':' only in the host. */
enum { PART_HOST, PART_NS, PART_MODEL, PART_TAG };

static int name_part_ok(int kind, const char *s, size_t n)
{
    if (n < 1 || n > (kind == PART_HOST ? 350u : 80u)) return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        int an = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
        if (i == 0 ? !an : !(an || c == '-' || (c == '.' && kind != PART_NS) || (c == ':' && kind == PART_HOST)))
            return 0;
    }
    return 1;
}

/* Ollama decides its error (and, on /api/chat, even the status) by whether
 * model.ParseName(s).IsValid(): the tag is cut at the last ':' after the
 * last '/', then model, namespace and host at the last '/'s; a part cut
 * empty is "!MISSING!" (invalid) and an absent one takes its default. */
int ollama_name_valid(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    const char *colon = s ? strrchr(s, ':') : NULL, *slash = s ? strrchr(s, '/') : NULL;
    if (colon && (!slash || colon > slash)) {
        if (colon == s || !colon[1] || !name_part_ok(PART_TAG, colon + 1, strlen(colon + 1))) return 0;
        n = (size_t)(colon - s);
    }
    for (int kind = PART_MODEL; kind >= PART_HOST; kind--) {
        const char *cut = NULL;
        for (size_t i = n; kind != PART_HOST && i-- > 0;)
            if (s[i] == '/') {
                cut = s + i;
                break;
            }
        if (!cut) {
            if (kind == PART_HOST) {
                const char *sch = NULL;
                for (size_t i = 0; i + 3 <= n && !sch; i++)
                    if (!memcmp(s + i, "://", 3)) sch = s + i;
                if (sch) return name_part_ok(PART_HOST, sch + 3, n - (size_t)(sch + 3 - s));
            }
            return name_part_ok(kind, s, n);
        }
        size_t before = (size_t)(cut - s), after = n - before - 1;
        if (!before || !after || !name_part_ok(kind, cut + 1, after)) return 0;
        n = before;
    }
    return 1;
}

/* Go's %q (strconv.Quote), which Ollama's copy and delete errors use:
 * '"' and '\\' escaped, \a \b \f \n \r \t \v, other control bytes and
 * bytes that are not UTF-8 as \xNN, and the common non-printing code points
 * (C1 controls, soft hyphen, zero-width and bidi marks, line and paragraph
 * separators, BOM) as \uNNNN; any other code point is kept as it is. The
 * result is cut (still quoted) to fit out. */
void ollama_go_quote(const char *s, char *out, size_t outlen)
{
    size_t o = 0;
    if (outlen < 3) {
        if (outlen) out[0] = 0;
        return;
    }
    out[o++] = '"';
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p;) {
        char piece[16];
        size_t pl = 0, adv = 1;
        unsigned c = *p;
        uint32_t cp = 0;
        size_t need = c < 0x80 ? 0 : (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2 : (c & 0xF8) == 0xF0 ? 3 : 9;
        int valid = need == 0;
        if (need >= 1 && need <= 3) {
            cp = c & (0x3F >> need);
            valid = 1;
            for (size_t k = 1; k <= need && valid; k++) {
                if ((p[k] & 0xC0) != 0x80) valid = 0;
                else cp = cp << 6 | (p[k] & 0x3F);
            }
            static const uint32_t min_cp[] = {0, 0x80, 0x800, 0x10000};
            if (valid && (cp < min_cp[need] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))) valid = 0;
            if (valid) adv = need + 1;
        }
        if (!valid) {
            pl = (size_t)snprintf(piece, sizeof piece, "\\x%02x", c);
        } else if (need == 0) {
            const char *esc = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\a' ? "\\a" : c == '\b' ? "\\b" :
                              c == '\f' ? "\\f" : c == '\n' ? "\\n" : c == '\r' ? "\\r" : c == '\t' ? "\\t" :
                              c == '\v' ? "\\v" : NULL;
            if (esc) pl = (size_t)snprintf(piece, sizeof piece, "%s", esc);
            else if (c < 0x20 || c == 0x7F) pl = (size_t)snprintf(piece, sizeof piece, "\\x%02x", c);
            else piece[0] = (char)c, pl = 1;
        } else if ((cp >= 0x80 && cp <= 0x9F) || cp == 0xAD || (cp >= 0x200B && cp <= 0x200F) ||
                   (cp >= 0x2028 && cp <= 0x202E) || (cp >= 0x2060 && cp <= 0x2064) || cp == 0xFEFF) {
            pl = (size_t)snprintf(piece, sizeof piece, "\\u%04x", (unsigned)cp);
        } else {
            memcpy(piece, p, adv);
            pl = adv;
        }
        if (o + pl + 2 > outlen) break;
        memcpy(out + o, piece, pl);
        o += pl;
        p += adv;
    }
    out[o++] = '"';
    out[o] = 0;
}

/* server/prompt.go (v0.13.3), step for step: walking back from the message
 * before the last, the conversation from i (with the system messages before
 * i) is measured; while it fits, n moves to i. `system` is recomputed on
 * every step, so after a break it holds the system messages before the
 * first message cut -- and a system message that is itself that message is
 * dropped (Ollama's quirk, kept on purpose). */
int ollama_fit(const int *is_system, size_t n_msgs, size_t num_ctx, ollama_count_fn count, void *ud,
               size_t *keep, size_t *n_keep, size_t *n_dropped, char *err, size_t errlen)
{
    size_t *idx = malloc((n_msgs ? n_msgs : 1) * sizeof *idx);
    size_t n_sys = 0, n = n_msgs ? n_msgs - 1 : 0;
    if (!idx) {
        bk_err(err, errlen, "out of memory");
        return -1;
    }
    /* `system` of the last step, as indices into the conversation */
    size_t *sys = malloc((n_msgs ? n_msgs : 1) * sizeof *sys);
    if (!sys) {
        free(idx);
        bk_err(err, errlen, "out of memory");
        return -1;
    }
    for (size_t ii = n_msgs; ii-- > 0;) {
        if (ii == n_msgs - 1) continue;
        n_sys = 0;
        for (size_t j = 0; j < ii; j++)
            if (is_system[j]) sys[n_sys++] = j;
        size_t k = 0, tokens = 0;
        for (size_t j = 0; j < n_sys; j++) idx[k++] = sys[j];
        for (size_t j = ii; j < n_msgs; j++) idx[k++] = j;
        if (count(ud, idx, k, &tokens, err, errlen) != 0) {
            free(idx);
            free(sys);
            return -1;
        }
        if (tokens <= num_ctx) n = ii;
        else break;
    }
    size_t k = 0;
    for (size_t j = 0; j < n_sys; j++) keep[k++] = sys[j];
    for (size_t j = n; j < n_msgs; j++) keep[k++] = j;
    *n_keep = k;
    *n_dropped = n_msgs - k;
    free(idx);
    free(sys);
    return 0;
}

/* ---- Modelfile (parser/parser.go) ---- */

static const char *const MF_NAMES[] = {"from", "license", "template", "system", "adapter", "parameter",
                                       "message", "requires", NULL};

static char *dup_n(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = 0;
    }
    return p;
}

void ollama_modelfile_free(ollama_modelfile *mf)
{
    for (size_t i = 0; i < mf->n; i++) {
        free(mf->cmds[i].key);
        free(mf->cmds[i].value);
    }
    free(mf->cmds);
    mf->cmds = NULL;
    mf->n = 0;
}

/* A value: """...""" or "..." (possibly over several lines, no escapes),
 * else the rest of the line with surrounding space removed. *pp moves past
 * it; *line counts the newlines crossed. */
static int mf_value(const char **pp, const char *end, int *line, char **out, char *err, size_t errlen)
{
    const char *p = *pp;
    while (p < end && (*p == ' ' || *p == '\t')) p++;
    if (end - p >= 3 && !memcmp(p, "\"\"\"", 3)) {
        const char *q = p + 3, *z = NULL;
        for (const char *r = q; r + 3 <= end; r++)
            if (!memcmp(r, "\"\"\"", 3)) {
                z = r;
                break;
            }
        if (!z) {
            bk_err(err, errlen, "line %d: unterminated \"\"\" string", *line);
            return -1;
        }
        for (const char *r = q; r < z; r++) *line += *r == '\n';
        *out = dup_n(q, (size_t)(z - q));
        p = z + 3;
    } else if (p < end && *p == '"') {
        const char *z = memchr(p + 1, '"', (size_t)(end - p - 1));
        if (!z) {
            bk_err(err, errlen, "line %d: unterminated \" string", *line);
            return -1;
        }
        for (const char *r = p + 1; r < z; r++) *line += *r == '\n';
        *out = dup_n(p + 1, (size_t)(z - p - 1));
        p = z + 1;
    } else {
        const char *z = p;
        while (z < end && *z != '\n') z++;
        const char *e = z;
        while (e > p && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r')) e--;
        *out = dup_n(p, (size_t)(e - p));
        p = z;
    }
    if (!*out) {
        bk_err(err, errlen, "out of memory");
        return -1;
    }
    /* after a quoted value only space may follow on its line */
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r')) p++;
    if (p < end && *p != '\n') {
        bk_err(err, errlen, "line %d: unexpected text after a quoted value", *line);
        free(*out);
        *out = NULL;
        return -1;
    }
    *pp = p;
    return 0;
}

int ollama_modelfile_parse(const char *text, size_t n, ollama_modelfile *mf, char *err, size_t errlen)
{
    const char *p = text, *end = text + n;
    int line = 1;
    memset(mf, 0, sizeof *mf);
    if (n >= 3 && !memcmp(p, "\xef\xbb\xbf", 3)) p += 3;
    while (p < end) {
        while (p < end && (*p == ' ' || *p == '\t' || *p == '\r')) p++;
        if (p >= end) break;
        if (*p == '\n') {
            p++, line++;
            continue;
        }
        if (*p == '#') {
            while (p < end && *p != '\n') p++;
            continue;
        }
        const char *w = p;
        while (p < end && isalpha((unsigned char)*p)) p++;
        size_t wl = (size_t)(p - w);
        char name[16] = "";
        int known = 0;
        if (wl && wl < sizeof name) {
            for (size_t i = 0; i < wl; i++) name[i] = (char)tolower((unsigned char)w[i]);
            name[wl] = 0;
            for (size_t k = 0; MF_NAMES[k]; k++) known |= !strcmp(name, MF_NAMES[k]);
        }
        if (!known) {
            bk_err(err, errlen, "line %d: command must be one of \"from\", \"license\", \"template\", \"system\", "
                                 "\"adapter\", \"parameter\", or \"message\"", line);
            goto fail;
        }
        if (p >= end || (*p != ' ' && *p != '\t')) {
            bk_err(err, errlen, "line %d: missing value for [%s]", line, name);
            goto fail;
        }
        ollama_cmd c;
        memset(&c, 0, sizeof c);
        memcpy(c.name, name, sizeof c.name);
        if (!strcmp(name, "parameter") || !strcmp(name, "message")) {
            while (p < end && (*p == ' ' || *p == '\t')) p++;
            const char *k = p;
            while (p < end && !isspace((unsigned char)*p)) p++;
            if (p == k || p >= end || *p == '\n' || *p == '\r') {
                bk_err(err, errlen, "line %d: missing value for [%s]", line, name);
                goto fail;
            }
            c.key = dup_n(k, (size_t)(p - k));
            if (!c.key) goto oom;
            if (!strcmp(name, "parameter"))
                for (char *q = c.key; *q; q++) *q = (char)tolower((unsigned char)*q);
        }
        if (mf_value(&p, end, &line, &c.value, err, errlen) != 0) {
            free(c.key);
            goto fail;
        }
        if (!c.value[0] && strcmp(name, "system") && strcmp(name, "message")) {
            bk_err(err, errlen, "line %d: missing value for [%s]", line, name);
            free(c.key);
            free(c.value);
            goto fail;
        }
        ollama_cmd *nc = realloc(mf->cmds, (mf->n + 1) * sizeof *nc);
        if (!nc) {
            free(c.key);
            free(c.value);
            goto oom;
        }
        mf->cmds = nc;
        mf->cmds[mf->n++] = c;
    }
    return 0;
oom:
    bk_err(err, errlen, "out of memory");
fail:
    ollama_modelfile_free(mf);
    return -1;
}

/* ------------------------------------------------------------------ headers (no load) */

/* What /api/tags, /api/show and /api/ps say about a file, from its header
 * alone: reading the header never maps or verifies the weights, so a
 * listing does not evict the resident model. */
typedef struct {
    int done, ok;
    char *details;             /* the members after parent_model: "format":..,"quantization_level":.. */
    char *model_info;          /* {...} */
    char *tmpl;                /* tokenizer.chat_template, or "" */
    char *params;              /* the GGUF's sampling defaults as Modelfile lines */
    size_t ctx_len;
    int64_t size, mtime_ns;
} hinfo;

static int read_header(const char *path, gguf_header *h, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    size_t cap = (size_t)1 << 20, have = 0;
    uint8_t *buf = NULL;
    if (!f) {
        bk_err(err, errlen, "cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    for (;;) {
        uint8_t *nb = realloc(buf, cap);
        if (!nb) {
            bk_err(err, errlen, "out of memory");
            break;
        }
        buf = nb;
        have += fread(buf + have, 1, cap - have, f);
        uint64_t need = 0;
        gguf_status st = gguf_parse(buf, have, h, &need, err, errlen);
        if (st == GGUF_OK) {
            free(buf);
            fclose(f);
            return 0;
        }
        if (st != GGUF_NEED_MORE || have < cap || need > ((uint64_t)1 << 32)) {
            if (st == GGUF_NEED_MORE) bk_err(err, errlen, "the GGUF header is truncated");
            break;
        }
        size_t want = (size_t)need > cap * 2 ? (size_t)need : cap * 2;
        cap = want;
    }
    free(buf);
    fclose(f);
    return -1;
}

static void put_kv_value(jbuf *b, const gguf_kv *kv)
{
    switch (kv->type) {
    case GGUF_VT_U8: case GGUF_VT_U16: case GGUF_VT_U32: case GGUF_VT_U64:
        jbuf_printf(b, "%llu", (unsigned long long)kv->u);
        break;
    case GGUF_VT_I8: case GGUF_VT_I16: case GGUF_VT_I32: case GGUF_VT_I64:
        jbuf_printf(b, "%lld", (long long)kv->i);
        break;
    case GGUF_VT_F32: case GGUF_VT_F64:
        json_put_double(b, kv->f);
        break;
    case GGUF_VT_BOOL:
        jbuf_puts(b, kv->u ? "true" : "false");
        break;
    default:
        json_put_str(b, kv->str ? kv->str : "", kv->str_len);
    }
}

static int cmp_kv(const void *a, const void *b)
{
    const gguf_kv *x = *(const gguf_kv *const *)a, *y = *(const gguf_kv *const *)b;
    return strcmp(x->key, y->key);
}

static void fmt_param(jbuf *b, const char *k, const char *v)
{
    if (b->len) jbuf_putc(b, '\n');
    jbuf_printf(b, "%-30s %s", k, v);
}

static void fmt_param_f(jbuf *b, const char *k, double v)
{
    char num[64];
    jbuf t;
    jbuf_init(&t);
    json_put_double(&t, v);
    snprintf(num, sizeof num, "%s", t.p ? t.p : "0");
    jbuf_free(&t);
    size_t l = strlen(num);   /* Go prints 0.5, not 0.50 nor 1.0 */
    if (l > 2 && !strcmp(num + l - 2, ".0")) num[l - 2] = 0;
    fmt_param(b, k, num);
}

static void hinfo_fill(hinfo *hi, const char *path)
{
    gguf_header h;
    char err[256];
    struct stat st;
    jbuf b;
    hi->done = 1;
    memset(&h, 0, sizeof h);
    if (stat(path, &st) == 0) {
        hi->size = (int64_t)st.st_size;
        hi->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    }
    if (read_header(path, &h, err, sizeof err) != 0) return;
    size_t al = 0;
    const char *arch = gguf_kv_str(gguf_kv_find(&h, "general.architecture"), &al);
    if (!arch) arch = "";
    /* parameter size: the label, else the weights counted */
    char psize[64];
    size_t sl = 0;
    const char *label = gguf_kv_str(gguf_kv_find(&h, "general.size_label"), &sl);
    if (label && sl) {
        snprintf(psize, sizeof psize, "%s", label);
    } else {
        double total = 0;
        for (size_t i = 0; i < h.n_tensors; i++) total += (double)h.tensors[i].nelem;
        if (total >= 1e9) snprintf(psize, sizeof psize, "%.1fB", total / 1e9);
        else snprintf(psize, sizeof psize, "%.0fM", total / 1e6);
    }
    /* quantization: the most frequent type that is not F32 */
    uint32_t best = 0;
    size_t best_n = 0;
    for (size_t i = 0; i < h.n_tensors; i++) {
        uint32_t t = h.tensors[i].type;
        if (t == 0) continue;
        size_t c = 0;
        for (size_t j = 0; j < h.n_tensors; j++) c += h.tensors[j].type == t;
        if (c > best_n || (c == best_n && t < best)) best = t, best_n = c;
    }
    char tb[16];
    const char *qname = gguf_type_name(best_n ? best : 0, tb);
    jbuf_init(&b);
    jbuf_puts(&b, "\"format\":\"gguf\",\"family\":");
    json_put_cstr(&b, arch);
    jbuf_puts(&b, ",\"families\":[");
    json_put_cstr(&b, arch);
    jbuf_puts(&b, "],\"parameter_size\":");
    json_put_cstr(&b, psize);
    jbuf_puts(&b, ",\"quantization_level\":");
    json_put_cstr(&b, qname);
    hi->details = b.p ? b.p : strdup("");
    /* model_info: every key sorted, without the template, arrays, non-finite floats */
    const gguf_kv **kvs = malloc((h.n_kv ? h.n_kv : 1) * sizeof *kvs);
    size_t nk = 0;
    for (size_t i = 0; kvs && i < h.n_kv; i++) {
        const gguf_kv *kv = &h.kv[i];
        if (gguf_kv_find(&h, kv->key) != kv) continue;   /* a later duplicate wins */
        if (kv->type == GGUF_VT_ARRAY || !strcmp(kv->key, "tokenizer.chat_template")) continue;
        if ((kv->type == GGUF_VT_F32 || kv->type == GGUF_VT_F64) && !isfinite(kv->f)) continue;
        kvs[nk++] = kv;
    }
    if (kvs) qsort(kvs, nk, sizeof *kvs, cmp_kv);
    jbuf_init(&b);
    jbuf_putc(&b, '{');
    for (size_t i = 0; i < nk; i++) {
        if (i) jbuf_putc(&b, ',');
        json_put_str(&b, kvs[i]->key, kvs[i]->key_len);
        jbuf_putc(&b, ':');
        put_kv_value(&b, kvs[i]);
    }
    jbuf_putc(&b, '}');
    free(kvs);
    hi->model_info = b.p;
    size_t tl = 0;
    const char *t = gguf_kv_str(gguf_kv_find(&h, "tokenizer.chat_template"), &tl);
    hi->tmpl = dup_n(t ? t : "", t ? tl : 0);
    char key[300];
    snprintf(key, sizeof key, "%s.context_length", arch);
    uint64_t cl = 0;
    if (gguf_kv_u64(gguf_kv_find(&h, key), &cl)) hi->ctx_len = (size_t)cl;
    sampler_params sp;
    jbuf_init(&b);
    if (sampler_params_init(&sp) == 0 && sampler_gguf_defaults(&sp, &h, err, sizeof err) == 0) {
        char num[32];
        fmt_param_f(&b, "temperature", sp.temp);
        snprintf(num, sizeof num, "%d", (int)sp.top_k);
        fmt_param(&b, "top_k", num);
        fmt_param_f(&b, "top_p", sp.top_p);
        fmt_param_f(&b, "min_p", sp.min_p);
    }
    sampler_params_free(&sp);
    hi->params = b.p ? b.p : strdup("");
    hi->ok = hi->details && hi->model_info && hi->tmpl;
    gguf_header_free(&h);
}

static void hinfo_free(hinfo *hi)
{
    free(hi->details);
    free(hi->model_info);
    free(hi->tmpl);
    free(hi->params);
    memset(hi, 0, sizeof *hi);
}

/* ------------------------------------------------------------------ pins and derived models */

/* A pinned file as create sees it (from the engine's registry when serving,
 * from the registry folder's FORK.json files on the command line). */
typedef struct {
    char name[256], file[256], path[4096], fork[4096];
    int present;
} pin_ent;

typedef struct {
    char name[132];            /* bare, lower-cased */
    char created_at[40];
    char digest[80];           /* "sha256:<hex>" */
    char base_name[256];       /* the pin's registry name */
    char base_sha[65];
    char *layer;               /* the layer's canonical JSON text */
    char *manifest;
} derived;

static struct {
    pthread_mutex_t mu;        /* the derived list, the header cache, what /api/ps names */
    char *dir;                 /* --registry, or NULL */
    derived *d;
    size_t n_d;
    hinfo *hi;                 /* per registry entry */
    size_t n_hi;
    /* /api/ps: the model whose request (re)loaded the weights */
    long ps_idx;
    char ps_tag[300];
    char ps_digest[80];
    char ps_parent[300];
    size_t ps_ctx;
    int64_t default_keep_ms;
    engine *e;                 /* the engine every route answers from */
} ol = {.mu = PTHREAD_MUTEX_INITIALIZER, .ps_idx = -1, .default_keep_ms = 5 * 60 * 1000};

/* The sha256 a FORK.json pins for a file's base name. */
static int pinned_sha(const char *fork, const char *file, char sha[65])
{
    size_t n;
    char *t = json_read_file(fork, &n);
    int rc = t ? pin_lookup(t, n, file, sha, NULL, NULL, 0) : -1;
    free(t);
    return rc == 1 ? 0 : -1;
}

static void sha_hex_of(const char *s, size_t n, char hex[65])
{
    uint8_t d[32];
    sha256(s, n, d);
    sha256_hex(d, hex);
}

/* A manifest's layer written back compactly; the digest is its sha256, so
 * names and times never change it and copies share it. */
static int canon_layer(const json_value *layer, jbuf *out, char digest[80])
{
    char hex[65];
    jbuf_reset(out);
    json_put_value(out, layer);
    if (out->oom) return -1;
    sha_hex_of(out->p ? out->p : "", out->len, hex);
    snprintf(digest, 80, "sha256:%s", hex);
    return 0;
}

static const derived *find_derived(const derived *d, size_t n, const char *asked)
{
    if (!asked) return NULL;
    for (size_t i = 0; i < n; i++)
        if (ollama_name_matches(d[i].name, asked)) return &d[i];
    return NULL;
}

static void derived_free(derived *d)
{
    free(d->layer);
    free(d->manifest);
}

/* Reads one manifest; refuses one edited by hand or whose base pin moved. */
static int derived_read(const char *path, const pin_ent *pins, size_t n_pins, derived *out, char *err, size_t errlen)
{
    size_t len;
    char *text = json_read_file(path, &len);
    jbuf c;
    memset(out, 0, sizeof *out);
    if (!text) {
        bk_err(err, errlen, "cannot read %s", path);
        return -1;
    }
    json_value *doc = json_parse(text, len, err, errlen);
    const json_value *layer = json_get(doc, "layer"), *base = json_get(doc, "base");
    const char *name = NULL, *dg = NULL, *bn = NULL, *bs = NULL, *ca = NULL;
    size_t l;
    int rc = -1;
    jbuf_init(&c);
    if (!doc || !layer || layer->type != JSON_OBJECT || !json_as_str(json_get(doc, "name"), &name, &l) ||
        !json_as_str(json_get(doc, "digest"), &dg, &l) || !json_as_str(json_get(base, "name"), &bn, &l) ||
        !json_as_str(json_get(base, "sha256"), &bs, &l)) {
        if (doc) bk_err(err, errlen, "%s: not a bankml derived-model manifest", path);
        goto out;
    }
    json_as_str(json_get(doc, "created_at"), &ca, &l);
    char digest[80];
    if (canon_layer(layer, &c, digest) != 0 || strcmp(digest, dg)) {
        bk_err(err, errlen, "%s: edited by hand, refused — create it again", path);
        goto out;
    }
    const pin_ent *p = NULL;
    for (size_t i = 0; i < n_pins; i++)
        if (!strcmp(pins[i].name, bn)) p = &pins[i];
    char sha[65];
    if (!p || pinned_sha(p->fork, p->file, sha) != 0 || strcmp(sha, bs)) {
        bk_err(err, errlen, "%s: its base %s is no longer pinned with sha256 %.64s: refused — create it again", path,
                bn, bs);
        goto out;
    }
    snprintf(out->name, sizeof out->name, "%s", name);
    snprintf(out->created_at, sizeof out->created_at, "%s", ca ? ca : "");
    snprintf(out->digest, sizeof out->digest, "%s", digest);
    snprintf(out->base_name, sizeof out->base_name, "%s", bn);
    snprintf(out->base_sha, sizeof out->base_sha, "%s", bs);
    out->layer = c.p;
    c.p = NULL;
    out->manifest = text;
    text = NULL;
    rc = 0;
out:
    jbuf_free(&c);
    json_free(doc);
    free(text);
    return rc;
}

static int ends_with(const char *s, const char *suf)
{
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && !strcmp(s + n - m, suf);
}

/* Every <dir>/<name>.MODEL.json that reads back whole. */
static void derived_load_dir(const char *dir, const pin_ent *pins, size_t n_pins, derived **out, size_t *n_out)
{
    DIR *d = dir ? opendir(dir) : NULL;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (!ends_with(e->d_name, ".MODEL.json")) continue;
        char path[4096 + 300], err[1024];
        derived one;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (derived_read(path, pins, n_pins, &one, err, sizeof err) != 0) {
            fprintf(stderr, "bankml serve: %s\n", err);
            continue;
        }
        derived *nd = realloc(*out, (*n_out + 1) * sizeof *nd);
        if (!nd) {
            derived_free(&one);
            break;
        }
        *out = nd;
        (*out)[(*n_out)++] = one;
    }
    if (d) closedir(d);
}

/* The pins create can name: the engine's registry while serving. */
static size_t pins_from_engine(pin_ent **out)
{
    size_t n = engine_n_entries(ol.e), k = 0;
    *out = calloc(n ? n : 1, sizeof **out);
    for (size_t i = 0; *out && i < n; i++) {
        engine_entry e;
        if (engine_entry_get(ol.e, i, &e) != 0) continue;
        snprintf((*out)[k].name, sizeof (*out)[k].name, "%s", e.name);
        snprintf((*out)[k].file, sizeof (*out)[k].file, "%s", e.file);
        snprintf((*out)[k].path, sizeof (*out)[k].path, "%s", e.path);
        snprintf((*out)[k].fork, sizeof (*out)[k].fork, "%s", e.fork);
        (*out)[k++].present = e.present;
    }
    return *out ? k : 0;
}

/* The pins of the registry folder's FORK.json files (the command line). */
static size_t pins_from_dir(const char *dir, pin_ent **out)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    size_t n = 0;
    *out = NULL;
    while (d && (e = readdir(d))) {
        if (!ends_with(e->d_name, ".FORK.json")) continue;
        char fork[4096], err[256];
        size_t len;
        if (snprintf(fork, sizeof fork, "%s/%s", dir, e->d_name) >= (int)sizeof fork) continue;
        char *text = json_read_file(fork, &len);
        json_value *doc = text ? json_parse(text, len, err, sizeof err) : NULL;
        const json_value *files = json_get(doc, "files");
        for (size_t i = 0; files && files->type == JSON_ARRAY && i < files->n; i++) {
            const char *p;
            size_t pl;
            if (!json_as_str(json_get(files->items[i], "path"), &p, &pl) || !ends_with(p, ".gguf")) continue;
            const char *b = strrchr(p, '/');
            b = b ? b + 1 : p;
            pin_ent *np = realloc(*out, (n + 1) * sizeof *np);
            if (!np) break;
            *out = np;
            pin_ent *pe = &(*out)[n++];
            memset(pe, 0, sizeof *pe);
            engine_model_name(b, pe->name, sizeof pe->name);
            snprintf(pe->file, sizeof pe->file, "%s", b);
            snprintf(pe->path, sizeof pe->path, "%s/%s", dir, b);
            snprintf(pe->fork, sizeof pe->fork, "%s", fork);
            struct stat st;
            pe->present = stat(pe->path, &st) == 0;
        }
        json_free(doc);
        free(text);
    }
    if (d) closedir(d);
    return n;
}

/* ---- building a layer (create) ---- */

/* The PARAMETERs a derived model may set: the sampler's, the limit, the
 * context; is_int as Ollama parses them (strconv.ParseInt). */
static const struct { const char *key; int is_int; } LAYER_PARAMS[] = {
    {"temperature", 0}, {"top_k", 1}, {"top_p", 0}, {"min_p", 0}, {"seed", 1}, {"num_ctx", 1},
    {"num_predict", 1}, {"repeat_penalty", 0}, {"repeat_last_n", 1}, {"presence_penalty", 0},
    {"frequency_penalty", 0}, {"typical_p", 0}, {"min_keep", 1}};
#define N_LAYER_PARAMS (sizeof LAYER_PARAMS / sizeof LAYER_PARAMS[0])

static const char *const RESOURCE_OPTS[] = {"num_thread", "num_gpu", "main_gpu", "num_batch", "use_mmap",
                                            "use_mlock", "low_vram", "numa", "f16_kv", "vocab_only",
                                            "logits_all", "num_keep", NULL};

static int in_list(const char *const *l, const char *s)
{
    for (size_t i = 0; l[i]; i++)
        if (!strcmp(l[i], s)) return 1;
    return 0;
}

typedef struct {
    int has_system;
    jbuf system;
    int set[N_LAYER_PARAMS];
    double val[N_LAYER_PARAMS];
    jbuf stops;                /* JSON items, comma-separated */
    size_t n_stops;
    int stops_new;             /* this create set stops (they replace the parent's) */
    jbuf messages;
    size_t n_messages;
    jbuf license;
    size_t n_license;
    jbuf requires;
    int has_requires;
} layer_b;

static void lb_init(layer_b *b)
{
    memset(b, 0, sizeof *b);
    jbuf_init(&b->system);
    jbuf_init(&b->stops);
    jbuf_init(&b->messages);
    jbuf_init(&b->license);
    jbuf_init(&b->requires);
}

static void lb_free(layer_b *b)
{
    jbuf_free(&b->system);
    jbuf_free(&b->stops);
    jbuf_free(&b->messages);
    jbuf_free(&b->license);
    jbuf_free(&b->requires);
}

static void lb_stop(layer_b *b, const char *s, size_t n)
{
    if (!b->stops_new) {   /* a new list replaces the inherited one */
        jbuf_reset(&b->stops);
        b->n_stops = 0;
        b->stops_new = 1;
    }
    if (b->n_stops++) jbuf_putc(&b->stops, ',');
    json_put_str(&b->stops, s, n);
}

/* PARAMETER key value, checked as the spec's create does (§2.9). */
static int lb_param(layer_b *b, const char *key, const char *value, char *err, size_t errlen)
{
    if (!strcmp(key, "stop")) {
        lb_stop(b, value, strlen(value));
        return 0;
    }
    size_t k = 0;
    while (k < N_LAYER_PARAMS && strcmp(LAYER_PARAMS[k].key, key)) k++;
    if (k == N_LAYER_PARAMS) {
        if (!strcmp(key, "mirostat") || !strcmp(key, "mirostat_eta") || !strcmp(key, "mirostat_tau") ||
            !strcmp(key, "tfs_z") || !strcmp(key, "penalize_newline"))
            bk_err(err, errlen, "PARAMETER %s: that sampler is not reproduced; bankML runs llama-server's default "
                                 "chain", key);
        else if (in_list(RESOURCE_OPTS, key))
            bk_err(err, errlen, "PARAMETER %s: a resource option; bankml serve decides it, not the model", key);
        else
            bk_err(err, errlen, "PARAMETER %s: not a parameter bankML knows", key);
        return -1;
    }
    char *end;
    errno = 0;
    double v;
    if (LAYER_PARAMS[k].is_int) {
        long long x = strtoll(value, &end, 10);
        v = (double)x;
        if (end == value || *end || errno) {
            bk_err(err, errlen, "PARAMETER %s: \"%s\" is not an integer", key, value);
            return -1;
        }
    } else {
        v = strtod(value, &end);
        if (end == value || *end || !isfinite(v)) {
            bk_err(err, errlen, "PARAMETER %s: \"%s\" is not a number", key, value);
            return -1;
        }
        v = (double)(float)v;   /* Ollama parses these at 32 bits */
    }
    int bad = 0;
    if (!strcmp(key, "num_ctx")) bad = v < 1;
    else if (!strcmp(key, "num_predict")) bad = v < -2;
    else if (!strcmp(key, "repeat_penalty")) bad = !(v > 0);
    else if (!strcmp(key, "presence_penalty") || !strcmp(key, "frequency_penalty") || !strcmp(key, "seed")) bad = 0;
    else bad = v < 0;
    if (bad) {
        bk_err(err, errlen, "PARAMETER %s %s: out of range", key, value);
        return -1;
    }
    b->set[k] = 1;
    b->val[k] = v;
    return 0;
}

static int lb_message(layer_b *b, const char *role, const char *content, char *err, size_t errlen)
{
    if (strcmp(role, "system") && strcmp(role, "user") && strcmp(role, "assistant")) {
        bk_err(err, errlen, "MESSAGE %s: the role must be system, user or assistant", role);
        return -1;
    }
    if (b->n_messages++) jbuf_putc(&b->messages, ',');
    jbuf_puts(&b->messages, "{\"role\":");
    json_put_cstr(&b->messages, role);
    jbuf_puts(&b->messages, ",\"content\":");
    json_put_cstr(&b->messages, content);
    jbuf_putc(&b->messages, '}');
    return 0;
}

/* A parent derived model's layer as the starting point (FROM a derived
 * model inherits; new values win, a new stop list replaces its list). */
static void lb_inherit(layer_b *b, const char *layer_text)
{
    char err[128];
    json_value *l = json_parse(layer_text, strlen(layer_text), err, sizeof err);
    const json_value *v;
    if (!l) return;
    if ((v = json_get(l, "system")) && v->type == JSON_STRING) {
        b->has_system = 1;
        jbuf_put(&b->system, v->str, v->len);
    }
    if ((v = json_get(l, "parameters")) && v->type == JSON_OBJECT)
        for (size_t i = 0; i < v->n; i++)
            for (size_t k = 0; k < N_LAYER_PARAMS; k++)
                if (!strcmp(v->keys[i], LAYER_PARAMS[k].key) && json_as_double(v->items[i], &b->val[k])) b->set[k] = 1;
    if ((v = json_get(l, "stop")) && v->type == JSON_ARRAY)
        for (size_t i = 0; i < v->n; i++)
            if (v->items[i]->type == JSON_STRING) {
                if (b->n_stops++) jbuf_putc(&b->stops, ',');
                json_put_str(&b->stops, v->items[i]->str, v->items[i]->len);
            }
    if ((v = json_get(l, "messages")) && v->type == JSON_ARRAY)
        for (size_t i = 0; i < v->n; i++) {
            if (b->n_messages++) jbuf_putc(&b->messages, ',');
            json_put_value(&b->messages, v->items[i]);
        }
    if ((v = json_get(l, "license")) && v->type == JSON_ARRAY)
        for (size_t i = 0; i < v->n; i++) {
            if (b->n_license++) jbuf_putc(&b->license, ',');
            json_put_value(&b->license, v->items[i]);
        }
    json_free(l);
}

/* Where FROM points: a derived model (inherited), a registry name or
 * alias, or a pinned GGUF path. 0 with the pin, or -1 with the reason. */
static int resolve_from(const char *from, const pin_ent *pins, size_t n_pins, const derived *ds, size_t n_ds,
                        const pin_ent **base, const derived **parent, char *err, size_t errlen)
{
    *parent = find_derived(ds, n_ds, from);
    const char *want = *parent ? (*parent)->base_name : from;
    for (size_t i = 0; i < n_pins; i++)
        if ((*parent && !strcmp(pins[i].name, want)) || (!*parent && engine_name_matches(pins[i].file, want))) {
            *base = &pins[i];
            return 0;
        }
    struct stat st, st2;
    if (strchr(from, '/') || ends_with(from, ".gguf")) {
        if (stat(from, &st) != 0) {
            bk_err(err, errlen, "FROM %s: %s", from, strerror(errno));
            return -1;
        }
        const char *b = strrchr(from, '/');
        b = b ? b + 1 : from;
        for (size_t i = 0; i < n_pins; i++)
            if (!strcmp(pins[i].file, b) && stat(pins[i].path, &st2) == 0 && st.st_dev == st2.st_dev &&
                st.st_ino == st2.st_ino) {
                *base = &pins[i];
                return 0;
            }
        bk_err(err, errlen, "FROM %s: the file is not pinned by a FORK.json of the registry: pin it "
                             "(bankml pin %s --fork <registry>/<name>.FORK.json --write) and name it", from, from);
        return -1;
    }
    jbuf names;
    jbuf_init(&names);
    for (size_t i = 0; i < n_pins; i++) jbuf_printf(&names, "%s%s", i ? ", " : "", pins[i].name);
    bk_err(err, errlen, "FROM %s: no pinned or derived model has that name (%s)", from, names.p ? names.p : "");
    jbuf_free(&names);
    return -1;
}

/* The manifest of a new derived model, written atomically to
 * <dir>/<name>.MODEL.json (a temporary file renamed over it). */
static int write_manifest(const char *dir, const char *name, const pin_ent *base, const char *base_sha,
                          const char *layer_text, derived *out, char *err, size_t errlen)
{
    char digest[80], ts[40], path[4096 + 200], tmp[4096 + 240];
    json_value *l = json_parse(layer_text, strlen(layer_text), err, errlen);
    jbuf c, m;
    int rc = -1;
    if (!l) return -1;
    jbuf_init(&c);
    jbuf_init(&m);
    canon_layer(l, &c, digest);
    ollama_rfc3339(bk_wall_ns(), ts);
    jbuf_puts(&m, "{\"kind\": \"bankml-derived-model\", \"bankml\": \"" BANKML_VERSION "\", \"name\": ");
    json_put_cstr(&m, name);
    jbuf_puts(&m, ", \"created_at\": ");
    json_put_cstr(&m, ts);
    jbuf_puts(&m, ", \"base\": {\"name\": ");
    json_put_cstr(&m, base->name);
    jbuf_puts(&m, ", \"file\": ");
    json_put_cstr(&m, base->file);
    jbuf_puts(&m, ", \"sha256\": ");
    json_put_cstr(&m, base_sha);
    jbuf_puts(&m, ", \"fork\": ");
    json_put_cstr(&m, base->fork);
    jbuf_puts(&m, ", \"path\": ");
    json_put_cstr(&m, base->path);
    jbuf_puts(&m, "}, \"layer\": ");
    jbuf_put(&m, c.p, c.len);
    jbuf_puts(&m, ", \"digest\": ");
    json_put_cstr(&m, digest);
    jbuf_puts(&m, "}\n");
    snprintf(path, sizeof path, "%s/%s.MODEL.json", dir, name);
    snprintf(tmp, sizeof tmp, "%s/.%s.MODEL.json.%ld.tmp", dir, name, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || m.oom) {
        bk_err(err, errlen, "cannot write %s: %s", tmp, fd < 0 ? strerror(errno) : "out of memory");
        if (fd >= 0) close(fd);
        goto out;
    }
    size_t off = 0;
    while (off < m.len) {
        ssize_t w = write(fd, m.p + off, m.len - off);
        if (w <= 0) break;
        off += (size_t)w;
    }
    if (off != m.len || fsync(fd) != 0 || close(fd) != 0 || rename(tmp, path) != 0) {
        bk_err(err, errlen, "cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
        goto out;
    }
    if (out) {
        memset(out, 0, sizeof *out);
        snprintf(out->name, sizeof out->name, "%s", name);
        snprintf(out->created_at, sizeof out->created_at, "%s", ts);
        snprintf(out->digest, sizeof out->digest, "%s", digest);
        snprintf(out->base_name, sizeof out->base_name, "%s", base->name);
        snprintf(out->base_sha, sizeof out->base_sha, "%s", base_sha);
        out->layer = c.p;
        c.p = NULL;
        out->manifest = m.p;
        m.p = NULL;
    }
    rc = 0;
out:
    json_free(l);
    jbuf_free(&c);
    jbuf_free(&m);
    return rc;
}

/* The layer's canonical text from a builder. */
static void lb_text(const layer_b *b, const char *base_sha, jbuf *out)
{
    jbuf_puts(out, "{\"base_sha256\":");
    json_put_cstr(out, base_sha);
    jbuf_puts(out, ",\"system\":");
    if (b->has_system) json_put_str(out, b->system.p ? b->system.p : "", b->system.len);
    else jbuf_puts(out, "null");
    jbuf_puts(out, ",\"parameters\":{");
    int first = 1;
    for (size_t k = 0; k < N_LAYER_PARAMS; k++) {
        if (!b->set[k]) continue;
        jbuf_printf(out, "%s\"%s\":", first ? "" : ",", LAYER_PARAMS[k].key);
        if (LAYER_PARAMS[k].is_int) jbuf_printf(out, "%lld", (long long)b->val[k]);
        else json_put_double(out, b->val[k]);
        first = 0;
    }
    jbuf_puts(out, "},\"stop\":[");
    jbuf_put(out, b->stops.p ? b->stops.p : "", b->stops.len);
    jbuf_puts(out, "],\"template_sha256\":null,\"license\":[");
    jbuf_put(out, b->license.p ? b->license.p : "", b->license.len);
    jbuf_puts(out, "],\"messages\":[");
    jbuf_put(out, b->messages.p ? b->messages.p : "", b->messages.len);
    jbuf_puts(out, "],\"requires\":");
    if (b->has_requires) json_put_str(out, b->requires.p ? b->requires.p : "", b->requires.len);
    else jbuf_puts(out, "null");
    jbuf_putc(out, '}');
}

/* Everything create does but the HTTP: from a parsed Modelfile (mf) or the
 * structured request (req, Ollama's new /api/create form), the layer over
 * its base, checked, then written. */
static int create_model(const char *dir, const char *asked, const ollama_modelfile *mf, const json_value *req,
                        const pin_ent *pins, size_t n_pins, const derived *ds, size_t n_ds, derived *out,
                        char *err, size_t errlen)
{
    char name[132], base_sha[65];
    const char *from = NULL, *tmpl = NULL;
    const pin_ent *base = NULL;
    const derived *parent = NULL;
    layer_b b;
    jbuf text;
    int rc = -1, n_from = 0;
    if (!dir) {
        bk_err(err, errlen, "bankml serve was started without --registry DIR: there is nowhere to write a derived "
                             "model");
        return -1;
    }
    if (ollama_name_check(asked, name, sizeof name, err, errlen) != 0) return -1;
    for (size_t i = 0; i < n_pins; i++)
        if (!strcmp(pins[i].name, name)) {
            bk_err(err, errlen, "%s is a pinned model's name; choose another", name);
            return -1;
        }
    lb_init(&b);
    jbuf_init(&text);
    for (size_t i = 0; mf && i < mf->n; i++)
        if (!strcmp(mf->cmds[i].name, "from")) n_from++, from = mf->cmds[i].value;
    if (req) {
        const char *f;
        size_t fl;
        if (json_as_str(json_get(req, "from"), &f, &fl) && fl) n_from++, from = f;
    }
    if (n_from != 1) {
        bk_err(err, errlen, n_from ? "more than one FROM: a derived model has exactly one base"
                                    : "no FROM: name the pinned model this one derives from");
        goto out;
    }
    if (resolve_from(from, pins, n_pins, ds, n_ds, &base, &parent, err, errlen) != 0) goto out;
    if (pinned_sha(base->fork, base->file, base_sha) != 0) {
        bk_err(err, errlen, "FROM %s: %s has no sha256 in %s", from, base->file, base->fork);
        goto out;
    }
    if (parent) lb_inherit(&b, parent->layer);
    for (size_t i = 0; mf && i < mf->n; i++) {
        const ollama_cmd *c = &mf->cmds[i];
        if (!strcmp(c->name, "system")) {
            b.has_system = 1;
            jbuf_reset(&b.system);
            jbuf_puts(&b.system, c->value);
        } else if (!strcmp(c->name, "parameter")) {
            if (lb_param(&b, c->key, c->value, err, errlen) != 0) goto out;
        } else if (!strcmp(c->name, "message")) {
            if (lb_message(&b, c->key, c->value, err, errlen) != 0) goto out;
        } else if (!strcmp(c->name, "license")) {
            if (b.n_license++) jbuf_putc(&b.license, ',');
            json_put_cstr(&b.license, c->value);
        } else if (!strcmp(c->name, "requires")) {
            b.has_requires = 1;
            jbuf_reset(&b.requires);
            jbuf_puts(&b.requires, c->value);
        } else if (!strcmp(c->name, "template")) {
            tmpl = c->value;
        } else if (!strcmp(c->name, "adapter")) {
            bk_err(err, errlen, "ADAPTER: LoRA adapters are not reproduced; bankML serves pinned weights as they are");
            goto out;
        }
    }
    if (req) {
        const json_value *v;
        const char *s;
        size_t sl;
        if (json_as_str(json_get(req, "system"), &s, &sl) && sl) {
            b.has_system = 1;
            jbuf_reset(&b.system);
            jbuf_put(&b.system, s, sl);
        }
        if (json_as_str(json_get(req, "template"), &s, &sl) && sl) tmpl = s;
        if ((v = json_get(req, "license"))) {
            if (v->type == JSON_STRING && v->len) {
                if (b.n_license++) jbuf_putc(&b.license, ',');
                json_put_str(&b.license, v->str, v->len);
            } else if (v->type == JSON_ARRAY) {
                for (size_t i = 0; i < v->n; i++)
                    if (v->items[i]->type == JSON_STRING) {
                        if (b.n_license++) jbuf_putc(&b.license, ',');
                        json_put_str(&b.license, v->items[i]->str, v->items[i]->len);
                    }
            }
        }
        if ((v = json_get(req, "parameters")) && v->type != JSON_NULL) {
            if (v->type != JSON_OBJECT) {
                bk_err(err, errlen, "parameters must be an object");
                goto out;
            }
            for (size_t i = 0; i < v->n; i++) {
                const json_value *x = v->items[i];
                char num[64];
                if (!strcmp(v->keys[i], "stop")) {
                    if (x->type == JSON_STRING) lb_stop(&b, x->str, x->len);
                    else if (x->type == JSON_ARRAY) {
                        for (size_t k = 0; k < x->n; k++)
                            if (x->items[k]->type == JSON_STRING) lb_stop(&b, x->items[k]->str, x->items[k]->len);
                    } else {
                        bk_err(err, errlen, "parameters.stop must be a string or an array of strings");
                        goto out;
                    }
                    continue;
                }
                if (x->type != JSON_NUMBER) {
                    if (lb_param(&b, v->keys[i], "?", err, errlen) != 0) goto out;
                }
                snprintf(num, sizeof num, "%s", x->str);
                /* JSON numbers like 2.0 for an integer parameter are taken whole */
                for (size_t k = 0; k < N_LAYER_PARAMS; k++)
                    if (!strcmp(LAYER_PARAMS[k].key, v->keys[i]) && LAYER_PARAMS[k].is_int) {
                        double d = strtod(x->str, NULL);
                        if (d == floor(d) && fabs(d) < 9e15) snprintf(num, sizeof num, "%lld", (long long)d);
                    }
                if (lb_param(&b, v->keys[i], num, err, errlen) != 0) goto out;
            }
        }
        if ((v = json_get(req, "messages")) && v->type != JSON_NULL) {
            if (v->type != JSON_ARRAY) {
                bk_err(err, errlen, "messages must be an array");
                goto out;
            }
            for (size_t i = 0; i < v->n; i++) {
                const char *role, *content;
                size_t rl, cl;
                if (!json_as_str(json_get(v->items[i], "role"), &role, &rl) ||
                    !json_as_str(json_get(v->items[i], "content"), &content, &cl)) {
                    bk_err(err, errlen, "a message needs a role and a text content");
                    goto out;
                }
                if (lb_message(&b, role, content, err, errlen) != 0) goto out;
            }
        }
    }
    if (tmpl) {
        hinfo hi;
        memset(&hi, 0, sizeof hi);
        hinfo_fill(&hi, base->path);
        int same = hi.tmpl && !strcmp(hi.tmpl, tmpl);
        hinfo_free(&hi);
        if (!same) {
            bk_err(err, errlen, "template: bankML renders the pinned model's own chat template (byte-identical to "
                                 "llama.cpp); a replacement template is not taken");
            goto out;
        }
    }
    lb_text(&b, base_sha, &text);
    if (text.oom) {
        bk_err(err, errlen, "out of memory");
        goto out;
    }
    rc = write_manifest(dir, name, base, base_sha, text.p, out, err, errlen);
out:
    lb_free(&b);
    jbuf_free(&text);
    return rc;
}

/* ------------------------------------------------------------------ HTTP helpers */

static void reply_error(serve_resp *resp, int code, const char *msg)
{
    jbuf b;
    jbuf_init(&b);
    jbuf_puts(&b, "{\"error\":");
    json_put_cstr(&b, msg);
    jbuf_putc(&b, '}');
    serve_reply(resp, code, SERVE_JSON, b.p, b.len);
    jbuf_free(&b);
}

/* Null, false, "", [] and {} count as absent (Ollama's omitempty). */
static int present(const json_value *v)
{
    if (!v) return 0;
    switch (v->type) {
    case JSON_NULL: case JSON_FALSE: return 0;
    case JSON_STRING: return v->len > 0;
    case JSON_ARRAY: case JSON_OBJECT: return v->n > 0;
    default: return 1;
    }
}

static json_value *parse_body(serve_req *req, serve_resp *resp)
{
    char err[512];
    json_value *doc = json_parse(req->body ? req->body : "", req->body_len, err, sizeof err);
    if (!doc) reply_error(resp, 400, err);
    else if (doc->type != JSON_OBJECT) {
        reply_error(resp, 400, "the body must be a JSON object");
        json_free(doc);
        doc = NULL;
    }
    return doc;
}

static const char *body_model(const json_value *body)
{
    const char *m = NULL;
    size_t l;
    if (json_as_str(json_get(body, "model"), &m, &l) && l) return m;
    if (json_as_str(json_get(body, "name"), &m, &l) && l) return m;
    return NULL;
}

/* What a request's model name means: a derived model (its layer copied, so
 * it outlives a concurrent delete) over a registry entry, or a pin. */
typedef struct {
    long idx;                  /* registry entry */
    char tag[300];             /* "<name>:latest" */
    char digest[80];
    char parent[300];
    char *layer;               /* NULL for a pin */
    json_value *ldoc;
} target;

static void target_free(target *t)
{
    free(t->layer);
    json_free(t->ldoc);
}

/* The route asking, for Ollama's error when the name is not found. */
enum { FOR_CHAT, FOR_GENERATE, FOR_SHOW };

/* Ollama v0.13.3's answer to a name it cannot find (server/routes.go):
 * every route says 404 "model '<name as typed>' not found" (GetModel fails
 * with ErrNotExist), except for a name model.ParseName rejects, which
 * /api/chat calls 400 "model is required" and /api/show answers with
 * GetModelInfo's ErrModelPathInvalid, a 500 "invalid model path". */
static void reply_not_found(serve_resp *resp, int route, const char *asked)
{
    char msg[1200];
    if (!ollama_name_valid(asked) && route == FOR_CHAT) {
        reply_error(resp, 400, "model is required");
    } else if (!ollama_name_valid(asked) && route == FOR_SHOW) {
        reply_error(resp, 500, "invalid model path");
    } else {
        snprintf(msg, sizeof msg, "model '%.1100s' not found", asked ? asked : "");
        reply_error(resp, 404, msg);
    }
}

/* An absent or empty model is the startup model (spec §2.7), as on
 * llama-server's routes; Ollama itself would refuse it. A name is looked up
 * first (bankml also takes a registry path) and Ollama's error chosen only
 * when nothing matches. */
static int resolve_target(const char *asked, int route, target *t, serve_resp *resp)
{
    char err[1024];
    memset(t, 0, sizeof *t);
    pthread_mutex_lock(&ol.mu);
    const derived *d = find_derived(ol.d, ol.n_d, asked);
    if (d) {
        t->idx = engine_find(ol.e, d->base_name);
        snprintf(t->tag, sizeof t->tag, "%s:latest", d->name);
        snprintf(t->digest, sizeof t->digest, "%s", d->digest);
        snprintf(t->parent, sizeof t->parent, "%s:latest", d->base_name);
        t->layer = strdup(d->layer);
    }
    pthread_mutex_unlock(&ol.mu);
    if (d) {
        t->ldoc = t->layer ? json_parse(t->layer, strlen(t->layer), err, sizeof err) : NULL;
        if (t->idx < 0 || !t->ldoc) {
            reply_error(resp, 500, "the derived model's base is not in the registry");
            return -1;
        }
        return 0;
    }
    t->idx = engine_find(ol.e, asked);
    if (t->idx < 0) {
        reply_not_found(resp, route, asked);
        return -1;
    }
    engine_entry e;
    engine_entry_get(ol.e, (size_t)t->idx, &e);
    snprintf(t->tag, sizeof t->tag, "%s:latest", e.name);
    char sha[65] = "";
    pinned_sha(e.fork, e.file, sha);
    snprintf(t->digest, sizeof t->digest, "%s", sha);
    return 0;
}

/* ------------------------------------------------------------------ /api/chat and /api/generate */

static const char *const SAMPLING_OPTS[] = {"temperature", "top_k", "top_p", "min_p", "seed", "repeat_penalty",
                                            "repeat_last_n", "presence_penalty", "frequency_penalty", "typical_p",
                                            "min_keep", NULL};

/* The request's options over the derived layer's parameters, split into
 * the sampler's JSON (llama-server's field names are Ollama's), the limit,
 * num_ctx and the stop list. */
typedef struct {
    char *keys[64];            /* the sampler's fields by llama-server's names (Ollama's), */
    size_t key_lens[64];
    json_value *nums[64];      /* with their numbers, for sampler_resolve */
    size_t n_nums;
    int32_t n_predict;
    long num_ctx;              /* 0: none */
    const char *stops[64];
    size_t stop_lens[64];
    size_t n_stops;
} opts;

static int add_stop(opts *o, const json_value *v, const char *what, char *err, size_t errlen)
{
    o->n_stops = 0;
    if (!v || v->type == JSON_NULL) return 0;
    if (v->type == JSON_STRING) {
        if (v->len) o->stops[0] = v->str, o->stop_lens[0] = v->len, o->n_stops = 1;
        return 0;
    }
    if (v->type == JSON_ARRAY) {
        for (size_t i = 0; i < v->n; i++)
            if (v->items[i]->type != JSON_STRING) goto bad;
        for (size_t i = 0; i < v->n && o->n_stops < 64; i++)
            if (v->items[i]->len) o->stops[o->n_stops] = v->items[i]->str, o->stop_lens[o->n_stops++] = v->items[i]->len;
        return 0;
    }
bad:
    bk_err(err, errlen, "%s must be a string or an array of strings", what);
    return -1;
}

static int read_options(const json_value *options, const json_value *layer, opts *o, char *err, size_t errlen)
{
    const json_value *lp = json_get(layer, "parameters");
    const json_value *num[64];
    const char *keys[64];
    size_t n = 0;
    o->n_predict = -1;
    o->num_ctx = 0;
    if (options && options->type != JSON_NULL && options->type != JSON_OBJECT) {
        bk_err(err, errlen, "options must be an object");
        return -1;
    }
    if (add_stop(o, json_get(layer, "stop"), "stop", err, errlen) != 0) return -1;
    /* the layer's parameters first, then the request's, key by key */
    for (int pass = 0; pass < 2; pass++) {
        const json_value *src = pass ? options : lp;
        for (size_t i = 0; src && src->type == JSON_OBJECT && i < src->n; i++) {
            const char *k = src->keys[i];
            const json_value *v = src->items[i];
            if (pass && !strcmp(k, "stop")) {
                if (add_stop(o, v, "options.stop", err, errlen) != 0) return -1;
                continue;
            }
            if (pass && in_list(RESOURCE_OPTS, k)) continue;
            if (pass && !strcmp(k, "penalize_newline")) continue;
            int known = in_list(SAMPLING_OPTS, k) || !strcmp(k, "num_predict") || !strcmp(k, "num_ctx") ||
                        !strcmp(k, "mirostat") || !strcmp(k, "mirostat_eta") || !strcmp(k, "mirostat_tau") ||
                        !strcmp(k, "tfs_z");
            if (!known) {
                bk_err(err, errlen, "options.%s: not an option bankML knows; it refuses rather than ignore what "
                                     "might change the answer", k);
                return -1;
            }
            if (v->type == JSON_NULL) continue;
            if (v->type != JSON_NUMBER) {
                bk_err(err, errlen, "options.%s must be a number", k);
                return -1;
            }
            double d;
            json_as_double(v, &d);
            if (!strcmp(k, "mirostat")) {
                if (d != 0) {
                    bk_err(err, errlen, "mirostat: not reproduced; bankML reproduces llama-server's default sampler "
                                         "chain");
                    return -1;
                }
                continue;
            }
            if (!strcmp(k, "tfs_z")) {
                if (d != 1) {
                    bk_err(err, errlen, "tfs_z: tail-free sampling is not reproduced (llama.cpp removed it)");
                    return -1;
                }
                continue;
            }
            if (!strcmp(k, "mirostat_eta") || !strcmp(k, "mirostat_tau")) continue;
            if (!strcmp(k, "num_predict")) {
                o->n_predict = d > 0 && d < 2147483647.0 ? (int32_t)d : -1;
                continue;
            }
            if (!strcmp(k, "num_ctx")) {
                o->num_ctx = d >= 1 && d < 1e9 ? (long)d : 0;
                continue;
            }
            size_t j = 0;   /* a later value of the same key replaces the earlier one */
            while (j < n && strcmp(keys[j], k)) j++;
            if (j == n && n < 64) n++;
            if (j < 64) keys[j] = k, num[j] = v;
        }
    }
    for (size_t i = 0; i < n; i++) {
        o->keys[i] = (char *)keys[i];
        o->key_lens[i] = strlen(keys[i]);
        o->nums[i] = (json_value *)num[i];
    }
    o->n_nums = n;
    return 0;
}

/* The sampler's fields as one object (the request's own values, not copied). */
static json_value options_object(opts *o)
{
    json_value obj = {.type = JSON_OBJECT, .n = o->n_nums, .items = o->nums, .keys = o->keys, .key_lens = o->key_lens};
    return obj;
}

/* Ollama's refusals, before anything loads. */
static int refusals(const json_value *body, int generate, char *err, size_t errlen)
{
    if (present(json_get(body, "tools"))) {
        bk_err(err, errlen, "tools: tool calling needs the template's tool rendering and a grammar (O6 in "
                             "docs/OLLAMA.md); not reproduced yet");
        return -1;
    }
    if (present(json_get(body, "images"))) {
        bk_err(err, errlen, "images: bankML's models are text-only; vision is out of scope");
        return -1;
    }
    if (generate && present(json_get(body, "suffix"))) {
        bk_err(err, errlen, "suffix: fill-in-the-middle is not reproduced; send the whole prompt");
        return -1;
    }
    if (present(json_get(body, "template"))) {
        bk_err(err, errlen, "template: bankML renders the pinned model's own chat template (byte-identical to "
                             "llama.cpp); a replacement template is not taken");
        return -1;
    }
    if (generate && present(json_get(body, "context"))) {
        bk_err(err, errlen, "context: send the conversation as /api/chat messages instead; the prompt cache reuses "
                             "the shared prefix");
        return -1;
    }
    const json_value *th = json_get(body, "think");
    if (th && th->type != JSON_NULL && th->type != JSON_FALSE) {
        bk_err(err, errlen, "think: the pinned template is rendered with thinking off (an empty <think> block, as "
                             "llama-server --reasoning off); thinking is not reproduced yet");
        return -1;
    }
    const json_value *raw = json_get(body, "raw");
    if (present(json_get(body, "format"))) {
        if (raw && raw->type == JSON_TRUE) bk_err(err, errlen, "format with raw: a constrained answer needs the template's prompt; drop raw");
        else bk_err(err, errlen, "format: JSON mode and JSON schemas need the grammar engine, which bankML does not "
                                  "have yet; not reproduced (ask without format)");
        return -1;
    }
    if (present(json_get(body, "logprobs"))) {
        bk_err(err, errlen, "logprobs: not reproduced on /api yet; /v1/chat/completions answers them");
        return -1;
    }
    return 0;
}

/* The conversation the template sees, as a JSON array text: the derived
 * layer's SYSTEM (unless the request starts with one) and MESSAGEs, then
 * the request's messages (chat), or system + prompt (generate). */
static int build_messages(const json_value *body, const json_value *layer, int generate, jbuf *out, int *empty,
                          char *err, size_t errlen)
{
    const json_value *lsys = json_get(layer, "system"), *lmsgs = json_get(layer, "messages");
    size_t n = 0;
    *empty = 1;
    jbuf_putc(out, '[');
    if (!generate) {
        const json_value *msgs = json_get(body, "messages");
        if (msgs && msgs->type != JSON_NULL && msgs->type != JSON_ARRAY) {
            bk_err(err, errlen, "messages must be an array");
            return -1;
        }
        const char *r0 = NULL;
        size_t rl;
        if (msgs && msgs->n && json_as_str(json_get(msgs->items[0], "role"), &r0, &rl) && !strcmp(r0, "system")) lsys = NULL;
        if (lsys && lsys->type == JSON_STRING && lsys->len) {
            jbuf_puts(out, "{\"role\":\"system\",\"content\":");
            json_put_str(out, lsys->str, lsys->len);
            jbuf_putc(out, '}');
            n++;
        }
        for (size_t i = 0; lmsgs && lmsgs->type == JSON_ARRAY && i < lmsgs->n; i++) {
            if (n++) jbuf_putc(out, ',');
            json_put_value(out, lmsgs->items[i]);
        }
        for (size_t i = 0; msgs && msgs->type == JSON_ARRAY && i < msgs->n; i++) {
            const json_value *m = msgs->items[i], *c;
            const char *role;
            if (m->type != JSON_OBJECT || !json_as_str(json_get(m, "role"), &role, &rl)) {
                bk_err(err, errlen, "a message without a role");
                return -1;
            }
            if (present(json_get(m, "tool_calls"))) {
                bk_err(err, errlen, "tool_calls: tool calling is not reproduced yet (O6 in docs/OLLAMA.md)");
                return -1;
            }
            if (present(json_get(m, "images"))) {
                bk_err(err, errlen, "images: bankML's models are text-only; vision is out of scope");
                return -1;
            }
            c = json_get(m, "content");
            if (c && c->type != JSON_NULL && c->type != JSON_STRING) {
                bk_err(err, errlen, "only text content is in scope");
                return -1;
            }
            if (n++) jbuf_putc(out, ',');
            jbuf_puts(out, "{\"role\":");
            json_put_str(out, role, rl);
            jbuf_puts(out, ",\"content\":");
            json_put_str(out, c && c->type == JSON_STRING ? c->str : "", c && c->type == JSON_STRING ? c->len : 0);
            const json_value *th = json_get(m, "thinking");
            if (!present(th)) th = json_get(m, "reasoning_content");
            if (th && th->type == JSON_STRING && th->len) {
                jbuf_puts(out, ",\"reasoning_content\":");
                json_put_str(out, th->str, th->len);
            }
            jbuf_putc(out, '}');
            *empty = 0;
        }
    } else {
        const json_value *p = json_get(body, "prompt"), *s = json_get(body, "system");
        if (p && p->type != JSON_NULL && p->type != JSON_STRING) {
            bk_err(err, errlen, "prompt must be a string");
            return -1;
        }
        if (!(s && s->type == JSON_STRING && s->len)) s = lsys;
        if (s && s->type == JSON_STRING && s->len) {
            jbuf_puts(out, "{\"role\":\"system\",\"content\":");
            json_put_str(out, s->str, s->len);
            jbuf_putc(out, '}');
            n++;
        }
        for (size_t i = 0; lmsgs && lmsgs->type == JSON_ARRAY && i < lmsgs->n; i++) {
            if (n++) jbuf_putc(out, ',');
            json_put_value(out, lmsgs->items[i]);
        }
        if (p && p->type == JSON_STRING && p->len) {
            if (n++) jbuf_putc(out, ',');
            jbuf_puts(out, "{\"role\":\"user\",\"content\":");
            json_put_str(out, p->str, p->len);
            jbuf_putc(out, '}');
            *empty = 0;
        }
    }
    jbuf_putc(out, ']');
    return 0;
}

/* Tokens of the conversation made of some of the messages (ollama_fit's
 * measure): rendered by the resident model's template, then tokenized. */
typedef struct {
    const json_value *msgs;
    const engine_model *m;
} fit_ctx;

static int count_tokens(void *ud, const size_t *idx, size_t n, size_t *tokens, char *err, size_t errlen)
{
    fit_ctx *f = ud;
    jbuf prompt;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    int rc = -1;
    json_value **items = malloc((n ? n : 1) * sizeof *items);
    if (!items) {
        bk_err(err, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++) items[i] = f->msgs->items[idx[i]];
    json_value arr = {.type = JSON_ARRAY, .n = n, .items = items};   /* the messages themselves, not copied */
    jbuf_init(&prompt);
    if (engine_render(f->m, &arr, &prompt, err, errlen) == 0 &&
        engine_tokenize(f->m, prompt.p ? prompt.p : "", prompt.len, &ids, &n_ids, err, errlen) == 0) {
        *tokens = n_ids;
        rc = 0;
    }
    free(ids);
    free(items);
    jbuf_free(&prompt);
    return rc;
}

typedef struct {
    serve_req *req;
    serve_resp *resp;
    const engine_model *m;
    int generate, stream, began, failed;
    const char *tag;
    jbuf raw, sent, line;
} api_ctx;

static void line_head(api_ctx *c, jbuf *b)
{
    char ts[40];
    ollama_rfc3339(bk_wall_ns(), ts);
    jbuf_reset(b);
    jbuf_puts(b, "{\"model\":");
    json_put_cstr(b, c->tag);
    jbuf_printf(b, ",\"created_at\":\"%s\",", ts);
}

static void put_text_field(api_ctx *c, jbuf *b, const char *s, size_t n)
{
    if (c->generate) {
        jbuf_puts(b, "\"response\":");
        json_put_str(b, s, n);
    } else {
        jbuf_puts(b, "\"message\":{\"role\":\"assistant\",\"content\":");
        json_put_str(b, s, n);
        jbuf_putc(b, '}');
    }
}

/* Each released piece: the growth of the answer's parsed content, one
 * NDJSON line per piece with text (as /v1's stream sends deltas). */
static int on_token(void *ud, const engine_token *t, int stop_now, const engine_result *so_far)
{
    api_ctx *c = ud;
    const char *p;
    size_t pl;
    (void)stop_now;
    (void)so_far;
    if (!c->stream) return serve_client_gone(c->req) ? -1 : 0;
    jbuf_put(&c->raw, t->text, t->text_len);
    engine_content(c->m, c->raw.p ? c->raw.p : "", c->raw.len, &p, &pl);
    if (pl <= c->sent.len || memcmp(p, c->sent.p ? c->sent.p : "", c->sent.len)) return 0;
    line_head(c, &c->line);
    put_text_field(c, &c->line, p + c->sent.len, pl - c->sent.len);
    jbuf_puts(&c->line, ",\"done\":false}");
    jbuf_put(&c->sent, p + c->sent.len, pl - c->sent.len);
    return serve_ndjson_line(c->resp, c->line.p, c->line.len) != 0 ? -1 : 0;
}

/* A whole answer or a stream's error line, depending on what was sent. */
static void answer_error(api_ctx *c, int code, const char *msg)
{
    if (c->began) {
        jbuf b;
        jbuf_init(&b);
        jbuf_puts(&b, "{\"error\":");
        json_put_cstr(&b, msg);
        jbuf_putc(&b, '}');
        serve_ndjson_line(c->resp, b.p, b.len);
        jbuf_free(&b);
    } else {
        reply_error(c->resp, code, msg);
    }
}

/* ps: the model whose request (re)loaded the weights, and its num_ctx. */
static void ps_note(const target *t, size_t num_ctx, int loaded)
{
    pthread_mutex_lock(&ol.mu);
    if (loaded || ol.ps_idx != t->idx || ol.ps_ctx != num_ctx) {
        ol.ps_idx = t->idx;
        ol.ps_ctx = num_ctx;
        snprintf(ol.ps_tag, sizeof ol.ps_tag, "%s", t->tag);
        snprintf(ol.ps_digest, sizeof ol.ps_digest, "%s", t->digest);
        snprintf(ol.ps_parent, sizeof ol.ps_parent, "%s", t->parent);
    }
    pthread_mutex_unlock(&ol.mu);
}

/* One /api/chat or /api/generate request on its way through. */
typedef struct {
    serve_req *req;
    serve_resp *resp;
    int generate;
    const json_value *body, *layer;
    target t;
    opts o;
    api_ctx c;
    int64_t keep_ms, t0, load_us;
    int stream, raw, truncate, loaded;
    json_value *msgs;
    int32_t *ids;
    size_t n_ids, dropped;
} gen_call;

/* A request with no messages: load or unload only, one final line. */
static void load_only(gen_call *g)
{
    engine_error er = {0};
    jbuf fin;
    if (g->keep_ms == 0) {
        engine_lock(ol.e);
        if (engine_resident(ol.e, NULL, NULL) == g->t.idx) engine_release(ol.e, 0);
        else engine_unlock(ol.e);
    } else if (!engine_acquire(ol.e, (size_t)g->t.idx, &g->loaded, &er)) {
        reply_error(g->resp, engine_status(er.kind), er.msg);
        return;
    } else {
        ps_note(&g->t, 0, g->loaded);
        engine_release(ol.e, g->keep_ms);
    }
    jbuf_init(&fin);
    line_head(&g->c, &fin);
    put_text_field(&g->c, &fin, "", 0);
    jbuf_printf(&fin, ",\"done\":true,\"done_reason\":\"%s\"}", g->keep_ms == 0 ? "unload" : "load");
    if (g->stream) {
        jbuf_putc(&fin, '\n');
        serve_resp_header(g->resp, "Cache-Control", "no-cache");
        serve_reply(g->resp, 200, OL_NDJSON, fin.p, fin.len);
    } else {
        serve_reply_json(g->resp, 200, &fin);
    }
    jbuf_free(&fin);
}

/* The request's flags (keep_alive, stream, shift, truncate, raw). 0, or -1
 * after answering. */
static int read_flags(gen_call *g)
{
    char err[1024];
    int shift = 0;
    if (ollama_keep_alive(json_get(g->body, "keep_alive"), ol.default_keep_ms, &g->keep_ms, err, sizeof err) != 0) {
        reply_error(g->resp, 400, err);
        return -1;
    }
    const json_value *sv = json_get(g->body, "stream");
    if (sv && sv->type != JSON_NULL && !json_is_bool(sv, &g->stream)) {
        reply_error(g->resp, 400, "stream must be true or false");
        return -1;
    }
    g->c.stream = g->stream;
    /* Ollama v0.13's `shift` (default true: when generation fills num_ctx,
     * the runner drops half the context after num_keep and goes on) and
     * `truncate` (default true: chatPrompt drops the oldest messages) */
    const json_value *shv = json_get(g->body, "shift"), *trv = json_get(g->body, "truncate");
    if (shv && shv->type != JSON_NULL && !json_is_bool(shv, &shift)) {
        reply_error(g->resp, 400, "shift must be true or false");
        return -1;
    }
    if (trv && trv->type != JSON_NULL && !json_is_bool(trv, &g->truncate)) {
        reply_error(g->resp, 400, "truncate must be true or false");
        return -1;
    }
    const json_value *rv = json_get(g->body, "raw");
    if (g->generate && rv && rv->type == JSON_TRUE) g->raw = 1;
    return shift;
}

/* The messages Ollama's chatPrompt keeps within num_ctx (oldest dropped,
 * the system messages and the last one kept), or all of them. NULL after
 * a failure (err). *fitted holds what the caller frees. */
static const json_value *fit_messages(gen_call *g, const engine_model *m, json_value *fitted, char *err,
                                      size_t errlen)
{
    const json_value *msgs = g->msgs;
    if (!(g->o.num_ctx > 0 && g->truncate && msgs->n > 1)) return msgs;
    int *is_sys = calloc(msgs->n, sizeof *is_sys);
    size_t *keep = calloc(msgs->n, sizeof *keep), n_keep = 0;
    fit_ctx f = {msgs, m};
    const json_value *use = NULL;
    int ok = is_sys && keep;
    for (size_t i = 0; ok && i < msgs->n; i++) {
        const char *role;
        size_t rl;
        is_sys[i] = json_as_str(json_get(msgs->items[i], "role"), &role, &rl) && !strcmp(role, "system");
    }
    if (!ok) {
        bk_err(err, errlen, "out of memory");
    } else if (ollama_fit(is_sys, msgs->n, (size_t)g->o.num_ctx, count_tokens, &f, keep, &n_keep, &g->dropped, err,
                          errlen) == 0) {
        fitted->items = malloc((n_keep ? n_keep : 1) * sizeof *fitted->items);
        if (fitted->items) {
            fitted->type = JSON_ARRAY;
            fitted->n = n_keep;
            for (size_t i = 0; i < n_keep; i++) fitted->items[i] = msgs->items[keep[i]];   /* not copied */
            use = fitted;
        } else {
            bk_err(err, errlen, "out of memory");
        }
    }
    free(is_sys);
    free(keep);
    return use;
}

/* The prompt's tokens: raw, or the (fitted) conversation through the
 * template; then Ollama's num_ctx rules. 0, or -1 after answering. */
static int prompt_tokens(gen_call *g, const engine_model *m)
{
    char err[1024];
    int rc;
    if (g->raw) {
        const json_value *p = json_get(g->body, "prompt");
        rc = engine_tokenize(m, p->str, p->len, &g->ids, &g->n_ids, err, sizeof err);
    } else {
        json_value fitted = {.type = JSON_NULL};
        const json_value *use = fit_messages(g, m, &fitted, err, sizeof err);
        jbuf prompt;
        jbuf_init(&prompt);
        rc = use ? engine_render(m, use, &prompt, err, sizeof err) : -1;
        if (rc == 0) rc = engine_tokenize(m, prompt.p ? prompt.p : "", prompt.len, &g->ids, &g->n_ids, err, sizeof err);
        free(fitted.items);
        jbuf_free(&prompt);
    }
    if (rc != 0) {
        reply_error(g->resp, 400, err);
        return -1;
    }
    long num_ctx = g->o.num_ctx;
    if (num_ctx > 0 && !g->truncate && g->n_ids > (size_t)num_ctx) {
        reply_error(g->resp, 400, "the input length exceeds the context length");   /* Ollama's runner's words */
        return -1;
    }
    if (num_ctx > 0 && g->n_ids > (size_t)num_ctx) {
        char more[96] = "";
        if (g->dropped) snprintf(more, sizeof more, " with the %zu oldest messages dropped", g->dropped);
        snprintf(err, sizeof err, "the prompt is %zu tokens, more than num_ctx %ld%s: Ollama would cut tokens out of "
                                  "its middle (num_keep), which bankML does not reproduce; raise num_ctx or send a "
                                  "shorter conversation", g->n_ids, num_ctx, more);
        reply_error(g->resp, 400, err);
        return -1;
    }
    if (g->n_ids >= engine_model_n_ctx(m)) {
        snprintf(err, sizeof err, "the prompt has %zu tokens; the context is %zu", g->n_ids, engine_model_n_ctx(m));
        reply_error(g->resp, 400, err);
        return -1;
    }
    return 0;
}

/* The final line: counts, durations and the receipt. */
static void final_line(gen_call *g, const engine_model *m, const engine_result *res)
{
    const char *content = "";
    size_t cl = 0;
    jbuf fin;
    jbuf_init(&fin);
    if (!g->stream) {
        engine_content(m, res->text.p ? res->text.p : "", res->text.len, &content, &cl);
        if (!cl) content = res->text.p ? res->text.p : "", cl = res->text.len;
    }
    line_head(&g->c, &fin);
    put_text_field(&g->c, &fin, content, cl);
    int64_t total_ns = serve_req_age_ms(g->req) * 1000000;
    int64_t own_ns = (bk_mono_us() - g->t0) * 1000;
    int64_t prompt_us = res->t_prompt_last ? res->t_prompt_last - res->t_start : 0;
    int64_t eval_us = res->t_gen_last && res->t_prompt_last ? res->t_gen_last - res->t_prompt_last : 0;
    if (own_ns > total_ns) total_ns = own_ns;
    jbuf_printf(&fin, ",\"done\":true,\"done_reason\":\"%s\",\"total_duration\":%lld,\"load_duration\":%lld,"
                      "\"prompt_eval_count\":%zu,\"prompt_eval_duration\":%lld,\"eval_count\":%zu,"
                      "\"eval_duration\":%lld,\"bankml_cache_n\":%zu,\"bankml_receipt\":",
                engine_finish(res), (long long)total_ns, (long long)g->load_us * 1000, res->n_prompt,
                (long long)prompt_us * 1000, res->n_decoded, (long long)eval_us * 1000, res->n_cached);
    if (g->stream)
        engine_receipt(&fin, m, res, g->req->body, g->req->body_len, serve_req_age_ms(g->req),
                       g->c.sent.p ? g->c.sent.p : "", g->c.sent.len, "", 0, 0);
    else
        engine_receipt(&fin, m, res, g->req->body, g->req->body_len, serve_req_age_ms(g->req), content, cl, "", 0, 0);
    jbuf_putc(&fin, '}');
    if (g->stream) serve_ndjson_line(g->resp, fin.p, fin.len);
    else serve_reply_json(g->resp, 200, &fin);
    jbuf_free(&fin);
}

static int client_gone(void *ud) { return serve_client_gone(((api_ctx *)ud)->req); }

/* With the model held: the sampler over its defaults, the prompt, the run
 * and the answer. */
static void generate_with(gen_call *g, engine_model *m)
{
    char err[1024];
    engine_request rq;
    engine_result res;
    engine_error er = {0};
    engine_request_init(&rq);
    memset(&res, 0, sizeof res);
    json_value sdoc = options_object(&g->o);
    sampler_params_free(&rq.sp);
    if (sampler_resolve(&rq.sp, engine_model_defaults(m), &sdoc, err, sizeof err) != 0) {
        reply_error(g->resp, 400, err);
        goto out;
    }
    rq.sp.n_probs = 0;
    if (prompt_tokens(g, m) != 0) goto out;
    if (g->stream) {
        serve_resp_header(g->resp, "Cache-Control", "no-cache");
        if (serve_ndjson_begin(g->resp) != 0) goto out;
        g->c.began = 1;
    }
    rq.prompt = g->ids;
    rq.n_prompt = g->n_ids;
    rq.n_predict = g->o.n_predict;
    if (g->o.num_ctx > 0) {
        /* Ollama's runner with shift off (llamarunner, the one llama models
         * get) stops once prompt and answer fill num_ctx positions; the
         * token sampled from the last position is still sent, so at most
         * num_ctx - prompt + 1 tokens come, done_reason "length". */
        size_t room = (size_t)g->o.num_ctx - g->n_ids + 1;
        if (rq.n_predict < 0 || (size_t)rq.n_predict > room) rq.n_predict = (int32_t)room;
    }
    for (size_t i = 0; i < g->o.n_stops && i < ENGINE_MAX_STOPS; i++) {
        rq.stops[i] = g->o.stops[i];
        rq.stop_lens[i] = g->o.stop_lens[i];
        rq.n_stops++;
    }
    g->c.m = m;
    engine_sink sink = {on_token, client_gone, &g->c};
    if (engine_complete(ol.e, m, &rq, &sink, &res, &er) != 0) answer_error(&g->c, 500, er.msg);
    else if (!res.gone) final_line(g, m, &res);
out:
    engine_result_free(&res);
    engine_request_free(&rq);
}

static void handle_gen(serve_req *req, serve_resp *resp, int generate)
{
    json_value *body = parse_body(req, resp);
    char err[1024];
    engine_error er = {0};
    jbuf mtext;
    int empty = 1;
    gen_call g;
    if (!body) return;
    memset(&g, 0, sizeof g);
    g.req = req;
    g.resp = resp;
    g.generate = generate;
    g.body = body;
    g.stream = 1;
    g.truncate = 1;
    g.t0 = bk_mono_us();
    jbuf_init(&mtext);
    jbuf_init(&g.c.raw);
    jbuf_init(&g.c.sent);
    jbuf_init(&g.c.line);
    g.c.req = req;
    g.c.resp = resp;
    g.c.generate = generate;
    if (resolve_target(body_model(body), generate ? FOR_GENERATE : FOR_CHAT, &g.t, resp) != 0) goto out;
    g.c.tag = g.t.tag;
    g.layer = json_get(g.t.ldoc, "layer") ? json_get(g.t.ldoc, "layer") : g.t.ldoc;
    int shift = read_flags(&g);
    if (shift < 0) goto out;
    if (build_messages(body, g.layer, generate, &mtext, &empty, err, sizeof err) != 0) {
        reply_error(resp, 400, err);
        goto out;
    }
    if (empty) {
        load_only(&g);
        goto out;
    }
    if (shift) {
        /* only a generation can reach num_ctx: a load or unload takes it */
        reply_error(resp, 400, "shift: Ollama's context shift (half of the context after num_keep dropped, then "
                               "generation goes on over re-rotated keys) is not reproduced; bankML stops when "
                               "the answer fills num_ctx, as Ollama does with shift: false");
        goto out;
    }
    if (refusals(body, generate, err, sizeof err) != 0 ||
        read_options(json_get(body, "options"), g.layer, &g.o, err, sizeof err) != 0) {
        reply_error(resp, 400, err);
        goto out;
    }
    if (g.o.num_ctx > 0 && (size_t)g.o.num_ctx > engine_n_ctx_opt(ol.e)) {
        snprintf(err, sizeof err, "num_ctx %ld is larger than the context this server holds (%zu); restart bankml "
                                  "serve with --ctx %ld if it fits in memory", g.o.num_ctx, engine_n_ctx_opt(ol.e),
                 g.o.num_ctx);
        reply_error(resp, 400, err);
        goto out;
    }
    g.msgs = json_parse(mtext.p, mtext.len, err, sizeof err);
    if (!g.msgs) {
        reply_error(resp, 500, err);
        goto out;
    }
    int64_t a = bk_mono_us();
    engine_model *m = engine_acquire(ol.e, (size_t)g.t.idx, &g.loaded, &er);
    if (!m) {
        reply_error(resp, engine_status(er.kind), er.msg);
        goto out;
    }
    if (g.loaded) g.load_us = bk_mono_us() - a;
    ps_note(&g.t, g.o.num_ctx > 0 ? (size_t)g.o.num_ctx : 0, g.loaded);
    generate_with(&g, m);
    engine_release(ol.e, g.keep_ms);
out:
    free(g.ids);
    target_free(&g.t);
    json_free(g.msgs);
    json_free(body);
    jbuf_free(&mtext);
    jbuf_free(&g.c.raw);
    jbuf_free(&g.c.sent);
    jbuf_free(&g.c.line);
}

static void h_chat(serve_req *req, serve_resp *resp, void *ud) { (void)ud; handle_gen(req, resp, 0); }
static void h_generate(serve_req *req, serve_resp *resp, void *ud) { (void)ud; handle_gen(req, resp, 1); }

/* ------------------------------------------------------------------ the other routes */

/* The header facts of registry entry i, read once. Caller holds ol.mu. */
static const hinfo *hinfo_of(size_t i)
{
    if (i >= ol.n_hi) {
        size_t n = engine_n_entries(ol.e);
        hinfo *nh = realloc(ol.hi, (n ? n : 1) * sizeof *nh);
        if (!nh) return NULL;
        for (size_t k = ol.n_hi; k < n; k++) memset(&nh[k], 0, sizeof nh[k]);
        ol.hi = nh;
        ol.n_hi = n;
        if (i >= n) return NULL;
    }
    if (!ol.hi[i].done) {
        engine_entry e;
        engine_entry_get(ol.e, i, &e);
        if (e.present) hinfo_fill(&ol.hi[i], e.path);
        else ol.hi[i].done = 1;
    }
    return &ol.hi[i];
}

static void put_details(jbuf *b, const hinfo *hi, const char *parent)
{
    jbuf_puts(b, "{\"parent_model\":");
    json_put_cstr(b, parent ? parent : "");
    if (hi && hi->details) {
        jbuf_putc(b, ',');
        jbuf_puts(b, hi->details);
    } else {
        jbuf_puts(b, ",\"format\":\"gguf\",\"family\":\"\",\"families\":[],\"parameter_size\":\"\","
                     "\"quantization_level\":\"\"");
    }
    jbuf_putc(b, '}');
}

static void h_version(serve_req *req, serve_resp *resp, void *ud)
{
    (void)req;
    (void)ud;
    serve_reply(resp, 200, SERVE_JSON, "{\"version\":\"" BANKML_VERSION "\",\"bankml\":true}",
                strlen("{\"version\":\"" BANKML_VERSION "\",\"bankml\":true}"));
}

static void h_tags(serve_req *req, serve_resp *resp, void *ud)
{
    (void)req;
    (void)ud;
    jbuf b;
    char ts[40];
    size_t n = engine_n_entries(ol.e), k = 0;
    jbuf_init(&b);
    jbuf_puts(&b, "{\"models\":[");
    pthread_mutex_lock(&ol.mu);
    for (size_t i = 0; i < n; i++) {
        engine_entry e;
        char sha[65] = "";
        engine_entry_get(ol.e, i, &e);
        const hinfo *hi = hinfo_of(i);
        pinned_sha(e.fork, e.file, sha);
        ollama_rfc3339(hi ? hi->mtime_ns : 0, ts);
        jbuf_puts(&b, k++ ? ",{\"name\":\"" : "{\"name\":\"");
        jbuf_printf(&b, "%s:latest\",\"model\":\"%s:latest\",\"modified_at\":\"%s\",\"size\":%lld,\"digest\":\"%s\","
                        "\"details\":", e.name, e.name, ts, (long long)(hi ? hi->size : 0), sha);
        put_details(&b, hi, "");
        jbuf_printf(&b, ",\"bankml\":{\"native\":%s,\"reason\":", e.present ? "true" : "false");
        if (e.present) jbuf_puts(&b, "null");
        else jbuf_puts(&b, "\"pinned, but the file is not on this machine\"");
        jbuf_puts(&b, ",\"file\":");
        json_put_cstr(&b, e.file);
        jbuf_printf(&b, ",\"found\":%s}}", e.present ? "true" : "false");
    }
    for (size_t i = 0; i < ol.n_d; i++) {
        const derived *d = &ol.d[i];
        long bi = engine_find(ol.e, d->base_name);
        const hinfo *hi = bi >= 0 ? hinfo_of((size_t)bi) : NULL;
        char parent[300];
        snprintf(parent, sizeof parent, "%s:latest", d->base_name);
        jbuf_puts(&b, k++ ? ",{\"name\":\"" : "{\"name\":\"");
        jbuf_printf(&b, "%s:latest\",\"model\":\"%s:latest\",\"modified_at\":\"%s\",\"size\":%lld,\"digest\":\"%s\","
                        "\"details\":", d->name, d->name, d->created_at, (long long)(hi ? hi->size : 0), d->digest);
        put_details(&b, hi, parent);
        jbuf_puts(&b, ",\"bankml\":{\"native\":true,\"reason\":null,\"derived\":true}}");
    }
    pthread_mutex_unlock(&ol.mu);
    jbuf_puts(&b, "]}");
    serve_reply_json(resp, 200, &b);
    jbuf_free(&b);
}

static void h_ps(serve_req *req, serve_resp *resp, void *ud)
{
    (void)req;
    (void)ud;
    jbuf b;
    int64_t left = 0;
    jbuf_init(&b);
    jbuf_puts(&b, "{\"models\":[");
    size_t n_ctx = 0;
    engine_lock(ol.e);
    long idx = engine_resident(ol.e, &left, &n_ctx);
    engine_unlock(ol.e);
    if (idx >= 0) {
        engine_entry e;
        char ts[40], tag[300], digest[80], parent[300], sha[65] = "";
        engine_entry_get(ol.e, (size_t)idx, &e);
        pthread_mutex_lock(&ol.mu);
        const hinfo *hi = hinfo_of((size_t)idx);
        size_t ctx = n_ctx;
        pinned_sha(e.fork, e.file, sha);
        snprintf(tag, sizeof tag, "%s:latest", e.name);
        snprintf(digest, sizeof digest, "%s", sha);
        parent[0] = 0;
        if (ol.ps_idx == idx) {
            snprintf(tag, sizeof tag, "%s", ol.ps_tag);
            snprintf(digest, sizeof digest, "%s", ol.ps_digest);
            snprintf(parent, sizeof parent, "%s", ol.ps_parent);
            if (ol.ps_ctx) ctx = ol.ps_ctx;
        }
        if (left < 0) {   /* kept for good: Ollama shows now + 292 years */
            struct timespec now;
            clock_gettime(CLOCK_REALTIME, &now);
            rfc3339_parts((int64_t)now.tv_sec + (int64_t)292 * 365 * 86400 + 71 * 86400, now.tv_nsec, ts);
        } else {
            ollama_rfc3339(bk_wall_ns() + left * 1000000, ts);
        }
        jbuf_puts(&b, "{\"name\":");
        json_put_cstr(&b, tag);
        jbuf_puts(&b, ",\"model\":");
        json_put_cstr(&b, tag);
        jbuf_printf(&b, ",\"size\":%lld,\"digest\":", (long long)(hi ? hi->size : 0));
        json_put_cstr(&b, digest);
        jbuf_puts(&b, ",\"details\":");
        put_details(&b, hi, parent);
        jbuf_printf(&b, ",\"expires_at\":\"%s\",\"size_vram\":0,\"context_length\":%zu}", ts, ctx);
        pthread_mutex_unlock(&ol.mu);
    }
    jbuf_puts(&b, "]}");
    serve_reply_json(resp, 200, &b);
    jbuf_free(&b);
}

/* Ollama's Modelfile quoting for show: values with a newline or a quote
 * get """...""". */
static void mf_quote(jbuf *b, const char *s)
{
    if (strchr(s, '\n') || strchr(s, '"')) {
        jbuf_puts(b, "\"\"\"");
        jbuf_puts(b, s);
        jbuf_puts(b, "\"\"\"");
    } else {
        jbuf_puts(b, s);
    }
}

static void h_show(serve_req *req, serve_resp *resp, void *ud)
{
    (void)ud;
    json_value *body = parse_body(req, resp);
    target t;
    jbuf b, mf, params;
    if (!body) return;
    if (resolve_target(body_model(body), FOR_SHOW, &t, resp) != 0) {
        json_free(body);
        return;
    }
    engine_entry e;
    engine_entry_get(ol.e, (size_t)t.idx, &e);
    jbuf_init(&b);
    jbuf_init(&mf);
    jbuf_init(&params);
    pthread_mutex_lock(&ol.mu);
    const hinfo *hi = hinfo_of((size_t)t.idx);
    char sha[65] = "", ts[40];
    pinned_sha(e.fork, e.file, sha);
    jbuf_printf(&mf, "# bankml %s: a pinned model (sha256 %s), verified before every load; not editable\nFROM %s\n",
                BANKML_VERSION, sha, e.path);
    if (hi && hi->params) jbuf_puts(&params, hi->params);
    const json_value *layer = t.ldoc;
    if (layer) {
        jbuf_reset(&mf);
        jbuf_printf(&mf, "# bankml %s: derived from %s (sha256 %s)\nFROM %s\n", BANKML_VERSION, e.name, sha, e.name);
        const json_value *v = json_get(layer, "system");
        if (v && v->type == JSON_STRING) {
            jbuf_puts(&mf, "SYSTEM ");
            mf_quote(&mf, v->str);
            jbuf_putc(&mf, '\n');
        }
        v = json_get(layer, "parameters");
        for (size_t i = 0; v && v->type == JSON_OBJECT && i < v->n; i++) {
            jbuf_printf(&mf, "PARAMETER %s %s\n", v->keys[i], v->items[i]->str);
            fmt_param(&params, v->keys[i], v->items[i]->str);
        }
        v = json_get(layer, "stop");
        for (size_t i = 0; v && v->type == JSON_ARRAY && i < v->n; i++) {
            jbuf q;
            jbuf_init(&q);
            json_put_str(&q, v->items[i]->str, v->items[i]->len);
            jbuf_printf(&mf, "PARAMETER stop %s\n", q.p);
            fmt_param(&params, "stop", q.p);
            jbuf_free(&q);
        }
        v = json_get(layer, "messages");
        for (size_t i = 0; v && v->type == JSON_ARRAY && i < v->n; i++) {
            const char *role = "", *content = "";
            size_t l;
            json_as_str(json_get(v->items[i], "role"), &role, &l);
            json_as_str(json_get(v->items[i], "content"), &content, &l);
            jbuf_printf(&mf, "MESSAGE %s ", role);
            mf_quote(&mf, content);
            jbuf_putc(&mf, '\n');
        }
    }
    jbuf_puts(&b, "{\"modelfile\":");
    json_put_str(&b, mf.p ? mf.p : "", mf.len);
    jbuf_puts(&b, ",\"parameters\":");
    json_put_str(&b, params.p ? params.p : "", params.len);
    jbuf_puts(&b, ",\"template\":");
    json_put_cstr(&b, hi && hi->tmpl ? hi->tmpl : "");
    if (layer) {
        const json_value *v = json_get(layer, "system");
        if (v && v->type == JSON_STRING) {
            jbuf_puts(&b, ",\"system\":");
            json_put_str(&b, v->str, v->len);
        }
        jbuf_puts(&b, ",\"license\":");
        json_put_value(&b, json_get(layer, "license"));
        jbuf_puts(&b, ",\"messages\":");
        json_put_value(&b, json_get(layer, "messages"));
    }
    jbuf_puts(&b, ",\"details\":");
    put_details(&b, hi, t.parent);
    jbuf_puts(&b, ",\"model_info\":");
    jbuf_puts(&b, hi && hi->model_info ? hi->model_info : "{}");
    ollama_rfc3339(hi ? hi->mtime_ns : 0, ts);
    jbuf_printf(&b, ",\"capabilities\":[%s],\"modified_at\":\"%s\",\"bankml\":{\"sha256\":\"%s\",\"native\":%s,"
                    "\"n_ctx\":%zu", e.present ? "\"completion\"" : "", ts, sha, e.present ? "true" : "false",
                engine_n_ctx_opt(ol.e));
    if (layer) {
        jbuf_puts(&b, ",\"layer\":");
        json_put_value(&b, layer);
    }
    jbuf_puts(&b, "}}");
    pthread_mutex_unlock(&ol.mu);
    serve_reply_json(resp, 200, &b);
    jbuf_free(&b);
    jbuf_free(&mf);
    jbuf_free(&params);
    target_free(&t);
    json_free(body);
}

/* Adds or replaces a derived model in the served list. Caller holds ol.mu. */
static void derived_put(derived *d)
{
    for (size_t i = 0; i < ol.n_d; i++)
        if (!strcmp(ol.d[i].name, d->name)) {
            derived_free(&ol.d[i]);
            ol.d[i] = *d;
            return;
        }
    derived *nd = realloc(ol.d, (ol.n_d + 1) * sizeof *nd);
    if (!nd) {
        derived_free(d);
        return;
    }
    ol.d = nd;
    ol.d[ol.n_d++] = *d;
}

static void reply_status(serve_resp *resp, int stream, const char *const *lines, size_t n)
{
    jbuf b;
    jbuf_init(&b);
    for (size_t i = stream ? 0 : n - 1; i < n; i++) {
        jbuf_puts(&b, "{\"status\":");
        json_put_cstr(&b, lines[i]);
        jbuf_putc(&b, '}');
        if (stream) jbuf_putc(&b, '\n');
    }
    if (stream) serve_reply(resp, 200, OL_NDJSON, b.p, b.len);
    else serve_reply_json(resp, 200, &b);
    jbuf_free(&b);
}

static void h_create(serve_req *req, serve_resp *resp, void *ud)
{
    (void)ud;
    json_value *body = parse_body(req, resp);
    char err[1024];
    ollama_modelfile mf;
    pin_ent *pins = NULL;
    int stream = 1, have_mf = 0;
    if (!body) return;
    memset(&mf, 0, sizeof mf);
    const json_value *sv = json_get(body, "stream");
    if (sv && sv->type != JSON_NULL && !json_is_bool(sv, &stream)) {
        reply_error(resp, 400, "stream must be true or false");
        goto out;
    }
    if (present(json_get(body, "files")) || present(json_get(body, "adapters")) || present(json_get(body, "quantize"))) {
        reply_error(resp, 400, "files, adapters and quantize are not taken: a derived model is FROM a pinned model "
                               "(SYSTEM, PARAMETER, MESSAGE over it)");
        goto out;
    }
    const char *name = body_model(body), *text;
    size_t tl;
    if (!name || !ollama_name_valid(name)) {
        reply_error(resp, 400, "invalid model name");   /* Ollama's errtypes.InvalidModelNameErrMsg */
        goto out;
    }
    if (json_as_str(json_get(body, "modelfile"), &text, &tl) && tl) {
        if (ollama_modelfile_parse(text, tl, &mf, err, sizeof err) != 0) {
            reply_error(resp, 400, err);
            goto out;
        }
        have_mf = 1;
    }
    size_t n_pins = pins_from_engine(&pins);
    derived made;
    pthread_mutex_lock(&ol.mu);
    int rc = create_model(ol.dir, name, have_mf ? &mf : NULL, body, pins, n_pins, ol.d, ol.n_d, &made, err, sizeof err);
    if (rc == 0) derived_put(&made);
    pthread_mutex_unlock(&ol.mu);
    if (rc != 0) {
        reply_error(resp, 400, err);
        goto out;
    }
    {
        static const char *const lines[] = {"using the pinned base", "writing manifest", "success"};
        reply_status(resp, stream, lines, 3);
    }
out:
    ollama_modelfile_free(&mf);
    free(pins);
    json_free(body);
}

static void h_copy(serve_req *req, serve_resp *resp, void *ud)
{
    (void)ud;
    json_value *body = parse_body(req, resp);
    char err[1024], name[132];
    const char *src = NULL, *dst = NULL;
    size_t l;
    if (!body) return;
    /* Ollama's checks and words first (CopyHandler): the source's name, the
     * destination's name, then whether the source exists; bankml's own
     * rules for a derived model's name after them */
    if (!json_as_str(json_get(body, "source"), &src, &l)) src = "";
    if (!json_as_str(json_get(body, "destination"), &dst, &l)) dst = "";
    if (!ollama_name_valid(src) || !ollama_name_valid(dst)) {
        char q[600];
        int bad_src = !ollama_name_valid(src);
        ollama_go_quote(bad_src ? src : dst, q, sizeof q);
        snprintf(err, sizeof err, "%s %s is invalid", bad_src ? "source" : "destination", q);
        reply_error(resp, 400, err);
        goto out;
    }
    pthread_mutex_lock(&ol.mu);
    int src_known = find_derived(ol.d, ol.n_d, src) || engine_find(ol.e, src) >= 0;
    pthread_mutex_unlock(&ol.mu);
    if (!src_known) {
        char q[600];
        ollama_go_quote(src, q, sizeof q);
        snprintf(err, sizeof err, "model %s not found", q);
        reply_error(resp, 404, err);
        goto out;
    }
    if (ollama_name_check(dst, name, sizeof name, err, sizeof err) != 0) {
        reply_error(resp, 400, err);
        goto out;
    }
    {
        pin_ent *pins = NULL;
        size_t n_pins = pins_from_engine(&pins);
        derived made;
        int rc = -1, code = 400;
        pthread_mutex_lock(&ol.mu);
        const derived *d = find_derived(ol.d, ol.n_d, src);
        long pi = d ? -1 : engine_find(ol.e, src);
        if (!ol.dir) {
            bk_err(err, sizeof err, "bankml serve was started without --registry DIR: there is nowhere to write a "
                                     "derived model");
        } else if (!d && pi < 0) {
            code = 404;   /* deleted since the check above */
            char q[600];
            ollama_go_quote(src, q, sizeof q);
            bk_err(err, sizeof err, "model %s not found", q);
        } else {
            for (size_t i = 0; i < n_pins; i++)
                if (!strcmp(pins[i].name, name)) bk_err(err, sizeof err, "%s is a pinned model's name; choose another", name);
            int clash = 0;
            for (size_t i = 0; i < n_pins; i++) clash |= !strcmp(pins[i].name, name);
            const pin_ent *base = NULL;
            for (size_t i = 0; !clash && i < n_pins; i++)
                if (!strcmp(pins[i].name, d ? d->base_name : pins[pi].name)) base = &pins[i];
            char sha[65];
            if (!clash && base && pinned_sha(base->fork, base->file, sha) == 0) {
                char empty[200];
                snprintf(empty, sizeof empty, "{\"base_sha256\":\"%s\",\"system\":null,\"parameters\":{},\"stop\":[],"
                                              "\"template_sha256\":null,\"license\":[],\"messages\":[],\"requires\":null}",
                         sha);
                rc = write_manifest(ol.dir, name, base, sha, d ? d->layer : empty, &made, err, sizeof err);
                if (rc == 0) derived_put(&made);
            } else if (!clash) {
                bk_err(err, sizeof err, "%s: its base is not pinned", src);
            }
        }
        pthread_mutex_unlock(&ol.mu);
        free(pins);
        if (rc != 0) {
            reply_error(resp, code, err);
            goto out;
        }
        serve_reply(resp, 200, SERVE_JSON, "", 0);
    }
out:
    json_free(body);
}

static void h_delete(serve_req *req, serve_resp *resp, void *ud)
{
    (void)ud;
    json_value *body = parse_body(req, resp);
    char err[1024], path[4096 + 200];
    if (!body) return;
    const char *name = body_model(body);
    int code = 200;
    if (!name) name = "";
    pthread_mutex_lock(&ol.mu);
    size_t i = 0;
    while (i < ol.n_d && !ollama_name_matches(ol.d[i].name, name)) i++;
    if (i == ol.n_d) {
        /* Ollama's DeleteHandler: an invalid name is 400 `name %q is
         * invalid`, an unknown one 404 "model '<name>' not found"; a pin is
         * bankml's own case */
        if (!ollama_name_valid(name)) {
            char q[600];
            ollama_go_quote(name, q, sizeof q);
            code = 400;
            bk_err(err, sizeof err, "name %s is invalid", q);
        } else if (engine_find(ol.e, name) >= 0) {
            code = 400;
            bk_err(err, sizeof err, "bankml does not delete pins over HTTP: a pinned model is removed from its "
                                     "FORK.json");
        } else {
            code = 404;
            bk_err(err, sizeof err, "model '%.900s' not found", name);
        }
    } else {
        snprintf(path, sizeof path, "%s/%s.MODEL.json", ol.dir ? ol.dir : ".", ol.d[i].name);
        if (unlink(path) != 0 && errno != ENOENT) {
            code = 500;
            bk_err(err, sizeof err, "cannot remove %s: %s", path, strerror(errno));
        } else {
            derived_free(&ol.d[i]);
            memmove(&ol.d[i], &ol.d[i + 1], (ol.n_d - i - 1) * sizeof *ol.d);
            ol.n_d--;
        }
    }
    pthread_mutex_unlock(&ol.mu);
    if (code != 200) reply_error(resp, code, err);
    else serve_reply(resp, 200, SERVE_JSON, "", 0);
    json_free(body);
}

static void h_refuse(serve_req *req, serve_resp *resp, void *ud)
{
    (void)req;
    reply_error(resp, 400, (const char *)ud);
}

static void h_api_404(serve_req *req, serve_resp *resp, void *ud)
{
    (void)req;
    (void)ud;
    reply_error(resp, 404, "bankml serve --native (Ollama API): GET /api/version /api/tags /api/ps, POST /api/show "
                           "/api/chat /api/generate /api/create /api/copy, DELETE /api/delete");
}

static const char MSG_EMBED[] = "embeddings need an encoder graph (bge-m3 is XLM-R: LayerNorm, bidirectional "
                                "attention, CLS pooling), which bankML does not have yet (O7 in docs/OLLAMA.md); keep "
                                "Ollama for embeddings";
static const char MSG_PULL[] = "bankml does not pull: models are imported sha256-pinned with open licences only "
                               "(sAGI/models.py import), then served by name";
static const char MSG_PUSH[] = "not offered: bankml publishes nothing; a model is shared by its pinned file and "
                               "FORK.json";

int ollama_register(struct serve_server *srv, engine *e, const char *registry_dir)
{
    ol.e = e;
    pin_ent *pins = NULL;
    int64_t ka = engine_keep_alive_ms(ol.e);   /* `bankml serve --keep-alive D`, as Ollama's OLLAMA_KEEP_ALIVE */
    ol.default_keep_ms = ka < 0 ? -1 : ka;
    pthread_mutex_lock(&ol.mu);
    free(ol.dir);
    ol.dir = registry_dir ? strdup(registry_dir) : NULL;
    size_t n_pins = pins_from_engine(&pins);
    derived_load_dir(ol.dir, pins, n_pins, &ol.d, &ol.n_d);
    pthread_mutex_unlock(&ol.mu);
    free(pins);
    int rc = 0;
    rc |= serve_route(srv, "GET", "/api/version", h_version, NULL, 0);
    rc |= serve_route(srv, "GET", "/api/tags", h_tags, NULL, 0);
    rc |= serve_route(srv, "GET", "/api/ps", h_ps, NULL, 0);
    rc |= serve_route(srv, "POST", "/api/show", h_show, NULL, 0);
    rc |= serve_route(srv, "POST", "/api/chat", h_chat, NULL, 0);
    rc |= serve_route(srv, "POST", "/api/generate", h_generate, NULL, 0);
    rc |= serve_route(srv, "POST", "/api/create", h_create, NULL, 0);
    rc |= serve_route(srv, "POST", "/api/copy", h_copy, NULL, 0);
    rc |= serve_route(srv, "DELETE", "/api/delete", h_delete, NULL, 0);
    rc |= serve_route(srv, "POST", "/api/embed", h_refuse, (void *)MSG_EMBED, 0);
    rc |= serve_route(srv, "POST", "/api/embeddings", h_refuse, (void *)MSG_EMBED, 0);
    rc |= serve_route(srv, "POST", "/api/pull", h_refuse, (void *)MSG_PULL, 0);
    rc |= serve_route(srv, "POST", "/api/push", h_refuse, (void *)MSG_PUSH, 0);
    rc |= serve_route(srv, "GET", "/api/*", h_api_404, NULL, 0);
    rc |= serve_route(srv, "POST", "/api/*", h_api_404, NULL, 0);
    rc |= serve_route(srv, "DELETE", "/api/*", h_api_404, NULL, 0);
    return rc ? -1 : 0;
}

/* ------------------------------------------------------------------ bankml create */

int ollama_cmd_create(int argc, char **argv)
{
    const char *name = NULL, *file = NULL, *dir = ".";
    char err[1024];
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "-f") && i + 1 < argc) file = argv[++i];
        else if (!strcmp(argv[i], "--registry") && i + 1 < argc) dir = argv[++i];
        else if (argv[i][0] != '-' && !name) name = argv[i];
        else {
            fprintf(stderr, "bankml create: unexpected argument %s\n", argv[i]);
            return BANKML_EXIT_IO;
        }
    }
    if (!name || !file) {
        fprintf(stderr, "usage: bankml create NAME -f Modelfile [--registry DIR]\n");
        return BANKML_EXIT_IO;
    }
    size_t len;
    char *text = json_read_file(file, &len);
    if (!text) {
        fprintf(stderr, "bankml create: cannot read %s: %s\n", file, strerror(errno));
        return BANKML_EXIT_IO;
    }
    ollama_modelfile mf;
    if (ollama_modelfile_parse(text, len, &mf, err, sizeof err) != 0) {
        fprintf(stderr, "bankml create: %s: %s\n", file, err);
        free(text);
        return BANKML_REFUSE;
    }
    pin_ent *pins = NULL;
    derived *ds = NULL, made;
    size_t n_ds = 0, n_pins = pins_from_dir(dir, &pins);
    derived_load_dir(dir, pins, n_pins, &ds, &n_ds);
    int rc = create_model(dir, name, &mf, NULL, pins, n_pins, ds, n_ds, &made, err, sizeof err);
    if (rc == 0) {
        printf("bankml create: %s:latest written to %s/%s.MODEL.json (%s over %s)\n", made.name, dir, made.name,
               made.digest, made.base_name);
        derived_free(&made);
    } else {
        fprintf(stderr, "bankml create: %s\n", err);
    }
    for (size_t i = 0; i < n_ds; i++) derived_free(&ds[i]);
    free(ds);
    free(pins);
    ollama_modelfile_free(&mf);
    free(text);
    return rc == 0 ? BANKML_OK : BANKML_REFUSE;
}
