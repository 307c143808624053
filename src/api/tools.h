/*
 * tools.h -- llama-server b11669's built-in agent tools (`--tools`): the
 * routes GET /tools (each enabled tool's description and JSON schema) and
 * POST /tools {"tool": NAME, "params": {...}, "stream"?} running read_file,
 * file_glob_search, grep_search, exec_shell_command (streamed on request),
 * write_file, edit_file and get_info on this host, with the x-tool-cwd,
 * x-tool-runtime and x-resp-type headers as b11669 reads them. Without
 * --tools both routes answer b11669's 403 "this feature is disabled".
 * api/tools.c (the routes and the tools), api/tools_io.c (paths, globs, the
 * directory walk, the child processes); docs/modules/tools.md.
 */
#ifndef BANKML_TOOLS_H
#define BANKML_TOOLS_H

#include <stddef.h>

#include "api/serve.h"

/* The tools in b11669's order (its build_tools). */
enum {
    TOOL_READ_FILE, TOOL_FILE_GLOB_SEARCH, TOOL_GREP_SEARCH, TOOL_EXEC_SHELL_COMMAND,
    TOOL_WRITE_FILE, TOOL_EDIT_FILE, TOOL_GET_INFO, TOOL_COUNT
};
#define TOOLS_ALL ((1u << TOOL_COUNT) - 1)

/* The name of tool i ("read_file"), NULL past the last. */
const char *tools_name(int i);

/* --tools' value as b11669 reads it (its CSV row: fields split on commas
 * outside double quotes, "" a quote inside them; "all" every tool): 0 with
 * the set in *mask, or -1 with b11669's start error in err ("unknown tool
 * \"x\". available tools: read_file, ..."). */
int tools_parse_list(const char *csv, unsigned *mask, char *err, size_t errlen);

/* Registers GET and POST /tools on srv: mask 0 answers b11669's 403, else
 * the enabled tools. Returns a handle for tools_free, NULL out of memory. */
void *tools_register(serve_server *srv, unsigned mask);
void tools_free(void *tools);

#endif
