/*
 * args.h -- the command line's one argument parser and help printer, used
 * by every command.
 *
 * A command's grammar is a command_spec: its positional arguments and a
 * table of options (arg_opt), one row per option with every spelling, its
 * negations, its value, the environment variable that sets it, its default,
 * one line of meaning and what bankml does with it. The parser reads only
 * that table and `--help` prints only it, so the two cannot drift.
 *
 * Spellings, as llama-server b11669 reads them: every spelling of a row
 * (short and long), its negations (`--no-slots`), a valued option's next
 * argument, and for a `--long` option `--long=value` too (llama-server
 * itself refuses that form). `_` in a `--` option reads as `-`
 * (`--backend_sampling`). A row's environment variable is read first and
 * the command line overrides it: a switch is set by 1/true/on/enabled; a
 * negatable switch also takes 0/false/off/disabled (anything else is an
 * error) and LLAMA_ARG_NO_<NAME> negates it; a valued option takes the
 * variable's text. Given twice, the last one wins. Unknown options and
 * stray arguments are errors; every error prints the reason and the
 * command's usage line.
 */
#ifndef BANKML_ARGS_H
#define BANKML_ARGS_H

#include <stddef.h>
#include <stdint.h>

#define ARGS_MAX_ROWS 320

/* What the command does with an option (bankml serve's flags are llama-server's). */
typedef enum {
    ARG_OWN = 0,        /* bankml's own option */
    ARG_SAME,           /* llama-server's, reproduced exactly */
    ARG_INERT,          /* llama-server's, accepted: it cannot change an answer (why says how) */
    ARG_SOME,           /* llama-server's; the values in `ok` are reproduced, the others refused (why) */
    ARG_REFUSED         /* llama-server's, refused at start (why: what is not reproduced, what to do) */
} arg_kind;

typedef struct {
    const char *names;  /* spellings, space-separated: "-c --ctx-size" */
    const char *negs;   /* negations, space-separated ("--no-slots"), or NULL */
    const char *arg;    /* the value's name ("N"), or NULL for a switch */
    const char *env;    /* the environment variable read before the command line, or NULL */
    const char *def;    /* the default as --help shows it ("" when there is none to show) */
    const char *help;   /* one line: what it means */
    arg_kind kind;
    const char *why;    /* ARG_INERT: why it cannot change an answer; ARG_SOME/ARG_REFUSED: the reason */
    const char *ok;     /* ARG_SOME: values reproduced, space-separated; "+" the switch on, "-" negated */
} arg_opt;

typedef struct {
    const char *name;       /* the command word */
    const char *usage;      /* its usage line, after "bankml " */
    const char *summary;    /* one line: what the command does */
    int n_pos;              /* positional arguments required */
    int max_pos;            /* positional arguments allowed (0: n_pos) */
    const arg_opt *opts;    /* its options */
    size_t n_opts;
} command_spec;

typedef struct {
    const command_spec *spec;
    const char *pos[4];
    int n_pos;
    /* per row of spec->opts: 0 absent, 1 given, -1 negated */
    signed char state[ARGS_MAX_ROWS];
    char from_env[ARGS_MAX_ROWS];           /* set by its environment variable, not the command line */
    const char *val[ARGS_MAX_ROWS];         /* a valued option's text */
    const char *spelled[ARGS_MAX_ROWS];     /* the spelling used (or the variable's name) */
    int help;                               /* -h/--help/--usage was given: print the help, exit 0 */
} parsed_args;

/* Every command's -h/--help row, and a table's two command_spec fields. */
#define ARGS_HELP_ROW {"-h --help", NULL, NULL, NULL, "", "print this help and exit", ARG_OWN, NULL, NULL}
#define ARGS_TABLE(t) (t), sizeof(t) / sizeof((t)[0])

/* Prints "usage: bankml <usage>" to stderr. */
void args_usage(const command_spec *c);
/* The command's help on stdout: the usage line, its summary, then every
 * option with its spellings, value, default (the row's; else "none" for a
 * valued option, "off" for a switch; none shown for a required one, for
 * --help, --version and the listings that exit), meaning and, for llama-server's options, what
 * bankml does with it. */
void args_help(const command_spec *c);
/* The options as a Markdown table (flag | bankml | why), for the docs. */
void args_help_markdown(const command_spec *c);
/* Parses argv (after the command word) by c, the environment first. 0,
 * or 1 after printing why and the usage line. -h/--help sets a->help and
 * stops reading (the rest is not checked). */
int args_parse(const command_spec *c, int argc, char **argv, parsed_args *a);
/* The row whose spelling (or negation) is name, or -1. */
int args_row(const command_spec *c, const char *name);
/* A valued option's text, or "" for a switch that is on; NULL when absent
 * or negated. name is any of the row's spellings. */
const char *args_opt(const parsed_args *a, const char *name);
/* Every value given to the valued option name on argv (as args_parse read
 * it: args_parse must have accepted argv), in order, for the options
 * llama-server lets repeat (-l/--logit-bias): up to max into out; returns
 * how many there are. */
size_t args_each(const command_spec *c, int argc, char **argv, const char *name, const char **out, size_t max);
/* The first of two spellings given, or NULL (two rows, e.g. generate's --max and -n). */
const char *args_opt2(const parsed_args *a, const char *name, const char *alias);
/* A switch's state: 1 on, 0 negated, def when absent. */
int args_bool(const parsed_args *a, const char *name, int def);
/* How the option was given, for messages: its spelling, or "LLAMA_ARG_X=" for the environment. */
const char *args_how(const parsed_args *a, const char *name);
/* An integer option in [lo, hi]: 0 with *out set (def when absent), or -1
 * after printing why and the usage line. */
int args_long(const command_spec *c, const char *opt, const char *v, long lo, long hi, long def, long *out);
/* "30s", "5m", "1h", "250ms", a bare number of seconds; "-1"/"forever" is
 * -1 (never). 0, or -1 when it is none of these. */
int args_duration_ms(const char *s, int64_t *ms);
/* The first refused use among the rows given: 0 when none, else 1 after
 * printing "bankml <cmd>: <spelling> <value>: not reproduced: <why>" to
 * stderr. ARG_SOME rows are checked against their `ok` values. */
int args_refusals(const parsed_args *a);

#endif
