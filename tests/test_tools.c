/*
 * test_tools.c -- the parsers of the built-in tools (api/tools.c,
 * api/tools_io.c): --tools' list, b11669's glob and path glob, the path
 * resolution (lexically_normal), the child process runner's exit codes,
 * limits and timeout, as literals.
 */
#include "test.h"

#include <stdlib.h>
#include <string.h>

#include "api/tools.h"
#include "api/tools_int.h"

TEST(tools_csv_list)
{
    unsigned m = 99;
    char err[256];
    CHECK_INT(tools_parse_list("all", &m, err, sizeof err), 0);
    CHECK_INT(m, TOOLS_ALL);
    CHECK_INT(tools_parse_list("read_file,grep_search", &m, err, sizeof err), 0);
    CHECK_INT(m, (1u << TOOL_READ_FILE) | (1u << TOOL_GREP_SEARCH));
    CHECK_INT(tools_parse_list("\"get_info\",edit_file", &m, err, sizeof err), 0);
    CHECK_INT(m, (1u << TOOL_GET_INFO) | (1u << TOOL_EDIT_FILE));
    m = 7;
    CHECK_INT(tools_parse_list("read_file,nope", &m, err, sizeof err), -1);
    CHECK_INT(m, 7);
    CHECK_STR(err, "unknown tool \"nope\". available tools: read_file, file_glob_search, grep_search, "
                   "exec_shell_command, write_file, edit_file, get_info");
    CHECK_INT(tools_parse_list("read_file,", &m, err, sizeof err), -1);   /* parse_csv_row keeps the empty field */
    CHECK_STR(err, "unknown tool \"\". available tools: read_file, file_glob_search, grep_search, "
                   "exec_shell_command, write_file, edit_file, get_info");
    CHECK_INT(tools_parse_list("a\"b", &m, err, sizeof err), -1);       /* a quote inside a field is literal */
    CHECK(strstr(err, "\"a\"b\"") != NULL);
    CHECK_STR(tools_name(TOOL_EXEC_SHELL_COMMAND), "exec_shell_command");
    CHECK(tools_name(TOOL_COUNT) == NULL);
}

static int glob(const char *p, const char *s)
{
    long b = TIO_GLOB_STEPS;
    return tio_glob(p, s, &b);
}

static int pglob(const char *p, const char *s)
{
    long b = TIO_GLOB_STEPS;
    return tio_path_glob(p, s, &b);
}

TEST(tools_globs)
{
    CHECK_INT(glob("*.c", "a.c"), 1);
    CHECK_INT(glob("*.c", "d/a.c"), 0);       /* '*' stops at '/' */
    CHECK_INT(glob("**.c", "d/a.c"), 1);
    CHECK_INT(glob("**", ""), 1);
    CHECK_INT(glob("?", "/"), 0);
    CHECK_INT(glob("?", "?"), 1);
    CHECK_INT(glob("[a-c]x", "bx"), 1);
    CHECK_INT(glob("[!a-c]x", "bx"), 0);
    CHECK_INT(glob("[]]", "]"), 1);
    CHECK_INT(glob("[-a]", "-"), 1);
    CHECK_INT(glob("[ab", "[ab"), 1);          /* an unclosed class is a literal '[' */
    CHECK_INT(glob("[ab", "a"), 0);
    CHECK_INT(glob("", ""), 1);
    CHECK_INT(glob("", "x"), 0);
    CHECK_INT(pglob("*.c", "src/util/u.c"), 1);           /* no '/': the base name */
    CHECK_INT(pglob("util/*.c", "src/util/u.c"), 1);      /* "**" "/" added */
    CHECK_INT(pglob("src/*.c", "src/util/u.c"), 0);
    CHECK_INT(pglob("/src/*.c", "src/a.c"), 0);           /* anchored with '/': the whole path */
    CHECK_INT(pglob("**/u.c", "src/util/u.c"), 1);
    /* the budget: an exponential pattern is stopped, not run without bound */
    long b = 1000;
    CHECK_INT(tio_glob("**a**a**a**a**a**a**b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", &b), -1);
}

static void res(const char *cwd, const char *path, const char *want)
{
    jbuf o;
    jbuf_init(&o);
    tio_resolve(cwd, path, &o);
    CHECK_STR(o.p ? o.p : "", want);
    jbuf_free(&o);
}

TEST(tools_resolving)
{
    res("/w", "a.txt", "/w/a.txt");
    res("/w/", "a.txt", "/w/a.txt");
    res("/w", "/abs//x/./y", "/abs/x/y");
    res("/w/x", "../y", "/w/y");
    res("/w", "../../..", "/");
    res("/w", "a/..", "/w");
    res("/w", "a/.", "/w/a");
    res("/w", "", "/w");
    res("/", "..", "/");
    res("rel", "x", "rel/x");
    res("rel", "../..", "..");
    res("rel", "..", ".");
    char *home = getenv("HOME");
    if (home && home[0] == '/') {   /* "~" and "~/": $HOME, read once; "~x" stays */
        jbuf w;
        jbuf_init(&w);
        tio_resolve(NULL, home, &w);
        jbuf_puts(&w, "/f");
        res("/w", "~/f", w.p);
        jbuf_free(&w);
    }
    res("/w", "~x", "/w/~x");
}

static int no_more(void *ud, const char *p, size_t n)
{
    (void)p;
    *(size_t *)ud += n;
    return 1;
}

TEST(tools_children)
{
    char *echo[] = {"sh", "-c", "echo out; echo err >&2; exit 3", NULL};
    tio_exec r;
    tio_run(echo, NULL, 1024, 10, NULL, NULL, &r);
    CHECK_INT(r.exit_code, 3);
    CHECK_INT(r.timed_out, 0);
    CHECK_STR(r.out.p, "out\nerr\n");
    jbuf_free(&r.out);
    char *big[] = {"sh", "-c", "printf 0123456789", NULL};
    tio_run(big, "/", 4, 10, NULL, NULL, &r);
    CHECK_STR(r.out.p, "0123\n[output truncated]");
    CHECK_INT(r.exit_code, 0);
    jbuf_free(&r.out);
    char *slow[] = {"sh", "-c", "sleep 5", NULL};
    tio_run(slow, NULL, 1024, 0, NULL, NULL, &r);   /* timeout 0: killed at once, EXIT_FAILURE */
    CHECK_INT(r.timed_out, 1);
    CHECK_INT(r.exit_code, 1);
    jbuf_free(&r.out);
    tio_run(echo, "/nowhere/at/all", 1024, 10, NULL, NULL, &r);
    CHECK_STR(r.out.p, "failed to spawn process");
    CHECK_INT(r.exit_code, -1);
    jbuf_free(&r.out);
    char *missing[] = {"bankml-no-such-command", NULL};
    tio_run(missing, NULL, 1024, 10, NULL, NULL, &r);
    CHECK_STR(r.out.p, "failed to spawn process");
    jbuf_free(&r.out);
    size_t seen = 0;   /* a chunk callback that asks to stop: the child is killed */
    char *yes[] = {"sh", "-c", "echo a; sleep 5; echo b", NULL};
    tio_run(yes, NULL, 1024, 10, no_more, &seen, &r);
    CHECK_INT(seen, 2);
    CHECK_INT(r.timed_out, 0);
    CHECK_INT(r.exit_code, 1);
    jbuf_free(&r.out);
}
