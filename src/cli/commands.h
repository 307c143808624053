/*
 * commands.h -- the commands of cli/ that live in their own files, called
 * by main.c with the arguments after the command word. Each returns the
 * process's exit code (BANKML_OK, BANKML_REFUSE, BANKML_EXIT_IO).
 */
#ifndef BANKML_COMMANDS_H
#define BANKML_COMMANDS_H

#include "cli/args.h"

extern const command_spec generate_spec;   /* for main.c's usage */
extern const command_spec serve_spec;

int cmd_generate(int argc, char **argv);   /* cli/generate.c */
int cmd_serve(int argc, char **argv);      /* cli/serve_cmd.c */

#endif
