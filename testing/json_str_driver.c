/*
 * json_str_driver.c -- bankml's side of testing/oracle_json_str.py: the
 * string writers of src/base/json.c on each string read from stdin.
 *
 * argv[1] names the writer: nl (json_put_str_nl), go (json_put_str_go),
 * text-nl (json_text_nl), text-go (json_text_go), text-peg (json_text_peg), valid
 * (json_utf8_valid_len, as its decimal digits). Input: one string
 * per line as hex digits of its bytes. Output: one line per input, the
 * appended bytes as hex. The protocol of testing/kit_nlohmann_str.cpp and
 * testing/kit_go_str.go, so the outputs compare line by line. Exit 2 on a
 * malformed line or an allocation failure.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"

static int unhex(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

int main(int argc, char **argv)
{
    static const char hex[] = "0123456789abcdef";
    const char *mode = argc > 1 ? argv[1] : "nl";
    jbuf line, s, o, out;
    int c;
    jbuf_init(&line);
    jbuf_init(&s);
    jbuf_init(&o);
    jbuf_init(&out);
    for (;;) {
        jbuf_reset(&line);
        while ((c = getchar()) != EOF && c != '\n') jbuf_putc(&line, (char)c);
        if (c == EOF && line.len == 0) break;
        jbuf_reset(&s);
        jbuf_reset(&o);
        for (size_t i = 0; i + 1 < line.len + 1 && i < line.len; i += 2) {
            int hi = unhex(line.p[i]), lo = i + 1 < line.len ? unhex(line.p[i + 1]) : -1;
            if (hi < 0 || lo < 0) { fprintf(stderr, "json-str-driver: bad hex\n"); return 2; }
            jbuf_putc(&s, (char)(hi * 16 + lo));
        }
        const char *p = s.p ? s.p : "";
        if (!strcmp(mode, "nl")) json_put_str_nl(&o, p, s.len);
        else if (!strcmp(mode, "go")) json_put_str_go(&o, p, s.len);
        else if (!strcmp(mode, "text-nl")) json_text_nl(&o, p, s.len);
        else if (!strcmp(mode, "text-go")) json_text_go(&o, p, s.len);
        else if (!strcmp(mode, "text-peg")) json_text_peg(&o, p, s.len);
        else if (!strcmp(mode, "valid")) jbuf_printf(&o, "%zu", json_utf8_valid_len(p, s.len));
        else { fprintf(stderr, "json-str-driver: unknown writer %s\n", mode); return 2; }
        for (size_t i = 0; i < o.len; i++) {
            jbuf_putc(&out, hex[(unsigned char)o.p[i] >> 4]);
            jbuf_putc(&out, hex[(unsigned char)o.p[i] & 15]);
        }
        jbuf_putc(&out, '\n');
        if (out.oom || o.oom || s.oom || line.oom) { fprintf(stderr, "json-str-driver: out of memory\n"); return 2; }
        if (out.len > (1u << 16)) { fwrite(out.p, 1, out.len, stdout); jbuf_reset(&out); }
        if (c == EOF) break;
    }
    if (out.len) fwrite(out.p, 1, out.len, stdout);
    jbuf_free(&line);
    jbuf_free(&s);
    jbuf_free(&o);
    jbuf_free(&out);
    return 0;
}
