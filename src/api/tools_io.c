/*
 * tools_io.c -- the host side of llama-server b11669's built-in tools
 * (server-tools.cpp's tools_io_basic and run_subprocess, common.cpp's
 * glob_match), in bankml's words: paths, globs, the listing and the child
 * processes. See tools_int.h and docs/modules/tools.md.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "api/tools_int.h"

/* ---- paths ---- */

static pthread_once_t home_once = PTHREAD_ONCE_INIT;
static char *home_value;

static void home_read(void)
{
    const char *h = getenv("HOME");
    home_value = h ? strdup(h) : NULL;
}

/* lexically_normal over the '/'-separated text p[0..n): "." and empty
 * elements gone, "x/.." folded, ".." after the root dropped; an empty
 * relative result is ".". Appended to out. */
static void lex_normal(const char *p, size_t n, jbuf *out)
{
    int abs = n > 0 && p[0] == '/';
    size_t *start = malloc((n / 2 + 2) * sizeof *start), *len = malloc((n / 2 + 2) * sizeof *len), k = 0;
    if (!start || !len) {
        free(start);
        free(len);
        out->oom = 1;
        return;
    }
    for (size_t i = 0; i < n;) {
        while (i < n && p[i] == '/') i++;
        size_t j = i;
        while (j < n && p[j] != '/') j++;
        size_t l = j - i;
        if (l == 0 || (l == 1 && p[i] == '.')) {
            i = j;
            continue;
        }
        if (l == 2 && p[i] == '.' && p[i + 1] == '.') {
            if (k > 0 && !(len[k - 1] == 2 && !memcmp(p + start[k - 1], "..", 2))) {
                k--;
            } else if (!abs) {
                start[k] = i;
                len[k++] = l;
            }
            i = j;
            continue;
        }
        start[k] = i;
        len[k++] = l;
        i = j;
    }
    if (abs) jbuf_putc(out, '/');
    for (size_t i = 0; i < k; i++) {
        if (i) jbuf_putc(out, '/');
        jbuf_put(out, p + start[i], len[i]);
    }
    if (!abs && k == 0) jbuf_putc(out, '.');
    free(start);
    free(len);
}

void tio_resolve(const char *cwd, const char *path, jbuf *out)
{
    jbuf full;
    jbuf_init(&full);
    pthread_once(&home_once, home_read);
    if (path[0] == '~' && (path[1] == 0 || path[1] == '/' || path[1] == '\\') && home_value && home_value[0]) {
        jbuf_puts(&full, home_value);
        jbuf_puts(&full, path + 1);
    } else {
        jbuf_puts(&full, path);
    }
    if (full.oom) {
        out->oom = 1;
        jbuf_free(&full);
        return;
    }
    if (full.len == 0 || full.p[0] != '/') {
        jbuf j;
        jbuf_init(&j);
        if (!cwd || !cwd[0]) {
            char cur[4096];
            if (!getcwd(cur, sizeof cur)) {   /* fs::current_path failed: the path as it is */
                jbuf_put(out, full.p, full.len);
                jbuf_free(&full);
                jbuf_free(&j);
                return;
            }
            jbuf_puts(&j, cur);
        } else {
            jbuf_puts(&j, cwd);
        }
        if (j.len && j.p[j.len - 1] != '/') jbuf_putc(&j, '/');
        jbuf_put(&j, full.p, full.len);
        jbuf_free(&full);
        full = j;
    }
    if (full.oom) out->oom = 1;
    else lex_normal(full.p, full.len, out);
    jbuf_free(&full);
}

/* ---- globs ---- */

/* glob_class_match: c against the class text [p, end). */
static int class_match(char c, const char *p, const char *end)
{
    int neg = 0, hit = 0;
    if (*p == '!') {
        neg = 1;
        p++;
    }
    if (*p == ']' || *p == '-') {
        if (p < end && *p == c) return !neg;
        p++;
    }
    while (p < end) {
        if (p + 2 < end && p[1] == '-' && p[2] != ']') {
            if (c >= p[0] && c <= p[2]) {
                hit = 1;
                break;
            }
            p += 3;
        } else {
            if (*p == c) {
                hit = 1;
                break;
            }
            p++;
        }
    }
    return neg ? !hit : hit;
}

static int glob_at(const char *p, const char *s, long *budget, int depth)
{
    if (--*budget < 0 || depth > 4096) return -1;
    if (*p == 0) return *s == 0;
    if (p[0] == '*' && p[1] == '*') {
        int r = glob_at(p + 2, s, budget, depth + 1);
        if (r) return r;
        return *s ? glob_at(p, s + 1, budget, depth + 1) : 0;
    }
    if (*p == '*') {
        for (; *s && *s != '/'; s++) {
            int r = glob_at(p + 1, s, budget, depth + 1);
            if (r) return r;
        }
        return glob_at(p + 1, s, budget, depth + 1);
    }
    if (*p == '?' && *s && *s != '/') return glob_at(p + 1, s + 1, budget, depth + 1);
    if (*p == '[') {
        const char *e = p + 1;
        if (*e == ']' || *e == '-') e++;
        while (*e && *e != ']') e++;
        if (*e == ']') {
            if (!*s) return 0;
            return class_match(*s, p + 1, e) ? glob_at(e + 1, s + 1, budget, depth + 1) : 0;
        }
        return *s == '[' ? glob_at(p + 1, s + 1, budget, depth + 1) : 0;
    }
    if (*p == *s) return glob_at(p + 1, s + 1, budget, depth + 1);
    return 0;
}

int tio_glob(const char *pat, const char *s, long *budget) { return glob_at(pat, s, budget, 0); }

int tio_path_glob(const char *pat, const char *rel, long *budget)
{
    if (!strchr(pat, '/')) {
        const char *b = strrchr(rel, '/');
        return tio_glob(pat, b ? b + 1 : rel, budget);
    }
    if (!strcmp(pat, "**") || !strncmp(pat, "**/", 3) || pat[0] == '/') return tio_glob(pat, rel, budget);
    size_t n = strlen(pat);
    char *q = malloc(n + 4);
    if (!q) return -1;
    memcpy(q, "**/", 3);
    memcpy(q + 3, pat, n + 1);
    int r = tio_glob(q, rel, budget);
    free(q);
    return r;
}

/* ---- files ---- */

int tio_is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int tio_is_reg(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int tio_file_size(const char *path, uint64_t *size)
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    *size = (uint64_t)st.st_size;
    return 1;
}

int tio_read(const char *path, jbuf *out)
{
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    int rc = jbuf_read_stream(out, f);
    fclose(f);
    if (out->oom) return -1;
    return rc == 0 ? 1 : 0;
}

/* create_directories(p): each missing ancestor made; an existing non-directory fails. 1, or 0. */
static int make_dirs(char *p)
{
    if (!*p) return 1;
    if (tio_is_dir(p)) return 1;
    for (char *q = p + 1; *q; q++) {
        if (*q != '/') continue;
        *q = 0;
        int ok = tio_is_dir(p) || mkdir(p, 0777) == 0 || (errno == EEXIST && tio_is_dir(p));
        *q = '/';
        if (!ok) return 0;
    }
    return mkdir(p, 0777) == 0 || (errno == EEXIST && tio_is_dir(p));
}

int tio_write(const char *path, const char *p, size_t n)
{
    const char *slash = strrchr(path, '/');
    if (slash && slash != path) {
        char *dir = strndup(path, (size_t)(slash - path));
        int ok = dir && make_dirs(dir);
        free(dir);
        if (!ok) return 0;
    }
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    int ok = fwrite(p, 1, n, f) == n;
    if (fclose(f) != 0) ok = 0;
    return ok;
}

/* ---- child processes ---- */

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The child: its own process group, the pipes in place, cwd, exec; a failure's errno goes back on rep. */
static void child_exec(char *const argv[], const char *cwd, int in_fd, int out_fd, int rep)
{
    setpgid(0, 0);
    if (dup2(in_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(out_fd, 2) < 0) goto fail;
    if (in_fd > 2) close(in_fd);
    if (out_fd > 2) close(out_fd);
    signal(SIGPIPE, SIG_DFL);
    if (cwd && chdir(cwd) != 0) goto fail;
    execvp(argv[0], argv);
fail:;
    int e = errno;
    ssize_t w = write(rep, &e, sizeof e);
    (void)w;
    _exit(127);
}

/* Appends the bytes read in b[0..n) as run_subprocess does: up to max_output, each kept piece given to fn. */
static void take(tio_exec *r, const char *b, size_t n, size_t max_output, int *truncated, int *stop,
                 tio_chunk_fn fn, void *ud)
{
    if (*truncated) return;
    if (r->out.len + n <= max_output) {
        jbuf_put(&r->out, b, n);
        if (fn && fn(ud, b, n)) *stop = 1;
    } else {
        size_t rest = max_output - r->out.len;
        jbuf_put(&r->out, b, rest);
        if (fn && rest > 0) fn(ud, b, rest);
        *truncated = 1;
    }
}

void tio_run(char *const argv[], const char *cwd, size_t max_output, int timeout_s, tio_chunk_fn fn, void *ud,
             tio_exec *r)
{
    int in[2] = {-1, -1}, out[2] = {-1, -1}, rep[2] = {-1, -1};
    jbuf_init(&r->out);
    r->exit_code = -1;
    r->timed_out = 0;
    if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC) || pipe2(rep, O_CLOEXEC)) goto spawn_fail;
    pid_t pid = fork();
    if (pid < 0) goto spawn_fail;
    if (pid == 0) child_exec(argv, cwd, in[0], out[1], rep[1]);
    setpgid(pid, pid);
    close(in[0]);
    close(in[1]);   /* stdin closed at once: nothing is written to it */
    close(out[1]);
    close(rep[1]);
    in[0] = in[1] = out[1] = rep[1] = -1;
    int e;
    ssize_t got;
    do got = read(rep[0], &e, sizeof e); while (got < 0 && errno == EINTR);
    close(rep[0]);
    rep[0] = -1;
    if (got > 0) {   /* it could not start: posix_spawn's failure */
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {}
        close(out[0]);
        jbuf_puts(&r->out, "failed to spawn process");
        return;
    }
    int64_t deadline = mono_ms() + (int64_t)timeout_s * 1000;
    int truncated = 0, stop = 0;
    char buf[4096];
    for (;;) {
        if (!r->timed_out && mono_ms() >= deadline) {
            r->timed_out = 1;
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
        }
        struct pollfd pf = {out[0], POLLIN, 0};
        int pr = poll(&pf, 1, 100);
        if (pr < 0 && errno != EINTR) break;
        if (pr <= 0) continue;
        ssize_t n = read(out[0], buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        take(r, buf, (size_t)n, max_output, &truncated, &stop, fn, ud);
        if (stop) {
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            break;
        }
    }
    close(out[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0) {
        if (errno != EINTR) {
            st = 1 << 8;
            break;
        }
    }
    r->exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 1;
    if (truncated) jbuf_puts(&r->out, "\n[output truncated]");
    return;
spawn_fail:
    for (int i = 0; i < 2; i++) {
        if (in[i] >= 0) close(in[i]);
        if (out[i] >= 0) close(out[i]);
        if (rep[i] >= 0) close(rep[i]);
    }
    jbuf_puts(&r->out, "failed to spawn process");
}

/* ---- listing ---- */

#define TIO_GIT_MAX_OUTPUT ((size_t)8 * 1024 * 1024)
#define TIO_LIST_TIMEOUT_S 15

static const char *const junk_dirs[] = {
    ".git", ".svn", ".hg", "node_modules", "__pycache__", ".venv", "venv", "dist", "build", "target", ".cache",
    ".idea", ".vscode",
};

static int is_junk(const char *name)
{
    for (size_t i = 0; i < sizeof junk_dirs / sizeof junk_dirs[0]; i++)
        if (!strcmp(name, junk_dirs[i])) return 1;
    return 0;
}

static void list_push(tio_list *l, const char *rel, size_t n, int is_dir)
{
    if (l->oom) return;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        tio_entry *v = realloc(l->v, cap * sizeof *v);
        if (!v) {
            l->oom = 1;
            return;
        }
        l->v = v;
        l->cap = cap;
    }
    char *s = strndup(rel, n);
    if (!s) {
        l->oom = 1;
        return;
    }
    l->v[l->n].rel = s;
    l->v[l->n++].is_dir = is_dir;
}

void tio_list_free(tio_list *l)
{
    for (size_t i = 0; i < l->n; i++) free(l->v[i].rel);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static int entry_depth(const char *rel, size_t n)
{
    int d = 1;
    for (size_t i = 0; i < n; i++) d += rel[i] == '/';
    return d;
}

/* git ls-files' lines into l (b11669's parse: '\r' dropped, empty lines skipped, '\\' as '/', the depth
 * filter, each a regular file under base). */
static void git_lines(const char *base, const jbuf *o, int max_depth, tio_list *l)
{
    jbuf full, line;
    jbuf_init(&full);
    jbuf_init(&line);
    for (size_t i = 0; i < o->len;) {
        size_t j = i;
        while (j < o->len && o->p[j] != '\n') j++;
        jbuf_reset(&line);
        jbuf_put(&line, o->p + i, j - i);
        i = j + 1;
        if (line.oom) break;
        if (line.len && line.p[line.len - 1] == '\r') line.p[--line.len] = 0;
        if (!line.len) continue;
        for (size_t k = 0; k < line.len; k++)
            if (line.p[k] == '\\') line.p[k] = '/';
        if (max_depth > 0 && entry_depth(line.p, line.len) > max_depth) continue;
        jbuf_reset(&full);
        jbuf j2;
        jbuf_init(&j2);
        jbuf_puts(&j2, base);
        if (j2.len && j2.p[j2.len - 1] != '/') jbuf_putc(&j2, '/');
        jbuf_put(&j2, line.p, line.len);
        if (!j2.oom) tio_resolve(NULL, j2.p, &full);
        jbuf_free(&j2);
        if (full.oom) {
            l->oom = 1;
            break;
        }
        if (tio_is_reg(full.p)) list_push(l, line.p, line.len, 0);
    }
    if (line.oom) l->oom = 1;
    jbuf_free(&full);
    jbuf_free(&line);
}

typedef struct {
    char *dir, *rel;
    int depth;
} walk_item;

/* One directory of the walk: its entries into l, its subdirectories onto the stack. 0, or -1 to stop
 * (the deadline: truncated; or out of memory). */
static int walk_dir(walk_item it, int max_depth, int kind, int64_t deadline, walk_item **stack, size_t *ns,
                    size_t *cap, tio_list *l)
{
    DIR *d = opendir(it.dir);
    if (!d) {
        if (errno != EACCES) l->truncated = 1;   /* skip_permission_denied: an unreadable one is skipped */
        return 0;
    }
    struct dirent *de;
    jbuf path, rel;
    jbuf_init(&path);
    jbuf_init(&rel);
    int rc = 0;
    for (;;) {
        errno = 0;
        if (!(de = readdir(d))) {
            if (errno) l->truncated = 1;
            break;
        }
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        if (mono_ms() >= deadline) {
            l->truncated = 1;
            rc = -1;
            break;
        }
        jbuf_reset(&path);
        jbuf_puts(&path, it.dir);
        if (path.len && path.p[path.len - 1] != '/') jbuf_putc(&path, '/');
        jbuf_puts(&path, de->d_name);
        jbuf_reset(&rel);
        if (it.rel[0]) {
            jbuf_puts(&rel, it.rel);
            jbuf_putc(&rel, '/');
        }
        jbuf_puts(&rel, de->d_name);
        if (path.oom || rel.oom) {
            l->oom = 1;
            rc = -1;
            break;
        }
        struct stat st, lst;
        if (stat(path.p, &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) {
            if (kind != TIO_FILES) list_push(l, rel.p, rel.len, 1);
            if (is_junk(de->d_name)) continue;
            int link = lstat(path.p, &lst) != 0 || S_ISLNK(lst.st_mode);
            if (!link && (max_depth == 0 || it.depth + 1 < max_depth)) {
                if (*ns == *cap) {
                    size_t c2 = *cap ? *cap * 2 : 16;
                    walk_item *s2 = realloc(*stack, c2 * sizeof *s2);
                    if (!s2) {
                        l->oom = 1;
                        rc = -1;
                        break;
                    }
                    *stack = s2;
                    *cap = c2;
                }
                (*stack)[*ns].dir = strdup(path.p);
                (*stack)[*ns].rel = strdup(rel.p);
                (*stack)[*ns].depth = it.depth + 1;
                if (!(*stack)[*ns].dir || !(*stack)[*ns].rel) {
                    free((*stack)[*ns].dir);
                    free((*stack)[*ns].rel);
                    l->oom = 1;
                    rc = -1;
                    break;
                }
                (*ns)++;
            }
        } else if (S_ISREG(st.st_mode)) {
            if (kind != TIO_DIRS) list_push(l, rel.p, rel.len, 0);
        }
        if (l->oom) {
            rc = -1;
            break;
        }
    }
    closedir(d);
    jbuf_free(&path);
    jbuf_free(&rel);
    return rc;
}

static void walk(const char *base, int max_depth, int kind, int64_t deadline, tio_list *l)
{
    walk_item *stack = malloc(sizeof *stack);
    size_t ns = 0, cap = 1;
    if (!stack || !(stack[0].dir = strdup(base)) || !(stack[0].rel = strdup(""))) {
        if (stack) free(stack[0].dir);
        free(stack);
        l->oom = 1;
        return;
    }
    stack[0].depth = 0;
    ns = 1;
    while (ns > 0) {
        if (mono_ms() >= deadline) {
            l->truncated = 1;
            break;
        }
        walk_item it = stack[--ns];
        int rc = walk_dir(it, max_depth, kind, deadline, &stack, &ns, &cap, l);
        free(it.dir);
        free(it.rel);
        if (rc) break;
    }
    while (ns > 0) {
        ns--;
        free(stack[ns].dir);
        free(stack[ns].rel);
    }
    free(stack);
}

int tio_list_entries(const char *cwd, const char *base, int max_depth, int kind, tio_list *out)
{
    memset(out, 0, sizeof *out);
    if (!tio_is_dir(base)) return 1;
    int64_t deadline = mono_ms() + TIO_LIST_TIMEOUT_S * 1000;
    if (kind == TIO_FILES) {
        char *argv[] = {"git", "-C", (char *)base, "ls-files", "--cached", "--others", "--exclude-standard", NULL};
        tio_exec r;
        tio_run(argv, cwd, TIO_GIT_MAX_OUTPUT, TIO_LIST_TIMEOUT_S, NULL, NULL, &r);
        if (r.exit_code == 0 && !r.timed_out) {
            if (r.out.oom) out->oom = 1;
            else git_lines(base, &r.out, max_depth, out);
            jbuf_free(&r.out);
            return out->oom ? -1 : 0;
        }
        jbuf_free(&r.out);
    }
    walk(base, max_depth, kind, deadline, out);
    return out->oom ? -1 : 0;
}
