/*
 * test-uidpool.c - pooled uid ranges: parameters, acquire/release and
 * round-robin, exhaustion (-EAGAIN), and host-wide exclusion through OFD
 * locks: another open of the lock file (in this process or a forked one)
 * holding slots makes us skip them, and a dead holder's slots come back.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "jail/uidpool.h"
#include "util/fd.h"

#define BASE 200000u
#define SIZE 65536u

static char dir[256];
static char lockfile[320];

static int
setup(void **state)
{
    (void)state;
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    if (snprintf(dir, sizeof(dir), "%.200s/abx-test-uidpool-XXXXXX", tmp) >= (int)sizeof(dir) ||
        !mkdtemp(dir))
        return -1;
    (void)snprintf(lockfile, sizeof(lockfile), "%s/sub/dir/uidpool.lock", dir);
    return 0;
}

static int
teardown(void **state)
{
    (void)state;
    return rm_rf_at(AT_FDCWD, dir) == 0 ? 0 : -1;
}

static void
test_open_parameters(void **state)
{
    struct uidpool *p = NULL;
    struct err e = {0};
    (void)state;

    assert_int_equal(uidpool_open(lockfile, BASE, 0, 4, &p, &e), -EINVAL);
    assert_true(err_isset(&e));
    err_clear(&e);
    assert_int_equal(uidpool_open(lockfile, BASE, SIZE, 0, &p, &e), -EINVAL);
    err_clear(&e);
    assert_int_equal(uidpool_open(lockfile, 65535, SIZE, 4, &p, &e), -EINVAL);
    assert_non_null(strstr(e.msg, "overlaps ordinary host users"));
    err_clear(&e);
    /* the last uid must stay below UINT32_MAX - 1 ((uid_t)-1 and -2 are special) */
    assert_int_equal(uidpool_open(lockfile, 4294967295u - 65536u * 2, 65536, 2, &p, &e), -EINVAL);
    assert_non_null(strstr(e.msg, "does not fit in 32 bits"));
    err_clear(&e);
    assert_int_equal(uidpool_open(lockfile, BASE, 0x10000, 0x10000, &p, &e), -EINVAL);
    assert_null(p);

    /* a lock path we cannot create */
    err_clear(&e);
    assert_int_equal(uidpool_open("/proc/version/x/lock", BASE, SIZE, 4, &p, &e) < 0, 1);
    assert_true(err_isset(&e));
    assert_null(p);

    /* the largest pool that fits; the parent directories are created */
    err_clear(&e);
    assert_int_equal(uidpool_open(lockfile, 4294967294u - 65536u * 2 - 1, 65536, 2, &p, &e), 0);
    assert_false(err_isset(&e));
    struct stat st;
    assert_int_equal(stat(lockfile, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(uidpool_size(p), 65536);
    assert_int_equal(uidpool_first_uid(p, 1), 4294967294u - 65536u - 1);
    assert_null(uidpool_free(p));
    assert_null(uidpool_free(NULL));
}

static void
test_acquire_release(void **state)
{
    struct uidpool *p = NULL;
    uint32_t s, got[4];
    (void)state;

    assert_int_equal(uidpool_open(lockfile, BASE, SIZE, 4, &p, NULL), 0);
    assert_int_equal(uidpool_in_use(p), 0);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(uidpool_acquire(p, &got[i]), 0);
        assert_int_equal(got[i], (uint32_t)i); /* round robin from 0 */
        assert_int_equal(uidpool_first_uid(p, got[i]), BASE + (uint32_t)i * SIZE);
        assert_int_equal(uidpool_in_use(p), (uint32_t)i + 1);
    }
    s = 99;
    assert_int_equal(uidpool_acquire(p, &s), -EAGAIN);
    assert_int_equal(s, 99);

    /* releasing what we do not hold changes nothing */
    uidpool_release(p, 4);
    uidpool_release(p, 1000000);
    assert_int_equal(uidpool_in_use(p), 4);
    uidpool_release(p, 2);
    uidpool_release(p, 2);
    assert_int_equal(uidpool_in_use(p), 3);
    assert_int_equal(uidpool_acquire(p, &s), 0);
    assert_int_equal(s, 2);
    assert_int_equal(uidpool_acquire(p, &s), -EAGAIN);

    /* round robin: a slot just released is not the next one handed out */
    uidpool_release(p, 0);
    uidpool_release(p, 3);
    assert_int_equal(uidpool_acquire(p, &s), 0);
    assert_int_equal(s, 3);
    assert_int_equal(uidpool_acquire(p, &s), 0);
    assert_int_equal(s, 0);
    assert_int_equal(uidpool_in_use(p), 4);
    uidpool_free(p);
}

static void
test_two_opens_in_one_process(void **state)
{
    struct uidpool *a = NULL, *b = NULL;
    uint32_t s;
    (void)state;

    /* each open is its own open file description, so its own holder */
    assert_int_equal(uidpool_open(lockfile, BASE, SIZE, 3, &a, NULL), 0);
    assert_int_equal(uidpool_open(lockfile, BASE, SIZE, 3, &b, NULL), 0);
    assert_int_equal(uidpool_acquire(a, &s), 0);
    assert_int_equal(s, 0);
    assert_int_equal(uidpool_acquire(b, &s), 0);
    assert_int_equal(s, 1);
    assert_int_equal(uidpool_acquire(a, &s), 0);
    assert_int_equal(s, 2);
    assert_int_equal(uidpool_acquire(b, &s), -EAGAIN);
    assert_int_equal(uidpool_in_use(b), 1);
    /* a release is seen by the other */
    uidpool_release(a, 0);
    assert_int_equal(uidpool_acquire(b, &s), 0);
    assert_int_equal(s, 0);
    /* freeing a pool drops every lock it held */
    uidpool_free(a);
    assert_int_equal(uidpool_acquire(b, &s), 0);
    assert_int_equal(s, 2);
    uidpool_free(b);
}

/* A child that takes n slots, reports them, and waits to be killed. */
static pid_t
child_holding(uint32_t nslots, int n, uint32_t *slots)
{
    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct uidpool *c = NULL;
        close(p[0]);
        if (uidpool_open(lockfile, BASE, SIZE, nslots, &c, NULL) < 0)
            _exit(1);
        for (int i = 0; i < n; i++) {
            uint32_t s;
            if (uidpool_acquire(c, &s) < 0)
                _exit(2);
            if (write(p[1], &s, sizeof(s)) != sizeof(s))
                _exit(3);
        }
        close(p[1]);
        for (;;)
            pause();
    }
    close(p[1]);
    for (int i = 0; i < n; i++)
        assert_int_equal(read_full(p[0], &slots[i], sizeof(slots[i])), sizeof(slots[i]));
    close(p[0]);
    return pid;
}

static void
reap(pid_t pid)
{
    int status;
    assert_int_equal(kill(pid, SIGKILL), 0);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
}

static void
test_cross_process_exclusion(void **state)
{
    struct uidpool *p = NULL;
    uint32_t theirs[2], s, mine[4];
    (void)state;

    pid_t pid = child_holding(5, 2, theirs);
    assert_int_equal(theirs[0], 0);
    assert_int_equal(theirs[1], 1);

    assert_int_equal(uidpool_open(lockfile, BASE, SIZE, 5, &p, NULL), 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(uidpool_acquire(p, &mine[i]), 0);
        assert_true(mine[i] != theirs[0] && mine[i] != theirs[1]);
    }
    assert_int_equal(mine[0], 2);
    assert_int_equal(mine[1], 3);
    assert_int_equal(mine[2], 4);
    assert_int_equal(uidpool_acquire(p, &s), -EAGAIN);
    assert_int_equal(uidpool_in_use(p), 3);

    /* the holder dies without releasing: the kernel drops its locks */
    reap(pid);
    assert_int_equal(uidpool_acquire(p, &mine[3]), 0);
    assert_true(mine[3] == 0 || mine[3] == 1);
    assert_int_equal(uidpool_acquire(p, &s), 0);
    assert_true(s == 0 || s == 1);
    assert_true(s != mine[3]);
    assert_int_equal(uidpool_acquire(p, &s), -EAGAIN);

    /* and the other way round: what we hold, a new process skips */
    uidpool_release(p, 3);
    uint32_t got;
    pid = child_holding(5, 1, &got);
    assert_int_equal(got, 3);
    reap(pid);
    uidpool_free(p);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_open_parameters, setup, teardown),
            cmocka_unit_test_setup_teardown(test_acquire_release, setup, teardown),
            cmocka_unit_test_setup_teardown(test_two_opens_in_one_process, setup, teardown),
            cmocka_unit_test_setup_teardown(test_cross_process_exclusion, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
