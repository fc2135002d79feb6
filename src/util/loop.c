/*
 * loop.c - epoll + timer heap + deferred calls.
 *
 * Freed watchers are parked on a graveyard list until the batch that may
 * still reference them (epoll_wait's event array) has been dispatched.
 */
#include "util/loop.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/list.h"
#include "util/timeutil.h"

#define LOOP_MAX_EVENTS 256

struct loop_io {
    struct loop *loop;
    int fd;
    uint32_t events;
    bool dead;
    loop_io_fn fn;
    void *userdata;
    struct loop_io *next_dead;
};

struct loop_timer {
    struct loop *loop;
    uint64_t pass;
    uint64_t when;
    size_t heap_idx; /* SIZE_MAX when not armed */
    loop_timer_fn fn;
    void *userdata;
};

struct loop_defer_node {
    struct list link;
    loop_defer_fn fn;
    void *userdata;
};

struct loop {
    int epfd;
    bool quit;
    int quit_code;
    struct loop_timer **heap;
    size_t heap_len, heap_cap;
    struct list defers;
    struct loop_io *graveyard;
    uint64_t pass;
    loop_prepare_fn prepare;
    void *prepare_ud;
};

int
loop_new(struct loop **ret)
{
    struct loop *l = calloc(1, sizeof(*l));
    if (!l)
        return -ENOMEM;
    l->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (l->epfd < 0) {
        int r = -errno;
        free(l);
        return r;
    }
    list_init(&l->defers);
    *ret = l;
    return 0;
}

static void
loop_bury(struct loop *l)
{
    while (l->graveyard) {
        struct loop_io *io = l->graveyard;
        l->graveyard = io->next_dead;
        free(io);
    }
}

struct loop *
loop_free(struct loop *l)
{
    if (!l)
        return NULL;
    loop_bury(l);
    list_foreach_safe (p, tmp, &l->defers) {
        list_remove(p);
        free(list_entry(p, struct loop_defer_node, link));
    }
    for (size_t i = 0; i < l->heap_len; i++)
        l->heap[i]->heap_idx = SIZE_MAX;
    free(l->heap);
    safe_close(l->epfd);
    free(l);
    return NULL;
}

int
loop_io_add(struct loop *l, int fd, uint32_t events, loop_io_fn fn, void *userdata,
            struct loop_io **ret)
{
    struct loop_io *io = calloc(1, sizeof(*io));
    if (!io)
        return -ENOMEM;
    io->loop = l;
    io->fd = fd;
    io->events = events;
    io->fn = fn;
    io->userdata = userdata;
    struct epoll_event ev = {.events = events, .data.ptr = io};
    if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
        int r = -errno;
        free(io);
        return r;
    }
    *ret = io;
    return 0;
}

int
loop_io_set_events(struct loop_io *io, uint32_t events)
{
    if (io->events == events)
        return 0;
    struct epoll_event ev = {.events = events, .data.ptr = io};
    if (epoll_ctl(io->loop->epfd, EPOLL_CTL_MOD, io->fd, &ev) < 0)
        return -errno;
    io->events = events;
    return 0;
}

uint32_t
loop_io_get_events(const struct loop_io *io)
{
    return io->events;
}

int
loop_io_fd(const struct loop_io *io)
{
    return io->fd;
}

void
loop_io_free(struct loop_io *io)
{
    if (!io || io->dead)
        return;
    (void)epoll_ctl(io->loop->epfd, EPOLL_CTL_DEL, io->fd, NULL);
    io->dead = true;
    io->next_dead = io->loop->graveyard;
    io->loop->graveyard = io;
}

/* --- timers: binary min-heap on 'when' --- */

static void
heap_swap(struct loop *l, size_t a, size_t b)
{
    struct loop_timer *t = l->heap[a];
    l->heap[a] = l->heap[b];
    l->heap[b] = t;
    l->heap[a]->heap_idx = a;
    l->heap[b]->heap_idx = b;
}

static void
heap_up(struct loop *l, size_t i)
{
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (l->heap[p]->when <= l->heap[i]->when)
            break;
        heap_swap(l, i, p);
        i = p;
    }
}

static void
heap_down(struct loop *l, size_t i)
{
    for (;;) {
        size_t a = 2 * i + 1, b = a + 1, m = i;
        if (a < l->heap_len && l->heap[a]->when < l->heap[m]->when)
            m = a;
        if (b < l->heap_len && l->heap[b]->when < l->heap[m]->when)
            m = b;
        if (m == i)
            return;
        heap_swap(l, i, m);
        i = m;
    }
}

int
loop_timer_new(struct loop *l, loop_timer_fn fn, void *userdata, struct loop_timer **ret)
{
    struct loop_timer *t = calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    t->loop = l;
    t->fn = fn;
    t->userdata = userdata;
    t->heap_idx = SIZE_MAX;
    *ret = t;
    return 0;
}

void
loop_timer_disarm(struct loop_timer *t)
{
    if (!t || t->heap_idx == SIZE_MAX)
        return;
    struct loop *l = t->loop;
    size_t i = t->heap_idx;
    l->heap_len--;
    if (i != l->heap_len) {
        l->heap[i] = l->heap[l->heap_len];
        l->heap[i]->heap_idx = i;
        heap_down(l, i);
        heap_up(l, i);
    }
    t->heap_idx = SIZE_MAX;
}

int
loop_timer_arm(struct loop_timer *t, uint64_t when_msec)
{
    struct loop *l = t->loop;

    loop_timer_disarm(t);
    if (l->heap_len == l->heap_cap) {
        size_t cap = l->heap_cap ? l->heap_cap * 2 : 64;
        struct loop_timer **h = realloc(l->heap, cap * sizeof(*h));
        if (!h)
            return -ENOMEM;
        l->heap = h;
        l->heap_cap = cap;
    }
    t->when = when_msec;
    t->pass = l->pass;
    t->heap_idx = l->heap_len;
    l->heap[l->heap_len++] = t;
    heap_up(l, t->heap_idx);
    return 0;
}

bool
loop_timer_armed(const struct loop_timer *t)
{
    return t && t->heap_idx != SIZE_MAX;
}

void
loop_timer_free(struct loop_timer *t)
{
    if (!t)
        return;
    loop_timer_disarm(t);
    free(t);
}

int
loop_defer(struct loop *l, loop_defer_fn fn, void *userdata)
{
    struct loop_defer_node *d = malloc(sizeof(*d));
    if (!d)
        return -ENOMEM;
    d->fn = fn;
    d->userdata = userdata;
    list_add_tail(&l->defers, &d->link);
    return 0;
}

void
loop_set_prepare(struct loop *l, loop_prepare_fn fn, void *userdata)
{
    l->prepare = fn;
    l->prepare_ud = userdata;
}

void
loop_quit(struct loop *l, int code)
{
    l->quit = true;
    l->quit_code = code;
}

static void
run_defers(struct loop *l)
{
    /* Run only what was queued before we started, so a callback that defers
     * again cannot starve the descriptors. */
    struct list batch;
    list_init(&batch);
    if (list_empty(&l->defers))
        return;
    batch.next = l->defers.next;
    batch.prev = l->defers.prev;
    batch.next->prev = &batch;
    batch.prev->next = &batch;
    list_init(&l->defers);
    while (!list_empty(&batch)) {
        struct list *p = batch.next;
        list_remove(p);
        struct loop_defer_node *d = list_entry(p, struct loop_defer_node, link);
        loop_defer_fn fn = d->fn;
        void *ud = d->userdata;
        free(d);
        fn(ud);
    }
}

static void
run_timers(struct loop *l)
{
    uint64_t now = now_msec();
    l->pass++;
    while (l->heap_len > 0 && l->heap[0]->when <= now && l->heap[0]->pass != l->pass) {
        struct loop_timer *t = l->heap[0];
        loop_timer_disarm(t);
        t->fn(t, t->userdata);
    }
}

int
loop_run_once(struct loop *l, int64_t timeout_ms)
{
    struct epoll_event evs[LOOP_MAX_EVENTS];

    /* The prepare hook runs first: it may do work (an HTTP server's run)
     * that defers calls or arms timers, and those must shorten this wait. */
    if (l->prepare) {
        int64_t p = l->prepare(l->prepare_ud);
        if (p >= 0 && (timeout_ms < 0 || p < timeout_ms))
            timeout_ms = p;
    }
    if (!list_empty(&l->defers))
        timeout_ms = 0;
    if (l->heap_len > 0) {
        uint64_t now = now_msec();
        int64_t d = l->heap[0]->when > now ? (int64_t)(l->heap[0]->when - now) : 0;
        if (timeout_ms < 0 || d < timeout_ms)
            timeout_ms = d;
    }
    if (timeout_ms > 60000)
        timeout_ms = 60000;
    int n = epoll_wait(l->epfd, evs, LOOP_MAX_EVENTS, (int)timeout_ms);
    if (n < 0 && errno != EINTR)
        return -errno;
    for (int i = 0; i < n; i++) {
        struct loop_io *io = evs[i].data.ptr;
        if (io->dead)
            continue;
        io->fn(io, evs[i].events, io->userdata);
    }
    run_timers(l);
    run_defers(l);
    loop_bury(l);
    return 0;
}

int
loop_run(struct loop *l)
{
    l->quit = false;
    while (!l->quit) {
        int r = loop_run_once(l, -1);
        if (r < 0)
            return r;
    }
    return l->quit_code;
}
