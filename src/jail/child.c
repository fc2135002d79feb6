/*
 * child.c - post-clone, pre-exec code of a sandbox's first process.
 *
 * We are a copy of abxd's address space; anything we touch must be safe
 * after fork in a process that might have had other threads. So: raw
 * system calls, fixed arrays, and _exit on failure (abxd then sees the
 * control socket close before any READY and reports the create as failed).
 */
#include "child.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define INIT_CTL_FD  3
#define INIT_EXEC_FD 4

void
jail_child_exec(int ctlfd, int initfd, int nullfd)
{
    static char *const argv[] = {(char *)"abx-init", NULL};
    static char *const envp[] = {NULL};

    /* Move everything out of the way of the target numbers first. */
    int c = (int)syscall(SYS_fcntl, ctlfd, F_DUPFD, 16);
    int i = (int)syscall(SYS_fcntl, initfd, F_DUPFD, 16);
    int n = (int)syscall(SYS_fcntl, nullfd, F_DUPFD, 16);
    if (c < 0 || i < 0 || n < 0)
        _exit(127);
    if (syscall(SYS_dup2, n, 0) < 0 || syscall(SYS_dup2, n, 1) < 0 || syscall(SYS_dup2, n, 2) < 0)
        _exit(127);
    if (syscall(SYS_dup2, c, INIT_CTL_FD) < 0)
        _exit(127);
    if (syscall(SYS_dup3, i, INIT_EXEC_FD, O_CLOEXEC) < 0)
        _exit(127);
    if (syscall(SYS_close_range, INIT_EXEC_FD + 1, ~0U, 0) < 0) {
        for (int fd = INIT_EXEC_FD + 1; fd < 4096; fd++)
            (void)syscall(SYS_close, fd);
    }
    if (syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
        _exit(127);
    syscall(SYS_execveat, INIT_EXEC_FD, "", argv, envp, AT_EMPTY_PATH);
    _exit(127);
}
