/*
 * test-watch.c - the inotify tree watch on a temp directory, through a
 * direct fileops: the tree there at the start is watched (and not
 * reported); events map to CREATE/WRITE/REMOVE/RENAME/CHMOD with names
 * relative to the top; directories made after the start, "mkdir -p"
 * included, and directories moved in with a tree inside are watched at
 * once and what is inside reported as CREATE; a directory moved away is
 * dropped with what is below it; a flat watch sees one level; the caller's
 * queue bound (an event refused) fails the watch with its error, and
 * full() pauses reading until watch_resume(), losing nothing.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "sandbox/fileops.h"
#include "sandbox/watch.h"
#include "util/fd.h"
#include "util/loop.h"
#include "util/timeutil.h"

#define EVENTS_MAX 256

static const char *const names[] = {
        [WATCH_CREATE] = "CREATE", [WATCH_WRITE] = "WRITE", [WATCH_REMOVE] = "REMOVE",
        [WATCH_RENAME] = "RENAME", [WATCH_CHMOD] = "CHMOD",
};

struct fx {
    char top[64]; /* holds "in" (watched) and "out" (beside it) */
    int in, out;  /* their fds */
    struct loop *loop;
    struct fileops *fo;
    struct watch *w;
    char *ev[EVENTS_MAX]; /* "CREATE a/b" */
    size_t n;
    size_t refuse_after; /* 0 = never refuse */
    bool full;           /* what full() answers */
    int failed;          /* what failed() got; 1 = not called */
};

static int
on_event(void *ud, enum watch_event e, const char *rel)
{
    struct fx *f = ud;
    if (f->refuse_after && f->n >= f->refuse_after)
        return -EFBIG;
    assert_true(f->n < EVENTS_MAX);
    assert_int_not_equal(asprintf(&f->ev[f->n], "%s %s", names[e], rel), -1);
    f->n++;
    return 0;
}

static bool
on_full(void *ud)
{
    return ((struct fx *)ud)->full;
}

static void
on_flush(void *ud)
{
    (void)ud;
}

static void
on_failed(void *ud, int r)
{
    ((struct fx *)ud)->failed = r;
}

static const struct watch_ops ops = {
        .event = on_event, .full = on_full, .flush = on_flush, .failed = on_failed};

static bool
seen(struct fx *f, const char *ev)
{
    for (size_t i = 0; i < f->n; i++)
        if (!strcmp(f->ev[i], ev))
            return true;
    return false;
}

/* Runs the loop until ev is seen (NULL: for ms). */
static bool
wait_for(struct fx *f, const char *ev, int ms)
{
    uint64_t end = now_msec() + (uint64_t)ms;
    while (now_msec() < end) {
        if (ev && seen(f, ev))
            return true;
        (void)loop_run_once(f->loop, 20);
    }
    return ev ? seen(f, ev) : true;
}

static void
clear(struct fx *f)
{
    for (size_t i = 0; i < f->n; i++)
        free(f->ev[i]);
    f->n = 0;
}

static void
mkd(int at, const char *p)
{
    if (mkdirat(at, p, 0755) < 0)
        fail_msg("mkdir %s: %m", p);
}

static void
put(int at, const char *p)
{
    assert_int_equal(write_file_at(at, p, "x", 0644), 0);
}

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    struct vfs_ids ids = {0};
    assert_non_null(f);
    (void)snprintf(f->top, sizeof(f->top), "/tmp/abx-watch-XXXXXX");
    assert_non_null(mkdtemp(f->top));
    int top = open(f->top, O_DIRECTORY | O_CLOEXEC);
    assert_true(top >= 0);
    mkd(top, "in");
    mkd(top, "out");
    f->in = openat(top, "in", O_DIRECTORY | O_CLOEXEC);
    f->out = openat(top, "out", O_DIRECTORY | O_CLOEXEC);
    (void)close(top);
    assert_true(f->in >= 0 && f->out >= 0);
    assert_int_equal(loop_new(&f->loop), 0);
    assert_int_equal(fileops_new_direct(f->in, f->in, &ids, (uid_t)-1, (gid_t)-1, false, &f->fo),
                     0);
    f->failed = 1;
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;
    clear(f);
    watch_free(f->w);
    fileops_unref(f->fo);
    loop_free(f->loop);
    (void)close(f->in);
    (void)close(f->out);
    (void)rm_rf_at(AT_FDCWD, f->top);
    free(f);
    return 0;
}

static void
start(struct fx *f, bool recursive)
{
    int dfd = fcntl(f->in, F_DUPFD_CLOEXEC, 3);
    assert_true(dfd >= 0);
    assert_int_equal(watch_new(f->loop, f->fo, dfd, recursive, 4000, &ops, f, &f->w), 0);
    assert_int_equal(watch_start(f->w), 0);
    assert_int_equal(watch_listen(f->w), 0);
}

static void
test_tree(void **state)
{
    struct fx *f = *state;

    mkd(f->in, "a");
    mkd(f->in, "a/b");
    put(f->in, "a/b/old");
    start(f, true);
    assert_int_equal(watch_dirs(f->w), 3);
    assert_true(wait_for(f, NULL, 100));
    assert_int_equal(f->n, 0); /* what was there is not reported */

    put(f->in, "a/b/f");
    assert_true(wait_for(f, "CREATE a/b/f", 2000));
    assert_true(seen(f, "WRITE a/b/f"));
    assert_int_equal(fchmodat(f->in, "a/b/f", 0600, 0), 0);
    assert_true(wait_for(f, "CHMOD a/b/f", 2000));
    assert_int_equal(renameat(f->in, "a/b/f", f->in, "a/g"), 0);
    assert_true(wait_for(f, "CREATE a/g", 2000));
    assert_true(seen(f, "RENAME a/b/f"));
    assert_int_equal(unlinkat(f->in, "a/g", 0), 0);
    assert_true(wait_for(f, "REMOVE a/g", 2000));
    assert_int_equal(fchmod(f->in, 0750), 0);
    assert_true(wait_for(f, "CHMOD ", 2000)); /* the top itself: "" */
    assert_int_equal(f->failed, 1);
}

static void
test_new_dirs(void **state)
{
    struct fx *f = *state;
    start(f, true);

    /* mkdir -p: the inner ones may come before the outer one is watched;
     * the scan reports them. */
    mkd(f->in, "x");
    mkd(f->in, "x/y");
    mkd(f->in, "x/y/z");
    assert_true(wait_for(f, "CREATE x/y/z", 2000));
    assert_true(seen(f, "CREATE x"));
    assert_true(seen(f, "CREATE x/y"));
    assert_int_equal(watch_dirs(f->w), 4);
    put(f->in, "x/y/z/deep");
    assert_true(wait_for(f, "CREATE x/y/z/deep", 2000));
    assert_int_equal(f->failed, 1);
}

static void
test_moved_in_and_away(void **state)
{
    struct fx *f = *state;
    start(f, true);

    mkd(f->out, "m");
    mkd(f->out, "m/n");
    put(f->out, "m/n/file");
    assert_int_equal(renameat(f->out, "m", f->in, "m"), 0);
    assert_true(wait_for(f, "CREATE m/n/file", 2000));
    assert_true(seen(f, "CREATE m"));
    assert_true(seen(f, "CREATE m/n"));
    assert_int_equal(watch_dirs(f->w), 3);
    put(f->in, "m/n/later");
    assert_true(wait_for(f, "CREATE m/n/later", 2000));

    /* Away: its watches go with it, nothing below it reports again. */
    assert_int_equal(renameat(f->in, "m", f->out, "gone"), 0);
    assert_true(wait_for(f, "RENAME m", 2000));
    assert_int_equal(watch_dirs(f->w), 1);
    clear(f);
    put(f->out, "gone/n/after");
    assert_true(wait_for(f, NULL, 200));
    assert_int_equal(f->n, 0);
    assert_int_equal(f->failed, 1);
}

static void
test_flat(void **state)
{
    struct fx *f = *state;
    mkd(f->in, "sub");
    start(f, false);
    assert_int_equal(watch_dirs(f->w), 1);
    put(f->in, "sub/inner");
    mkd(f->in, "d2");
    assert_true(wait_for(f, "CREATE d2", 2000));
    put(f->in, "d2/inner");
    put(f->in, "top");
    assert_true(wait_for(f, "CREATE top", 2000));
    assert_false(seen(f, "CREATE sub/inner"));
    assert_false(seen(f, "CREATE d2/inner"));
    assert_int_equal(watch_dirs(f->w), 1);
}

static void
test_bound(void **state)
{
    struct fx *f = *state;
    start(f, true);

    /* full(): reading stops, the kernel keeps the events, resume delivers. */
    f->full = true;
    put(f->in, "p1");
    assert_true(wait_for(f, "CREATE p1", 2000));
    assert_true(watch_paused(f->w));
    put(f->in, "p2");
    assert_true(wait_for(f, NULL, 200));
    assert_false(seen(f, "CREATE p2"));
    f->full = false;
    watch_resume(f->w);
    assert_false(watch_paused(f->w));
    assert_true(wait_for(f, "CREATE p2", 2000));

    /* The caller's queue bound: an event refused fails the watch with it. */
    f->refuse_after = f->n + 2;
    for (int i = 0; i < 5; i++) {
        char nm[16];
        (void)snprintf(nm, sizeof(nm), "q%d", i);
        put(f->in, nm);
    }
    uint64_t end = now_msec() + 2000;
    while (f->failed == 1 && now_msec() < end)
        (void)loop_run_once(f->loop, 20);
    assert_int_equal(f->failed, -EFBIG);
}

static void
test_errors(void **state)
{
    struct fx *f = *state;
    /* A name past name_max fails the start, and a file is no directory. */
    mkd(f->in, "long-name-dir");
    int dfd = fcntl(f->in, F_DUPFD_CLOEXEC, 3);
    assert_int_equal(watch_new(f->loop, f->fo, dfd, true, 5, &ops, f, &f->w), 0);
    assert_int_equal(watch_start(f->w), -ENAMETOOLONG);
    f->w = watch_free(f->w);
    put(f->in, "file");
    dfd = openat(f->in, "file", O_RDONLY | O_CLOEXEC);
    assert_true(dfd >= 0);
    assert_int_equal(watch_new(f->loop, f->fo, dfd, true, 4000, &ops, f, &f->w), 0);
    assert_int_equal(watch_start(f->w), -ENOTDIR);
    assert_null(watch_free(NULL));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_tree, setup, teardown),
            cmocka_unit_test_setup_teardown(test_new_dirs, setup, teardown),
            cmocka_unit_test_setup_teardown(test_moved_in_and_away, setup, teardown),
            cmocka_unit_test_setup_teardown(test_flat, setup, teardown),
            cmocka_unit_test_setup_teardown(test_bound, setup, teardown),
            cmocka_unit_test_setup_teardown(test_errors, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
