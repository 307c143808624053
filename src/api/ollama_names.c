/*
 * ollama_names.c -- the pure parts of Ollama's API: RFC 3339 times, Go
 * durations and keep_alive, model names, Go's %q, chatPrompt's num_ctx
 * fitting and the Modelfile parser. See ollama.h.
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
#include "api/ollama_int.h"
#include "file/pin.h"
#include "sampling/sampler.h"
#include "api/serve.h"
#include "base/sha256.h"

/* ------------------------------------------------------------------ pure parts */

void ol_rfc3339_parts(int64_t sec, long nsec, char out[40])
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
    ol_rfc3339_parts(s, (long)ns, out);
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

char *ol_dup_n(const char *s, size_t n)
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
        *out = ol_dup_n(q, (size_t)(z - q));
        p = z + 3;
    } else if (p < end && *p == '"') {
        const char *z = memchr(p + 1, '"', (size_t)(end - p - 1));
        if (!z) {
            bk_err(err, errlen, "line %d: unterminated \" string", *line);
            return -1;
        }
        for (const char *r = p + 1; r < z; r++) *line += *r == '\n';
        *out = ol_dup_n(p + 1, (size_t)(z - p - 1));
        p = z + 1;
    } else {
        const char *z = p;
        while (z < end && *z != '\n') z++;
        const char *e = z;
        while (e > p && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r')) e--;
        *out = ol_dup_n(p, (size_t)(e - p));
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
            c.key = ol_dup_n(k, (size_t)(p - k));
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

