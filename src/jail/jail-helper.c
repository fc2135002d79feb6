/*
 * jail-helper.c - starting a helper process for a jail from abxd (the
 * abx-fileops helper, which acts on a sandbox's files as the sandbox's
 * user), and giving it an id-mapped view of a directory tree.
 *
 * The helper is cloned with CLONE_VM | CLONE_VFORK from any thread and
 * execs straight away (child.c); which namespaces it joins is its own
 * business.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "jail/child.h"
#include "jail/jail.h"
#include "util/cleanup.h"
#include "util/fd.h"

int
jail_spawn_helper(int exec_fd, const int *fds, unsigned nfds, int *ret_pidfd, pid_t *ret_pid,
                  struct err *err)
{
    int pidfd = -1;
    _cleanup_close_ int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null_fd < 0)
        return err_setx(err, errno, "cannot open /dev/null");
    struct jail_helper_args a = {.exec_fd = exec_fd, .null_fd = null_fd};

    if (nfds > JAIL_HELPER_FDS)
        return err_set(err, E2BIG, "a helper gets at most %d descriptors", JAIL_HELPER_FDS);
    for (unsigned i = 0; i < JAIL_HELPER_FDS; i++)
        a.fds[i] = i < nfds ? fds[i] : -1;
    /* Any thread may spawn: each clone gets a stack of its own, and
     * CLONE_VFORK keeps this thread waiting until the child has exec'd. */
    const size_t stack_size = 64 * 1024;
    _cleanup_free_ char *stack = malloc(stack_size);
    if (!stack)
        return -ENOMEM;
    pid_t pid = clone(jail_helper_exec, stack + stack_size, CLONE_VM | CLONE_VFORK | CLONE_PIDFD,
                      &a, &pidfd);
    if (pid < 0)
        return err_setx(err, errno, "cannot start a helper process");
    *ret_pidfd = pidfd;
    *ret_pid = pid;
    return 0;
}

int
jail_idmap_tree(int userns_fd, int dirfd, bool ro, struct err *err)
{
    int t = (int)syscall(SYS_open_tree, dirfd, "",
                         OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
    if (t < 0)
        return err_setx(err, errno, "cannot clone a directory tree");
    struct mount_attr a = {
            .attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                        MOUNT_ATTR_NOEXEC | (ro ? MOUNT_ATTR_RDONLY : 0),
            .userns_fd = (uint64_t)userns_fd,
    };
    if (syscall(SYS_mount_setattr, t, "", AT_EMPTY_PATH, &a, sizeof(a)) < 0) {
        int r = err_setx(err, errno, "cannot map the ids of a directory tree");
        safe_close(t);
        return r;
    }
    /* An fd opened through the detached mount keeps it alive. */
    int fd = openat(t, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int r = fd < 0 ? err_setx(err, errno, "cannot open a mapped directory tree") : fd;
    safe_close(t);
    return r;
}
