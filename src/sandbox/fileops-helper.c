/*
 * fileops-helper.c - start an abx-fileops helper and greet it; receive a
 * packet from one within a deadline.
 *
 * Not the calls themselves (fileops.c): only what a helper needs before
 * its first request, so that a process that starts helpers for others
 * links the spawn and the HELLO and none of the file work.
 */
#include "sandbox/fileops-helper.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jail/jail.h"
#include "jail/rootfs.h"
#include "sandbox/fileops-proto.h"
#include "util/cleanup.h"
#include "util/fdpass.h"
#include "util/timeutil.h"

ssize_t
fileops_helper_recv(int sock, void *buf, size_t cap, int timeout_ms, const atomic_bool *cancel,
                    int *ret_fd, unsigned *ret_nfds)
{
    struct pollfd p = {.fd = sock, .events = POLLIN};
    uint64_t deadline = now_msec() + (uint64_t)timeout_ms;
    *ret_fd = -EBADF;
    *ret_nfds = 0;
    for (;;) {
        uint64_t now = now_msec();
        if (cancel && atomic_load(cancel))
            return -ESRCH;
        int left = now >= deadline ? 0 : (int)(deadline - now);
        int k = poll(&p, 1, left < FILEOPS_CANCEL_TICK_MS ? left : FILEOPS_CANCEL_TICK_MS);
        if (k == 0 && left > FILEOPS_CANCEL_TICK_MS)
            continue;
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return -errno;
        if (k == 0)
            return -ETIMEDOUT;
        break;
    }
    ssize_t n = fdpass_recv(sock, buf, cap, MSG_DONTWAIT, ret_fd, 1, ret_nfds);
    if (n == 0)
        return -ECONNRESET; /* the helper ended */
    return n;
}

int
fileops_jail_identity(const struct jail_host *h, const struct jail *j, bool as_root,
                      struct fileops_helper_spec *spec)
{
    enum jail_mode mode = jail_host_mode(h);
    if (mode != JAIL_NS && mode != JAIL_UID)
        return -EOPNOTSUPP;
    spec->ns = mode == JAIL_NS;
    spec->as_root = as_root;
    if (spec->ns) {
        spec->uid = spec->gid = as_root ? 0 : ROOTFS_USER_UID;
        spec->ids = (struct vfs_ids){.root_uid = 0,
                                     .root_gid = 0,
                                     .user_uid = ROOTFS_USER_UID,
                                     .user_gid = ROOTFS_USER_UID,
                                     .range_first = 0,
                                     .range_len = JAIL_UID_RANGE};
        spec->caps = as_root ? jail_root_caps() : 0;
    } else {
        /* uid mode: root and "user" run as the same pooled uid */
        spec->uid = (uint32_t)jail_user_uid(j);
        spec->gid = (uint32_t)jail_user_gid(j);
        spec->ids = fileops_jail_ids(jail_root_uid(j), jail_user_uid(j), jail_user_gid(j));
        spec->caps = 0;
    }
    jail_host_bpf(h, &spec->bpf, &spec->bpf_len);
    return 0;
}

/* Kills and reaps a helper we started that will not be handed out. */
static void
end_child(int pidfd)
{
    (void)syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
    siginfo_t si;
    while (waitid((idtype_t)P_PIDFD, (id_t)pidfd, &si, WEXITED | __WALL) < 0 && errno == EINTR)
        ;
    safe_close(pidfd);
}

int
fileops_helper_start(const struct fileops_helper_spec *spec, int *ret_sock, int *ret_pidfd,
                     pid_t *ret_pid, struct err *err)
{
    _cleanup_free_ char *buf = NULL;
    int sv[2], pidfd = -EBADF;
    pid_t pid = 0;
    int r;

    /* The greeting carries the seccomp program: too large for a stack. */
    buf = malloc(FOP_MSG_MAX);
    if (!buf)
        return -ENOMEM;
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
        return err_setx(err, errno, "cannot make the file helper's socket");
    /* Room for a whole batch in flight either way. */
    int sz = 4 * FOP_MSG_MAX;
    for (int i = 0; i < 2; i++) {
        (void)setsockopt(sv[i], SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz));
        (void)setsockopt(sv[i], SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof(sz));
    }
    int fds[4] = {sv[1], spec->ws_fd, spec->view_fd, spec->ns ? spec->userns_fd : -1};
    r = jail_spawn_helper(spec->image_fd, fds, 4, &pidfd, &pid, err);
    safe_close(sv[1]);
    if (r < 0) {
        safe_close(sv[0]);
        return r;
    }
    struct fop_hello hello = {
            .version = FOP_VERSION,
            .mode = spec->ns ? FOP_MODE_NS : FOP_MODE_UID,
            .uid = spec->uid,
            .gid = spec->gid,
            .as_root = spec->as_root,
            .ids = spec->ids,
            .caps = spec->caps,
            .bpf = spec->bpf,
            .bpf_len = (uint32_t)spec->bpf_len,
    };
    int n = fop_encode_hello(buf, FOP_MSG_MAX, &hello);
    if (n < 0) {
        end_child(pidfd);
        safe_close(sv[0]);
        return err_set(err, -n, "cannot encode the file helper's identity");
    }
    r = fdpass_send(sv[0], buf, (size_t)n, NULL, 0, 0);
    int fd;
    unsigned nfds;
    ssize_t k = r < 0 ? r
                      : fileops_helper_recv(sv[0], buf, FOP_MSG_MAX,
                                            spec->timeout_ms > 0 ? spec->timeout_ms
                                                                 : FILEOPS_HELLO_TIMEOUT_MS,
                                            spec->cancel, &fd, &nfds);
    struct fop_answer a;
    if (k < 0 || fop_decode_answer(buf, (size_t)k, nfds, &a) < 0 || a.type != FOP_R_OK) {
        if (k >= 0)
            safe_close(fd);
        end_child(pidfd);
        safe_close(sv[0]);
        return err_set(err, EIO, "cannot start the file helper of %s (%s)",
                       spec->label ? spec->label : "a sandbox",
                       k == -ETIMEDOUT ? "it did not answer" : "it could not become the user");
    }
    *ret_sock = sv[0];
    *ret_pidfd = pidfd;
    *ret_pid = pid;
    return 0;
}

/* The static abx-fileops binary, embedded by fileops-blob.S. */
extern const char abx_fileops_blob[];
extern const char abx_fileops_blob_end[];

int
fileops_helper_image(void)
{
    return jail_image_fd("abx-fileops", abx_fileops_blob,
                         (size_t)(abx_fileops_blob_end - abx_fileops_blob), NULL);
}

int
fileops_parent_helper(void *ud, struct jail *j, int view_fd, bool as_root, int *ret_sock,
                      int *ret_pidfd, struct err *err)
{
    const struct fileops_parent *p = ud;
    _cleanup_close_ int userns = -EBADF;
    char label[96];
    pid_t pid;

    (void)snprintf(label, sizeof(label), "sandbox '%s'", jail_id(j));
    struct fileops_helper_spec spec = {
            .image_fd = p->image_fd,
            .ws_fd = jail_workspace_fd(j),
            .view_fd = view_fd >= 0 ? view_fd : -1,
            .userns_fd = -1,
            .label = label,
            .timeout_ms = FILEOPS_PARENT_HELLO_TIMEOUT_MS,
    };
    int r = fileops_jail_identity(p->host, j, as_root, &spec);
    if (r < 0)
        return err_set(err, -r, "%s has no file helper (no isolation)", label);
    if (spec.ns) {
        userns = jail_open_userns(j);
        if (userns < 0)
            return err_setx(err, -userns, "cannot open the user namespace of %s", label);
        spec.userns_fd = userns;
    }
    return fileops_helper_start(&spec, ret_sock, ret_pidfd, &pid, err);
}
