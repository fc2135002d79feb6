/*
 * start.h - a template's start_cmd and ready_cmd in a sandbox that just
 * became ready: start_cmd runs in the background (its failure is only
 * reported); ready_cmd, when the template has one, is polled - run with a
 * deadline of TEMPLATE_READY_TRY_MS, again TEMPLATE_READY_PAUSE_MS after
 * each failure - until it exits 0 or the ready deadline passes. What the
 * sandbox is to its owner (an answer to send, an entry to kill) is the
 * caller's.
 *
 * Runs on the loop's thread. The sandbox may go while ready_cmd is polled:
 * ops->find() says whether it is still there before each try. Nothing here
 * logs.
 */
#ifndef ABX_TEMPLATE_START_H
#define ABX_TEMPLATE_START_H

#include <stddef.h>
#include <stdint.h>

struct loop;
struct sandbox;
struct template;

#define TEMPLATE_READY_TOTAL_MS   60000 /* ready_cmd's deadline, by default */
#define TEMPLATE_READY_TRY_MS     10000 /* one try's deadline */
#define TEMPLATE_READY_PAUSE_MS   200   /* between tries */
#define TEMPLATE_READY_OUTPUT_MAX 4096  /* bytes of the last failed try kept */

/* How the polling ended. */
struct template_ready {
    int r;              /* 0 ready, -ETIMEDOUT not ready in time, -ESRCH the sandbox went */
    const char *why;    /* when r < 0: what happened ("it kept failing", ...) */
    const char *output; /* the last try's output (stdout and stderr), output_len bytes */
    size_t output_len;
    uint64_t total_ms; /* the deadline that applied */
};

struct template_start_ops {
    /* start_cmd could not start: now, or later (then after the caller's
     * request may be gone, hence no ud). */
    void (*failed)(struct sandbox *sb, const char *msg);
};

/* Starts t's start_cmd (if any) in sb in the background. ops (static: it
 * must outlive the command's start) may be NULL. */
void template_start_cmd(struct sandbox *sb, const struct template *t,
                        const struct template_start_ops *ops);

struct template_ready_ops {
    /* The sandbox, or NULL once it is gone. */
    struct sandbox *(*find)(void *ud);
    /* The polling ended; ud is not used again. */
    void (*done)(void *ud, const struct template_ready *res);
};

/* Polls t's ready_cmd (t must have one; t must outlive the polling) until
 * it succeeds or total_ms (0 = TEMPLATE_READY_TOTAL_MS) pass; then
 * ops->done, maybe before this returns. -ENOMEM: nothing follows. */
int template_poll_ready(struct loop *loop, const struct template *t, uint64_t total_ms,
                        const struct template_ready_ops *ops, void *ud);

#endif
