/*
 * test_pin.c -- the pin: FORK.json lookups, pin_check's verdicts and exact
 * messages, pin_write's create/replace (keeping every other key), and file
 * identity. Files live in a mkdtemp directory under /tmp, removed after.
 */
#include "test.h"
#include "file/pin.h"
#include "base/json.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* sha256("abc") and of the 1,000-byte file below */
#define SHA_ABC "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
#define ZEROS "0000000000000000000000000000000000000000000000000000000000000000"
#define SHA_OTHER "1111111111111111111111111111111111111111111111111111111111111111"

/* ---- temp directory ---- */

static char tmpdir[64];
static char pbuf[8][320];
static int pslot;

static const char *mkdir_tmp(void)
{
    strcpy(tmpdir, "/tmp/bankml-pin-XXXXXX");
    return mkdtemp(tmpdir);
}

static const char *in_tmp(const char *name)
{
    char *p = pbuf[pslot++ % 8];
    snprintf(p, sizeof pbuf[0], "%s/%s", tmpdir, name);
    return p;
}

static int put_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t n = strlen(text);
    int ok = fwrite(text, 1, n, f) == n;
    return (fclose(f) == 0 && ok) ? 0 : -1;
}

/* Number of entries in tmpdir (to see that no "*.tmp.<pid>" is left). */
static int count_entries(void)
{
    DIR *d = opendir(tmpdir);
    struct dirent *e;
    int n = 0;
    if (!d) return -1;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

static void rm_tmp(void)
{
    DIR *d = opendir(tmpdir);
    struct dirent *e;
    if (!d) return;
    while ((e = readdir(d))) {
        char p[320];
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", tmpdir, e->d_name);
        if (unlink(p) != 0) rmdir(p);
    }
    closedir(d);
    rmdir(tmpdir);
}

#define SETUP() do { if (!mkdir_tmp()) { CHECK(!"mkdtemp"); return; } } while (0)

/* ---- pin_lookup ---- */

static int lookup(const char *text, const char *name, char sha[65], uint64_t *bytes,
                  char *err)
{
    return pin_lookup(text, strlen(text), name, sha, bytes, err, 256);
}

TEST(pin_lookup_found)
{
    char sha[65], err[256] = "";
    uint64_t bytes = 0;
    const char *t = "{\"kind\": \"import\", \"files\": [{\"path\": \"b.gguf\", \"bytes\": 1, "
                    "\"sha256\": \"" SHA_OTHER "\"}, {\"sha256\": \"" SHA_ABC "\", "
                    "\"path\": \"a.gguf\", \"bytes\": 1185376}], \"z\": null}";
    CHECK_INT(lookup(t, "a.gguf", sha, &bytes, err), 1);
    CHECK_STR(sha, SHA_ABC);
    CHECK_U64(bytes, 1185376);
    CHECK_INT(lookup(t, "b.gguf", sha, NULL, err), 1);
    CHECK_STR(sha, SHA_OTHER);
    CHECK_STR(err, "");
}

TEST(pin_lookup_not_found)
{
    char sha[65] = "untouched", err[256] = "";
    uint64_t bytes = 7;
    const char *t = "{\"files\": [{\"path\": \"a.gguf\", \"sha256\": \"" SHA_ABC "\"}]}";
    CHECK_INT(lookup(t, "c.gguf", sha, &bytes, err), 0);
    CHECK_INT(lookup(t, "a.gguf.FORK.json", sha, &bytes, err), 0);
    CHECK_INT(lookup(t, "A.gguf", sha, &bytes, err), 0);       /* names are case-sensitive */
    CHECK_INT(lookup(t, "", sha, &bytes, err), 0);
    CHECK_INT(lookup("{}", "a.gguf", sha, &bytes, err), 0);    /* no "files" at all */
    CHECK_INT(lookup("{\"files\": []}", "a.gguf", sha, &bytes, err), 0);
    /* entries that are not objects, or whose path is not a string */
    CHECK_INT(lookup("{\"files\": [\"a.gguf\", 3, {\"path\": 1, \"sha256\": \"" SHA_ABC "\"}]}",
                     "a.gguf", sha, &bytes, err), 0);
    /* the record is elsewhere than files[] */
    CHECK_INT(lookup("{\"other\": [{\"path\": \"a.gguf\", \"sha256\": \"" SHA_ABC "\"}]}",
                     "a.gguf", sha, &bytes, err), 0);
    CHECK_STR(sha, "untouched");
    CHECK_U64(bytes, 7);
    CHECK_STR(err, "");
}

TEST(pin_lookup_by_base_name)
{
    char sha[65], err[256];
    uint64_t bytes;
    const char *t = "{\"files\": [{\"path\": \"ba.gguf\", \"sha256\": \"" SHA_OTHER "\"}, "
                    "{\"path\": \"models/sub/a.gguf\", \"bytes\": 3, \"sha256\": \"" SHA_ABC "\"}]}";
    CHECK_INT(lookup(t, "a.gguf", sha, &bytes, err), 1);
    CHECK_STR(sha, SHA_ABC);
    CHECK_U64(bytes, 3);
    /* a name given with directories is matched by its base name */
    CHECK_INT(lookup(t, "/elsewhere/a.gguf", sha, &bytes, err), 1);
    CHECK_STR(sha, SHA_ABC);
    CHECK_INT(lookup(t, "sub/a.gguf", sha, &bytes, err), 1);
    CHECK_INT(lookup(t, "ba.gguf", sha, &bytes, err), 1);
    CHECK_STR(sha, SHA_OTHER);
    CHECK_U64(bytes, PIN_BYTES_UNKNOWN);   /* no "bytes" in that entry */
}

TEST(pin_lookup_uppercase_hex_lowered)
{
    char sha[65], err[256];
    const char *t = "{\"files\": [{\"path\": \"a.gguf\", \"sha256\": "
                    "\"BA7816BF8F01CFEA414140DE5DAE2223b00361a396177a9cb410ff61f20015AD\"}]}";
    CHECK_INT(lookup(t, "a.gguf", sha, NULL, err), 1);
    CHECK_STR(sha, SHA_ABC);
}

TEST(pin_lookup_malformed_sha_is_unpinned)
{
    char sha[65] = "untouched", err[256] = "";
    uint64_t bytes = 7;
    static const char *bad[] = {
        /* 63 digits */
        "{\"files\": [{\"path\": \"a.gguf\", \"sha256\": "
        "\"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015a\"}]}",
        /* 65 digits */
        "{\"files\": [{\"path\": \"a.gguf\", \"sha256\": \"" SHA_ABC "0\"}]}",
        /* a non-hex digit */
        "{\"files\": [{\"path\": \"a.gguf\", \"sha256\": "
        "\"ga7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad\"}]}",
        /* not a string, missing */
        "{\"files\": [{\"path\": \"a.gguf\", \"sha256\": 1}]}",
        "{\"files\": [{\"path\": \"a.gguf\", \"bytes\": 3}]}",
        /* the first entry for the name decides, even when a later one is good */
        "{\"files\": [{\"path\": \"a.gguf\", \"sha256\": \"x\"}, "
        "{\"path\": \"a.gguf\", \"sha256\": \"" SHA_ABC "\"}]}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_INT(lookup(bad[i], "a.gguf", sha, &bytes, err), 0);
    CHECK_STR(sha, "untouched");
    CHECK_U64(bytes, 7);

    /* bytes that are not a non-negative integer read as unknown */
    const char *t = "{\"files\": [{\"path\": \"a.gguf\", \"bytes\": -3, \"sha256\": \"" SHA_ABC "\"}, "
                    "{\"path\": \"b.gguf\", \"bytes\": 3.5, \"sha256\": \"" SHA_ABC "\"}]}";
    CHECK_INT(lookup(t, "a.gguf", sha, &bytes, err), 1);
    CHECK_U64(bytes, PIN_BYTES_UNKNOWN);
    bytes = 7;
    CHECK_INT(lookup(t, "b.gguf", sha, &bytes, err), 1);
    CHECK_U64(bytes, PIN_BYTES_UNKNOWN);
}

TEST(pin_lookup_not_json)
{
    char sha[65] = "untouched", err[256];
    err[0] = 0;
    CHECK_INT(lookup("not json", "a.gguf", sha, NULL, err), -1);
    CHECK(strncmp(err, "invalid JSON at byte 0: ", 24) == 0);
    err[0] = 0;
    CHECK_INT(lookup("{\"files\": [}", "a.gguf", sha, NULL, err), -1);
    CHECK(strncmp(err, "invalid JSON at byte 11: ", 25) == 0);
    CHECK_INT(lookup("", "a.gguf", sha, NULL, err), -1);
    CHECK_INT(lookup("[{\"path\": \"a.gguf\"}]", "a.gguf", sha, NULL, err), -1);
    CHECK_STR(err, "FORK.json is not a JSON object");
    CHECK_INT(lookup("{\"files\": {\"path\": \"a.gguf\"}}", "a.gguf", sha, NULL, err), -1);
    CHECK_STR(err, "FORK.json \"files\" is not an array");
    CHECK_STR(sha, "untouched");
    /* err may be NULL */
    CHECK_INT(pin_lookup("x", 1, "a.gguf", sha, NULL, NULL, 0), -1);
}

/* ---- pin_check ---- */

TEST(pin_check_pinned)
{
    char sha[65], err[256] = "";
    SETUP();
    CHECK_INT(put_file(in_tmp("a.gguf"), "abc"), 0);
    CHECK_INT(put_file(in_tmp("a.gguf.FORK.json"),
                       "{\"files\": [{\"path\": \"a.gguf\", \"bytes\": 3, \"sha256\": \"" SHA_ABC "\"}]}"),
              0);
    CHECK_INT(pin_check(in_tmp("a.gguf"), in_tmp("a.gguf.FORK.json"), sha, err, sizeof err), 0);
    CHECK_STR(sha, SHA_ABC);
    CHECK_STR(err, "");
    rm_tmp();
}

TEST(pin_check_shared_model)
{
    const char *model = test_shared("models/stories260K.gguf");
    char sha[65], err[256] = "";
    if (!model) SKIP("../shared/models/stories260K.gguf is absent");
    SETUP();
    /* sha256sum ../shared/models/stories260K.gguf */
    CHECK_INT(put_file(in_tmp("f.json"),
                       "{\"files\": [{\"path\": \"hf/stories260K.gguf\", \"bytes\": 1185376, \"sha256\": "
                       "\"270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d\"}]}"), 0);
    CHECK_INT(pin_check(model, in_tmp("f.json"), sha, err, sizeof err), 0);
    CHECK_STR(sha, "270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d");
    rm_tmp();
}

TEST(pin_check_mismatch_message)
{
    char sha[65], err[256] = "";
    SETUP();
    CHECK_INT(put_file(in_tmp("a.gguf"), "abc"), 0);
    CHECK_INT(put_file(in_tmp("fork.json"),
                       "{\"files\": [{\"path\": \"x/a.gguf\", \"sha256\": \"" ZEROS "\"}]}"), 0);
    CHECK_INT(pin_check(in_tmp("a.gguf"), in_tmp("fork.json"), sha, err, sizeof err), 2);
    CHECK_STR(err, "a.gguf sha256 " SHA_ABC " != pinned " ZEROS ": refused");
    CHECK_STR(sha, SHA_ABC);   /* the file's digest, for the caller to show */
    rm_tmp();
}

TEST(pin_check_no_record_message)
{
    char sha[65], err[512] = "", want[512];
    SETUP();
    CHECK_INT(put_file(in_tmp("a.gguf"), "abc"), 0);
    CHECK_INT(put_file(in_tmp("fork.json"),
                       "{\"files\": [{\"path\": \"b.gguf\", \"sha256\": \"" SHA_ABC "\"}]}"), 0);
    CHECK_INT(pin_check(in_tmp("a.gguf"), in_tmp("fork.json"), sha, err, sizeof err), 2);
    snprintf(want, sizeof want, "a.gguf has no sha256 record in FORK.json: unpinned, refused (if it is the file you "
             "mean to run, pin it: bankml pin %s/a.gguf --fork %s/fork.json --write)", tmpdir, tmpdir);
    CHECK_STR(err, want);
    CHECK_STR(sha, "");
    /* a malformed record is no record */
    CHECK_INT(put_file(in_tmp("fork.json"),
                       "{\"files\": [{\"path\": \"a.gguf\", \"sha256\": \"abc\"}]}"), 0);
    CHECK_INT(pin_check(in_tmp("a.gguf"), in_tmp("fork.json"), sha, err, sizeof err), 2);
    snprintf(want, sizeof want, "a.gguf has no sha256 record in FORK.json: unpinned, refused (if it is the file you "
             "mean to run, pin it: bankml pin %s/a.gguf --fork %s/fork.json --write)", tmpdir, tmpdir);
    CHECK_STR(err, want);
    rm_tmp();
}

TEST(pin_check_io_errors)
{
    char sha[65], err[512] = "", want[512];
    SETUP();
    CHECK_INT(put_file(in_tmp("a.gguf"), "abc"), 0);
    /* unreadable FORK.json: missing, or a directory */
    CHECK_INT(pin_check(in_tmp("a.gguf"), in_tmp("missing.json"), sha, err, sizeof err), 1);
    snprintf(want, sizeof want, "cannot read %s: No such file or directory", in_tmp("missing.json"));
    CHECK_STR(err, want);
    CHECK_INT(pin_check(in_tmp("a.gguf"), tmpdir, sha, err, sizeof err), 1);
    snprintf(want, sizeof want, "cannot read %s: Is a directory", tmpdir);
    CHECK_STR(err, want);
    /* the GGUF cannot be hashed */
    CHECK_INT(put_file(in_tmp("fork.json"),
                       "{\"files\": [{\"path\": \"gone.gguf\", \"sha256\": \"" SHA_ABC "\"}]}"), 0);
    CHECK_INT(pin_check(in_tmp("gone.gguf"), in_tmp("fork.json"), sha, err, sizeof err), 1);
    CHECK_STR(err, "cannot hash gone.gguf: No such file or directory");
    CHECK_INT(mkdir(in_tmp("gone.gguf"), 0700), 0);
    CHECK_INT(pin_check(in_tmp("gone.gguf"), in_tmp("fork.json"), sha, err, sizeof err), 1);
    CHECK_STR(err, "cannot hash gone.gguf: Is a directory");
    CHECK_STR(sha, "");
    rm_tmp();
}

TEST(pin_check_fork_not_json)
{
    char sha[65], err[512] = "", want[512];
    SETUP();
    CHECK_INT(put_file(in_tmp("a.gguf"), "abc"), 0);
    CHECK_INT(put_file(in_tmp("fork.json"), "[]"), 0);
    CHECK_INT(pin_check(in_tmp("a.gguf"), in_tmp("fork.json"), sha, err, sizeof err), 2);
    snprintf(want, sizeof want, "%s: FORK.json is not a JSON object: refused", in_tmp("fork.json"));
    CHECK_STR(err, want);
    CHECK_INT(put_file(in_tmp("fork.json"), "files: a.gguf"), 0);
    CHECK_INT(pin_check(in_tmp("a.gguf"), in_tmp("fork.json"), sha, err, sizeof err), 2);
    snprintf(want, sizeof want, "%s: invalid JSON at byte 0: ", in_tmp("fork.json"));
    CHECK(strncmp(err, want, strlen(want)) == 0);
    CHECK(strlen(err) > 9 && strcmp(err + strlen(err) - 9, ": refused") == 0);
    rm_tmp();
}

/* ---- pin_write ---- */

TEST(pin_write_creates)
{
    char sha[65], sha2[65], err[256] = "";
    size_t len;
    char *text;
    SETUP();
    CHECK_INT(put_file(in_tmp("a.gguf"), "abc"), 0);
    CHECK_INT(pin_write(in_tmp("a.gguf"), in_tmp("a.gguf.FORK.json"), sha, err, sizeof err), 0);
    CHECK_STR(err, "");
    CHECK_STR(sha, SHA_ABC);
    text = test_read_file(in_tmp("a.gguf.FORK.json"), &len);
    CHECK(text != NULL);
    if (text)
        CHECK_STR(text, "{\n"
                        "  \"files\": [\n"
                        "    {\n"
                        "      \"path\": \"a.gguf\",\n"
                        "      \"bytes\": 3,\n"
                        "      \"sha256\": \"" SHA_ABC "\"\n"
                        "    }\n"
                        "  ]\n"
                        "}\n");
    free(text);
    CHECK_INT(pin_check(in_tmp("a.gguf"), in_tmp("a.gguf.FORK.json"), sha2, err, sizeof err), 0);
    CHECK_STR(sha2, SHA_ABC);
    CHECK_INT(count_entries(), 2);   /* no temporary left behind */
    rm_tmp();
}

TEST(pin_write_replaces_keeping_the_rest)
{
    char sha[65], err[256] = "";
    size_t len;
    uint64_t bytes;
    struct stat st;
    char *text;
    SETUP();
    CHECK_INT(put_file(in_tmp("a.gguf"), "abc"), 0);
    CHECK_INT(put_file(in_tmp("fork.json"),
        "{\"kind\":\"bankml import\",\"n\":2.0,\"big\":1e400,"
        "\"files\":[{\"path\":\"other.gguf\",\"bytes\":5,\"sha256\":\"" SHA_OTHER "\"},"
        "{\"path\":\"old/dir/a.gguf\",\"license\":\"mit\",\"sha256\":\"" ZEROS "\",\"bytes\":1,"
        "\"notes\":[]},"
        "\"stray\"],"
        "\"tail\":[true,null,{\"k\":\"v\\n\\u0001\\u00e9\"},{}]}"), 0);
    CHECK_INT(chmod(in_tmp("fork.json"), 0640), 0);
    CHECK_INT(pin_write(in_tmp("a.gguf"), in_tmp("fork.json"), sha, err, sizeof err), 0);
    CHECK_STR(err, "");
    text = test_read_file(in_tmp("fork.json"), &len);
    CHECK(text != NULL);
    if (!text) { rm_tmp(); return; }
    CHECK_STR(text,
        "{\n"
        "  \"kind\": \"bankml import\",\n"
        "  \"n\": 2.0,\n"
        "  \"big\": 1e400,\n"
        "  \"files\": [\n"
        "    {\n"
        "      \"path\": \"other.gguf\",\n"
        "      \"bytes\": 5,\n"
        "      \"sha256\": \"" SHA_OTHER "\"\n"
        "    },\n"
        "    {\n"
        "      \"path\": \"a.gguf\",\n"
        "      \"license\": \"mit\",\n"
        "      \"sha256\": \"" SHA_ABC "\",\n"
        "      \"bytes\": 3,\n"
        "      \"notes\": []\n"
        "    },\n"
        "    \"stray\"\n"
        "  ],\n"
        "  \"tail\": [\n"
        "    true,\n"
        "    null,\n"
        "    {\n"
        "      \"k\": \"v\\n\\u0001\xc3\xa9\"\n"
        "    },\n"
        "    {}\n"
        "  ]\n"
        "}\n");
    /* the result is JSON, and both pins read back */
    char jerr[256] = "";
    json_value *v = json_parse(text, len, jerr, sizeof jerr);
    CHECK(v != NULL);
    if (v) CHECK_INT(json_get(v, "files")->n, 3);
    json_free(v);
    CHECK_INT(pin_lookup(text, len, "other.gguf", sha, &bytes, err, sizeof err), 1);
    CHECK_STR(sha, SHA_OTHER);
    CHECK_U64(bytes, 5);
    free(text);
    CHECK_INT(pin_check(in_tmp("a.gguf"), in_tmp("fork.json"), sha, err, sizeof err), 0);
    CHECK_STR(sha, SHA_ABC);
    CHECK_INT(stat(in_tmp("fork.json"), &st), 0);
    CHECK_INT(st.st_mode & 07777, 0640);
    CHECK_INT(count_entries(), 2);
    rm_tmp();
}

TEST(pin_write_appends_and_adds_files)
{
    char sha[65], err[256] = "";
    size_t len;
    char *text;
    SETUP();
    CHECK_INT(put_file(in_tmp("a.gguf"), "abc"), 0);
    /* no "files" key: one is added last */
    CHECK_INT(put_file(in_tmp("f1.json"), "{\"kind\": \"x\"}"), 0);
    CHECK_INT(pin_write(in_tmp("a.gguf"), in_tmp("f1.json"), sha, err, sizeof err), 0);
    text = test_read_file(in_tmp("f1.json"), &len);
    if (text)
        CHECK_STR(text, "{\n  \"kind\": \"x\",\n  \"files\": [\n    {\n      \"path\": \"a.gguf\",\n"
                        "      \"bytes\": 3,\n      \"sha256\": \"" SHA_ABC "\"\n    }\n  ]\n}\n");
    free(text);
    /* another file's entry: ours is appended after it */
    CHECK_INT(put_file(in_tmp("f2.json"), "{\"files\": [{\"path\": \"b.gguf\"}]}"), 0);
    CHECK_INT(pin_write(in_tmp("a.gguf"), in_tmp("f2.json"), sha, err, sizeof err), 0);
    text = test_read_file(in_tmp("f2.json"), &len);
    if (text)
        CHECK_STR(text, "{\n  \"files\": [\n    {\n      \"path\": \"b.gguf\"\n    },\n    {\n"
                        "      \"path\": \"a.gguf\",\n      \"bytes\": 3,\n"
                        "      \"sha256\": \"" SHA_ABC "\"\n    }\n  ]\n}\n");
    free(text);
    /* writing twice changes nothing the second time */
    char *before = test_read_file(in_tmp("f2.json"), &len);
    CHECK_INT(pin_write(in_tmp("a.gguf"), in_tmp("f2.json"), sha, err, sizeof err), 0);
    text = test_read_file(in_tmp("f2.json"), &len);
    CHECK(before && text && strcmp(before, text) == 0);
    free(before);
    free(text);
    /* {} gets "files" too */
    CHECK_INT(put_file(in_tmp("f3.json"), "{}"), 0);
    CHECK_INT(pin_write(in_tmp("a.gguf"), in_tmp("f3.json"), sha, err, sizeof err), 0);
    CHECK_INT(pin_check(in_tmp("a.gguf"), in_tmp("f3.json"), sha, err, sizeof err), 0);
    rm_tmp();
}

TEST(pin_write_refuses_and_io)
{
    char sha[65], err[512] = "", want[512];
    size_t len;
    char *text;
    SETUP();
    CHECK_INT(put_file(in_tmp("a.gguf"), "abc"), 0);
    /* a FORK.json it cannot understand is left alone */
    CHECK_INT(put_file(in_tmp("f.json"), "{\"files\": 3}"), 0);
    CHECK_INT(pin_write(in_tmp("a.gguf"), in_tmp("f.json"), sha, err, sizeof err), 2);
    snprintf(want, sizeof want, "%s: FORK.json \"files\" is not an array: refused", in_tmp("f.json"));
    CHECK_STR(err, want);
    text = test_read_file(in_tmp("f.json"), &len);
    CHECK(text && strcmp(text, "{\"files\": 3}") == 0);
    free(text);
    /* the GGUF cannot be hashed: nothing is written */
    CHECK_INT(pin_write(in_tmp("none.gguf"), in_tmp("new.json"), sha, err, sizeof err), 1);
    CHECK_STR(err, "cannot hash none.gguf: No such file or directory");
    CHECK_STR(sha, "");
    CHECK(access(in_tmp("new.json"), F_OK) != 0);
    /* the directory to write into does not exist */
    CHECK_INT(pin_write(in_tmp("a.gguf"), in_tmp("nodir/f.json"), sha, err, sizeof err), 1);
    snprintf(want, sizeof want, "cannot write %s: No such file or directory", in_tmp("nodir/f.json"));
    CHECK_STR(err, want);
    CHECK_INT(count_entries(), 2);
    rm_tmp();
}

/* ---- identity ---- */

TEST(pin_ident_detects_changes)
{
    pin_ident a, b;
    struct timespec ts[2];
    SETUP();
    CHECK_INT(put_file(in_tmp("a.gguf"), "abc"), 0);
    CHECK_INT(pin_ident_of(in_tmp("a.gguf"), &a), 0);
    CHECK_INT(pin_ident_of(in_tmp("a.gguf"), &b), 0);
    CHECK_INT(pin_ident_same(&a, &b), 1);
    CHECK_INT(a.size, 3);
    /* only the mtime's nanoseconds move */
    ts[0].tv_sec = 0; ts[0].tv_nsec = UTIME_OMIT;
    ts[1].tv_sec = (time_t)a.mtime_sec;
    ts[1].tv_nsec = a.mtime_nsec == 5 ? 6 : 5;
    CHECK_INT(utimensat(AT_FDCWD, in_tmp("a.gguf"), ts, 0), 0);
    CHECK_INT(pin_ident_of(in_tmp("a.gguf"), &b), 0);
    CHECK_INT(pin_ident_same(&a, &b), 0);
    /* same size and mtime, another inode: a replaced file */
    ts[1].tv_nsec = a.mtime_nsec;
    CHECK_INT(put_file(in_tmp("b.gguf"), "abc"), 0);
    CHECK_INT(utimensat(AT_FDCWD, in_tmp("b.gguf"), ts, 0), 0);
    CHECK_INT(rename(in_tmp("b.gguf"), in_tmp("a.gguf")), 0);
    CHECK_INT(pin_ident_of(in_tmp("a.gguf"), &b), 0);
    CHECK_INT(b.mtime_nsec, a.mtime_nsec);
    CHECK_INT(pin_ident_same(&a, &b), 0);
    errno = 0;
    CHECK_INT(pin_ident_of(in_tmp("missing"), &b), -1);
    CHECK_INT(errno, ENOENT);
    rm_tmp();
}

/* pin_clean_temps (issue #22.4): a killed writer's temporaries go, a live
 * one's stay, a symlink goes itself (never its target), other names stay. */
TEST(pin_clean_temps_dead_writers_only)
{
    char name[128];
    pid_t dead = fork();
    if (dead == 0) _exit(0);
    waitpid(dead, NULL, 0);
    SETUP();
    const char *gone[] = {"a.FORK.json.tmp.%ld", ".m.MODEL.json.%ld.3.tmp", ".m.MODEL.json.%ld.tmp", NULL};
    const char *kept[] = {"b.FORK.json.tmp.%ld", ".n.MODEL.json.%ld.0.tmp", NULL};   /* this process: alive */
    for (int i = 0; gone[i]; i++) {
        snprintf(name, sizeof name, gone[i], (long)dead);
        CHECK_INT(put_file(in_tmp(name), "{"), 0);
    }
    for (int i = 0; kept[i]; i++) {
        snprintf(name, sizeof name, kept[i], (long)getpid());
        CHECK_INT(put_file(in_tmp(name), "{"), 0);
    }
    CHECK_INT(put_file(in_tmp("target.txt"), "kept\n"), 0);
    snprintf(name, sizeof name, ".s.MODEL.json.%ld.1.tmp", (long)dead);
    CHECK_INT(symlink(in_tmp("target.txt"), in_tmp(name)), 0);
    CHECK_INT(put_file(in_tmp("c.tmp.12x"), "{"), 0);          /* not a pid */
    CHECK_INT(put_file(in_tmp("m.MODEL.json"), "{"), 0);        /* a manifest */
    CHECK_INT(put_file(in_tmp(".m.MODEL.json.x.tmp"), "{"), 0); /* not a pid */
    CHECK_INT(count_entries(), 10);
    CHECK_INT(pin_clean_temps(tmpdir), 4);
    CHECK_INT(count_entries(), 6);
    snprintf(name, sizeof name, kept[1], (long)getpid());
    CHECK_INT(access(in_tmp(name), F_OK), 0);
    CHECK_INT(access(in_tmp("target.txt"), F_OK), 0);
    CHECK_INT(pin_clean_temps(tmpdir), 0);
    CHECK_INT(pin_clean_temps("/nonexistent-bankml-dir"), -1);
    rm_tmp();
}
