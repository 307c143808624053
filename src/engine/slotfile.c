/*
 * slotfile.c -- llama-server's slot files (POST /slots/:id?action=save|
 * restore|erase): b11669's llama_state_seq_save_file layout ("ggsq" v4) for
 * bankml's KV cache of any -ctk/-ctv type it plays, byte for byte, so a file saved by either server
 * restores in the other; bankml's own checks on top (a sidecar naming the
 * model, the context and the cache type, and the file's sha256). See
 * engine.h and docs/modules/engine.md.
 *
 * The layout (little-endian), as b11669 writes one sequence (measured):
 *   u32 magic 0x67677371 ("ggsq"), u32 version 4,
 *   u32 n_packed, n_packed u32s: server_tokens' state (-1, version 1, u32 n,
 *       n token ids, u32 n_media = 0), or a plain token list (older files),
 *   u32 n_stream (one per slot without --kv-unified), then per stream:
 *   u32 cell_count (0 for every stream but the slot's), and when not 0:
 *       per cell: i32 pos, u32 n_seq_id (1), i32 seq_id;
 *       u32 v_trans (0 with flash attention), u32 n_layer, u32 n_rot_k,
 *       u32 n_rot_v (the Hadamard widths: 0 for f16, e.g. 128 and 64 for a
 *       q8_0 cache on heads of 128);
 *       per layer: i32 K type (ggml's: 1 f16, 8 q8_0, ...), u64 row bytes
 *       (ggml_row_size of the type over n_embd_k_gqa), cell_count rows;
 *       per layer: i32 V type, u64 row bytes, cell_count rows.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"
#include "base/sha256.h"
#include "engine/internal.h"

#define SF_MAGIC 0x67677371u   /* LLAMA_STATE_SEQ_MAGIC */
#define SF_VERSION 4u          /* LLAMA_STATE_SEQ_VERSION */
#define SF_TOKENS_VERSION 1u   /* SERVER_TOKENS_STATE_VERSION */
#define SF_SIDECAR ".bankml.json"

/* ------------------------------------------------------------------ file names */

int engine_filename_valid(const char *name, size_t len)
{
    const unsigned char *s = (const unsigned char *)name;
    if (len == 0 || len > 255) return 0;
    for (size_t i = 0; i < len;) {
        /* common_parse_utf8_codepoint: the lead byte's length, continuation bytes checked */
        size_t k;
        uint32_t c;
        if (s[i] < 0x80) k = 1, c = s[i];
        else if ((s[i] & 0x40) == 0) return 0;
        else if ((s[i] & 0x20) == 0) k = 2, c = s[i] & 0x1fu;
        else if ((s[i] & 0x10) == 0) k = 3, c = s[i] & 0x0fu;
        else if ((s[i] & 0x08) == 0) k = 4, c = s[i] & 0x07u;
        else return 0;
        if (len - i < k) return 0;
        for (size_t j = 1; j < k; j++) {
            if ((s[i + j] & 0xc0) != 0x80) return 0;
            c = (c << 6) | (s[i + j] & 0x3fu);
        }
        if ((k == 2 && c < 0x80) || (k == 3 && c < 0x800) || (k == 4 && c < 0x10000)) return 0;   /* overlong */
        if (c <= 0x1f || c == 0x7f || (c >= 0x80 && c <= 0x9f) || c == 0xff0e || c == 0x2215 || c == 0x2216 ||
            (c >= 0xd800 && c <= 0xdfff) || c > 0x10ffff || c == 0xfffd || c == 0xfeff || c == ':' || c == '*' ||
            c == '?' || c == '"' || c == '<' || c == '>' || c == '|' || c == '/' || c == '\\')
            return 0;
        i += k;
    }
    if (s[0] == ' ' || s[len - 1] == ' ' || s[len - 1] == '.') return 0;
    for (size_t i = 0; i + 1 < len; i++)
        if (s[i] == '.' && s[i + 1] == '.') return 0;
    return 1;
}

/* ------------------------------------------------------------------ the buffer */

typedef struct {
    unsigned char *p;
    size_t len, cap;
    int oom;
} sf_buf;

static void sf_put(sf_buf *b, const void *d, size_t n)
{
    if (b->oom || n == 0) return;   /* an empty slot's tokens may be NULL */
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n) cap *= 2;
        unsigned char *np = realloc(b->p, cap);
        if (!np) {
            b->oom = 1;
            return;
        }
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->len, d, n);
    b->len += n;
}

static void sf_u32(sf_buf *b, uint32_t v)
{
    unsigned char x[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    sf_put(b, x, 4);
}

static void sf_u64(sf_buf *b, uint64_t v)
{
    sf_u32(b, (uint32_t)v);
    sf_u32(b, (uint32_t)(v >> 32));
}

static engine_slot *sf_slot(engine_model *m, int id)
{
    /* server_context::get_slot_by_id: id % slots.size(), the int converted to size_t */
    return &m->slots[(size_t)(int64_t)id % (size_t)m->n_slots];
}

static int sf_slot_index(const engine_model *m, int id) { return (int)((size_t)(int64_t)id % (size_t)m->n_slots); }

/* ------------------------------------------------------------------ save */

/* The slot's state in b11669's layout. kv: fw_kv_save's bytes (per layer its
 * n K rows, then its n V rows). */
static void sf_encode(sf_buf *b, const engine_model *m, int slot, const engine_slot *sl, const uint8_t *kv)
{
    const fw_hparams *hp = fw_weights_hp(m->fw_w);
    fw_kv_info ki;
    fw_kv_info_of(m->fw_w, &ki);
    const size_t n = sl->n;
    sf_u32(b, SF_MAGIC);
    sf_u32(b, SF_VERSION);
    sf_u32(b, (uint32_t)(n + 4));      /* server_tokens::serialize: marker, version, the list, no media */
    sf_u32(b, 0xffffffffu);
    sf_u32(b, SF_TOKENS_VERSION);
    sf_u32(b, (uint32_t)n);
    sf_put(b, sl->toks, n * sizeof(int32_t));   /* little-endian hosts only (x86-64, aarch64) */
    sf_u32(b, 0);
    sf_u32(b, (uint32_t)m->n_slots);
    for (int s = 0; s < m->n_slots; s++) {
        if (s != slot || n == 0) {
            sf_u32(b, 0);
            continue;
        }
        sf_u32(b, (uint32_t)n);
        for (size_t i = 0; i < n; i++) {
            sf_u32(b, (uint32_t)i);
            sf_u32(b, 1);
            sf_u32(b, (uint32_t)slot);
        }
        sf_u32(b, 0);                  /* v_trans */
        sf_u32(b, hp->n_layer);
        sf_u32(b, (uint32_t)ki.rot_k);
        sf_u32(b, (uint32_t)ki.rot_v);
        for (int part = 0; part < 2; part++)
            for (uint32_t il = 0; il < hp->n_layer; il++) {   /* fw_kv_save: per layer K rows, then V rows */
                const size_t row = part ? ki.v_row : ki.k_row;
                sf_u32(b, kvq_info_of(part ? ki.tv : ki.tk)->ggml);
                sf_u64(b, row);
                sf_put(b, kv + (size_t)il * n * (ki.k_row + ki.v_row) + (part ? n * ki.k_row : 0), n * row);
            }
    }
}

/* The sidecar: what a ggsq file cannot say (which model, which context and
 * cache type), and the file's own sha256, so damage shows. */
static int sf_write_sidecar(engine_model *m, const char *path, const char *tmp, const sf_buf *b, size_t n_tokens)
{
    uint8_t d[32];
    char hex[65];
    sha256(b->p, b->len, d);
    sha256_hex(d, hex);
    jbuf j;
    jbuf_init(&j);
    fw_kv_info ki;
    fw_kv_info_of(m->fw_w, &ki);
    jbuf_printf(&j, "{\n  \"bankml_slot_file\": 1,\n  \"model_sha256\": \"%s\",\n  \"n_ctx\": %zu,\n"
                    "  \"cache_type_k\": \"%s\",\n  \"cache_type_v\": \"%s\",\n  \"n_tokens\": %zu,\n"
                    "  \"file_bytes\": %zu,\n  \"file_sha256\": \"%s\"\n}\n",
                engine_model_sha256(m), fw_n_ctx(m->slots[0].fw), kvq_info_of(ki.tk)->name,
                kvq_info_of(ki.tv)->name, n_tokens, b->len, hex);
    size_t pl = strlen(path);
    char *side = malloc(pl + sizeof SF_SIDECAR);
    int rc = -1;
    if (side && !j.oom) {
        memcpy(side, path, pl);
        memcpy(side + pl, SF_SIDECAR, sizeof SF_SIDECAR);
        rc = pin_replace_file(side, tmp, j.p, j.len, -1);
    } else {
        errno = ENOMEM;
    }
    free(side);
    jbuf_free(&j);
    return rc;
}

/* A temporary name beside path, short enough for any file name there. */
static void sf_tmp_name(char *out, size_t n, const char *path, const char *what)
{
    const char *slash = strrchr(path, '/');
    int dl = slash ? (int)(slash - path + 1) : 0;
    snprintf(out, n, "%.*s.bankml-%s.%ld.tmp", dl, path, what, (long)getpid());
}

int engine_slot_save(engine *e, engine_model *m, int id, const char *path, engine_slot_io *out, engine_error *er)
{
    int64_t t0 = bk_mono_us();
    int slot = sf_slot_index(m, id);
    engine_slot *sl = sf_slot(m, id);
    (void)e;
    size_t kv_len = fw_kv_bytes(sl->fw, sl->n);
    uint8_t *kv = malloc(kv_len ? kv_len : 1);
    sf_buf b = {0};
    if (!kv || fw_kv_save(sl->fw, sl->n, kv, kv_len) != 0) {
        free(kv);
        engine_err(er, ENGINE_INTERNAL, "Unable to save slot: out of memory");
        return -1;
    }
    sf_encode(&b, m, slot, sl, kv);
    free(kv);
    size_t pl = strlen(path);
    char *tmp = malloc(pl + 64);
    if (b.oom || !tmp) {
        free(b.p);
        free(tmp);
        engine_err(er, ENGINE_INTERNAL, "Unable to save slot: out of memory");
        return -1;
    }
    sf_tmp_name(tmp, pl + 64, path, "slot");
    int rc = pin_replace_file(path, tmp, b.p, b.len, -1);
    if (rc != 0) {
        engine_err(er, ENGINE_INTERNAL, "Unable to save slot: cannot write %s: %s", path, strerror(errno));
    } else {
        sf_tmp_name(tmp, pl + 64, path, "side");
        if ((rc = sf_write_sidecar(m, path, tmp, &b, sl->n)) != 0)
            engine_err(er, ENGINE_INTERNAL, "Unable to save slot: the slot is in %s, but its sidecar %s%s could not be "
                       "written (%s): without it a restore checks the file's structure only", path, path, SF_SIDECAR,
                       strerror(errno));
    }
    free(tmp);
    if (out) {
        out->n_tokens = sl->n;
        out->n_bytes = b.len;
        out->ms = (double)(bk_mono_us() - t0) / 1000.0;
    }
    free(b.p);
    return rc;
}

/* ------------------------------------------------------------------ restore */

typedef struct {
    const unsigned char *p;
    size_t len, off;
    int short_read;
} sf_rd;

static uint32_t sf_get32(sf_rd *r)
{
    if (r->len - r->off < 4) {
        r->short_read = 1;
        r->off = r->len;
        return 0;
    }
    const unsigned char *x = r->p + r->off;
    r->off += 4;
    return (uint32_t)x[0] | (uint32_t)x[1] << 8 | (uint32_t)x[2] << 16 | (uint32_t)x[3] << 24;
}

static uint64_t sf_get64(sf_rd *r)
{
    uint64_t lo = sf_get32(r);
    return lo | (uint64_t)sf_get32(r) << 32;
}

/* What a file holds once its structure passed. */
typedef struct {
    int32_t *toks;             /* malloc'd */
    size_t n_toks;
    size_t n_cells;
    uint8_t *kv;               /* in fw_kv_restore's layout, malloc'd */
    size_t kv_len;
} sf_state;

#define SF_FAIL(...) do { bk_err(why, whylen, __VA_ARGS__); return -1; } while (0)

/* The packed token list (server_tokens::deserialize), or a plain one. */
static int sf_tokens(sf_rd *r, sf_state *st, size_t n_ctx, char *why, size_t whylen)
{
    uint32_t magic = sf_get32(r), version = sf_get32(r), n_packed = sf_get32(r);
    if (r->short_read || magic != SF_MAGIC || version != SF_VERSION)
        SF_FAIL("not a llama.cpp sequence state file (ggsq version 4): it starts with %08x %08x", magic, version);
    if (n_packed > (r->len - r->off) / 4) SF_FAIL("truncated: its token list claims %u tokens", n_packed);
    sf_rd pk = {r->p + r->off, (size_t)n_packed * 4, 0, 0};
    r->off += (size_t)n_packed * 4;
    size_t first = 0, n = n_packed;
    if (n_packed > 0 && sf_get32(&pk) == 0xffffffffu) {
        if (sf_get32(&pk) != SF_TOKENS_VERSION) SF_FAIL("Unsupported server tokens state version");
        n = sf_get32(&pk);
        if (pk.short_read || n > (pk.len - pk.off) / 4) SF_FAIL("the token list is damaged (it claims %zu tokens)", n);
        first = pk.off / 4;
        pk.off += n * 4;
        uint32_t n_media = sf_get32(&pk);
        if (pk.short_read) SF_FAIL("the token list is damaged (no media count)");
        if (n_media) SF_FAIL("it holds media chunks (%u), which bankml does not restore (no mmproj)", n_media);
        if (pk.len - pk.off >= 4) SF_FAIL("Trailing data in server tokens state");
    }
    if (n > n_ctx) SF_FAIL("Restored prompt does not fit in the slot context (%zu tokens, %zu cells)", n, n_ctx);
    st->toks = malloc((n ? n : 1) * sizeof *st->toks);
    if (!st->toks) SF_FAIL("out of memory");
    memcpy(st->toks, pk.p + first * 4, n * 4);
    st->n_toks = n;
    return 0;
}

/* One layer part's header and rows into the kv buffer (part 0 K, 1 V). */
static int sf_rows(sf_rd *r, sf_state *st, uint32_t il, int part, const fw_kv_info *ki, char *why, size_t whylen)
{
    const char *kind = part ? "V" : "K";
    const kvq_info *want = kvq_info_of(part ? ki->tv : ki->tk);
    const size_t want_row = part ? ki->v_row : ki->k_row;
    int32_t type = (int32_t)sf_get32(r);
    uint64_t row = sf_get64(r);
    if (r->short_read) SF_FAIL("truncated in layer %u's %s header", il, kind);
    if (type < 0 || (uint32_t)type != want->ggml) {
        const int t = kvq_of_ggml((uint32_t)type);
        SF_FAIL("it was saved with a %s cache of type %s; this server keeps %s (start it with -ct%c %s to restore "
                "this file)", kind, t >= 0 ? kvq_info_of((kvq_type)t)->name : "(not a cache type)", want->name,
                part ? 'v' : 'k', t >= 0 ? kvq_info_of((kvq_type)t)->name : "?");
    }
    if (row != want_row)
        SF_FAIL("layer %u's %s rows are %llu bytes, this model's are %zu: the file is for another model", il, kind,
                (unsigned long long)row, want_row);
    size_t bytes = st->n_cells * want_row;
    if (r->len - r->off < bytes) SF_FAIL("truncated in layer %u's %s rows", il, kind);
    memcpy(st->kv + (size_t)il * st->n_cells * (ki->k_row + ki->v_row) + (part ? st->n_cells * ki->k_row : 0),
           r->p + r->off, bytes);
    r->off += bytes;
    return 0;
}

/* One stream's cells (state_read_meta, state_read_data). */
static int sf_stream(sf_rd *r, sf_state *st, const engine_model *m, uint32_t cells, char *why, size_t whylen)
{
    const fw_hparams *hp = fw_weights_hp(m->fw_w);
    fw_kv_info ki;
    fw_kv_info_of(m->fw_w, &ki);
    if (st->n_cells) SF_FAIL("it holds cells in two streams; a slot file holds one sequence");
    if (cells > fw_n_ctx(m->slots[0].fw))
        SF_FAIL("No available space in KV cache (%u cells, the slot has %zu)", cells, fw_n_ctx(m->slots[0].fw));
    if ((size_t)cells * 12 > r->len - r->off) SF_FAIL("truncated in its %u cells", cells);
    for (uint32_t i = 0; i < cells; i++) {
        uint32_t pos = sf_get32(r), n_seq = sf_get32(r);
        (void)sf_get32(r);   /* the saved sequence id: the restore puts the cells in this slot's */
        if (n_seq != 1) SF_FAIL("cell %u belongs to %u sequences (one expected)", i, n_seq);
        if (pos != i)
            SF_FAIL("cell %u holds position %d: bankml's cache keeps positions 0..n-1 in order (a context shift or "
                    "a removed range is not restored)", i, (int)pos);
    }
    st->n_cells = cells;
    uint32_t v_trans = sf_get32(r), n_layer = sf_get32(r), rot_k = sf_get32(r), rot_v = sf_get32(r);
    if (r->short_read) SF_FAIL("truncated after its cells");
    if (v_trans) SF_FAIL("its V cache is transposed (saved with -fa off); bankml keeps flash attention's layout");
    if (n_layer != hp->n_layer) SF_FAIL("it has %u layers, this model %u: the file is for another model", n_layer,
                                         hp->n_layer);
    st->kv_len = (size_t)cells * (ki.k_row + ki.v_row) * hp->n_layer;
    st->kv = malloc(st->kv_len ? st->kv_len : 1);
    if (!st->kv) SF_FAIL("out of memory");
    for (int part = 0; part < 2; part++)
        for (uint32_t il = 0; il < n_layer; il++)
            if (sf_rows(r, st, il, part, &ki, why, whylen) != 0) return -1;
    /* after the rows, so that a file of another cache type says so first */
    if (rot_k != ki.rot_k || rot_v != ki.rot_v)
        SF_FAIL("its cache was rotated with n_rot_k %u, n_rot_v %u; this server's is %zu, %zu (LLAMA_ATTN_ROT_DISABLE "
                "set on one side only)", rot_k, rot_v, ki.rot_k, ki.rot_v);
    return 0;
}

static int sf_decode(const unsigned char *p, size_t len, const engine_model *m, sf_state *st, char *why,
                     size_t whylen)
{
    sf_rd r = {p, len, 0, 0};
    if (sf_tokens(&r, st, fw_n_ctx(m->slots[0].fw), why, whylen) != 0) return -1;
    uint32_t n_stream = sf_get32(&r);
    if (r.short_read) SF_FAIL("truncated after its tokens");
    if (n_stream != (uint32_t)m->n_slots)
        SF_FAIL("n_stream mismatch: saved by a server with %u slots (-np %u), this one has %d", n_stream, n_stream,
                m->n_slots);
    for (uint32_t s = 0; s < n_stream; s++) {
        uint32_t cells = sf_get32(&r);
        if (r.short_read) SF_FAIL("truncated in stream %u", s);
        if (cells && sf_stream(&r, st, m, cells, why, whylen) != 0) return -1;
    }
    if (r.off != len) SF_FAIL("%zu trailing bytes after the state", len - r.off);
    if (st->n_toks != st->n_cells)
        SF_FAIL("it holds %zu tokens but %zu cells: the two must agree", st->n_toks, st->n_cells);
    int32_t n_vocab = engine_model_n_tokens(m);
    for (size_t i = 0; i < st->n_toks; i++)
        if (st->toks[i] < 0 || st->toks[i] >= n_vocab)
            SF_FAIL("Invalid tokens in slot save file (token %zu is %d; the vocabulary has %d)", i, (int)st->toks[i],
                    (int)n_vocab);
    return 0;
}

/* The whole file, at most cap bytes (more is refused: trailing data). */
static unsigned char *sf_read_file(const char *path, size_t cap, size_t *len, char *why, size_t whylen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat stt;
    if (fd < 0) {
        bk_err(why, whylen, "cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    if (fstat(fd, &stt) != 0 || !S_ISREG(stt.st_mode)) {
        bk_err(why, whylen, "%s is not a regular file", path);
        close(fd);
        return NULL;
    }
    if ((uint64_t)stt.st_size > cap) {
        bk_err(why, whylen, "%s has %lld bytes, more than a slot of this model holds (%zu): trailing data, or a "
               "file for another model", path, (long long)stt.st_size, cap);
        close(fd);
        return NULL;
    }
    size_t n = (size_t)stt.st_size, got = 0;
    unsigned char *p = malloc(n ? n : 1);
    while (p && got < n) {
        ssize_t k = read(fd, p + got, n - got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        got += (size_t)k;
    }
    close(fd);
    if (!p || got != n) {
        bk_err(why, whylen, p ? "cannot read %s" : "out of memory reading %s", path);
        free(p);
        return NULL;
    }
    *len = n;
    return p;
}

/* The sidecar's checks, when there is one. 0 when none or it agrees. */
static int sf_check_sidecar(const engine_model *m, const char *path, const unsigned char *p, size_t len, char *why,
                            size_t whylen)
{
    size_t pl = strlen(path), sl = 0;
    char *side = malloc(pl + sizeof SF_SIDECAR);
    if (!side) SF_FAIL("out of memory");
    memcpy(side, path, pl);
    memcpy(side + pl, SF_SIDECAR, sizeof SF_SIDECAR);
    char err[256];
    unsigned char *txt = access(side, F_OK) == 0 ? sf_read_file(side, 1 << 16, &sl, err, sizeof err) : NULL;
    if (!txt && access(side, F_OK) != 0) {
        free(side);
        return 0;   /* a file llama-server wrote: its structure is all there is to check */
    }
    json_value *j = txt ? json_parse((const char *)txt, sl, err, sizeof err) : NULL;
    free(txt);
    const json_value *sha = j ? json_get(j, "model_sha256") : NULL, *fs = j ? json_get(j, "file_sha256") : NULL;
    const json_value *nc = j ? json_get(j, "n_ctx") : NULL, *ck = j ? json_get(j, "cache_type_k") : NULL;
    const json_value *cv = j ? json_get(j, "cache_type_v") : NULL;
    int64_t n_ctx = -1;
    int rc = -1;
    fw_kv_info ki;
    fw_kv_info_of(m->fw_w, &ki);
    uint8_t d[32];
    char hex[65];
    if (!sha || sha->type != JSON_STRING || !fs || fs->type != JSON_STRING || !nc || !json_as_i64(nc, &n_ctx) ||
        !ck || ck->type != JSON_STRING || !cv || cv->type != JSON_STRING) {
        bk_err(why, whylen, "its sidecar %s is damaged (%s); remove it to restore with the structural checks only",
               side, j ? "a member is missing or of another type" : err);
    } else if (strcmp(sha->str, engine_model_sha256(m)) != 0) {
        bk_err(why, whylen, "the slot was saved for another model (sha256 %.16s..., this server runs %.16s...)",
               sha->str, engine_model_sha256(m));
    } else if ((size_t)n_ctx != fw_n_ctx(m->slots[0].fw)) {
        bk_err(why, whylen, "the slot was saved with a %lld-cell slot context, this server's slots have %zu",
               (long long)n_ctx, fw_n_ctx(m->slots[0].fw));
    } else if (strcmp(ck->str, kvq_info_of(ki.tk)->name) != 0 || strcmp(cv->str, kvq_info_of(ki.tv)->name) != 0) {
        bk_err(why, whylen, "the slot was saved with a %s/%s cache (K/V), this server keeps %s/%s", ck->str,
               cv->str, kvq_info_of(ki.tk)->name, kvq_info_of(ki.tv)->name);
    } else {
        sha256(p, len, d);
        sha256_hex(d, hex);
        if (strcmp(hex, fs->str) != 0)
            bk_err(why, whylen, "%s changed since bankml saved it (its sha256 is not the one in %s): damaged, or "
                   "written since by another server; remove the sidecar to restore it with the structural checks "
                   "only", path, side);
        else rc = 0;
    }
    json_free(j);
    free(side);
    return rc;
}

int engine_slot_restore(engine *e, engine_model *m, int id, const char *path, engine_slot_io *out,
                        engine_error *er)
{
    int64_t t0 = bk_mono_us();
    engine_slot *sl = sf_slot(m, id);
    const fw_hparams *hp = fw_weights_hp(m->fw_w);
    fw_kv_info ki;
    fw_kv_info_of(m->fw_w, &ki);
    const size_t n_ctx = fw_n_ctx(sl->fw);
    /* the largest file a slot of this model can be: header, tokens, streams, cells, rows */
    size_t cap = 12 + (n_ctx + 4) * 4 + 4 + (size_t)m->n_slots * 4 + n_ctx * 12 + 16 +
                 (size_t)hp->n_layer * (24 + n_ctx * (ki.k_row + ki.v_row));
    char why[768];
    size_t len = 0;
    sf_state st = {0};
    unsigned char *p = sf_read_file(path, cap, &len, why, sizeof why);
    int rc = -1;
    if (p && sf_check_sidecar(m, path, p, len, why, sizeof why) == 0 &&
        sf_decode(p, len, m, &st, why, sizeof why) == 0) {
        rc = 0;
        if (st.n_cells && fw_kv_restore(sl->fw, st.n_cells, st.kv, st.kv_len) != 0) {
            bk_err(why, sizeof why, "the cells do not fit this slot");
            rc = -1;
        }
    }
    free(p);
    free(st.kv);
    if (rc != 0) {
        engine_slot_clear(sl);   /* never half filled: the next answer computes its whole prompt */
        free(st.toks);
        engine_view_tokens(e, m);
        engine_err(er, ENGINE_BAD_INPUT, "Unable to restore slot: %s", why);
        return -1;
    }
    if (st.n_cells == 0) fw_truncate(sl->fw, 0);
    free(sl->toks);
    sl->toks = st.toks;        /* the restored tokens are the slot's cached prefix */
    sl->n = sl->cap = st.n_toks;
    if (sl->cap == 0) sl->cap = 1;
    engine_view_tokens(e, m);
    if (out) {
        out->n_tokens = st.n_toks;
        out->n_bytes = len;
        out->ms = (double)(bk_mono_us() - t0) / 1000.0;
    }
    return 0;
}

size_t engine_slot_erase(engine *e, engine_model *m, int id)
{
    engine_slot *sl = sf_slot(m, id);
    size_t n = sl->n;
    engine_slot_clear(sl);
    engine_view_tokens(e, m);
    return n;
}
