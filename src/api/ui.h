/*
 * ui.h -- the chat page a browser gets at / (api/ui.c): HTML, CSS and
 * JavaScript from src/api/ui/, built into the binary (the Makefile writes
 * build/gen/ui_assets.h from them; nothing is read from disk at run time).
 */
#ifndef BANKML_UI_H
#define BANKML_UI_H

#include "api/serve.h"

/* Registers GET /bankml/ui/chat.css and GET /bankml/ui/chat.js (public, as
 * / is: the page asks for the API key itself when the server has one).
 * 0, or -1 out of memory. */
int ui_register(serve_server *srv);
/* Answers with the chat page (text/html). */
void ui_page(serve_resp *resp);

#endif
