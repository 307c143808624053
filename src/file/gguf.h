/*
 * gguf.h -- the GGUF header parser, the guard, the weight-type table,
 * checked tensor spans and the read-only map.
 *
 * The guard decides from a GGUF file's header alone whether bankml may play
 * it: PLAY, REFUSE (with reasons) or NEED_MORE (header bytes). It is a port
 * of minaiml's gguf_guard.py through bankML's Rust gguf.rs: same verdicts,
 * same reason texts, same JSON keys; where the Python crashes or fails open
 * (malformed header, deep nesting, a KV size that overflows i128) this port
 * refuses, as the Rust does. The guard never reads tensor data.
 *
 * The rest of the file is what later stages need to reach tensor data
 * safely: the table of weight types (name, block layout; the kernels add
 * their function pointers to it), lazy bounds-checked decoding of metadata
 * arrays (the tokenizer's vocabulary), tensor spans checked end to end, and
 * a PROT_READ / MAP_PRIVATE map of the file.
 *
 * Every routine that reads file bytes treats them as hostile: little-endian
 * reads are byte-wise, sizes and offsets use checked arithmetic, and nothing
 * reads past the buffer it was given. Functions that can fail on input
 * return a status and write a one-line reason into the caller's err buffer
 * (err may be NULL when errlen is 0).
 */
#ifndef BANKML_GGUF_H
#define BANKML_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "base/json.h"

/* GGML_TYPE_COUNT in ggml.h at b11192 and b11669: ids at or above it are
 * unknown to mainline llama.cpp. */
#define GGUF_MAINLINE_COUNT   43
/* Arrays of arrays deeper than this refuse (each level costs 12 header
 * bytes, so the limit bounds work, not just stack). */
#define GGUF_MAX_ARRAY_DEPTH  64
/* Dimensions kept per tensor; a tensor may declare more (the guard accepts
 * it, as the Python does) but gguf_tensor_span refuses more than 4. */
#define GGUF_MAX_STORED_DIMS  8
/* The header prefix gguf_guard_file reads first. */
#define GGUF_GUARD_PREFIX     ((uint64_t)32 << 20)

/* ---- weight types ------------------------------------------------------ */

/* ggml type ids (ggml.h at b11669) plus the PrismML fork's two. Ids with no
 * name here (4, 5, 31-33, 36-38, 43-141, 144+) print as their number. */
enum {
    GGUF_TYPE_F32 = 0, GGUF_TYPE_F16 = 1, GGUF_TYPE_Q4_0 = 2, GGUF_TYPE_Q4_1 = 3,
    GGUF_TYPE_Q5_0 = 6, GGUF_TYPE_Q5_1 = 7, GGUF_TYPE_Q8_0 = 8, GGUF_TYPE_Q8_1 = 9,
    GGUF_TYPE_Q2_K = 10, GGUF_TYPE_Q3_K = 11, GGUF_TYPE_Q4_K = 12, GGUF_TYPE_Q5_K = 13,
    GGUF_TYPE_Q6_K = 14, GGUF_TYPE_Q8_K = 15, GGUF_TYPE_IQ2_XXS = 16, GGUF_TYPE_IQ2_XS = 17,
    GGUF_TYPE_IQ3_XXS = 18, GGUF_TYPE_IQ1_S = 19, GGUF_TYPE_IQ4_NL = 20, GGUF_TYPE_IQ3_S = 21,
    GGUF_TYPE_IQ2_S = 22, GGUF_TYPE_IQ4_XS = 23, GGUF_TYPE_I8 = 24, GGUF_TYPE_I16 = 25,
    GGUF_TYPE_I32 = 26, GGUF_TYPE_I64 = 27, GGUF_TYPE_F64 = 28, GGUF_TYPE_IQ1_M = 29,
    GGUF_TYPE_BF16 = 30, GGUF_TYPE_TQ1_0 = 34, GGUF_TYPE_TQ2_0 = 35, GGUF_TYPE_MXFP4 = 39,
    GGUF_TYPE_NVFP4 = 40, GGUF_TYPE_Q1_0 = 41, GGUF_TYPE_Q2_0 = 42,
    GGUF_TYPE_PQ2_0 = 142, GGUF_TYPE_PTQ1_0 = 143,
    GGUF_TYPE_TABLE_SIZE = 144          /* ids below this have a table row */
};

/* One row of the weight-type table (ggml's type_traits, bankml's share of
 * it). block_elems and block_bytes are 0 when bankml cannot read the type;
 * being readable is not having a kernel (the planner decides that). Later
 * modules add their function pointers here. */
typedef struct {
    const char *name;        /* NULL: no settled name, prints as the number */
    uint32_t block_elems;    /* elements per block; 0 = not readable */
    uint32_t block_bytes;    /* bytes per block; 0 = not readable */
} gguf_type_info;

/* The table row for a type id, or NULL when the id is >= GGUF_TYPE_TABLE_SIZE.
 * A row with name == NULL is an id nobody named. */
const gguf_type_info *gguf_type_info_of(uint32_t id);

/* The type's name ("F32", "Q1_0", "PQ2_0"), or its id in decimal written
 * into buf when it has none. Returns a static string or buf. */
const char *gguf_type_name(uint32_t id, char buf[16]);

/* Block layout of a type bankml reads: F32 (1,4), F16 and BF16 (1,2),
 * Q8_0 (32,34), Q1_0 (128,18), Q2_0 (64,18), Q4_0 (32,18), Q4_1 (32,20),
 * Q5_0 (32,22), Q5_1 (32,24), Q4_K (256,144), Q5_K (256,176), Q6_K (256,210),
 * and the activation types Q8_1 (32,36) and Q8_K (256,292).
 * Returns 1 and fills both, or 0 (outputs untouched) for any other id. */
int gguf_block_layout(uint32_t id, uint64_t *elems, uint64_t *bytes);

/* ---- header ------------------------------------------------------------ */

/* Metadata value types. */
enum {
    GGUF_VT_U8 = 0, GGUF_VT_I8 = 1, GGUF_VT_U16 = 2, GGUF_VT_I16 = 3,
    GGUF_VT_U32 = 4, GGUF_VT_I32 = 5, GGUF_VT_F32 = 6, GGUF_VT_BOOL = 7,
    GGUF_VT_STRING = 8, GGUF_VT_ARRAY = 9, GGUF_VT_U64 = 10, GGUF_VT_I64 = 11,
    GGUF_VT_F64 = 12
};

typedef enum {
    GGUF_OK = 0,
    GGUF_NEED_MORE = 1,     /* the buffer ended; *need says how far a read wanted */
    GGUF_MALFORMED = 2,     /* not a GGUF, or one no engine can read; err says why */
    GGUF_NOMEM = 3          /* an allocation failed; err says "out of memory" */
} gguf_status;

/* One metadata entry. Strings (key, str) are the file's bytes decoded as
 * UTF-8 with invalid sequences replaced by U+FFFD (as Python's "replace" and
 * Rust's from_utf8_lossy), NUL-terminated, owned by the header; they may
 * hold U+0000, so use the lengths. Read values through gguf_kv_* below. */
typedef struct {
    const char *key;
    size_t key_len;
    uint32_t type;          /* GGUF_VT_* */
    uint32_t arr_type;      /* ARRAY: element type (any u32 the file wrote) */
    uint64_t u;             /* U8/U16/U32/U64, BOOL (0/1) */
    int64_t i;              /* I8/I16/I32/I64 */
    double f;               /* F32 (widened) / F64 */
    const char *str;        /* STRING: lossy-decoded copy */
    size_t str_len;
    uint64_t arr_n;         /* ARRAY: element count */
    uint64_t off;           /* file offset of the value (after the type id);
                               ARRAY: first element is at off + 12 */
    uint64_t end;           /* file offset just past the value */
} gguf_kv;

/* One tensor-table entry. The name is lossy-decoded like keys. */
typedef struct {
    const char *name;
    size_t name_len;
    uint32_t n_dims;        /* as the file says; may exceed GGUF_MAX_STORED_DIMS */
    uint32_t type;          /* ggml type id, any u32 */
    uint64_t dims[GGUF_MAX_STORED_DIMS];  /* the first min(n_dims, 8) */
    uint64_t offset;        /* relative to data_start */
    unsigned __int128 nelem;  /* product of all n_dims dims, saturating */
} gguf_tensor;

typedef struct {
    uint32_t version;       /* any value is accepted and reported */
    size_t n_kv;            /* entries in file order; duplicates kept */
    gguf_kv *kv;
    size_t n_tensors;
    gguf_tensor *tensors;
    uint64_t alignment;     /* general.alignment, default 32 */
    uint64_t header_end;    /* offset just past the tensor table */
    uint64_t data_start;    /* header_end rounded up to alignment (saturating) */
    char *arena;            /* private: holds every string above */
} gguf_header;

/* Parses a GGUF header from b[0..n), a prefix of the file. On GGUF_OK *h
 * owns memory to release with gguf_header_free(). On GGUF_NEED_MORE, *need
 * is the offset the failed read needed (position + size, UINT64_MAX when
 * that overflows); on GGUF_MALFORMED err holds the reason ("not a GGUF
 * file", "unknown gguf value type 13", "gguf arrays nested deeper than 64",
 * "general.alignment 0 is not a positive integer"). On anything but GGUF_OK
 * *h is left empty (gguf_header_free on it is harmless). need may be NULL.
 * Arrays of fixed-size scalars are stepped over by length; string arrays
 * and arrays of arrays are walked with an explicit stack (no recursion). */
gguf_status gguf_parse(const uint8_t *b, size_t n, gguf_header *h, uint64_t *need,
                       char *err, size_t errlen);
void gguf_header_free(gguf_header *h);

/* The entry for key (NUL-terminated; gguf_kv_findn for a length), or NULL.
 * Duplicate keys: the last one wins, as in a Python dict. */
const gguf_kv *gguf_kv_find(const gguf_header *h, const char *key);
const gguf_kv *gguf_kv_findn(const gguf_header *h, const char *key, size_t len);

/* Typed views of a scalar entry. Each returns 1 and sets *out, or 0 (out
 * untouched) when kv is NULL or the value does not fit:
 *   u64: an integer type or BOOL whose value is >= 0;
 *   i64: an integer type or BOOL whose value fits int64_t;
 *   f64: F32/F64, or any integer type or BOOL converted;
 *   str: STRING only; returns the lossy copy (and its length in *len when
 *        len is not NULL), else NULL. */
int gguf_kv_u64(const gguf_kv *kv, uint64_t *out);
int gguf_kv_i64(const gguf_kv *kv, int64_t *out);
int gguf_kv_f64(const gguf_kv *kv, double *out);
const char *gguf_kv_str(const gguf_kv *kv, size_t *len);

/* The first tensor named name, or NULL. */
const gguf_tensor *gguf_tensor_find(const gguf_header *h, const char *name);

/* ---- lazy array decoding ------------------------------------------------ */

/* Walks one ARRAY entry's elements in a buffer holding the file (the map,
 * or a prefix of it), checking every read against both the buffer and the
 * extent the parser found for the array. Fields are private except left. */
typedef struct {
    const uint8_t *b;
    uint64_t pos;           /* next element */
    uint64_t end;           /* min(buffer length, the array's end) */
    uint32_t type;          /* element type */
    uint64_t left;          /* elements not yet read */
} gguf_arr_iter;

/* Starts at kv's first element in b[0..n). Returns 0, or -1 with a reason
 * when kv is NULL or not an ARRAY. */
int gguf_arr_begin(gguf_arr_iter *it, const gguf_kv *kv, const uint8_t *b, size_t n,
                   char *err, size_t errlen);
/* Each returns 1 with the next element, 0 when none are left, or -1 with a
 * reason when the element type is not the asked kind or the element runs
 * past the end of the buffer or of the array.
 *   str: STRING elements; *s points into the buffer (raw bytes, not
 *        NUL-terminated, not UTF-8 checked), *len its length;
 *   i64: integer and BOOL elements (a U64 above INT64_MAX is an error);
 *   f64: any numeric element (F32 widened, integers converted). */
int gguf_arr_next_str(gguf_arr_iter *it, const uint8_t **s, uint64_t *len,
                      char *err, size_t errlen);
int gguf_arr_next_i64(gguf_arr_iter *it, int64_t *v, char *err, size_t errlen);
int gguf_arr_next_f64(gguf_arr_iter *it, double *v, char *err, size_t errlen);

/* ---- tensor data -------------------------------------------------------- */

/* The absolute file offset and byte length of a tensor's blocks. Returns 0,
 * or -1 with the reason ("t: type Q4_0 not readable", "t: 5 dimensions;
 * ggml allows at most 4", "t: row length 100 is not a whole number of
 * 128-element blocks", "t: size or offset overflows"). A tensor with no
 * dimensions has one element (a row of length 1), as in ggml. The span is
 * not checked against the file; gguf_map_tensor does that. */
int gguf_tensor_span(const gguf_header *h, const gguf_tensor *t, uint64_t *off,
                     uint64_t *len, char *err, size_t errlen);

/* A read-only private map of a whole file, of a descriptor kept open: the
 * identity fields (and fstat of fd) let a caller check that the file mapped
 * is unchanged and that the path still names it (gguf_map_unchanged). A
 * SIGBUS from reading past the end of a file that shrank under the map is
 * caught (see gguf_map_faulted). */
typedef struct {
    const uint8_t *p;       /* NULL when not open */
    size_t len;
    int fd;                 /* the mapped file, open while p is */
    int guard;              /* its slot in the SIGBUS guard, or -1 */
    uint64_t dev, ino, size;
    int64_t mtime_sec, ctime_sec;
    long mtime_nsec, ctime_nsec;
} gguf_map;

/* Maps path (PROT_READ, MAP_PRIVATE). Returns 0, or -1 with the reason
 * ("cannot open x: No such file or directory", "x is empty", "x is not a
 * regular file"); *m is then zeroed. */
int gguf_map_open(const char *path, gguf_map *m, char *err, size_t errlen);
/* Unmaps and closes; harmless on a zeroed or already closed map. */
void gguf_map_close(gguf_map *m);
/* 1 when the mapped file is unchanged (its size, modification and change
 * times, by fstat of the descriptor held; ctime moves on every write, even
 * one whose mtime is put back with touch -r) and path still names it (same
 * device, inode, size, mtime, ctime), and no read of the map has faulted;
 * else 0. */
int gguf_map_unchanged(const gguf_map *m, const char *path);
/* 1 when the mapped file itself still has the size and times it had when
 * mapped and no read faulted (fstat only: cheap enough for every decode
 * step), else 0. */
int gguf_map_intact(const gguf_map *m);
/* 1 when a read of the map hit a page past the file's end (the file shrank
 * under the map): the SIGBUS was caught, the rest of the map reads as
 * zeros from then on, and what was computed from it must be thrown away.
 * Maps are guarded while open (at most 16 at once; more map unguarded). */
int gguf_map_faulted(const gguf_map *m);
/* The tensor's bytes inside the map, or NULL with the reason when
 * gguf_tensor_span refuses it or the span runs past the end of the map
 * ("t: runs past the end of the file"). h must be the map's header. */
const uint8_t *gguf_map_tensor(const gguf_map *m, const gguf_header *h,
                               const gguf_tensor *t, char *err, size_t errlen);

/* ---- the guard ---------------------------------------------------------- */

typedef enum { GGUF_ENGINE_MAINLINE = 0, GGUF_ENGINE_PRISM = 1 } gguf_engine;

/* REFUSE is 0 so a zeroed report refuses. */
typedef enum {
    GGUF_VERDICT_REFUSE = 0,
    GGUF_VERDICT_PLAY = 1,
    GGUF_VERDICT_NEED_MORE = 2
} gguf_verdict;

typedef struct { uint32_t id; uint64_t count; } gguf_type_count;
typedef struct { char *text; size_t len; } gguf_reason;   /* text NUL-terminated */

/* The guard's answer. Only verdict, engine and bytes_needed are set for
 * NEED_MORE; a malformed header gives REFUSE with one reason and nothing
 * else filled (version 0, no arch/name, 0 tensors, no types). */
typedef struct {
    gguf_verdict verdict;
    gguf_engine engine;
    uint32_t gguf_version;
    char *arch;             /* Python str() of general.architecture, or NULL */
    size_t arch_len;
    char *name;             /* Python str() of general.name, or NULL */
    size_t name_len;
    uint64_t tensors;       /* tensor count */
    size_t n_types;
    gguf_type_count *types; /* distinct type ids with their counts, by id */
    int has_kv_bytes;       /* kv_f16_bytes_per_token computed */
    __int128 kv_f16_bytes_per_token;
    size_t n_reasons;
    gguf_reason *reasons;   /* in the order the rules appended them */
    uint64_t bytes_needed;  /* NEED_MORE: the offset a read needed */
    int has_header;         /* header parsed (PLAY or a rule's REFUSE) */
    gguf_header header;
} gguf_report;

/* The pure guard over a header prefix b[0..n), as gguf_guard.judge(b,
 * engine, file_size, filename): file_size is the file's length, or -1 when
 * unknown (then the last tensor's Q2_0 size check is skipped; 0 counts, as
 * in the Rust); filename is the file's base name for the Bonsai 2 label
 * (may be NULL). Returns 0 with *r filled (free with gguf_report_free), or
 * -1 when memory ran out (then *r is a zeroed REFUSE with no reasons). */
int gguf_judge(const uint8_t *b, size_t n, gguf_engine engine, int64_t file_size,
               const char *filename, gguf_report *r);

/* Guards a file: reads min(32 MiB, file size) and, while the verdict is
 * NEED_MORE for bytes the file has, re-reads max(needed, 2 x previous)
 * capped at the file size; so NEED_MORE survives only for a truncated file.
 * The judge sees max(file size, bytes read) and the path's base name.
 * Returns 0 with *r filled, or -1 with the reason in err when the file
 * cannot be read ("No such file or directory (os error 2)", or "out of
 * memory"); *r is then a zeroed REFUSE. */
int gguf_guard_file(const char *path, gguf_engine engine, gguf_report *r,
                    char *err, size_t errlen);

void gguf_report_free(gguf_report *r);

/* Appends the report as one line of JSON (no newline), keys in the order of
 * gguf_guard.py: gguf_version, arch, name, tensors, types, engine, reasons,
 * kv_f16_bytes_per_token (only when computed), verdict; separators ", " and
 * ": ". NEED_MORE prints {"verdict": "need_more", "bytes_needed": N}. */
void gguf_report_json(const gguf_report *r, jbuf *out);
/* Appends the text form of `bankml guard`: "<verdict> <TYPE>:<n> ...\n"
 * (types space-separated; the space after the verdict is always there, as
 * in the Rust), then "  - <reason>\n" per reason. */
void gguf_report_text(const gguf_report *r, jbuf *out);

const char *gguf_verdict_str(gguf_verdict v);   /* "play", "refuse", "need_more" */
const char *gguf_engine_str(gguf_engine e);     /* "mainline", "prism" */
/* Exit code of `bankml guard`: 0 play, 2 refuse, 3 need_more. */
int gguf_verdict_exit(gguf_verdict v);

#endif
