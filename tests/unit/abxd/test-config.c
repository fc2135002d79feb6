/*
 * test-config.c - abxd's option table: the defaults, every kind of value
 * from the environment and from flags, a flag over its variable, and the
 * refusals with their messages (the order of several bad variables, the
 * terse flags, the connection cross-check, stray arguments).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "abxd/config.h"

/* Every variable config.c reads, cleared before each case. */
static const char *const vars[] = {
        "ABX_LISTEN",
        "ABX_STATE_DIR",
        "ABX_API_KEY",
        "ABX_ISOLATION",
        "ABX_PRIVSEP",
        "ABX_CGROUP",
        "ABX_UID_LOCK",
        "ABX_UID_BASE",
        "ABX_UID_SLOTS",
        "ABX_POOL",
        "ABX_PIDS",
        "ABX_TIMEOUT_S",
        "ABX_MAX_TIMEOUT_S",
        "ABX_IDLE_TIMEOUT_S",
        "ABX_EXEC_TIMEOUT_S",
        "ABX_READY_TIMEOUT_S",
        "ABX_MAX_SANDBOXES",
        "ABX_MEMORY_MB",
        "ABX_MAX_FILE_MB",
        "ABX_TMP_MB",
        "ABX_ROOTFS_MB",
        "ABX_SHM_MB",
        "ABX_DISK_MB",
        "ABX_DISK_POOL_MB",
        "ABX_DISK_FLOOR_MB",
        "ABX_STORE",
        "ABX_TOOLS_DIR",
        "ABX_KEYS_FILE",
        "ABX_TEMPLATES_DIR",
        "ABX_DOMAIN",
        "ABX_SYNC_IGNORE",
        "ABX_STORE_WORKERS",
        "ABX_MIRROR_WINDOW_S",
        "ABX_WS_IDLE_S",
        "ABX_HTTP_HEADER_TIMEOUT_S",
        "ABX_HTTP_BODY_TIMEOUT_S",
        "ABX_HTTP_BODY_MIN_RATE",
        "ABX_HTTP_MAX_CONNS",
        "ABX_HTTP_MAX_CONNS_PER_IP",
        "ABX_SYNC_MAX_FILE_MB",
        "ABX_RESERVE_MB",
        "ABX_CPU",
};

static struct config c;

/* Loads with env ("K=V" pairs, NULL-terminated) and flags; returns the
 * result, message in msg. */
static int
load(const char *const *env, const char *const *flags, char *msg)
{
    char *argv[16] = {(char *)"abxd"};
    int argc = 1;
    struct err e = {0};

    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
        unsetenv(vars[i]);
    for (; env && *env; env++) {
        const char *eq = strchr(*env, '=');
        char name[64];
        (void)snprintf(name, sizeof(name), "%.*s", (int)(eq - *env), *env);
        setenv(name, eq + 1, 1);
    }
    for (; flags && *flags; flags++)
        assert_non_null(argv[argc++] = strdup(*flags));
    argv[argc] = NULL;
    int r = config_load(&c, argc, argv, &e);
    if (msg)
        (void)snprintf(msg, ERR_MSG_MAX, "%s", e.msg);
    for (int i = 1; i < argc; i++)
        free(argv[i]);
    return r;
}

#define ENV(...)   ((const char *const[]){__VA_ARGS__, NULL})
#define FLAGS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* The load must fail with EINVAL and exactly msg. */
static void
refused(const char *const *env, const char *const *flags, const char *msg)
{
    char got[ERR_MSG_MAX];
    assert_int_equal(load(env, flags, got), -EINVAL);
    if (strcmp(got, msg))
        fail_msg("'%s', not '%s'", got, msg);
}

static void
test_defaults(void **state)
{
    (void)state;
    assert_int_equal(load(NULL, NULL, NULL), 0);
    assert_string_equal(c.listen_host, "127.0.0.1");
    assert_int_equal(c.listen_port, 8700);
    assert_string_equal(c.state_dir, "/var/lib/abx");
    assert_string_equal(c.api_key, "");
    assert_int_equal(c.isolation, JAIL_NS);
    assert_int_equal(c.privsep, CONFIG_AUTO); /* main() decides */
    assert_string_equal(c.cgroup, "auto");
    assert_string_equal(c.uid_lock, "/run/abx/uid-pool.lock");
    assert_int_equal(c.uid_base, 0x40000000u);
    assert_int_equal(c.uid_slots, 4096);
    assert_int_equal(c.pool, 2);
    assert_true(c.memory_bytes == 512ull << 20);
    assert_int_equal(c.cpu_millis, 1000);
    assert_int_equal(c.pids, 512);
    assert_true(c.timeout_s == 0 && c.max_timeout_s == 30 * 86400ull);
    assert_true(c.idle_timeout_s == 1800 && c.exec_timeout_s == 300 && c.ready_timeout_s == 60);
    assert_int_equal(c.max_sandboxes, 2048);
    assert_true(c.max_file_bytes == 8ull << 30);
    assert_true(c.root_bytes == 64ull << 20 && c.tmp_bytes == 256ull << 20 &&
                c.shm_bytes == 64ull << 20);
    assert_true(c.disk_bytes == 2048ull << 20 && c.disk_pool_bytes == 0 &&
                c.disk_floor_bytes == 512ull << 20);
    assert_string_equal(c.store, "");
    assert_int_equal(c.store_workers, 4);
    assert_true(c.mirror_window_s == 30 && c.ws_idle_s == 1800);
    assert_false(c.sync_ignore_set);
    assert_true(c.sync_max_file_bytes == 10ull << 20);
    assert_true(c.reserve_bytes == 64ull << 20);
    assert_string_equal(c.domain, "");
    assert_int_equal(c.http_max_conns, 4096);
    assert_int_equal(c.http_max_per_client, 512);
    assert_false(c.show_help || c.show_version);
}

static void
test_values(void **state)
{
    (void)state;
    assert_int_equal(load(ENV("ABX_LISTEN=0.0.0.0:9", "ABX_ISOLATION=uid", "ABX_CGROUP=v1",
                              "ABX_MEMORY_MB=64", "ABX_CPU=0.5", "ABX_DOMAIN=Sb.Example.COM",
                              "ABX_UID_SLOTS=60000", "ABX_TIMEOUT_S=5", "ABX_STORE=postgres://x"),
                          NULL, NULL),
                     0);
    assert_string_equal(c.listen_host, "0.0.0.0");
    assert_int_equal(c.listen_port, 9);
    assert_int_equal(c.isolation, JAIL_UID);
    assert_string_equal(c.cgroup, "v1");
    assert_true(c.memory_bytes == 64ull << 20);
    assert_int_equal(c.cpu_millis, 500);
    assert_string_equal(c.domain, "sb.example.com");
    assert_int_equal(c.uid_slots, 60000);
    assert_true(c.timeout_s == 5);
    assert_string_equal(c.store, "postgres://x");

    /* empty is unset, but for the sync rules */
    assert_int_equal(load(ENV("ABX_LISTEN=", "ABX_POOL=", "ABX_SYNC_IGNORE="), NULL, NULL), 0);
    assert_int_equal(c.listen_port, 8700);
    assert_int_equal(c.pool, 2);
    assert_true(c.sync_ignore_set);
    assert_string_equal(c.sync_ignore, "");

    /* flags, and a flag over its variable */
    assert_int_equal(load(ENV("ABX_ISOLATION=none", "ABX_DISK_MB=10", "ABX_DOMAIN=x"),
                          FLAGS("--isolation", "uid", "--disk-mb=20", "--domain", "", "--state-dir",
                                "/s", "--reserve-mb", "0", "-h", "--version"),
                          NULL),
                     0);
    assert_int_equal(c.isolation, JAIL_UID);
    assert_true(c.disk_bytes == 20ull << 20);
    assert_string_equal(c.domain, "");
    assert_string_equal(c.state_dir, "/s");
    assert_true(c.reserve_bytes == 0);
    assert_true(c.show_help && c.show_version);
    assert_int_equal(load(ENV("ABX_PRIVSEP=1"), FLAGS("--privsep", "0"), NULL), 0);
    assert_int_equal(c.privsep, 0);
    assert_int_equal(load(ENV("ABX_PRIVSEP=1"), NULL, NULL), 0);
    assert_int_equal(c.privsep, 1);
    assert_int_equal(load(NULL, FLAGS("--privsep", "auto"), NULL), 0);
    assert_int_equal(c.privsep, CONFIG_AUTO);
}

static void
test_refused(void **state)
{
    (void)state;
    refused(ENV("ABX_POOL=257"), NULL, "ABX_POOL must be an integer from 0 to 256, not '257'");
    refused(ENV("ABX_MEMORY_MB=x"), NULL,
            "ABX_MEMORY_MB must be an integer from 16 to 1073741824, not 'x'");
    refused(ENV("ABX_ISOLATION=x"), NULL, "ABX_ISOLATION must be ns, uid or none, not 'x'");
    refused(ENV("ABX_CGROUP=v3"), NULL, "ABX_CGROUP must be auto, v1 or v2, not 'v3'");
    refused(ENV("ABX_CPU=0.001"), NULL, "ABX_CPU must be a number of cores, not '0.001'");
    refused(ENV("ABX_DOMAIN=a_b"), NULL,
            "ABX_DOMAIN must be a DNS name like 'sandbox.example.com', not 'a_b'");
    refused(ENV("ABX_LISTEN=bad"), FLAGS("--listen", "203.0.113.1:1"),
            "listen address must be ADDR:PORT, not 'bad'"); /* the variable is read first */
    /* of several bad variables, the first in the table's order */
    refused(ENV("ABX_MEMORY_MB=x", "ABX_ISOLATION=y"), NULL,
            "ABX_ISOLATION must be ns, uid or none, not 'y'");
    /* the cross-check, also against a default, before later variables */
    refused(ENV("ABX_HTTP_MAX_CONNS=100", "ABX_SYNC_MAX_FILE_MB=x"), NULL,
            "ABX_HTTP_MAX_CONNS_PER_IP (512) must be below ABX_HTTP_MAX_CONNS (100)");
    refused(NULL, FLAGS("--isolation", "bad"), "--isolation must be ns, uid or none");
    refused(NULL, FLAGS("--privsep", "yes"), "--privsep must be auto, 0 or 1, not 'yes'");
    refused(ENV("ABX_PRIVSEP=2"), NULL, "ABX_PRIVSEP must be auto, 0 or 1, not '2'");
    refused(NULL, FLAGS("--reserve-mb", "x"), "--reserve-mb must be an integer from 0 to 1048576");
    refused(NULL, FLAGS("--disk-pool-mb", "1"),
            "--disk-pool-mb must be an integer from 256 to 1073741824, not '1'");
    refused(NULL, FLAGS("--domain", "-a.b"),
            "--domain must be a DNS name like 'sandbox.example.com', not '-a.b'");
    refused(NULL, FLAGS("--bogus"), "unknown option (see --help)");
    refused(NULL, FLAGS("--state-dir"), "unknown option (see --help)");
    refused(NULL, FLAGS("--listen=1:2", "a", "b"), "unexpected argument 'a' (see --help)");
    char longdir[5000];
    memset(longdir, 'd', sizeof(longdir) - 1);
    longdir[sizeof(longdir) - 1] = '\0';
    refused(NULL, FLAGS("--state-dir", longdir), "--state-dir is too long");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_defaults),
            cmocka_unit_test(test_values),
            cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
