/*
 * fuzz_template.c -- libFuzzer target for the Jinja interpreter (src/text/template*.c, issue #22.6).
 *
 * The input is a template, then optionally a NUL byte and the messages as JSON (a fixed conversation when
 * they are absent or not an array). template_check and template_render must answer 0 or -1 with a reason,
 * within the interpreter's own limits (a loop or output that would never end is refused, not run: the
 * fuzzer's -timeout catches one that is not). ASan/UBSan catch the rest.
 *
 *   make build/fuzz/fuzz_template && build/fuzz/fuzz_template -max_total_time=60 corpus tests/fuzz-seeds/fuzz_template
 */
#include "base/json.h"
#include "text/template.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

static const char fz_msgs[] = "[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":"
                              "\"Hi <b>\\u00e9\"},{\"role\":\"assistant\",\"content\":\"Hello\"},{\"role\":\"user\","
                              "\"content\":\"Why?\"}]";

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    char err[512];
    const char *t = (const char *)d;
    const char *nul = memchr(t, 0, n);
    size_t tl = nul ? (size_t)(nul - t) : n;
    json_value *msgs = NULL;
    if (nul) msgs = json_parse(nul + 1, n - tl - 1, err, sizeof err);
    if (!msgs || msgs->type != JSON_ARRAY) {
        json_free(msgs);
        msgs = json_parse(fz_msgs, sizeof fz_msgs - 1, err, sizeof err);
    }
    if (!msgs) abort();
    err[0] = 0;
    if (template_check(t, tl, err, sizeof err) != 0 && !err[0]) abort();
    template_opts o;
    template_opts_init(&o);
    o.bos_token = "<s>";
    o.eos_token = "</s>";
    o.now = 1700000000;
    jbuf out;
    jbuf_init(&out);
    err[0] = 0;
    if (template_render(t, tl, msgs, &o, &out, err, sizeof err) != 0 && !err[0]) abort();
    jbuf_free(&out);
    json_free(msgs);
    return 0;
}
