/*
 * test-uidpool.c - pooled uid ranges: parameters, acquire/release and
 * round-robin, exhaustion (-EAGAIN), and host-wide exclusion through OFD
 * locks: another open of the lock file (in this process or a forked one)
 * holding slots makes us skip them, and a dead holder's slots come back.
 * The locks name absolute uid ranges, so pools whose bases differ by any
 * amount (half a range, here) exclude each other exactly where their ranges
 * overlap, and never hand out overlapping ranges, even racing; and a daemon
 * of the old slot-index scheme at the default base is excluded as well.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "jail/uidpool.h"
#include "util/fd.h"

#define BASE 200000u
#define SIZE 65536u
#define HALF (SIZE / 2) /* a base offset that is no multiple of the range size */

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
        (void)prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive a failed test */
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

/* True when [a, a + na) and [b, b + nb) share a uid. */
static bool
overlap(uint64_t a, uint64_t na, uint64_t b, uint64_t nb)
{
    return a < b + nb && b < a + na;
}

static void
test_overlapping_range_blocks(void **state)
{
    struct uidpool *a = NULL, *b = NULL, *c = NULL, *d = NULL, *e = NULL;
    uint32_t s;
    (void)state;

    /* a: [BASE, BASE+64K) [BASE+64K, BASE+128K); holds slot 1 only */
    assert_int_equal(uidpool_open(lockfile, BASE, SIZE, 2, &a, NULL), 0);
    assert_int_equal(uidpool_acquire(a, &s), 0);
    assert_int_equal(uidpool_acquire(a, &s), 0);
    assert_int_equal(s, 1);
    uidpool_release(a, 0);

    /* b is shifted by half a range: both its slots overlap a's slot 1 */
    assert_int_equal(uidpool_open(lockfile, BASE + HALF, SIZE, 2, &b, NULL), 0);
    assert_int_equal(uidpool_acquire(b, &s), -EAGAIN);
    assert_int_equal(uidpool_in_use(b), 0);

    /* c starts where a ends: adjacent, not overlapping, so never blocked */
    assert_int_equal(uidpool_open(lockfile, BASE + 2 * SIZE, SIZE, 2, &c, NULL), 0);
    assert_int_equal(uidpool_acquire(c, &s), 0);
    assert_int_equal(s, 0);
    assert_int_equal(uidpool_acquire(c, &s), 0);
    assert_int_equal(s, 1);

    /* d (smaller ranges) finds the one stretch a leaves free below it */
    assert_int_equal(uidpool_open(lockfile, BASE - 1000, 1000, 200, &d, NULL), 0);
    for (uint32_t i = 0; i < 66; i++) {
        assert_int_equal(uidpool_acquire(d, &s), 0);
        assert_false(overlap(uidpool_first_uid(d, s), 1000, BASE + SIZE, SIZE));
        assert_false(overlap(uidpool_first_uid(d, s), 1000, BASE + 2 * SIZE, 2 * SIZE));
    }
    /* [BASE-1000, BASE+64536) holds 66 ranges of 1000; the 67th straddles a */
    assert_int_equal(uidpool_acquire(d, &s), -EAGAIN);
    uidpool_free(d);

    /* release frees the range for the overlapping pool */
    uidpool_release(a, 1);
    assert_int_equal(uidpool_acquire(b, &s), 0);
    assert_int_equal(uidpool_first_uid(b, s), BASE + HALF + s * SIZE);
    /* and now a, in turn, is blocked where b sits */
    e = NULL;
    assert_int_equal(uidpool_open(lockfile, BASE, SIZE, 2, &e, NULL), 0);
    for (uint32_t i = 0; i < 2; i++) {
        int r = uidpool_acquire(e, &s);
        if (r == 0)
            assert_false(overlap(uidpool_first_uid(e, s), SIZE, uidpool_first_uid(b, 0), SIZE));
    }
    uidpool_free(e);
    uidpool_free(a);
    uidpool_free(b);
    uidpool_free(c);
}

/* A child holding every range it can get in a pool at base, reporting the
 * first uids it got (UINT32_MAX ends the list), then waiting to be killed. */
static pid_t
child_holding_at(uint32_t base, uint32_t nslots, uint32_t *firsts, int max, int *ret_n)
{
    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct uidpool *c = NULL;
        uint32_t s, end = UINT32_MAX;
        (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(p[0]);
        if (uidpool_open(lockfile, base, SIZE, nslots, &c, NULL) < 0)
            _exit(1);
        while (uidpool_acquire(c, &s) == 0) {
            uint32_t u = (uint32_t)uidpool_first_uid(c, s);
            if (write(p[1], &u, sizeof(u)) != sizeof(u))
                _exit(3);
        }
        if (write(p[1], &end, sizeof(end)) != sizeof(end))
            _exit(3);
        close(p[1]);
        for (;;)
            pause();
    }
    close(p[1]);
    int n = 0;
    for (;;) {
        uint32_t u;
        assert_int_equal(read_full(p[0], &u, sizeof(u)), sizeof(u));
        if (u == UINT32_MAX)
            break;
        assert_true(n < max);
        firsts[n++] = u;
    }
    close(p[0]);
    *ret_n = n;
    return pid;
}

static void
test_dead_holder_ranges_return(void **state)
{
    struct uidpool *p = NULL;
    uint32_t theirs[8], s;
    int n = 0;
    (void)state;

    /* the child takes the ranges at BASE+32K+k*64K for k = 0..2 */
    pid_t pid = child_holding_at(BASE + HALF, 3, theirs, 8, &n);
    assert_int_equal(n, 3);

    /* ours, at BASE+k*64K, all overlap one of them but the last */
    assert_int_equal(uidpool_open(lockfile, BASE, SIZE, 4, &p, NULL), 0);
    assert_int_equal(uidpool_acquire(p, &s), -EAGAIN);
    reap(pid);
    for (uint32_t i = 0; i < 4; i++) {
        assert_int_equal(uidpool_acquire(p, &s), 0);
        assert_int_equal(s, i);
    }
    /* and what we hold, a child shifted by half a range cannot get */
    uidpool_release(p, 3);
    pid = child_holding_at(BASE + HALF, 4, theirs, 8, &n);
    assert_int_equal(n, 1); /* only its slot 3 misses our slots 0..2 */
    assert_int_equal(theirs[0], BASE + HALF + 3 * SIZE);
    reap(pid);
    uidpool_free(p);
}

#define RACE_ROUNDS 20000 /* acquire/release rounds per process */
#define RACE_SLOTS  6

/* What each racer holds right now, published after the lock is taken and
 * withdrawn before it is dropped: two published ranges that overlap mean
 * two pools held overlapping locks at the same moment. */
struct race {
    _Atomic uint64_t live[2][RACE_SLOTS]; /* first uid + 1, 0 = not held */
    _Atomic int overlaps;
    _Atomic int acquired[2];
    _Atomic int ready; /* racers start together */
};

static void
racer(struct race *rc, int me, uint32_t base)
{
    struct uidpool *p = NULL;
    uint32_t s;
    unsigned seed = (unsigned)getpid();
    if (uidpool_open(lockfile, base, SIZE, RACE_SLOTS, &p, NULL) < 0)
        _exit(1);
    atomic_fetch_add(&rc->ready, 1);
    while (atomic_load(&rc->ready) < 2)
        ;
    for (int round = 0; round < RACE_ROUNDS; round++) {
        if (rand_r(&seed) % 2 == 0 && uidpool_acquire(p, &s) == 0) {
            uint64_t u = uidpool_first_uid(p, s);
            atomic_store(&rc->live[me][s], u + 1);
            atomic_fetch_add(&rc->acquired[me], 1);
            for (int k = 0; k < RACE_SLOTS; k++) {
                uint64_t v = atomic_load(&rc->live[!me][k]);
                if (v && overlap(u, SIZE, v - 1, SIZE))
                    atomic_fetch_add(&rc->overlaps, 1);
            }
        } else {
            s = (uint32_t)rand_r(&seed) % RACE_SLOTS;
            if (atomic_load(&rc->live[me][s])) {
                atomic_store(&rc->live[me][s], 0);
                uidpool_release(p, s);
            }
        }
    }
    /* Withdraw before the locks go, as on every release. */
    for (int k = 0; k < RACE_SLOTS; k++)
        atomic_store(&rc->live[me][k], 0);
    uidpool_free(p);
    _exit(0);
}

static void
test_two_processes_never_overlap(void **state)
{
    (void)state;
    struct race *rc =
            mmap(NULL, sizeof(*rc), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(rc != MAP_FAILED);
    memset(rc, 0, sizeof(*rc));

    pid_t pids[2];
    for (int me = 0; me < 2; me++) {
        pids[me] = fork();
        assert_true(pids[me] >= 0);
        if (pids[me] == 0) {
            (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
            racer(rc, me, me ? BASE + HALF : BASE); /* does not return */
        }
    }
    for (int me = 0; me < 2; me++) {
        int status;
        assert_int_equal(waitpid(pids[me], &status, 0), pids[me]);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    /* both made progress, and no uid was ever handed out twice */
    assert_true(atomic_load(&rc->acquired[0]) > 100);
    assert_true(atomic_load(&rc->acquired[1]) > 100);
    assert_int_equal(atomic_load(&rc->overlaps), 0);
    assert_int_equal(munmap(rc, sizeof(*rc)), 0);
}

/* What a daemon of the slot-index scheme did for its slot i. */
static int
old_style_lock(int fd, uint32_t i, short type)
{
    struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = i, .l_len = 1};
    return fcntl(fd, F_OFD_SETLK, &fl) < 0 ? -errno : 0;
}

static void
test_old_daemons_at_default_base(void **state)
{
    struct uidpool *p = NULL, *q = NULL, *far = NULL;
    uint32_t s;
    const uint32_t LB = UIDPOOL_LEGACY_BASE;
    (void)state;

    assert_int_equal(uidpool_open(lockfile, LB, SIZE, 3, &p, NULL), 0);
    int old = open(lockfile, O_RDWR | O_CLOEXEC);
    assert_true(old >= 0);

    /* an old daemon holds its slots 0 and 2: we get slot 1 only */
    assert_int_equal(old_style_lock(old, 0, F_WRLCK), 0);
    assert_int_equal(old_style_lock(old, 2, F_WRLCK), 0);
    assert_int_equal(uidpool_acquire(p, &s), 0);
    assert_int_equal(s, 1);
    assert_int_equal(uidpool_acquire(p, &s), -EAGAIN);
    /* and it cannot take the slot we hold */
    assert_int_equal(old_style_lock(old, 1, F_WRLCK), -EAGAIN);

    /* shifted by half a range, each of our ranges spans two old slots */
    assert_int_equal(uidpool_open(lockfile, LB + HALF, SIZE, 3, &q, NULL), 0);
    uidpool_release(p, 1);
    assert_int_equal(uidpool_acquire(q, &s), -EAGAIN); /* 0+1, 1+2, 2+3: 0 and 2 held */
    assert_int_equal(old_style_lock(old, 2, F_UNLCK), 0);
    assert_int_equal(uidpool_acquire(q, &s), 0);
    assert_int_equal(s, 1); /* old slots 1 and 2 */
    assert_int_equal(old_style_lock(old, 2, F_WRLCK), -EAGAIN);
    assert_int_equal(old_style_lock(old, 1, F_WRLCK), -EAGAIN);
    assert_int_equal(old_style_lock(old, 3, F_WRLCK), 0);

    /* a release gives back both locks */
    uidpool_release(q, 1);
    assert_int_equal(old_style_lock(old, 1, F_WRLCK), 0);
    assert_int_equal(old_style_lock(old, 2, F_WRLCK), 0);

    /* a pool below the default one takes no old slot bytes */
    assert_int_equal(uidpool_open(lockfile, BASE, SIZE, 4, &far, NULL), 0);
    for (uint32_t i = 0; i < 4; i++)
        assert_int_equal(uidpool_acquire(far, &s), 0);
    close(old);
    uidpool_free(far);
    uidpool_free(q);
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
            cmocka_unit_test_setup_teardown(test_overlapping_range_blocks, setup, teardown),
            cmocka_unit_test_setup_teardown(test_dead_holder_ranges_return, setup, teardown),
            cmocka_unit_test_setup_teardown(test_two_processes_never_overlap, setup, teardown),
            cmocka_unit_test_setup_teardown(test_old_daemons_at_default_base, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
