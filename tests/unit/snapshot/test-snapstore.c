/*
 * test-snapstore.c - the snapshot store on a temp directory, copying
 * through a direct fileops from a fake sandbox view: the layout (a 0700
 * store, <id>/info.json and <id>/root/<the view's writable dirs>, nothing
 * half-made left), info.json read back into the record it was written from
 * (id, names, sandbox, template, alias, time, hidden, sizes), lookup by id
 * and by name (the newest wins), listing (hidden ones too), restore into
 * another view, delete (the record gone at once, the tree on the worker;
 * bad and unknown ids refused), and the sweep at open of half-made,
 * half-deleted and hidden snapshots. Needs root (the copy keeps owners):
 * skipped otherwise.
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
#include "snapshot/snapstore.h"
#include "util/buf.h"
#include "util/fd.h"
#include "util/loop.h"
#include "util/timeutil.h"

struct fx {
    char top[64];
    char store_path[96];
    int topfd;
    struct loop *loop;
    struct snapstore *s;
    struct fileops *fo; /* the view "view" */
};

struct taken {
    bool done;
    int r;
    char id[SNAPSTORE_ID_MAX + 1];
    struct snapshot_stats st;
};

static void
on_taken(int r, const struct err *err, const char *id, const struct snapshot_stats *st, void *ud)
{
    struct taken *t = ud;
    (void)err;
    t->done = true;
    t->r = r;
    (void)snprintf(t->id, sizeof(t->id), "%s", id);
    t->st = *st;
}

static void
on_restored(int r, const struct err *err, void *ud)
{
    (void)err;
    *(int *)ud = r;
}

static void
mkd(int at, const char *p)
{
    if (mkdirat(at, p, 0755) < 0)
        fail_msg("mkdir %s: %m", p);
}

static struct fileops *
view(struct fx *f, const char *name)
{
    static const struct vfs_ids ids = {0, 0, 1000, 1000, 0, 65536};
    struct fileops *fo = NULL;
    int fd = openat(f->topfd, name, O_PATH | O_DIRECTORY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(fileops_new_direct(fd, fd, &ids, 0, 0, true, &fo), 0);
    (void)close(fd);
    return fo;
}

static int
setup(void **state)
{
    if (geteuid() != 0) {
        print_message("skipped: needs root (the copy keeps owners)\n");
        exit(77);
    }
    struct fx *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    (void)snprintf(f->top, sizeof(f->top), "/tmp/abx-snapstore-XXXXXX");
    assert_non_null(mkdtemp(f->top));
    f->topfd = open(f->top, O_DIRECTORY | O_CLOEXEC);
    assert_true(f->topfd >= 0);
    (void)snprintf(f->store_path, sizeof(f->store_path), "%s/snapshots", f->top);
    mkd(f->topfd, "view");
    mkd(f->topfd, "view/home");
    mkd(f->topfd, "view/home/user");
    mkd(f->topfd, "view/tmp");
    assert_int_equal(write_file_at(f->topfd, "view/home/user/a.txt", "hello", 0644), 0);
    assert_int_equal(write_file_at(f->topfd, "view/tmp/b", "bb", 0600), 0);
    mkd(f->topfd, "other");
    mkd(f->topfd, "other/home");
    mkd(f->topfd, "other/home/user");
    mkd(f->topfd, "other/tmp");
    assert_int_equal(loop_new(&f->loop), 0);
    assert_int_equal(snapstore_open(f->loop, f->store_path, &f->s, NULL), 0);
    f->fo = view(f, "view");
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;
    snapstore_free(f->s);
    fileops_unref(f->fo);
    loop_free(f->loop);
    (void)close(f->topfd);
    (void)rm_rf_at(AT_FDCWD, f->top);
    free(f);
    return 0;
}

static void
take(struct fx *f, const char *name, bool hidden, struct taken *t)
{
    struct snap_spec spec = {
            .name = name,
            .sandbox_id = "sb1",
            .template_id = "base",
            .alias = "py",
            .hidden = hidden,
    };
    char id[SNAPSTORE_ID_MAX + 1];
    memset(t, 0, sizeof(*t));
    assert_int_equal(snapstore_take(f->s, f->fo, &spec, on_taken, t, id), 0);
    uint64_t end = now_msec() + 10000;
    while (!t->done && now_msec() < end)
        (void)loop_run_once(f->loop, 50);
    assert_true(t->done);
    assert_int_equal(t->r, 0);
    assert_string_equal(t->id, id);
}

static void
test_layout_and_info(void **state)
{
    struct fx *f = *state;
    struct taken t;
    struct stat st;
    struct buf b;
    uint64_t before = wall_msec();

    take(f, "ckpt", false, &t);
    uint64_t after = wall_msec();
    assert_int_equal(strncmp(t.id, "snap-", 5), 0);
    assert_true(snapstore_id_ok(t.id));
    assert_true(t.st.entries >= 2); /* a.txt and b at least */
    assert_int_equal(t.st.bytes, 7);

    assert_int_equal(stat(f->store_path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    char p[256];
    (void)snprintf(p, sizeof(p), "snapshots/%s/root/home/user/a.txt", t.id);
    buf_init(&b, 64);
    assert_int_equal(read_file_at(f->topfd, p, 64, &b), 0);
    assert_string_equal(b.data, "hello");
    buf_done(&b);
    (void)snprintf(p, sizeof(p), "snapshots/.tmp-%s", t.id);
    assert_int_equal(faccessat(f->topfd, p, F_OK, 0), -1);

    struct snap_info i;
    assert_int_equal(snapstore_find(f->s, t.id, &i), 0);
    assert_string_equal(i.id, t.id);
    assert_int_equal(i.n_names, 1);
    assert_string_equal(i.names[0], "ckpt");
    assert_true(snap_info_has_name(&i, "ckpt"));
    assert_false(snap_info_has_name(&i, "ckp"));
    assert_string_equal(i.sandbox_id, "sb1");
    assert_string_equal(i.template_id, "base");
    assert_string_equal(i.alias, "py");
    assert_true(i.created_ms >= before && i.created_ms <= after);
    assert_false(i.hidden);
    assert_int_equal(i.bytes, t.st.bytes);
    assert_int_equal(i.entries, t.st.entries);
    snap_info_done(&i);
    snap_info_done(&i); /* twice is harmless */

    /* The exact bytes on disk, in the documented order. */
    (void)snprintf(p, sizeof(p), "snapshots/%s/info.json", t.id);
    buf_init(&b, SNAPSTORE_INFO_MAX);
    assert_int_equal(read_file_at(f->topfd, p, SNAPSTORE_INFO_MAX, &b), 0);
    char want[512];
    (void)snprintf(want, sizeof(want),
                   "{\"snapshotID\":\"%s\",\"names\":[\"ckpt\"],\"sandboxID\":\"sb1\","
                   "\"templateID\":\"base\",\"alias\":\"py\",\"createdAt\":%llu,"
                   "\"hidden\":false,\"bytes\":%llu,\"entries\":%llu}",
                   t.id, (unsigned long long)i.created_ms, (unsigned long long)t.st.bytes,
                   (unsigned long long)t.st.entries);
    assert_string_equal(b.data, want);
    buf_done(&b);
}

static void
test_find_list(void **state)
{
    struct fx *f = *state;
    struct taken a, b, h;
    struct snap_info i;

    take(f, "same", false, &a);
    usleep(2000); /* a later createdAt */
    take(f, "same", false, &b);
    take(f, NULL, true, &h);
    assert_int_equal(snapstore_find(f->s, "same", &i), 0);
    assert_string_equal(i.id, b.id);
    snap_info_done(&i);
    assert_int_equal(snapstore_find(f->s, "nothing-so", &i), -ENOENT);
    assert_int_equal(snapstore_find(f->s, "bad name!", &i), -ENOENT);
    assert_int_equal(snapstore_find(f->s, h.id, &i), 0);
    assert_true(i.hidden);
    assert_int_equal(i.n_names, 0);
    snap_info_done(&i);

    struct snap_info *v = NULL;
    size_t n = 0;
    assert_int_equal(snapstore_list(f->s, &v, &n), 0);
    assert_int_equal(n, 3);
    size_t hidden = 0;
    for (size_t k = 0; k < n; k++)
        hidden += v[k].hidden;
    assert_int_equal(hidden, 1);
    snapstore_list_free(v, n);
}

static void
test_restore(void **state)
{
    struct fx *f = *state;
    struct taken t;
    struct buf b;
    int fd = -1, r = 1;

    take(f, NULL, false, &t);
    assert_int_equal(snapstore_open_root(f->s, "snap-none", &fd, NULL), -ENOENT);
    assert_int_equal(snapstore_open_root(f->s, t.id, &fd, NULL), 0);
    struct fileops *other = view(f, "other");
    assert_int_equal(snapstore_restore(f->s, fd, other, on_restored, &r), 0);
    fileops_unref(other); /* the store holds its own */
    uint64_t end = now_msec() + 10000;
    while (r == 1 && now_msec() < end)
        (void)loop_run_once(f->loop, 50);
    assert_int_equal(r, 0);
    buf_init(&b, 64);
    assert_int_equal(read_file_at(f->topfd, "other/home/user/a.txt", 64, &b), 0);
    assert_string_equal(b.data, "hello");
    buf_done(&b);
}

static void
test_delete_and_sweep(void **state)
{
    struct fx *f = *state;
    struct taken keep, gone, hidden;
    struct snap_info i;
    char p[256];

    take(f, NULL, false, &keep);
    take(f, NULL, false, &gone);
    take(f, NULL, true, &hidden);
    assert_int_equal(snapstore_delete(f->s, gone.id), 0);
    assert_int_equal(snapstore_find(f->s, gone.id, &i), -ENOENT);
    assert_int_equal(snapstore_delete(f->s, gone.id), -ENOENT);
    assert_int_equal(snapstore_delete(f->s, "../view"), -ENOENT);
    assert_int_equal(snapstore_delete(f->s, ".tmp-x"), -ENOENT);
    assert_int_equal(snapstore_delete(f->s, ""), -ENOENT);

    /* What a crash leaves; then a restart. */
    mkd(f->topfd, "snapshots/.tmp-snap-half");
    mkd(f->topfd, "snapshots/.del-snap-old-12345678");
    f->s = snapstore_free(f->s); /* finishes the delete */
    assert_int_equal(snapstore_open(f->loop, f->store_path, &f->s, NULL), 0);
    f->s = snapstore_free(f->s); /* finishes the sweep */
    assert_int_equal(snapstore_open(f->loop, f->store_path, &f->s, NULL), 0);

    struct snap_info *v = NULL;
    size_t n = 0;
    assert_int_equal(snapstore_list(f->s, &v, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(v[0].id, keep.id);
    snapstore_list_free(v, n);
    int fd = open(f->store_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(fd >= 0);
    struct stat st;
    (void)snprintf(p, sizeof(p), "%s", keep.id);
    assert_int_equal(fstatat(fd, p, &st, 0), 0);
    assert_int_equal(fstatat(fd, ".tmp-snap-half", &st, 0), -1);
    assert_int_equal(fstatat(fd, hidden.id, &st, 0), -1);
    assert_int_equal(fstatat(fd, gone.id, &st, 0), -1);
    (void)close(fd);
}

static void
test_names(void **state)
{
    (void)state;
    assert_true(snapstore_id_ok("snap-0123456789abcdef"));
    assert_false(snapstore_id_ok(""));
    assert_false(snapstore_id_ok(".del-x"));
    assert_false(snapstore_id_ok("Snap"));
    assert_false(snapstore_id_ok("a/b"));
    char long_id[SNAPSTORE_ID_MAX + 2];
    memset(long_id, 'a', sizeof(long_id) - 1);
    long_id[sizeof(long_id) - 1] = '\0';
    assert_false(snapstore_id_ok(long_id));
    long_id[SNAPSTORE_ID_MAX] = '\0';
    assert_true(snapstore_id_ok(long_id));
    assert_true(snapstore_name_ok("team/ckpt:v1.2_x-y"));
    assert_false(snapstore_name_ok(""));
    assert_false(snapstore_name_ok("a b"));
    assert_false(snapstore_name_ok("caf\xc3\xa9"));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_layout_and_info, setup, teardown),
            cmocka_unit_test_setup_teardown(test_find_list, setup, teardown),
            cmocka_unit_test_setup_teardown(test_restore, setup, teardown),
            cmocka_unit_test_setup_teardown(test_delete_and_sweep, setup, teardown),
            cmocka_unit_test(test_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
