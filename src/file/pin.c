/*
 * pin.c -- the sha256 pin: look a GGUF's record up in a FORK.json, check the
 * file against it, or write the record.
 *
 * The FORK.json is read with the strict parser in json.c rather than a
 * narrow scanner: a file that is not JSON is reported as such instead of
 * silently reading as "unpinned", and pin_write can rewrite the file keeping
 * every key it does not understand. The parsed tree is never modified; the
 * new entry is spliced in while printing (json.c owns its node layout).
 */
#include "base/base.h"
#include "file/pin.h"

#include "base/json.h"
#include "base/sha256.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A FORK.json is a few kilobytes; anything past this is not one, and reading
 * it whole would only spend memory. */
#define PIN_FORK_MAX ((size_t)64 << 20)

/* The part of s[0..n) after the last '/', as the GGUF's name is matched
 * against FORK.json paths written with or without directories. */
static const char *base_of(const char *s, size_t n, size_t *blen)
{
    const char *slash = memrchr(s, '/', n);
    const char *b = slash ? slash + 1 : s;
    *blen = n - (size_t)(b - s);
    return b;
}

static const char *base_cstr(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* ---- file identity ---- */

int pin_ident_of(const char *path, pin_ident *id)
{
    struct stat st;
    if (stat(path, &st) != 0) return -1;
    memset(id, 0, sizeof *id);
    id->dev = st.st_dev;
    id->ino = st.st_ino;
    id->size = st.st_size;
    id->mtime_sec = (int64_t)st.st_mtim.tv_sec;
    id->mtime_nsec = st.st_mtim.tv_nsec;
    id->ctime_sec = (int64_t)st.st_ctim.tv_sec;
    id->ctime_nsec = st.st_ctim.tv_nsec;
    return 0;
}

int pin_ident_same(const pin_ident *a, const pin_ident *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime_sec == b->mtime_sec && a->mtime_nsec == b->mtime_nsec &&
           a->ctime_sec == b->ctime_sec && a->ctime_nsec == b->ctime_nsec;
}

/* ---- lookup ---- */

/* The "files" array of a parsed FORK.json: 0 with *files set (NULL when the
 * key is absent), or -1 with err filled when the shape is wrong. */
static int files_of(const json_value *root, const json_value **files,
                    char *err, size_t errlen)
{
    const json_value *f;
    if (root->type != JSON_OBJECT) {
        bk_err(err, errlen, "FORK.json is not a JSON object");
        return -1;
    }
    f = json_get(root, "files");
    if (f && f->type != JSON_ARRAY) {
        bk_err(err, errlen, "FORK.json \"files\" is not an array");
        return -1;
    }
    *files = f;
    return 0;
}

/* Index of the first entry of files whose "path" has base name name[0..nlen),
 * or -1. Entries that are not objects, or whose path is not a string, are
 * skipped: they cannot name this file. */
static long find_entry(const json_value *files, const char *name, size_t nlen)
{
    if (!files) return -1;
    for (size_t i = 0; i < files->n; i++) {
        const char *p, *b;
        size_t plen, blen;
        if (files->items[i]->type != JSON_OBJECT) continue;
        if (!json_as_str(json_get(files->items[i], "path"), &p, &plen)) continue;
        b = base_of(p, plen, &blen);
        if (blen == nlen && memcmp(b, name, nlen) == 0) return (long)i;
    }
    return -1;
}

/* The entry's sha256, lower-cased into out, if it is exactly 64 hex digits. */
static int entry_sha(const json_value *entry, char out[65])
{
    const char *s;
    size_t n;
    if (!json_as_str(json_get(entry, "sha256"), &s, &n) || n != 64) return 0;
    for (size_t i = 0; i < 64; i++)
        if (bk_hexval(s[i]) < 0) return 0;
    for (size_t i = 0; i < 64; i++)
        out[i] = "0123456789abcdef"[bk_hexval(s[i])];
    out[64] = 0;
    return 1;
}

int pin_lookup(const char *fork_json_text, size_t len, const char *name,
               char sha_out[65], uint64_t *bytes_out, char *err, size_t errlen)
{
    const json_value *files;
    json_value *root;
    size_t nlen;
    const char *nb = base_of(name, strlen(name), &nlen);
    long at;
    int rc = 0;

    root = json_parse(fork_json_text, len, err, errlen);
    if (!root) return -1;
    if (files_of(root, &files, err, errlen) != 0) {
        json_free(root);
        return -1;
    }
    at = find_entry(files, nb, nlen);
    if (at >= 0) {
        const json_value *entry = files->items[at];
        char sha[65];
        if (entry_sha(entry, sha)) {
            int64_t bytes;
            memcpy(sha_out, sha, sizeof sha);
            if (bytes_out)
                *bytes_out = json_as_i64(json_get(entry, "bytes"), &bytes) && bytes >= 0
                                 ? (uint64_t)bytes : PIN_BYTES_UNKNOWN;
            rc = 1;
        }
    }
    json_free(root);
    return rc;
}

/* ---- reading the FORK.json and hashing the GGUF ---- */

/* Reads a whole file into a malloc'd, NUL-ended buffer. NULL with errno set
 * on failure; *mode gets the file's permission bits. */
static char *read_all(const char *path, size_t *len, mode_t *mode)
{
    struct stat st;
    char *buf = NULL;
    size_t n = 0, cap = 0;
    int fd, saved;

    do fd = open(path, O_RDONLY | O_CLOEXEC);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) return NULL;
    if (fstat(fd, &st) != 0) goto fail;
    if (mode) *mode = st.st_mode & 07777;
    for (;;) {
        ssize_t got;
        if (cap - n < 4096 + 1) {
            size_t ncap = cap ? cap * 2 : 16384;
            char *nb;
            if (ncap > PIN_FORK_MAX + 4096 + 1) {
                if (n > PIN_FORK_MAX) { errno = EFBIG; goto fail; }
                ncap = PIN_FORK_MAX + 4096 + 1;
            }
            nb = realloc(buf, ncap);
            if (!nb) { errno = ENOMEM; goto fail; }
            buf = nb;
            cap = ncap;
        }
        got = read(fd, buf + n, cap - n - 1);
        if (got < 0) {
            if (errno == EINTR) continue;
            goto fail;
        }
        if (got == 0) break;
        n += (size_t)got;
        if (n > PIN_FORK_MAX) { errno = EFBIG; goto fail; }
    }
    close(fd);
    buf[n] = 0;
    *len = n;
    return buf;
fail:
    saved = errno;
    free(buf);
    close(fd);
    errno = saved;
    return NULL;
}

/* Hashes the GGUF between two identity checks, so the digest is known to
 * belong to the file that is still there: a file rewritten in place (size,
 * mtime) or replaced (inode) during the hash is refused. Returns 0/1/2 as the
 * public functions; *id gets the identity on success. */
static int hash_identified(const char *path, const char *name, char hex[65],
                           pin_ident *id, char *err, size_t errlen)
{
    pin_ident before, after;
    struct stat st;
    uint8_t d[32];

    if (stat(path, &st) != 0 || pin_ident_of(path, &before) != 0) {
        bk_err(err, errlen, "cannot hash %s: %s", name, strerror(errno));
        return 1;
    }
    if (!S_ISREG(st.st_mode)) {   /* a FIFO or device would never end */
        bk_err(err, errlen, "cannot hash %s: %s", name,
               S_ISDIR(st.st_mode) ? strerror(EISDIR) : "not a regular file");
        return 1;
    }
    if (sha256_file(path, d) != 0) {
        bk_err(err, errlen, "cannot hash %s: %s", name, strerror(errno));
        return 1;
    }
    if (pin_ident_of(path, &after) != 0 || !pin_ident_same(&before, &after)) {
        bk_err(err, errlen, "%s changed while it was being hashed: refused", path);
        return 2;
    }
    sha256_hex(d, hex);
    *id = before;
    return 0;
}

int pin_check(const char *gguf_path, const char *fork_path, char sha_out[65],
              char *err, size_t errlen)
{
    const char *name = base_cstr(gguf_path);
    char want[65], got[65], why[512];
    size_t len;
    pin_ident id;
    char *text;
    int rc;

    if (sha_out) sha_out[0] = 0;
    text = read_all(fork_path, &len, NULL);
    if (!text) {
        bk_err(err, errlen, "cannot read %s: %s", fork_path, strerror(errno));
        return 1;
    }
    rc = pin_lookup(text, len, name, want, NULL, why, sizeof why);
    free(text);
    if (rc < 0) {
        bk_err(err, errlen, "%s: %s: refused", fork_path, why);
        return 2;
    }
    if (rc == 0) {
        bk_err(err, errlen, "%s has no sha256 record in FORK.json: unpinned, refused (if it is the file you mean to "
               "run, pin it: bankml pin %s --fork %s --write)", name, gguf_path, fork_path);
        return 2;
    }
    rc = hash_identified(gguf_path, name, got, &id, err, errlen);
    if (rc != 0) return rc;
    if (sha_out) memcpy(sha_out, got, 65);
    if (strcmp(got, want) != 0) {
        bk_err(err, errlen, "%s sha256 %s != pinned %s: refused", name, got, want);
        return 2;
    }
    return 0;
}

/* ---- writing ---- */

/* The record pin_write puts into the FORK.json. */
typedef struct {
    const char *name;   /* base name of the GGUF */
    uint64_t bytes;
    const char *sha;    /* 64 lowercase hex digits */
} record;

static void put_newline(jbuf *b, int depth)
{
    jbuf_putc(b, '\n');
    for (int i = 0; i < depth; i++) jbuf_put(b, "  ", 2);
}

static int key_is(const json_value *obj, size_t i, const char *k)
{
    size_t kl = strlen(k);
    return obj->key_lens[i] == kl && memcmp(obj->keys[i], k, kl) == 0;
}

/* Pretty-prints v at nesting depth `depth`, two spaces a level, as Python's
 * json.dumps(indent=2) lays it out, so a person can read and diff the file.
 * Scalars go out as json_put_value writes them (numbers as their literal
 * text). Recursion is bounded by the parser's JSON_MAX_DEPTH. */
static void put_pretty(jbuf *b, const json_value *v, int depth)
{
    if (v->type != JSON_ARRAY && v->type != JSON_OBJECT) {
        json_put_value(b, v);
        return;
    }
    if (v->n == 0) {
        jbuf_puts(b, v->type == JSON_ARRAY ? "[]" : "{}");
        return;
    }
    jbuf_putc(b, v->type == JSON_ARRAY ? '[' : '{');
    for (size_t i = 0; i < v->n; i++) {
        if (i) jbuf_putc(b, ',');
        put_newline(b, depth + 1);
        if (v->type == JSON_OBJECT) {
            json_put_str(b, v->keys[i], v->key_lens[i]);
            jbuf_put(b, ": ", 2);
        }
        put_pretty(b, v->items[i], depth + 1);
    }
    put_newline(b, depth);
    jbuf_putc(b, v->type == JSON_ARRAY ? ']' : '}');
}

/* The file's entry: the old one (if any) with path, bytes and sha256 set,
 * its other keys kept in place; the three are appended when missing. */
static void put_entry(jbuf *b, const json_value *old, const record *r, int depth)
{
    int have_path = 0, have_bytes = 0, have_sha = 0, first = 1;
    jbuf_putc(b, '{');
    for (size_t i = 0; old && i < old->n; i++) {
        if (!first) jbuf_putc(b, ',');
        first = 0;
        put_newline(b, depth + 1);
        json_put_str(b, old->keys[i], old->key_lens[i]);
        jbuf_put(b, ": ", 2);
        if (key_is(old, i, "path")) {
            json_put_cstr(b, r->name);
            have_path = 1;
        } else if (key_is(old, i, "bytes")) {
            jbuf_printf(b, "%llu", (unsigned long long)r->bytes);
            have_bytes = 1;
        } else if (key_is(old, i, "sha256")) {
            json_put_cstr(b, r->sha);
            have_sha = 1;
        } else {
            put_pretty(b, old->items[i], depth + 1);
        }
    }
    if (!have_path) {
        if (!first) jbuf_putc(b, ',');
        first = 0;
        put_newline(b, depth + 1);
        jbuf_puts(b, "\"path\": ");
        json_put_cstr(b, r->name);
    }
    if (!have_bytes) {
        if (!first) jbuf_putc(b, ',');
        first = 0;
        put_newline(b, depth + 1);
        jbuf_printf(b, "\"bytes\": %llu", (unsigned long long)r->bytes);
    }
    if (!have_sha) {
        jbuf_putc(b, ',');
        put_newline(b, depth + 1);
        jbuf_puts(b, "\"sha256\": ");
        json_put_cstr(b, r->sha);
    }
    put_newline(b, depth);
    jbuf_putc(b, '}');
}

/* The "files" array with entry `at` replaced by the record, or the record
 * appended when at < 0. files may be NULL (a new array). */
static void put_files(jbuf *b, const json_value *files, long at, const record *r, int depth)
{
    size_t n = files ? files->n : 0;
    jbuf_putc(b, '[');
    for (size_t i = 0; i < n; i++) {
        if (i) jbuf_putc(b, ',');
        put_newline(b, depth + 1);
        if ((long)i == at) put_entry(b, files->items[i], r, depth + 1);
        else put_pretty(b, files->items[i], depth + 1);
    }
    if (at < 0) {
        if (n) jbuf_putc(b, ',');
        put_newline(b, depth + 1);
        put_entry(b, NULL, r, depth + 1);
    }
    put_newline(b, depth);
    jbuf_putc(b, ']');
}

/* The whole new FORK.json: root's keys in order, "files" spliced, or added
 * last when root has none. root may be NULL (a new file). */
static void put_fork(jbuf *b, const json_value *root, const json_value *files,
                     long at, const record *r)
{
    size_t n = root ? root->n : 0;
    jbuf_putc(b, '{');
    for (size_t i = 0; i < n; i++) {
        if (i) jbuf_putc(b, ',');
        put_newline(b, 1);
        json_put_str(b, root->keys[i], root->key_lens[i]);
        jbuf_put(b, ": ", 2);
        if (root->items[i] == files) put_files(b, files, at, r, 1);
        else put_pretty(b, root->items[i], 1);
    }
    if (!files) {
        if (n) jbuf_putc(b, ',');
        put_newline(b, 1);
        jbuf_puts(b, "\"files\": ");
        put_files(b, NULL, -1, r, 1);
    }
    jbuf_puts(b, "\n}\n");
}

static int write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Makes the rename itself durable: fsync the directory holding path. Best
 * effort; the data is already safe in the renamed file. */
static void sync_dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir;
    int fd;
    if (!slash) dir = strdup(".");
    else if (slash == path) dir = strdup("/");
    else dir = strndup(path, (size_t)(slash - path));
    if (!dir) return;
    fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    free(dir);
}

int pin_replace_file(const char *path, const char *tmp_in, const void *data, size_t n, long mode)
{
    size_t plen = strlen(tmp_in ? tmp_in : path);
    char *tmp = malloc(plen + 32);
    int fd, saved;

    if (!tmp) { errno = ENOMEM; return -1; }
    if (tmp_in) snprintf(tmp, plen + 32, "%s", tmp_in);
    else snprintf(tmp, plen + 32, "%s.tmp.%ld", path, (long)getpid());
    do fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) goto fail_nofile;
    if ((mode >= 0 && fchmod(fd, (mode_t)mode) != 0) || write_all(fd, data, n) != 0 ||
        fsync(fd) != 0)
        goto fail;
    if (close(fd) != 0) { fd = -1; goto fail; }
    fd = -1;
    if (rename(tmp, path) != 0) goto fail;
    free(tmp);
    sync_dir_of(path);
    return 0;
fail:
    saved = errno;
    if (fd >= 0) close(fd);
    unlink(tmp);
    errno = saved;
fail_nofile:
    saved = errno;
    free(tmp);
    errno = saved;
    return -1;
}

/* The writer's pid in a temporary's name: "<x>.tmp.<pid>" (pin_replace_file's
 * own) or ".<x>.MODEL.json.<pid>.<n>.tmp" / ".<x>.MODEL.json.<pid>.tmp"
 * (derived models'); 0 when the name is neither. */
static long pin_temp_pid(const char *name)
{
    const char *p = strstr(name, ".tmp."), *q;
    char *end;
    long pid;
    if (p && p[5] >= '0' && p[5] <= '9') {
        pid = strtol(p + 5, &end, 10);
        return *end == 0 ? pid : 0;
    }
    size_t n = strlen(name);
    if (name[0] != '.' || n < 4 || strcmp(name + n - 4, ".tmp") || !(q = strstr(name, ".MODEL.json."))) return 0;
    q += 12;
    if (*q < '0' || *q > '9') return 0;
    pid = strtol(q, &end, 10);
    if (*end == '.' && end[1] >= '0' && end[1] <= '9') strtol(end + 1, &end, 10);
    return strcmp(end, ".tmp") == 0 ? pid : 0;
}

int pin_clean_temps(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int gone = 0;
    if (!d) return -1;
    while ((e = readdir(d))) {
        long pid = pin_temp_pid(e->d_name);
        struct stat st;
        if (pid <= 0 || pid == (long)getpid()) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;   /* its writer may still be at work */
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
        if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) continue;   /* a symlink itself goes, never its target */
        if (unlinkat(dirfd(d), e->d_name, 0) == 0) gone++;
    }
    closedir(d);
    return gone;
}

int pin_write(const char *gguf_path, const char *fork_path, char sha_out[65],
              char *err, size_t errlen)
{
    const char *name = base_cstr(gguf_path);
    const json_value *files = NULL;
    json_value *root = NULL;
    char hex[65], why[512];
    pin_ident id;
    char *text = NULL;
    size_t len = 0;
    long keep_mode = -1;
    mode_t mode = 0;
    long at = -1;
    jbuf out;
    record r;
    int rc;

    if (sha_out) sha_out[0] = 0;
    rc = hash_identified(gguf_path, name, hex, &id, err, errlen);
    if (rc != 0) return rc;
    if (sha_out) memcpy(sha_out, hex, 65);

    text = read_all(fork_path, &len, &mode);
    if (!text && errno != ENOENT) {
        bk_err(err, errlen, "cannot read %s: %s", fork_path, strerror(errno));
        return 1;
    }
    if (text) {
        keep_mode = (long)mode;
        root = json_parse(text, len, why, sizeof why);
        free(text);
        if (!root || files_of(root, &files, why, sizeof why) != 0) {
            bk_err(err, errlen, "%s: %s: refused", fork_path, why);
            json_free(root);
            return 2;
        }
        at = find_entry(files, name, strlen(name));
    }

    r.name = name;
    r.bytes = (uint64_t)id.size;
    r.sha = hex;
    jbuf_init(&out);
    put_fork(&out, root, files, at, &r);
    json_free(root);
    if (out.oom) {
        jbuf_free(&out);
        bk_err(err, errlen, "cannot write %s: %s", fork_path, strerror(ENOMEM));
        return 1;
    }
    {   /* a killed earlier --write's temporaries beside it go first */
        const char *slash = strrchr(fork_path, '/');
        char *dir = slash ? strndup(fork_path, (size_t)(slash - fork_path) + (slash == fork_path)) : strdup(".");
        if (dir) pin_clean_temps(dir);
        free(dir);
    }
    if (pin_replace_file(fork_path, NULL, out.p, out.len, keep_mode) != 0) {
        bk_err(err, errlen, "cannot write %s: %s", fork_path, strerror(errno));
        jbuf_free(&out);
        return 1;
    }
    jbuf_free(&out);
    return 0;
}
