/*
 * build-run.c - running a command of the package's on the host: the build
 * command and the contract stages, with a timeout, bounded output capture
 * and the tail of what it printed kept for the report.
 *
 * posix_spawn() in its own process group, stdin from /dev/null; a command
 * past its timeout is killed with its group. The builder runs what the
 * package says as the calling user: it builds only packages the user trusts.
 */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "toolkit/build-internal.h"
#include "toolkit/build.h"
#include "util/timeutil.h"

/* --- running commands --- */

void
tools_build_report_init(struct tools_build_report *rep)
{
    *rep = (struct tools_build_report){0};
    buf_init(&rep->log, BUF_UNLIMITED);
}

void
tools_build_report_done(struct tools_build_report *rep)
{
    buf_done(&rep->log);
}

/* Appends to the log, keeping only its last TOOLS_BUILD_LOG_TAIL_MAX bytes. */
static void
log_tail(struct buf *log, const char *p, size_t n)
{
    if (n >= TOOLS_BUILD_LOG_TAIL_MAX) {
        p += n - TOOLS_BUILD_LOG_TAIL_MAX;
        n = TOOLS_BUILD_LOG_TAIL_MAX;
        buf_reset(log);
    } else if (log->len + n > TOOLS_BUILD_LOG_TAIL_MAX) {
        buf_consume(log, log->len + n - TOOLS_BUILD_LOG_TAIL_MAX);
    }
    (void)buf_put(log, p, n); /* the tail is for people; losing it on OOM is fine */
}

void
build_log_printf(struct buf *log, const char *fmt, ...)
{
    char line[1024];
    va_list ap;

    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (n > 0)
        log_tail(log, line, MIN((size_t)n, sizeof(line) - 1));
}

/* Runs a command in its own process group with stdin from /dev/null. When
 * it exits, whatever it left running in its group is killed, so a stray
 * background process cannot hold the pipes open. Returns 0 and the exit
 * status (128 + N for signal N) or -errno: -ETIMEDOUT, -EFBIG for output
 * past out's max. */
int
build_run_command(const struct build_run_spec *s, int *ret_status, struct err *err)
{
    int outp[2] = {-EBADF, -EBADF}, errp[2] = {-EBADF, -EBADF};
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    sigset_t none, all;
    pid_t pid;
    int r;

    if (pipe2(errp, O_CLOEXEC) < 0 || (s->out && pipe2(outp, O_CLOEXEC) < 0)) {
        r = err_setx(err, errno, "cannot make a pipe");
        (void)safe_close(errp[0]);
        (void)safe_close(errp[1]);
        return r;
    }
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&at);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, s->out ? outp[1] : errp[1], 1);
    posix_spawn_file_actions_adddup2(&fa, errp[1], 2);
    if (s->cwd)
        posix_spawn_file_actions_addchdir_np(&fa, s->cwd);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                          POSIX_SPAWN_SETSIGDEF);
    posix_spawnattr_setpgroup(&at, 0);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setsigdefault(&at, &all);
    r = posix_spawn(&pid, s->argv[0], &fa, &at, s->argv, s->envp ? s->envp : environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    outp[1] = safe_close(outp[1]);
    errp[1] = safe_close(errp[1]);
    if (r != 0) {
        (void)safe_close(outp[0]);
        (void)safe_close(errp[0]);
        return err_set(err, r, "cannot run %s (%s): %s", s->what, s->argv[0], strerror(r));
    }

    _cleanup_close_ int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    _cleanup_close_ int ofd = outp[0];
    _cleanup_close_ int efd = errp[0];
    uint64_t deadline = now_msec() + s->timeout_ms;
    bool exited = false;
    char b[65536];
    r = 0;
    while (ofd >= 0 || efd >= 0 || !exited) {
        struct pollfd p[3] = {{ofd, POLLIN, 0}, {efd, POLLIN, 0}, {exited ? -1 : pidfd, POLLIN, 0}};
        uint64_t now = now_msec();
        if (now >= deadline) {
            r = err_set(err, ETIMEDOUT, "%s did not finish within %llu s", s->what,
                        (unsigned long long)(s->timeout_ms / 1000));
            break;
        }
        /* Without a pidfd (old kernel), look at the process every 50 ms. */
        int wait_ms = (int)MIN(deadline - now, pidfd >= 0 ? 60000 : 50);
        if (poll(p, 3, wait_ms) < 0 && errno != EINTR) {
            r = err_setx(err, errno, "poll");
            break;
        }
        for (int i = 0; i < 2; i++) {
            int *fd = i == 0 ? &ofd : &efd;
            if (*fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            ssize_t k = read(*fd, b, sizeof(b));
            if (k < 0 && errno == EINTR)
                continue;
            if (k <= 0) {
                *fd = safe_close(*fd);
                continue;
            }
            if (i == 1 || !s->out) {
                log_tail(s->log, b, (size_t)k);
            } else if (buf_put(s->out, b, (size_t)k) < 0) {
                r = err_set(err, EFBIG, "%s printed more than %zu bytes", s->what, s->out->max);
                break;
            }
        }
        if (r < 0)
            break;
        if (!exited) {
            siginfo_t si = {0};
            if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid) {
                /* A zombie still owns its pid, so the group id is safe to kill. */
                exited = true;
                (void)kill(-pid, SIGKILL);
            }
        }
    }
    if (r < 0)
        (void)kill(-pid, SIGKILL);
    siginfo_t si = {0};
    while (waitid(P_PID, (id_t)pid, &si, WEXITED) < 0 && errno == EINTR)
        ;
    if (r < 0)
        return r;
    *ret_status = si.si_code == CLD_EXITED ? si.si_status : 128 + si.si_status;
    return 0;
}

void
build_describe_status(int status, char *out, size_t n)
{
    if (status > 128)
        (void)snprintf(out, n, "was killed by signal %d (%s)", status - 128,
                       strsignal(status - 128));
    else
        (void)snprintf(out, n, "exited with status %d", status);
}
