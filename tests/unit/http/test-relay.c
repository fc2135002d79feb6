/*
 * test-relay.c - the relay's header rules: which fields never cross a
 * proxy (RFC 9110 7.6.1's hop-by-hop set and the framing fields the server
 * sets itself, any case), tokens named by a Connection list (commas, spaces
 * and tabs around them, no prefix matches, a NULL list), and which request
 * targets may be sent upstream verbatim (no controls, spaces or DEL).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "http/relay.h"
#include "util/cleanup.h"

static void
test_hop_by_hop(void **state)
{
    static const char *const hop[] = {
            "Connection",
            "connection",
            "KEEP-ALIVE",
            "Proxy-Connection",
            "Proxy-Authenticate",
            "Proxy-Authorization",
            "TE",
            "te",
            "Trailer",
            "Transfer-Encoding",
            "Upgrade",
            "Content-Length",
            "Expect",
    };
    static const char *const end[] = {
            "Content-Type",
            "Host",
            "Cookie",
            "Set-Cookie",
            "Authorization",
            "Connections",
            "T",
            "",
            "Upgrade-Insecure-Requests",
    };
    (void)state;

    for (size_t i = 0; i < ELEMENTSOF(hop); i++)
        assert_true(http_hop_by_hop(hop[i]));
    for (size_t i = 0; i < ELEMENTSOF(end); i++)
        assert_false(http_hop_by_hop(end[i]));
}

static void
test_token_listed(void **state)
{
    (void)state;

    assert_true(http_token_listed("close", "close"));
    assert_true(http_token_listed("Upgrade", "upgrade"));
    assert_true(http_token_listed("keep-alive, Upgrade", "upgrade"));
    assert_true(http_token_listed(" \tX-Secret\t ,close", "x-secret"));
    assert_true(http_token_listed("a,,b,", "b"));
    assert_false(http_token_listed("keep-alive, Upgrade", "keep"));
    assert_false(http_token_listed("upgraded", "upgrade"));
    assert_false(http_token_listed("x-upgrade", "upgrade"));
    assert_false(http_token_listed("", "close"));
    assert_false(http_token_listed(",, ,", "close"));
    assert_false(http_token_listed(NULL, "close"));
}

static void
test_target(void **state)
{
    static const char *const ok[] = {"/", "/a/b?c=d&e", "*", "/%20%0d%0a", "/~!$&'()*+,;=:@"};
    static const char *const no[] = {"", "/a b", "/a\tb", "/a\r\n", "/\x7f", "/\x01"};
    (void)state;

    for (size_t i = 0; i < ELEMENTSOF(ok); i++)
        assert_true(http_relay_target_ok(ok[i]));
    for (size_t i = 0; i < ELEMENTSOF(no); i++)
        assert_false(http_relay_target_ok(no[i]));
    assert_false(http_relay_target_ok(NULL));
    /* Bytes past ASCII are the client's business: they go through. */
    assert_true(http_relay_target_ok("/caf\xc3\xa9"));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_hop_by_hop),
            cmocka_unit_test(test_token_listed),
            cmocka_unit_test(test_target),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
