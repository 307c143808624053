/*
 * verify.h -- the two gates in their order: guard, then pin. The public
 * declarations are in include/bankml.h; this header lets other modules reach
 * the guard's report of a verified model.
 */
#ifndef BANKML_VERIFY_H
#define BANKML_VERIFY_H

#include "bankml.h"
#include "file/gguf.h"

struct bankml_verified {
    char sha256[65];
    gguf_report report;     /* the guard's report (PLAY), with the parsed header */
};

/* Writes the `Verified` object into out (one line, no newline). */
void verify_json(const bankml_verified *v, jbuf *out);
/* Writes the refusal object {"verdict": "refuse", "reason": ..., "bankml": ...}. */
void verify_refusal_json(const char *reason, jbuf *out);

#endif
