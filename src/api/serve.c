/*
 * serve.c -- the HTTP/1.1 transport of `bankml serve`.
 *
 * This file owns sockets and framing only (redis's networking.c is the
 * model): it reads one request per connection, refuses what §2.1 of the
 * reference refuses, finds the handler for the method and path, and gives it
 * the means to answer whole or as a stream. What a route means lives in the
 * handlers (api/llama.c, api/status.c, api/ollama.c).
 *
 * Threads: serve_run() polls the listeners and a wake pipe on the caller's
 * thread; each accepted connection gets a detached thread of its own, at
 * most max_conns + SERVE_RESERVE at once. A connection is idle while its
 * head or body arrives (each under a whole-request deadline), then working;
 * an arrival may shed one idle connection (serve_pick_shed: the oldest of a
 * peer that keeps too many, or, when the regular places are taken, the
 * oldest of all), so slow clients cannot hold the places. A reserve
 * connection answers /health and /metrics at once and waits for a regular
 * place for anything else. While every place is taken the listeners are not
 * polled: further connections wait in the kernel's accept queue (backlog
 * SERVE_BACKLOG) and are taken, in arrival order, as connections close, so
 * a burst of requests is served rather than refused.
 *
 * Sections: limits and small helpers · parsing · gates (host, length, key,
 * CORS) · socket I/O · answers · routing · connections · the server.
 */
#include "base/base.h"
#include "base/log.h"
#include "api/serve.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define MAX_ROUTES 128
/* The kernel's accept queue: where connections past max_conns wait (the
 * kernel caps it at net.core.somaxconn, 4096 on current Linux). */
#define SERVE_BACKLOG 512
/* A whole head: the request line, 100 header lines, their line ends and
 * the blank line. Past this nothing can be valid. */
#define MAX_HEAD ((size_t)(SERVE_MAX_HEADERS + 1) * (SERVE_MAX_LINE + 2) + 2)
#define LINGER_MS 500
#define SHED_POLL_MS 250

// --------------------------------------------------------------------------
// small helpers

/* RFC 9110 tchar: what a method or a header name may be made of. */
static int is_tchar(unsigned char c)
{
    if (c >= '0' && c <= '9') return 1;
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return 1;
    return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

const char *serve_reason(int status)
{
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 201: return "Created";
    case 204: return "No Content";
    case 206: return "Partial Content";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 411: return "Length Required";
    case 413: return "Payload Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    }
    return "Unknown";
}

// --------------------------------------------------------------------------
// parsing

/* %XX-decodes src[0..n) into out (room for n+1). A '%' not followed by two
 * hex digits stays as it is, as llama-server's decoder leaves it. plus: '+'
 * means a space (query strings). -1 if the result would hold a NUL, which
 * no C string can carry past this point. */
static int pct_decode(const char *src, size_t n, char *out, int plus)
{
    size_t i, o = 0;
    for (i = 0; i < n; i++) {
        int c = (unsigned char)src[i];
        if (c == '%' && i + 2 < n && bk_hexval(src[i + 1]) >= 0 && bk_hexval(src[i + 2]) >= 0) {
            c = bk_hexval(src[i + 1]) << 4 | bk_hexval(src[i + 2]);
            i += 2;
            if (c == 0) return -1;
        } else if (c == '+' && plus) {
            c = ' ';
        }
        out[o++] = (char)c;
    }
    out[o] = 0;
    return 0;
}

/* Finds the end of the line that starts at buf[pos]: returns the index of
 * its '\n' or -1 if none is in buf[pos..len). */
static long find_lf(const char *buf, size_t pos, size_t len)
{
    const char *p = memchr(buf + pos, '\n', len - pos);
    return p ? (long)(p - buf) : -1;
}

/* Parses "METHOD SP target SP HTTP/1.x" (line NUL-terminated, no line end). */
static int parse_request_line(char *line, size_t n, serve_req *r, char *err, size_t errlen)
{
    char *sp1, *sp2, *q;
    size_t i, mlen, tlen;
    sp1 = memchr(line, ' ', n);
    if (!sp1) { bk_err(err, errlen, "malformed request line"); return -1; }
    mlen = (size_t)(sp1 - line);
    if (mlen == 0 || mlen > 15) { bk_err(err, errlen, "malformed request line"); return -1; }
    for (i = 0; i < mlen; i++)
        if (!is_tchar((unsigned char)line[i])) { bk_err(err, errlen, "malformed request line"); return -1; }
    sp2 = memchr(sp1 + 1, ' ', n - mlen - 1);
    if (!sp2) { bk_err(err, errlen, "malformed request line"); return -1; }
    tlen = (size_t)(sp2 - sp1 - 1);
    if (tlen == 0 || sp1[1] != '/') { bk_err(err, errlen, "malformed request line"); return -1; }
    for (i = 0; i < tlen; i++) {
        unsigned char c = (unsigned char)sp1[1 + i];
        if (c <= 0x20 || c == 0x7f) { bk_err(err, errlen, "malformed request line"); return -1; }
    }
    if (strchr(sp2 + 1, ' ')) { bk_err(err, errlen, "malformed request line"); return -1; }
    if (strcmp(sp2 + 1, "HTTP/1.1") == 0) r->http_minor = 1;
    else if (strcmp(sp2 + 1, "HTTP/1.0") == 0) r->http_minor = 0;
    else { bk_err(err, errlen, "unsupported HTTP version (HTTP/1.0 and HTTP/1.1 are)"); return -1; }
    *sp1 = 0;
    *sp2 = 0;
    r->method = line;
    r->target = sp1 + 1;
    q = memchr(sp1 + 1, '?', tlen);
    r->query = q ? q + 1 : "";
    if (pct_decode(sp1 + 1, q ? (size_t)(q - sp1 - 1) : tlen, r->path_buf_, 0) != 0) {
        bk_err(err, errlen, "bad path: %%00 in the request target");
        return -1;
    }
    r->path = r->path_buf_;
    return 0;
}

/* Parses "name: value" (NUL-terminated, no line end) into a header. */
static int parse_header_line(char *line, size_t n, serve_header *h, char *err, size_t errlen)
{
    char *colon, *v, *e;
    size_t i;
    if (line[0] == ' ' || line[0] == '\t') {
        bk_err(err, errlen, "malformed header line (folded lines are not accepted)");
        return -1;
    }
    colon = memchr(line, ':', n);
    if (!colon || colon == line) { bk_err(err, errlen, "malformed header line"); return -1; }
    for (i = 0; line + i < colon; i++)
        if (!is_tchar((unsigned char)line[i])) { bk_err(err, errlen, "malformed header line"); return -1; }
    for (v = colon + 1; v < line + n; v++) {
        unsigned char c = (unsigned char)*v;
        if (c < 0x20 && c != '\t') { bk_err(err, errlen, "malformed header line"); return -1; }
        if (c == 0x7f) { bk_err(err, errlen, "malformed header line"); return -1; }
    }
    *colon = 0;
    v = colon + 1;
    e = line + n;
    while (v < e && (*v == ' ' || *v == '\t')) v++;
    while (e > v && (e[-1] == ' ' || e[-1] == '\t')) e--;
    *e = 0;
    h->name = line;
    h->value = v;
    return 0;
}

/* Finds the end of the head without touching buf: the limits and NUL bytes
 * are checked here, so a head that is still arriving is judged as soon as
 * it breaks one, and nothing is written until the whole head is there (the
 * caller parses again, from the start, when more bytes come). */
static int scan_head(const char *buf, size_t len, size_t *end, char *err, size_t errlen)
{
    size_t pos = 0;
    int line_no = 0;
    for (;;) {
        long lf = find_lf(buf, pos, len);
        size_t n = lf < 0 ? len - pos : (size_t)lf - pos;
        if (lf >= 0 && n > 0 && buf[pos + n - 1] == '\r') n--;
        if (n > SERVE_MAX_LINE + (lf < 0)) {    /* an open line may still lose a CR */
            bk_err(err, errlen, line_no == 0 ? "request line too long" : "request head too large");
            return SERVE_PARSE_ERROR;
        }
        if (memchr(buf + pos, 0, n)) { bk_err(err, errlen, "NUL byte in the request head"); return SERVE_PARSE_ERROR; }
        if (lf < 0) return SERVE_PARSE_MORE;
        pos = (size_t)lf + 1;
        if (line_no > 0 && n == 0) { *end = pos; return SERVE_PARSE_OK; }
        if (line_no > SERVE_MAX_HEADERS) { bk_err(err, errlen, "request head too large"); return SERVE_PARSE_ERROR; }
        line_no++;
    }
}

int serve_parse_head(char *buf, size_t len, serve_req *r, size_t *head_len,
                     int *status, char *err, size_t errlen)
{
    size_t pos = 0, end = 0;
    int line_no = 0, rc;
    *status = 400;
    r->n_headers = 0;
    r->n_params = 0;
    rc = scan_head(buf, len, &end, err, errlen);
    if (rc != SERVE_PARSE_OK) return rc;
    for (;;) {
        long lf = find_lf(buf, pos, end);
        size_t n = (size_t)lf - pos;
        char *line = buf + pos;
        if (n > 0 && line[n - 1] == '\r') n--;
        if (memchr(line, '\r', n)) {
            bk_err(err, errlen, line_no == 0 ? "malformed request line" : "malformed header line");
            return SERVE_PARSE_ERROR;
        }
        line[n] = 0;
        pos = (size_t)lf + 1;
        if (line_no == 0) {
            if (parse_request_line(line, n, r, err, errlen) != 0) return SERVE_PARSE_ERROR;
        } else if (n == 0) {
            *head_len = pos;
            *status = 0;
            return SERVE_PARSE_OK;
        } else {
            if (r->n_headers == SERVE_MAX_HEADERS) {
                bk_err(err, errlen, "request head too large");
                return SERVE_PARSE_ERROR;
            }
            if (parse_header_line(line, n, &r->headers[r->n_headers], err, errlen) != 0) return SERVE_PARSE_ERROR;
            r->n_headers++;
        }
        line_no++;
    }
}

// --------------------------------------------------------------------------
// gates: host, length, content type, API key

int serve_host_is_loopback(const char *host)
{
    static const char *const names[] = { "127.0.0.1", "localhost", "[::1]" };
    size_t i;
    if (!host) return 0;
    for (i = 0; i < sizeof names / sizeof names[0]; i++) {
        size_t n = strlen(names[i]);
        if (strncasecmp(host, names[i], n) == 0) {
            const char *p = host + n;
            if (*p == 0) return 1;
            if (*p != ':') return 0;
            for (p++; *p; p++)
                if (*p < '0' || *p > '9') return 0;
            return 1;
        }
    }
    return 0;
}

int serve_parse_content_length(const char *v, size_t max, size_t *out)
{
    size_t x = 0;
    int over = 0;
    if (!v || !*v) return -1;
    for (; *v; v++) {
        unsigned d;
        if (*v < '0' || *v > '9') return -1;
        d = (unsigned)(*v - '0');
        if (!over) {
            if (x > (max - d) / 10) over = 1;   /* x*10+d > max */
            else x = x * 10 + d;
        }
    }
    if (over) return -2;
    *out = x;
    return 0;
}

const char *serve_header_get(const serve_req *r, const char *name)
{
    size_t i;
    for (i = 0; i < r->n_headers; i++)
        if (strcasecmp(r->headers[i].name, name) == 0) return r->headers[i].value;
    return NULL;
}

int serve_check_head(const serve_req *r, int json_posts_only, size_t max_body,
                     size_t *body_len, char *err, size_t errlen)
{
    size_t i, n_host = 0, len = 0;
    int have_len = 0;
    const char *host = NULL;
    for (i = 0; i < r->n_headers; i++)
        if (strcasecmp(r->headers[i].name, "Host") == 0) { n_host++; host = r->headers[i].value; }
    if (n_host != 1 || !serve_host_is_loopback(host)) {
        bk_err(err, errlen, "%s", SERVE_MSG_HOST);
        return 403;
    }
    if (serve_header_get(r, "Transfer-Encoding")) {
        bk_err(err, errlen, "%s", SERVE_MSG_CHUNKED);
        return 400;
    }
    /* Every Content-Length must parse and all must agree (RFC 9112 §6.3:
     * two different lengths are a smuggling attempt or a broken client). */
    for (i = 0; i < r->n_headers; i++) {
        size_t v;
        int rc;
        if (strcasecmp(r->headers[i].name, "Content-Length") != 0) continue;
        rc = serve_parse_content_length(r->headers[i].value, max_body, &v);
        if (rc == -1) { bk_err(err, errlen, "bad Content-Length"); return 400; }
        if (rc == -2) {
            /* Past cpp-httplib's own limit (100 MiB) llama-server answers
             * 413 with an empty body: so does bankml; between its 16 MiB
             * and that, where llama-server would take the request, bankml
             * says why it does not. */
            size_t big;
            int past = serve_parse_content_length(r->headers[i].value, SERVE_LLAMA_MAX_BODY, &big) == -2;
            bk_err(err, errlen, "%s", past ? "" : "request too large");
            return 413;
        }
        if (have_len && v != len) { bk_err(err, errlen, "bad Content-Length"); return 400; }
        len = v;
        have_len = 1;
    }
    if (json_posts_only && strcmp(r->method, "POST") == 0) {
        const char *ct = serve_header_get(r, "Content-Type");
        while (ct && (*ct == ' ' || *ct == '\t')) ct++;
        if (!ct || strncasecmp(ct, "application/json", 16) != 0) {
            bk_err(err, errlen, "%s", SERVE_MSG_JSON_ONLY);
            return 415;
        }
    }
    *body_len = len;
    return 0;
}

/* Compares without an early exit, so the time taken does not tell an
 * attacker how many leading bytes of a key were right. */
static int same_secret(const char *a, size_t an, const char *b, size_t bn)
{
    size_t i;
    unsigned char d = (unsigned char)(an != bn);
    for (i = 0; i < an && i < bn; i++) d |= (unsigned char)(a[i] ^ b[i]);
    return d == 0;
}

int serve_api_key_ok(const char *keys, const char *authorization, const char *x_api_key)
{
    const char *k = authorization, *p;
    size_t kn;
    int ok = 0;
    if (!keys || !*keys) return 1;
    /* llama-server: Authorization, else X-Api-Key (Anthropic's header);
     * a leading "Bearer " (exactly so) is removed. */
    if (!k || !*k) k = x_api_key;
    if (!k) k = "";
    if (strncmp(k, "Bearer ", 7) == 0) k += 7;
    kn = strlen(k);
    if (kn == 0) return 0;
    for (p = keys; *p;) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n > 0) ok |= same_secret(p, n, k, kn);
        p += n;
        if (*p == ',') p++;
    }
    return ok;
}

/* 1 if origin appears, exactly, in the comma-separated list. */
static int origin_allowed(const char *list, const char *origin)
{
    const char *p;
    size_t on;
    if (!list || !origin || !*origin) return 0;
    on = strlen(origin);
    for (p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        const char *a = p, *b = p + n;
        while (a < b && *a == ' ') a++;
        while (b > a && b[-1] == ' ') b--;
        if ((size_t)(b - a) == on && memcmp(a, origin, on) == 0) return 1;
        p += n;
        if (*p == ',') p++;
    }
    return 0;
}

/* llama-server's origin_is_localhost over common_http_parse_url: scheme
 * "http" or "https"; user info up to the first '@' anywhere after "://"
 * dropped; the host up to the first '/'; a bracketed IPv6 literal unwrapped
 * (no ']': not a URL), else cut at the first ':'; a port, when there is
 * text after the colon, must be a number std::stoi reads (blanks, a sign,
 * digits, anything after them; within int). Then the host is localhost,
 * 127.0.0.1 or ::1. */
static int origin_is_localhost(const char *o)
{
    const char *sep = strstr(o, "://");
    if (!sep || !((sep - o == 4 && !memcmp(o, "http", 4)) || (sep - o == 5 && !memcmp(o, "https", 5)))) return 0;
    const char *rest = sep + 3, *at = strchr(rest, '@');
    if (at) rest = at + 1;
    size_t hl = strcspn(rest, "/");
    const char *h = rest, *port = NULL, *hend = rest + hl;
    if (hl && *h == '[') {
        const char *close = memchr(h, ']', hl);
        if (!close) return 0;
        if (close + 1 < hend && close[1] == ':') port = close + 2;
        h++;
        hl = (size_t)(close - h);
    } else {
        const char *colon = memchr(h, ':', hl);
        if (colon) {
            port = colon + 1;
            hl = (size_t)(colon - h);
        }
    }
    if (port && port < hend) {   /* stoi: leading blanks, a sign, at least one digit, an int */
        const char *q = port;
        while (q < hend && (*q == ' ' || (*q >= '\t' && *q <= '\r'))) q++;
        int neg = q < hend && (*q == '-' || *q == '+') ? (*q++ == '-') : 0;
        if (q >= hend || *q < '0' || *q > '9') return 0;
        long long v = 0;
        while (q < hend && *q >= '0' && *q <= '9') {
            v = v * 10 + (*q++ - '0');
            if (v > 2147483648LL) return 0;
        }
        if (!neg && v > 2147483647LL) return 0;
    }
    return (hl == 9 && !memcmp(h, "localhost", 9)) || (hl == 9 && !memcmp(h, "127.0.0.1", 9)) ||
           (hl == 3 && !memcmp(h, "::1", 3));
}

int serve_origin_is_localhost(const char *origin) { return origin && origin_is_localhost(origin); }

// --------------------------------------------------------------------------
// socket I/O with timeouts

/* Waits for fd to be readable within ms. 1 readable, 0 timeout, -1 error. */
static int wait_fd(int fd, short ev, int ms)
{
    struct pollfd p;
    p.fd = fd;
    p.events = ev;
    p.revents = 0;
    for (;;) {
        int rc = poll(&p, 1, ms);
        if (rc < 0 && errno == EINTR) continue;
        if (rc < 0) return -1;
        return rc > 0;
    }
}

/* Reads what is there, waiting at most timeout_ms for the first byte.
 * >0 bytes, 0 EOF, -1 error or reset, -2 timeout. */
static ssize_t read_some(int fd, void *p, size_t n, int timeout_ms)
{
    for (;;) {
        ssize_t got;
        int w = wait_fd(fd, POLLIN, timeout_ms);
        if (w == 0) return -2;
        if (w < 0) return -1;
        got = recv(fd, p, n, MSG_DONTWAIT);
        if (got >= 0) return got;
        if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
        return -1;
    }
}

/* Sends all of p, giving the socket timeout_ms each time it is full.
 * 0, or -1 when the peer is gone or too slow. more: MSG_MORE (a head that a
 * body follows at once). */
static int send_all(int fd, const void *p, size_t n, int timeout_ms, int more)
{
    const char *c = p;
    while (n > 0) {
        ssize_t put = send(fd, c, n, MSG_NOSIGNAL | MSG_DONTWAIT | (more ? MSG_MORE : 0));
        if (put > 0) { c += put; n -= (size_t)put; continue; }
        if (put < 0 && errno == EINTR) continue;
        if (put < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (wait_fd(fd, POLLOUT, timeout_ms) != 1) return -1;
            continue;
        }
        return -1;
    }
    return 0;
}

/* Half-closes and reads what the client still sends for a moment: closing
 * a socket with unread input makes the kernel send a reset, which can
 * destroy the answer before the client has read it. */
static void linger_drain(int fd, int ms)
{
    char junk[16384];
    int64_t end = bk_mono_ns() + (int64_t)ms * 1000000;
    shutdown(fd, SHUT_WR);
    for (;;) {
        int64_t left = (end - bk_mono_ns()) / 1000000;
        ssize_t got;
        if (left <= 0) break;
        got = read_some(fd, junk, sizeof junk, (int)left);
        if (got <= 0) break;
    }
}

/* Reads and throws away n bytes (a refused request's body), within the
 * read timeout for each wait. 0 if all came. */
static int discard(int fd, size_t n, int timeout_ms)
{
    char junk[16384];
    while (n > 0) {
        ssize_t got = read_some(fd, junk, n < sizeof junk ? n : sizeof junk, timeout_ms);
        if (got <= 0) return -1;
        n -= (size_t)got;
    }
    return 0;
}

// --------------------------------------------------------------------------
// answers

struct serve_resp {
    int fd;
    int write_timeout_ms;
    int head_only;          /* HEAD: headers, no body */
    int sent;               /* an answer (or a stream's head) went out */
    int streaming;
    int failed;             /* a write failed: the client is gone */
    int status;             /* for the log */
    const char *cors_origin;/* Access-Control-Allow-Origin's value, or NULL for none */
    int cors_llama;         /* llama-server's CORS: no Vary header */
    jbuf extra;             /* header lines added by the handler */
    jbuf scratch;           /* SSE/NDJSON framing */
    jbuf pending;           /* bytes the socket has not taken yet: sent after the handler returns */
    size_t pending_off;     /* pending.p[0 .. pending_off) already went out */
    size_t stream_bound;    /* a stream's pending bytes past this: the reader is too slow, cut */
    jbuf *capture;          /* serve_call: the answer's body goes here, nothing to a socket */
    char reason[400];       /* the refusal's words (an answer of 400 or more, a stream's error event), for the log */
    char model[160];        /* serve_resp_note's, for the log */
    size_t n_prompt, n_completion, n_cache;
    int noted;
    const char *log_name;   /* the server's serve_opts.log_name: one line per request, or NULL */
    const serve_req *req;   /* the request, for its line */
    int logged;             /* its line was written */
};

void serve_resp_note(serve_resp *resp, const char *model, size_t prompt, size_t completion, size_t cache_n)
{
    if (model) snprintf(resp->model, sizeof resp->model, "%s", model);
    resp->n_prompt += prompt;
    resp->n_completion += completion;
    resp->n_cache += cache_n;
    resp->noted = 1;
}

/* The refusal's words from an answer's body: the JSON error's message
 * (llama-server's {"error":{"message"}}, Ollama's {"error":"..."}), else the
 * text itself, its first line. */
static void serve_note_reason(serve_resp *resp, const char *body, size_t len)
{
    char err[64];
    if (resp->reason[0] || !len) return;
    json_value *v = len < 65536 && (body[0] == '{') ? json_parse(body, len, err, sizeof err) : NULL;
    const json_value *e = v && v->type == JSON_OBJECT ? json_get(v, "error") : NULL;
    if (e && e->type == JSON_OBJECT) e = json_get(e, "message");
    if (e && e->type == JSON_STRING) {
        snprintf(resp->reason, sizeof resp->reason, "%.*s", (int)(e->len < 399 ? e->len : 399), e->str);
    } else if (!v || body[0] != '{') {
        size_t n = 0;
        while (n < len && n < sizeof resp->reason - 1 && body[n] != '\n') n++;
        memcpy(resp->reason, body, n);
        resp->reason[n] = 0;
    }
    json_free(v);
    for (char *p = resp->reason; *p; p++)
        if ((unsigned char)*p < ' ') *p = ' ';
}

/* Sends what the socket takes now, never waiting. 0, or -1 when the peer is
 * gone. *n is left with what was not taken. */
static int send_now(int fd, const char **p, size_t *n, int more)
{
    while (*n > 0) {
        ssize_t put = send(fd, *p, *n, MSG_NOSIGNAL | MSG_DONTWAIT | (more ? MSG_MORE : 0));
        if (put > 0) { *p += put; *n -= (size_t)put; continue; }
        if (put < 0 && errno == EINTR) continue;
        if (put < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
        return -1;
    }
    return 0;
}

/* Every write of an answer: what the socket takes goes now, the rest waits
 * in resp->pending, so a handler (holding the engine lock) never waits for
 * a client. bound: 0 for a whole answer (its bytes are in memory already),
 * else the most a stream may have waiting; past it the client is cut (its
 * socket shut down) and -1 says so, as for a client gone. */
static int resp_write(serve_resp *resp, const void *p, size_t n, size_t bound, int more)
{
    const char *c = p;
    size_t waiting;
    if (resp->failed) return -1;
    if (resp->pending.len > resp->pending_off) {
        const char *q = resp->pending.p + resp->pending_off;
        size_t left = resp->pending.len - resp->pending_off;
        if (send_now(resp->fd, &q, &left, 0) != 0) goto gone;
        resp->pending_off = resp->pending.len - left;
        if (left == 0) {
            jbuf_reset(&resp->pending);
            resp->pending_off = 0;
        }
    }
    if (resp->pending.len == resp->pending_off && send_now(resp->fd, &c, &n, more) != 0) goto gone;
    if (n == 0) return 0;
    waiting = resp->pending.len - resp->pending_off;
    if (bound && waiting + n > bound) {
        shutdown(resp->fd, SHUT_RDWR);
        goto gone;
    }
    if (resp->pending_off > 0 && resp->pending_off >= resp->pending.len / 2) {   /* keep the buffer compact */
        memmove(resp->pending.p, resp->pending.p + resp->pending_off, waiting);
        resp->pending.len = waiting;
        resp->pending_off = 0;
    }
    jbuf_put(&resp->pending, c, n);
    if (resp->pending.oom) goto gone;
    return 0;
gone:
    resp->failed = 1;
    return -1;
}

/* After the handler: the waiting bytes, giving the socket write_timeout_ms
 * each time it is full. */
static void resp_finish(serve_resp *resp)
{
    if (!resp->failed && resp->pending.len > resp->pending_off &&
        send_all(resp->fd, resp->pending.p + resp->pending_off, resp->pending.len - resp->pending_off,
                 resp->write_timeout_ms, 0) != 0)
        resp->failed = 1;
    jbuf_free(&resp->pending);
    resp->pending_off = 0;
}

int serve_resp_header(serve_resp *resp, const char *name, const char *value)
{
    if (resp->sent || strpbrk(name, "\r\n:") || strpbrk(value, "\r\n")) return -1;
    jbuf_printf(&resp->extra, "%s: %s\r\n", name, value);
    return resp->extra.oom ? -1 : 0;
}

/* The status line and headers every answer shares. */
static void put_head(serve_resp *resp, jbuf *h, int status, const char *ctype, int with_length, size_t len)
{
    jbuf_printf(h, "HTTP/1.1 %d %s\r\n", status, serve_reason(status));
    if (ctype) jbuf_printf(h, "Content-Type: %s\r\n", ctype);
    if (with_length) jbuf_printf(h, "Content-Length: %zu\r\n", len);
    if (resp->extra.len) jbuf_put(h, resp->extra.p, resp->extra.len);
    if (resp->cors_origin)
        jbuf_printf(h, "Access-Control-Allow-Origin: %s\r\n%s", resp->cors_origin, resp->cors_llama ? "" : "Vary: Origin\r\n");
    jbuf_puts(h, "Connection: close\r\n\r\n");
}

static void serve_log_request(serve_resp *resp);

int serve_reply(serve_resp *resp, int status, const char *content_type, const void *body, size_t len)
{
    jbuf h;
    int rc;
    if (resp->sent) return -1;
    resp->sent = 1;
    resp->status = status;
    if (resp->capture) {
        jbuf_put(resp->capture, body, len);
        return resp->capture->oom ? -1 : 0;
    }
    if (status >= 400 && !resp->head_only) serve_note_reason(resp, body, len);
    serve_log_request(resp);   /* before the bytes: a client's next request is logged after this one */
    jbuf_init(&h);
    put_head(resp, &h, status, content_type, 1, len);
    if (h.oom) { jbuf_free(&h); resp->failed = 1; return -1; }
    rc = resp_write(resp, h.p, h.len, 0, len > 0 && !resp->head_only);
    if (rc == 0 && len > 0 && !resp->head_only) rc = resp_write(resp, body, len, 0, 0);
    jbuf_free(&h);
    return rc;
}

int serve_reply_text(serve_resp *resp, int status, const char *text)
{
    return serve_reply(resp, status, SERVE_TEXT, text, strlen(text));
}

int serve_reply_json(serve_resp *resp, int status, const jbuf *body)
{
    if (body->oom) return serve_reply_error(resp, 500, NULL, "out of memory writing the answer", NULL);
    return serve_reply(resp, status, SERVE_JSON, body->p ? body->p : "", body->len);
}

const char *serve_error_type(int code)
{
    switch (code) {
    case 400: return "invalid_request_error";
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 501: return "not_supported_error";
    case 503: return "unavailable_error";
    }
    return "server_error";
}

void serve_error_json(jbuf *out, int code, const char *type, const char *message, const char *extra)
{
    jbuf_printf(out, "{\"error\":{\"code\":%d,\"message\":", code);
    json_put_cstr(out, message ? message : "");
    jbuf_puts(out, ",\"type\":");
    json_put_cstr(out, type ? type : serve_error_type(code));
    if (extra && *extra) {
        jbuf_putc(out, ',');
        jbuf_puts(out, extra);
    }
    jbuf_puts(out, "}}");
}

int serve_reply_error(serve_resp *resp, int code, const char *type, const char *message, const char *extra)
{
    jbuf b;
    int rc;
    jbuf_init(&b);
    serve_error_json(&b, code, type, message, extra);
    if (b.oom) rc = serve_reply_text(resp, 500, "out of memory");
    else rc = serve_reply(resp, code, SERVE_JSON, b.p, b.len);
    jbuf_free(&b);
    return rc;
}

int serve_stream_begin(serve_resp *resp, int status, const char *content_type)
{
    jbuf h;
    int rc;
    if (resp->sent) return -1;
    resp->sent = 1;
    resp->status = status;
    if (resp->capture) {   /* serve_call takes whole answers only */
        resp->failed = 1;
        return -1;
    }
    resp->streaming = 1;
    /* The kernel's share of a lagging reader's bytes fixed too (Linux lets a
     * loopback socket's buffer grow to 4 MiB unasked): twice this there (the
     * kernel doubles it), the bound here, then the reader is cut. */
    int sb = resp->stream_bound < SERVE_STREAM_SNDBUF ? (int)resp->stream_bound : (int)SERVE_STREAM_SNDBUF;
    setsockopt(resp->fd, SOL_SOCKET, SO_SNDBUF, &sb, sizeof sb);
    jbuf_init(&h);
    put_head(resp, &h, status, content_type, 0, 0);
    rc = h.oom ? -1 : resp_write(resp, h.p, h.len, 0, 0);
    jbuf_free(&h);
    if (rc != 0) resp->failed = 1;
    return rc;
}

int serve_stream_write(serve_resp *resp, const void *p, size_t n)
{
    if (!resp->streaming || resp->failed) return -1;
    if (resp->head_only) return -1;    /* HEAD: nothing more to say */
    return resp_write(resp, p, n, resp->stream_bound, 0);
}

int serve_sse_begin(serve_resp *resp)
{
    if (serve_resp_header(resp, "Cache-Control", "no-cache") != 0) return -1;
    return serve_stream_begin(resp, 200, "text/event-stream");
}

/* Frames one record as prefix + data + suffix and sends it in one write,
 * so an event never reaches the client in pieces separated by a stall. */
static int framed(serve_resp *resp, const char *prefix, const char *data, size_t n, const char *suffix)
{
    if (memchr(data, '\n', n) || memchr(data, '\r', n)) return -1;
    jbuf_reset(&resp->scratch);
    jbuf_puts(&resp->scratch, prefix);
    jbuf_put(&resp->scratch, data, n);
    jbuf_puts(&resp->scratch, suffix);
    if (resp->scratch.oom) return -1;
    return serve_stream_write(resp, resp->scratch.p, resp->scratch.len);
}

int serve_sse_event(serve_resp *resp, const char *data, size_t n)
{
    if (n > 9 && !memcmp(data, "{\"error\":", 9)) serve_note_reason(resp, data, n);
    return framed(resp, "data: ", data, n, "\n\n");
}

int serve_ndjson_begin(serve_resp *resp)
{
    return serve_stream_begin(resp, 200, "application/x-ndjson");
}

int serve_ndjson_line(serve_resp *resp, const char *json, size_t n)
{
    if (n > 9 && !memcmp(json, "{\"error\":", 9)) serve_note_reason(resp, json, n);
    return framed(resp, "", json, n, "\n");
}

// --------------------------------------------------------------------------
// requests: parameters, client gone

const char *serve_param(const serve_req *r, const char *name)
{
    size_t i;
    for (i = 0; i < r->n_params; i++)
        if (strcmp(r->param_names[i], name) == 0) return r->param_values[i];
    return NULL;
}

int serve_query_get(const serve_req *r, const char *name, char *out, size_t outlen)
{
    const char *p = r->query;
    size_t nn = strlen(name);
    while (p && *p) {
        const char *amp = strchr(p, '&');
        size_t n = amp ? (size_t)(amp - p) : strlen(p);
        const char *eq = memchr(p, '=', n);
        size_t kn = eq ? (size_t)(eq - p) : n;
        char key[256];
        if (kn < sizeof key && pct_decode(p, kn, key, 1) == 0 && strlen(key) == nn && memcmp(key, name, nn) == 0) {
            size_t vn = eq ? n - kn - 1 : 0;
            if (vn + 1 > outlen) return -1;
            if (pct_decode(eq ? eq + 1 : "", vn, out, 1) != 0) return -1;
            return 1;
        }
        p = amp ? amp + 1 : NULL;
    }
    return 0;
}

int64_t serve_req_age_ms(const serve_req *r)
{
    return (bk_mono_ns() - r->t_arrival_ns) / 1000000;
}

typedef struct conn conn;

struct conn {
    serve_server *srv;
    int fd;
    int slot;               /* index in srv->slots */
    int listener;
    int reserve;            /* admitted past max_conns: SERVE_ALWAYS routes at once, the rest wait for room */
    char peer[64];
    serve_resp resp;
    serve_req req;
};

/* What the server knows of each open connection (under srv->mu). */
typedef struct {
    int fd;                 /* -1: free */
    int state;              /* CS_* */
    int shed;               /* chosen to be shed: its reads were shut down */
    int64_t since_ns;       /* when it entered its state */
    char ip[48];            /* the peer's address without its port */
} conn_slot;

enum { CS_HEAD, CS_BODY, CS_WORK };

int serve_client_gone(serve_req *r)
{
    conn *c = r->conn_;
    char junk[4096];
    int rounds;
    if (!c) return 0;
    if (c->resp.failed) return 1;
    /* Bytes after the request (pipelined requests we never answer) would
     * hide an EOF behind them; they are read and dropped here. */
    for (rounds = 0; rounds < 16; rounds++) {
        ssize_t got = recv(c->fd, junk, sizeof junk, MSG_DONTWAIT);
        if (got == 0) return 1;
        if (got > 0) continue;
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
        return 1;   /* ECONNRESET and the like */
    }
    return 0;
}

// --------------------------------------------------------------------------
// routing

typedef struct {
    char method[16];
    char *pattern;
    serve_handler fn;
    void *ud;
    unsigned flags;
} route;

struct serve_server {
    serve_opts o;
    char *api_keys, *origins;
    int lfd[SERVE_MAX_LISTENERS];
    int lport[SERVE_MAX_LISTENERS];
    int n_listeners;
    route routes[MAX_ROUTES];
    int n_routes;
    serve_handler not_found;
    void *not_found_ud;
    int wake[2];
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int n_conns;            /* open connections, regular and reserve */
    int n_regular;          /* of them, those holding one of the max_conns places */
    int n_slots;            /* max_conns + SERVE_RESERVE */
    conn_slot *slots;
    int stopping;
};

int serve_route(serve_server *s, const char *method, const char *pattern,
                serve_handler fn, void *ud, unsigned flags)
{
    route *r;
    if (s->n_routes == MAX_ROUTES || !pattern || pattern[0] != '/' || strlen(method) >= sizeof r->method || !fn)
        return -1;
    r = &s->routes[s->n_routes];
    r->pattern = strdup(pattern);
    if (!r->pattern) return -1;
    strcpy(r->method, method);
    r->fn = fn;
    r->ud = ud;
    r->flags = flags;
    s->n_routes++;
    return 0;
}

void serve_set_not_found(serve_server *s, serve_handler fn, void *ud)
{
    s->not_found = fn;
    s->not_found_ud = ud;
}

/* Matches path against pattern, filling r's parameters (copied into
 * r->param_buf_, which holds at most two copies of the path). */
static int match_route(const char *pat, const char *path, serve_req *r)
{
    size_t used = 0;
    r->n_params = 0;
    while (*pat) {
        if (pat[0] == '*' && pat[1] == 0) {
            size_t n = strlen(path);
            if (r->n_params == 8 || used + n + 3 > sizeof r->param_buf_) return 0;
            r->param_names[r->n_params] = "*";
            memcpy(r->param_buf_ + used, path, n + 1);
            r->param_values[r->n_params++] = r->param_buf_ + used;
            used += n + 1;
            return 1;
        }
        if (*pat == ':') {
            const char *ne = pat + 1, *ve = path;
            size_t nn, vn;
            while (*ne && *ne != '/') ne++;
            while (*ve && *ve != '/') ve++;
            nn = (size_t)(ne - pat - 1);
            vn = (size_t)(ve - path);
            if (vn == 0 || r->n_params == 8 || used + nn + vn + 2 > sizeof r->param_buf_) return 0;
            memcpy(r->param_buf_ + used, pat + 1, nn);
            r->param_buf_[used + nn] = 0;
            r->param_names[r->n_params] = r->param_buf_ + used;
            used += nn + 1;
            memcpy(r->param_buf_ + used, path, vn);
            r->param_buf_[used + vn] = 0;
            r->param_values[r->n_params++] = r->param_buf_ + used;
            used += vn + 1;
            pat = ne;
            path = ve;
            continue;
        }
        if (*pat != *path) return 0;
        pat++;
        path++;
    }
    return *path == 0;
}

/* The route for this method and path (HEAD looks for GET), or NULL. */
static const route *find_route(const serve_server *s, const char *method, serve_req *r)
{
    int i;
    const char *m = strcmp(method, "HEAD") == 0 ? "GET" : method;
    for (i = 0; i < s->n_routes; i++)
        if (strcmp(s->routes[i].method, m) == 0 && match_route(s->routes[i].pattern, r->path, r))
            return &s->routes[i];
    r->n_params = 0;
    return NULL;
}

int serve_route_at(const serve_server *s, int i, const char **method, const char **pattern)
{
    if (i < 0 || i >= s->n_routes) return 0;
    *method = s->routes[i].method;
    *pattern = s->routes[i].pattern;
    return 1;
}

int serve_call(serve_server *s, serve_req *parent, const char *method, const char *path, const char *body,
               size_t len, int *status, jbuf *out)
{
    serve_req *r = malloc(sizeof *r);
    serve_resp *resp = calloc(1, sizeof *resp);
    char *copy = malloc(len + 1);
    int rc = -1;
    if (!r || !resp || !copy || strlen(path) >= sizeof r->path_buf_) goto done;
    *r = *parent;
    memcpy(r->path_buf_, path, strlen(path) + 1);
    r->method = method;
    r->path = r->target = r->path_buf_;
    r->query = "";
    memcpy(copy, body, len);
    copy[len] = 0;
    r->body = copy;
    r->body_len = len;
    const route *rt = find_route(s, method, r);
    if (!rt) goto done;
    resp->fd = -1;
    resp->capture = out;
    rt->fn(r, resp, rt->ud);
    *status = resp->status;
    rc = !resp->sent ? -1 : resp->failed ? 1 : 0;
    jbuf_free(&resp->extra);
    jbuf_free(&resp->scratch);
done:
    free(copy);
    free(resp);
    free(r);
    return rc;
}

/* A public route (no key needed) for any method on this path. */
static int path_is_public(const serve_server *s, serve_req *r)
{
    int i, pub = 0;
    for (i = 0; i < s->n_routes && !pub; i++)
        if ((s->routes[i].flags & SERVE_PUBLIC) && match_route(s->routes[i].pattern, r->path, r)) pub = 1;
    r->n_params = 0;
    return pub;
}

// --------------------------------------------------------------------------
// connections

static void format_peer(const struct sockaddr_storage *ss, char *out, size_t n)
{
    char host[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
        inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
        port = ntohs(a->sin_port);
        snprintf(out, n, "%s:%d", host, port);
    } else if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
        inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
        port = ntohs(a->sin6_port);
        snprintf(out, n, "[%s]:%d", host, port);
    } else {
        snprintf(out, n, "?");
    }
}

/* llama-server's CORS applies: no --allow-origin, and not Ollama's /api/. */
static int cors_is_llama(const serve_server *s, const serve_req *r)
{
    return !s->origins && strncmp(r->path, "/api/", 5) != 0 && strcmp(r->path, "/api") != 0;
}

static int is_api_path(const serve_req *r)
{
    return strncmp(r->path, "/api/", 5) == 0 || strcmp(r->path, "/api") == 0;
}

int serve_ollama_origin_ok(const char *allow_list, const char *origin)
{
    /* OLLAMA_ORIGINS' defaults, after what the list adds (envconfig.AllowedOrigins), matched as gin-contrib/cors
     * does with AllowWildcard: exactly, or a "prefix*" rule by prefix */
    static const char *const exact[] = {"http://localhost", "https://localhost", "http://127.0.0.1",
                                        "https://127.0.0.1", "http://0.0.0.0", "https://0.0.0.0"};
    static const char *const prefix[] = {"http://localhost:", "https://localhost:", "http://127.0.0.1:",
                                         "https://127.0.0.1:", "http://0.0.0.0:", "https://0.0.0.0:",
                                         "app://", "file://", "tauri://", "vscode-webview://", "vscode-file://"};
    size_t i;
    if (!origin || !*origin) return 0;
    if (origin_allowed(allow_list, origin)) return 1;
    for (i = 0; i < sizeof exact / sizeof exact[0]; i++)
        if (strcmp(origin, exact[i]) == 0) return 1;
    for (i = 0; i < sizeof prefix / sizeof prefix[0]; i++)
        if (strncmp(origin, prefix[i], strlen(prefix[i])) == 0) return 1;
    return 0;
}

/* gin-contrib/cors's same-origin test: the Origin is http:// or https://
 * followed by the Host header exactly. */
static int same_origin(const serve_req *r, const char *origin)
{
    const char *host = serve_header_get(r, "Host");
    if (!host) return 0;
    if (strncmp(origin, "http://", 7) == 0) return strcmp(origin + 7, host) == 0;
    if (strncmp(origin, "https://", 8) == 0) return strcmp(origin + 8, host) == 0;
    return 0;
}

/* Whether a request's Origin may use this route when it is not llama-server's: on Ollama's /api/ as Ollama
 * decides (serve_ollama_origin_ok, or the same origin), elsewhere the --allow-origin list. */
static int origin_ok(const serve_server *s, const serve_req *r, const char *origin)
{
    if (is_api_path(r)) return same_origin(r, origin) || serve_ollama_origin_ok(s->origins, origin);
    return origin_allowed(s->origins, origin);
}

static const char *origin_is_localhost_hdr(const char *origin)
{
    return origin && *origin && origin_is_localhost(origin) ? origin : NULL;
}

static void answer_preflight(serve_server *s, conn *c)
{
    serve_req *r = &c->req;
    serve_resp *resp = &c->resp;
    if (resp->cors_llama) {   /* llama-server: every OPTIONS is 200, blank, with its three headers */
        serve_resp_header(resp, "Access-Control-Allow-Credentials", s->o.cors_no_credentials ? "false" : "true");
        serve_resp_header(resp, "Access-Control-Allow-Methods", s->o.cors_methods);
        serve_resp_header(resp, "Access-Control-Allow-Headers", s->o.cors_headers);
        serve_reply(resp, 200, "text/html", "", 0);
        return;
    }
    const char *origin = serve_header_get(r, "Origin");
    const char *want_headers = serve_header_get(r, "Access-Control-Request-Headers");
    if (!origin) {
        /* Not a browser's preflight: say what the server speaks. */
        serve_resp_header(resp, "Allow", "GET, HEAD, POST, DELETE, OPTIONS");
        serve_reply(resp, 204, NULL, "", 0);
        return;
    }
    if (!origin_ok(s, r, origin)) {
        serve_reply_text(resp, 403, "bankml serve: this origin is not allowed (start bankml serve with --allow-origin ORIGIN)");
        return;
    }
    serve_resp_header(resp, "Access-Control-Allow-Methods", "GET, HEAD, POST, DELETE, OPTIONS");
    serve_resp_header(resp, "Access-Control-Allow-Headers",
                      want_headers && *want_headers ? want_headers : "Authorization, Content-Type, X-Api-Key");
    /* Chrome's Private Network Access: a public page (the Space) calling a
     * loopback server must be granted it in the preflight. */
    serve_resp_header(resp, "Access-Control-Allow-Private-Network", "true");
    serve_resp_header(resp, "Access-Control-Max-Age", "600");
    serve_reply(resp, 204, NULL, "", 0);
}

static void default_not_found(serve_req *req, serve_resp *resp, void *ud)
{
    (void)req;
    (void)ud;
    serve_reply(resp, 404, SERVE_JSON, SERVE_BODY_404, strlen(SERVE_BODY_404));
}

/* The wait for one read: the idle allowance, cut to what is left before
 * the deadline (at least 1 ms, so a passed deadline reads as a timeout). */
static int wait_ms(int idle_ms, int64_t deadline)
{
    int64_t left = (deadline - bk_mono_ns() + 999999) / 1000000;   /* rounded up: a timeout is past it */
    if (left < 1) left = 1;
    return left < idle_ms ? (int)left : idle_ms;
}

int serve_pick_shed(const serve_conn_info *c, size_t n, const char *ip, int per_peer, int full, int64_t now_ns)
{
    size_t i;
    int mine = 0;
    long best_mine = -1, best_any = -1;
    int64_t min_age = (int64_t)SERVE_SHED_MIN_MS * 1000000;
    for (i = 0; i < n; i++) {
        int same;
        if (!c[i].idle || c[i].shed) continue;
        same = ip && c[i].ip && strcmp(c[i].ip, ip) == 0;
        mine += same;
        if (now_ns - c[i].since_ns < min_age) continue;
        if (same && (best_mine < 0 || c[i].since_ns < c[best_mine].since_ns)) best_mine = (long)i;
        if (best_any < 0 || c[i].since_ns < c[best_any].since_ns) best_any = (long)i;
    }
    if (per_peer > 0 && mine >= per_peer && best_mine >= 0) return (int)best_mine;
    return full ? (int)best_any : -1;
}

/* Sheds one idle connection if the rule says so, for a newcomer from ip.
 * Its reads are shut down: its thread sees the end of input, answers 503
 * with the reason and closes. Caller holds s->mu. */
static void shed_locked(serve_server *s, const char *ip, int full)
{
    serve_conn_info v[SERVE_MAX_CONNS + SERVE_RESERVE];
    int i, n = s->n_slots < (int)(sizeof v / sizeof v[0]) ? s->n_slots : (int)(sizeof v / sizeof v[0]), k;
    for (i = 0; i < n; i++) {
        v[i].idle = s->slots[i].fd >= 0 && s->slots[i].state != CS_WORK;
        v[i].shed = s->slots[i].shed;
        v[i].since_ns = s->slots[i].since_ns;
        v[i].ip = s->slots[i].ip;
    }
    k = serve_pick_shed(v, (size_t)n, ip, s->o.idle_per_peer, full, bk_mono_ns());
    if (k < 0) return;
    s->slots[k].shed = 1;
    shutdown(s->slots[k].fd, SHUT_RD);
}

/* 1 while a shed connection has not closed yet. Caller holds s->mu. */
static int shed_pending_locked(const serve_server *s)
{
    for (int i = 0; i < s->n_slots; i++)
        if (s->slots[i].fd >= 0 && s->slots[i].shed) return 1;
    return 0;
}

/* Moves a connection to another state (for the shedding rule). */
static void conn_state(conn *c, int state)
{
    serve_server *s = c->srv;
    pthread_mutex_lock(&s->mu);
    s->slots[c->slot].state = state;
    s->slots[c->slot].since_ns = bk_mono_ns();
    pthread_mutex_unlock(&s->mu);
}

/* 1 if this connection was chosen to be shed. */
static int conn_shed(conn *c)
{
    serve_server *s = c->srv;
    int shed;
    pthread_mutex_lock(&s->mu);
    shed = s->slots[c->slot].shed;
    pthread_mutex_unlock(&s->mu);
    return shed;
}

#define MSG_SHED "bankml serve: connection shed: too many connections whose request is still arriving; send the request at once"

/* A reserve connection with a route that may wait: waits for a regular
 * place (as it would have in the accept queue). 0 once it holds one, -1 at
 * a stop. */
static int conn_take_place(conn *c)
{
    serve_server *s = c->srv;
    int rc = 0;
    pthread_mutex_lock(&s->mu);
    while (s->n_regular >= s->o.max_conns && !s->stopping) pthread_cond_wait(&s->cv, &s->mu);
    if (s->stopping) rc = -1;
    else {
        s->n_regular++;
        c->reserve = 0;
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* Reads the head: the first `*len` bytes of c->buf are all that came. A
 * parse is tried only when a line end arrives or the open line is already
 * too long, so a client trickling bytes costs no quadratic work. Returns
 * SERVE_PARSE_OK, SERVE_PARSE_ERROR (status/err set), or -2 when the
 * client went away or timed out (*len says whether anything came). */
static int read_head(serve_server *s, conn *c, char **bufp, size_t *len,
                     size_t *head_len, int *status, char *err, size_t errlen)
{
    int64_t deadline = c->req.t_arrival_ns + (int64_t)s->o.head_timeout_ms * 1000000;
    size_t last_lf_end = 0;     /* bytes up to and including the last '\n' seen */
    size_t cap = 0;
    char *buf = NULL;
    for (;;) {
        ssize_t got;
        const char *lf;
        int rc;
        if (*len == cap) {
            /* Grown on demand: most heads fit the first 8 KiB, and a small
             * buffer costs no mmap/munmap per connection. */
            size_t ncap = cap ? cap * 4 : 8192;
            char *nb;
            if (cap == MAX_HEAD) {
                bk_err(err, errlen, "request head too large");
                *status = 400;
                return SERVE_PARSE_ERROR;
            }
            if (ncap > MAX_HEAD) ncap = MAX_HEAD;
            nb = realloc(buf, ncap + 1);
            if (!nb) {
                bk_err(err, errlen, "out of memory reading the request");
                *status = 500;
                return SERVE_PARSE_ERROR;
            }
            *bufp = buf = nb;
            cap = ncap;
        }
        got = read_some(c->fd, buf + *len, cap - *len, wait_ms(s->o.read_timeout_ms, deadline));
        if (got == -2 && (*len > 0 || bk_mono_ns() >= deadline)) {
            *status = 408;
            if (bk_mono_ns() >= deadline)
                bk_err(err, errlen, "request timed out: the request head did not arrive within %d s",
                       s->o.head_timeout_ms / 1000);
            else
                bk_err(err, errlen, "request timed out");
            return SERVE_PARSE_ERROR;
        }
        if (got <= 0) return -2;
        lf = memrchr(buf + *len, '\n', (size_t)got);
        *len += (size_t)got;
        if (lf) last_lf_end = (size_t)(lf - buf) + 1;
        if (!lf && *len - last_lf_end <= SERVE_MAX_LINE + 1) continue;
        rc = serve_parse_head(buf, *len, &c->req, head_len, status, err, errlen);
        if (rc != SERVE_PARSE_MORE) return rc;
    }
}

/* One connection, start to end: head, gates, body, handler, close. */
/* The request's log line: route, status, the completion's note, the time
 * from its arrival, a refusal's words. Health checks and scrapes at debug
 * level (pollers would bury the rest), refusals at warn, 5xx at error. */
static void serve_log_request(serve_resp *resp)
{
    const serve_req *r = resp->req;
    if (resp->logged || !resp->log_name || !r) return;
    resp->logged = 1;
    char msg[SERVE_MAX_LINE + 300];
    bk_log_kv kv[9];
    size_t n = 0;
    const char *path = r->path ? r->path : "-";
    int quiet = !strcmp(path, "/health") || !strcmp(path, "/v1/health") || !strcmp(path, "/metrics");
    int level = resp->status >= 500 ? BK_LOG_ERROR : resp->status >= 400 ? BK_LOG_WARN
              : quiet ? BK_LOG_DEBUG : BK_LOG_INFO;
    if (!bk_log_on(level)) return;
    snprintf(msg, sizeof msg, "%s: %s %s %d", resp->log_name, r->method ? r->method : "-", path, resp->status);
    kv[n++] = (bk_log_kv){.key = "method", .s = r->method ? r->method : "-", .json_only = 1};
    kv[n++] = (bk_log_kv){.key = "route", .s = path, .json_only = 1};
    kv[n++] = (bk_log_kv){.key = "status", .i = resp->status, .json_only = 1};
    if (resp->noted) {
        kv[n++] = (bk_log_kv){.key = "model", .s = resp->model};
        kv[n++] = (bk_log_kv){.key = "prompt_tokens", .i = (int64_t)resp->n_prompt};
        kv[n++] = (bk_log_kv){.key = "completion_tokens", .i = (int64_t)resp->n_completion};
        kv[n++] = (bk_log_kv){.key = "cache_n", .i = (int64_t)resp->n_cache};
    }
    kv[n++] = (bk_log_kv){.key = "ms", .d = (double)(bk_mono_ns() - r->t_arrival_ns) / 1e6, .is_ms = 1};
    if (resp->reason[0]) kv[n++] = (bk_log_kv){.key = "reason", .s = resp->reason};
    bk_log_event(level, "request", msg, kv, n);
}

static void *conn_main(void *arg)
{
    conn *c = arg;
    serve_server *s = c->srv;
    serve_req *r = &c->req;
    serve_resp *resp = &c->resp;
    char err[256];
    char *buf = NULL, *body = NULL;
    size_t len = 0, head_len = 0, body_len = 0, have;
    int status = 0, rc;
    const route *rt;
    const char *origin;

    r->conn_ = c;
    r->listener = c->listener;
    memcpy(r->peer, c->peer, sizeof r->peer);
    resp->fd = c->fd;
    resp->write_timeout_ms = s->o.write_timeout_ms;
    resp->stream_bound = s->o.stream_buffer;
    resp->log_name = s->o.log_name;
    resp->req = r;
    jbuf_init(&resp->extra);
    jbuf_init(&resp->scratch);
    jbuf_init(&resp->pending);

    r->t_arrival_ns = bk_mono_ns();
    rc = read_head(s, c, &buf, &len, &head_len, &status, err, sizeof err);
    if (rc == -2 && conn_shed(c)) {
        serve_reply_text(resp, 503, MSG_SHED);
        goto out;
    }
    if (rc == -2) goto out;
    if (rc == SERVE_PARSE_ERROR) {
        serve_reply_text(resp, status, err);
        goto out;
    }
    have = len - head_len;

    origin = serve_header_get(r, "Origin");
    if (cors_is_llama(s, r)) {
        /* llama-server's pre-routing rule, on every answer: with credentials and "*" the Origin echoed (empty
         * when there is none), "localhost" reflects a localhost Origin only, anything else is written as given */
        resp->cors_llama = 1;
        if (!s->o.cors_no_credentials && !strcmp(s->o.cors_origins, "*")) resp->cors_origin = origin ? origin : "";
        else if (!strcmp(s->o.cors_origins, "localhost")) resp->cors_origin = origin_is_localhost_hdr(origin);
        else resp->cors_origin = s->o.cors_origins;
    } else if (origin && *origin && origin_ok(s, r, origin) && !(is_api_path(r) && same_origin(r, origin))) {
        resp->cors_origin = origin;
    }
    if (strcmp(r->method, "HEAD") == 0) resp->head_only = 1;

    status = serve_check_head(r, s->o.json_posts_only, s->o.max_body, &body_len, err, sizeof err);
    if (status != 0) {
        /* Read the declared body first (if it is one we would have taken),
         * so the client is not reset before it reads the refusal. */
        size_t declared;
        const char *cl = serve_header_get(r, "Content-Length");
        if (status != 413 && cl && serve_parse_content_length(cl, s->o.max_body, &declared) == 0 && declared > have)
            discard(c->fd, declared - have, s->o.read_timeout_ms);
        serve_reply_text(resp, status, err);
        goto out;
    }

    body = malloc(body_len + 1);
    if (!body) {
        serve_reply_text(resp, 500, "out of memory reading the request body");
        goto out;
    }
    if (have > body_len) have = body_len;   /* pipelined bytes: ignored */
    memcpy(body, buf + head_len, have);
    if (have < body_len) {
        const char *expect = serve_header_get(r, "Expect");
        int64_t deadline = bk_mono_ns() + (int64_t)s->o.body_timeout_ms * 1000000;
        conn_state(c, CS_BODY);
        if (expect && strcasecmp(expect, "100-continue") == 0)
            send_all(c->fd, "HTTP/1.1 100 Continue\r\n\r\n", 25, s->o.write_timeout_ms, 0);
        while (have < body_len) {
            ssize_t got = read_some(c->fd, body + have, body_len - have, wait_ms(s->o.read_timeout_ms, deadline));
            if (got == -2) {
                if (bk_mono_ns() >= deadline)
                    bk_err(err, sizeof err, "request timed out: the body did not arrive within %d s",
                           s->o.body_timeout_ms / 1000);
                else
                    bk_err(err, sizeof err, "request timed out");
                serve_reply_text(resp, 408, err);
                goto out;
            }
            if (got == 0 && conn_shed(c)) { serve_reply_text(resp, 503, MSG_SHED); goto out; }
            if (got <= 0) goto out;
            have += (size_t)got;
        }
    }
    body[body_len] = 0;
    r->body = body;
    r->body_len = body_len;
    conn_state(c, CS_WORK);

    /* Ollama's routes as Ollama guards them from web pages (gin-contrib/cors over OLLAMA_ORIGINS): a request
     * of any method whose Origin is neither allowed nor this server gets 403 -- a page's text/plain POST to
     * /api/create or /api/copy included, which a browser sends without a preflight. */
    if (is_api_path(r) && origin && *origin && !origin_ok(s, r, origin)) {
        serve_reply_text(resp, 403, SERVE_MSG_ORIGIN);
        goto out;
    }
    if (strcmp(r->method, "OPTIONS") == 0) {
        answer_preflight(s, c);
        goto out;
    }
    if (s->api_keys && !path_is_public(s, r) &&
        !serve_api_key_ok(s->api_keys, serve_header_get(r, "Authorization"), serve_header_get(r, "X-Api-Key"))) {
        serve_reply(resp, 401, SERVE_JSON, SERVE_BODY_401, strlen(SERVE_BODY_401));
        goto out;
    }
    rt = find_route(s, r->method, r);
    if (c->reserve && !(rt && (rt->flags & SERVE_ALWAYS)) && conn_take_place(c) != 0) {
        serve_reply_text(resp, 503, "bankml serve: stopping");
        goto out;
    }
    if (rt) rt->fn(r, resp, rt->ud);
    else s->not_found(r, resp, s->not_found_ud);
    if (!resp->sent) serve_reply_error(resp, 500, NULL, "the handler gave no answer", NULL);

out:
    resp_finish(resp);
    if (resp->status) serve_log_request(resp);   /* a stream's, once it ended; a whole answer's went with it */
    free(body);
    free(buf);
    jbuf_free(&resp->extra);
    jbuf_free(&resp->scratch);
    if (!resp->failed) linger_drain(c->fd, __atomic_load_n(&s->stopping, __ATOMIC_RELAXED) ? 50 : LINGER_MS);
    /* Unregistered and closed under the lock, so a stop that cuts
     * connections never shuts down a number the kernel gave someone else. */
    pthread_mutex_lock(&s->mu);
    s->slots[c->slot].fd = -1;
    close(c->fd);
    if (!c->reserve) s->n_regular--;
    if (s->n_conns-- == s->n_slots) {   /* accepting was paused: wake serve_run */
        ssize_t w = write(s->wake[1], "r", 1);
        (void)w;                             /* a full pipe already holds a wake-up */
    }
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    free(c);
    return NULL;
}

// --------------------------------------------------------------------------
// the server

void serve_opts_default(serve_opts *o)
{
    memset(o, 0, sizeof *o);
    o->json_posts_only = 1;
    o->read_timeout_ms = 30000;
    o->head_timeout_ms = 10000;
    o->body_timeout_ms = 60000;
    o->idle_per_peer = SERVE_IDLE_PER_PEER;
    o->write_timeout_ms = 120000;
    o->stream_buffer = SERVE_STREAM_BUFFER;
    o->grace_ms = 5000;
    o->max_conns = SERVE_MAX_CONNS;
    o->max_body = SERVE_MAX_BODY;
}

serve_server *serve_new(const serve_opts *o, char *err, size_t errlen)
{
    serve_server *s = calloc(1, sizeof *s);
    int i;
    if (!s) { bk_err(err, errlen, "out of memory"); return NULL; }
    s->o = *o;
    if (s->o.max_conns <= 0 || s->o.max_conns > SERVE_MAX_CONNS) s->o.max_conns = SERVE_MAX_CONNS;
    if (s->o.read_timeout_ms <= 0) s->o.read_timeout_ms = 30000;
    if (s->o.head_timeout_ms <= 0) s->o.head_timeout_ms = 10000;
    if (s->o.body_timeout_ms <= 0) s->o.body_timeout_ms = 60000;
    if (s->o.idle_per_peer < 0) s->o.idle_per_peer = 0;
    if (s->o.write_timeout_ms <= 0) s->o.write_timeout_ms = 120000;
    if (s->o.grace_ms < 0) s->o.grace_ms = 0;
    if (!s->o.max_body) s->o.max_body = SERVE_MAX_BODY;
    if (!s->o.stream_buffer) s->o.stream_buffer = SERVE_STREAM_BUFFER;
    if (!s->o.cors_origins) s->o.cors_origins = "*";
    if (!s->o.cors_methods) s->o.cors_methods = "GET, POST, DELETE, OPTIONS";
    if (!s->o.cors_headers) s->o.cors_headers = "*";
    s->wake[0] = s->wake[1] = -1;
    s->api_keys = o->api_keys && *o->api_keys ? strdup(o->api_keys) : NULL;
    s->origins = o->allow_origins && *o->allow_origins ? strdup(o->allow_origins) : NULL;
    s->n_slots = s->o.max_conns + SERVE_RESERVE;
    s->slots = calloc((size_t)s->n_slots, sizeof *s->slots);
    if ((o->api_keys && *o->api_keys && !s->api_keys) || (o->allow_origins && *o->allow_origins && !s->origins) ||
        !s->slots) {
        bk_err(err, errlen, "out of memory");
        serve_free(s);
        return NULL;
    }
    for (i = 0; i < s->n_slots; i++) s->slots[i].fd = -1;
    if (pipe2(s->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
        bk_err(err, errlen, "cannot make a pipe: %s", strerror(errno));
        serve_free(s);
        return NULL;
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->not_found = default_not_found;
    return s;
}

void serve_free(serve_server *s)
{
    int i, busy = 0;
    if (!s) return;
    /* Threads cut at a stop that still have not returned hold pointers into
     * s: leave it to the process's exit rather than free it under them. */
    if (s->wake[0] >= 0) {
        pthread_mutex_lock(&s->mu);
        busy = s->n_conns > 0;
        pthread_mutex_unlock(&s->mu);
    }
    if (busy) return;
    for (i = 0; i < s->n_listeners; i++)
        if (s->lfd[i] >= 0) close(s->lfd[i]);
    for (i = 0; i < s->n_routes; i++) free(s->routes[i].pattern);
    if (s->wake[0] >= 0) {
        close(s->wake[0]);
        close(s->wake[1]);
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->cv);
    }
    free(s->api_keys);
    free(s->origins);
    free(s->slots);
    free(s);
}

int serve_parse_hostport(const char *s, char *host, size_t hostlen, int *port, char *err, size_t errlen)
{
    const char *colon, *h = s, *he;
    long p;
    char *end;
    if (!s || !*s) { bk_err(err, errlen, "empty address (want HOST:PORT)"); return -1; }
    if (s[0] == '[') {
        const char *rb = strchr(s, ']');
        if (!rb || rb[1] != ':') { bk_err(err, errlen, "%s: want [IPv6]:PORT", s); return -1; }
        h = s + 1;
        he = rb;
        colon = rb + 1;
    } else {
        colon = strrchr(s, ':');
        if (!colon || memchr(s, ':', (size_t)(colon - s))) { bk_err(err, errlen, "%s: want HOST:PORT", s); return -1; }
        he = colon;
    }
    if (he == h) { bk_err(err, errlen, "%s: no host (want HOST:PORT)", s); return -1; }
    if ((size_t)(he - h) + 1 > hostlen) { bk_err(err, errlen, "%s: host name too long", s); return -1; }
    errno = 0;
    if (colon[1] < '0' || colon[1] > '9') { bk_err(err, errlen, "%s: bad port", s); return -1; }
    p = strtol(colon + 1, &end, 10);
    if (*end || errno || p < 0 || p > 65535) { bk_err(err, errlen, "%s: bad port", s); return -1; }
    memcpy(host, h, (size_t)(he - h));
    host[he - h] = 0;
    *port = (int)p;
    return 0;
}

/* A listening address from a host written as an IP literal or "localhost".
 * No name service: a static binary cannot load glibc's NSS modules, and a
 * server that trusts nothing has no business asking DNS where to listen. */
static int listen_addr(const char *host, int port, struct sockaddr_storage *ss, socklen_t *len)
{
    struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
    memset(ss, 0, sizeof *ss);
    if (strcasecmp(host, "localhost") == 0) host = "127.0.0.1";
    if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)port);
        *len = sizeof *v4;
        return 0;
    }
    if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)port);
        *len = sizeof *v6;
        return 0;
    }
    return -1;
}

int serve_listen(serve_server *s, const char *hostport, char *err, size_t errlen)
{
    char host[256], why[256];
    int port, fd, one = 1;
    struct sockaddr_storage ss;
    socklen_t sl;
    if (s->n_listeners == SERVE_MAX_LISTENERS) { bk_err(err, errlen, "too many listeners"); return -1; }
    if (serve_parse_hostport(hostport, host, sizeof host, &port, why, sizeof why) != 0) {
        bk_err(err, errlen, "cannot listen on %s", why);
        return -1;
    }
    if (listen_addr(host, port, &ss, &sl) != 0) {
        bk_err(err, errlen, "cannot listen on %s: %s is not an IP address or localhost", hostport, host);
        return -1;
    }
    fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) { bk_err(err, errlen, "cannot listen on %s: %s", hostport, strerror(errno)); return -1; }
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (ss.ss_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&ss, sl) != 0 || listen(fd, SERVE_BACKLOG) != 0) {
        bk_err(err, errlen, "cannot listen on %s: %s", hostport, strerror(errno));
        close(fd);
        return -1;
    }
    sl = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
        port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                        : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    s->lfd[s->n_listeners] = fd;
    s->lport[s->n_listeners] = port;
    return s->n_listeners++;
}

int serve_port(const serve_server *s, int listener)
{
    return listener >= 0 && listener < s->n_listeners ? s->lport[listener] : -1;
}

void serve_stop(serve_server *s)
{
    int saved = errno;
    ssize_t rc = write(s->wake[1], "x", 1);
    (void)rc;
    errno = saved;
}

static serve_server *signal_server;

static void on_signal(int sig)
{
    (void)sig;
    if (signal_server) serve_stop(signal_server);
}

int serve_install_signals(serve_server *s)
{
    struct sigaction sa;
    signal_server = s;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    /* SIGHUP too (spec §1: the terminal going away stops the server as SIGTERM does, requests finished) */
    if (sigaction(SIGINT, &sa, NULL) != 0 || sigaction(SIGTERM, &sa, NULL) != 0 || sigaction(SIGHUP, &sa, NULL) != 0)
        return -1;
    sa.sa_handler = SIG_IGN;
    return sigaction(SIGPIPE, &sa, NULL);
}

/* Starts a thread that owns fd (a connection or a refusal). 0, or -1 when
 * no thread could be made (the caller closes fd). */
static int spawn(void *(*fn)(void *), void *arg)
{
    pthread_t t;
    pthread_attr_t at;
    int rc;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&at, 1u << 20);
    rc = pthread_create(&t, &at, fn, arg);
    pthread_attr_destroy(&at);
    return rc == 0 ? 0 : -1;
}

/* "127.0.0.1:5000" -> "127.0.0.1", "[::1]:5000" -> "[::1]". */
static void peer_ip(const char *peer, char *out, size_t n)
{
    const char *colon = strrchr(peer, ':');
    size_t k = colon ? (size_t)(colon - peer) : strlen(peer);
    snprintf(out, n, "%.*s", (int)k, peer);
}

/* One accepted socket gets a connection thread (serve_run accepts only
 * while fewer than max_conns are open); with no thread to be had, a plain
 * close. */
static void admit(serve_server *s, int fd, int listener, const struct sockaddr_storage *ss)
{
    int one = 1, slot;
    conn *c;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);   /* an SSE event goes out at once */
    pthread_mutex_lock(&s->mu);
    if (s->n_conns >= s->n_slots) {   /* not reached: serve_run checks first */
        pthread_mutex_unlock(&s->mu);
        close(fd);
        return;
    }
    for (slot = 0; s->slots[slot].fd >= 0; slot++) {}
    c = calloc(1, sizeof *c);
    if (!c) { pthread_mutex_unlock(&s->mu); close(fd); return; }
    c->srv = s;
    c->fd = fd;
    c->slot = slot;
    c->listener = listener;
    c->reserve = s->n_regular >= s->o.max_conns;
    format_peer(ss, c->peer, sizeof c->peer);
    peer_ip(c->peer, s->slots[slot].ip, sizeof s->slots[slot].ip);
    shed_locked(s, s->slots[slot].ip, c->reserve);
    s->slots[slot].fd = fd;
    s->slots[slot].state = CS_HEAD;
    s->slots[slot].shed = 0;
    s->slots[slot].since_ns = bk_mono_ns();
    s->n_conns++;
    if (!c->reserve) s->n_regular++;
    if (spawn(conn_main, c) != 0) {
        s->slots[slot].fd = -1;
        s->n_conns--;
        if (!c->reserve) s->n_regular--;
        pthread_mutex_unlock(&s->mu);
        free(c);
        close(fd);
        return;
    }
    pthread_mutex_unlock(&s->mu);
}

/* Waits until every connection thread is done, at most ms.
 * Returns 1 if they all are. Caller holds s->mu. */
static int wait_idle(serve_server *s, int ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000;
    if (ts.tv_nsec >= 1000000000) { ts.tv_sec++; ts.tv_nsec -= 1000000000; }
    while (s->n_conns > 0)
        if (pthread_cond_timedwait(&s->cv, &s->mu, &ts) != 0) break;
    return s->n_conns == 0;
}

int serve_run(serve_server *s)
{
    struct pollfd p[SERVE_MAX_LISTENERS + 1];
    int i, n = s->n_listeners;
    if (n == 0) return -1;
    for (i = 0; i < n; i++) {
        p[i].fd = s->lfd[i];
        p[i].events = POLLIN;
    }
    p[n].fd = s->wake[0];
    p[n].events = POLLIN;
    for (;;) {
        int rc, full, stop = 0;
        /* Full: poll the wake pipe only, so waiting clients stay queued in
         * the kernel until a connection closes (it writes "r"). */
        pthread_mutex_lock(&s->mu);
        full = s->n_conns >= s->n_slots;
        /* Every place taken: the oldest idle connection makes room (one at
         * a time), so clients that never finish a request cannot keep the
         * rest in the queue; looked at again every SHED_POLL_MS. */
        if (full && !shed_pending_locked(s)) shed_locked(s, NULL, 1);
        pthread_mutex_unlock(&s->mu);
        for (i = 0; i <= n; i++) p[i].revents = 0;
        for (i = 0; i < n; i++) p[i].fd = full ? -1 : s->lfd[i];
        rc = poll(p, (nfds_t)n + 1, full ? SHED_POLL_MS : -1);
        if (rc < 0) {
            if (errno == EINTR) continue;
            break;
        }
        if (p[n].revents) {   /* "x": serve_stop; "r": room again */
            char b[64];
            ssize_t got;
            while ((got = read(s->wake[0], b, sizeof b)) > 0)
                if (memchr(b, 'x', (size_t)got)) stop = 1;
            if (stop) break;
        }
        for (i = 0; i < n; i++) {
            struct sockaddr_storage ss;
            socklen_t sl = sizeof ss;
            int fd;
            if (!(p[i].revents & POLLIN)) continue;
            pthread_mutex_lock(&s->mu);
            full = s->n_conns >= s->n_slots;
            pthread_mutex_unlock(&s->mu);
            if (full) break;
            fd = accept4(s->lfd[i], (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC);
            if (fd < 0) {
                /* Out of descriptors: back off a moment instead of spinning. */
                if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) usleep(10000);
                continue;
            }
            admit(s, fd, i, &ss);
        }
    }
    /* Stop: no new connections; in-flight requests get grace_ms, then their
     * sockets are shut down so reads, writes and serve_client_gone() tell
     * their handlers to stop. */
    for (i = 0; i < n; i++) {
        close(s->lfd[i]);
        s->lfd[i] = -1;
    }
    pthread_mutex_lock(&s->mu);
    __atomic_store_n(&s->stopping, 1, __ATOMIC_RELAXED);
    pthread_cond_broadcast(&s->cv);   /* reserve connections waiting for a place give up */
    if (!wait_idle(s, s->o.grace_ms)) {
        for (i = 0; i < s->n_slots; i++)
            if (s->slots[i].fd >= 0) shutdown(s->slots[i].fd, SHUT_RDWR);
        wait_idle(s, 30000);
    }
    pthread_mutex_unlock(&s->mu);
    return 0;
}
