/*
 * test-memory.c - the memory Sandbox (sandbox-memory.h) through sandbox.h,
 * with a real loop and a scripted responder.
 *
 * Covered: create answers on a later turn and records limits; creates made
 * to fail and a kill while creating fail the ready callback; exec runs the
 * responder and the process's output, exit code and signal arrive through
 * a real struct proc; a start error reaches exec's callback; a hanging
 * process meets its deadline (124) or is abandoned by a kill, after which
 * gone fires once and exec fails with ESRCH; the process table; freeze and
 * limits recorded; workspace file operations in the test's directory; the
 * host's counts; calls the implementation lacks fail with EOPNOTSUPP.
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
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "sandbox/sandbox-memory.h"
#include "util/fd.h"
#include "util/timeutil.h"

static struct loop *loop;
static struct sandbox_host *host;
static char top[300];
static int topfd = -EBADF;

/* --- the responder: argv[0] says what to do --- */

static int runs;

static void
respond(void *ud, struct sandbox *sb, const struct sandbox_exec *x, struct sandbox_memory_run *ret)
{
    (void)ud;
    (void)sb;
    runs++;
    const char *cmd = x->argv[0];
    if (!strcmp(cmd, "echo")) {
        ret->out = x->argv[1];
        ret->out_len = strlen(x->argv[1]);
        ret->err = "warn\n";
        ret->err_len = 5;
        ret->exit_code = 3;
    } else if (!strcmp(cmd, "sleep")) {
        ret->out = "started\n";
        ret->out_len = 8;
        ret->hang = true;
    } else if (!strcmp(cmd, "segv")) {
        ret->signal = SIGSEGV;
    } else if (!strcmp(cmd, "huge")) {
        ret->out = "x";
        ret->out_len = SANDBOX_MEMORY_OUTPUT_MAX + 1;
    } else if (strcmp(cmd, "true") != 0) {
        ret->start_error = -ENOENT;
    }
}

/* --- callbacks --- */

struct waiter {
    int ready, ready_r;
    int gone;
    int started, start_r;
    struct proc *p;
};

static void
on_ready(struct sandbox *sb, int r, const struct err *err, void *ud)
{
    struct waiter *w = ud;
    (void)sb;
    (void)err;
    w->ready++;
    w->ready_r = r;
}

static void
on_gone(struct sandbox *sb, void *ud)
{
    struct waiter *w = ud;
    (void)sb;
    w->gone++;
}

static void
on_started(struct sandbox *sb, struct proc *p, int r, const struct err *err, void *ud)
{
    struct waiter *w = ud;
    (void)sb;
    (void)err;
    w->started++;
    w->start_r = r;
    w->p = p;
}

/* Runs the loop until *flag is set (or 5 s pass). */
static void
run_until(const int *flag)
{
    uint64_t end = now_msec() + 5000;
    while (!*flag && now_msec() < end)
        assert_true(loop_run_once(loop, 50) >= 0);
    assert_true(*flag);
}

static void
run_until_exited(struct proc *p)
{
    uint64_t end = now_msec() + 5000;
    while (proc_get_state(p) != PROC_EXITED && now_msec() < end)
        assert_true(loop_run_once(loop, 50) >= 0);
    assert_int_equal(proc_get_state(p), PROC_EXITED);
}

static struct sandbox *
make(const char *id, struct waiter *w)
{
    struct sandbox *sb = NULL;
    struct sandbox_spec spec = {
            .limits = {.memory_bytes = 64 << 20, .cpu_millis = 500, .pids = 32}};
    assert_int_equal(sandbox_create(host, id, &spec, on_ready, w, &sb, NULL), 0);
    assert_int_equal(w->ready, 0); /* never synchronously */
    run_until(&w->ready);
    return sb;
}

static struct proc *
run(struct sandbox *sb, const char *const *argv, uint64_t timeout_ms, struct waiter *w)
{
    struct sandbox_exec x = {.argv = argv, .timeout_ms = timeout_ms};
    struct err err = {0};
    w->started = 0;
    assert_int_equal(sandbox_exec(sb, &x, on_started, w, &err), 0);
    assert_int_equal(w->started, 0);
    run_until(&w->started);
    return w->p;
}

/* stdout and stderr of p, in arrival order, as "1:..." / "2:..." */
static void
output(struct proc *p, char *out, size_t n)
{
    struct proc_reader *r = NULL;
    struct proc_chunk c;
    size_t used = 0;
    assert_int_equal(proc_reader_new(p, 0, NULL, NULL, &r), 0);
    while (proc_reader_peek(r, 4096, &c) == 1) {
        int k = snprintf(out + used, n - used, "%d:%.*s", c.stream, (int)c.len, c.data);
        assert_true(k >= 0 && (size_t)k < n - used);
        used += (size_t)k;
        proc_reader_consume(r, c.len);
    }
    out[used] = '\0';
    proc_reader_free(r);
}

/* --- tests --- */

static void
create_ready_and_limits(void **state)
{
    struct waiter w = {0};
    (void)state;
    struct sandbox *sb = make("a1", &w);
    assert_int_equal(w.ready_r, 0);
    assert_true(sandbox_is_ready(sb));
    assert_string_equal(sandbox_id(sb), "a1");
    assert_int_equal(sandbox_limits(sb)->memory_bytes, 64 << 20);
    assert_int_equal(sandbox_limits(sb)->cpu_millis, 500);
    struct sandbox_limits l = {.memory_bytes = 1 << 20, .pids = 7};
    assert_int_equal(sandbox_set_limits(sb, &l, NULL), 0);
    assert_int_equal(sandbox_limits(sb)->pids, 7);
    assert_int_equal(sandbox_limits(sb)->cpu_millis, 0);
    assert_false(sandbox_get_timings(sb)->from_pool);
    assert_int_equal(sandbox_freeze(sb, true, NULL), 0);
    assert_true(sandbox_memory_frozen(sb));
    struct sandbox_stats st;
    assert_int_equal(sandbox_stats(sb, &st), 0);
    assert_int_equal(st.memory_bytes, 0);
    uint64_t disk;
    assert_int_equal(sandbox_disk_usage(sb, &disk), -EOPNOTSUPP);
    assert_int_equal(sandbox_view_fd(sb), -EOPNOTSUPP);
    assert_false(sandbox_has_view(sb));
    assert_int_equal(sandbox_netns_socket(sb, AF_INET, SOCK_STREAM, NULL), -EOPNOTSUPP);
    assert_int_equal(sandbox_memory_created(host), 1);
    assert_int_equal(sandbox_memory_live(host), 1);
    sandbox_free(sb);
    assert_int_equal(sandbox_memory_live(host), 0);
}

static void
create_failures(void **state)
{
    struct waiter w = {0}, w2 = {0};
    struct sandbox *sb = NULL;
    struct sandbox_spec spec = {0};
    struct err err = {0};
    (void)state;
    sandbox_memory_fail_creates(host, -ENOSPC);
    sb = make("b1", &w);
    assert_int_equal(w.ready_r, -ENOSPC);
    assert_false(sandbox_is_ready(sb));
    sandbox_free(sb);
    sandbox_memory_fail_creates(host, 0);

    /* killed before it was ready: ready fails */
    assert_int_equal(sandbox_create(host, "b2", &spec, on_ready, &w2, &sb, NULL), 0);
    sandbox_kill(sb);
    run_until(&w2.ready);
    assert_int_equal(w2.ready_r, -ESRCH);
    sandbox_free(sb);

    assert_int_equal(sandbox_create(host, "../x", &spec, on_ready, &w2, &sb, &err), -EINVAL);
    assert_int_equal(sandbox_create(host, "", &spec, on_ready, &w2, &sb, &err), -EINVAL);
}

static void
exec_output_and_exit(void **state)
{
    struct waiter w = {0}, pw = {0};
    char out[256];
    (void)state;
    struct sandbox *sb = make("c1", &w);
    const char *echo[] = {"echo", "hello\n", NULL};
    struct proc *p = run(sb, echo, 0, &pw);
    assert_int_equal(pw.start_r, 0);
    assert_non_null(p);
    assert_ptr_equal(sandbox_proc_find(sb, proc_pid(p)), p);
    run_until_exited(p);
    assert_int_equal(proc_get_result(p)->exit_code, 3);
    output(p, out, sizeof(out));
    assert_string_equal(out, "1:hello\n2:warn\n");
    assert_int_equal(sandbox_proc_count(sb, true), 0);
    assert_int_equal(sandbox_proc_count(sb, false), 1);

    const char *segv[] = {"segv", NULL};
    struct proc *q = run(sb, segv, 0, &pw);
    run_until_exited(q);
    assert_int_equal(proc_get_result(q)->signal, SIGSEGV);
    assert_int_equal(proc_get_result(q)->exit_code, 128 + SIGSEGV);
    /* the table, in start order */
    assert_ptr_equal(sandbox_proc_next(sb, NULL), p);
    assert_ptr_equal(sandbox_proc_next(sb, p), q);
    assert_null(sandbox_proc_next(sb, q));

    const char *nope[] = {"nope", NULL};
    assert_null(run(sb, nope, 0, &pw));
    assert_int_equal(pw.start_r, -ENOENT);

    struct err err = {0};
    const char *huge[] = {"huge", NULL};
    struct sandbox_exec x = {.argv = huge};
    assert_int_equal(sandbox_exec(sb, &x, on_started, &pw, &err), -EFBIG);
    const char *empty[] = {"", NULL};
    x.argv = empty;
    assert_int_equal(sandbox_exec(sb, &x, on_started, &pw, &err), -EINVAL);
    assert_int_equal(sandbox_memory_execs(host), 3);
    sandbox_free(sb);
}

static void
deadline_and_kill(void **state)
{
    struct waiter w = {0}, pw = {0};
    char out[256];
    (void)state;
    struct sandbox *sb = make("d1", &w);
    sandbox_set_gone_handler(sb, on_gone, &w);
    const char *sleep_[] = {"sleep", NULL};
    uint64_t t0 = now_msec();
    struct proc *p = run(sb, sleep_, 100, &pw);
    run_until_exited(p);
    assert_true(now_msec() - t0 >= 100);
    assert_true(proc_get_result(p)->timed_out);
    assert_int_equal(proc_get_result(p)->exit_code, 124);
    output(p, out, sizeof(out));
    assert_string_equal(out, "1:started\n");

    /* a kill abandons what still runs, then gone, once */
    struct proc *q = run(sb, sleep_, 0, &pw);
    assert_int_equal(sandbox_proc_count(sb, true), 1);
    sandbox_kill(sb);
    sandbox_kill(sb);
    assert_false(sandbox_is_ready(sb));
    run_until(&w.gone);
    run_until_exited(q);
    for (int i = 0; i < 5; i++)
        (void)loop_run_once(loop, 10);
    assert_int_equal(w.gone, 1);
    struct err err = {0};
    struct sandbox_exec x = {.argv = sleep_};
    assert_int_equal(sandbox_exec(sb, &x, on_started, &pw, &err), -ESRCH);
    struct fileops *fo = NULL;
    assert_int_equal(sandbox_fileops(sb, false, &fo, &err), -ESRCH);
    sandbox_free(sb);
}

/* an exec asked just before a kill fails with ESRCH, not lost */
static void
exec_then_kill(void **state)
{
    struct waiter w = {0}, pw = {0};
    (void)state;
    struct sandbox *sb = make("e1", &w);
    const char *t[] = {"true", NULL};
    struct sandbox_exec x = {.argv = t};
    assert_int_equal(sandbox_exec(sb, &x, on_started, &pw, NULL), 0);
    sandbox_kill(sb);
    run_until(&pw.started);
    assert_int_equal(pw.start_r, -ESRCH);
    assert_null(pw.p);
    sandbox_free(sb);
}

static void
files(void **state)
{
    struct waiter w = {0};
    struct files_stat st;
    struct fileops_upload *up = NULL;
    bool created = false;
    (void)state;
    struct sandbox *sb = make("f1", &w);
    int ws = sandbox_memory_ws_fd(sb);
    assert_true(ws >= 0);
    assert_int_equal(sandbox_mkdir(sb, "src", &created, NULL), 0);
    assert_true(created);
    assert_int_equal(sandbox_upload_begin(sb, "src/a.txt", &up, NULL), 0);
    assert_int_equal(fileops_upload_write(up, "abc", 3, NULL), 0);
    assert_int_equal(fileops_upload_commit(up, &st, &created, NULL), 0);
    assert_true(created);
    assert_int_equal(sandbox_file_stat(sb, "src/a.txt", &st, NULL), 0);
    assert_int_equal(st.size, 3);
    /* it is in the test's directory, under the sandbox's id */
    struct stat hs;
    assert_int_equal(fstatat(topfd, "f1/src/a.txt", &hs, 0), 0);
    assert_int_equal(hs.st_size, 3);
    assert_int_equal(sandbox_rename(sb, "src/a.txt", "b.txt", false, NULL), 0);
    assert_int_equal(sandbox_file_stat(sb, "src/a.txt", &st, NULL), -ENOENT);
    assert_int_equal(sandbox_file_delete(sb, "b.txt", NULL), 0);
    assert_int_equal(sandbox_rmdir(sb, "src", NULL), 0);
    assert_int_equal(fstatat(topfd, "f1/src", &hs, 0), -1);
    sandbox_free(sb);
}

static int
setup(void **state)
{
    (void)state;
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    if (snprintf(top, sizeof(top), "%.200s/abx-test-memory-XXXXXX", tmp) >= (int)sizeof(top) ||
        !mkdtemp(top))
        return -1;
    topfd = open(top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (topfd < 0 || loop_new(&loop) < 0)
        return -1;
    struct sandbox_memory_config c = {.run = respond, .dir_fd = topfd};
    return sandbox_memory_host_new(loop, &c, &host);
}

static int
teardown(void **state)
{
    (void)state;
    host = sandbox_host_free(host);
    loop = loop_free(loop);
    topfd = safe_close(topfd);
    return rm_rf_at(AT_FDCWD, top) == 0 ? 0 : -1;
}

int
main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
            T(create_ready_and_limits), T(create_failures), T(exec_output_and_exit),
            T(deadline_and_kill),       T(exec_then_kill),  T(files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
