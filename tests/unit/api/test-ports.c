/*
 * test-ports.c - which Host names the port proxy claims: <port>-<id>.<domain>
 * with an optional :port and a trailing dot, case-insensitive, ports
 * 1..65535, ids of [a-z0-9] (lowercased) that fit; everything else (another
 * domain, a deeper name, no port, a bad port or id, no domain configured)
 * is left to the API.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "api/api-internal.h"
#include "api/ports/ports.h"

static void
test_claimed(void **state)
{
    static const struct {
        const char *host;
        unsigned port;
        const char *id;
    } ok[] = {
            {"8000-abc123.test.local", 8000, "abc123"},
            {"8000-abc123.test.local:8700", 8000, "abc123"},
            {"8000-abc123.test.local.", 8000, "abc123"},
            {"8000-ABC123.Test.Local", 8000, "abc123"},
            {"1-x.test.local", 1, "x"},
            {"65535-x.test.local", 65535, "x"},
            {"00080-x.test.local", 80, "x"},
    };
    char id[PORTS_ID_MAX + 1];
    uint16_t port;
    (void)state;

    for (size_t i = 0; i < ELEMENTSOF(ok); i++) {
        assert_int_equal(ports_match_host(ok[i].host, "test.local", &port, id, sizeof(id)), 1);
        assert_int_equal(port, ok[i].port);
        assert_string_equal(id, ok[i].id);
    }
}

static void
test_not_claimed(void **state)
{
    static const char *const no[] = {
            "test.local",
            "8000-abc.other.local",
            "8000-abc.xtest.local",
            "8000-abc.test.local.evil",
            "a.8000-abc.test.local",
            "8000abc.test.local",
            "-abc.test.local",
            "8000-.test.local",
            "0-abc.test.local",
            "65536-abc.test.local",
            "123456-abc.test.local",
            "8000-ab_c.test.local",
            "8000-ab-c.test.local",
            "8000-abc.test.local:80x",
            "[::1]:8000",
            "",
    };
    char id[PORTS_ID_MAX + 1];
    char longid[200];
    uint16_t port;
    (void)state;

    for (size_t i = 0; i < ELEMENTSOF(no); i++)
        assert_int_equal(ports_match_host(no[i], "test.local", &port, id, sizeof(id)), 0);
    assert_int_equal(ports_match_host(NULL, "test.local", &port, id, sizeof(id)), 0);
    assert_int_equal(ports_match_host("8000-abc.test.local", NULL, &port, id, sizeof(id)), 0);
    assert_int_equal(ports_match_host("8000-abc.test.local", "", &port, id, sizeof(id)), 0);

    /* An id that does not fit the buffer is not a sandbox's. */
    memset(longid, 0, sizeof(longid));
    memcpy(longid, "80-", 3);
    memset(longid + 3, 'a', PORTS_ID_MAX + 1);
    strcat(longid, ".test.local");
    assert_int_equal(ports_match_host(longid, "test.local", &port, id, sizeof(id)), 0);
    longid[3 + PORTS_ID_MAX] = '\0';
    strcat(longid, ".test.local");
    assert_int_equal(ports_match_host(longid, "test.local", &port, id, sizeof(id)), 1);
    assert_int_equal(strlen(id), PORTS_ID_MAX);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_claimed),
            cmocka_unit_test(test_not_claimed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
