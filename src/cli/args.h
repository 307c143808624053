/*
 * args.h -- the command line's one argument parser, used by every command.
 *
 * A command's grammar is a command_spec: its positional count and the
 * options it takes. Unknown options and stray arguments are errors; every
 * error prints the reason and the command's usage line.
 */
#ifndef BANKML_ARGS_H
#define BANKML_ARGS_H

#include <stdint.h>

#define ARGS_MAX_FLAGS 16
#define ARGS_MAX_VALUED 48
#define ARGS_MAX_OPTS 64

typedef struct {
    const char *name;                       /* the command word */
    const char *usage;                      /* its usage line, after "bankml " */
    int n_pos;                              /* positional arguments required */
    const char *flags[ARGS_MAX_FLAGS];      /* options without a value */
    const char *valued[ARGS_MAX_VALUED];    /* options that take the next argument */
    int max_pos;                            /* positional arguments allowed (0: n_pos) */
} command_spec;

typedef struct {
    const char *pos[4];
    int n_pos;
    const char *opt_name[ARGS_MAX_OPTS];
    const char *opt_value[ARGS_MAX_OPTS];   /* NULL for a flag */
    int n_opt;
} parsed_args;

/* Prints "usage: bankml <usage>" to stderr. */
void args_usage(const command_spec *c);
/* Parses argv (after the command word) by c. 0, or 1 after printing why
 * and the usage line. */
int args_parse(const command_spec *c, int argc, char **argv, parsed_args *a);
/* The last value given for an option ("" for a flag), or NULL. */
const char *args_opt(const parsed_args *a, const char *name);
/* The first of two spellings given (e.g. "--ctx", "-c"), or NULL. */
const char *args_opt2(const parsed_args *a, const char *name, const char *alias);
/* An integer option in [lo, hi]: 0 with *out set (def when absent), or -1
 * after printing why and the usage line. */
int args_long(const command_spec *c, const char *opt, const char *v, long lo, long hi, long def, long *out);
/* "30s", "5m", "1h", "250ms", a bare number of seconds; "-1"/"forever" is
 * -1 (never). 0, or -1 when it is none of these. */
int args_duration_ms(const char *s, int64_t *ms);

#endif
