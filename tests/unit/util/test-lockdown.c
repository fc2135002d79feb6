/*
 * test-lockdown.c - lockdown_self() and lockdown_bound_caps(), each in a
 * forked child (they change the process for good).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "util/lockdown.h"

/* Runs fn in a child; the child's exit code is fn's result (0 = pass). */
static int
in_child(int (*fn)(void))
{
    int st;
    pid_t pid = fork();
    if (pid == 0)
        _exit(fn());
    assert_true(pid > 0);
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    return WEXITSTATUS(st);
}

static int
child_self(void)
{
    struct rlimit rl;
    if (lockdown_self(NULL) < 0)
        return 1;
    if (prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0)
        return 2;
    if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1)
        return 3;
    if (getrlimit(RLIMIT_CORE, &rl) < 0 || rl.rlim_cur != 0 || rl.rlim_max != 0)
        return 4;
    return 0;
}

static void
test_self(void **state)
{
    (void)state;
    assert_int_equal(in_child(child_self), 0);
}

static int
child_bound(void)
{
    const char *step = NULL;
    int r = lockdown_bound_caps(UINT64_C(1) << 0 | UINT64_C(1) << 21, &step);
    if (geteuid() != 0) /* no CAP_SETPCAP: the first drop fails, and says so */
        return r == -EPERM && step ? 0 : 1;
    if (r < 0)
        return 2;
    if (prctl(PR_CAPBSET_READ, 0, 0, 0, 0) != 1 || prctl(PR_CAPBSET_READ, 21, 0, 0, 0) != 1)
        return 3; /* CAP_CHOWN, CAP_SYS_ADMIN kept */
    for (int cap = 1; cap < 21; cap++)
        if (prctl(PR_CAPBSET_READ, cap, 0, 0, 0) != 0)
            return 4;
    return 0;
}

static void
test_bound_caps(void **state)
{
    (void)state;
    assert_int_equal(in_child(child_bound), 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_self),
            cmocka_unit_test(test_bound_caps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
