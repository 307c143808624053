/*
 * serve.h -- the HTTP/1.1 transport of `bankml serve`: sockets, framing,
 * the loopback/API-key/CORS gates and a method+path router. No model logic:
 * handlers registered here (api/llama.c, api/status.c, api/ollama.c) own what a route means.
 *
 * One request per connection; every answer carries `Connection: close`, and
 * a Content-Length unless it is a stream (then the body ends when the socket
 * closes). Each connection runs on its own thread. No set of clients can
 * hold the server: a head must arrive whole within head_timeout_ms of the
 * accept and a body within body_timeout_ms of its head (else 408); one
 * address keeps at most idle_per_peer connections whose request is still
 * arriving (past that its oldest one idle for SERVE_SHED_MIN_MS is shed:
 * 503 with the reason); when max_conns are open, SERVE_RESERVE more are
 * taken, each sheds the oldest idle connection, and answers a SERVE_ALWAYS
 * route (/health, /metrics) at once, any other once a place is free. Past
 * those, connections wait in the kernel's accept queue.
 *
 * Checks, in order, before any handler runs (refusals are text/plain; the
 * declared body, if <= 16 MiB, is read and discarded first so the client
 * gets its answer rather than a TCP reset):
 *   1. request line > 16 KiB            -> 400 "request line too long"
 *      header line > 16 KiB or > 100 lines -> 400 "request head too large"
 *      malformed line, NUL byte, bad version -> 400 (reason in the body)
 *   2. Host not 127.0.0.1 / localhost / [::1] (any port, any case; exactly
 *      one Host header)                 -> 403 (SERVE_MSG_HOST)
 *   3. any Transfer-Encoding            -> 400 (SERVE_MSG_CHUNKED)
 *   4. Content-Length > max_body        -> 413 "request too large" (an
 *      empty body past SERVE_LLAMA_MAX_BODY, as llama-server answers there);
 *      unparsable or conflicting Content-Length -> 400 "bad Content-Length"
 *   5. POST not Content-Type application/json (option json_posts_only)
 *                                       -> 415
 *   6. Ollama's /api/ routes: an Origin that is not this server and not
 *      allowed (serve_ollama_origin_ok) -> 403 (SERVE_MSG_ORIGIN), any method
 *   6b. OPTIONS: a CORS preflight (allowed origin -> 204, else 403)
 *   7. API key (when set), except on routes registered SERVE_PUBLIC
 *                                       -> 401 llama-server's exact body
 *   8. routing; no route for this method and path -> 404 llama-server's body
 *      (cpp-httplib answers a known path with a wrong method 404 too).
 */
#ifndef BANKML_SERVE_H
#define BANKML_SERVE_H

#include <stddef.h>
#include <stdint.h>

#include "base/json.h"

/* Fixed limits of §2.1. */
#define SERVE_MAX_LINE      (16u * 1024u)          /* request line, each header line */
#define SERVE_MAX_HEADERS   100
#define SERVE_MAX_BODY      ((size_t)16 * 1024 * 1024)
#define SERVE_LLAMA_MAX_BODY ((size_t)100 * 1024 * 1024)  /* cpp-httplib's payload limit in llama-server */
#define SERVE_MAX_CONNS     128                    /* connections that may run any route at once */
#define SERVE_RESERVE       8     /* more, taken when those are all open: SERVE_ALWAYS routes at once */
#define SERVE_IDLE_PER_PEER 16    /* idle connections (head or body still arriving) one address may keep */
#define SERVE_SHED_MIN_MS   1000  /* an idle connection younger than this is never shed */
#define SERVE_STREAM_BUFFER ((size_t)4 * 1024 * 1024)  /* a stream's bytes kept for a reader that lags */
#define SERVE_STREAM_SNDBUF (512u * 1024u)             /* a stream socket's SO_SNDBUF (at most the bound) */
#define SERVE_MAX_LISTENERS 4

#define SERVE_MSG_HOST "bankml serve answers loopback clients only (Host must be 127.0.0.1, localhost or [::1])"
#define SERVE_MSG_CHUNKED "chunked requests are not accepted; send Content-Length"
#define SERVE_MSG_TOO_MANY "bankml serve: too many connections"
#define SERVE_MSG_JSON_ONLY "POST bodies must be Content-Type: application/json"
#define SERVE_MSG_ORIGIN "bankml serve: Ollama's /api/ routes refuse requests from this web origin, as Ollama does " \
    "(allowed: localhost, 127.0.0.1 and 0.0.0.0 on any port over http or https, app://, file://, tauri://, " \
    "vscode-webview://, vscode-file://, this server itself, and each --allow-origin ORIGIN)"

/* llama-server's content type for every JSON answer. */
#define SERVE_JSON "application/json; charset=utf-8"
#define SERVE_TEXT "text/plain; charset=utf-8"

/* llama-server's exact bodies (key order and compact form as it prints them). */
#define SERVE_BODY_401 "{\"error\":{\"message\":\"Invalid API Key\",\"type\":\"authentication_error\",\"code\":401}}"
#define SERVE_BODY_404 "{\"error\":{\"message\":\"File Not Found\",\"type\":\"not_found_error\",\"code\":404}}"

typedef struct {
    const char *name;   /* as sent, NUL-terminated, without surrounding space */
    const char *value;  /* NUL-terminated, leading/trailing space and tab removed */
} serve_header;

/* One parsed request. Every string points into the connection's buffer and
 * lives until the handler returns. */
typedef struct serve_req {
    const char *method;        /* "GET", "POST", ... (case as sent; methods are case-sensitive) */
    const char *target;        /* the request target as sent: "/slots/0?action=save" */
    const char *path;          /* target before '?', percent-decoded */
    const char *query;         /* after '?', raw ("" when none) */
    int http_minor;            /* 1 for HTTP/1.1, 0 for HTTP/1.0 */
    serve_header headers[SERVE_MAX_HEADERS];
    size_t n_headers;
    const char *body;          /* NUL-terminated too (body[body_len] == 0) */
    size_t body_len;
    char peer[64];             /* "127.0.0.1:54321", "[::1]:54321" */
    int listener;              /* index returned by serve_listen() for the socket it came in on */
    int64_t t_arrival_ns;      /* CLOCK_MONOTONIC when the first byte was read */
    /* path parameters of the matched route (":name" segments, "*" tail) */
    const char *param_names[8];
    const char *param_values[8];
    size_t n_params;
    void *conn_;               /* private */
    char path_buf_[SERVE_MAX_LINE + 1];          /* private: path's storage */
    char param_buf_[2 * SERVE_MAX_LINE + 64];    /* private: parameters' storage */
} serve_req;

typedef struct serve_resp serve_resp;   /* private; one per request */

/* A handler answers with exactly one of serve_reply*() or serve_stream_begin().
 * Return value of the helpers: 0 on success, -1 when the client is gone (or
 * the answer was already sent). A handler that answers nothing gets a 500. */
typedef void (*serve_handler)(serve_req *req, serve_resp *resp, void *ud);

/* What a completion did, for the request's log line: the model's name and
 * the tokens (prompt, generated, reused from the cache); several calls (a
 * request's several prompts) add up. */
void serve_resp_note(serve_resp *resp, const char *model, size_t prompt, size_t completion, size_t cache_n);

typedef struct {
    const char *api_keys;      /* NULL or "" = none; else comma-separated keys (llama-server --api-key) */
    const char *allow_origins; /* bankML's --allow-origin: NULL = llama-server's CORS below (Ollama's /api/
                                  routes: none); else comma-separated exact origins for every route */
    /* llama-server's CORS (--cors-origins, --cors-methods, --cors-headers,
     * --no-cors-credentials), for every route but /api/ when allow_origins
     * is NULL; NULL strings: b11669's defaults ("*", "GET, POST, DELETE,
     * OPTIONS", "*"). Kept as pointers: they must outlive the server. */
    const char *cors_origins, *cors_methods, *cors_headers;
    int cors_no_credentials;
    int json_posts_only;       /* 1: check 5 (415) on; default 1 as §2.1 */
    int read_timeout_ms;       /* idle time allowed between received bytes; default 30000 */
    int head_timeout_ms;       /* a whole request head, from the accept; default 10000 */
    int body_timeout_ms;       /* a whole body, from the end of its head; default 60000 */
    int idle_per_peer;         /* default SERVE_IDLE_PER_PEER */
    int write_timeout_ms;      /* time allowed for the socket to take more bytes, once the handler has
                                  returned (a handler's writes never wait); default 120000 */
    size_t stream_buffer;      /* a stream's bytes waiting for a slow reader, at most; default SERVE_STREAM_BUFFER */
    int grace_ms;              /* on stop: wait this long for in-flight requests, then cut them; default 5000 */
    int max_conns;             /* default SERVE_MAX_CONNS */
    size_t max_body;           /* default SERVE_MAX_BODY */
    const char *log_name;      /* one log line per request (base/log.h), "<log_name>: METHOD PATH STATUS ...";
                                  NULL (the default): none */
} serve_opts;

typedef struct serve_server serve_server;

/* Ollama's origin rule for its /api/ routes (OLLAMA_ORIGINS' defaults as
 * gin-contrib/cors matches them): 1 if origin is in allow_list (bankML's
 * --allow-origin, comma-separated exact origins, may be NULL) or is
 * http(s)://localhost, 127.0.0.1 or 0.0.0.0 with or without ":..." after,
 * or starts app://, file://, tauri://, vscode-webview://, vscode-file://. */
int serve_ollama_origin_ok(const char *allow_list, const char *origin);

/* llama-server's origin_is_localhost (its URL parser's host is localhost,
 * 127.0.0.1 or ::1): --cors-origins localhost reflects such an Origin. */
int serve_origin_is_localhost(const char *origin);

#define SERVE_PUBLIC 1u        /* route flag: no API key needed (llama-server: /health, /v1/health, /) */
#define SERVE_ALWAYS 2u        /* route flag: answered on a reserve connection while max_conns are busy
                                  (/health, /v1/health, /metrics: a handler that never waits) */

/* One open connection as the shedding rule sees it. */
typedef struct {
    int idle;                  /* its head or body is still arriving */
    int shed;                  /* already being shed */
    int64_t since_ns;          /* when it became idle (CLOCK_MONOTONIC) */
    const char *ip;            /* its peer's address, without the port */
} serve_conn_info;

/* The connection to shed when one more arrives from `ip`: an idle one, not
 * already shed, idle for SERVE_SHED_MIN_MS or more, the oldest of `ip`'s
 * when `ip` already keeps per_peer idle connections (counting the young),
 * else, when full (every regular place taken), the oldest of anyone's.
 * Its index, or -1 for none. */
int serve_pick_shed(const serve_conn_info *c, size_t n, const char *ip, int per_peer, int full, int64_t now_ns);

void serve_opts_default(serve_opts *o);

/* A server with no listener yet. Copies what it needs from o. NULL with a
 * reason in err (out of memory, a pipe that cannot be made). */
serve_server *serve_new(const serve_opts *o, char *err, size_t errlen);
/* Closes everything; call only after serve_run() returned (or never ran).
 * If a cut handler thread is still running it does nothing (the process is
 * about to exit; freeing under that thread would be worse than the leak). */
void serve_free(serve_server *s);

/* Splits "H:P" / "[v6]:P" into host and port (0..65535). 0, or -1 with a
 * reason in err. */
int serve_parse_hostport(const char *s, char *host, size_t hostlen, int *port, char *err, size_t errlen);

/* Binds and listens on "H:P" (port 0 = the kernel's pick). Returns the
 * listener's index (req->listener), or -1 with e.g. "cannot listen on
 * 127.0.0.1:8080: Address already in use" in err. Every listener serves the
 * same routes. */
int serve_listen(serve_server *s, const char *hostport, char *err, size_t errlen);
/* The port a listener is bound to (useful after port 0). */
int serve_port(const serve_server *s, int listener);

/* Registers a handler. method: "GET", "POST", "DELETE", ... (a GET route
 * also answers HEAD, with the body left out). pattern: "/exact/path",
 * with ":name" for one path segment ("/slots/:id") and a final "*" for any
 * tail (the pattern "/api/" then a star). First registered match wins. 0, or -1 if the table is
 * full or the pattern does not start with '/'. */
int serve_route(serve_server *s, const char *method, const char *pattern,
                serve_handler fn, void *ud, unsigned flags);
/* Replaces the answer to "no route" (default: 404 with SERVE_BODY_404). */
void serve_set_not_found(serve_server *s, serve_handler fn, void *ud);

/* The i-th registered route (registration order): its method and pattern.
 * 1, or 0 past the last one. */
int serve_route_at(const serve_server *s, int i, const char **method, const char **pattern);

/* Runs the handler registered for method and path as if that request had
 * come on parent's connection (its headers, peer, client-gone checks) with
 * this body, and captures its answer: *status and the body appended to out
 * (headers dropped). 0; 1 when the handler answered with a stream (not
 * captured: it is cut); -1 when no route matches, the handler gave no
 * answer, or memory ran out. llama-server's Vertex AI /predict route. */
int serve_call(serve_server *s, serve_req *parent, const char *method, const char *path, const char *body,
               size_t len, int *status, jbuf *out);

/* Runs until serve_stop() or a signal installed by serve_install_signals():
 * then closes the listeners, lets in-flight requests finish for grace_ms,
 * cuts the rest (their sockets are shut down, so a handler sees the client
 * gone), waits for their threads and returns 0. -1 if there is no listener. */
int serve_run(serve_server *s);
/* Asks serve_run() to return; async-signal-safe, any thread. */
void serve_stop(serve_server *s);
/* SIGINT, SIGTERM and SIGHUP call serve_stop(s); SIGPIPE is ignored. One server per
 * process may own the signals. 0, or -1 with errno. */
int serve_install_signals(serve_server *s);

/* ---- requests ---- */

/* First header with this name (case-insensitive), or NULL. */
const char *serve_header_get(const serve_req *r, const char *name);
/* A path parameter of the matched route ("id" for "/slots/:id", "*" for the
 * tail), or NULL. */
const char *serve_param(const serve_req *r, const char *name);
/* Query parameter `name`, percent- and '+'-decoded into out (NUL-terminated).
 * 1 if present, 0 if absent, -1 if it does not fit or decodes to a NUL. */
int serve_query_get(const serve_req *r, const char *name, char *out, size_t outlen);
/* 1 when the client has closed or reset its connection (a non-blocking look
 * at the socket, discarding any bytes it sent after the request), else 0. A
 * generation loop calls this between steps and stops when it says 1. */
int serve_client_gone(serve_req *r);
/* Milliseconds since the request's first byte arrived. */
int64_t serve_req_age_ms(const serve_req *r);

/* ---- answers ---- */

/* Adds a header line to the answer ("Cache-Control", "no-cache"). Call
 * before serve_reply*() or serve_stream_begin(). CR/LF in either is refused
 * (-1). */
int serve_resp_header(serve_resp *resp, const char *name, const char *value);
/* A whole answer: status line, Content-Type, Content-Length, the added
 * headers, CORS headers, Connection: close, then the body. */
int serve_reply(serve_resp *resp, int status, const char *content_type, const void *body, size_t len);
int serve_reply_text(serve_resp *resp, int status, const char *text);   /* SERVE_TEXT */
int serve_reply_json(serve_resp *resp, int status, const jbuf *body);   /* SERVE_JSON */

/* llama-server's error type for a status: 400 invalid_request_error,
 * 401 authentication_error, 403 permission_error, 404 not_found_error,
 * 501 not_supported_error, 503 unavailable_error, anything else
 * server_error (format_error_response in server-common.cpp). */
const char *serve_error_type(int code);
/* Appends {"error":{"code":N,"message":"...","type":"..."<extra>}} as
 * llama-server prints format_error_response(): compact, that key order.
 * type NULL = serve_error_type(code). extra: NULL or raw members appended
 * after "type", e.g. "\"n_prompt_tokens\":12,\"n_ctx\":8". */
void serve_error_json(jbuf *out, int code, const char *type, const char *message, const char *extra);
/* serve_error_json() sent as the answer, with status = code. */
int serve_reply_error(serve_resp *resp, int code, const char *type, const char *message, const char *extra);
/* Whether llama-server (nlohmann::json::parse) takes body[0..n) as JSON.
 * 1: it refuses; msg gets its exception text, which llama-server sends as
 * a 400 invalid_request_error ("[json.exception.parse_error.101] parse
 * error at line 1, column 2: syntax error while parsing object key - ...",
 * or out_of_range.406 for a number past double's range). 0: it takes it;
 * the JSON text is body[*start .. *end) (a UTF-8 byte order mark skipped,
 * and what follows a NUL byte after the value dropped, as nlohmann reads
 * NUL as the end). -1: out of memory, no answer. Nesting has no limit here;
 * json.c's (JSON_MAX_DEPTH) still applies when the tree is built. */
int serve_llama_json_check(const char *body, size_t n, jbuf *msg, size_t *start, size_t *end);

/* A stream: writes the status line and headers (no Content-Length) now.
 * Then serve_stream_write() sends bytes at once, never waiting: what the
 * socket does not take is kept (at most stream_buffer bytes) and sent
 * as the socket drains, the rest after the handler returns. A reader that
 * lags past the bound is cut (its socket shut down). -1 once the client is
 * gone or cut; the handler should stop. Whole answers (serve_reply*) never
 * wait either: their unsent bytes go out after the handler returns, with
 * write_timeout_ms each time the socket is full. */
int serve_stream_begin(serve_resp *resp, int status, const char *content_type);
int serve_stream_write(serve_resp *resp, const void *p, size_t n);
/* SSE: stream_begin with text/event-stream and Cache-Control: no-cache. */
int serve_sse_begin(serve_resp *resp);
/* One event: "data: " + data + "\n\n", in one write. data must not hold a
 * newline (JSON from jbuf never does); -1 if it does. */
int serve_sse_event(serve_resp *resp, const char *data, size_t n);
/* NDJSON (Ollama): stream_begin with application/x-ndjson; each line is
 * json + "\n" in one write. */
int serve_ndjson_begin(serve_resp *resp);
int serve_ndjson_line(serve_resp *resp, const char *json, size_t n);

/* ---- parsing, exposed for tests ---- */

enum { SERVE_PARSE_OK = 0, SERVE_PARSE_MORE = 1, SERVE_PARSE_ERROR = -1 };

/* Parses a request head in buf[0..len) (NUL-terminates lines in place).
 * OK: *head_len = bytes up to and including the blank line; r's method,
 * target, path, query, http_minor, headers are set. MORE: no blank line
 * yet and no limit passed. ERROR: *status (400) and a reason in err.
 * Lines end with CRLF or a bare LF. */
int serve_parse_head(char *buf, size_t len, serve_req *r, size_t *head_len,
                     int *status, char *err, size_t errlen);
/* Checks 2-5 on a parsed head. 0 with *body_len set, or the refusal's
 * status with its text in err. */
int serve_check_head(const serve_req *r, int json_posts_only, size_t max_body,
                     size_t *body_len, char *err, size_t errlen);
/* 1 if a Host value names loopback (127.0.0.1, localhost, [::1], with an
 * optional :port of digits), case-insensitive. */
int serve_host_is_loopback(const char *host);
/* Content-Length value to a size: 0 ok; -1 malformed (empty, sign, non-digit);
 * -2 a valid number above max. */
int serve_parse_content_length(const char *v, size_t max, size_t *out);
/* 1 if the presented credentials (Authorization, else X-Api-Key, "Bearer "
 * prefix removed) match one of the comma-separated keys. */
int serve_api_key_ok(const char *keys, const char *authorization, const char *x_api_key);
/* Reason phrase for a status ("Payload Too Large"); "Unknown" otherwise. */
const char *serve_reason(int status);

#endif
