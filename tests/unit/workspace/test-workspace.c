/*
 * test-workspace.c - the workspace lifecycle over the memory Sandbox
 * (sandbox-memory.h) and a SQLite store in a temp dir: no jail, no abxd.
 *
 * Covered: a cold workspace has no sandbox and nothing wakes it but
 * workspaces_ensure() (what exec calls); the wake creates a sandbox with
 * the workspace record's resources and restores the store's files into
 * it; while warm, workspaces_peek() hands out that sandbox, so file
 * operations go to it, not to the store; close mirrors what changed in the
 * sandbox into the store, kills the sandbox and leaves the workspace cold;
 * the next wake restores into a new sandbox; a sandbox that dies leaves
 * the workspace cold, and its flush and close fail until the next wake
 * (what it wrote since its last mirror is lost); a wake whose sandbox cannot be created fails.
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
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "fixture.h"
#include "util/fd.h"
#include "util/timeutil.h"
#include "workspace/workspace.h"

struct result {
    int done, r;
    struct sandbox *sb;
};

static void
on_ready(void *ud, int r, const struct err *err, struct sandbox *sb)
{
    struct result *res = ud;
    (void)err;
    res->done++;
    res->r = r;
    res->sb = sb;
}

static void
on_result(void *ud, int r, const struct err *err, const struct sync_report *rep)
{
    struct result *res = ud;
    (void)err;
    (void)rep;
    res->done++;
    res->r = r;
}

static void
store_put(const char *id, const char *path, const char *data)
{
    struct err err = {0};
    _cleanup_close_ int fd = memfd_create("data", MFD_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, strlen(data)), (ssize_t)strlen(data));
    assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
    assert_int_equal(
            store_write(workspaces_loop_store(ws), id, path, fd, 0644, 0, NULL, NULL, &err), 0);
}

static void
new_workspace(const char *id, uint64_t memory_bytes)
{
    struct store_ws rec = {.memory_bytes = memory_bytes, .created_ms = wall_msec()};
    (void)snprintf(rec.id, sizeof(rec.id), "%s", id);
    assert_int_equal(store_ws_create(workspaces_loop_store(ws), &rec, NULL), 0);
}

static struct sandbox *
wake(const char *id)
{
    struct result res = {0};
    workspaces_ensure(ws, id, on_ready, &res);
    run_until(&res.done);
    assert_int_equal(res.r, 0);
    assert_non_null(res.sb);
    return res.sb;
}

static void
ws_file_is(struct sandbox *sb, const char *path, const char *want)
{
    char buf[256];
    _cleanup_close_ int fd = openat(sandbox_memory_ws_fd(sb), path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    assert_true(n >= 0);
    buf[n] = '\0';
    assert_string_equal(buf, want);
}

static void
cold_until_exec_then_warm(void **state)
{
    (void)state;
    new_workspace("w1", 256ull << 20);
    store_put("w1", "notes/a.txt", "from the store\n");

    /* cold: no sandbox, and looking does not make one */
    assert_int_equal(workspaces_state(ws, "w1"), WS_COLD);
    assert_null(workspaces_peek(ws, "w1"));
    for (int i = 0; i < 5; i++)
        (void)loop_run_once(loop, 10);
    assert_int_equal(sandbox_memory_created(host), 0);

    /* exec wakes it: a sandbox with the record's resources, restored */
    struct sandbox *sb = wake("w1");
    assert_int_equal(workspaces_state(ws, "w1"), WS_WARM);
    assert_int_equal(sandbox_memory_created(host), 1);
    assert_int_equal(sandbox_limits(sb)->memory_bytes, 256ull << 20);
    assert_int_equal(sandbox_limits(sb)->cpu_millis, 250); /* the default */
    ws_file_is(sb, "notes/a.txt", "from the store\n");

    /* warm: file operations go to the sandbox, the store lags behind */
    assert_ptr_equal(workspaces_peek(ws, "w1"), sb);
    struct fileops_upload *up = NULL;
    struct files_stat st;
    bool created;
    assert_int_equal(sandbox_upload_begin(sb, "b.txt", &up, NULL), 0);
    assert_int_equal(fileops_upload_write(up, "warm\n", 5, NULL), 0);
    assert_int_equal(fileops_upload_commit(up, &st, &created, NULL), 0);
    struct store_entry e;
    assert_int_equal(store_stat(workspaces_loop_store(ws), "w1", "b.txt", &e, NULL), -ENOENT);

    /* close: mirrored into the store, the sandbox goes, cold again */
    struct result res = {0};
    workspaces_close(ws, "w1", on_result, &res);
    run_until(&res.done);
    assert_int_equal(res.r, 0);
    assert_int_equal(workspaces_state(ws, "w1"), WS_COLD);
    assert_null(workspaces_peek(ws, "w1"));
    assert_int_equal(sandbox_memory_live(host), 0);
    assert_int_equal(store_stat(workspaces_loop_store(ws), "w1", "b.txt", &e, NULL), 0);
    assert_int_equal(e.size, 5);

    /* the next exec restores both into a new sandbox */
    sb = wake("w1");
    assert_int_equal(sandbox_memory_created(host), 2);
    ws_file_is(sb, "b.txt", "warm\n");
    ws_file_is(sb, "notes/a.txt", "from the store\n");
    res.done = 0;
    workspaces_close(ws, "w1", on_result, &res);
    run_until(&res.done);
}

static void
dead_sandbox_is_cold(void **state)
{
    (void)state;
    new_workspace("w2", 0);
    struct sandbox *sb = wake("w2");
    assert_int_equal(workspaces_warm_count(ws), 1);
    sandbox_kill(sb); /* as if it died */
    uint64_t end = now_msec() + 5000;
    while (workspaces_state(ws, "w2") != WS_COLD && now_msec() < end)
        assert_true(loop_run_once(loop, 50) >= 0);
    assert_int_equal(workspaces_state(ws, "w2"), WS_COLD);
    assert_int_equal(workspaces_warm_count(ws), 0);
    assert_int_equal(sandbox_memory_live(host), 0);

    /* what it wrote since its last mirror is gone: flush and close say
     * so, not "saved", until the next wake */
    struct err err = {0};
    assert_int_equal(workspaces_lost(ws, "w2", &err), -ENOTRECOVERABLE);
    assert_non_null(strstr(err.msg, "lost its sandbox"));
    struct result res = {0};
    workspaces_flush(ws, "w2", on_result, &res);
    run_until(&res.done);
    assert_int_equal(res.r, -ENOTRECOVERABLE);
    res.done = 0;
    workspaces_close(ws, "w2", on_result, &res);
    run_until(&res.done);
    assert_int_equal(res.r, -ENOTRECOVERABLE);
    (void)wake("w2");
    assert_int_equal(workspaces_lost(ws, "w2", NULL), 0);
    res.done = 0;
    workspaces_flush(ws, "w2", on_result, &res);
    run_until(&res.done);
    assert_int_equal(res.r, 0);
    res.done = 0;
    workspaces_close(ws, "w2", on_result, &res);
    run_until(&res.done);
    assert_int_equal(res.r, 0);
    /* a clean close is no loss */
    assert_int_equal(workspaces_lost(ws, "w2", NULL), 0);
    res.done = 0;
    workspaces_flush(ws, "w2", on_result, &res);
    run_until(&res.done);
    assert_int_equal(res.r, 0);
}

static void
wake_fails(void **state)
{
    (void)state;
    new_workspace("w3", 0);
    sandbox_memory_fail_creates(host, -ENOSPC);
    struct result res = {0};
    workspaces_ensure(ws, "w3", on_ready, &res);
    run_until(&res.done);
    assert_int_equal(res.r, -ENOSPC);
    assert_int_equal(workspaces_state(ws, "w3"), WS_COLD);
    sandbox_memory_fail_creates(host, 0);
    /* and an unknown workspace does not wake at all */
    res.done = 0;
    workspaces_ensure(ws, "nope", on_ready, &res);
    run_until(&res.done);
    assert_int_equal(res.r, -ENOENT);
}

int
main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, ws_fixture_setup, ws_fixture_teardown)
    const struct CMUnitTest tests[] = {
            T(cold_until_exec_then_warm),
            T(dead_sandbox_is_cold),
            T(wake_fails),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
