/*
 * tools_int.h -- what api/tools.c takes from api/tools_io.c: b11669's path
 * rules (server-tools.cpp's tools_io_basic), its glob (common.cpp's
 * glob_match), its listing (git ls-files, then its own walk) and its child
 * processes (sheredom's subprocess as run_subprocess drives it). Internal to
 * the tools module.
 */
#ifndef BANKML_TOOLS_INT_H
#define BANKML_TOOLS_INT_H

#include <stddef.h>
#include <stdint.h>

#include "base/json.h"

/* tools_io_basic::resolve: a leading "~" or "~/" expanded with $HOME (read
 * once), a relative path joined to cwd (NULL or "": the server's working
 * directory), then std::filesystem's lexically_normal and a trailing
 * separator dropped (not the root's). Appended to out. */
void tio_resolve(const char *cwd, const char *path, jbuf *out);

/* The step budget of one request's glob matches (common.cpp's glob_match is
 * a plain recursion, exponential on some patterns): past it the request is
 * refused rather than run without bound. */
#define TIO_GLOB_STEPS 20000000L

/* glob_match(pattern, str): '*' any bytes but '/', '**' any bytes, '?' one
 * byte but '/', [...] a class ([!...] negated, a-z ranges of signed chars).
 * 1 match, 0 not, -1 the budget ran out (*budget counts down). */
int tio_glob(const char *pat, const char *s, long *budget);
/* path_glob_match: a pattern without '/' against the base name; "**",
 * "**" "/..." and "/..." against the whole relative path; another against
 * "**" "/" + pattern. */
int tio_path_glob(const char *pat, const char *rel, long *budget);

/* stat-based tests on an already resolved path (symlinks followed). */
int tio_is_dir(const char *path);
int tio_is_reg(const char *path);
/* std::filesystem::file_size: 1 with the size of a regular file, else 0. */
int tio_file_size(const char *path, uint64_t *size);
/* The whole file (std::ifstream): 1 with the bytes in out, 0 when it cannot
 * be opened or read, -1 out of memory. */
int tio_read(const char *path, jbuf *out);
/* write_file: the parent directories created (create_directories), then the
 * file truncated and written. 1, or 0. */
int tio_write(const char *path, const char *p, size_t n);

enum { TIO_FILES, TIO_DIRS, TIO_ALL };
typedef struct {
    char *rel;      /* '/'-separated, relative to the base */
    int is_dir;
} tio_entry;
typedef struct {
    tio_entry *v;
    size_t n, cap;
    int truncated;  /* the walk ran out of time or met an unreadable directory */
    int oom;
} tio_list;
/* list_entries of tools_io_basic: base (resolved) must be a directory (else
 * 1: "path does not exist or is not a directory"); files are listed by
 * `git -C base ls-files --cached --others --exclude-standard` run in cwd when
 * it succeeds (depth-filtered, each checked a regular file), else (and for
 * dirs/all) by b11669's walk: depth first from the last pushed, entries in
 * readdir order, symlinked directories listed but not entered, junk
 * directories (.git, node_modules, build, ...) listed but not entered,
 * max_depth 0 unlimited, 15 s for the whole listing. 0, 1, or -1 (out of
 * memory). */
int tio_list_entries(const char *cwd, const char *base, int max_depth, int kind, tio_list *out);
void tio_list_free(tio_list *l);

/* A chunk of a child's output as it is read; nonzero stops the child (the
 * client left). */
typedef int (*tio_chunk_fn)(void *ud, const char *p, size_t n);
typedef struct {
    jbuf out;           /* the output (stdout and stderr in one pipe), "\n[output truncated]" past max_output;
                           "failed to spawn process" when it could not start */
    int exit_code;      /* its exit status; 1 (EXIT_FAILURE) when a signal ended it; -1 not started */
    int timed_out;
} tio_exec;
/* run_subprocess(args, max_output, timeout, on_chunk, combined, cwd):
 * argv[0] searched in PATH, the server's environment, cwd (NULL: the
 * server's) as its working directory, stdin closed at once, stdout and
 * stderr into one pipe read 4096 bytes at a time, killed (with its process
 * group) timeout_s seconds after the start. r->out initialised here; free
 * it with jbuf_free. */
void tio_run(char *const argv[], const char *cwd, size_t max_output, int timeout_s, tio_chunk_fn fn, void *ud,
             tio_exec *r);

#endif
