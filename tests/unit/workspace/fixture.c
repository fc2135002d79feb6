/*
 * fixture.c - the workspace unit tests' shared fixture (fixture.h).
 */
#include "fixture.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "util/cleanup.h"
#include "util/fd.h"
#include "util/timeutil.h"

struct loop *loop;
struct sandbox_host *host;
struct workspaces *ws;

static char top[300];
static int topfd = -EBADF, sbfd = -EBADF;
static struct sync_ignore ignore;

void
run_until(const int *flag)
{
    uint64_t end = now_msec() + 10000;
    while (!*flag && now_msec() < end)
        assert_true(loop_run_once(loop, 50) >= 0);
    assert_true(*flag);
}

int
ws_fixture_setup(void **state)
{
    char store[400], tmp[400];
    (void)state;
    const char *t = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    if (snprintf(top, sizeof(top), "%.200s/abx-test-workspace-XXXXXX", t) >= (int)sizeof(top) ||
        !mkdtemp(top))
        return -1;
    topfd = open(top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (topfd < 0 || mkdirat(topfd, "store", 0700) < 0 || mkdirat(topfd, "tmp", 0700) < 0 ||
        mkdirat(topfd, "sandboxes", 0700) < 0)
        return -1;
    sbfd = openat(topfd, "sandboxes", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    (void)snprintf(store, sizeof(store), "%s/store", top);
    (void)snprintf(tmp, sizeof(tmp), "%s/tmp", top);
    if (sbfd < 0 || loop_new(&loop) < 0 || sync_ignore_default(&ignore) < 0)
        return -1;
    struct sandbox_memory_config mc = {.dir_fd = sbfd, .max_file_bytes = 1 << 20};
    if (sandbox_memory_host_new(loop, &mc, &host) < 0)
        return -1;
    struct workspaces_config c = {
            .store = store,
            .tmp_dir = tmp,
            .workers = 2,
            .mirror_window_ms = 60000,
            .ignore = &ignore,
            .default_limits = {.memory_bytes = 64ull << 20, .cpu_millis = 250, .pids = 64},
            .max_file_bytes = 1 << 20,
            .holder = "test-workspace",
    };
    struct err err = {0};
    if (workspaces_new(loop, host, &c, &ws, &err) < 0) {
        fprintf(stderr, "workspaces_new: %s\n", err.msg);
        return -1;
    }
    return 0;
}

int
ws_fixture_teardown(void **state)
{
    (void)state;
    workspaces_free(ws);
    ws = NULL;
    host = sandbox_host_free(host);
    loop = loop_free(loop);
    sync_ignore_done(&ignore);
    sbfd = safe_close(sbfd);
    topfd = safe_close(topfd);
    return rm_rf_at(AT_FDCWD, top) == 0 ? 0 : -1;
}
