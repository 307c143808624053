/*
 * progress.h -- a progress line for a person at a terminal: work that takes
 * seconds on real models (hashing a file, loading a model, a long prompt's
 * prefill) shows what is done, the rate and the time left on one line of
 * stderr, redrawn at most ten times a second and erased when the work ends.
 * Only when a command turned it on (bk_progress_enable) and stderr is a
 * terminal: never in a pipe, a file or a log. One piece of work at a time
 * (a second begin while one runs is ignored). See docs/modules/log.md.
 */
#ifndef BANKML_PROGRESS_H
#define BANKML_PROGRESS_H

#include <stdint.h>

/* on: draw progress lines from now, if stderr is a terminal (checked here,
 * once). BANKML_PROGRESS=0 in the environment keeps them off; =1 draws them
 * whatever stderr is (for tests that read a pipe). */
void bk_progress_enable(int on);
/* A piece of work: label ("hashing stories260K.gguf"), its total in units
 * (bytes when unit is "B", else e.g. "tokens"; 0: unknown, only the time is
 * shown). Returns a handle > 0 when this call began it (pass it to update
 * and end), 0 when progress is off or another piece runs. */
int bk_progress_begin(const char *label, uint64_t total, const char *unit);
/* done units so far. */
void bk_progress_update(int h, uint64_t done);
/* The end: the line erased. */
void bk_progress_end(int h);
/* Erases the line if one is drawn (a log line is about to be written); the
 * next update draws it again. */
void bk_progress_interrupt(void);
/* The line that would be drawn for done of total units over secs seconds,
 * into out (for tests): "label  43% 12.0 MiB of 28.0 MiB, 150.2 MiB/s, 0.1 s left". */
void bk_progress_format(char *out, size_t n, const char *label, uint64_t done, uint64_t total, const char *unit,
                        double secs);

#endif
