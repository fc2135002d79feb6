/*
 * proc.h - one process in a sandbox's process table: pipes, deadlines,
 * exit status and an output log that outlives any connection.
 *
 * stdout and stderr are read into one log of chunks in arrival order.
 * Offsets count payload bytes since the process started, across both
 * streams, so a client that lost its connection asks for "offset N" and
 * continues where it stopped. The log keeps at most PROC_LOG_MAX bytes:
 * while a reader is attached and behind, the pipes are not read (the
 * process blocks on a full pipe instead of losing output); with no reader
 * attached, the oldest output is dropped and readers that ask for it later
 * are told how much is gone.
 *
 * Output nobody reads costs abxd a read and a copy per byte, so once the
 * log is full and no reader is attached the pipes are read at a bounded
 * rate: at most PROC_UNREAD_RATE bytes a second per process, and no more
 * than a shared struct proc_rate allows (the sandbox's, which bounds all
 * its processes together). In between the process blocks on its full pipe;
 * one that writes less than the rate (a server's log) never notices, a
 * flood is slowed to the rate. Attaching a reader lifts the bound at once.
 *
 * A process ends when its exit status has arrived and both pipes reached
 * EOF - or PROC_DRAIN_GRACE_MS after the exit, if a background child still
 * holds them open. At a deadline (total, or idle = no output) its whole
 * process group is killed and it reports exit code 124.
 *
 * This module owns the descriptors it is given and the loop watchers on
 * them; it knows nothing of jails or HTTP. Not thread-safe.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/err.h"
#include "util/list.h"
#include "util/loop.h"

#define PROC_LOG_MAX        (1024 * 1024) /* bytes of output kept per process */
#define PROC_STDIN_MAX      (1024 * 1024) /* bytes of stdin queued per process */
#define PROC_DRAIN_GRACE_MS 200           /* pipes held open past exit */
#define PROC_KILL_GRACE_MS  5000          /* after a deadline kill, report anyway */
#define PROC_ARGV_SHOWN     4096          /* bytes of argv kept for listings */
#define PROC_UNREAD_RATE    (256 * 1024)  /* bytes/s read of output nobody reads */
#define PROC_UNREAD_BURST   (64 * 1024)   /* bytes of it read at once, at most */
#define PROC_UNREAD_TICK_MS 250           /* a throttled pipe is looked at again */

enum proc_stream {
    PROC_STDOUT = 1,
    PROC_STDERR = 2,
};

enum proc_state {
    PROC_STARTING, /* spawn requested, no pid yet */
    PROC_RUNNING,
    PROC_EXITED, /* exit status known and output drained: final */
};

struct proc_result {
    int exit_code; /* 0..255; 124 timed out; 128+N killed by signal N */
    int signal;    /* terminating signal, 0 if it exited */
    bool timed_out;
    bool oom_killed; /* killed by the memory limit */
    uint64_t duration_ms;
};

struct proc;

/* A token bucket: rate bytes a second, at most burst at once. Several
 * processes may share one (spec->unread_shared); it must outlive them. */
struct proc_rate {
    uint64_t rate;     /* bytes per second */
    uint64_t burst;    /* bytes */
    uint64_t tokens;   /* bytes that may be read now */
    uint64_t stamp_ms; /* monotonic ms tokens were last brought up to date */
};

void proc_rate_init(struct proc_rate *r, uint64_t rate, uint64_t burst);
/* Bytes available now (refilled up to burst). */
uint64_t proc_rate_avail(struct proc_rate *r, uint64_t now_ms);
void proc_rate_spend(struct proc_rate *r, uint64_t n);

/* What a process needs from its owner (the sandbox). */
struct proc_owner {
    /* Signals the process (group when group is true). */
    int (*signal)(void *ud, pid_t pid, int sig, bool group);
    /* Whether the OOM killer acted in the sandbox since the last call; asked
     * only when a process died of SIGKILL, to tell memory kills apart. */
    bool (*oom_killed)(void *ud);
    /* The process reached PROC_EXITED (called once; must not free it). */
    void (*finished)(void *ud, struct proc *p);
};

struct proc_spec {
    const char *const *argv; /* for listings only: copied, truncated */
    const char *cwd;
    bool root;
    bool pty; /* out_fd is a terminal's master (err_fd -1, in_fd a dup) */
    bool background;
    uint64_t timeout_ms;      /* 0 = none */
    uint64_t idle_timeout_ms; /* 0 = none */
    bool stdin_open;          /* keep stdin open after the initial data */
    const void *stdin_data;
    size_t stdin_len;
    struct proc_rate *unread_shared; /* also bounds output nobody reads; NULL = none */
};

/* Creates a process in PROC_STARTING, taking ownership of the parent ends of
 * its pipes (out_fd and err_fd read ends, in_fd write end or -1 when it has
 * no stdin to write; non-blocking is set here). With a terminal (spec->pty)
 * out_fd is its master side, in_fd a duplicate of it and err_fd -1. */
int proc_new(struct loop *loop, const struct proc_spec *spec, int in_fd, int out_fd, int err_fd,
             const struct proc_owner *owner, void *owner_ud, struct proc **ret);
/* Frees the process and its log; readers are detached (they see the end). */
void proc_free(struct proc *p);

/* The spawn succeeded: starts the deadlines. */
void proc_started(struct proc *p, pid_t pid);
/* The spawn failed: the process ends without having run (no result). */
void proc_spawn_failed(struct proc *p);
/* The exit status (wait(2) format) arrived. */
void proc_exited(struct proc *p, int status);
/* The sandbox is gone: end now, with whatever we have. */
void proc_abandon(struct proc *p);

pid_t proc_pid(const struct proc *p);
enum proc_state proc_get_state(const struct proc *p);
const struct proc_result *proc_get_result(const struct proc *p); /* NULL until exited */
const char *proc_argv_text(const struct proc *p);                /* argv joined by NUL, see argc */
size_t proc_argc(const struct proc *p);
const char *proc_cwd(const struct proc *p);
bool proc_is_root(const struct proc *p);
bool proc_is_background(const struct proc *p);
bool proc_is_pty(const struct proc *p);
/* Sets the terminal's window size (the kernel sends SIGWINCH): -ENOTTY
 * without a terminal, -ESRCH once it ended. */
int proc_resize(struct proc *p, uint16_t cols, uint16_t rows);
bool proc_stdin_is_open(const struct proc *p);
uint64_t proc_started_wall_ms(const struct proc *p);
uint64_t proc_ended_wall_ms(const struct proc *p);
uint64_t proc_output_end(const struct proc *p);   /* offset after the last byte */
uint64_t proc_output_start(const struct proc *p); /* oldest offset still kept */
size_t proc_log_bytes(const struct proc *p);
/* Whether the pipes are read at the bounded rate right now (see above). */
bool proc_is_throttled(const struct proc *p);

/* Sends a signal to the process (or its group). -ESRCH once exited. */
int proc_signal(struct proc *p, int sig, bool group);

/* Queues data for stdin; done(ud, r) fires when it is all in the pipe
 * (r = 0), or the pipe broke / stdin was closed (r < 0). -EFBIG when the
 * queue would exceed PROC_STDIN_MAX, -EPIPE when stdin is closed. */
typedef void (*proc_stdin_done_fn)(void *ud, int r);
int proc_stdin_write(struct proc *p, const void *data, size_t n, proc_stdin_done_fn done, void *ud);
/* Closes stdin once the queued data has been written. */
int proc_stdin_close(struct proc *p);

/* A cursor into the output log. */
struct proc_reader;

struct proc_chunk {
    enum proc_stream stream; /* 0 for a gap record */
    const char *data;
    size_t len;
    uint64_t offset;  /* of data[0] */
    uint64_t dropped; /* gap records: bytes no longer kept before offset */
};

/* Attaches a reader at offset (clamped to the end). wake(ud) is called
 * (possibly many times) when new output or the end is available. */
int proc_reader_new(struct proc *p, uint64_t offset, void (*wake)(void *ud), void *ud,
                    struct proc_reader **ret);
void proc_reader_free(struct proc_reader *r);
/* Next chunk at the cursor, at most max bytes: 1 with a chunk (advance with
 * proc_reader_consume), 0 when nothing is available yet, -ENODATA at the
 * end (process exited and everything read, or process freed). */
int proc_reader_peek(struct proc_reader *r, size_t max, struct proc_chunk *ret);
void proc_reader_consume(struct proc_reader *r, size_t n);
uint64_t proc_reader_offset(const struct proc_reader *r);
/* The process, or NULL once it was freed. */
struct proc *proc_reader_proc(const struct proc_reader *r);
