/*
 * child.c - post-clone, pre-exec code of a sandbox's first process.
 *
 * We share abxd's address space (CLONE_VM) while abxd's loop thread waits
 * for our exec (CLONE_VFORK), and other abxd threads may run meanwhile. So:
 * raw system calls, nothing written but our own stack, and _exit on failure
 * (abxd then sees the control socket close before any READY and reports the
 * create as failed). Sharing the memory spares copying abxd's page tables
 * for a child that only execs.
 */
#include "jail/child.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define INIT_CTL_FD  3
#define INIT_EXEC_FD 4

int
jail_child_exec(void *args)
{
    static char *const argv[] = {(char *)"abx-init", NULL};
    static char *const envp[] = {NULL};
    const struct jail_child_args *a = args;
    int ctlfd = a->ctlfd, initfd = a->initfd, nullfd = a->nullfd;

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

int
jail_helper_exec(void *args)
{
    static char *const argv[] = {(char *)"abx-helper", NULL};
    static char *const envp[] = {NULL};
    const struct jail_helper_args *a = args;
    int moved[JAIL_HELPER_FDS];
    const int base = 3 + JAIL_HELPER_FDS + 1; /* above every target number */

    int x = (int)syscall(SYS_fcntl, a->exec_fd, F_DUPFD, base);
    int n = (int)syscall(SYS_fcntl, a->null_fd, F_DUPFD, base);
    if (x < 0 || n < 0)
        _exit(127);
    for (int i = 0; i < JAIL_HELPER_FDS; i++) {
        moved[i] = a->fds[i] < 0 ? -1 : (int)syscall(SYS_fcntl, a->fds[i], F_DUPFD, base);
        if (a->fds[i] >= 0 && moved[i] < 0)
            _exit(127);
    }
    if (syscall(SYS_dup2, n, 0) < 0 || syscall(SYS_dup2, n, 1) < 0 || syscall(SYS_dup2, n, 2) < 0)
        _exit(127);
    for (int i = 0; i < JAIL_HELPER_FDS; i++) {
        if (moved[i] < 0)
            (void)syscall(SYS_close, 3 + i);
        else if (syscall(SYS_dup2, moved[i], 3 + i) < 0)
            _exit(127);
    }
    /* The image survives until the exec (CLOEXEC closes it then). */
    if (syscall(SYS_dup3, x, 3 + JAIL_HELPER_FDS, O_CLOEXEC) < 0)
        _exit(127);
    if (syscall(SYS_close_range, 3 + JAIL_HELPER_FDS + 1, ~0U, 0) < 0) {
        for (int fd = 3 + JAIL_HELPER_FDS + 1; fd < 65536; fd++)
            (void)syscall(SYS_close, fd);
    }
    syscall(SYS_execveat, 3 + JAIL_HELPER_FDS, "", argv, envp, AT_EMPTY_PATH);
    _exit(127);
}
