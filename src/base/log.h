/*
 * log.h -- bankml's log: one line per event for a person (text on stderr)
 * or an operator (JSON lines on stdout, llama-server's --log-jsonl place and
 * its "type", "time", "level", "msg" members, then bankml's own), the
 * newest BK_LOG_RING lines kept for /bankml/status, and the flags of
 * llama-server's --log-* family that change what a reader sees. Every layer
 * may call it; it calls only libc. See docs/modules/log.md.
 */
#ifndef BANKML_LOG_H
#define BANKML_LOG_H

#include <stddef.h>
#include <stdint.h>

#include "base/json.h"

/* llama-server's verbosity levels (-lv): a line is written when its level
 * is at most the threshold; 0 is always written. */
enum { BK_LOG_GENERIC = 0, BK_LOG_ERROR = 1, BK_LOG_WARN = 2, BK_LOG_INFO = 3, BK_LOG_DEBUG = 4 };

#define BK_LOG_RING 200

typedef struct {
    int json;            /* JSON lines on stdout instead of text on stderr */
    int disabled;        /* --log-disable: nothing is written anywhere (the ring is still kept) */
    const char *file;    /* --log-file: every line also goes there (truncated at start); NULL none */
    int colors;          /* ANSI colours on warn (magenta), error (red) and debug (yellow) lines of the text form */
    int prefix;          /* the level's letter before each text line ("I ", "W ", "E ", "D ") */
    int timestamps;      /* with prefix, the time since start before it ("M.SS.mmm.uuu "); in JSON, "time" */
    int verbosity;       /* the threshold (llama-server's default 3; -v: INT32_MAX) */
} bk_log_opts;

/* The defaults: text on stderr, threshold 3, no prefix, no colours. */
void bk_log_opts_init(bk_log_opts *o);
/* Takes o for every later line (the file opened, truncated, now). 0, or -1
 * with why (the file cannot be opened); the log is unchanged then. */
int bk_log_setup(const bk_log_opts *o, char *err, size_t errlen);
/* Closes the --log-file. */
void bk_log_close(void);
/* Whether a line of level would be written (the threshold). */
int bk_log_on(int level);

/* One member of an event: a string (s non-NULL) or an integer or, when
 * is_ms, a duration in milliseconds (d). */
typedef struct {
    const char *key;
    const char *s;
    int64_t i;
    double d;
    int is_ms;
    int json_only;       /* left out of the text form (the message says it already) */
} bk_log_kv;

/* A message line: "<text>" (JSON: {"type":"log",...,"msg":text}). */
void bk_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* An event with members: text "<msg> key=value ..." (json_only ones left out) (a string member with a
 * space quoted; a member named "reason" last, after "refused: "); JSON
 * {"type":type,"time":...,"level":...,"msg":msg,"unix_ms":...,key:value...}. */
void bk_log_event(int level, const char *type, const char *msg, const bk_log_kv *kv, size_t n);
/* The ring, oldest first, as a JSON array of the lines' JSON objects,
 * appended to out. */
void bk_log_ring_json(jbuf *out);
/* The ring's text lines, oldest first, each with '\n', appended to out. */
void bk_log_ring_text(jbuf *out);

#endif
