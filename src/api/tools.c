/*
 * tools.c -- llama-server b11669's built-in tools (server-tools.cpp): GET
 * and POST /tools, the request's rules (params, the x-tool-cwd /
 * x-tool-runtime / x-resp-type headers, its errors and statuses) and the
 * seven tools on this host, in bankml's words. The host operations are
 * api/tools_io.c's. See tools.h and docs/modules/tools.md.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/llama_json.h"
#include "api/tools.h"
#include "api/tools_int.h"
#include "sampling/regex.h"

/* Each tool's GET /tools object (server_tool::to_json), exactly as b11669 writes it. */
static const char *const tool_json[TOOL_COUNT] = {
    /* read_file */
    "{\"display_name\":\"Read file\",\"tool\":\"read_file\",\"type\":\"server\",\"permissions\":{\"write\":false},\""
    "uses_cwd\":true,\"definition\":{\"type\":\"function\",\"function\":{\"name\":\"read_file\",\"description\":\"R"
    "ead the contents of a file. Optionally specify a 1-based line range. If append_loc is true, each line is prefi"
    "xed with its line number (e.g. \\\"1→...\\\").\",\"parameters\":{\"type\":\"object\",\"properties\":{\"path\":"
    "{\"type\":\"string\",\"description\":\"Path to the file\"},\"start_line\":{\"type\":\"integer\",\"description\""
    ":\"First line to read, 1-based (default: 1)\"},\"end_line\":{\"type\":\"integer\",\"description\":\"Last line "
    "to read, 1-based inclusive (default: end of file)\"},\"append_loc\":{\"type\":\"boolean\",\"description\":\"Pr"
    "efix each line with its line number\"}},\"required\":[\"path\"]}}}}",
    /* file_glob_search */
    "{\"display_name\":\"File search\",\"tool\":\"file_glob_search\",\"type\":\"server\",\"permissions\":{\"write\""
    ":false},\"uses_cwd\":true,\"definition\":{\"type\":\"function\",\"function\":{\"name\":\"file_glob_search\",\""
    "description\":\"Recursively search for files matching a glob pattern under a directory. Automatically skips fi"
    "les ignored by .gitignore (when the directory is inside a git repo) and common junk directories (.git, node_mo"
    "dules, build, dist, etc.) otherwise. A pattern with no '/' (e.g. \\\"*.cpp\\\") matches the file's basename at"
    " any depth. A pattern containing '/' matches the full relative path; unless already anchored with \\\"**/\\\" "
    "or a leading '/', it is automatically prefixed with \\\"**/\\\". Use type=\\\"dir\\\" or \\\"all\\\" to also l"
    "ist directories; directory entries are suffixed with '/' in the output. Note: directory listings do not apply "
    ".gitignore filtering.\",\"parameters\":{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\",\"de"
    "scription\":\"Base directory to search in\"},\"include\":{\"type\":\"string\",\"description\":\"Glob pattern f"
    "or files to include (e.g. \\\"*.cpp\\\" or \\\"src/**/*.cpp\\\"). Default: **\"},\"exclude\":{\"type\":\"strin"
    "g\",\"description\":\"Glob pattern for files to exclude\"},\"type\":{\"type\":\"string\",\"description\":\"Ent"
    "ry type to return: \\\"file\\\" (default), \\\"dir\\\" or \\\"all\\\"\"},\"max_depth\":{\"type\":\"integer\",\""
    "description\":\"Maximum depth to descend into subdirectories (default: 0 = unlimited; 1 = direct children only"
    ")\"},\"limit\":{\"type\":\"integer\",\"description\":\"Maximum number of results to return, capped at 100 (def"
    "ault 100)\"}},\"required\":[\"path\"]}}}}",
    /* grep_search */
    "{\"display_name\":\"Grep search\",\"tool\":\"grep_search\",\"type\":\"server\",\"permissions\":{\"write\":fals"
    "e},\"uses_cwd\":true,\"definition\":{\"type\":\"function\",\"function\":{\"name\":\"grep_search\",\"descriptio"
    "n\":\"Search for a pattern in files under a path. Returns matching lines with file paths (and, unless searchin"
    "g a single file, paths relative to the given directory). Automatically skips files ignored by .gitignore (when"
    " the directory is inside a git repo) and common junk directories (.git, node_modules, build, dist, etc.) other"
    "wise. include/exclude: a pattern with no '/' matches the basename at any depth; a pattern containing '/' match"
    "es the full relative path (auto-anchored with \\\"**/\\\" unless already anchored).\",\"parameters\":{\"type\""
    ":\"object\",\"properties\":{\"path\":{\"type\":\"string\",\"description\":\"File or directory to search in\"},"
    "\"pattern\":{\"type\":\"string\",\"description\":\"Pattern to search for (regular expression unless literal is"
    " true)\"},\"include\":{\"type\":\"string\",\"description\":\"Glob pattern to filter files (default: **)\"},\"e"
    "xclude\":{\"type\":\"string\",\"description\":\"Glob pattern to exclude files\"},\"return_line_numbers\":{\"ty"
    "pe\":\"boolean\",\"description\":\"If true, include line numbers in results\"},\"literal\":{\"type\":\"boolean"
    "\",\"description\":\"Treat pattern as a literal string instead of a regular expression (default: false)\"},\"i"
    "gnore_case\":{\"type\":\"boolean\",\"description\":\"Case-insensitive search (default: false)\"},\"context_lin"
    "es\":{\"type\":\"integer\",\"description\":\"Number of lines of context to show before and after each match (d"
    "efault: 0)\"}},\"required\":[\"path\",\"pattern\"]}}}}",
    /* exec_shell_command */
    "{\"display_name\":\"Execute shell command\",\"tool\":\"exec_shell_command\",\"type\":\"server\",\"permissions\""
    ":{\"write\":true},\"uses_cwd\":true,\"definition\":{\"type\":\"function\",\"function\":{\"name\":\"exec_shell_"
    "command\",\"description\":\"Execute a shell command and return its output (stdout and stderr combined).\",\"pa"
    "rameters\":{\"type\":\"object\",\"properties\":{\"command\":{\"type\":\"string\",\"description\":\"Shell comma"
    "nd to execute\"},\"timeout\":{\"type\":\"integer\",\"description\":\"Timeout in seconds (default 10, max 60)\""
    "},\"max_output_size\":{\"type\":\"integer\",\"description\":\"Maximum output size in bytes (default 16384)\"}}"
    ",\"required\":[\"command\"]}}}}",
    /* write_file */
    "{\"display_name\":\"Write file\",\"tool\":\"write_file\",\"type\":\"server\",\"permissions\":{\"write\":true},"
    "\"uses_cwd\":true,\"definition\":{\"type\":\"function\",\"function\":{\"name\":\"write_file\",\"description\":"
    "\"Write content to a file, creating it (including parent directories) if it does not exist. May use with edit_"
    "file for more complex edits.\",\"parameters\":{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string"
    "\",\"description\":\"Path of the file to write\"},\"content\":{\"type\":\"string\",\"description\":\"Content t"
    "o write\"}},\"required\":[\"path\",\"content\"]}}}}",
    /* edit_file */
    "{\"display_name\":\"Edit file\",\"tool\":\"edit_file\",\"type\":\"server\",\"permissions\":{\"write\":true},\""
    "uses_cwd\":true,\"definition\":{\"type\":\"function\",\"function\":{\"name\":\"edit_file\",\"description\":\"E"
    "dit a file using exact text replacement. Each edits[].old_text must be unique in the file and is matched again"
    "st the original content, not incrementally. Merge nearby changes into one edit instead of overlapping edits. U"
    "se write_file to replace the whole file.\",\"parameters\":{\"type\":\"object\",\"properties\":{\"path\":{\"typ"
    "e\":\"string\",\"description\":\"Path to the file to edit\"},\"edits\":{\"type\":\"array\",\"description\":\"O"
    "ne or more exact text replacements to apply\",\"items\":{\"type\":\"object\",\"properties\":{\"old_text\":{\"t"
    "ype\":\"string\",\"description\":\"Exact text to find; must be unique in the file and must not overlap with ot"
    "her edits\"},\"new_text\":{\"type\":\"string\",\"description\":\"Text to replace old_text with\"}},\"required\""
    ":[\"old_text\",\"new_text\"]}}},\"required\":[\"path\",\"edits\"]}}}}",
    /* get_info */
    "{\"display_name\":\"Get Runtime Info\",\"tool\":\"get_info\",\"type\":\"server\",\"permissions\":{\"write\":fa"
    "lse},\"uses_cwd\":true,\"definition\":{\"type\":\"function\",\"function\":{\"name\":\"get_info\",\"description"
    "\":\"Returns runtime info: the OS name/version and the current working directory\",\"parameters\":{\"type\":\""
    "object\",\"properties\":{}}}}}",
};

static const char *const tool_names[TOOL_COUNT] = {
    "read_file", "file_glob_search", "grep_search", "exec_shell_command", "write_file", "edit_file", "get_info",
};

const char *tools_name(int i) { return i >= 0 && i < TOOL_COUNT ? tool_names[i] : NULL; }

/* parse_csv_row's fields, each checked against the names. */
int tools_parse_list(const char *csv, unsigned *mask, char *err, size_t errlen)
{
    jbuf f;
    jbuf_init(&f);
    unsigned m = 0;
    int inq = 0, rc = 0;
    for (const char *p = csv;; p++) {
        if (*p == '"') {
            if (!inq) {
                if (f.len) jbuf_putc(&f, '"');
                else inq = 1;
            } else if (p[1] == '"') {
                jbuf_putc(&f, '"');
                p++;
            } else {
                inq = 0;
            }
            continue;
        }
        if (*p && (*p != ',' || inq)) {
            jbuf_putc(&f, *p);
            continue;
        }
        const char *name = f.p ? f.p : "";
        int k = -1;
        for (int i = 0; i < TOOL_COUNT; i++)
            if (!strcmp(name, tool_names[i])) k = i;
        if (!strcmp(name, "all")) m |= TOOLS_ALL;
        else if (k >= 0) m |= 1u << k;
        else {
            snprintf(err, errlen, "unknown tool \"%s\". available tools: read_file, file_glob_search, grep_search, "
                     "exec_shell_command, write_file, edit_file, get_info", name);
            rc = -1;
            break;
        }
        jbuf_reset(&f);
        if (!*p) break;
    }
    jbuf_free(&f);
    if (rc == 0) *mask = m;
    return rc;
}

/* ---- a request ---- */

/* What an invocation failed with: an nlohmann exception (400), a runtime error (500) or bankml's refusal
 * (501, its reason); msg malloc'd. */
typedef struct {
    int status;
    char msg[1024];
} tool_err;

static int terr(tool_err *e, int status, const char *fmt, const char *a, const char *b)
{
    e->status = status;
    snprintf(e->msg, sizeof e->msg, fmt, a ? a : "", b ? b : "");
    return -1;
}

/* The params as b11669 holds them after the handler's edits: the body's own "cwd", "runtime" and
 * "resp_type" erased, the headers' set in their place. */
typedef struct {
    const json_value *p;        /* the body's params (NULL: absent, taken as {}) */
    int is_obj;                 /* an object (or null made one by a header) */
    const char *cwd, *runtime, *resp_type;   /* from the headers; NULL none */
    long glob_budget;
} tparams;

static int is_erased(const char *k) { return !strcmp(k, "cwd") || !strcmp(k, "runtime") || !strcmp(k, "resp_type"); }

/* params.at(key): the value, or NULL with nlohmann's exception (400). */
static const json_value *p_at(const tparams *tp, const char *key, tool_err *e)
{
    if (!tp->is_obj) {
        terr(e, 400, "[json.exception.type_error.304] cannot use at() with %s", llama_jtype(tp->p), NULL);
        return NULL;
    }
    const json_value *v = tp->p && !is_erased(key) ? json_get(tp->p, key) : NULL;
    if (!v) terr(e, 400, "[json.exception.out_of_range.403] key '%s' not found", key, NULL);
    return v;
}

/* params.at(key).get<std::string>(). */
static const char *p_str(const tparams *tp, const char *key, size_t *len, tool_err *e)
{
    const json_value *v = p_at(tp, key, e);
    if (!v) return NULL;
    if (v->type != JSON_STRING) {
        terr(e, 400, "[json.exception.type_error.302] type must be string, but is %s", llama_jtype(v), NULL);
        return NULL;
    }
    if (len) *len = v->len;
    return v->str;
}

/* json_value(params, key, default): a present, non-null value of the right type, else the default. */
static const json_value *p_opt(const tparams *tp, const char *key)
{
    if (!tp->is_obj || !tp->p || is_erased(key)) return NULL;
    const json_value *v = json_get(tp->p, key);
    return v && v->type != JSON_NULL ? v : NULL;
}

static int p_int(const tparams *tp, const char *key, int def)
{
    const json_value *v = p_opt(tp, key);
    if (!v || (v->type != JSON_NUMBER && v->type != JSON_TRUE && v->type != JSON_FALSE)) return def;
    return (int)llama_token_id(v);
}

static int p_bool(const tparams *tp, const char *key, int def)
{
    const json_value *v = p_opt(tp, key);
    return v && (v->type == JSON_TRUE || v->type == JSON_FALSE) ? v->type == JSON_TRUE : def;
}

static const char *p_sopt(const tparams *tp, const char *key, const char *def)
{
    const json_value *v = p_opt(tp, key);
    return v && v->type == JSON_STRING ? v->str : def;
}

static int valid_chars(const char *s, const char *extra)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || strchr(extra, c)))
            return 0;
    }
    return 1;
}

/* make_tools_io: no runtime runs on this host; b11669's refusals of a runtime with its words (500); an
 * isolate it would take is refused by bankml (501). */
static int tools_io_check(const tparams *tp, tool_err *e)
{
    const char *rt = tp->runtime;
    if (!rt || !rt[0]) return 0;
    static const char *const engines[] = {"docker", "podman"};
    for (int i = 0; i < 2; i++) {
        size_t n = strlen(engines[i]);
        if (!strncmp(rt, engines[i], n) && !strncmp(rt + n, "-container:", 11)) {
            const char *id = rt + n + 11;
            unsigned char c0 = (unsigned char)id[0];
            if (!((c0 >= '0' && c0 <= '9') || (c0 >= 'a' && c0 <= 'z') || (c0 >= 'A' && c0 <= 'Z')) ||
                !valid_chars(id, ".-_"))
                return terr(e, 500, "invalid container id: %s", id, NULL);
            return terr(e, 501, "bankml runs the built-in tools on this host only: the tool runtime %s is not "
                        "reproduced (send no x-tool-runtime header, or use llama-server for containers)", rt, NULL);
        }
        if (!strncmp(rt, engines[i], n) && rt[n] == ':')
            return terr(e, 500, "tool runtime must name a running container: %s", rt, NULL);
    }
    if (!strncmp(rt, "ssh:", 4)) {
        const char *t = rt + 4;
        if (!t[0] || t[0] == '-' || !valid_chars(t, ".-_@")) return terr(e, 500, "invalid ssh target: %s", t, NULL);
        return terr(e, 501, "bankml runs the built-in tools on this host only: the tool runtime %s is not "
                    "reproduced (send no x-tool-runtime header, or use llama-server for ssh)", rt, NULL);
    }
    return terr(e, 500, "unknown tool runtime: %s", rt, NULL);
}

static void resolve(const tparams *tp, const char *path, jbuf *out) { tio_resolve(tp->cwd, path, out); }

static void put_err(jbuf *out, const char *msg, size_t n)
{
    jbuf_puts(out, "{\"error\":");
    json_put_str_nl(out, msg, n);
    jbuf_putc(out, '}');
}

static void put_errf(jbuf *out, const char *fmt, const char *a, const char *b)
{
    char m[8192];
    int n = snprintf(m, sizeof m, fmt, a ? a : "", b ? b : "");
    put_err(out, m, n < 0 ? 0 : (size_t)n < sizeof m ? (size_t)n : sizeof m - 1);
}

/* "error: " + path: the path as given, its bytes as they are. */
static void put_err_path(jbuf *out, const char *what, const char *path)
{
    jbuf m;
    jbuf_init(&m);
    jbuf_puts(&m, what);
    jbuf_puts(&m, path);
    put_err(out, m.p ? m.p : "", m.len);
    jbuf_free(&m);
}

/* ---- read_file ---- */

#define READ_MAX ((size_t)16 * 1024)
#define READ_MAX_B64 ((uint64_t)32 * 1024 * 1024)

static void base64_put(jbuf *out, const unsigned char *p, size_t n)
{
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    jbuf_putc(out, '"');
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)p[i] << 16 | (i + 1 < n ? (unsigned)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
        char q[4] = {a[v >> 18 & 63], a[v >> 12 & 63], i + 1 < n ? a[v >> 6 & 63] : '=', i + 2 < n ? a[v & 63] : '='};
        jbuf_put(out, q, 4);
    }
    jbuf_putc(out, '"');
}

static int t_read_file(const tparams *tp, jbuf *out, tool_err *e)
{
    const char *path = p_str(tp, "path", NULL, e);
    if (!path) return -1;
    int start = p_int(tp, "start_line", 1), end = p_int(tp, "end_line", -1), loc = p_bool(tp, "append_loc", 0);
    int b64 = tp->resp_type && !strcmp(tp->resp_type, "base64");
    if (tools_io_check(tp, e)) return -1;
    jbuf full, c;
    jbuf_init(&full);
    jbuf_init(&c);
    resolve(tp, path, &full);
    uint64_t size = 0;
    int rc = 0;
    char num[96];
    if (full.oom) rc = terr(e, 500, "out of memory", NULL, NULL);
    else if (!tio_file_size(full.p, &size)) put_err_path(out, "cannot stat file: ", path);
    else if (b64 && size > READ_MAX_B64) {
        snprintf(num, sizeof num, "file too large (%zu bytes, max %zu)", (size_t)size, (size_t)READ_MAX_B64);
        put_errf(out, "%s", num, NULL);
    } else if (!b64 && size > READ_MAX && end == -1) {
        snprintf(num, sizeof num, "file too large (%zu bytes, max %zu). ", (size_t)size, READ_MAX);
        put_errf(out, "%sUse start_line/end_line to read a portion.", num, NULL);
    } else {
        int r = tio_read(full.p, &c);
        if (r < 0) rc = terr(e, 500, "out of memory", NULL, NULL);
        else if (r == 0) put_err_path(out, "failed to open file: ", path);
        else if (b64) {
            jbuf_puts(out, "{\"base64\":");
            base64_put(out, (const unsigned char *)c.p, c.len);
            jbuf_printf(out, ",\"size_bytes\":%zu}", c.len);
        } else {
            jbuf res;
            jbuf_init(&res);
            int lineno = 0;
            for (size_t i = 0; i < c.len;) {   /* std::getline: a last line without '\n' still counts */
                size_t j = i;
                while (j < c.len && c.p[j] != '\n') j++;
                const char *l = c.p + i;
                size_t ll = j - i;
                i = j + 1;
                lineno++;
                if (lineno < start) continue;
                if (end != -1 && lineno > end) break;
                int k = loc ? snprintf(num, sizeof num, "%d\xe2\x86\x92", lineno) : 0;
                if (res.len + (size_t)k + ll + 1 > READ_MAX) {
                    jbuf_puts(&res, "[output truncated]");
                    break;
                }
                jbuf_put(&res, num, (size_t)k);
                jbuf_put(&res, l, ll);
                jbuf_putc(&res, '\n');
            }
            jbuf_puts(out, "{\"plain_text_response\":");
            json_put_str_nl(out, res.p ? res.p : "", res.len);
            jbuf_putc(out, '}');
            jbuf_free(&res);
        }
    }
    jbuf_free(&full);
    jbuf_free(&c);
    return rc;
}

/* ---- file_glob_search ---- */

#define GLOB_MAX_RESULTS 100

/* include / exclude of one entry: 1 kept, 0 not, -1 the glob budget ran out. */
static int glob_keep(tparams *tp, const char *inc, const char *exc, const char *rel)
{
    int r = tio_path_glob(inc, rel, &tp->glob_budget);
    if (r <= 0) return r;
    if (!exc[0]) return 1;
    r = tio_path_glob(exc, rel, &tp->glob_budget);
    return r < 0 ? -1 : !r;
}

static int glob_refuse(tool_err *e)
{
    return terr(e, 501, "bankml refuses this include/exclude glob: matching it took over %s steps (b11669's "
                "glob_match is a plain recursion, exponential on such patterns); use fewer '*' and '**'",
                "20,000,000", NULL);
}

static int t_file_glob_search(tparams *tp, jbuf *out, tool_err *e)
{
    if (tools_io_check(tp, e)) return -1;
    const char *path = p_str(tp, "path", NULL, e);
    if (!path) return -1;
    const char *inc = p_sopt(tp, "include", "**"), *exc = p_sopt(tp, "exclude", ""),
               *type = p_sopt(tp, "type", "file");
    int max_depth = p_int(tp, "max_depth", 0), limit = p_int(tp, "limit", GLOB_MAX_RESULTS), kind;
    if (max_depth < 0) max_depth = 0;
    char num[160];
    if (limit < 1) {
        snprintf(num, sizeof num, "invalid limit: %d (expected 1 or more)", limit);
        put_errf(out, "%s", num, NULL);
        return 0;
    }
    if (limit > GLOB_MAX_RESULTS) limit = GLOB_MAX_RESULTS;
    if (!strcmp(type, "file")) kind = TIO_FILES;
    else if (!strcmp(type, "dir")) kind = TIO_DIRS;
    else if (!strcmp(type, "all")) kind = TIO_ALL;
    else {
        put_errf(out, "invalid type: %s (expected \"file\", \"dir\" or \"all\")", type, NULL);
        return 0;
    }
    jbuf base;
    jbuf_init(&base);
    resolve(tp, path, &base);
    if (base.oom) return jbuf_free(&base), terr(e, 500, "out of memory", NULL, NULL);
    tio_list l;
    int lr = tio_list_entries(tp->cwd, base.p, max_depth, kind, &l), rc = 0;
    if (lr < 0) rc = terr(e, 500, "out of memory", NULL, NULL);
    else if (lr == 1) put_err_path(out, "path does not exist or is not a directory: ", path);
    else {
        size_t total = 0, shown = 0;
        jbuf text, ents;
        jbuf_init(&text);
        jbuf_init(&ents);
        jbuf_putc(&ents, '[');
        for (size_t i = 0; i < l.n && rc == 0; i++) {
            int k = glob_keep(tp, inc, exc, l.v[i].rel);
            if (k < 0) rc = glob_refuse(e);
            if (k <= 0) continue;
            total++;
            if (shown >= (size_t)limit) continue;
            jbuf_puts(&text, l.v[i].rel);
            jbuf_puts(&text, l.v[i].is_dir ? "/\n" : "\n");
            jbuf_puts(&ents, shown ? ",{\"path\":" : "{\"path\":");
            json_put_cstr_nl(&ents, l.v[i].rel);
            jbuf_puts(&ents, l.v[i].is_dir ? ",\"type\":\"dir\"}" : ",\"type\":\"file\"}");
            shown++;
        }
        jbuf_putc(&ents, ']');
        jbuf_printf(&text, "\n---\nTotal matches: %zu\n", total);
        if (total > shown)
            jbuf_printf(&text, "[%zu results limit reached (%zu total matches). Refine the glob pattern to narrow "
                        "the search.]\n", shown, total);
        if (l.truncated) jbuf_puts(&text, "[results truncated: time budget or unreadable directory]\n");
        if (rc == 0) {
            jbuf_puts(out, "{\"plain_text_response\":");
            json_put_str_nl(out, text.p, text.len);
            jbuf_puts(out, ",\"entries\":");
            jbuf_put(out, ents.p, ents.len);
            jbuf_puts(out, ",\"base\":");
            json_put_str_nl(out, base.p, base.len);
            jbuf_putc(out, '}');
        }
        jbuf_free(&text);
        jbuf_free(&ents);
    }
    tio_list_free(&l);
    jbuf_free(&base);
    return rc;
}

/* ---- grep_search ---- */

#define GREP_MAX_RESULTS 100

/* The matches of one file's lines into text; -1 when the regex gave up (its step limit). */
static int grep_file(const rx *re, const jbuf *c, const char *shown, int ctx, int show_num, size_t *total,
                     int *limit, jbuf *text)
{
    size_t nl = 0, cap = 0;
    size_t *ls = NULL, *le = NULL;
    for (size_t i = 0; i < c->len;) {   /* std::getline's lines */
        size_t j = i;
        while (j < c->len && c->p[j] != '\n') j++;
        if (nl == cap) {
            cap = cap ? cap * 2 : 256;
            size_t *a = realloc(ls, cap * sizeof *a), *b = a ? realloc(le, cap * sizeof *b) : NULL;
            if (a) ls = a;
            if (!a || !b) {
                free(ls);
                free(le);
                return -2;
            }
            le = b;
        }
        ls[nl] = i;
        le[nl++] = j;
        i = j + 1;
    }
    long g[2 * 64];
    int rc = 0;
    for (size_t i = 0; i < nl; i++) {
        if (*total >= GREP_MAX_RESULTS) {
            *limit = 1;
            break;
        }
        int m = rx_exec(re, c->p + ls[i], le[i] - ls[i], 0, g);
        if (m < 0) {
            rc = -1;
            break;
        }
        if (!m) continue;
        size_t a = ctx > 0 ? (i >= (size_t)ctx ? i - (size_t)ctx : 0) : i;
        size_t z = ctx > 0 ? (i + (size_t)ctx < nl - 1 ? i + (size_t)ctx : nl - 1) : i;
        for (size_t j = a; j <= z; j++) {
            int is = j == i;
            jbuf_puts(text, shown);
            jbuf_putc(text, is ? ':' : '-');
            if (show_num) jbuf_printf(text, "%zu%c", j + 1, is ? ':' : '-');
            jbuf_put(text, c->p + ls[j], le[j] - ls[j]);
            jbuf_putc(text, '\n');
        }
        if (ctx > 0) jbuf_puts(text, "--\n");
        (*total)++;
    }
    free(ls);
    free(le);
    return rc;
}

/* The pattern as std::regex gets it: a literal one with \^$.|?*+()[]{} escaped. */
static int grep_compile(const char *pat, size_t n, int literal, rx **re, jbuf *out, tool_err *e)
{
    jbuf src;
    jbuf_init(&src);
    for (size_t i = 0; i < n; i++) {
        if (literal && strchr("\\^$.|?*+()[]{}", pat[i]) && pat[i]) jbuf_putc(&src, '\\');
        jbuf_putc(&src, pat[i]);
    }
    char why[512];
    int r = src.oom ? RX_NOMEM : rx_compile(src.p ? src.p : "", src.len, re, why, sizeof why);
    jbuf_free(&src);
    if (r == RX_OK) return 0;
    if (r == RX_INVALID) {
        put_errf(out, "invalid regex: %s", why, NULL);
        return 1;
    }
    if (r == RX_NOMEM) return terr(e, 500, "out of memory", NULL, NULL);
    return terr(e, 501, "bankml refuses this grep_search pattern: %s", why, NULL);
}

/* The files to search: (absolute, shown) pairs in l (rel: absolute; the shown name after its NUL). */
static int grep_files(tparams *tp, const char *path, const char *abs, const char *inc, const char *exc,
                      tio_list *files, jbuf *out, tool_err *e)
{
    memset(files, 0, sizeof *files);
    if (tio_is_reg(abs)) {
        files->v = calloc(1, sizeof *files->v);
        size_t a = strlen(abs), b = strlen(path);
        if (!files->v || !(files->v[0].rel = malloc(a + b + 2))) return terr(e, 500, "out of memory", NULL, NULL);
        memcpy(files->v[0].rel, abs, a + 1);
        memcpy(files->v[0].rel + a + 1, path, b + 1);
        files->n = files->cap = 1;
        return 0;
    }
    if (!tio_is_dir(abs)) {
        put_err_path(out, "path does not exist: ", path);
        return 1;
    }
    tio_list l;
    int lr = tio_list_entries(tp->cwd, abs, 0, TIO_FILES, &l);
    if (lr < 0) return tio_list_free(&l), terr(e, 500, "out of memory", NULL, NULL);
    if (lr == 1) {
        tio_list_free(&l);
        put_err_path(out, "path does not exist or is not a directory: ", path);
        return 1;
    }
    for (size_t i = 0; i < l.n; i++) {
        int k = glob_keep(tp, inc, exc, l.v[i].rel);
        if (k < 0) return tio_list_free(&l), glob_refuse(e);
        if (!k) continue;
        jbuf j;
        jbuf_init(&j);
        jbuf_puts(&j, abs);
        if (j.len && j.p[j.len - 1] != '/') jbuf_putc(&j, '/');
        jbuf_puts(&j, l.v[i].rel);
        jbuf_putc(&j, 0);
        jbuf_puts(&j, l.v[i].rel);
        if (files->n == files->cap) {
            size_t cap = files->cap ? files->cap * 2 : 64;
            tio_entry *v = realloc(files->v, cap * sizeof *v);
            if (v) files->v = v, files->cap = cap;
            else j.oom = 1;
        }
        if (j.oom) {
            jbuf_free(&j);
            tio_list_free(&l);
            return terr(e, 500, "out of memory", NULL, NULL);
        }
        files->v[files->n].rel = j.p;   /* the jbuf's block, kept */
        files->v[files->n++].is_dir = 0;
    }
    tio_list_free(&l);
    return 0;
}

static int t_grep_search(tparams *tp, jbuf *out, tool_err *e)
{
    size_t plen = 0;
    const char *path = p_str(tp, "path", NULL, e), *pat = path ? p_str(tp, "pattern", &plen, e) : NULL;
    if (!pat) return -1;
    const char *inc = p_sopt(tp, "include", "**"), *exc = p_sopt(tp, "exclude", "");
    int show_ln = p_bool(tp, "return_line_numbers", 0), literal = p_bool(tp, "literal", 0),
        icase = p_bool(tp, "ignore_case", 0), ctx = p_int(tp, "context_lines", 0);
    if (ctx < 0) ctx = 0;
    if (icase)
        return terr(e, 501, "bankml refuses grep_search's ignore_case: std::regex's case folding (icase) is not "
                    "reproduced; search without it%s%s", NULL, NULL);
    rx *re = NULL;
    int c = grep_compile(pat, plen, literal, &re, out, e);
    if (c) return c < 0 ? -1 : 0;
    int rc = 0;
    if (tools_io_check(tp, e)) {
        rx_free(re);
        return -1;
    }
    jbuf abs, text, content;
    jbuf_init(&abs);
    jbuf_init(&text);
    jbuf_init(&content);
    resolve(tp, path, &abs);
    tio_list files;
    memset(&files, 0, sizeof files);
    int fr = abs.oom ? terr(e, 500, "out of memory", NULL, NULL) : grep_files(tp, path, abs.p, inc, exc, &files, out, e);
    if (fr) rc = fr < 0 ? -1 : 0;
    else {
        size_t total = 0;
        int limit = 0;
        for (size_t i = 0; i < files.n && !limit && rc == 0; i++) {
            const char *fp = files.v[i].rel, *shown = fp + strlen(fp) + 1;
            jbuf_reset(&content);
            int r = tio_read(fp, &content);
            if (r < 0) rc = terr(e, 500, "out of memory", NULL, NULL);
            if (r <= 0) continue;
            int g = grep_file(re, &content, shown, ctx, show_ln || ctx > 0, &total, &limit, &text);
            if (g == -1) rc = terr(e, 501, "bankml refuses this grep_search pattern: matching a line took over "
                                   "50,000,000 backtracking steps%s%s", NULL, NULL);
            else if (g < 0) rc = terr(e, 500, "out of memory", NULL, NULL);
        }
        jbuf_printf(&text, "\n---\nTotal matches: %zu\n", total);
        if (limit)
            jbuf_printf(&text, "[%d matches limit reached. Narrow the path/pattern/include to see more.]\n",
                        GREP_MAX_RESULTS);
        if (rc == 0) {
            jbuf_puts(out, "{\"plain_text_response\":");
            json_put_str_nl(out, text.p, text.len);
            jbuf_putc(out, '}');
        }
    }
    tio_list_free(&files);
    rx_free(re);
    jbuf_free(&abs);
    jbuf_free(&text);
    jbuf_free(&content);
    return rc;
}

/* ---- exec_shell_command ---- */

#define EXEC_MAX_OUTPUT ((size_t)16 * 1024)
#define EXEC_MAX_TIMEOUT 60

typedef struct {
    serve_resp *resp;
    serve_req *req;
    int gone;
} exec_stream;

/* One {"chunk": ...} event; nonzero when the client left. */
static int push_chunk(exec_stream *st, const char *p, size_t n)
{
    if (!n) return 0;
    jbuf ev;
    jbuf_init(&ev);
    jbuf_puts(&ev, "{\"chunk\":");
    json_put_str_nl(&ev, p, n);
    jbuf_putc(&ev, '}');
    if (ev.oom || serve_sse_event(st->resp, ev.p, ev.len) != 0 || serve_client_gone(st->req)) st->gone = 1;
    jbuf_free(&ev);
    return st->gone;
}

static int on_chunk(void *ud, const char *p, size_t n) { return push_chunk(ud, p, n); }

static int t_exec(tparams *tp, jbuf *out, exec_stream *st, tool_err *e)
{
    const char *cmd = p_str(tp, "command", NULL, e);
    if (!cmd) return -1;
    int timeout = p_int(tp, "timeout", 10);
    size_t max_out = (size_t)(int64_t)p_int(tp, "max_output_size", (int)EXEC_MAX_OUTPUT);
    if (timeout > EXEC_MAX_TIMEOUT) timeout = EXEC_MAX_TIMEOUT;
    if (max_out > EXEC_MAX_OUTPUT) max_out = EXEC_MAX_OUTPUT;
    if (tools_io_check(tp, e)) return -1;
    char *argv[] = {"sh", "-c", (char *)cmd, NULL};
    tio_exec r;
    tio_run(argv, tp->cwd && tp->cwd[0] ? tp->cwd : NULL, max_out, timeout, st ? on_chunk : NULL, st, &r);
    char tail[96];
    snprintf(tail, sizeof tail, "\n[exit code: %d]%s", r.exit_code, r.timed_out ? " [exit due to timed out]" : "");
    if (st) {
        if (!st->gone) push_chunk(st, tail, strlen(tail));
    } else {
        jbuf_puts(&r.out, tail);
        if (r.out.oom) {
            jbuf_free(&r.out);
            return terr(e, 500, "out of memory", NULL, NULL);
        }
        jbuf_puts(out, "{\"plain_text_response\":");
        json_put_str_nl(out, r.out.p, r.out.len);
        jbuf_putc(out, '}');
    }
    jbuf_free(&r.out);
    return 0;
}

/* ---- write_file ---- */

static int t_write_file(const tparams *tp, jbuf *out, tool_err *e)
{
    size_t n = 0;
    const char *path = p_str(tp, "path", NULL, e), *content = path ? p_str(tp, "content", &n, e) : NULL;
    if (!content) return -1;
    if (tools_io_check(tp, e)) return -1;
    jbuf full;
    jbuf_init(&full);
    resolve(tp, path, &full);
    if (full.oom) return jbuf_free(&full), terr(e, 500, "out of memory", NULL, NULL);
    if (!tio_write(full.p, content, n)) put_err_path(out, "failed to write file: ", path);
    else {
        jbuf_puts(out, "{\"result\":\"file written successfully\",\"path\":");
        json_put_cstr_nl(out, path);
        jbuf_printf(out, ",\"bytes\":%zu}", n);
    }
    jbuf_free(&full);
    return 0;
}

/* ---- edit_file ---- */

/* normalize_line_for_fuzzy_match: trailing spaces, tabs and CRs cut, then smart quotes, dashes, the minus
 * sign and the special spaces made ASCII (one pass: no pattern's end begins another). */
static void fuzzy_line(const char *s, size_t n, jbuf *out)
{
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r')) n--;
    for (size_t i = 0; i < n;) {
        unsigned char a = (unsigned char)s[i], b = i + 1 < n ? (unsigned char)s[i + 1] : 0,
                      c = i + 2 < n ? (unsigned char)s[i + 2] : 0;
        char r = 0;
        size_t w = 3;
        if (a == 0xE2 && b == 0x80 && i + 2 < n) {
            if (c >= 0x98 && c <= 0x9B) r = '\'';
            else if (c >= 0x9C && c <= 0x9F) r = '"';
            else if (c >= 0x90 && c <= 0x95) r = '-';
            else if ((c >= 0x82 && c <= 0x8A) || c == 0xAF) r = ' ';
        } else if (a == 0xE2 && b == 0x88 && c == 0x92 && i + 2 < n) {
            r = '-';
        } else if (a == 0xE2 && b == 0x81 && c == 0x9F && i + 2 < n) {
            r = ' ';
        } else if (a == 0xE3 && b == 0x80 && c == 0x80 && i + 2 < n) {
            r = ' ';
        } else if (a == 0xC2 && b == 0xA0 && i + 1 < n) {
            r = ' ';
            w = 2;
        }
        if (r) {
            jbuf_putc(out, r);
            i += w;
        } else {
            jbuf_putc(out, s[i++]);
        }
    }
}

/* normalize_for_fuzzy_match: every '\n'-separated line through fuzzy_line. */
static void fuzzy(const char *s, size_t n, jbuf *out)
{
    size_t i = 0;
    for (;;) {
        size_t j = i;
        while (j < n && s[j] != '\n') j++;
        fuzzy_line(s + i, j - i, out);
        if (j >= n) break;
        jbuf_putc(out, '\n');
        i = j + 1;
    }
}

static size_t find(const char *h, size_t hn, const char *nd, size_t nn, size_t from)
{
    if (nn == 0) return from <= hn ? from : SIZE_MAX;
    for (size_t i = from; i + nn <= hn; i++)
        if (h[i] == nd[0] && !memcmp(h + i, nd, nn)) return i;
    return SIZE_MAX;
}

static size_t count_occ(const jbuf *h, const jbuf *nd)
{
    size_t k = 0, pos = 0;
    if (!nd->len) return 0;
    while ((pos = find(h->p, h->len, nd->p, nd->len, pos)) != SIZE_MAX) {
        k++;
        pos += nd->len;
    }
    return k;
}

typedef struct {
    size_t edit, at, len;
    const char *nt;
    size_t ntl;
} edit_m;

/* apply_replacements over s[0..n) (replacements ascending, at - offset inside it). */
static void apply_reps(const char *s, size_t n, const edit_m *m, size_t k, size_t offset, jbuf *out)
{
    size_t pos = 0;
    for (size_t i = 0; i < k; i++) {
        size_t at = m[i].at - offset;
        jbuf_put(out, s + pos, at - pos);
        jbuf_put(out, m[i].nt, m[i].ntl);
        pos = at + m[i].len;
    }
    jbuf_put(out, s + pos, n - pos);
}

typedef struct {
    size_t a, z;   /* [a, z) bytes of a line, its '\n' included */
} span;

static size_t line_spans(const char *s, size_t n, span **out)
{
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && s[j] != '\n') j++;
        i = j < n ? j + 1 : j;
        k++;
    }
    *out = malloc((k + 1) * sizeof **out);
    if (!*out) return SIZE_MAX;
    k = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && s[j] != '\n') j++;
        size_t e = j < n ? j + 1 : j;
        (*out)[k].a = i;
        (*out)[k++].z = e;
        i = e;
    }
    return k;
}

/* apply_replacements_preserving_unchanged_lines: the lines the replacements touch (in the normalized
 * text, grouped when they share a line) rewritten, every other line kept from the original. 0, or -1
 * when a replacement falls outside the lines (b11669's undefined case: refused). */
static int apply_fuzzy(const jbuf *orig, const jbuf *base, const edit_m *m, size_t k, jbuf *out)
{
    span *ol = NULL, *bl = NULL;
    size_t no = line_spans(orig->p, orig->len, &ol), nb = line_spans(base->p, base->len, &bl), oi = 0;
    int rc = 0;
    if (no == SIZE_MAX || nb == SIZE_MAX || no != nb) rc = -1;
    for (size_t g = 0; g < k && rc == 0;) {
        size_t s = 0, z = 0, h = g;
        for (; h < k; h++) {   /* this group: the replacements whose lines start before its end */
            size_t a = m[h].at, e = m[h].at + m[h].len, sl = SIZE_MAX, el;
            for (size_t i = 0; i < nb; i++)
                if (a >= bl[i].a && a < bl[i].z) {
                    sl = i;
                    break;
                }
            if (sl == SIZE_MAX) {
                rc = -1;
                break;
            }
            for (el = sl; el < nb && bl[el].z < e; el++) {}
            if (el >= nb) {
                rc = -1;
                break;
            }
            if (h == g) {
                s = sl;
                z = el + 1;
            } else if (sl < z) {
                if (el + 1 > z) z = el + 1;
            } else {
                break;
            }
        }
        if (rc) break;
        for (; oi < s; oi++) jbuf_put(out, orig->p + ol[oi].a, ol[oi].z - ol[oi].a);
        apply_reps(base->p + bl[s].a, bl[z - 1].z - bl[s].a, m + g, h - g, bl[s].a, out);
        oi = z;
        g = h;
    }
    for (; rc == 0 && oi < no; oi++) jbuf_put(out, orig->p + ol[oi].a, ol[oi].z - ol[oi].a);
    free(ol);
    free(bl);
    return rc;
}

/* The edits against the file: found (exactly, else after normalization), unique, not overlapping, applied.
 * 0 with the new content in nc, or 1 with the tool's error in out. */
static int edit_apply(const char *path, const json_value *ed, const jbuf *orig, jbuf *nc, jbuf *out, tool_err *e)
{
    size_t n = ed->n, fz = 0;
    edit_m *m = calloc(n, sizeof *m);
    jbuf fo, fn, base;
    jbuf_init(&fo);
    jbuf_init(&fn);
    jbuf_init(&base);
    char idx[160], idx2[64];
    int rc = 0;
    if (!m) return terr(e, 500, "out of memory", NULL, NULL);
    fuzzy(orig->p ? orig->p : "", orig->len, &fo);
    for (size_t i = 0; i < n && !rc; i++) {
        const json_value *o = json_get(ed->items[i], "old_text");
        if (find(orig->p, orig->len, o->str, o->len, 0) != SIZE_MAX) continue;
        jbuf_reset(&fn);
        fuzzy(o->str, o->len, &fn);
        if (find(fo.p, fo.len, fn.p, fn.len, 0) == SIZE_MAX) {
            snprintf(idx, sizeof idx, "could not find edits[%zu].old_text in ", i);
            put_errf(out, "%s%s, it must match the file's current content exactly", idx, path);
            rc = 1;
        }
        fz = 1;
    }
    if (!rc) jbuf_put(&base, fz ? fo.p : orig->p, fz ? fo.len : orig->len);
    for (size_t i = 0; i < n && !rc; i++) {
        const json_value *o = json_get(ed->items[i], "old_text"), *t = json_get(ed->items[i], "new_text");
        jbuf_reset(&fn);
        fuzzy(o->str, o->len, &fn);
        size_t occ = count_occ(&fo, &fn);
        if (occ > 1) {
            snprintf(idx, sizeof idx, "found %zu occurrences of edits[%zu].old_text in ", occ, i);
            put_errf(out, "%s%s, it must be unique", idx, path);
            rc = 1;
            break;
        }
        const char *nd = fz ? fn.p : o->str;
        size_t nl = fz ? fn.len : o->len, at = find(base.p, base.len, nd, nl, 0);
        if (at == SIZE_MAX) rc = terr(e, 500, "bankml refuses this edit: edits[%s].old_text is not in the "
                                      "normalized file (b11669's behaviour is undefined there)", "?", NULL);
        m[i] = (edit_m){i, at, nl, t->str, t->len};
    }
    for (size_t i = 1; i < n && !rc; i++) {   /* std::sort of a few: insertion, ties kept in order */
        edit_m v = m[i];
        size_t j = i;
        for (; j > 0 && v.at < m[j - 1].at; j--) m[j] = m[j - 1];
        m[j] = v;
    }
    for (size_t i = 1; i < n && !rc; i++) {
        if (m[i - 1].at + m[i - 1].len > m[i].at) {
            snprintf(idx, sizeof idx, "edits[%zu] and edits[%zu] overlap in ", m[i - 1].edit, m[i].edit);
            snprintf(idx2, sizeof idx2, "%s", "; merge them into one edit or target disjoint regions");
            jbuf msg;
            jbuf_init(&msg);
            jbuf_puts(&msg, idx);
            jbuf_puts(&msg, path);
            jbuf_puts(&msg, idx2);
            put_err(out, msg.p ? msg.p : "", msg.len);
            jbuf_free(&msg);
            rc = 1;
        }
    }
    if (!rc) {
        if (!fz) apply_reps(base.p ? base.p : "", base.len, m, n, 0, nc);
        else if (apply_fuzzy(orig, &base, m, n, nc) != 0)
            rc = terr(e, 500, "bankml refuses this edit: a replacement falls outside the file's lines (b11669's "
                      "behaviour is undefined there)%s%s", NULL, NULL);
    }
    free(m);
    jbuf_free(&fo);
    jbuf_free(&fn);
    jbuf_free(&base);
    if (!rc && (nc->oom || fo.oom)) rc = terr(e, 500, "out of memory", NULL, NULL);
    return rc;
}

static int t_edit_file(const tparams *tp, jbuf *out, tool_err *e)
{
    const char *path = p_str(tp, "path", NULL, e);
    const json_value *ed = path ? p_at(tp, "edits", e) : NULL;
    if (!ed) return -1;
    if (ed->type != JSON_ARRAY || ed->n == 0) {
        put_errf(out, "\"edits\" must be a non-empty array", NULL, NULL);
        return 0;
    }
    for (size_t i = 0; i < ed->n; i++) {
        const json_value *it = ed->items[i];
        const char *kk[2] = {"old_text", "new_text"};
        for (int k = 0; k < 2; k++) {
            const json_value *v = it->type == JSON_OBJECT ? json_get(it, kk[k]) : NULL;
            if (it->type != JSON_OBJECT)
                return terr(e, 400, "[json.exception.type_error.304] cannot use at() with %s", llama_jtype(it), NULL);
            if (!v) return terr(e, 400, "[json.exception.out_of_range.403] key '%s' not found", kk[k], NULL);
            if (v->type != JSON_STRING)
                return terr(e, 400, "[json.exception.type_error.302] type must be string, but is %s", llama_jtype(v),
                            NULL);
        }
        if (json_get(it, "old_text")->len == 0) {
            char m[96];
            snprintf(m, sizeof m, "edits[%zu].old_text must not be empty", i);
            put_errf(out, "%s", m, NULL);
            return 0;
        }
    }
    if (tools_io_check(tp, e)) return -1;
    jbuf full, orig, nc;
    jbuf_init(&full);
    jbuf_init(&orig);
    jbuf_init(&nc);
    resolve(tp, path, &full);
    int rc = 0, r = full.oom ? -1 : tio_read(full.p, &orig);
    if (r < 0) rc = terr(e, 500, "out of memory", NULL, NULL);
    else if (r == 0) put_err_path(out, "failed to open file: ", path);
    else if ((rc = edit_apply(path, ed, &orig, &nc, out, e)) == 1) rc = 0;
    else if (rc == 0) {
        if (nc.len == orig.len && (!nc.len || !memcmp(nc.p, orig.p, nc.len)))
            put_errf(out, "no changes made: the replacement(s) produced identical content", NULL, NULL);
        else if (!tio_write(full.p, nc.p ? nc.p : "", nc.len)) put_err_path(out, "failed to write file: ", path);
        else {
            jbuf_puts(out, "{\"result\":\"file edited successfully\",\"path\":");
            json_put_cstr_nl(out, path);
            jbuf_printf(out, ",\"edits_applied\":%d}", (int)ed->n);
        }
    }
    jbuf_free(&full);
    jbuf_free(&orig);
    jbuf_free(&nc);
    return rc;
}

/* ---- get_info ---- */

/* string_strip: ASCII whitespace off both ends. */
static void put_stripped(jbuf *out, const char *s, size_t n)
{
    while (n && strchr(" \t\n\r\f\v", s[0])) s++, n--;
    while (n && strchr(" \t\n\r\f\v", s[n - 1])) n--;
    json_put_str_nl(out, s, n);
}

static int t_get_info(const tparams *tp, jbuf *out, tool_err *e)
{
    if (tools_io_check(tp, e)) return -1;
    char *argv[] = {"uname", "-a", NULL};
    tio_exec r;
    tio_run(argv, tp->cwd && tp->cwd[0] ? tp->cwd : NULL, 4096, 5, NULL, NULL, &r);
    jbuf_puts(out, "{\"os\":");
    if (r.exit_code == 0 && !r.timed_out) put_stripped(out, r.out.p, r.out.len);
    else jbuf_puts(out, "\"unknown\"");
    jbuf_free(&r.out);
    jbuf_puts(out, ",\"cwd\":");
    if (tp->cwd && tp->cwd[0]) {
        json_put_cstr_nl(out, tp->cwd);
    } else {
        char cur[4096];
        json_put_cstr_nl(out, getcwd(cur, sizeof cur) ? cur : "");
    }
    jbuf_putc(out, '}');
    return 0;
}

/* ---- the routes ---- */

typedef struct {
    unsigned mask;
} tools_api;

static const char body_403[] = "{\"error\":{\"message\":\"this feature is disabled\",\"type\":\"feature_disabled\"}}";

static void h_403(serve_req *req, serve_resp *resp, void *ud)
{
    (void)req;
    (void)ud;
    serve_reply(resp, 403, SERVE_JSON, body_403, sizeof body_403 - 1);
}

static void h_get(serve_req *req, serve_resp *resp, void *ud)
{
    tools_api *api = ud;
    jbuf out;
    (void)req;
    jbuf_init(&out);
    jbuf_putc(&out, '[');
    for (int i = 0, k = 0; i < TOOL_COUNT; i++) {
        if (!(api->mask & 1u << i)) continue;
        if (k++) jbuf_putc(&out, ',');
        jbuf_puts(&out, tool_json[i]);
    }
    jbuf_putc(&out, ']');
    if (out.oom) serve_reply_text(resp, 500, "out of memory");
    else serve_reply(resp, 200, SERVE_JSON, out.p, out.len);
    jbuf_free(&out);
}

/* format_error_response's object, unwrapped, as the tools route sends it. */
static void reply_plain_err(serve_resp *resp, int status, const char *msg)
{
    jbuf b;
    jbuf_init(&b);
    jbuf_printf(&b, "{\"code\":%d,\"message\":", status);
    json_put_cstr_nl(&b, msg);
    jbuf_puts(&b, ",\"type\":");
    json_put_cstr_nl(&b, status == 400 ? "invalid_request_error" : status == 501 ? "not_supported_error" :
                     "server_error");
    jbuf_putc(&b, '}');
    if (b.oom) serve_reply_text(resp, 500, "out of memory");
    else serve_reply(resp, status, SERVE_JSON, b.p, b.len);
    jbuf_free(&b);
}

static int run_tool(int k, tparams *tp, jbuf *out, exec_stream *st, tool_err *e)
{
    switch (k) {
    case TOOL_READ_FILE: return t_read_file(tp, out, e);
    case TOOL_FILE_GLOB_SEARCH: return t_file_glob_search(tp, out, e);
    case TOOL_GREP_SEARCH: return t_grep_search(tp, out, e);
    case TOOL_EXEC_SHELL_COMMAND: return t_exec(tp, out, st, e);
    case TOOL_WRITE_FILE: return t_write_file(tp, out, e);
    case TOOL_EDIT_FILE: return t_edit_file(tp, out, e);
    default: return t_get_info(tp, out, e);
    }
}

/* The body's tool, params and stream as handle_post reads them, the headers set into the params; the
 * tool's index, or -1 after answering. */
static int read_post(tools_api *api, serve_req *req, serve_resp *resp, const json_value *body, tparams *tp,
                     int *stream)
{
    tool_err e = {0, ""};
    const json_value *t = body->type == JSON_OBJECT ? json_get(body, "tool") : NULL;
    if (body->type != JSON_OBJECT) terr(&e, 400, "[json.exception.type_error.304] cannot use at() with %s",
                                        llama_jtype(body), NULL);
    else if (!t) terr(&e, 400, "[json.exception.out_of_range.403] key 'tool' not found", NULL, NULL);
    else if (t->type != JSON_STRING)
        terr(&e, 400, "[json.exception.type_error.302] type must be string, but is %s", llama_jtype(t), NULL);
    const json_value *s = e.status ? NULL : json_get(body, "stream");
    if (s && s->type != JSON_TRUE && s->type != JSON_FALSE)
        terr(&e, 400, "[json.exception.type_error.302] type must be boolean, but is %s", llama_jtype(s), NULL);
    if (e.status) return reply_plain_err(resp, e.status, e.msg), -1;
    *stream = s && s->type == JSON_TRUE;
    memset(tp, 0, sizeof *tp);
    tp->glob_budget = TIO_GLOB_STEPS;
    tp->p = json_get(body, "params");
    tp->is_obj = !tp->p || tp->p->type == JSON_OBJECT;
    static const char *const hdr[3] = {"x-tool-cwd", "x-tool-runtime", "x-resp-type"};
    const char **dst[3] = {&tp->cwd, &tp->runtime, &tp->resp_type};
    for (int i = 0; i < 3; i++) {
        const char *v = serve_header_get(req, hdr[i]);
        if (!v || !v[0]) continue;
        if (tp->p && tp->p->type == JSON_NULL) tp->is_obj = 1;
        if (!tp->is_obj) {
            terr(&e, 400, "[json.exception.type_error.305] cannot use operator[] with a string argument with %s",
                 llama_jtype(tp->p), NULL);
            return reply_plain_err(resp, e.status, e.msg), -1;
        }
        *dst[i] = v;
    }
    int k = -1;
    for (int i = 0; i < TOOL_COUNT; i++)
        if ((api->mask & 1u << i) && !strcmp(t->str, tool_names[i])) k = i;
    if (k < 0 || (*stream && k != TOOL_EXEC_SHELL_COMMAND)) {   /* find_tool's invalid_argument: a 404 */
        serve_reply(resp, 404, SERVE_JSON, SERVE_BODY_404, strlen(SERVE_BODY_404));
        return -1;
    }
    return k;
}

static void h_post(serve_req *req, serve_resp *resp, void *ud)
{
    tools_api *api = ud;
    const char *text = req->body ? req->body : "";
    size_t a = 0, z = req->body_len;
    char perr[512];
    jbuf why;
    jbuf_init(&why);
    int rc = serve_llama_json_check(text, req->body_len, &why, &a, &z);
    if (rc == 1) {
        reply_plain_err(resp, 400, why.oom ? "invalid JSON" : why.p);
        jbuf_free(&why);
        return;
    }
    jbuf_free(&why);
    if (rc != 0) a = 0, z = req->body_len;
    json_value *body = json_parse(text + a, z - a, perr, sizeof perr);
    if (!body) {
        reply_plain_err(resp, 400, perr);
        return;
    }
    tparams tp;
    int stream = 0, k = read_post(api, req, resp, body, &tp, &stream);
    if (k < 0) {
        json_free(body);
        return;
    }
    tool_err e = {0, ""};
    jbuf out;
    jbuf_init(&out);
    if (stream) {
        exec_stream st = {resp, req, 0};
        serve_resp_header(resp, "X-Accel-Buffering", "no");
        if (serve_stream_begin(resp, 200, "text/event-stream") == 0) {
            jbuf_puts(&out, "{\"done\":true");
            if (run_tool(k, &tp, &out, &st, &e) != 0) {
                jbuf_puts(&out, ",\"error\":");
                json_put_cstr_nl(&out, e.msg);
            }
            jbuf_putc(&out, '}');
            if (!st.gone && !out.oom) serve_sse_event(resp, out.p, out.len);
        }
    } else if (run_tool(k, &tp, &out, NULL, &e) != 0) {
        reply_plain_err(resp, e.status, e.msg);
    } else if (out.oom) {
        reply_plain_err(resp, 500, "out of memory");
    } else {
        serve_reply(resp, 200, SERVE_JSON, out.p, out.len);
    }
    jbuf_free(&out);
    json_free(body);
}

void *tools_register(serve_server *srv, unsigned mask)
{
    tools_api *api = calloc(1, sizeof *api);
    if (!api) return NULL;
    api->mask = mask & TOOLS_ALL;
    int rc = api->mask ? serve_route(srv, "GET", "/tools", h_get, api, 0) | serve_route(srv, "POST", "/tools", h_post, api, 0)
                       : serve_route(srv, "GET", "/tools", h_403, api, 0) | serve_route(srv, "POST", "/tools", h_403, api, 0);
    if (rc) {
        free(api);
        return NULL;
    }
    return api;
}

void tools_free(void *tools) { free(tools); }
