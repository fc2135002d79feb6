/*
 * test-tar.c - the tar reader, extractor and writer: round trips, every
 * accepted header form, and hostile streams (escapes, links out, devices,
 * truncation, bad checksums, limits) refused without writing outside.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "util/buf.h"
#include "util/fd.h"
#include "util/tar.h"

static char top[256]; /* a temp dir: top/out is extracted into, top is watched */

static int
setup(void **state)
{
    (void)state;
    (void)snprintf(top, sizeof(top), "/tmp/abx-test-tar-XXXXXX");
    assert_non_null(mkdtemp(top));
    return 0;
}

static int
teardown(void **state)
{
    (void)state;
    (void)rm_rf_at(AT_FDCWD, top);
    return 0;
}

/* One header block (ustar), optionally with content. */
static void
add(struct buf *b, const char *name, char type, const char *link, const char *data, size_t n)
{
    unsigned char h[512];
    memset(h, 0, sizeof(h));
    memcpy(h, name, strlen(name) > 100 ? 100 : strlen(name));
    (void)snprintf((char *)h + 100, 8, "%07o", 0644);
    (void)snprintf((char *)h + 108, 8, "%07o", 0);
    (void)snprintf((char *)h + 116, 8, "%07o", 0);
    (void)snprintf((char *)h + 124, 12, "%011zo", n);
    (void)snprintf((char *)h + 136, 12, "%011o", 0);
    h[156] = (unsigned char)type;
    if (link)
        memcpy(h + 157, link, strlen(link));
    memcpy(h + 257,
           "ustar\0"
           "00",
           8);
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++)
        sum += h[i];
    (void)snprintf((char *)h + 148, 8, "%06o", sum);
    assert_int_equal(buf_put(b, h, 512), 0);
    if (n) {
        assert_int_equal(buf_put(b, data, n), 0);
        static const char z[512];
        if (n % 512)
            assert_int_equal(buf_put(b, z, 512 - n % 512), 0);
    }
}

static void
end(struct buf *b)
{
    static const char z[1024];
    assert_int_equal(buf_put(b, z, sizeof(z)), 0);
}

/* Extracts b into a fresh top/out, feeding chunk bytes at a time. */
static int
extract(const struct buf *b, size_t chunk, uint64_t max_entries, struct err *err)
{
    char out[300];
    struct tar_extract *x = NULL;
    (void)snprintf(out, sizeof(out), "%s/out", top);
    (void)rm_rf_at(AT_FDCWD, out);
    assert_int_equal(mkdir(out, 0755), 0);
    int dfd = open(out, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(dfd >= 0);
    assert_int_equal(tar_extract_new(dfd, 1 << 20, max_entries, &x), 0);
    int r = 0;
    for (size_t o = 0; r == 0 && o < b->len; o += chunk)
        r = tar_extract_feed(x, b->data + o, b->len - o < chunk ? b->len - o : chunk, err);
    if (r == 0)
        r = tar_extract_finish(x, err);
    tar_extract_free(x);
    close(dfd);
    return r;
}

static bool
exists(const char *rel)
{
    char p[1200];
    struct stat st;
    (void)snprintf(p, sizeof(p), "%s/%s", top, rel);
    return lstat(p, &st) == 0;
}

static void
test_clean_name(void **state)
{
    char out[64];
    (void)state;
    assert_int_equal(tar_clean_name("./a//b/", out, sizeof(out)), 0);
    assert_string_equal(out, "a/b");
    assert_int_equal(tar_clean_name("/etc/passwd", out, sizeof(out)), -EPERM);
    assert_int_equal(tar_clean_name("a/../../b", out, sizeof(out)), -EPERM);
    assert_int_equal(tar_clean_name("..", out, sizeof(out)), -EPERM);
    assert_int_equal(tar_clean_name("./", out, sizeof(out)), -EINVAL);
    assert_int_equal(
            tar_clean_name("a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q/r/s/t/u/v/w/x/y/z/0/1/2/3", out, 16),
            -ENAMETOOLONG);
}

static void
test_extract_ok(void **state)
{
    struct buf b;
    struct err err = {0};
    (void)state;
    buf_init(&b, BUF_UNLIMITED);
    add(&b, "./", '5', NULL, NULL, 0);
    add(&b, "./sandbox-template.yaml", '0', NULL, "name: x\n", 8);
    add(&b, "files/", '5', NULL, NULL, 0);
    add(&b, "files/deep/a.txt", '0', NULL, "a", 1); /* parents made on the way */
    add(&b, "files/l", '2', "deep/a.txt", NULL, 0);
    add(&b, "files/up", '2', "../sandbox-template.yaml", NULL, 0);
    end(&b);
    for (size_t chunk = 1; chunk <= b.len; chunk = chunk * 3 + 1)
        assert_int_equal(extract(&b, chunk, 100, &err), 0);
    assert_true(exists("out/files/deep/a.txt"));
    assert_true(exists("out/files/l"));

    /* a stream that ends without the zero blocks is fine at a boundary */
    b.len -= 1024;
    assert_int_equal(extract(&b, 7, 100, &err), 0);
    buf_done(&b);
}

static void
test_long_names(void **state)
{
    struct buf b;
    struct err err = {0};
    char name[300], pax[400];
    (void)state;
    memset(name, 'n', 250);
    name[250] = '\0';
    buf_init(&b, BUF_UNLIMITED);
    /* GNU long name */
    add(&b, "././@LongLink", 'L', NULL, name, strlen(name) + 1);
    add(&b, "ignored", '0', NULL, "x", 1);
    /* pax path */
    int n = snprintf(pax, sizeof(pax), "%d path=p%s\n", (int)strlen(name) + 9 + 3, name);
    assert_true(n > 0 && pax[0] != '0');
    /* fix the record length: digits + " path=p" + name + "\n" */
    size_t rec = strlen(name) + 8 + 3;
    n = snprintf(pax, sizeof(pax), "%zu path=p%s\n", rec, name);
    assert_int_equal((size_t)n, rec);
    add(&b, "pax", 'x', NULL, pax, (size_t)n);
    add(&b, "ignored2", '0', NULL, "y", 1);
    end(&b);
    assert_int_equal(extract(&b, 100, 100, &err), 0);
    char rel[400];
    (void)snprintf(rel, sizeof(rel), "out/%s", name);
    assert_true(exists(rel));
    (void)snprintf(rel, sizeof(rel), "out/p%s", name);
    assert_true(exists(rel));
    assert_false(exists("out/ignored"));
    buf_done(&b);
}

static void
expect_refused(struct buf *b, int want, const char *why)
{
    struct err err = {0};
    int r = extract(b, 512, 100, &err);
    if (r != want)
        fail_msg("%s: got %d (%s), want %d", why, r, err.msg, want);
    assert_false(exists("escaped"));
    assert_false(exists("out/../escaped"));
    buf_reset(b);
}

static void
test_hostile(void **state)
{
    struct buf b;
    char big[600];
    (void)state;
    buf_init(&b, BUF_UNLIMITED);

    add(&b, "../escaped", '0', NULL, "x", 1);
    end(&b);
    expect_refused(&b, -EPERM, "dot-dot");
    add(&b, "a/../../escaped", '0', NULL, "x", 1);
    end(&b);
    expect_refused(&b, -EPERM, "dot-dot inside");
    add(&b, "/tmp/escaped", '0', NULL, "x", 1);
    end(&b);
    expect_refused(&b, -EPERM, "absolute");
    add(&b, "l", '2', "..", NULL, 0);
    end(&b);
    expect_refused(&b, -EPERM, "symlink to ..");
    add(&b, "l", '2', "/", NULL, 0);
    end(&b);
    expect_refused(&b, -EPERM, "absolute symlink");
    /* a symlink that stays inside, then a file through it */
    add(&b, "d/", '5', NULL, NULL, 0);
    add(&b, "l", '2', "d", NULL, 0);
    add(&b, "l/escaped", '0', NULL, "x", 1);
    end(&b);
    expect_refused(&b, -EPERM, "file through a symlink");
    add(&b, "h", '1', "etc/passwd", NULL, 0);
    end(&b);
    expect_refused(&b, -EPERM, "hard link");
    add(&b, "dev", '3', NULL, NULL, 0);
    end(&b);
    expect_refused(&b, -EPERM, "char device");
    add(&b, "fifo", '6', NULL, NULL, 0);
    end(&b);
    expect_refused(&b, -EPERM, "fifo");
    add(&b, "f", '0', NULL, "x", 1);
    add(&b, "f", '0', NULL, "y", 1);
    end(&b);
    expect_refused(&b, -EPERM, "duplicate");
    for (int i = 0; i < 101; i++) {
        char n[32];
        (void)snprintf(n, sizeof(n), "f%d", i);
        add(&b, n, '0', NULL, NULL, 0);
    }
    end(&b);
    expect_refused(&b, -E2BIG, "entry count");
    memset(big, 'x', sizeof(big));
    char *huge = calloc(1, (1 << 20) + 1);
    assert_non_null(huge);
    add(&b, "big", '0', NULL, huge, (1 << 20) + 1);
    free(huge);
    end(&b);
    expect_refused(&b, -EFBIG, "content bound");

    /* malformed streams */
    add(&b, "f", '0', NULL, "hello", 5);
    b.data[148] ^= 1; /* checksum */
    end(&b);
    expect_refused(&b, -EBADMSG, "checksum");
    add(&b, "f", '0', NULL, "hello", 5);
    b.len = 512 + 3; /* ends inside the content */
    expect_refused(&b, -EBADMSG, "truncated");
    add(&b, "f", '0', NULL, NULL, 0);
    memcpy(b.data + 124, "99999999999", 11); /* not octal */
    end(&b);
    expect_refused(&b, -EBADMSG, "size field");
    add(&b, "f", '0', NULL, NULL, 0);
    end(&b);
    assert_int_equal(buf_put(&b, "junk", 4), 0);
    expect_refused(&b, -EBADMSG, "data after the end");
    add(&b, "pax", 'x', NULL, "99 path=x\n", 10);
    add(&b, "f", '0', NULL, NULL, 0);
    end(&b);
    expect_refused(&b, -EBADMSG, "pax length");
    add(&b, "././@LongLink", 'L', NULL, big, sizeof(big)); /* no NUL, fine: 600 bytes */
    b.len = 512;                                           /* a long name and then nothing */
    expect_refused(&b, -EBADMSG, "long name without content");
    buf_done(&b);
}

static int
to_buf(void *ud, const void *p, size_t n)
{
    return buf_put(ud, p, n);
}

static void
test_writer_round_trip(void **state)
{
    char src[300], p[700];
    struct buf b;
    struct err err = {0};
    (void)state;
    (void)snprintf(src, sizeof(src), "%s/src", top);
    assert_int_equal(mkdir(src, 0755), 0);
    int dfd = open(src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(dfd >= 0);
    assert_int_equal(write_file_at(dfd, "a.txt", "hello\n", 0644), 0);
    assert_int_equal(write_file_at(dfd, "run.sh", "#!/bin/sh\n", 0755), 0);
    assert_int_equal(mkdirat(dfd, "d", 0755), 0);
    char longname[200];
    memset(longname, 'q', 150);
    longname[150] = '\0';
    (void)snprintf(p, sizeof(p), "d/%s", longname);
    assert_int_equal(write_file_at(dfd, p, "long", 0644), 0);
    assert_int_equal(symlinkat("../a.txt", dfd, "d/link"), 0);

    buf_init(&b, BUF_UNLIMITED);
    assert_int_equal(tar_write_dir(dfd, to_buf, &b, 1 << 20, &err), 0);
    assert_int_equal(b.len % 512, 0);
    assert_int_equal(extract(&b, 1000, 100, &err), 0);
    assert_true(exists("out/a.txt"));
    (void)snprintf(p, sizeof(p), "out/d/%s", longname);
    assert_true(exists(p));
    struct stat st;
    (void)snprintf(p, sizeof(p), "%s/out/run.sh", top);
    assert_int_equal(stat(p, &st), 0);
    assert_true(st.st_mode & 0100);
    (void)snprintf(p, sizeof(p), "%s/out/d/link", top);
    assert_int_equal(lstat(p, &st), 0);
    assert_true(S_ISLNK(st.st_mode));

    /* the bound, and special files refused */
    buf_reset(&b);
    assert_int_equal(tar_write_dir(dfd, to_buf, &b, 3, &err), -EFBIG);
    assert_int_equal(mkfifoat(dfd, "fifo", 0644), 0);
    buf_reset(&b);
    err = (struct err){0};
    assert_int_equal(tar_write_dir(dfd, to_buf, &b, 1 << 20, &err), -EPERM);
    assert_non_null(strstr(err.msg, "fifo"));
    buf_done(&b);
    close(dfd);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_clean_name),
            cmocka_unit_test_setup_teardown(test_extract_ok, setup, teardown),
            cmocka_unit_test_setup_teardown(test_long_names, setup, teardown),
            cmocka_unit_test_setup_teardown(test_hostile, setup, teardown),
            cmocka_unit_test_setup_teardown(test_writer_round_trip, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
