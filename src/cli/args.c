/* args.c -- see args.h. */
#include "cli/args.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void args_usage(const command_spec *c) { fprintf(stderr, "usage: bankml %s\n", c->usage); }

/* s[0..n) is one of the space-separated words of list. */
static int has_word(const char *list, const char *s, size_t n)
{
    for (const char *p = list; p && *p;) {
        const char *e = strchr(p, ' ');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == n && !memcmp(p, s, n)) return 1;
        p = e ? e + 1 : NULL;
    }
    return 0;
}

/* The row one of whose spellings (*neg = 0) or negations (*neg = 1) is s[0..n). */
static int find_row(const command_spec *c, const char *s, size_t n, int *neg)
{
    for (size_t i = 0; i < c->n_opts; i++) {
        if (has_word(c->opts[i].names, s, n)) {
            *neg = 0;
            return (int)i;
        }
        if (has_word(c->opts[i].negs, s, n)) {
            *neg = 1;
            return (int)i;
        }
    }
    return -1;
}

int args_row(const command_spec *c, const char *name)
{
    int neg;
    return find_row(c, name, strlen(name), &neg);
}

static int truthy(const char *v) { return !strcmp(v, "1") || !strcmp(v, "true") || !strcmp(v, "on") || !strcmp(v, "enabled"); }
static int falsey(const char *v) { return !strcmp(v, "0") || !strcmp(v, "false") || !strcmp(v, "off") || !strcmp(v, "disabled"); }

static int refuse_args(const command_spec *c, const char *what, const char *s)
{
    fprintf(stderr, "bankml %s: %s%s\n", c->name, what, s ? s : "");
    args_usage(c);
    return 1;
}

/* The environment's settings, before the command line (llama-server's order). */
static int read_env(const command_spec *c, parsed_args *a)
{
    for (size_t i = 0; i < c->n_opts && i < ARGS_MAX_ROWS; i++) {
        const arg_opt *o = &c->opts[i];
        if (!o->env) continue;
        const char *v = getenv(o->env);
        if (o->negs && !strncmp(o->env, "LLAMA_ARG_", 10)) {
            static char neg_name[ARGS_MAX_ROWS][80];
            snprintf(neg_name[i], sizeof neg_name[i], "LLAMA_ARG_NO_%s", o->env + 10);
            if (getenv(neg_name[i])) {
                a->state[i] = -1;
                a->from_env[i] = 1;
                a->spelled[i] = neg_name[i];
                continue;
            }
        }
        if (!v) continue;
        a->from_env[i] = 1;
        a->spelled[i] = o->env;
        if (o->arg) {
            a->state[i] = 1;
            a->val[i] = v;
        } else if (o->negs) {
            if (!truthy(v) && !falsey(v)) {
                fprintf(stderr, "bankml %s: the environment variable %s wants 1, true, on, enabled, 0, false, off or "
                                "disabled, not %s\n", c->name, o->env, v);
                return 1;
            }
            a->state[i] = truthy(v) ? 1 : -1;
        } else if (truthy(v)) {
            a->state[i] = 1;
        } else {
            a->from_env[i] = 0;
            a->spelled[i] = NULL;
        }
    }
    return 0;
}

int args_parse(const command_spec *c, int argc, char **argv, parsed_args *a)
{
    int max_pos = c->max_pos ? c->max_pos : c->n_pos;
    memset(a, 0, sizeof *a);
    a->spec = c;
    if (c->n_opts > ARGS_MAX_ROWS) return refuse_args(c, "too many option rows", NULL);
    if (read_env(c, a)) return 1;
    for (int i = 0; i < argc; i++) {
        const char *s = argv[i];
        if (!(s[0] == '-' && s[1])) {
            if (a->n_pos == max_pos || a->n_pos == 4) return refuse_args(c, "unexpected argument ", s);
            a->pos[a->n_pos++] = s;
            continue;
        }
        char name[128];
        const char *eq = s[1] == '-' ? strchr(s, '=') : NULL;
        size_t n = eq ? (size_t)(eq - s) : strlen(s);
        if (n >= sizeof name) return refuse_args(c, "unknown option ", s);
        memcpy(name, s, n);
        name[n] = 0;
        for (size_t k = 2; s[1] == '-' && k < n; k++)
            if (name[k] == '_') name[k] = '-';
        int neg, r = find_row(c, name, n, &neg);
        if (r < 0) return refuse_args(c, "unknown option ", s);
        const arg_opt *o = &c->opts[r];
        if (eq && (neg || !o->arg)) {
            fprintf(stderr, "bankml %s: %s takes no value\n", c->name, name);
            args_usage(c);
            return 1;
        }
        a->from_env[r] = 0;
        a->spelled[r] = s;
        a->state[r] = neg ? -1 : 1;
        a->val[r] = NULL;
        if (!neg && o->arg) {
            if (eq) {
                a->val[r] = eq + 1;
                a->spelled[r] = o->names;   /* the first spelling begins the list: print up to its space */
            } else if (i + 1 < argc) {
                a->val[r] = argv[++i];
            } else {
                fprintf(stderr, "bankml %s: %s needs a value (%s)\n", c->name, s, o->arg);
                args_usage(c);
                return 1;
            }
        }
        if (has_word(o->names, "--help", 6)) {
            a->help = 1;
            return 0;
        }
    }
    if (a->n_pos < c->n_pos) return refuse_args(c, "missing argument", NULL);
    return 0;
}

static int row_of(const parsed_args *a, const char *name)
{
    int neg, r = find_row(a->spec, name, strlen(name), &neg);
    return r;
}

size_t args_each(const command_spec *c, int argc, char **argv, const char *name, const char **out, size_t max)
{
    int want = args_row(c, name);
    size_t k = 0;
    for (int i = 0; i < argc && want >= 0; i++) {
        const char *s = argv[i];
        if (!(s[0] == '-' && s[1])) continue;
        char nm[128];
        const char *eq = s[1] == '-' ? strchr(s, '=') : NULL;
        size_t n = eq ? (size_t)(eq - s) : strlen(s);
        if (n >= sizeof nm) continue;
        memcpy(nm, s, n);
        nm[n] = 0;
        for (size_t j = 2; s[1] == '-' && j < n; j++)
            if (nm[j] == '_') nm[j] = '-';
        int neg, r = find_row(c, nm, n, &neg);
        if (r < 0 || neg || !c->opts[r].arg) continue;
        const char *v = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
        if (r == want && v) {
            if (k < max) out[k] = v;
            k++;
        }
    }
    return k;
}

const char *args_opt(const parsed_args *a, const char *name)
{
    int r = row_of(a, name);
    if (r < 0 || a->state[r] != 1) return NULL;
    return a->val[r] ? a->val[r] : "";
}

const char *args_opt2(const parsed_args *a, const char *name, const char *alias)
{
    const char *v = args_opt(a, name);
    return v ? v : args_opt(a, alias);
}

int args_bool(const parsed_args *a, const char *name, int def)
{
    int r = row_of(a, name);
    if (r < 0 || !a->state[r]) return def;
    return a->state[r] > 0;
}

/* How row r was given: its spelling, the variable's name, or for --long=value the row's first spelling. */
static const char *how_row(const parsed_args *a, int r)
{
    static char first[64];
    if (r < 0) return "";
    if (!a->spelled[r] || a->spelled[r] == a->spec->opts[r].names) {
        const char *s = a->spec->opts[r].names, *sp = strchr(s, ' ');
        size_t n = sp ? (size_t)(sp - s) : strlen(s);
        if (n >= sizeof first) n = sizeof first - 1;
        memcpy(first, s, n);
        first[n] = 0;
        return first;
    }
    return a->spelled[r];
}

const char *args_how(const parsed_args *a, const char *name)
{
    int r = row_of(a, name);
    return r < 0 ? name : how_row(a, r);
}

int args_refusals(const parsed_args *a)
{
    const command_spec *c = a->spec;
    for (size_t i = 0; i < c->n_opts; i++) {
        const arg_opt *o = &c->opts[i];
        const char *v = a->val[i];
        if (!a->state[i] || (o->kind != ARG_REFUSED && o->kind != ARG_SOME)) continue;
        if (o->kind == ARG_SOME) {
            const char *word = a->state[i] < 0 ? "-" : o->arg ? v : "+";
            if (word && has_word(o->ok, word, strlen(word))) continue;
        }
        const char *how = how_row(a, (int)i);
        if (a->from_env[i]) fprintf(stderr, "bankml %s: refused %s%s%s: %s\n", c->name, how, v ? "=" : "", v ? v : "", o->why);
        else fprintf(stderr, "bankml %s: refused %s%s%s: %s\n", c->name, how, v ? " " : "", v ? v : "", o->why);
        return 1;
    }
    return 0;
}

/* "-c, --ctx-size" from "-c --ctx-size". */
static void put_spellings(FILE *f, const char *list, const char *sep)
{
    for (const char *p = list; p && *p; p++) fputs(*p == ' ' ? sep : (char[2]){*p, 0}, f);
}

static const char *kind_word(arg_kind k)
{
    switch (k) {
    case ARG_SAME: return "reproduced";
    case ARG_INERT: return "accepted";
    case ARG_SOME: return "partly";
    case ARG_REFUSED: return "refused";
    default: return "bankml's";
    }
}

/* A row that does something and exits (--help, --version, a listing) has no default to show. */
static int args_is_action(const arg_opt *o)
{
    static const char *const acts[] = {"--help", "--version", "--list-devices", "--completion-bash", "--cache-list"};
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++)
        if (has_word(o->names, acts[i], strlen(acts[i]))) return 1;
    return 0;
}

void args_help(const command_spec *c)
{
    printf("usage: bankml %s\n", c->usage);
    if (c->summary) printf("%s\n", c->summary);
    if (c->n_opts) printf("\noptions:\n");
    for (size_t i = 0; i < c->n_opts; i++) {
        const arg_opt *o = &c->opts[i];
        printf("  ");
        put_spellings(stdout, o->names, ", ");
        if (o->negs) {
            printf(", ");
            put_spellings(stdout, o->negs, ", ");
        }
        if (o->arg) printf(" %s", o->arg);
        if (o->env) printf("   (env %s)", o->env);
        printf("\n        %s", o->help);
        if (o->def && *o->def) printf(" (default: %s)", o->def);
        else if (!args_is_action(o) && !strstr(o->help, "(required)") && !strstr(o->help, "(default: "))
            printf(" (default: %s)", o->arg ? "none" : "off");
        printf("\n");
        if (o->kind == ARG_SAME) printf("        llama-server's: reproduced\n");
        else if (o->kind == ARG_INERT) printf("        llama-server's: accepted, changes no answer: %s\n", o->why);
        else if (o->kind == ARG_REFUSED) printf("        llama-server's: refused: %s\n", o->why);
        else if (o->kind == ARG_SOME) {
            printf("        llama-server's: reproduced for ");
            if (!strcmp(o->ok, "+") || !strcmp(o->ok, "-")) put_spellings(stdout, *o->ok == '+' ? o->names : o->negs, ", ");
            else put_spellings(stdout, o->ok, ", ");
            printf("; otherwise refused: %s\n", o->why);
        }
    }
}

void args_help_markdown(const command_spec *c)
{
    printf("| flag | default | bankml | why |\n|---|---|---|---|\n");
    for (size_t i = 0; i < c->n_opts; i++) {
        const arg_opt *o = &c->opts[i];
        printf("| `");
        put_spellings(stdout, o->names, "`, `");
        if (o->negs) {
            printf("`, `");
            put_spellings(stdout, o->negs, "`, `");
        }
        printf("`%s%s | ", o->arg ? " " : "", o->arg ? o->arg : "");
        for (const char *p = o->def; p && *p; p++) fputs(*p == '|' ? "\\|" : (char[2]){*p, 0}, stdout);
        printf(" | %s", kind_word(o->kind));
        if (o->kind == ARG_SOME) {
            printf(" (");
            if (!strcmp(o->ok, "+") || !strcmp(o->ok, "-")) put_spellings(stdout, *o->ok == '+' ? o->names : o->negs, ", ");
            else put_spellings(stdout, o->ok, ", ");
            printf(")");
        }
        printf(" | %s |\n", o->why ? o->why : o->help);
    }
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
