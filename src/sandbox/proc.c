/*
 * proc.c - pipes in, bounded offset-addressed log out, deadlines, exit.
 *
 * Reading is paused for three reasons, each its own flag: before the spawn
 * is confirmed (state PROC_STARTING), while a reader is behind and needs
 * everything the log holds (reader_wait), and while output nobody reads is
 * over its rate (throttled, until t_trickle). update_reading() turns them
 * into the watchers' events.
 */
#include "sandbox/proc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/buf.h"
#include "util/cleanup.h"
#include "util/fd.h"
#include "util/timeutil.h"

#define READ_CHUNK     (64 * 1024)
#define READS_PER_WAKE 4
#define REC_MIN_CAP    8192
#define UNREAD_MIN     4096 /* a throttled read smaller than this waits */

struct log_rec {
    struct list link;
    enum proc_stream stream;
    uint64_t offset;
    size_t len, cap;
    char data[];
};

struct proc_reader {
    struct list link;
    struct proc *p;
    uint64_t offset;
    void (*wake)(void *ud);
    void *ud;
};

struct stdin_waiter {
    struct list link;
    uint64_t until; /* done once this many bytes were written in total */
    proc_stdin_done_fn done;
    void *ud;
};

struct proc {
    struct loop *loop;
    pid_t pid;
    enum proc_state state;
    char *argv;
    size_t argv_len, argc;
    char *cwd;
    bool root, background;
    uint64_t started_wall, ended_wall, started_mono;
    uint64_t timeout_ms, idle_ms;

    int in_fd, out_fd, err_fd;
    bool pty; /* out_fd is a terminal's master side (in_fd a duplicate of it) */
    struct loop_io *in_io, *out_io, *err_io;
    struct buf in_q;
    uint64_t in_written, in_queued;
    bool in_close_req;
    struct list in_waiters;

    struct loop_timer *t_deadline, *t_idle, *t_grace, *t_trickle;
    bool have_status, killing, timed_out;
    bool reading_paused; /* the watchers' state: see update_reading() */
    bool reader_wait;    /* a reader is behind: the log may not drop */
    bool throttled;      /* output nobody reads is over its rate */
    struct proc_rate unread;
    struct proc_rate *unread_shared;
    int status;
    struct proc_result result;

    struct list log;
    uint64_t log_end;
    size_t log_bytes;
    struct list readers;

    const struct proc_owner *owner;
    void *owner_ud;
};

static void maybe_finish(struct proc *p);
static void finish(struct proc *p);

/* --- rate --- */

void
proc_rate_init(struct proc_rate *r, uint64_t rate, uint64_t burst)
{
    r->rate = rate;
    r->burst = burst;
    r->tokens = burst;
    r->stamp_ms = now_msec();
}

uint64_t
proc_rate_avail(struct proc_rate *r, uint64_t now_ms)
{
    if (r->tokens >= r->burst || now_ms <= r->stamp_ms) {
        if (r->tokens >= r->burst)
            r->stamp_ms = MAX(r->stamp_ms, now_ms);
        return MIN(r->tokens, r->burst);
    }
    uint64_t dt = MIN(now_ms - r->stamp_ms, 3600u * 1000u); /* no overflow below */
    uint64_t add = dt * r->rate / 1000;
    if (add == 0)
        return r->tokens; /* keep the stamp: slow rates still accumulate */
    r->tokens = MIN(r->burst, r->tokens + add);
    r->stamp_ms = now_ms;
    return r->tokens;
}

void
proc_rate_spend(struct proc_rate *r, uint64_t n)
{
    r->tokens = n < r->tokens ? r->tokens - n : 0;
}

/* --- log --- */

static uint64_t
log_start(const struct proc *p)
{
    if (list_empty(&p->log))
        return p->log_end;
    return list_entry(p->log.next, struct log_rec, link)->offset;
}

static void
wake_readers(struct proc *p)
{
    list_foreach_safe (l, tmp, &p->readers) {
        struct proc_reader *r = list_entry(l, struct proc_reader, link);
        if (r->wake)
            r->wake(r->ud);
    }
}

static void
update_reading(struct proc *p)
{
    bool on = p->state == PROC_RUNNING && !p->reader_wait && !p->throttled;
    if (on == !p->reading_paused)
        return;
    p->reading_paused = !on;
    /* Paused watchers are edge-triggered: epoll reports EPOLLHUP whatever
     * events are asked for, and level-triggered it would do so forever. */
    if (p->out_io)
        (void)loop_io_set_events(p->out_io, on ? EPOLLIN : EPOLLET);
    if (p->err_io)
        (void)loop_io_set_events(p->err_io, on ? EPOLLIN : EPOLLET);
    /* Blocked on a full pipe because of us is not idle. */
    if (!on)
        loop_timer_disarm(p->t_idle);
    else if (p->idle_ms && !p->killing && !p->have_status)
        (void)loop_timer_arm(p->t_idle, now_msec() + p->idle_ms);
}

/* Keeps at most PROC_LOG_MAX bytes with room for one more read: drops the
 * oldest output no attached reader still needs, and pauses the pipes while
 * a reader that is behind needs everything we hold. */
static void
log_trim(struct proc *p)
{
    const size_t target = PROC_LOG_MAX - READ_CHUNK;
    uint64_t keep_from = p->log_end;
    list_foreach (l, &p->readers) {
        struct proc_reader *r = list_entry(l, struct proc_reader, link);
        keep_from = MIN(keep_from, r->offset);
    }
    while (p->log_bytes > target && !list_empty(&p->log)) {
        struct log_rec *h = list_entry(p->log.next, struct log_rec, link);
        if (h->offset + h->len > keep_from)
            break;
        list_remove(&h->link);
        p->log_bytes -= h->len;
        free(h);
    }
    /* Only a reader can keep the log from dropping. */
    p->reader_wait = p->log_bytes > target;
    update_reading(p);
}

/* Whether another read would make the log drop output no reader saw. */
static bool
unread_overflow(const struct proc *p)
{
    return list_empty(&p->readers) && p->log_bytes + READ_CHUNK > PROC_LOG_MAX - READ_CHUNK;
}

/* Bytes of output nobody reads that may be read now. */
static size_t
unread_allowance(struct proc *p)
{
    uint64_t now = now_msec();
    uint64_t n = MIN(proc_rate_avail(&p->unread, now), (uint64_t)READ_CHUNK);
    if (p->unread_shared)
        n = MIN(n, proc_rate_avail(p->unread_shared, now));
    return n < UNREAD_MIN ? 0 : (size_t)n;
}

static void
unread_spend(struct proc *p, size_t n)
{
    proc_rate_spend(&p->unread, n);
    if (p->unread_shared)
        proc_rate_spend(p->unread_shared, n);
}

/* Over the rate: stop reading until the next tick. The process blocks on
 * its pipe meanwhile, which costs neither of us anything. */
static void
throttle(struct proc *p)
{
    p->throttled = true;
    update_reading(p);
    if (!loop_timer_armed(p->t_trickle))
        (void)loop_timer_arm(p->t_trickle, now_msec() + PROC_UNREAD_TICK_MS);
}

static void
unthrottle(struct proc *p)
{
    p->throttled = false;
    loop_timer_disarm(p->t_trickle);
}

static int
log_append(struct proc *p, enum proc_stream s, const char *data, size_t n)
{
    struct log_rec *t = list_empty(&p->log) ? NULL : list_entry(p->log.prev, struct log_rec, link);
    size_t done = 0;

    if (t && t->stream == s && t->cap > t->len) {
        size_t k = MIN(n, t->cap - t->len);
        memcpy(t->data + t->len, data, k);
        t->len += k;
        done = k;
    }
    if (done < n) {
        size_t cap = MAX(n - done, (size_t)REC_MIN_CAP);
        struct log_rec *r = malloc(sizeof(*r) + cap);
        if (!r)
            return -ENOMEM;
        r->stream = s;
        r->offset = p->log_end + done;
        r->len = n - done;
        r->cap = cap;
        memcpy(r->data, data + done, n - done);
        list_add_tail(&p->log, &r->link);
    }
    p->log_end += n;
    p->log_bytes += n;
    return 0;
}

/* --- pipes --- */

static void
close_stream(struct proc *p, enum proc_stream s)
{
    if (s == PROC_STDOUT) {
        loop_io_free(p->out_io);
        p->out_io = NULL;
        p->out_fd = safe_close(p->out_fd);
    } else {
        loop_io_free(p->err_io);
        p->err_io = NULL;
        p->err_fd = safe_close(p->err_fd);
    }
}

/* Reads what is available; returns true when something arrived. final
 * (the last look before the pipes are closed) ignores the rate: it reads at
 * most max_reads chunks once. */
static bool
pump(struct proc *p, enum proc_stream s, int max_reads, bool final)
{
    static char b[READ_CHUNK];
    bool got = false;

    for (int i = 0; i < max_reads; i++) {
        int fd = s == PROC_STDOUT ? p->out_fd : p->err_fd;
        if (fd < 0 || p->state != PROC_RUNNING || p->reader_wait || (p->throttled && !final))
            break;
        size_t want = sizeof(b);
        bool unread = !final && unread_overflow(p);
        if (unread) {
            want = unread_allowance(p);
            if (!want) {
                throttle(p);
                break;
            }
        }
        ssize_t k = read(fd, b, want);
        if (k > 0 && unread)
            unread_spend(p, (size_t)k);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && errno == EAGAIN)
            break;
        if (k <= 0) {
            close_stream(p, s);
            break;
        }
        if (log_append(p, s, b, (size_t)k) < 0) {
            /* Out of memory: stop reading this stream rather than lie. */
            close_stream(p, s);
            break;
        }
        got = true;
        log_trim(p);
    }
    return got;
}

static void
on_output(struct proc *p, enum proc_stream s)
{
    bool got = pump(p, s, READS_PER_WAKE, false);
    if (got && p->idle_ms && p->state == PROC_RUNNING && !p->killing && !p->reading_paused)
        (void)loop_timer_arm(p->t_idle, now_msec() + p->idle_ms);
    if (got)
        wake_readers(p);
    maybe_finish(p);
}

static void
on_stdout(struct loop_io *io, uint32_t ev, void *ud)
{
    (void)io;
    (void)ev;
    on_output(ud, PROC_STDOUT);
}

static void
on_stderr(struct loop_io *io, uint32_t ev, void *ud)
{
    (void)io;
    (void)ev;
    on_output(ud, PROC_STDERR);
}

/* A throttled process's next tick: read what the rate allows straight
 * away, without waking the watchers; only a writer slower than the rate
 * (the pipe ran dry first) gets them back. */
static void
on_trickle(struct loop_timer *t, void *ud)
{
    struct proc *p = ud;
    (void)t;
    if (!p->throttled || p->state != PROC_RUNNING)
        return;
    p->throttled = false;
    bool got = pump(p, PROC_STDOUT, READS_PER_WAKE, false);
    if (pump(p, PROC_STDERR, READS_PER_WAKE, false))
        got = true;
    update_reading(p);
    if (got)
        wake_readers(p);
    maybe_finish(p);
}

/* --- stdin --- */

static void
stdin_fail_waiters(struct proc *p, int r)
{
    while (!list_empty(&p->in_waiters)) {
        struct stdin_waiter *w = list_entry(p->in_waiters.next, struct stdin_waiter, link);
        list_remove(&w->link);
        proc_stdin_done_fn done = w->done;
        void *ud = w->ud;
        free(w);
        done(ud, r);
    }
}

static void
stdin_close_now(struct proc *p, int r)
{
    loop_io_free(p->in_io);
    p->in_io = NULL;
    p->in_fd = safe_close(p->in_fd);
    buf_reset(&p->in_q);
    stdin_fail_waiters(p, r);
}

static void
stdin_flush(struct proc *p)
{
    while (p->in_fd >= 0 && p->in_q.len > 0) {
        ssize_t k = write(p->in_fd, p->in_q.data, p->in_q.len);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && errno == EAGAIN)
            break;
        if (k < 0) {
            stdin_close_now(p, -EPIPE);
            return;
        }
        buf_consume(&p->in_q, (size_t)k);
        p->in_written += (uint64_t)k;
    }
    while (!list_empty(&p->in_waiters)) {
        struct stdin_waiter *w = list_entry(p->in_waiters.next, struct stdin_waiter, link);
        if (w->until > p->in_written)
            break;
        list_remove(&w->link);
        proc_stdin_done_fn done = w->done;
        void *ud = w->ud;
        free(w);
        done(ud, 0);
    }
    if (p->in_fd < 0)
        return;
    if (p->in_q.len == 0 && p->in_close_req) {
        stdin_close_now(p, -EPIPE);
        return;
    }
    if (p->in_io)
        (void)loop_io_set_events(p->in_io, p->in_q.len ? EPOLLOUT : 0);
}

static void
on_stdin(struct loop_io *io, uint32_t ev, void *ud)
{
    struct proc *p = ud;
    (void)io;
    if (ev & (EPOLLERR | EPOLLHUP)) {
        stdin_close_now(p, -EPIPE);
        return;
    }
    stdin_flush(p);
}

int
proc_stdin_write(struct proc *p, const void *data, size_t n, proc_stdin_done_fn done, void *ud)
{
    if (p->in_fd < 0 || p->in_close_req || p->state == PROC_EXITED)
        return -EPIPE;
    if (p->in_q.len + n > PROC_STDIN_MAX)
        return -EFBIG;
    struct stdin_waiter *w = NULL;
    if (done) {
        w = calloc(1, sizeof(*w));
        if (!w)
            return -ENOMEM;
    }
    int r = buf_put(&p->in_q, data, n);
    if (r < 0) {
        free(w);
        return r;
    }
    p->in_queued += n;
    if (w) {
        w->until = p->in_queued;
        w->done = done;
        w->ud = ud;
        list_add_tail(&p->in_waiters, &w->link);
    }
    if (p->state == PROC_RUNNING)
        stdin_flush(p);
    return 0;
}

int
proc_stdin_close(struct proc *p)
{
    if (p->in_fd < 0)
        return 0;
    p->in_close_req = true;
    if (p->state == PROC_RUNNING)
        stdin_flush(p);
    return 0;
}

/* --- lifecycle --- */

static void
on_deadline(struct loop_timer *t, void *ud)
{
    struct proc *p = ud;
    (void)t;
    if (p->state != PROC_RUNNING || p->killing)
        return;
    p->timed_out = true;
    p->killing = true;
    loop_timer_disarm(p->t_deadline);
    loop_timer_disarm(p->t_idle);
    (void)p->owner->signal(p->owner_ud, p->pid, SIGKILL, true);
    /* If no exit arrives (init is not cooperating), end anyway. */
    (void)loop_timer_arm(p->t_grace, now_msec() + PROC_KILL_GRACE_MS);
}

static void
on_grace(struct loop_timer *t, void *ud)
{
    struct proc *p = ud;
    (void)t;
    if (p->state == PROC_EXITED)
        return;
    if (!p->have_status) {
        /* Killed at a deadline but never reported: call it killed. */
        p->have_status = true;
        p->status = SIGKILL;
    } else if (p->reader_wait) {
        /* The pipes are full because a reader is behind, not because a
         * child holds them: wait for the reader rather than drop output. */
        (void)loop_timer_arm(p->t_grace, now_msec() + PROC_DRAIN_GRACE_MS);
        return;
    }
    /* Take what is there, then stop waiting for holders of the pipes. */
    if (p->out_fd >= 0)
        (void)pump(p, PROC_STDOUT, 64, true);
    if (p->err_fd >= 0)
        (void)pump(p, PROC_STDERR, 64, true);
    close_stream(p, PROC_STDOUT);
    close_stream(p, PROC_STDERR);
    finish(p);
}

int
proc_new(struct loop *loop, const struct proc_spec *spec, int in_fd, int out_fd, int err_fd,
         const struct proc_owner *owner, void *owner_ud, struct proc **ret)
{
    struct proc *p = calloc(1, sizeof(*p));
    int r;

    if (!p) {
        safe_close(in_fd);
        safe_close(out_fd);
        safe_close(err_fd);
        return -ENOMEM;
    }
    p->loop = loop;
    p->state = PROC_STARTING;
    p->in_fd = in_fd;
    p->out_fd = out_fd;
    p->err_fd = err_fd;
    p->owner = owner;
    p->owner_ud = owner_ud;
    p->root = spec->root;
    p->pty = spec->pty;
    p->background = spec->background;
    p->timeout_ms = spec->timeout_ms;
    p->idle_ms = spec->idle_timeout_ms;
    p->started_wall = wall_msec();
    p->started_mono = now_msec();
    proc_rate_init(&p->unread, PROC_UNREAD_RATE, PROC_UNREAD_BURST);
    p->unread_shared = spec->unread_shared;
    list_init(&p->log);
    list_init(&p->readers);
    list_init(&p->in_waiters);
    buf_init(&p->in_q, PROC_STDIN_MAX);

    struct buf a;
    buf_init(&a, PROC_ARGV_SHOWN);
    for (const char *const *s = spec->argv; s && *s; s++) {
        if (buf_put(&a, *s, strlen(*s) + 1) < 0)
            break;
        p->argc++;
    }
    p->argv_len = a.len;
    p->argv = buf_steal(&a);
    p->cwd = strdup(spec->cwd ? spec->cwd : "");
    if (!p->argv || !p->cwd) {
        r = -ENOMEM;
        goto fail;
    }
    if ((r = loop_timer_new(loop, on_deadline, p, &p->t_deadline)) < 0 ||
        (r = loop_timer_new(loop, on_deadline, p, &p->t_idle)) < 0 ||
        (r = loop_timer_new(loop, on_grace, p, &p->t_grace)) < 0 ||
        (r = loop_timer_new(loop, on_trickle, p, &p->t_trickle)) < 0)
        goto fail;
    /* Fresh pipe ends: O_NONBLOCK can be set without reading the flags. */
    if (fcntl(out_fd, F_SETFL, O_NONBLOCK) < 0 ||
        (err_fd >= 0 && fcntl(err_fd, F_SETFL, O_NONBLOCK) < 0) ||
        (in_fd >= 0 && fcntl(in_fd, F_SETFL, O_NONBLOCK) < 0)) {
        r = -errno;
        goto fail;
    }
    /* Not read until the spawn is confirmed: output written between the
     * exec and our hearing of it would otherwise reach the log before the
     * caller could attach a reader, and be dropped past the cap. The
     * process just blocks on its pipe for that moment. */
    p->reading_paused = true;
    if ((r = loop_io_add(loop, out_fd, EPOLLET, on_stdout, p, &p->out_io)) < 0 ||
        (err_fd >= 0 && (r = loop_io_add(loop, err_fd, EPOLLET, on_stderr, p, &p->err_io)) < 0) ||
        (in_fd >= 0 && (r = loop_io_add(loop, in_fd, 0, on_stdin, p, &p->in_io)) < 0))
        goto fail;
    if (spec->stdin_len) {
        r = proc_stdin_write(p, spec->stdin_data, spec->stdin_len, NULL, NULL);
        if (r < 0)
            goto fail;
    }
    if (!spec->stdin_open)
        p->in_close_req = true;
    *ret = p;
    return 0;
fail:
    proc_free(p);
    return r;
}

void
proc_started(struct proc *p, pid_t pid)
{
    p->pid = pid;
    p->state = PROC_RUNNING;
    p->started_mono = now_msec();
    update_reading(p);
    if (p->timeout_ms)
        (void)loop_timer_arm(p->t_deadline, p->started_mono + p->timeout_ms);
    if (p->idle_ms)
        (void)loop_timer_arm(p->t_idle, p->started_mono + p->idle_ms);
    stdin_flush(p);
}

void
proc_spawn_failed(struct proc *p)
{
    close_stream(p, PROC_STDOUT);
    close_stream(p, PROC_STDERR);
    stdin_close_now(p, -EPIPE);
    p->state = PROC_EXITED;
    p->ended_wall = wall_msec();
    wake_readers(p);
}

static void
finish(struct proc *p)
{
    if (p->state == PROC_EXITED)
        return;
    int st = p->status;
    struct proc_result *res = &p->result;

    if (WIFEXITED(st)) {
        res->exit_code = WEXITSTATUS(st);
    } else if (WIFSIGNALED(st)) {
        res->signal = WTERMSIG(st);
        res->exit_code = 128 + res->signal;
    } else {
        res->exit_code = 255;
    }
    res->timed_out = p->timed_out;
    if (p->timed_out)
        res->exit_code = 124;
    if (res->signal == SIGKILL && !p->timed_out && p->owner->oom_killed)
        res->oom_killed = p->owner->oom_killed(p->owner_ud);
    res->duration_ms = now_msec() - p->started_mono;
    p->state = PROC_EXITED;
    p->ended_wall = wall_msec();
    loop_timer_disarm(p->t_deadline);
    loop_timer_disarm(p->t_idle);
    loop_timer_disarm(p->t_grace);
    unthrottle(p);
    stdin_close_now(p, -EPIPE);
    log_trim(p);
    wake_readers(p);
    if (p->owner->finished)
        p->owner->finished(p->owner_ud, p);
}

static void
maybe_finish(struct proc *p)
{
    if (p->state != PROC_RUNNING || !p->have_status)
        return;
    if (p->out_fd < 0 && p->err_fd < 0) {
        finish(p);
        return;
    }
    /* Something still holds the pipes (a background child). Wait a little
     * unless a deadline kill is already being waited out. */
    if (!loop_timer_armed(p->t_grace))
        (void)loop_timer_arm(p->t_grace, now_msec() + PROC_DRAIN_GRACE_MS);
}

void
proc_exited(struct proc *p, int status)
{
    if (p->state != PROC_RUNNING || p->have_status)
        return;
    p->have_status = true;
    p->status = status;
    loop_timer_disarm(p->t_deadline);
    loop_timer_disarm(p->t_idle);
    if (p->killing)
        loop_timer_disarm(p->t_grace);
    /* Output already in the pipes is ours to read before deciding. */
    if (!p->reading_paused) {
        if (p->out_fd >= 0)
            (void)pump(p, PROC_STDOUT, READS_PER_WAKE, false);
        if (p->err_fd >= 0)
            (void)pump(p, PROC_STDERR, READS_PER_WAKE, false);
        wake_readers(p);
    }
    maybe_finish(p);
}

void
proc_abandon(struct proc *p)
{
    if (p->state == PROC_EXITED)
        return;
    if (p->state == PROC_STARTING) {
        proc_spawn_failed(p);
        return;
    }
    if (!p->have_status) {
        p->have_status = true;
        p->status = SIGKILL;
    }
    if (p->out_fd >= 0)
        (void)pump(p, PROC_STDOUT, 64, true);
    if (p->err_fd >= 0)
        (void)pump(p, PROC_STDERR, 64, true);
    close_stream(p, PROC_STDOUT);
    close_stream(p, PROC_STDERR);
    finish(p);
}

void
proc_free(struct proc *p)
{
    if (!p)
        return;
    list_foreach_safe (l, tmp, &p->readers) {
        struct proc_reader *r = list_entry(l, struct proc_reader, link);
        list_remove(&r->link);
        r->p = NULL;
        if (r->wake)
            r->wake(r->ud);
    }
    stdin_close_now(p, -EPIPE);
    close_stream(p, PROC_STDOUT);
    close_stream(p, PROC_STDERR);
    loop_timer_free(p->t_deadline);
    loop_timer_free(p->t_idle);
    loop_timer_free(p->t_grace);
    loop_timer_free(p->t_trickle);
    list_foreach_safe (l, tmp, &p->log) {
        list_remove(l);
        free(list_entry(l, struct log_rec, link));
    }
    buf_done(&p->in_q);
    free(p->argv);
    free(p->cwd);
    free(p);
}

int
proc_signal(struct proc *p, int sig, bool group)
{
    if (p->state != PROC_RUNNING || p->have_status)
        return -ESRCH;
    return p->owner->signal(p->owner_ud, p->pid, sig, group);
}

/* --- accessors --- */

pid_t
proc_pid(const struct proc *p)
{
    return p->pid;
}

enum proc_state
proc_get_state(const struct proc *p)
{
    return p->state;
}

const struct proc_result *
proc_get_result(const struct proc *p)
{
    return p->state == PROC_EXITED && p->have_status ? &p->result : NULL;
}

const char *
proc_argv_text(const struct proc *p)
{
    return p->argv;
}

size_t
proc_argc(const struct proc *p)
{
    return p->argc;
}

const char *
proc_cwd(const struct proc *p)
{
    return p->cwd;
}

bool
proc_is_root(const struct proc *p)
{
    return p->root;
}

bool
proc_is_pty(const struct proc *p)
{
    return p->pty;
}

int
proc_resize(struct proc *p, uint16_t cols, uint16_t rows)
{
    struct winsize ws = {.ws_row = rows, .ws_col = cols};
    int fd = p->out_fd >= 0 ? p->out_fd : p->in_fd;
    if (!p->pty)
        return -ENOTTY;
    if (fd < 0 || p->state == PROC_EXITED)
        return -ESRCH;
    return ioctl(fd, TIOCSWINSZ, &ws) < 0 ? -errno : 0;
}

bool
proc_is_background(const struct proc *p)
{
    return p->background;
}

bool
proc_stdin_is_open(const struct proc *p)
{
    return p->in_fd >= 0 && !p->in_close_req;
}

uint64_t
proc_started_wall_ms(const struct proc *p)
{
    return p->started_wall;
}

uint64_t
proc_ended_wall_ms(const struct proc *p)
{
    return p->ended_wall;
}

uint64_t
proc_output_end(const struct proc *p)
{
    return p->log_end;
}

uint64_t
proc_output_start(const struct proc *p)
{
    return log_start(p);
}

size_t
proc_log_bytes(const struct proc *p)
{
    return p->log_bytes;
}

bool
proc_is_throttled(const struct proc *p)
{
    return p->throttled;
}

/* --- readers --- */

int
proc_reader_new(struct proc *p, uint64_t offset, void (*wake)(void *ud), void *ud,
                struct proc_reader **ret)
{
    struct proc_reader *r = calloc(1, sizeof(*r));
    if (!r)
        return -ENOMEM;
    r->p = p;
    r->offset = MIN(offset, p->log_end);
    r->wake = wake;
    r->ud = ud;
    list_add_tail(&p->readers, &r->link);
    /* Someone reads now: full speed (or paused, if it is behind). */
    if (p->throttled) {
        unthrottle(p);
        log_trim(p);
    }
    *ret = r;
    return 0;
}

void
proc_reader_free(struct proc_reader *r)
{
    if (!r)
        return;
    struct proc *p = r->p;
    list_remove(&r->link);
    free(r);
    if (p)
        log_trim(p); /* a slow reader leaving may unpause the pipes */
}

int
proc_reader_peek(struct proc_reader *r, size_t max, struct proc_chunk *ret)
{
    struct proc *p = r->p;

    memset(ret, 0, sizeof(*ret));
    if (!p)
        return -ENODATA;
    uint64_t start = log_start(p);
    if (r->offset < start) {
        ret->offset = start;
        ret->dropped = start - r->offset;
        return 1;
    }
    list_foreach (l, &p->log) {
        struct log_rec *rec = list_entry(l, struct log_rec, link);
        if (r->offset >= rec->offset && r->offset < rec->offset + rec->len) {
            size_t off = (size_t)(r->offset - rec->offset);
            ret->stream = rec->stream;
            ret->data = rec->data + off;
            ret->len = MIN(max, rec->len - off);
            ret->offset = r->offset;
            return 1;
        }
    }
    return p->state == PROC_EXITED ? -ENODATA : 0;
}

void
proc_reader_consume(struct proc_reader *r, size_t n)
{
    struct proc *p = r->p;
    if (!p)
        return;
    uint64_t start = log_start(p);
    if (r->offset < start)
        r->offset = start;
    r->offset = MIN(r->offset + n, p->log_end);
    if (p->reader_wait)
        log_trim(p);
}

uint64_t
proc_reader_offset(const struct proc_reader *r)
{
    return r->offset;
}

struct proc *
proc_reader_proc(const struct proc_reader *r)
{
    return r->p;
}
