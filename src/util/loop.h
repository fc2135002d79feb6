/*
 * loop.h - the single-threaded event loop every abxd piece runs on.
 *
 * epoll for descriptors, a min-heap of millisecond timers on CLOCK_MONOTONIC,
 * and deferred calls that run after the current batch of events. Nothing in
 * abxd blocks on a client: work that must wait registers here. Watchers and
 * timers may be freed from inside any callback, including their own.
 * Not thread-safe: one loop, one thread.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>

struct loop;
struct loop_io;
struct loop_timer;

typedef void (*loop_io_fn)(struct loop_io *io, uint32_t revents, void *userdata);
typedef void (*loop_timer_fn)(struct loop_timer *t, void *userdata);
typedef void (*loop_defer_fn)(void *userdata);
/* Called before each wait, before deferred calls and timers are looked at
 * (it may add both); returns the longest wait in ms it allows, or -1. */
typedef int64_t (*loop_prepare_fn)(void *userdata);

int loop_new(struct loop **ret);
struct loop *loop_free(struct loop *l);

/* Watches fd (borrowed: the caller closes it after loop_io_free()). */
int loop_io_add(struct loop *l, int fd, uint32_t events, loop_io_fn fn, void *userdata,
                struct loop_io **ret);
int loop_io_set_events(struct loop_io *io, uint32_t events);
uint32_t loop_io_get_events(const struct loop_io *io);
int loop_io_fd(const struct loop_io *io);
/* Stops watching; memory is released after the current dispatch. NULL is ok. */
void loop_io_free(struct loop_io *io);

int loop_timer_new(struct loop *l, loop_timer_fn fn, void *userdata, struct loop_timer **ret);
/* (Re)arms t to fire once at when_msec (monotonic ms, see now_msec()). */
int loop_timer_arm(struct loop_timer *t, uint64_t when_msec);
void loop_timer_disarm(struct loop_timer *t);
bool loop_timer_armed(const struct loop_timer *t);
void loop_timer_free(struct loop_timer *t); /* NULL is ok */

/* Runs fn(userdata) once after the current batch. -ENOMEM. */
int loop_defer(struct loop *l, loop_defer_fn fn, void *userdata);

void loop_set_prepare(struct loop *l, loop_prepare_fn fn, void *userdata);

/* Runs until loop_quit(); returns the code given to it. */
int loop_run(struct loop *l);
void loop_quit(struct loop *l, int code);
/* Runs one iteration waiting at most timeout_ms (-1 = until an event). */
int loop_run_once(struct loop *l, int64_t timeout_ms);
