/*
 * test_slotfile.c -- engine_filename_valid against llama.cpp's
 * fs_validate_filename (common.cpp, allow_subdirs false): each name with the
 * answer b11669 gives (the ones marked "measured" were sent to llama-server's
 * POST /slots/0?action=save; the rest follow its source rule by rule).
 */
#include "engine/engine.h"
#include "test.h"

static int valid(const char *s) { return engine_filename_valid(s, strlen(s)); }

TEST(filename_rules_of_fs_validate_filename)
{
    CHECK_INT(valid("a.bin"), 1);              /* measured */
    CHECK_INT(valid(".hidden"), 1);            /* measured */
    CHECK_INT(valid("sub"), 1);                /* measured */
    CHECK_INT(valid(""), 0);                   /* measured */
    CHECK_INT(valid("../a.bin"), 0);           /* measured */
    CHECK_INT(valid("a/b"), 0);                /* measured */
    CHECK_INT(valid("a\\b"), 0);
    CHECK_INT(valid("x."), 0);
    CHECK_INT(valid(" x"), 0);
    CHECK_INT(valid("x "), 0);
    CHECK_INT(valid("."), 0);
    CHECK_INT(valid("a..b"), 0);
    CHECK_INT(valid("a:b"), 0);
    CHECK_INT(valid("a*b"), 0);
    CHECK_INT(valid("a?b"), 0);
    CHECK_INT(valid("a\"b"), 0);
    CHECK_INT(valid("a<b"), 0);
    CHECK_INT(valid("a>b"), 0);
    CHECK_INT(valid("a|b"), 0);
    CHECK_INT(valid("a\tb"), 0);               /* C0 */
    CHECK_INT(valid("a\x7f" "b"), 0);          /* DEL */
    CHECK_INT(valid("a\xc2\x85" "b"), 0);      /* C1 U+0085 */
    CHECK_INT(valid("\xc3\xa9t\xc3\xa9"), 1);  /* été */
    CHECK_INT(valid("a\xef\xbc\x8e" "b"), 0);  /* U+FF0E */
    CHECK_INT(valid("a\xe2\x88\x95" "b"), 0);  /* U+2215 */
    CHECK_INT(valid("a\xe2\x88\x96" "b"), 0);  /* U+2216 */
    CHECK_INT(valid("a\xef\xbf\xbd" "b"), 0);  /* U+FFFD */
    CHECK_INT(valid("\xef\xbb\xbf" "a"), 0);   /* BOM */
    CHECK_INT(valid("a\xed\xa0\x80" "b"), 0);  /* a surrogate */
    CHECK_INT(valid("a\xc0\xaf" "b"), 0);      /* overlong '/' */
    CHECK_INT(valid("a\xe0\x80\xaf" "b"), 0);  /* overlong, 3 bytes */
    CHECK_INT(valid("a\xf4\x90\x80\x80"), 0);  /* past U+10FFFF */
    CHECK_INT(valid("\xf0\x9f\x98\x80"), 1);   /* U+1F600 */
    CHECK_INT(valid("a\x80" "b"), 0);          /* a continuation byte first */
    CHECK_INT(valid("a\xc3"), 0);              /* cut */
    CHECK_INT(valid("a\xf8\x80\x80\x80\x80"), 0);
    char name[257];
    memset(name, 'x', sizeof name);
    CHECK_INT(engine_filename_valid(name, 255), 1);
    CHECK_INT(engine_filename_valid(name, 256), 0);
}
