/*
 * test-files.c - the routing of workspace file operations (files.h) over
 * the memory Sandbox (sandbox-memory.h) and a SQLite store in a temp dir:
 * no jail, no abxd.
 *
 * Cold: every operation goes to the store and creates no sandbox - put
 * (new, replaced, If-Match by hash, "" = must not exist, the disk bound,
 * an unknown workspace), get and stat (a file is opened, a directory is
 * not), walk (paths, versions, hashes), mkdir (new, again, on a file),
 * rename (the result is the destination), delete (a stale precondition, a
 * directory), rmdir (with what is below). Warm (woken the way exec wakes,
 * workspaces_ensure()): every operation goes to the live sandbox and the
 * store lags behind until a close mirrors it; preconditions by the
 * sandbox's version and by content hash; a request made while the
 * workspace wakes waits and goes warm; no file operation creates a
 * sandbox.
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

#include "fixture.h"
#include "util/cleanup.h"
#include "util/fd.h"
#include "util/timeutil.h"
#include "workspace/files.h"
#include "workspace/workspace.h"

/* What a callback got, copied out of the result. */
struct got {
    int done, r;
    struct workspace_file_result res; /* fd taken, entries taken */
};

static void
on_result(void *ud, struct workspace_file_result *res)
{
    struct got *g = ud;
    g->done++;
    g->r = res->r;
    g->res = *res;
    res->fd = -EBADF;
    res->entries = NULL;
    res->n_entries = 0;
}

static void
got_done(struct got *g)
{
    safe_close(g->res.fd);
    for (size_t i = 0; i < g->res.n_entries; i++) {
        free(g->res.entries[i].path);
        free(g->res.entries[i].target);
    }
    free(g->res.entries);
    *g = (struct got){0};
}

static void
new_workspace(const char *id, uint64_t disk_bytes)
{
    struct store_ws rec = {.disk_bytes = disk_bytes, .created_ms = wall_msec()};
    (void)snprintf(rec.id, sizeof(rec.id), "%s", id);
    assert_int_equal(store_ws_create(workspaces_loop_store(ws), &rec, NULL), 0);
}

/* The workspace is still cold and nothing woke. */
static void
still_cold(const char *id)
{
    assert_int_equal(workspaces_state(ws, id), WS_COLD);
    assert_null(workspaces_peek(ws, id));
    assert_int_equal(workspaces_warm_count(ws), 0);
    assert_int_equal(sandbox_memory_created(host), 0);
}

static void
put(struct got *g, const struct workspace_file_req *q, const char *data)
{
    struct store_writer *wr = NULL;
    assert_int_equal(store_writer_begin(workspaces_loop_store(ws), 1 << 20, &wr, NULL), 0);
    assert_int_equal(store_writer_write(wr, data, strlen(data), NULL), 0);
    workspace_file_put(ws, q, wr, on_result, g);
    run_until(&g->done);
}

static void
call(struct got *g,
     void (*fn)(struct workspaces *, const struct workspace_file_req *, workspace_file_fn, void *),
     const struct workspace_file_req *q)
{
    fn(ws, q, on_result, g);
    run_until(&g->done);
}

static void
fd_is(int fd, const char *want)
{
    char buf[256];
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    assert_true(n >= 0);
    buf[n] = '\0';
    assert_string_equal(buf, want);
}

static void
cold_put_get_stat(void **state)
{
    (void)state;
    struct got g = {0};
    new_workspace("c1", 0);

    /* a new file: 201's created, the store's entry */
    put(&g, &(struct workspace_file_req){.ws = "c1", .rel = "notes/a.txt"}, "one\n");
    assert_int_equal(g.r, 0);
    assert_false(g.res.warm);
    assert_true(g.res.created);
    assert_string_equal(g.res.e.path, "notes/a.txt");
    assert_int_equal(g.res.e.size, 4);
    assert_int_equal(strlen(g.res.e.hash), STORE_HASH_LEN);
    char hash1[STORE_HASH_LEN + 1];
    memcpy(hash1, g.res.e.hash, sizeof(hash1));
    got_done(&g);
    still_cold("c1");

    /* replaced, with the version we had: created is false */
    put(&g, &(struct workspace_file_req){.ws = "c1", .rel = "notes/a.txt", .match = hash1},
        "two!\n");
    assert_int_equal(g.r, 0);
    assert_false(g.res.created);
    assert_string_not_equal(g.res.e.hash, hash1);
    got_done(&g);

    /* a stale version, and "must not exist" on a file that does */
    put(&g, &(struct workspace_file_req){.ws = "c1", .rel = "notes/a.txt", .match = hash1}, "x");
    assert_int_equal(g.r, -ESTALE);
    got_done(&g);
    put(&g, &(struct workspace_file_req){.ws = "c1", .rel = "notes/a.txt", .match = ""}, "x");
    assert_int_equal(g.r, -ESTALE);
    got_done(&g);

    /* get: an fd on the store's bytes, and the entry to verify them by */
    call(&g, workspace_file_get, &(struct workspace_file_req){.ws = "c1", .rel = "notes/a.txt"});
    assert_int_equal(g.r, 0);
    assert_false(g.res.warm);
    assert_true(g.res.fd >= 0);
    assert_int_equal(g.res.e.type, STORE_FILE);
    assert_int_equal(g.res.e.size, 5);
    fd_is(g.res.fd, "two!\n");
    got_done(&g);

    /* stat: a file is opened too (HEAD finds a damaged blob), a dir not */
    call(&g, workspace_file_stat, &(struct workspace_file_req){.ws = "c1", .rel = "notes/a.txt"});
    assert_int_equal(g.r, 0);
    assert_true(g.res.fd >= 0);
    got_done(&g);
    call(&g, workspace_file_stat, &(struct workspace_file_req){.ws = "c1", .rel = "notes"});
    assert_int_equal(g.r, 0);
    assert_int_equal(g.res.e.type, STORE_DIR);
    assert_true(g.res.fd < 0);
    got_done(&g);
    call(&g, workspace_file_get, &(struct workspace_file_req){.ws = "c1", .rel = "nope"});
    assert_int_equal(g.r, -ENOENT);
    got_done(&g);
    still_cold("c1");
}

static void
cold_put_bounds(void **state)
{
    (void)state;
    struct got g = {0};
    char big[3000];
    memset(big, 'b', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';

    /* no such workspace: nothing is written */
    put(&g, &(struct workspace_file_req){.ws = "nope", .rel = "a"}, "x");
    assert_int_equal(g.r, -ENOENT);
    got_done(&g);

    /* the record's bound (disk_bytes), only where the host bounds disks */
    new_workspace("c2", 4096);
    put(&g, &(struct workspace_file_req){.ws = "c2", .rel = "a", .default_disk_bytes = 1 << 30},
        big);
    assert_int_equal(g.r, 0);
    got_done(&g);
    /* replacing a file counts only the new size */
    put(&g, &(struct workspace_file_req){.ws = "c2", .rel = "a", .default_disk_bytes = 1 << 30},
        big);
    assert_int_equal(g.r, 0);
    got_done(&g);
    put(&g, &(struct workspace_file_req){.ws = "c2", .rel = "b", .default_disk_bytes = 1 << 30},
        big);
    assert_int_equal(g.r, -EDQUOT);
    assert_non_null(strstr(g.res.err.msg, "does not fit"));
    got_done(&g);
    put(&g, &(struct workspace_file_req){.ws = "c2", .rel = "b"}, big);
    assert_int_equal(g.r, 0); /* the host bounds no disks */
    got_done(&g);
    still_cold("c2");
}

static void
cold_walk_mkdir_rename(void **state)
{
    (void)state;
    struct got g = {0};
    new_workspace("c3", 0);
    put(&g, &(struct workspace_file_req){.ws = "c3", .rel = "d/f"}, "data");
    assert_int_equal(g.r, 0);
    char hash[STORE_HASH_LEN + 1];
    memcpy(hash, g.res.e.hash, sizeof(hash));
    got_done(&g);

    call(&g, workspace_file_mkdir, &(struct workspace_file_req){.ws = "c3", .rel = "e"});
    assert_int_equal(g.r, 0);
    assert_true(g.res.created);
    got_done(&g);
    call(&g, workspace_file_mkdir, &(struct workspace_file_req){.ws = "c3", .rel = "e"});
    assert_int_equal(g.r, 0);
    assert_false(g.res.created);
    got_done(&g);
    /* a file at the path is a conflict, as in a sandbox */
    call(&g, workspace_file_mkdir, &(struct workspace_file_req){.ws = "c3", .rel = "d/f"});
    assert_int_equal(g.r, -EEXIST);
    got_done(&g);

    /* walk: everything below, "/"-rooted, hashes as versions */
    call(&g, workspace_file_walk, &(struct workspace_file_req){.ws = "c3", .rel = "."});
    assert_int_equal(g.r, 0);
    assert_false(g.res.warm);
    assert_int_equal(g.res.n_entries, 3);
    const struct workspace_file_entry *e = g.res.entries;
    assert_string_equal(e[0].path, "/d");
    assert_int_equal(e[0].type, FILES_DIR);
    assert_string_equal(e[0].version, "");
    assert_string_equal(e[0].hash, "");
    assert_string_equal(e[1].path, "/d/f");
    assert_int_equal(e[1].type, FILES_FILE);
    assert_int_equal(e[1].size, 4);
    assert_string_equal(e[1].version, hash);
    assert_string_equal(e[1].hash, hash);
    assert_null(e[1].target);
    assert_string_equal(e[2].path, "/e");
    got_done(&g);

    /* rename: the result is the destination's entry */
    call(&g, workspace_file_rename,
         &(struct workspace_file_req){.ws = "c3", .rel = "d/f", .rel2 = "e/g"});
    assert_int_equal(g.r, 0);
    assert_string_equal(g.res.e.path, "e/g");
    assert_string_equal(g.res.e.hash, hash);
    got_done(&g);
    put(&g, &(struct workspace_file_req){.ws = "c3", .rel = "h"}, "h");
    got_done(&g);
    call(&g, workspace_file_rename,
         &(struct workspace_file_req){.ws = "c3", .rel = "h", .rel2 = "e/g"});
    assert_int_equal(g.r, -EEXIST);
    got_done(&g);
    call(&g, workspace_file_rename,
         &(struct workspace_file_req){.ws = "c3", .rel = "h", .rel2 = "e/g", .overwrite = true});
    assert_int_equal(g.r, 0);
    assert_int_equal(g.res.e.size, 1);
    got_done(&g);
    still_cold("c3");
}

static void
cold_delete_rmdir(void **state)
{
    (void)state;
    struct got g = {0};
    struct store_entry se;
    new_workspace("c4", 0);
    put(&g, &(struct workspace_file_req){.ws = "c4", .rel = "d/f"}, "data");
    got_done(&g);

    put(&g, &(struct workspace_file_req){.ws = "c4", .rel = "d/e/g"}, "g");
    got_done(&g);

    call(&g, workspace_file_delete, &(struct workspace_file_req){.ws = "c4", .rel = "d"});
    assert_int_equal(g.r, -EISDIR);
    got_done(&g);
    call(&g, workspace_file_delete,
         &(struct workspace_file_req){
                 .ws = "c4",
                 .rel = "d/f",
                 .match = "0000000000000000000000000000000000000000000000000000000000000000"});
    assert_int_equal(g.r, -ESTALE);
    got_done(&g);
    call(&g, workspace_file_delete, &(struct workspace_file_req){.ws = "c4", .rel = "d/f"});
    assert_int_equal(g.r, 0);
    got_done(&g);
    assert_int_equal(store_stat(workspaces_loop_store(ws), "c4", "d/f", &se, NULL), -ENOENT);
    /* rmdir takes what is below with it */
    call(&g, workspace_file_rmdir, &(struct workspace_file_req){.ws = "c4", .rel = "d"});
    assert_int_equal(g.r, 0);
    got_done(&g);
    assert_int_equal(store_stat(workspaces_loop_store(ws), "c4", "d", &se, NULL), -ENOENT);
    assert_int_equal(store_stat(workspaces_loop_store(ws), "c4", "d/e/g", &se, NULL), -ENOENT);
    still_cold("c4");
}

static void
on_ready(void *ud, int r, const struct err *err, struct sandbox *sb)
{
    struct got *g = ud;
    (void)err;
    (void)sb;
    g->done++;
    g->r = r;
}

static void
on_closed(void *ud, int r, const struct err *err, const struct sync_report *rep)
{
    struct got *g = ud;
    (void)err;
    (void)rep;
    g->done++;
    g->r = r;
}

/* Wakes the workspace as exec does; its sandbox. */
static struct sandbox *
wake(const char *id)
{
    struct got g = {0};
    workspaces_ensure(ws, id, on_ready, &g);
    run_until(&g.done);
    assert_int_equal(g.r, 0);
    struct sandbox *sb = workspaces_peek(ws, id);
    assert_non_null(sb);
    return sb;
}

static void
sandbox_file_is(struct sandbox *sb, const char *path, const char *want)
{
    _cleanup_close_ int fd = openat(sandbox_memory_ws_fd(sb), path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    fd_is(fd, want);
}

static void
warm_goes_to_the_sandbox(void **state)
{
    (void)state;
    struct got g = {0};
    struct store_entry se;
    struct store *st = workspaces_loop_store(ws);
    new_workspace("w1", 0);
    put(&g, &(struct workspace_file_req){.ws = "w1", .rel = "a.txt"}, "stored\n");
    assert_int_equal(g.r, 0);
    got_done(&g);
    still_cold("w1");

    struct sandbox *sb = wake("w1");
    assert_int_equal(sandbox_memory_created(host), 1);

    /* get: the sandbox's file (restored from the store), its version */
    call(&g, workspace_file_get, &(struct workspace_file_req){.ws = "w1", .rel = "a.txt"});
    assert_int_equal(g.r, 0);
    assert_true(g.res.warm);
    assert_true(g.res.fd >= 0);
    assert_int_equal(g.res.st.type, FILES_FILE);
    assert_int_equal(strlen(g.res.st.version), FILES_VERSION_LEN);
    fd_is(g.res.fd, "stored\n");
    got_done(&g);

    /* put: into the sandbox, hashed; the store does not have it yet */
    put(&g, &(struct workspace_file_req){.ws = "w1", .rel = "b.txt"}, "warm\n");
    assert_int_equal(g.r, 0);
    assert_true(g.res.warm);
    assert_true(g.res.created);
    assert_int_equal(strlen(g.res.hash), STORE_HASH_LEN);
    char hash[STORE_HASH_LEN + 1], version[FILES_VERSION_LEN + 1];
    memcpy(hash, g.res.hash, sizeof(hash));
    memcpy(version, g.res.st.version, sizeof(version));
    got_done(&g);
    sandbox_file_is(sb, "b.txt", "warm\n");
    assert_int_equal(store_stat(st, "w1", "b.txt", &se, NULL), -ENOENT);

    /* preconditions: stale, by content hash, by the sandbox's version */
    put(&g, &(struct workspace_file_req){.ws = "w1", .rel = "b.txt", .match = "0123456789abcdef"},
        "x");
    assert_int_equal(g.r, -ESTALE);
    got_done(&g);
    put(&g, &(struct workspace_file_req){.ws = "w1", .rel = "b.txt", .match = ""}, "x");
    assert_int_equal(g.r, -ESTALE);
    got_done(&g);
    put(&g, &(struct workspace_file_req){.ws = "w1", .rel = "b.txt", .match = hash}, "by hash\n");
    assert_int_equal(g.r, 0);
    assert_false(g.res.created);
    memcpy(version, g.res.st.version, sizeof(version));
    got_done(&g);
    put(&g, &(struct workspace_file_req){.ws = "w1", .rel = "b.txt", .match = version},
        "by version\n");
    assert_int_equal(g.r, 0);
    got_done(&g);
    sandbox_file_is(sb, "b.txt", "by version\n");

    /* what a process writes is there at once, not in the store */
    _cleanup_close_ int fd = openat(sandbox_memory_ws_fd(sb), "c.txt",
                                    O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "proc\n", 5), 5);

    /* stat of a directory: no fd; mkdir, walk, rename */
    call(&g, workspace_file_mkdir, &(struct workspace_file_req){.ws = "w1", .rel = "d"});
    assert_int_equal(g.r, 0);
    assert_true(g.res.warm);
    assert_true(g.res.created);
    got_done(&g);
    call(&g, workspace_file_stat, &(struct workspace_file_req){.ws = "w1", .rel = "d"});
    assert_int_equal(g.r, 0);
    assert_int_equal(g.res.st.type, FILES_DIR);
    assert_true(g.res.fd < 0);
    got_done(&g);
    call(&g, workspace_file_rename,
         &(struct workspace_file_req){.ws = "w1", .rel = "b.txt", .rel2 = "d/b.txt"});
    assert_int_equal(g.r, 0);
    assert_true(g.res.warm);
    assert_int_equal(g.res.st.size, 11);
    got_done(&g);
    call(&g, workspace_file_walk, &(struct workspace_file_req){.ws = "w1", .rel = "."});
    assert_int_equal(g.r, 0);
    assert_true(g.res.warm);
    assert_int_equal(g.res.n_entries, 4);
    const char *paths[] = {"/a.txt", "/c.txt", "/d", "/d/b.txt"};
    for (size_t i = 0; i < 4; i++) {
        assert_string_equal(g.res.entries[i].path, paths[i]);
        assert_int_equal(strlen(g.res.entries[i].version), FILES_VERSION_LEN);
        assert_string_equal(g.res.entries[i].hash, "");
    }
    got_done(&g);
    assert_int_equal(store_stat(st, "w1", "d", &se, NULL), -ENOENT);

    /* delete: a stale precondition (on a worker), then without */
    call(&g, workspace_file_delete,
         &(struct workspace_file_req){.ws = "w1", .rel = "c.txt", .match = "0123456789abcdef"});
    assert_int_equal(g.r, -ESTALE);
    got_done(&g);
    call(&g, workspace_file_delete, &(struct workspace_file_req){.ws = "w1", .rel = "a.txt"});
    assert_int_equal(g.r, 0);
    got_done(&g);
    assert_int_equal(store_stat(st, "w1", "a.txt", &se, NULL), 0); /* until the mirror */

    /* close mirrors; cold again, the store answers */
    workspaces_close(ws, "w1", on_closed, &g);
    run_until(&g.done);
    assert_int_equal(g.r, 0);
    got_done(&g);
    call(&g, workspace_file_get, &(struct workspace_file_req){.ws = "w1", .rel = "d/b.txt"});
    assert_int_equal(g.r, 0);
    assert_false(g.res.warm);
    fd_is(g.res.fd, "by version\n");
    got_done(&g);
    call(&g, workspace_file_get, &(struct workspace_file_req){.ws = "w1", .rel = "a.txt"});
    assert_int_equal(g.r, -ENOENT);
    got_done(&g);
    call(&g, workspace_file_rmdir, &(struct workspace_file_req){.ws = "w1", .rel = "d"});
    assert_int_equal(g.r, 0);
    assert_false(g.res.warm);
    got_done(&g);
    assert_int_equal(sandbox_memory_created(host), 1); /* file calls made none */
    assert_int_equal(sandbox_memory_live(host), 0);
}

static void
waking_then_warm(void **state)
{
    (void)state;
    struct got woke = {0}, g = {0};
    new_workspace("w2", 0);
    put(&g, &(struct workspace_file_req){.ws = "w2", .rel = "a.txt"}, "a\n");
    got_done(&g);

    /* asked while the wake is under way: it waits, then goes warm */
    workspaces_ensure(ws, "w2", on_ready, &woke);
    assert_int_equal(workspaces_state(ws, "w2"), WS_WAKING);
    workspace_file_get(ws, &(struct workspace_file_req){.ws = "w2", .rel = "a.txt"}, on_result, &g);
    assert_int_equal(g.done, 0);
    run_until(&g.done);
    assert_int_equal(woke.done, 1);
    assert_int_equal(g.r, 0);
    assert_true(g.res.warm);
    fd_is(g.res.fd, "a\n");
    got_done(&g);
    assert_int_equal(sandbox_memory_created(host), 1);
    workspaces_close(ws, "w2", on_closed, &g);
    run_until(&g.done);
    got_done(&g);
}

int
main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, ws_fixture_setup, ws_fixture_teardown)
    const struct CMUnitTest tests[] = {
            T(cold_put_get_stat), T(cold_put_bounds),          T(cold_walk_mkdir_rename),
            T(cold_delete_rmdir), T(warm_goes_to_the_sandbox), T(waking_then_warm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
