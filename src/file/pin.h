/*
 * pin.h -- the pin: a GGUF is played only when its whole-file sha256 equals
 * the record for its base name in a FORK.json.
 *
 * A FORK.json is a JSON object whose "files" array holds entries
 *   {"path": "<file>.gguf", "bytes": N, "sha256": "<64 hex>"}
 * Any other key, at the top or inside an entry, is provenance the pin does
 * not read but keeps when it rewrites the file (pin_write).
 *
 * Return codes follow bankml's exit codes: 0 pinned, 2 refused (the model
 * must not be played; err says why), 1 I/O (a file could not be read or
 * written; err is "cannot ...").
 */
#ifndef BANKML_PIN_H
#define BANKML_PIN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* *bytes_out when the entry has no usable "bytes" (absent, not a
 * non-negative integer). */
#define PIN_BYTES_UNKNOWN UINT64_MAX

/*
 * Finds, in the FORK.json text[0..len), the first "files" entry whose "path"
 * has the base name `name` (the part after the last '/'; if `name` itself has
 * a '/', its base name is used). The text is parsed with json_parse(), so it
 * must be strict JSON.
 *
 * Returns 1 when that entry's "sha256" is a string of exactly 64 hex digits:
 * sha_out gets it lower-cased and NUL-ended, and *bytes_out (if bytes_out is
 * not NULL) the entry's "bytes" or PIN_BYTES_UNKNOWN.
 * Returns 0 when there is no such entry, when the first such entry's sha256
 * is missing or malformed (treated as unpinned), or when the object has no
 * "files" key. sha_out and *bytes_out are then left alone.
 * Returns -1 when the text is not JSON, not an object, or "files" is not an
 * array; err gets a one-line reason (e.g. "invalid JSON at byte 3: ...",
 * "FORK.json is not a JSON object", "FORK.json \"files\" is not an array").
 * err may be NULL (errlen 0).
 */
int pin_lookup(const char *fork_json_text, size_t len, const char *name,
               char sha_out[65], uint64_t *bytes_out, char *err, size_t errlen);

/*
 * Verifies the GGUF at gguf_path against the FORK.json at fork_path:
 * reads the FORK.json, looks up the GGUF's base name, then hashes the whole
 * file (sha256_file, 1 MiB reads), taking the file's identity (device, inode,
 * size, mtime in ns) before and after hashing.
 *
 * Returns 0 when the sha256 equals the record; sha_out gets it.
 * Returns 2 (refused), err being exactly one of
 *   "<name> has no sha256 record in FORK.json: unpinned, refused (if it is
 *    the file you mean to run, pin it: bankml pin <gguf_path> --fork
 *    <fork_path> --write)"
 *   "<name> sha256 <got> != pinned <want>: refused"
 *   "<gguf_path> changed while it was being hashed: refused"
 *   "<fork_path>: <reason from pin_lookup>: refused" (FORK.json not usable)
 * where <name> is the base name of gguf_path.
 * Returns 1 (I/O), err being
 *   "cannot read <fork_path>: <strerror>"   (the FORK.json)
 *   "cannot hash <name>: <strerror>"        (the GGUF)
 * sha_out gets the file's sha256 whenever the file was hashed (so also on a
 * mismatch), else the empty string. err may be NULL (errlen 0).
 */
int pin_check(const char *gguf_path, const char *fork_path, char sha_out[65],
              char *err, size_t errlen);

/*
 * Pins the GGUF at gguf_path into the FORK.json at fork_path: hashes the
 * file (identity checked before and after, as pin_check), then writes the
 * FORK.json with the file's entry added or replaced:
 *   - the first entry whose path has the same base name is updated in place:
 *     "path" becomes the base name, "bytes" the file size, "sha256" the
 *     digest; its other keys stay, in their order;
 *   - with no such entry, {"path", "bytes", "sha256"} is appended to "files";
 *   - with no "files" key, one is appended to the object; with no FORK.json
 *     at all, the file {"files": [entry]} is created.
 * Every other key and entry is kept (numbers as their literal text). The
 * result is printed with 2-space indentation and a final newline, written to
 * "<fork_path>.tmp.<pid>", fsync'ed and renamed over fork_path, so a reader
 * sees the old file or the new one, never a mix. An existing FORK.json keeps
 * its permission bits.
 *
 * Returns 0 (sha_out = the file's sha256), 2 when the file changed while it
 * was hashed or the existing FORK.json is not usable (same messages as
 * pin_check), 1 on I/O: "cannot hash <name>: ...", "cannot read <fork_path>:
 * ...", "cannot write <fork_path>: ...".
 */
int pin_write(const char *gguf_path, const char *fork_path, char sha_out[65],
              char *err, size_t errlen);

/* The atomic write behind pin_write, for any file: data[0..n) written to tmp
 * (NULL: "<path>.tmp.<pid>"; it must not exist and must be on path's file
 * system), fsync'ed, renamed over path, and path's directory fsync'ed, so a
 * reader sees the old file or the new one, never a mix. mode < 0: a new
 * file (0666 less the umask), else the permission bits to set. 0, or -1
 * with errno set (tmp removed). */
int pin_replace_file(const char *path, const char *tmp, const void *data, size_t n, long mode);

/* Removes from dir the temporaries of writers killed mid-write: files (or
 * symlinks, never what they point to) named as pin_replace_file names its
 * own ("<file>.tmp.<pid>") or as derived-model manifests' are named
 * (".<name>.MODEL.json.<pid>[.<n>].tmp") whose pid is no running process.
 * The count removed, or -1 when dir cannot be read. */
int pin_clean_temps(const char *dir);

/*
 * A file's identity: what must not change between verifying a model and
 * using it. Cheaper than rehashing, and it catches a replaced file (new inode)
 * as well as one written in place (size, mtime or ctime).
 */
typedef struct {
    dev_t dev;
    ino_t ino;
    off_t size;
    int64_t mtime_sec;
    long mtime_nsec;
    int64_t ctime_sec;         /* moves on every write, even when mtime is put back (touch -r) */
    long ctime_nsec;
} pin_ident;

/* stat(2) of path (following symlinks) into *id. 0, or -1 with errno set. */
int pin_ident_of(const char *path, pin_ident *id);
/* 1 when the two identities are equal in every field. */
int pin_ident_same(const pin_ident *a, const pin_ident *b);

#endif
