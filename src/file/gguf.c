/*
 * gguf.c -- the GGUF header parser, the guard, the weight-type table,
 * checked tensor spans and the read-only map. See gguf.h for the contract
 * and docs/modules/gguf.md for the rules and where they come from.
 *
 * Read top to bottom: the type table; UTF-8 repair; the byte reader and the
 * header parse; metadata access and lazy array decoding; Python's str() of a
 * value; the guard's rules; the report's printers; guard_file; spans and the
 * map.
 */
#include "base/base.h"
#include "file/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Writes a one-line reason into err (if the caller gave room for one). */
// ---------------------------------------------------------------------------
// weight types

/* One row per ggml type id (and the fork's 142, 143), ggml-style: the guard
 * reads the names, tensor_span the layouts, and the kernels will hang their
 * function pointers here. Layouts are gguf-py's GGML_QUANT_SIZES at b11669
 * for the types bankml reads; every other row has 0, 0. */
static const gguf_type_info type_table[GGUF_TYPE_TABLE_SIZE] = {
    [GGUF_TYPE_F32]     = { "F32",     1,   4   },
    [GGUF_TYPE_F16]     = { "F16",     1,   2   },
    [GGUF_TYPE_Q4_0]    = { "Q4_0",    32,  18  },
    [GGUF_TYPE_Q4_1]    = { "Q4_1",    32,  20  },
    [GGUF_TYPE_Q5_0]    = { "Q5_0",    32,  22  },
    [GGUF_TYPE_Q5_1]    = { "Q5_1",    32,  24  },
    [GGUF_TYPE_Q8_0]    = { "Q8_0",    32,  34  },
    [GGUF_TYPE_Q8_1]    = { "Q8_1",    32,  36  },
    [GGUF_TYPE_Q2_K]    = { "Q2_K",    256, 84  },
    [GGUF_TYPE_Q3_K]    = { "Q3_K",    256, 110 },
    [GGUF_TYPE_Q4_K]    = { "Q4_K",    256, 144 },
    [GGUF_TYPE_Q5_K]    = { "Q5_K",    256, 176 },
    [GGUF_TYPE_Q6_K]    = { "Q6_K",    256, 210 },
    [GGUF_TYPE_Q8_K]    = { "Q8_K",    256, 292 },
    [GGUF_TYPE_IQ2_XXS] = { "IQ2_XXS", 256, 66  },
    [GGUF_TYPE_IQ2_XS]  = { "IQ2_XS",  256, 74  },
    [GGUF_TYPE_IQ3_XXS] = { "IQ3_XXS", 256, 98  },
    [GGUF_TYPE_IQ1_S]   = { "IQ1_S",   256, 50  },
    [GGUF_TYPE_IQ4_NL]  = { "IQ4_NL",  32,  18  },
    [GGUF_TYPE_IQ3_S]   = { "IQ3_S",   256, 110 },
    [GGUF_TYPE_IQ2_S]   = { "IQ2_S",   256, 82  },
    [GGUF_TYPE_IQ4_XS]  = { "IQ4_XS",  256, 136 },
    [GGUF_TYPE_I8]      = { "I8",      0,   0   },
    [GGUF_TYPE_I16]     = { "I16",     0,   0   },
    [GGUF_TYPE_I32]     = { "I32",     0,   0   },
    [GGUF_TYPE_I64]     = { "I64",     0,   0   },
    [GGUF_TYPE_F64]     = { "F64",     0,   0   },
    [GGUF_TYPE_IQ1_M]   = { "IQ1_M",   256, 56  },
    [GGUF_TYPE_BF16]    = { "BF16",    1,   2   },
    [GGUF_TYPE_TQ1_0]   = { "TQ1_0",   256, 54  },
    [GGUF_TYPE_TQ2_0]   = { "TQ2_0",   256, 66  },
    [GGUF_TYPE_MXFP4]   = { "MXFP4",   0,   0   },
    [GGUF_TYPE_NVFP4]   = { "NVFP4",   0,   0   },
    [GGUF_TYPE_Q1_0]    = { "Q1_0",    128, 18  },
    [GGUF_TYPE_Q2_0]    = { "Q2_0",    64,  18  },
    [GGUF_TYPE_PQ2_0]   = { "PQ2_0",   0,   0   },
    [GGUF_TYPE_PTQ1_0]  = { "PTQ1_0",  0,   0   },
};

const gguf_type_info *gguf_type_info_of(uint32_t id)
{
    return id < GGUF_TYPE_TABLE_SIZE ? &type_table[id] : NULL;
}

const char *gguf_type_name(uint32_t id, char buf[16])
{
    const gguf_type_info *ti = gguf_type_info_of(id);
    if (ti && ti->name) return ti->name;
    snprintf(buf, 16, "%" PRIu32, id);
    return buf;
}

int gguf_block_layout(uint32_t id, uint64_t *elems, uint64_t *bytes)
{
    const gguf_type_info *ti = gguf_type_info_of(id);
    if (!ti || ti->block_elems == 0 || ti->block_bytes == 0) return 0;
    *elems = ti->block_elems;
    *bytes = ti->block_bytes;
    return 1;
}

// ---------------------------------------------------------------------------
// UTF-8 repair and the string arena

/* Length of the sequence at s[i]: returns 1 when it is valid UTF-8 (*adv =
 * its length), 0 when not (*adv = the length of its maximal subpart, >= 1).
 * Replacing each maximal subpart by one U+FFFD is what Python's "replace"
 * and Rust's from_utf8_lossy both do, so keys, names and labels compare as
 * the reference guards saw them. */
static int utf8_at(const uint8_t *s, size_t n, size_t i, size_t *adv)
{
    uint8_t c = s[i], lo = 0x80, hi = 0xBF;
    size_t need, k;
    if (c < 0x80) { *adv = 1; return 1; }
    if (c >= 0xC2 && c <= 0xDF) need = 1;
    else if (c >= 0xE0 && c <= 0xEF) {
        need = 2;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;            /* no surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 3;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;            /* nothing above U+10FFFF */
    } else { *adv = 1; return 0; }
    for (k = 1; k <= need; k++) {
        uint8_t d;
        if (i + k >= n) { *adv = k; return 0; }
        d = s[i + k];
        if (k == 1 ? (d < lo || d > hi) : (d < 0x80 || d > 0xBF)) { *adv = k; return 0; }
    }
    *adv = need + 1;
    return 1;
}

/* All strings of one header live in one allocation; while it grows, entries
 * hold offsets, turned into pointers once the parse is done. */
typedef struct { char *p; size_t len, cap; } arena;

/* Appends s[0..n) with invalid UTF-8 replaced and a NUL; *off is where it
 * starts, *outlen its decoded length. -1 when memory runs out. */
static int arena_put_lossy(arena *a, const uint8_t *s, size_t n, size_t *off, size_t *outlen)
{
    size_t i = 0, need;
    char *d;
    if (n > (SIZE_MAX - 1) / 3) return -1;
    need = n * 3 + 1;                         /* every byte may become EF BF BD */
    if (need > a->cap - a->len) {
        size_t cap = a->cap ? a->cap : 4096, want;
        if (__builtin_add_overflow(a->len, need, &want)) return -1;
        while (cap < want) {
            if (cap > SIZE_MAX / 2) { cap = want; break; }
            cap *= 2;
        }
        d = realloc(a->p, cap);
        if (!d) return -1;
        a->p = d;
        a->cap = cap;
    }
    *off = a->len;
    d = a->p + a->len;
    while (i < n) {
        size_t adv;
        if (utf8_at(s, n, i, &adv)) {
            memcpy(d, s + i, adv);
            d += adv;
        } else {
            memcpy(d, "\xEF\xBF\xBD", 3);
            d += 3;
        }
        i += adv;
    }
    *outlen = (size_t)(d - (a->p + a->len));
    *d++ = 0;
    a->len = (size_t)(d - a->p);
    return 0;
}

/* Grows a malloc'd array to hold one more element of size elem. */
// ---------------------------------------------------------------------------
// the byte reader

typedef struct {
    const uint8_t *b;
    uint64_t n, pos;
    uint64_t need;          /* set on GGUF_NEED_MORE */
    char *err;
    size_t errlen;
} reader;

/* Every read goes through here: it is the one place that knows the buffer's
 * end, and it reports how far a failed read wanted to go (UINT64_MAX when
 * even that overflows), which is the guard's bytes_needed. */
static gguf_status rd_take(reader *r, uint64_t k, const uint8_t **p)
{
    uint64_t end;
    if (__builtin_add_overflow(r->pos, k, &end)) { r->need = UINT64_MAX; return GGUF_NEED_MORE; }
    if (end > r->n) { r->need = end; return GGUF_NEED_MORE; }
    if (p) *p = r->b + r->pos;
    r->pos = end;
    return GGUF_OK;
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const uint8_t *p)
{
    return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

static gguf_status rd_u32(reader *r, uint32_t *v)
{
    const uint8_t *p;
    gguf_status rc = rd_take(r, 4, &p);
    if (rc == GGUF_OK) *v = le32(p);
    return rc;
}

static gguf_status rd_u64(reader *r, uint64_t *v)
{
    const uint8_t *p;
    gguf_status rc = rd_take(r, 8, &p);
    if (rc == GGUF_OK) *v = le64(p);
    return rc;
}

/* Bytes per element of the fixed-size scalar types; 0 for STRING, ARRAY and
 * ids that are not value types. */
static uint64_t vt_size(uint32_t t)
{
    switch (t) {
    case GGUF_VT_U8: case GGUF_VT_I8: case GGUF_VT_BOOL: return 1;
    case GGUF_VT_U16: case GGUF_VT_I16: return 2;
    case GGUF_VT_U32: case GGUF_VT_I32: case GGUF_VT_F32: return 4;
    case GGUF_VT_U64: case GGUF_VT_I64: case GGUF_VT_F64: return 8;
    default: return 0;
    }
}

static gguf_status bad_type(reader *r, uint32_t t)
{
    bk_err(r->err, r->errlen, "unknown gguf value type %" PRIu32, t);
    return GGUF_MALFORMED;
}

/* Skips a string: u64 length, then the bytes. */
static gguf_status skip_string(reader *r)
{
    uint64_t len;
    gguf_status rc = rd_u64(r, &len);
    return rc ? rc : rd_take(r, len, NULL);
}

typedef struct { uint32_t et; uint64_t left; } arr_frame;

/* Starts an array body whose header (element type et, count cnt) was just
 * read: fixed-size scalars are stepped over at once by length; strings and
 * arrays get a frame (the caller has checked the nesting depth); any other
 * element type is an error as soon as there is an element to decode. */
static gguf_status arr_open(reader *r, arr_frame *st, size_t *top, uint32_t et, uint64_t cnt)
{
    uint64_t sz = vt_size(et), bytes;
    if (sz) {
        if (__builtin_mul_overflow(cnt, sz, &bytes)) bytes = UINT64_MAX;
        return rd_take(r, bytes, NULL);
    }
    if (et == GGUF_VT_STRING || et == GGUF_VT_ARRAY) {
        st[*top].et = et;
        st[*top].left = cnt;
        (*top)++;
        return GGUF_OK;
    }
    return cnt ? bad_type(r, et) : GGUF_OK;
}

/* Steps over the body of an array at depth 0 whose header was just read.
 * An explicit stack replaces recursion: frame k is an array at depth k, so
 * an array-of-arrays header at depth >= GGUF_MAX_ARRAY_DEPTH refuses before
 * anything is pushed and the stack never needs more than depth + 1 frames
 * (0.0.1 of the Rust original recursed per level and overflowed its stack
 * on a 2,000,000-deep file). The depth rule is the Rust's: an array at
 * depth d whose elements are arrays refuses when d >= 64. */
static gguf_status skip_array(reader *r, uint32_t et, uint64_t cnt)
{
    arr_frame st[GGUF_MAX_ARRAY_DEPTH + 1];
    size_t top = 0;
    gguf_status rc = arr_open(r, st, &top, et, cnt);
    while (rc == GGUF_OK && top > 0) {
        arr_frame *f = &st[top - 1];
        uint32_t et2;
        uint64_t cnt2;
        if (f->left == 0) { top--; continue; }
        f->left--;
        if (f->et == GGUF_VT_STRING) { rc = skip_string(r); continue; }
        /* an ARRAY element: its header, at depth top */
        if ((rc = rd_u32(r, &et2)) || (rc = rd_u64(r, &cnt2))) break;
        if (et2 == GGUF_VT_ARRAY && top >= GGUF_MAX_ARRAY_DEPTH) {
            bk_err(r->err, r->errlen, "gguf arrays nested deeper than %d", GGUF_MAX_ARRAY_DEPTH);
            return GGUF_MALFORMED;
        }
        rc = arr_open(r, st, &top, et2, cnt2);
    }
    return rc;
}

/* Reads one metadata value of type t into e. Strings go to the arena (e->str
 * holds the arena offset until gguf_parse fixes pointers up). */
static gguf_status rd_value(reader *r, uint32_t t, gguf_kv *e, arena *a)
{
    const uint8_t *p;
    gguf_status rc;
    uint64_t len;
    size_t off;
    switch (t) {
    case GGUF_VT_U8:   if ((rc = rd_take(r, 1, &p))) return rc; e->u = p[0]; break;
    case GGUF_VT_I8:   if ((rc = rd_take(r, 1, &p))) return rc; e->i = (int8_t)p[0]; break;
    case GGUF_VT_BOOL: if ((rc = rd_take(r, 1, &p))) return rc; e->u = p[0] != 0; break;
    case GGUF_VT_U16:
        if ((rc = rd_take(r, 2, &p))) return rc;
        e->u = (uint16_t)(p[0] | p[1] << 8);
        break;
    case GGUF_VT_I16:
        if ((rc = rd_take(r, 2, &p))) return rc;
        e->i = (int16_t)(uint16_t)(p[0] | p[1] << 8);
        break;
    case GGUF_VT_U32:  if ((rc = rd_take(r, 4, &p))) return rc; e->u = le32(p); break;
    case GGUF_VT_I32:  if ((rc = rd_take(r, 4, &p))) return rc; e->i = (int32_t)le32(p); break;
    case GGUF_VT_F32: {
        uint32_t bits;
        float f;
        if ((rc = rd_take(r, 4, &p))) return rc;
        bits = le32(p);
        memcpy(&f, &bits, 4);
        e->f = f;
        break;
    }
    case GGUF_VT_U64:  if ((rc = rd_take(r, 8, &p))) return rc; e->u = le64(p); break;
    case GGUF_VT_I64:  if ((rc = rd_take(r, 8, &p))) return rc; e->i = (int64_t)le64(p); break;
    case GGUF_VT_F64: {
        uint64_t bits;
        if ((rc = rd_take(r, 8, &p))) return rc;
        bits = le64(p);
        memcpy(&e->f, &bits, 8);
        break;
    }
    case GGUF_VT_STRING:
        if ((rc = rd_u64(r, &len)) || (rc = rd_take(r, len, &p))) return rc;
        if (arena_put_lossy(a, p, (size_t)len, &off, &e->str_len)) goto nomem;
        e->str = (const char *)(uintptr_t)off;
        break;
    case GGUF_VT_ARRAY:
        if ((rc = rd_u32(r, &e->arr_type)) || (rc = rd_u64(r, &e->arr_n))) return rc;
        return skip_array(r, e->arr_type, e->arr_n);
    default:
        return bad_type(r, t);
    }
    return GGUF_OK;
nomem:
    bk_err(r->err, r->errlen, "out of memory");
    return GGUF_NOMEM;
}

// ---------------------------------------------------------------------------
// Python's str() of a value (labels, arch/name, the alignment reason)

/* repr() of a float, as Python prints it: the shortest digits that read back
 * to the same double (found by trying 1..17 significant digits; glibc's
 * printf rounds correctly), in fixed notation when the decimal exponent is
 * in [-4, 16) and as d.ddde+XX otherwise. */
static void py_float_repr(double v, char out[40])
{
    char tmp[40], digits[24];
    const char *s;
    int p, nd = 0, exp10, decpt, neg, o = 0;
    if (isnan(v)) { strcpy(out, "nan"); return; }
    if (isinf(v)) { strcpy(out, v < 0 ? "-inf" : "inf"); return; }
    if (v == 0) { strcpy(out, signbit(v) ? "-0.0" : "0.0"); return; }
    for (p = 1; p <= 17; p++) {
        snprintf(tmp, sizeof tmp, "%.*e", p - 1, v);
        if (strtod(tmp, NULL) == v) break;
    }
    s = tmp;
    neg = *s == '-';
    if (neg) s++;
    for (; *s && *s != 'e'; s++)
        if (*s >= '0' && *s <= '9') digits[nd++] = *s;
    exp10 = *s == 'e' ? atoi(s + 1) : 0;
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    decpt = exp10 + 1;                         /* v = 0.DIGITS x 10^decpt */
    if (neg) out[o++] = '-';
    if (decpt <= -4 || decpt > 16) {
        out[o++] = digits[0];
        if (nd > 1) {
            out[o++] = '.';
            memcpy(out + o, digits + 1, (size_t)nd - 1);
            o += nd - 1;
        }
        o += snprintf(out + o, 40 - (size_t)o, "e%c%02d", decpt - 1 < 0 ? '-' : '+',
                      abs(decpt - 1));
    } else if (decpt <= 0) {
        out[o++] = '0';
        out[o++] = '.';
        for (int z = 0; z < -decpt; z++) out[o++] = '0';
        memcpy(out + o, digits, (size_t)nd);
        o += nd;
    } else if (decpt >= nd) {
        memcpy(out + o, digits, (size_t)nd);
        o += nd;
        for (int z = nd; z < decpt; z++) out[o++] = '0';
        out[o++] = '.';
        out[o++] = '0';
    } else {
        memcpy(out + o, digits, (size_t)decpt);
        o += decpt;
        out[o++] = '.';
        memcpy(out + o, digits + decpt, (size_t)(nd - decpt));
        o += nd - decpt;
    }
    out[o] = 0;
}

/* Appends Python's str() of the value: strings as they are, bools as
 * True/False, integers in decimal, floats as repr(), arrays "<array N>". */
static void py_str(const gguf_kv *kv, jbuf *out)
{
    char f[40];
    switch (kv->type) {
    case GGUF_VT_BOOL: jbuf_puts(out, kv->u ? "True" : "False"); break;
    case GGUF_VT_U8: case GGUF_VT_U16: case GGUF_VT_U32: case GGUF_VT_U64:
        jbuf_printf(out, "%" PRIu64, kv->u);
        break;
    case GGUF_VT_I8: case GGUF_VT_I16: case GGUF_VT_I32: case GGUF_VT_I64:
        jbuf_printf(out, "%" PRId64, kv->i);
        break;
    case GGUF_VT_F32: case GGUF_VT_F64:
        py_float_repr(kv->f, f);
        jbuf_puts(out, f);
        break;
    case GGUF_VT_STRING: jbuf_put(out, kv->str, kv->str_len); break;
    case GGUF_VT_ARRAY: jbuf_printf(out, "<array %" PRIu64 ">", kv->arr_n); break;
    }
}

/* Python's isinstance(x, int), bool included; the value in *v. */
static int py_int(const gguf_kv *kv, __int128 *v)
{
    if (!kv) return 0;
    switch (kv->type) {
    case GGUF_VT_U8: case GGUF_VT_U16: case GGUF_VT_U32: case GGUF_VT_U64: case GGUF_VT_BOOL:
        *v = (__int128)kv->u;
        return 1;
    case GGUF_VT_I8: case GGUF_VT_I16: case GGUF_VT_I32: case GGUF_VT_I64:
        *v = kv->i;
        return 1;
    default:
        return 0;
    }
}

// ---------------------------------------------------------------------------
// the header

void gguf_header_free(gguf_header *h)
{
    if (!h) return;
    free(h->kv);
    free(h->tensors);
    free(h->arena);
    memset(h, 0, sizeof *h);
}

/* Backwards, so that of duplicate keys the last one wins (a Python dict). */
const gguf_kv *gguf_kv_findn(const gguf_header *h, const char *key, size_t len)
{
    size_t i;
    if (!h || !key) return NULL;
    for (i = h->n_kv; i-- > 0;) {
        const gguf_kv *e = &h->kv[i];
        if (e->key_len == len && memcmp(e->key, key, len) == 0) return e;
    }
    return NULL;
}

const gguf_kv *gguf_kv_find(const gguf_header *h, const char *key)
{
    return key ? gguf_kv_findn(h, key, strlen(key)) : NULL;
}

/* general.alignment as the Rust read it: absent -> 32; a float >= 1 is
 * truncated (saturating, as Rust's `as`); an integer or bool >= 1 is taken;
 * anything else refuses with the value as Python prints it. */
static gguf_status header_alignment(gguf_header *h, reader *r)
{
    const gguf_kv *al = gguf_kv_find(h, "general.alignment");
    __int128 iv;
    jbuf s;
    if (!al) { h->alignment = 32; return GGUF_OK; }
    if ((al->type == GGUF_VT_F32 || al->type == GGUF_VT_F64) && al->f >= 1.0) {
        h->alignment = al->f >= 18446744073709551616.0 ? UINT64_MAX : (uint64_t)al->f;
        return GGUF_OK;
    }
    if (py_int(al, &iv) && iv >= 1) { h->alignment = (uint64_t)iv; return GGUF_OK; }
    jbuf_init(&s);
    py_str(al, &s);
    if (s.oom) {
        jbuf_free(&s);
        bk_err(r->err, r->errlen, "out of memory");
        return GGUF_NOMEM;
    }
    bk_err(r->err, r->errlen, "general.alignment %s is not a positive integer", s.p ? s.p : "");
    jbuf_free(&s);
    return GGUF_MALFORMED;
}

gguf_status gguf_parse(const uint8_t *b, size_t n, gguf_header *h, uint64_t *need,
                       char *err, size_t errlen)
{
    reader r = { b, b ? n : 0, 0, 0, err, errlen };
    arena a = { NULL, 0, 0 };
    gguf_kv *kv = NULL;
    gguf_tensor *ts = NULL;
    size_t nkv = 0, kvcap = 0, nts = 0, tscap = 0, off, i;
    uint64_t n_tensors, n_kv, q, k;
    uint32_t version;
    const uint8_t *p;
    gguf_status rc;

    memset(h, 0, sizeof *h);
    if (need) *need = 0;
    if ((rc = rd_take(&r, 4, &p))) goto fail;
    if (memcmp(p, "GGUF", 4) != 0) {
        bk_err(err, errlen, "not a GGUF file");
        rc = GGUF_MALFORMED;
        goto fail;
    }
    if ((rc = rd_u32(&r, &version)) || (rc = rd_u64(&r, &n_tensors)) || (rc = rd_u64(&r, &n_kv)))
        goto fail;

    /* The declared counts are never trusted for allocation: each entry
     * consumes bytes, so the loops end at the buffer's end at the latest. */
    for (k = 0; k < n_kv; k++) {
        gguf_kv *e;
        uint64_t len;
        if (bk_grow((void **)&kv, &kvcap, nkv + 1, sizeof *kv)) goto nomem;
        e = &kv[nkv];
        memset(e, 0, sizeof *e);
        if ((rc = rd_u64(&r, &len)) || (rc = rd_take(&r, len, &p))) goto fail;
        if (arena_put_lossy(&a, p, (size_t)len, &off, &e->key_len)) goto nomem;
        e->key = (const char *)(uintptr_t)off;
        if ((rc = rd_u32(&r, &e->type))) goto fail;
        e->off = r.pos;
        if ((rc = rd_value(&r, e->type, e, &a))) goto fail;
        e->end = r.pos;
        nkv++;
    }
    for (k = 0; k < n_tensors; k++) {
        gguf_tensor *t;
        uint64_t len, d;
        if (bk_grow((void **)&ts, &tscap, nts + 1, sizeof *ts)) goto nomem;
        t = &ts[nts];
        memset(t, 0, sizeof *t);
        if ((rc = rd_u64(&r, &len)) || (rc = rd_take(&r, len, &p))) goto fail;
        if (arena_put_lossy(&a, p, (size_t)len, &off, &t->name_len)) goto nomem;
        t->name = (const char *)(uintptr_t)off;
        if ((rc = rd_u32(&r, &t->n_dims))) goto fail;
        t->nelem = 1;
        for (i = 0; i < t->n_dims; i++) {
            if ((rc = rd_u64(&r, &d))) goto fail;
            if (i < GGUF_MAX_STORED_DIMS) t->dims[i] = d;
            if (__builtin_mul_overflow(t->nelem, (unsigned __int128)d, &t->nelem))
                t->nelem = ~(unsigned __int128)0;
        }
        if ((rc = rd_u32(&r, &t->type)) || (rc = rd_u64(&r, &t->offset))) goto fail;
        nts++;
    }

    /* The arena has stopped moving: offsets become pointers. */
    for (i = 0; i < nkv; i++) {
        kv[i].key = a.p + (uintptr_t)kv[i].key;
        if (kv[i].type == GGUF_VT_STRING) kv[i].str = a.p + (uintptr_t)kv[i].str;
    }
    for (i = 0; i < nts; i++) ts[i].name = a.p + (uintptr_t)ts[i].name;
    h->version = version;
    h->kv = kv;
    h->n_kv = nkv;
    h->tensors = ts;
    h->n_tensors = nts;
    h->arena = a.p;
    h->header_end = r.pos;
    if ((rc = header_alignment(h, &r))) {
        gguf_header_free(h);
        return rc;
    }
    q = r.pos / h->alignment + (r.pos % h->alignment != 0);
    if (__builtin_mul_overflow(q, h->alignment, &h->data_start)) h->data_start = UINT64_MAX;
    return GGUF_OK;

nomem:
    bk_err(err, errlen, "out of memory");
    rc = GGUF_NOMEM;
fail:
    if (rc == GGUF_NEED_MORE && need) *need = r.need;
    free(kv);
    free(ts);
    free(a.p);
    memset(h, 0, sizeof *h);
    return rc;
}

int gguf_kv_u64(const gguf_kv *kv, uint64_t *out)
{
    __int128 v;
    if (!py_int(kv, &v) || v < 0) return 0;
    *out = (uint64_t)v;
    return 1;
}

int gguf_kv_i64(const gguf_kv *kv, int64_t *out)
{
    __int128 v;
    if (!py_int(kv, &v) || v > INT64_MAX) return 0;
    *out = (int64_t)v;
    return 1;
}

int gguf_kv_f64(const gguf_kv *kv, double *out)
{
    __int128 v;
    if (kv && (kv->type == GGUF_VT_F32 || kv->type == GGUF_VT_F64)) { *out = kv->f; return 1; }
    if (!py_int(kv, &v)) return 0;
    *out = (double)v;
    return 1;
}

const char *gguf_kv_str(const gguf_kv *kv, size_t *len)
{
    if (!kv || kv->type != GGUF_VT_STRING) return NULL;
    if (len) *len = kv->str_len;
    return kv->str;
}

const gguf_tensor *gguf_tensor_find(const gguf_header *h, const char *name)
{
    size_t i, len;
    if (!h || !name) return NULL;
    len = strlen(name);
    for (i = 0; i < h->n_tensors; i++)
        if (h->tensors[i].name_len == len && memcmp(h->tensors[i].name, name, len) == 0)
            return &h->tensors[i];
    return NULL;
}

// ---------------------------------------------------------------------------
// lazy array decoding

int gguf_arr_begin(gguf_arr_iter *it, const gguf_kv *kv, const uint8_t *b, size_t n,
                   char *err, size_t errlen)
{
    memset(it, 0, sizeof *it);
    if (!kv || kv->type != GGUF_VT_ARRAY) {
        bk_err(err, errlen, "%s is not an array", kv ? kv->key : "(missing key)");
        return -1;
    }
    it->b = b;
    it->end = kv->end < (uint64_t)n ? kv->end : (uint64_t)n;
    it->pos = kv->off + 12;                   /* past element type and count */
    it->type = kv->arr_type;
    it->left = kv->arr_n;
    return 0;
}

/* Takes k bytes of the element that starts at `start`, or says where that
 * element ran out; the iterator then stays stopped. */
static int it_take(gguf_arr_iter *it, uint64_t start, uint64_t k, const uint8_t **p,
                   char *err, size_t errlen)
{
    uint64_t e;
    if (__builtin_add_overflow(it->pos, k, &e) || e > it->end) {
        bk_err(err, errlen, "array element at byte %" PRIu64 " runs past the end of the data",
               start);
        it->left = 0;
        return -1;
    }
    *p = it->b + it->pos;
    it->pos = e;
    return 0;
}

int gguf_arr_next_str(gguf_arr_iter *it, const uint8_t **s, uint64_t *len,
                      char *err, size_t errlen)
{
    const uint8_t *p;
    uint64_t n, start;
    if (it->left == 0) return 0;
    if (it->type != GGUF_VT_STRING) {
        bk_err(err, errlen, "array elements are of value type %" PRIu32 ", not strings", it->type);
        return -1;
    }
    start = it->pos;
    if (it_take(it, start, 8, &p, err, errlen)) return -1;
    n = le64(p);
    if (it_take(it, start, n, &p, err, errlen)) return -1;
    it->left--;
    *s = p;
    *len = n;
    return 1;
}

/* One numeric element: with want_int, an exact integer into *iv (floats
 * refused); otherwise any number widened into *dv. */
static int arr_next_num(gguf_arr_iter *it, int want_int, int64_t *iv, double *dv,
                        char *err, size_t errlen)
{
    const uint8_t *p;
    uint64_t sz = vt_size(it->type), u = 0;
    int64_t s = 0;
    double f = 0;
    int is_int = 1, is_signed = 0;
    if (it->left == 0) return 0;
    if (!sz || (want_int && (it->type == GGUF_VT_F32 || it->type == GGUF_VT_F64))) {
        bk_err(err, errlen, "array elements are of value type %" PRIu32 ", not %s", it->type,
               want_int ? "integers" : "numbers");
        return -1;
    }
    if (it_take(it, it->pos, sz, &p, err, errlen)) return -1;
    switch (it->type) {
    case GGUF_VT_U8: u = p[0]; break;
    case GGUF_VT_BOOL: u = p[0] != 0; break;
    case GGUF_VT_I8: s = (int8_t)p[0]; is_signed = 1; break;
    case GGUF_VT_U16: u = (uint16_t)(p[0] | p[1] << 8); break;
    case GGUF_VT_I16: s = (int16_t)(uint16_t)(p[0] | p[1] << 8); is_signed = 1; break;
    case GGUF_VT_U32: u = le32(p); break;
    case GGUF_VT_I32: s = (int32_t)le32(p); is_signed = 1; break;
    case GGUF_VT_U64: u = le64(p); break;
    case GGUF_VT_I64: s = (int64_t)le64(p); is_signed = 1; break;
    case GGUF_VT_F32: {
        uint32_t bits = le32(p);
        float x;
        memcpy(&x, &bits, 4);
        f = x;
        is_int = 0;
        break;
    }
    case GGUF_VT_F64: {
        uint64_t bits = le64(p);
        memcpy(&f, &bits, 8);
        is_int = 0;
        break;
    }
    }
    it->left--;
    if (want_int) {
        if (!is_signed && u > INT64_MAX) {
            bk_err(err, errlen, "array element %" PRIu64 " does not fit a 64-bit signed integer", u);
            return -1;
        }
        *iv = is_signed ? s : (int64_t)u;
    } else {
        *dv = !is_int ? f : is_signed ? (double)s : (double)u;
    }
    return 1;
}

int gguf_arr_next_i64(gguf_arr_iter *it, int64_t *v, char *err, size_t errlen)
{
    return arr_next_num(it, 1, v, NULL, err, errlen);
}

int gguf_arr_next_f64(gguf_arr_iter *it, double *v, char *err, size_t errlen)
{
    return arr_next_num(it, 0, NULL, v, err, errlen);
}

// ---------------------------------------------------------------------------
// the guard's rules

const char *gguf_verdict_str(gguf_verdict v)
{
    return v == GGUF_VERDICT_PLAY ? "play" : v == GGUF_VERDICT_NEED_MORE ? "need_more" : "refuse";
}

const char *gguf_engine_str(gguf_engine e)
{
    return e == GGUF_ENGINE_PRISM ? "prism" : "mainline";
}

int gguf_verdict_exit(gguf_verdict v)
{
    return v == GGUF_VERDICT_PLAY ? 0 : v == GGUF_VERDICT_NEED_MORE ? 3 : 2;
}

void gguf_report_free(gguf_report *r)
{
    size_t i;
    if (!r) return;
    free(r->arch);
    free(r->name);
    free(r->types);
    for (i = 0; i < r->n_reasons; i++) free(r->reasons[i].text);
    free(r->reasons);
    gguf_header_free(&r->header);
    memset(r, 0, sizeof *r);
}

/* Moves a finished jbuf's text into the reason list. */
static int add_reason(gguf_report *r, jbuf *s)
{
    gguf_reason *nr;
    if (s->oom || !s->p) return -1;
    nr = realloc(r->reasons, (r->n_reasons + 1) * sizeof *nr);
    if (!nr) return -1;
    r->reasons = nr;
    nr[r->n_reasons].text = s->p;
    nr[r->n_reasons].len = s->len;
    r->n_reasons++;
    jbuf_init(s);                              /* the text now belongs to r */
    return 0;
}

static int add_reason_str(gguf_report *r, const char *text)
{
    jbuf s;
    jbuf_init(&s);
    jbuf_puts(&s, text);
    if (add_reason(r, &s)) { jbuf_free(&s); return -1; }
    return 0;
}

/* A malloc'd copy of Python's str() of the value (*len its length). */
static char *py_str_dup(const gguf_kv *kv, size_t *len)
{
    jbuf s;
    jbuf_init(&s);
    py_str(kv, &s);
    jbuf_putc(&s, 0);                          /* empty strings still allocate */
    if (s.oom) { jbuf_free(&s); return NULL; }
    *len = s.len - 1;
    return s.p;
}

/* Python truthiness of a value (NaN is truthy; arrays print non-empty). */
static int py_truthy(const gguf_kv *kv)
{
    switch (kv->type) {
    case GGUF_VT_F32: case GGUF_VT_F64: return kv->f != 0.0;
    case GGUF_VT_STRING: return kv->str_len != 0;
    case GGUF_VT_ARRAY: return 1;
    case GGUF_VT_I8: case GGUF_VT_I16: case GGUF_VT_I32: case GGUF_VT_I64: return kv->i != 0;
    default: return kv->u != 0;
    }
}

/* Decodes one code point of valid-or-repaired UTF-8 and advances *i. */
static uint32_t next_cp(const char *str, size_t n, size_t *i)
{
    const uint8_t *s = (const uint8_t *)str;
    size_t adv, k;
    uint32_t c;
    if (!utf8_at(s, n, *i, &adv)) { *i += adv; return 0xFFFD; }
    c = s[*i];
    if (adv == 2) c &= 0x1F;
    else if (adv == 3) c &= 0x0F;
    else if (adv == 4) c &= 0x07;
    for (k = 1; k < adv; k++) c = c << 6 | (s[*i + k] & 0x3F);
    *i += adv;
    return c;
}

/* Python re's IGNORECASE for the pattern's letters: ASCII case plus the
 * code points whose simple lowercase lands on them (checked against
 * Python 3.11: s ~ U+017F, i ~ U+0130 U+0131, k ~ U+212A). */
static int ci_eq(uint32_t x, char c)
{
    if (x == (uint32_t)(unsigned char)c) return 1;
    if (c >= 'a' && c <= 'z' && x == (uint32_t)(c - 'a' + 'A')) return 1;
    return (c == 's' && x == 0x17F) || (c == 'i' && (x == 0x130 || x == 0x131)) ||
           (c == 'k' && x == 0x212A);
}

/* Python's \s on str patterns (str.isspace). */
static int py_space(uint32_t x)
{
    return (x >= 0x09 && x <= 0x0D) || (x >= 0x1C && x <= 0x20) || x == 0x85 || x == 0xA0 ||
           x == 0x1680 || (x >= 0x2000 && x <= 0x200A) || x == 0x2028 || x == 0x2029 ||
           x == 0x202F || x == 0x205F || x == 0x3000;
}

/* Matches the literal lit (ASCII) case-insensitively at s[i]; *after is the
 * byte after the match. */
static int match_lit(const char *s, size_t n, size_t i, const char *lit, size_t *after)
{
    for (; *lit; lit++) {
        if (i >= n || !ci_eq(next_cp(s, n, &i), *lit)) return 0;
    }
    *after = i;
    return 1;
}

/* re.search(r"bonsai[\s_-]*2|prism-fork-required", label, re.I) by hand.
 * The class cannot match '2', so greedy skipping needs no backtracking. */
static int bonsai2(const char *s, size_t n)
{
    size_t i = 0, j;
    while (i < n) {
        if (match_lit(s, n, i, "prism-fork-required", &j)) return 1;
        if (match_lit(s, n, i, "bonsai", &j)) {
            while (j < n) {
                uint32_t c = next_cp(s, n, &j);
                if (c == '2') return 1;
                if (!(py_space(c) || c == '_' || c == '-')) break;
            }
        }
        next_cp(s, n, &i);
    }
    return 0;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

typedef struct { uint64_t off; size_t idx; } by_offset;

/* Offset, then position in the file: Python's stable sort by offset. */
static int cmp_offset(const void *a, const void *b)
{
    const by_offset *x = a, *y = b;
    if (x->off != y->off) return x->off < y->off ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Decimal text of a 128-bit integer. */
static void i128_str(__int128 v, char out[48])
{
    char tmp[48];
    int n = 0, o = 0;
    unsigned __int128 u = v < 0 ? -(unsigned __int128)v : (unsigned __int128)v;
    do { tmp[n++] = (char)('0' + (int)(u % 10)); u /= 10; } while (u);
    if (v < 0) out[o++] = '-';
    while (n) out[o++] = tmp[--n];
    out[o] = 0;
}

/* Rule 1: KV cache bytes per token at f16, L x H x (K + V) x 2, with
 * embedding_length // head_count (Python floor division) as the head size
 * when key_length is absent. Checked in i128; an overflow is a reason. */
static int rule_kv_bytes(const gguf_header *h, gguf_report *r, const char *a, size_t alen)
{
    __int128 L, H, K = 0, V = 0, E, NH, kvsum, x;
    int hasL, hasH, hasK, hasV;
    char *key;
    size_t room = alen + 40;
    const gguf_kv *kk;
    jbuf s;

    key = malloc(room);
    if (!key) return -1;
    memcpy(key, a, alen);
#define KEY(suffix) (memcpy(key + alen, suffix, sizeof suffix), \
                     gguf_kv_findn(h, key, alen + sizeof suffix - 1))
    hasL = py_int(KEY(".block_count"), &L);
    hasH = py_int(KEY(".attention.head_count_kv"), &H);
    kk = KEY(".attention.key_length");
    hasK = py_int(kk, &K);
    hasV = py_int(KEY(".attention.value_length"), &V);
    if (!kk && py_int(KEY(".embedding_length"), &E) && py_int(KEY(".attention.head_count"), &NH) &&
        NH != 0) {
        K = E / NH;
        if (E % NH != 0 && ((E < 0) != (NH < 0))) K--;
        V = K;
        hasK = hasV = 1;
    }
#undef KEY
    free(key);
    if (!(hasL && hasH && hasK)) return 0;
    if (!hasV) V = K;
    if (!__builtin_add_overflow(K, V, &kvsum) && !__builtin_mul_overflow(L, H, &x) &&
        !__builtin_mul_overflow(x, kvsum, &x) && !__builtin_mul_overflow(x, (__int128)2, &x)) {
        r->has_kv_bytes = 1;
        r->kv_f16_bytes_per_token = x;
        return 0;
    }
    jbuf_init(&s);
    jbuf_puts(&s, "KV cache size per token overflows (");
    jbuf_put(&s, a, alen);
    jbuf_puts(&s, ".block_count \xC3\x97 head_count_kv \xC3\x97 key/value length): malformed header");
    if (add_reason(r, &s)) { jbuf_free(&s); return -1; }
    return 0;
}

/* Rule 4: a Q2_0 tensor whose bytes (up to the next tensor by offset, or
 * the end of the file for the last) are fewer than the group-64 layout
 * needs is a legacy group-128 file. Sizes compare exactly: want saturates
 * in u128 and the room is an i128, so nothing wraps into a pass. */
static int rule_legacy_q2_0(const gguf_header *h, gguf_report *r, int64_t file_size)
{
    by_offset *ord;
    size_t i, nt = h->n_tensors;
    uint64_t shortn = 0;
    jbuf s;
    if (nt == 0) return 0;
    ord = malloc(nt * sizeof *ord);
    if (!ord) return -1;
    for (i = 0; i < nt; i++) { ord[i].off = h->tensors[i].offset; ord[i].idx = i; }
    qsort(ord, nt, sizeof *ord, cmp_offset);
    for (i = 0; i < nt; i++) {
        const gguf_tensor *t = &h->tensors[ord[i].idx];
        __int128 end, room;
        unsigned __int128 want;
        if (i + 1 < nt) end = (__int128)ord[i + 1].off;
        else if (file_size >= 0) end = (__int128)file_size - (__int128)h->data_start;
        else continue;
        if (t->type != GGUF_TYPE_Q2_0) continue;
        if (__builtin_mul_overflow(t->nelem / 64, (unsigned __int128)18, &want))
            want = ~(unsigned __int128)0;
        room = end - (__int128)t->offset;
        if (room < 0 || (unsigned __int128)room < want) shortn++;
    }
    free(ord);
    if (!shortn) return 0;
    jbuf_init(&s);
    jbuf_printf(&s, "%" PRIu64 " Q2_0 tensors smaller than group-64 layout: legacy group-128 Prism "
                "file, use *-Q2_0_g64.gguf or *-PQ2_0.gguf", shortn);
    if (add_reason(r, &s)) { jbuf_free(&s); return -1; }
    return 0;
}

/* Rule 5's label: the truthy ones of general.name, general.basename and the
 * file name, as Python str(), joined by spaces. */
static int rule_bonsai2(const gguf_header *h, gguf_report *r, const char *filename)
{
    const gguf_kv *parts[2] = { gguf_kv_find(h, "general.name"), gguf_kv_find(h, "general.basename") };
    jbuf label;
    arena fa = { NULL, 0, 0 };
    int first = 1, hit;
    size_t i, off, flen;
    jbuf_init(&label);
    for (i = 0; i < 2; i++) {
        if (!parts[i] || !py_truthy(parts[i])) continue;
        if (!first) jbuf_putc(&label, ' ');
        py_str(parts[i], &label);
        first = 0;
    }
    if (filename && *filename) {
        if (arena_put_lossy(&fa, (const uint8_t *)filename, strlen(filename), &off, &flen)) {
            jbuf_free(&label);
            return -1;
        }
        if (!first) jbuf_putc(&label, ' ');
        jbuf_put(&label, fa.p + off, flen);
        free(fa.p);
    }
    if (label.oom) { jbuf_free(&label); return -1; }
    hit = bonsai2(label.p ? label.p : "", label.len);
    jbuf_free(&label);
    if (!hit) return 0;
    return add_reason_str(r, "Bonsai 2 weights are in a rotated basis and need the fork's Hadamard "
                             "transform; mainline loads the Q2_0 band silently and outputs gibberish");
}

/* Everything after a successful parse, in the order the Python appends. */
static int judge_rules(gguf_report *r, gguf_engine engine, int64_t file_size, const char *filename)
{
    const gguf_header *h = &r->header;
    const gguf_kv *arch = gguf_kv_find(h, "general.architecture");
    const gguf_kv *name = gguf_kv_find(h, "general.name");
    uint32_t *ids = NULL;
    size_t i, nt = h->n_tensors, nd = 0;
    int fork = 0, rc = -1;
    jbuf s;

    jbuf_init(&s);
    r->gguf_version = h->version;
    r->tensors = nt;
    if (arch && !(r->arch = py_str_dup(arch, &r->arch_len))) goto out;
    if (name && !(r->name = py_str_dup(name, &r->name_len))) goto out;

    /* distinct type ids with counts, by id */
    if (nt) {
        ids = malloc(nt * sizeof *ids);
        r->types = malloc(nt * sizeof *r->types);
        if (!ids || !r->types) goto out;
        for (i = 0; i < nt; i++) ids[i] = h->tensors[i].type;
        qsort(ids, nt, sizeof *ids, cmp_u32);
        for (i = 0; i < nt; i++) {
            if (nd && r->types[nd - 1].id == ids[i]) { r->types[nd - 1].count++; continue; }
            r->types[nd].id = ids[i];
            r->types[nd].count = 1;
            nd++;
        }
        r->n_types = nd;
    }

    if (rule_kv_bytes(h, r, r->arch ? r->arch : "None", r->arch ? r->arch_len : 4)) goto out;

    /* rule 2: ids no build knows, on either engine */
    for (i = 0; i < nd; i++) {
        uint32_t t = r->types[i].id;
        if (t == GGUF_TYPE_PQ2_0 || t == GGUF_TYPE_PTQ1_0) { fork = 1; continue; }
        if (t < GGUF_MAINLINE_COUNT) continue;
        jbuf_puts(&s, s.len ? ", " : "type ids [");
        jbuf_printf(&s, "%" PRIu32, t);
    }
    if (s.len || s.oom) {
        jbuf_puts(&s, "] unknown to every build this guard knows");
        if (add_reason(r, &s)) goto out;
    }
    /* rule 3: fork types on mainline */
    if (engine == GGUF_ENGINE_MAINLINE && fork &&
        add_reason_str(r, "PQ2_0/PTQ1_0 are PrismML-fork types; mainline and llama.rn refuse them"))
        goto out;
    /* rule 4: legacy Q2_0, on either engine */
    if (rule_legacy_q2_0(h, r, file_size)) goto out;
    /* rule 5: Bonsai 2 by name, mainline only */
    if (engine == GGUF_ENGINE_MAINLINE && rule_bonsai2(h, r, filename)) goto out;

    r->verdict = r->n_reasons ? GGUF_VERDICT_REFUSE : GGUF_VERDICT_PLAY;
    rc = 0;
out:
    jbuf_free(&s);
    free(ids);
    return rc;
}

int gguf_judge(const uint8_t *b, size_t n, gguf_engine engine, int64_t file_size,
               const char *filename, gguf_report *r)
{
    char err[256];
    uint64_t need = 0;
    gguf_status st;

    memset(r, 0, sizeof *r);
    r->engine = engine;
    st = gguf_parse(b, n, &r->header, &need, err, sizeof err);
    if (st == GGUF_NEED_MORE) {
        r->verdict = GGUF_VERDICT_NEED_MORE;
        r->bytes_needed = need;
        return 0;
    }
    if (st == GGUF_MALFORMED) {
        r->verdict = GGUF_VERDICT_REFUSE;
        if (add_reason_str(r, err)) goto nomem;
        return 0;
    }
    if (st != GGUF_OK) goto nomem;
    r->has_header = 1;
    if (judge_rules(r, engine, file_size, filename)) goto nomem;
    return 0;
nomem:
    gguf_report_free(r);
    r->engine = engine;
    return -1;
}

// ---------------------------------------------------------------------------
// printing the report

static void put_opt_str(jbuf *out, const char *s, size_t len)
{
    if (s) json_put_str(out, s, len);
    else jbuf_puts(out, "null");
}

void gguf_report_json(const gguf_report *r, jbuf *out)
{
    char nb[16], kb[48];
    size_t i;
    if (r->verdict == GGUF_VERDICT_NEED_MORE) {
        jbuf_printf(out, "{\"verdict\": \"need_more\", \"bytes_needed\": %" PRIu64 "}",
                    r->bytes_needed);
        return;
    }
    jbuf_printf(out, "{\"gguf_version\": %" PRIu32 ", \"arch\": ", r->gguf_version);
    put_opt_str(out, r->arch, r->arch_len);
    jbuf_puts(out, ", \"name\": ");
    put_opt_str(out, r->name, r->name_len);
    jbuf_printf(out, ", \"tensors\": %" PRIu64 ", \"types\": {", r->tensors);
    for (i = 0; i < r->n_types; i++) {
        if (i) jbuf_puts(out, ", ");
        json_put_cstr(out, gguf_type_name(r->types[i].id, nb));
        jbuf_printf(out, ": %" PRIu64, r->types[i].count);
    }
    jbuf_printf(out, "}, \"engine\": \"%s\", \"reasons\": [", gguf_engine_str(r->engine));
    if (r->verdict == GGUF_VERDICT_REFUSE)
        for (i = 0; i < r->n_reasons; i++) {
            if (i) jbuf_puts(out, ", ");
            json_put_str(out, r->reasons[i].text, r->reasons[i].len);
        }
    jbuf_putc(out, ']');
    if (r->has_kv_bytes) {
        i128_str(r->kv_f16_bytes_per_token, kb);
        jbuf_printf(out, ", \"kv_f16_bytes_per_token\": %s", kb);
    }
    jbuf_printf(out, ", \"verdict\": \"%s\"}", gguf_verdict_str(r->verdict));
}

void gguf_report_text(const gguf_report *r, jbuf *out)
{
    char nb[16];
    size_t i;
    jbuf_puts(out, gguf_verdict_str(r->verdict));
    jbuf_putc(out, ' ');
    for (i = 0; i < r->n_types; i++)
        jbuf_printf(out, "%s%s:%" PRIu64, i ? " " : "", gguf_type_name(r->types[i].id, nb),
                    r->types[i].count);
    jbuf_putc(out, '\n');
    if (r->verdict != GGUF_VERDICT_REFUSE) return;
    for (i = 0; i < r->n_reasons; i++) {
        jbuf_puts(out, "  - ");
        jbuf_put(out, r->reasons[i].text, r->reasons[i].len);
        jbuf_putc(out, '\n');
    }
}

// ---------------------------------------------------------------------------
// guarding a file

/* The last component of a path as Rust's Path::file_name sees it: trailing
 * slashes and "." components dropped; "..", "/" and "" have none. */
static void path_file_name(const char *path, char *out, size_t outlen)
{
    size_t end = strlen(path), start;
    for (;;) {
        while (end > 0 && path[end - 1] == '/') end--;
        if (end >= 2 && path[end - 1] == '.' && path[end - 2] == '/') { end -= 2; continue; }
        break;
    }
    start = end;
    while (start > 0 && path[start - 1] != '/') start--;
    if (end == start || (end - start == 1 && path[start] == '.') ||
        (end - start == 2 && path[start] == '.' && path[start + 1] == '.')) {
        out[0] = 0;
        return;
    }
    if (end - start >= outlen) end = start + outlen - 1;
    memcpy(out, path + start, end - start);
    out[end - start] = 0;
}

static void os_err(char *err, size_t errlen, int e)
{
    bk_err(err, errlen, "%s (os error %d)", strerror(e), e);
}

/* Reads file bytes [from, to) into buf; returns the bytes read (short at end
 * of file) or -1 with errno set. */
static int64_t read_span(int fd, uint8_t *buf, uint64_t from, uint64_t to)
{
    uint64_t at = from;
    while (at < to) {
        uint64_t left = to - at;
        ssize_t got = pread(fd, buf + at, left > (1u << 30) ? (1u << 30) : (size_t)left, (off_t)at);
        if (got < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (got == 0) break;
        at += (uint64_t)got;
    }
    return (int64_t)(at - from);
}

int gguf_guard_file(const char *path, gguf_engine engine, gguf_report *r, char *err, size_t errlen)
{
    char fname[4096];
    struct stat st;
    uint8_t *buf = NULL;
    uint64_t size, want, have = 0;
    int fd, rc = -1;

    memset(r, 0, sizeof *r);
    r->engine = engine;
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) { os_err(err, errlen, errno); return -1; }
    if (fstat(fd, &st) != 0) { os_err(err, errlen, errno); goto out; }
    if (S_ISDIR(st.st_mode)) { os_err(err, errlen, EISDIR); goto out; }
    size = st.st_size > 0 ? (uint64_t)st.st_size : 0;
    if (size > SIZE_MAX) { os_err(err, errlen, EFBIG); goto out; }
    path_file_name(path, fname, sizeof fname);
    want = size < GGUF_GUARD_PREFIX ? size : GGUF_GUARD_PREFIX;
    for (;;) {
        int64_t got;
        uint8_t *nb = realloc(buf, want ? (size_t)want : 1);
        if (!nb) { bk_err(err, errlen, "out of memory"); goto out; }
        buf = nb;
        /* Only the new tail is read: earlier bytes were read before. */
        got = read_span(fd, buf, have, want);
        if (got < 0) { os_err(err, errlen, errno); goto out; }
        have += (uint64_t)got;
        if (gguf_judge(buf, (size_t)have, engine, (int64_t)(size > have ? size : have), fname, r)) {
            bk_err(err, errlen, "out of memory");
            goto out;
        }
        if (r->verdict == GGUF_VERDICT_NEED_MORE && r->bytes_needed <= size &&
            r->bytes_needed > want && have == want) {
            uint64_t next = r->bytes_needed > want * 2 ? r->bytes_needed : want * 2;
            want = next < size ? next : size;
            gguf_report_free(r);
            r->engine = engine;
            continue;
        }
        rc = 0;
        break;
    }
out:
    free(buf);
    close(fd);
    return rc;
}

// ---------------------------------------------------------------------------
// tensor spans and the map

int gguf_tensor_span(const gguf_header *h, const gguf_tensor *t, uint64_t *off,
                     uint64_t *len, char *err, size_t errlen)
{
    uint64_t per, bb, row, n, bytes, start, e;
    char nb[16];
    if (!gguf_block_layout(t->type, &per, &bb)) {
        bk_err(err, errlen, "%s: type %s not readable", t->name, gguf_type_name(t->type, nb));
        return -1;
    }
    if (t->n_dims > 4) {
        bk_err(err, errlen, "%s: %" PRIu32 " dimensions; ggml allows at most 4", t->name, t->n_dims);
        return -1;
    }
    row = t->n_dims ? t->dims[0] : 1;
    if (row % per != 0) {
        bk_err(err, errlen, "%s: row length %" PRIu64 " is not a whole number of %" PRIu64
               "-element blocks", t->name, row, per);
        return -1;
    }
    n = t->nelem > UINT64_MAX ? UINT64_MAX : (uint64_t)t->nelem;
    if (t->nelem > UINT64_MAX || __builtin_mul_overflow(n / per, bb, &bytes) ||
        __builtin_add_overflow(h->data_start, t->offset, &start) ||
        __builtin_add_overflow(start, bytes, &e)) {
        bk_err(err, errlen, "%s: size or offset overflows", t->name);
        return -1;
    }
    *off = start;
    *len = bytes;
    return 0;
}

/* ---- the SIGBUS guard ----
 *
 * A file truncated while mapped makes any read of a page past its new end
 * raise SIGBUS, which would kill the process. The handler looks up the
 * faulting address among the open maps; inside one, it puts anonymous zero
 * pages over the rest of that map (MAP_FIXED; the fault is past the end,
 * so is everything after it), marks the map faulted and returns: the read
 * retries and sees zeros, on whatever thread (the pool's too). The engine
 * checks gguf_map_faulted after each decode call and ends the request.
 * Outside every map the default action is restored, so a real fault still
 * kills as before. */

#define GUARD_SLOTS 16
static struct {
    uintptr_t lo, hi;       /* 0, 0: free */
    int faulted;
} g_guard[GUARD_SLOTS];
static pthread_mutex_t g_guard_mu = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t g_page;

static void gguf_on_sigbus(int sig, siginfo_t *si, void *uc)
{
    uintptr_t a = (uintptr_t)si->si_addr;
    (void)uc;
    for (int i = 0; i < GUARD_SLOTS; i++) {
        uintptr_t lo = __atomic_load_n(&g_guard[i].lo, __ATOMIC_ACQUIRE);
        uintptr_t hi = __atomic_load_n(&g_guard[i].hi, __ATOMIC_ACQUIRE);
        if (!lo || a < lo || a >= hi) continue;
        uintptr_t page = a & ~(g_page - 1);
        if (mmap((void *)page, hi - page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
            break;
        __atomic_store_n(&g_guard[i].faulted, 1, __ATOMIC_RELEASE);
        return;
    }
    signal(sig, SIG_DFL);   /* not a map's: the fault is real; it repeats and kills */
}

static void gguf_guard_install(void)
{
    struct sigaction sa;
    long pg = sysconf(_SC_PAGESIZE);
    g_page = pg > 0 ? (uintptr_t)pg : 4096;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = gguf_on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, NULL);
}

static int gguf_guard_add(const void *p, size_t len)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    int slot = -1;
    pthread_once(&once, gguf_guard_install);
    pthread_mutex_lock(&g_guard_mu);
    for (int i = 0; i < GUARD_SLOTS && slot < 0; i++)
        if (!g_guard[i].lo) slot = i;
    if (slot >= 0) {
        __atomic_store_n(&g_guard[slot].faulted, 0, __ATOMIC_RELEASE);
        __atomic_store_n(&g_guard[slot].hi, (uintptr_t)p + len, __ATOMIC_RELEASE);
        __atomic_store_n(&g_guard[slot].lo, (uintptr_t)p, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&g_guard_mu);
    return slot;
}

static void gguf_guard_drop(int slot)
{
    if (slot < 0 || slot >= GUARD_SLOTS) return;
    pthread_mutex_lock(&g_guard_mu);
    __atomic_store_n(&g_guard[slot].lo, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&g_guard[slot].hi, 0, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&g_guard_mu);
}

int gguf_map_faulted(const gguf_map *m)
{
    return m->p && m->guard >= 0 && m->guard < GUARD_SLOTS && __atomic_load_n(&g_guard[m->guard].faulted, __ATOMIC_ACQUIRE);
}

int gguf_map_open(const char *path, gguf_map *m, char *err, size_t errlen)
{
    struct stat st;
    void *p;
    int fd;
    memset(m, 0, sizeof *m);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        bk_err(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    if (fstat(fd, &st) != 0) {
        bk_err(err, errlen, "cannot stat %s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        bk_err(err, errlen, "%s is not a regular file", path);
        close(fd);
        return -1;
    }
    if (st.st_size <= 0) {                    /* mmap cannot map 0 bytes */
        bk_err(err, errlen, "%s is empty", path);
        close(fd);
        return -1;
    }
    if ((uint64_t)st.st_size > SIZE_MAX) {
        bk_err(err, errlen, "%s is too large to map", path);
        close(fd);
        return -1;
    }
    p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
        bk_err(err, errlen, "cannot map %s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    m->p = p;
    m->len = (size_t)st.st_size;
    m->fd = fd;                                /* kept: fstat tells whether the mapped file moved */
    m->guard = gguf_guard_add(p, m->len);
    m->dev = (uint64_t)st.st_dev;
    m->ino = (uint64_t)st.st_ino;
    m->size = (uint64_t)st.st_size;
    m->mtime_sec = (int64_t)st.st_mtim.tv_sec;
    m->mtime_nsec = st.st_mtim.tv_nsec;
    m->ctime_sec = (int64_t)st.st_ctim.tv_sec;
    m->ctime_nsec = st.st_ctim.tv_nsec;
    return 0;
}

/* The stat fields a map records, equal to st's. */
static int gguf_map_same_stat(const gguf_map *m, const struct stat *st)
{
    return (uint64_t)st->st_dev == m->dev && (uint64_t)st->st_ino == m->ino && (uint64_t)st->st_size == m->size &&
           (int64_t)st->st_mtim.tv_sec == m->mtime_sec && st->st_mtim.tv_nsec == m->mtime_nsec &&
           (int64_t)st->st_ctim.tv_sec == m->ctime_sec && st->st_ctim.tv_nsec == m->ctime_nsec;
}

int gguf_map_intact(const gguf_map *m)
{
    struct stat st;
    return m->p && fstat(m->fd, &st) == 0 && gguf_map_same_stat(m, &st) && !gguf_map_faulted(m);
}

void gguf_map_close(gguf_map *m)
{
    if (!m) return;
    if (m->p) {
        gguf_guard_drop(m->guard);
        munmap((void *)m->p, m->len);
        close(m->fd);
    }
    memset(m, 0, sizeof *m);
}

int gguf_map_unchanged(const gguf_map *m, const char *path)
{
    struct stat st;
    if (!m->p || stat(path, &st) != 0) return 0;
    return gguf_map_same_stat(m, &st) && gguf_map_intact(m);
}

const uint8_t *gguf_map_tensor(const gguf_map *m, const gguf_header *h, const gguf_tensor *t,
                               char *err, size_t errlen)
{
    uint64_t off, len;
    if (gguf_tensor_span(h, t, &off, &len, err, errlen)) return NULL;
    if (!m->p || off > m->len || len > m->len - off) {
        bk_err(err, errlen, "%s: runs past the end of the file", t->name);
        return NULL;
    }
    return m->p + off;
}
