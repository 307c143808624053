/*
 * ui.c -- the chat page's three files, served from the arrays the Makefile
 * generates from src/api/ui/ (see ui.h and docs/modules/ui.md).
 */
#include <stddef.h>

#include "api/ui.h"
#include "ui_assets.h"   /* build/gen: ui_index_html, ui_chat_css, ui_chat_js and their _len */

void ui_page(serve_resp *resp)
{
    serve_resp_header(resp, "Cache-Control", "no-cache");
    serve_reply(resp, 200, "text/html; charset=utf-8", ui_index_html, ui_index_html_len);
}

static void ui_h_css(serve_req *req, serve_resp *resp, void *ud)
{
    (void)req;
    (void)ud;
    serve_resp_header(resp, "Cache-Control", "no-cache");
    serve_reply(resp, 200, "text/css; charset=utf-8", ui_chat_css, ui_chat_css_len);
}

static void ui_h_js(serve_req *req, serve_resp *resp, void *ud)
{
    (void)req;
    (void)ud;
    serve_resp_header(resp, "Cache-Control", "no-cache");
    serve_reply(resp, 200, "text/javascript; charset=utf-8", ui_chat_js, ui_chat_js_len);
}

int ui_register(serve_server *srv)
{
    if (serve_route(srv, "GET", "/bankml/ui/chat.css", ui_h_css, NULL, SERVE_PUBLIC)) return -1;
    if (serve_route(srv, "GET", "/bankml/ui/chat.js", ui_h_js, NULL, SERVE_PUBLIC)) return -1;
    return 0;
}
