/*
 * workq.c - a mutex-and-condvar queue feeding worker threads, with an
 * eventfd that wakes the loop for completions.
 */
#include "util/workq.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/list.h"

struct work {
    struct list link;
    work_fn fn;
    work_done_fn done;
    void *ud;
};

struct workq {
    struct loop *loop;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct list todo, finished;
    bool stopping;
    unsigned nthreads;
    pthread_t *threads;
    int efd;
    struct loop_io *io;
};

static void *
worker(void *arg)
{
    struct workq *q = arg;
    sigset_t all;
    /* Signals are the loop's (signalfd); a worker must never take one. */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    pthread_mutex_lock(&q->mu);
    for (;;) {
        while (list_empty(&q->todo) && !q->stopping)
            pthread_cond_wait(&q->cv, &q->mu);
        if (list_empty(&q->todo))
            break;
        struct work *w = list_entry(q->todo.next, struct work, link);
        list_remove(&w->link);
        pthread_mutex_unlock(&q->mu);
        w->fn(w->ud);
        pthread_mutex_lock(&q->mu);
        list_add_tail(&q->finished, &w->link);
        uint64_t one = 1;
        (void)!write(q->efd, &one, sizeof(one));
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

static void
run_done(struct workq *q)
{
    struct list batch;
    list_init(&batch);
    pthread_mutex_lock(&q->mu);
    while (!list_empty(&q->finished)) {
        struct list *l = q->finished.next;
        list_remove(l);
        list_add_tail(&batch, l);
    }
    pthread_mutex_unlock(&q->mu);
    while (!list_empty(&batch)) {
        struct work *w = list_entry(batch.next, struct work, link);
        list_remove(&w->link);
        if (w->done)
            w->done(w->ud);
        free(w);
    }
}

static void
on_event(struct loop_io *io, uint32_t ev, void *ud)
{
    struct workq *q = ud;
    uint64_t n;
    (void)io;
    (void)ev;
    (void)!read(q->efd, &n, sizeof(n));
    run_done(q);
}

int
workq_new(struct loop *loop, unsigned threads, struct workq **ret)
{
    struct workq *q = calloc(1, sizeof(*q));
    int r;

    if (!q)
        return -ENOMEM;
    q->loop = loop;
    list_init(&q->todo);
    list_init(&q->finished);
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
    q->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    q->threads = calloc(threads, sizeof(*q->threads));
    if (q->efd < 0 || !q->threads) {
        r = q->efd < 0 ? -errno : -ENOMEM;
        goto fail;
    }
    r = loop_io_add(loop, q->efd, EPOLLIN, on_event, q, &q->io);
    if (r < 0)
        goto fail;
    for (unsigned i = 0; i < threads; i++) {
        r = -pthread_create(&q->threads[i], NULL, worker, q);
        if (r < 0)
            goto fail;
        q->nthreads++;
    }
    *ret = q;
    return 0;
fail:
    workq_free(q);
    return r;
}

void
workq_free(struct workq *q)
{
    if (!q)
        return;
    pthread_mutex_lock(&q->mu);
    q->stopping = true;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    for (unsigned i = 0; i < q->nthreads; i++)
        pthread_join(q->threads[i], NULL);
    run_done(q);
    loop_io_free(q->io);
    safe_close(q->efd);
    free(q->threads);
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv);
    free(q);
}

int
workq_submit(struct workq *q, work_fn fn, work_done_fn done, void *ud)
{
    struct work *w = calloc(1, sizeof(*w));
    if (!w)
        return -ENOMEM;
    w->fn = fn;
    w->done = done;
    w->ud = ud;
    pthread_mutex_lock(&q->mu);
    list_add_tail(&q->todo, &w->link);
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
    return 0;
}
