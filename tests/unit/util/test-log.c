/*
 * test-log.c - log lines as they reach stderr: the prefix (plain and
 * journald), the errno text, and the escaping of the formatted message -
 * newline, ESC, backslash, DEL, C1 controls and invalid UTF-8 never reach
 * the log raw, so a value cannot forge a line or a terminal sequence; one
 * call is exactly one line, at most LOG_LINE_MAX bytes, cut with "...".
 *
 * stderr is pointed at a temporary file around each call and read back;
 * cmocka reports on stdout and (failures) stderr, so it is restored before
 * any assertion.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "util/log.h"
#include "util/utf8.h"

static char captured[2 * LOG_LINE_MAX + 1];
static size_t captured_len;

/* Runs fn with stderr redirected, leaving what it wrote in captured. */
#define CAPTURE(stmt)                                                  \
    do {                                                               \
        FILE *tmp_ = tmpfile();                                        \
        assert_non_null(tmp_);                                         \
        fflush(stderr);                                                \
        int saved_ = dup(STDERR_FILENO);                               \
        assert_true(saved_ >= 0);                                      \
        assert_true(dup2(fileno(tmp_), STDERR_FILENO) >= 0);           \
        stmt;                                                          \
        fflush(stderr);                                                \
        (void)dup2(saved_, STDERR_FILENO);                             \
        close(saved_);                                                 \
        rewind(tmp_);                                                  \
        captured_len = fread(captured, 1, sizeof(captured) - 1, tmp_); \
        captured[captured_len] = '\0';                                 \
        fclose(tmp_);                                                  \
    } while (0)

static int
setup(void **state)
{
    (void)state;
    unsetenv("JOURNAL_STREAM");
    unsetenv("ABX_LOG_LEVEL");
    log_init("abxt");
    log_set_level(LOG_INFO);
    return 0;
}

static void
assert_one_line(void)
{
    assert_true(captured_len > 0);
    assert_true(captured_len <= LOG_LINE_MAX);
    assert_int_equal(captured[captured_len - 1], '\n');
    assert_null(memchr(captured, '\n', captured_len - 1));
    for (size_t i = 0; i + 1 < captured_len; i++) {
        unsigned char c = (unsigned char)captured[i];
        if (c < 0x20 || c == 0x7f)
            fail_msg("control byte 0x%02x at %zu in '%s'", c, i, captured);
    }
    assert_true(utf8_valid(captured, captured_len));
}

static void
test_plain_line(void **state)
{
    (void)state;
    CAPTURE(log_info("workspace=%s mirrored %d files", "w1", 3));
    assert_string_equal(captured, "abxt: info: workspace=w1 mirrored 3 files\n");
    CAPTURE(log_warn("caf\xc3\xa9 \xe2\x82\xac"));
    assert_string_equal(captured, "abxt: warning: caf\xc3\xa9 \xe2\x82\xac\n");
}

static void
test_forged_line_escaped(void **state)
{
    (void)state;
    const char *name = "x\n<3>abxd: forged line\x1b[31m";
    CAPTURE(log_warn("cannot store '%s'", name));
    assert_one_line();
    assert_string_equal(captured,
                        "abxt: warning: cannot store 'x\\n<3>abxd: forged line\\x1b[31m'\n");
    assert_null(strchr(captured, '\x1b'));
}

static void
test_escapes(void **state)
{
    (void)state;
    CAPTURE(log_err("'%s'", "tab\there\\back del\x7f bad\xff c1\xc2\x9b cr\r"));
    assert_one_line();
    assert_string_equal(captured,
                        "abxt: error: 'tab\\there\\\\back del\\x7f bad\\xff c1\\xc2\\x9b cr\\r'\n");
}

static void
test_errno_text(void **state)
{
    (void)state;
    errno = 1234;
    int r;
    CAPTURE(r = log_err_errno(-ENOENT, "cannot open '%s'", "a\nb"));
    assert_int_equal(r, -ENOENT);
    assert_int_equal(errno, 1234); /* errno is kept */
    assert_string_equal(captured, "abxt: error: cannot open 'a\\nb': No such file or directory\n");
}

static void
test_journal_prefix(void **state)
{
    (void)state;
    setenv("JOURNAL_STREAM", "8:1234", 1);
    log_init("abxt");
    CAPTURE(log_notice("hello\n<2>abxd: forged"));
    unsetenv("JOURNAL_STREAM");
    log_init("abxt");
    assert_string_equal(captured, "<5>hello\\n<2>abxd: forged\n");
}

static void
test_level_filter(void **state)
{
    (void)state;
    CAPTURE(log_debug("not shown"));
    assert_int_equal(captured_len, 0);
    log_set_level(LOG_DEBUG);
    CAPTURE(log_debug("shown"));
    log_set_level(LOG_INFO);
    assert_string_equal(captured, "abxt: debug: shown\n");
}

/* A message longer than a line, and one whose escapes make it longer than a
 * line, are cut at an escape boundary and marked; the errno text still
 * fits when there is room. */
static void
test_long_lines(void **state)
{
    static char big[3 * LOG_LINE_MAX];
    (void)state;
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    CAPTURE(log_info("%s", big));
    assert_one_line();
    assert_int_equal(captured_len, LOG_LINE_MAX - 1);
    assert_memory_equal(captured + captured_len - 4, "...\n", 4);

    memset(big, 0xff, 1000); /* 4000 bytes once escaped */
    big[1000] = '\0';
    CAPTURE(log_err_errno(-EIO, "%s", big));
    assert_one_line();
    assert_true(captured_len <= LOG_LINE_MAX);
    /* Whole escapes only, then the marker. */
    char *cut = strstr(captured, "...");
    assert_non_null(cut);
    assert_int_equal((cut - (captured + strlen("abxt: error: "))) % 4, 0);

    /* Multi-byte characters are never cut in half. */
    for (size_t i = 0; i + 3 <= sizeof(big) - 1; i += 3)
        memcpy(big + i, "\xe2\x82\xac", 3);
    big[(sizeof(big) - 1) / 3 * 3] = '\0';
    CAPTURE(log_info("%s", big));
    assert_one_line();
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup(test_plain_line, setup),
            cmocka_unit_test_setup(test_forged_line_escaped, setup),
            cmocka_unit_test_setup(test_escapes, setup),
            cmocka_unit_test_setup(test_errno_text, setup),
            cmocka_unit_test_setup(test_journal_prefix, setup),
            cmocka_unit_test_setup(test_level_filter, setup),
            cmocka_unit_test_setup(test_long_lines, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
