/* args.c -- see args.h. */
#include "cli/args.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void args_usage(const command_spec *c) { fprintf(stderr, "usage: bankml %s\n", c->usage); }

static int in_list(const char *const *list, size_t n, const char *s)
{
    for (size_t i = 0; i < n && list[i]; i++)
        if (strcmp(list[i], s) == 0) return 1;
    return 0;
}

static int refuse_args(const command_spec *c, const char *what, const char *s)
{
    fprintf(stderr, "bankml %s: %s%s\n", c->name, what, s ? s : "");
    args_usage(c);
    return 1;
}

int args_parse(const command_spec *c, int argc, char **argv, parsed_args *a)
{
    int max_pos = c->max_pos ? c->max_pos : c->n_pos;
    memset(a, 0, sizeof *a);
    for (int i = 0; i < argc; i++) {
        const char *s = argv[i];
        if (s[0] == '-' && s[1]) {
            int valued = in_list(c->valued, ARGS_MAX_VALUED, s);
            if (!valued && !in_list(c->flags, ARGS_MAX_FLAGS, s)) return refuse_args(c, "unknown option ", s);
            if (a->n_opt == ARGS_MAX_OPTS) return refuse_args(c, "too many options", NULL);
            a->opt_name[a->n_opt] = s;
            if (valued) {
                if (i + 1 >= argc) {
                    fprintf(stderr, "bankml %s: %s needs a value\n", c->name, s);
                    args_usage(c);
                    return 1;
                }
                a->opt_value[a->n_opt] = argv[++i];
            }
            a->n_opt++;
        } else {
            if (a->n_pos == max_pos || a->n_pos == 4) return refuse_args(c, "unexpected argument ", s);
            a->pos[a->n_pos++] = s;
        }
    }
    if (a->n_pos < c->n_pos) return refuse_args(c, "missing argument", NULL);
    return 0;
}

const char *args_opt(const parsed_args *a, const char *name)
{
    const char *v = NULL;
    for (int i = 0; i < a->n_opt; i++)
        if (strcmp(a->opt_name[i], name) == 0) v = a->opt_value[i] ? a->opt_value[i] : "";
    return v;
}

const char *args_opt2(const parsed_args *a, const char *name, const char *alias)
{
    const char *v = args_opt(a, name);
    return v ? v : args_opt(a, alias);
}

int args_long(const command_spec *c, const char *opt, const char *v, long lo, long hi, long def, long *out)
{
    char *end;
    if (!v) {
        *out = def;
        return 0;
    }
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || *end || end == v || x < lo || x > hi) {
        fprintf(stderr, "bankml %s: %s takes a whole number from %ld to %ld, not %s\n", c->name, opt, lo, hi, v);
        args_usage(c);
        return -1;
    }
    *out = x;
    return 0;
}

int args_duration_ms(const char *s, int64_t *ms)
{
    char *end;
    if (!strcmp(s, "forever") || !strcmp(s, "-1")) {
        *ms = -1;
        return 0;
    }
    double v = strtod(s, &end);
    if (end == s || v < 0 || !isfinite(v)) return -1;
    if (!*end || !strcmp(end, "s")) *ms = (int64_t)(v * 1000);
    else if (!strcmp(end, "ms")) *ms = (int64_t)v;
    else if (!strcmp(end, "m")) *ms = (int64_t)(v * 60000);
    else if (!strcmp(end, "h")) *ms = (int64_t)(v * 3600000);
    else return -1;
    return 0;
}
