/*
 * sandbox-memory.h - a Sandbox host for unit tests: no jail, no namespaces,
 * no processes of its own.
 *
 * Commands "run" by a scripted responder: the test supplies a function
 * that, given the exec request, says what the process prints on stdout and
 * stderr and how it ends (an exit code, a signal, failing to start, or
 * running until it is signalled, killed or reaches its deadline). Each
 * process is a real struct proc (proc.h) fed through pipes, so output logs,
 * readers, deadlines (exit 124) and the process table behave as with the
 * local implementation. Files live in a directory the test gives: each
 * sandbox's workspace is <dir>/<id>, made at create, and the file calls go
 * through a direct fileops handle on it (fileops.h) with the test's own
 * rights. Limits are recorded, never enforced; stats are zero.
 *
 * Everything a local sandbox does asynchronously (ready, spawn answers,
 * exits, gone after a kill) happens here on the next turn of the loop, in
 * the order asked. Linked into unit tests only (abx-sandbox-memory),
 * never into abxd.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sandbox/sandbox.h"
#include "util/loop.h"

#define SANDBOX_MEMORY_OUTPUT_MAX (64 * 1024) /* bytes per stream a run may print */

/* How one command runs: the responder fills it in (zeroed before). */
struct sandbox_memory_run {
    int start_error; /* -errno: it never starts, exec's callback gets this */
    const char *out; /* stdout, copied; at most SANDBOX_MEMORY_OUTPUT_MAX */
    size_t out_len;
    const char *err; /* stderr, likewise */
    size_t err_len;
    int exit_code; /* 0..255 */
    int signal;    /* > 0: dies of this signal instead */
    bool hang;     /* runs until signalled, killed or its deadline */
};

/* Called synchronously in sandbox_exec(), x and sb valid for the call. */
typedef void (*sandbox_memory_fn)(void *ud, struct sandbox *sb, const struct sandbox_exec *x,
                                  struct sandbox_memory_run *ret);

struct sandbox_memory_config {
    sandbox_memory_fn run; /* NULL = every command exits 0 and prints nothing */
    void *run_ud;
    int dir_fd;              /* borrowed directory for the workspaces; -1 = no files */
    uint64_t max_file_bytes; /* largest upload; 0 = no bound */
};

int sandbox_memory_host_new(struct loop *loop, const struct sandbox_memory_config *c,
                            struct sandbox_host **ret);
/* The next creates fail (their ready callback gets r < 0) until set to 0. */
void sandbox_memory_fail_creates(struct sandbox_host *h, int r);
/* Counts, for assertions: sandboxes created (ready or not) and not yet
 * freed; processes started in all of them. */
unsigned sandbox_memory_created(const struct sandbox_host *h);
unsigned sandbox_memory_live(const struct sandbox_host *h);
unsigned sandbox_memory_execs(const struct sandbox_host *h);
/* The sandbox's workspace directory (borrowed), -EBADF without one. */
int sandbox_memory_ws_fd(const struct sandbox *sb);
/* Whether sandbox_freeze() froze it. */
bool sandbox_memory_frozen(const struct sandbox *sb);
