/*
 * test-lease.c - the GC lease's shared half (lease.c): taking holder names
 * apart, taking the lease over from a dead holder, and store_gc() around a
 * backend's collection, against the in-memory backend (fake-backend.c).
 * Live processes and real leases are test-store.c's (test_lease_holders).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fake-backend.h"
#include "store/store-internal.h"

#define BOOT "0123456789abcdef0123456789abcdef"

static void
test_parse(void **state)
{
    (void)state;
    struct store_holder_id id;
    char longname[STORE_HOLDER_MAX + 2];

    assert_int_equal(store_holder_parse("abxd-h-1.example-42-1000-" BOOT, "h-1.example", &id), 1);
    assert_int_equal(id.pid, 42);
    assert_int_equal(id.start, 1000);
    assert_string_equal(id.boot, BOOT);
    /* The prefix may hold dashes too: fields are taken from the end. */
    assert_int_equal(store_holder_parse("my-abxd-h-7-1-" BOOT, "h", &id), 1);
    assert_int_equal(id.pid, 7);

    const char *other[] = {
            "",
            "test-holder",
            "abxd-other-42-1000-" BOOT,            /* another host */
            "abxd-xh-1.example-42-1000-" BOOT,     /* a longer host ending in ours */
            "h-1.example-42-1000-" BOOT,           /* no prefix */
            "abxd-h-1.example-0-1000-" BOOT,       /* pid 0 */
            "abxd-h-1.example-2147483648-1-" BOOT, /* past INT32_MAX */
            "abxd-h-1.example--1-1000-" BOOT,      /* a sign */
            "abxd-h-1.example-4x-1000-" BOOT,      /* not a number */
            "abxd-h-1.example-42-10e3-" BOOT,
            "abxd-h-1.example-42-1000-" BOOT "0", /* a boot id of 33 */
            "abxd-h-1.example-42-1000-0123",
            "abxd-h-1.example-42-1000",           /* a field short */
            "abxd-h-1.example-42-1000-" BOOT "-", /* an empty last field */
    };
    for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++) {
        if (store_holder_parse(other[i], "h-1.example", &id) != 0)
            fail_msg("'%s' taken for a holder of this host", other[i]);
    }
    memset(longname, 'a', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    memcpy(longname + sizeof(longname) - 1 - 40, "-h-1-1-", 7);
    assert_int_equal(store_holder_parse(longname, "h", &id), 0);
    assert_int_equal(store_holder_parse("abxd-h-1-1-" BOOT, "", &id), 0);
}

/* Our own holder name, with the boot id replaced: a process of this host
 * that is gone (another boot). */
static void
dead_name(char *out, size_t n)
{
    char me[STORE_HOLDER_MAX + 1];
    assert_int_equal(store_holder_name("abxd", me, sizeof(me)), 0);
    const char *tail = strrchr(me, '-');
    const char *boot = strcmp(tail + 1, BOOT) ? BOOT : "fedcba9876543210fedcba9876543210";
    (void)snprintf(out, n, "%.*s%s", (int)(tail + 1 - me), me, boot);
    assert_true(store_holder_dead(out));
}

static int
setup(void **state)
{
    *state = fake_new(false);
    return 0;
}

static int
teardown(void **state)
{
    fake_free(*state);
    return 0;
}

static void
test_take(void **state)
{
    struct fake *f = *state;
    struct err err = {0};
    char dead[STORE_HOLDER_MAX + 1];
    bool held = false;

    /* Free: one compare and swap. */
    assert_int_equal(store_lease_take(&f->base, "me", 1000, &held, &err), 0);
    assert_true(held);
    assert_string_equal(f->log, "lease ");
    /* Ours already: renewed. */
    f->clock_ms += 10;
    assert_int_equal(store_lease_take(&f->base, "me", 1000, &held, &err), 0);
    assert_true(held);
    assert_int_equal(f->st.expires_ms, f->clock_ms + 1000);

    /* Someone else's, alive (or of another host): left alone. */
    (void)snprintf(f->st.holder, sizeof(f->st.holder), "abxd-other-host-1-1-%s", BOOT);
    fake_log_clear(f);
    assert_int_equal(store_lease_take(&f->base, "me", 1000, &held, &err), 0);
    assert_false(held);
    assert_string_equal(f->log, "lease holder ");
    /* Expired: taken as if free. */
    f->clock_ms += 10000;
    assert_int_equal(store_lease_take(&f->base, "me", 1000, &held, &err), 0);
    assert_true(held);

    /* A dead process of this host: taken over at once, by compare and
     * swap on its name. */
    dead_name(dead, sizeof(dead));
    (void)snprintf(f->st.holder, sizeof(f->st.holder), "%s", dead);
    f->st.expires_ms = f->clock_ms + 60000;
    fake_log_clear(f);
    assert_int_equal(store_lease_take(&f->base, "me", 1000, &held, &err), 0);
    assert_true(held);
    char want[512];
    (void)snprintf(want, sizeof(want), "lease holder lease-from:%s ", dead);
    assert_string_equal(f->log, want);
    assert_string_equal(f->st.holder, "me");

    /* A failure on the way is returned, not taken for "not held". */
    f->fail_op = "holder";
    f->fail_errno = EIO;
    f->fail_times = 1;
    (void)snprintf(f->st.holder, sizeof(f->st.holder), "%s", dead);
    assert_int_equal(store_lease_take(&f->base, "you", 1000, &held, &err), -EIO);
}

static void
test_gc(void **state)
{
    struct fake *f = *state;
    struct err err = {0};
    struct store_gc_stats st;

    assert_int_equal(store_gc(&f->base, "", 1000, &st, &err), -EINVAL);
    assert_string_equal(err.msg, "invalid GC holder name");
    err_clear(&err);

    /* Held: collected, then given back whatever happened. */
    assert_int_equal(store_gc(&f->base, "me", 1000, &st, &err), 0);
    assert_true(st.held_lease);
    assert_string_equal(f->log, "lease collect release ");
    assert_string_equal(f->st.holder, "");
    f->fail_op = "collect";
    f->fail_errno = EIO;
    f->fail_times = 1;
    fake_log_clear(f);
    assert_int_equal(store_gc(&f->base, "me", 1000, &st, &err), -EIO);
    assert_true(st.held_lease);
    assert_string_equal(f->log, "lease collect release ");
    assert_string_equal(f->st.holder, "");

    /* Not held: nothing collected, nothing released. */
    (void)snprintf(f->st.holder, sizeof(f->st.holder), "other");
    f->st.expires_ms = f->clock_ms + 60000;
    fake_log_clear(f);
    assert_int_equal(store_gc(&f->base, "me", 1000, &st, &err), 0);
    assert_false(st.held_lease);
    assert_string_equal(f->log, "lease holder ");
    assert_string_equal(f->st.holder, "other");
    assert_int_equal(f->collects, 1);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_parse),
            cmocka_unit_test_setup_teardown(test_take, setup, teardown),
            cmocka_unit_test_setup_teardown(test_gc, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
