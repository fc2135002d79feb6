/*
 * workq.h - run blocking work (deleting a large tree, fsync) on worker
 * threads and get told on the loop when it is done.
 *
 * fn runs on a worker thread and must only touch what it was given (no
 * loop, no logging); done runs afterwards on the loop thread. Submission
 * and completion are the only points that cross threads.
 */
#pragma once

#include "util/loop.h"

struct workq;

typedef void (*work_fn)(void *ud);
typedef void (*work_done_fn)(void *ud);

int workq_new(struct loop *loop, unsigned threads, struct workq **ret);
/* Finishes queued work, joins the threads, runs pending done callbacks. */
void workq_free(struct workq *q);
/* -ENOMEM; done may be NULL. */
int workq_submit(struct workq *q, work_fn fn, work_done_fn done, void *ud);
