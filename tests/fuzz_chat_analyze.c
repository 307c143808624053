/*
 * fuzz_chat_analyze.c -- libFuzzer target for the template analysis (src/text/chat_analyze*.c).
 *
 * Input: two bytes of caps (nine flags), then the template text. chat_specialized, then chat_analyze:
 * a success must carry analysis_complete and (when its markers are UTF-8) a JSON that parses; a refusal
 * must carry a reason.
 * ASan/UBSan catch the rest (the arena freed on the longjmp paths, the matcher's bounds).
 *
 *   make build/fuzz/fuzz_chat_analyze && build/fuzz/fuzz_chat_analyze -max_total_time=60 corpus tests/fuzz-seeds/fuzz_chat_analyze
 */
#include "base/json.h"
#include "text/chat_analyze.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    if (n < 2) return 0;
    unsigned f = (unsigned)d[0] | (unsigned)d[1] << 8;
    tmpl_caps caps = {f & 1, (f >> 1) & 1, (f >> 2) & 1, (f >> 3) & 1, (f >> 4) & 1,
                      (f >> 5) & 1, (f >> 6) & 1, (f >> 7) & 1, (f >> 8) & 1};
    const char *t = (const char *)d + 2;
    size_t len = n - 2;
    ca_specialized s = chat_specialized(t, len);
    chat_analysis a;
    char err[256];
    err[0] = 0;
    if (chat_analyze(t, len, &caps, "<s>", "</s>", &a, err, sizeof err) == 0) {
        if (!a.analysis_complete) { fprintf(stderr, "incomplete analysis\n"); abort(); }
        jbuf b;
        jbuf_init(&b);
        chat_analysis_json(&a, s, &b);
        /* markers keep the template's bytes: the JSON is checked when they are UTF-8 */
        if (json_utf8_valid_len(b.p, b.len) == b.len) {
            json_value *v = json_parse(b.p, b.len, err, sizeof err);
            if (!v) { fprintf(stderr, "bad JSON: %s\n", err); abort(); }
            json_free(v);
        }
        jbuf_free(&b);
        chat_analysis_free(&a);
    } else if (!err[0]) {
        fprintf(stderr, "a refusal without a reason\n");
        abort();
    }
    return 0;
}
