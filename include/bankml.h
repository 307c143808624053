/*
 * bankml.h -- bankml's public C API.
 *
 * bankml plays a GGUF model only after two gates: the guard (its header is
 * judged alone, before anything else is read) and the pin (the whole file's
 * sha256 must equal its record in a FORK.json). bankml_verify() runs both in
 * that order and is what every command and route that loads a model calls.
 *
 * Conventions: functions that can fail on input return a status and write a
 * one-line reason a user can read into the caller's err buffer (errlen bytes,
 * always NUL-terminated when errlen > 0). Nothing here aborts on bad input.
 */
#ifndef BANKML_H
#define BANKML_H

#include <stddef.h>
#include <stdint.h>

#define BANKML_VERSION "0.1.0"

/* Exit codes of every command, after gguf_guard.py: */
enum {
    BANKML_OK = 0,          /* play / pinned / done */
    BANKML_EXIT_IO = 1,     /* usage, or a file that cannot be read or written */
    BANKML_REFUSE = 2,      /* refused, with a reason */
    BANKML_NEED_MORE = 3    /* the GGUF header is truncated */
};

typedef enum { BANKML_ENGINE_MAINLINE = 0, BANKML_ENGINE_PRISM = 1 } bankml_engine;

/* What bankml_verify() learned about a model that passed both gates. */
typedef struct bankml_verified bankml_verified;

/*
 * Guards then pins the GGUF at path against the FORK.json at fork_path.
 * Returns BANKML_OK with *out set (release it with bankml_verified_free), or
 * one of BANKML_REFUSE / BANKML_NEED_MORE / BANKML_EXIT_IO with err set to:
 *   "cannot read <path>: <why>"                    (1)
 *   "guard refused: <reason>; <reason>"            (2)
 *   "guard needs N header bytes: file truncated"   (3)
 *   "<name> has no sha256 record in FORK.json: unpinned, refused"   (2)
 *   "<name> sha256 <got> != pinned <want>: refused"                 (2)
 *   "<path> changed while it was being hashed: refused"             (2)
 *   "cannot hash <name>: <why>", "cannot read <fork>: <why>"        (1)
 */
int bankml_verify(const char *path, const char *fork_path, bankml_engine engine,
                  bankml_verified **out, char *err, size_t errlen);

/* The verified file's sha256 (64 lowercase hex digits). */
const char *bankml_verified_sha256(const bankml_verified *v);
/* The `Verified` JSON object of `bankml verify --json` and GET /bankml, one
 * line, malloc'd (the caller frees it); NULL when memory ran out. */
char *bankml_verified_json(const bankml_verified *v);
void bankml_verified_free(bankml_verified *v);

#endif
