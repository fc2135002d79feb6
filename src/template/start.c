/*
 * start.c - start_cmd and ready_cmd of a template (see start.h). Not how
 * a surface answers for the sandbox, and no logging: outcomes go to the
 * caller's callbacks.
 */
#include "template/start.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "sandbox/proc.h"
#include "sandbox/sandbox.h"
#include "template/template.h"
#include "util/buf.h"
#include "util/loop.h"
#include "util/timeutil.h"

struct ready_op {
    const struct template_ready_ops *ops;
    void *ud;
    const char *cmd;
    uint64_t deadline_ms, total_ms;
    struct loop_timer *timer;
    struct proc_reader *reader;
    struct buf out; /* the last try's output */
    unsigned tries;
};

static void ready_poll(struct ready_op *op);

static void
ready_free(struct ready_op *op)
{
    proc_reader_free(op->reader);
    loop_timer_free(op->timer);
    buf_done(&op->out);
    free(op);
}

static void
ready_end(struct ready_op *op, int r, const char *why)
{
    struct template_ready res = {
            .r = r,
            .why = why,
            .output = op->out.data ? op->out.data : "",
            .output_len = op->out.len,
            .total_ms = op->total_ms,
    };
    op->ops->done(op->ud, &res);
    ready_free(op);
}

static void
ready_wake(void *ud)
{
    struct ready_op *op = ud;
    for (;;) {
        struct proc_chunk ch;
        int r = proc_reader_peek(op->reader, 65536, &ch);
        if (r == 1) {
            size_t room = TEMPLATE_READY_OUTPUT_MAX - op->out.len;
            if (ch.stream && room)
                (void)buf_put(&op->out, ch.data, ch.len < room ? ch.len : room);
            proc_reader_consume(op->reader, ch.len);
            continue;
        }
        if (r != -ENODATA)
            return;
        struct proc *p = proc_reader_proc(op->reader);
        const struct proc_result *res = p ? proc_get_result(p) : NULL;
        proc_reader_free(op->reader);
        op->reader = NULL;
        if (res && res->exit_code == 0) {
            ready_end(op, 0, NULL);
            return;
        }
        if (now_msec() >= op->deadline_ms) {
            ready_end(op, res ? -ETIMEDOUT : -ESRCH, res ? "it kept failing" : "the sandbox ended");
            return;
        }
        (void)loop_timer_arm(op->timer, now_msec() + TEMPLATE_READY_PAUSE_MS);
        return;
    }
}

static void
ready_started(struct sandbox *sb, struct proc *p, int r, const struct err *err, void *ud)
{
    struct ready_op *op = ud;
    (void)sb;
    if (r < 0 || proc_reader_new(p, 0, ready_wake, op, &op->reader) < 0) {
        ready_end(op, -ETIMEDOUT, err && err->msg[0] ? err->msg : "it could not start");
        return;
    }
    ready_wake(op);
}

static void
ready_poll(struct ready_op *op)
{
    struct sandbox *sb = op->ops->find(op->ud);
    if (!sb) {
        ready_end(op, -ESRCH, "the sandbox ended");
        return;
    }
    const char *argv[] = {"/bin/sh", "-c", op->cmd, NULL};
    struct sandbox_exec x = {.argv = argv, .timeout_ms = TEMPLATE_READY_TRY_MS};
    buf_reset(&op->out);
    op->tries++;
    struct err err = {0};
    if (sandbox_exec(sb, &x, ready_started, op, &err) < 0)
        ready_end(op, -ETIMEDOUT, err.msg[0] ? err.msg : "it could not start");
}

static void
on_ready_timer(struct loop_timer *t, void *ud)
{
    (void)t;
    ready_poll(ud);
}

static void
start_started(struct sandbox *sb, struct proc *p, int r, const struct err *err, void *ud)
{
    const struct template_start_ops *ops = ud;
    (void)p;
    if (r < 0 && ops && ops->failed)
        ops->failed(sb, err ? err->msg : "");
}

void
template_start_cmd(struct sandbox *sb, const struct template *t,
                   const struct template_start_ops *ops)
{
    if (!t || !t->start_cmd)
        return;
    const char *argv[] = {"/bin/sh", "-c", t->start_cmd, NULL};
    struct sandbox_exec x = {.argv = argv, .background = true};
    struct err err = {0};
    if (sandbox_exec(sb, &x, start_started, (void *)(uintptr_t)ops, &err) < 0 && ops && ops->failed)
        ops->failed(sb, err.msg);
}

int
template_poll_ready(struct loop *loop, const struct template *t, uint64_t total_ms,
                    const struct template_ready_ops *ops, void *ud)
{
    struct ready_op *op = calloc(1, sizeof(*op));
    if (!op || loop_timer_new(loop, on_ready_timer, op, &op->timer) < 0) {
        free(op);
        return -ENOMEM;
    }
    op->ops = ops;
    op->ud = ud;
    op->cmd = t->ready_cmd;
    op->total_ms = total_ms ? total_ms : TEMPLATE_READY_TOTAL_MS;
    op->deadline_ms = now_msec() + op->total_ms;
    buf_init(&op->out, TEMPLATE_READY_OUTPUT_MAX + 1);
    ready_poll(op);
    return 0;
}
