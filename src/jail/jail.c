/*
 * jail.c - sandbox creation, the control channel to init, and teardown.
 *
 * Creation: take a uid slot, make the state directory and workspace (on
 * the bounded disk, disk.h: a subvolume with the sandbox's quota), make
 * the cgroup and set its limits, clone() into a new pid namespace and exec
 * the embedded abx-init, protect it from the OOM killer and send it its
 * configuration. init joins its cgroups, makes its other namespaces and its
 * root, then reports NEED_MAP (we write its uid/gid maps) and READY.
 *
 * Teardown: SIGKILL init (its pid namespace dies with it; uid mode kills
 * the cgroup instead), reap it through its pidfd, remove the cgroup
 * (retrying while the kernel finishes), the directory (one ioctl for a
 * subvolume, a walk of the tree without a disk, off the loop either way),
 * and free the uid slot. Only then is the owner told the jail is gone.
 *
 * The host all jails share is jail-host.c's; starting helper processes for
 * a jail is jail-helper.c's.
 */
#include "jail/jail.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jail/caps.h"
#include "jail/child.h"
#include "jail/disk.h"
#include "jail/jail-internal.h"
#include "jail/proto.h"
#include "jail/rootfs.h"
#include "jail/uidpool.h"
#include "util/cleanup.h"
#include "util/fd.h"
#include "util/parse.h"
#include "util/timeutil.h"
#include "util/workq.h"

#define JAIL_CREATE_TIMEOUT_MS 15000 /* init must be ready by then */
#define JAIL_KILL_GRACE_MS     2000  /* none mode: init gets this long to clean up */
#define JAIL_CGROUP_RETRY_MS   20
#define JAIL_CGROUP_RETRIES    250
#define JAIL_CTL_SNDBUF        (4 * 1024 * 1024)
#define JAIL_RX_MAX            4096 /* init's messages to us are all small */
#define JAIL_RX_BATCH          64

enum jail_state { J_CREATING, J_READY, J_DYING, J_GONE };

struct jail {
    struct jail_host *host;
    struct loop *loop;
    char id[64];
    enum jail_state state;
    bool was_ready;
    bool have_slot, have_cgroup, have_dir;
    uint32_t slot;
    uid_t root_uid;
    int wsfd;
    char ws_path[PATH_MAX + 128];
    int ctl;
    struct loop_io *ctl_io;
    int pidfd;
    struct loop_io *pid_io;
    pid_t pid;
    struct loop_timer *timer;
    int cg_tries;
    const struct jail_callbacks *cb;
    void *userdata;
    uint64_t t0;
    struct jail_timings t;
    int failure;
    struct err err;
    char **layers; /* copied from struct jail_fs */
    size_t nlayers;
    char *upper;
    uint64_t disk_bytes;
    uint64_t disk_limit; /* the bound of its directory (disk.h) */
};

/* --- one jail --- */

static void teardown(struct jail *j);

/* Whether path is a directory without entries; one that cannot be read
 * counts as empty (it is not bound). */
static bool
dir_is_empty(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return true;
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return true;
    }
    bool empty = true;
    for (struct dirent *de = readdir(d); de && empty; de = readdir(d))
        empty = !strcmp(de->d_name, ".") || !strcmp(de->d_name, "..");
    closedir(d);
    return empty;
}

/* Sends SIGKILL to the process behind pidfd, which may be gone already. */
static void
pidfd_kill(int pidfd)
{
    (void)syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
}

/* Kills init and waits until it is reaped, where no loop will see it exit:
 * creation failed after clone(), or the jail is freed while it runs. */
static void
kill_and_reap(int pidfd)
{
    pidfd_kill(pidfd);
    (void)waitid((idtype_t)P_PIDFD, (id_t)pidfd, NULL, WEXITED);
}

static void
finish(struct jail *j)
{
    j->state = J_GONE;
    if (j->was_ready) {
        if (j->cb->gone)
            j->cb->gone(j, j->userdata);
    } else {
        if (!j->failure)
            j->failure = -ECANCELED;
        (void)err_set(&j->err, -j->failure, "sandbox was killed while being created");
        j->cb->ready(j, j->failure, &j->err, j->userdata);
    }
    /* j may be freed by now */
}

/* Removes the sandbox's directory: its subvolume in one ioctl, or the
 * tree without a disk. */
static void
remove_dir(struct jail *j)
{
    if (j->host->disk)
        (void)disk_area_destroy(j->host->disk, j->id, NULL);
    else
        (void)rm_rf_at(j->host->sandboxes_fd, j->id);
}

static void
release_resources(struct jail *j)
{
    if (j->have_dir) {
        safe_close(j->wsfd);
        j->wsfd = -EBADF;
        remove_dir(j);
        j->have_dir = false;
    }
    if (j->have_slot) {
        uidpool_release(j->host->pool, j->slot);
        j->have_slot = false;
    }
}

static void
on_timer(struct loop_timer *t, void *ud)
{
    struct jail *j = ud;
    (void)t;

    if (j->state == J_CREATING) {
        (void)err_set(&j->err, ETIMEDOUT, "sandbox init did not become ready in %d ms",
                      JAIL_CREATE_TIMEOUT_MS);
        j->failure = -ETIMEDOUT;
        jail_kill(j);
    } else if (j->state == J_DYING && j->pid > 0) {
        /* none mode: init had its grace period */
        pidfd_kill(j->pidfd);
    } else if (j->state == J_DYING && j->have_cgroup) {
        teardown(j);
    }
}

/* Runs on the worker thread: a workspace can hold millions of files. */
static void
rm_work(void *ud)
{
    struct jail *j = ud;
    remove_dir(j);
}

static void
rm_done(void *ud)
{
    struct jail *j = ud;
    j->have_dir = false;
    release_resources(j);
    finish(j);
}

static void
teardown(struct jail *j)
{
    if (j->have_cgroup) {
        int r = cgroup_destroy(j->host->cg, j->id);
        if (r == -EBUSY && ++j->cg_tries < JAIL_CGROUP_RETRIES) {
            (void)loop_timer_arm(j->timer, now_msec() + JAIL_CGROUP_RETRY_MS);
            return;
        }
        /* Anything still there is removed by the next start's reclaim. */
        j->have_cgroup = false;
    }
    loop_timer_disarm(j->timer);
    if (j->have_dir && j->host->wq) {
        /* Everything in the sandbox is dead, so nothing writes the tree
         * any more; drop our handle on it and delete it off the loop. */
        j->wsfd = safe_close(j->wsfd);
        if (workq_submit(j->host->wq, rm_work, rm_done, j) == 0)
            return;
    }
    release_resources(j);
    finish(j);
}

static void
on_init_exit(struct loop_io *io, uint32_t revents, void *ud)
{
    struct jail *j = ud;
    (void)io;
    (void)revents;

    siginfo_t si;
    memset(&si, 0, sizeof(si));
    (void)waitid((idtype_t)P_PIDFD, (id_t)j->pidfd, &si, WEXITED | WNOHANG);
    if (si.si_pid == 0)
        return; /* spurious */
    loop_io_free(j->pid_io);
    j->pid_io = NULL;
    safe_close(j->pidfd);
    j->pidfd = -EBADF;
    j->pid = 0;
    loop_io_free(j->ctl_io);
    j->ctl_io = NULL;
    safe_close(j->ctl);
    j->ctl = -EBADF;
    if (j->state != J_DYING) {
        /* init died on its own: the sandbox is gone either way. */
        if (j->state == J_CREATING && !j->failure) {
            j->failure = -EIO;
            (void)err_set(&j->err, EIO, "sandbox init exited during set-up");
        }
        j->state = J_DYING;
    }
    if (j->host->mode == JAIL_UID)
        (void)cgroup_kill_all(j->host->cg, j->id);
    teardown(j);
}

static int
write_maps(struct jail *j)
{
    char path[64], map[64];
    int r;

    (void)snprintf(map, sizeof(map), "0 %u %u\n", (unsigned)j->root_uid, JAIL_UID_RANGE);
    (void)snprintf(path, sizeof(path), "/proc/%d/uid_map", (int)j->pid);
    r = write_existing_at(AT_FDCWD, path, map);
    if (r < 0)
        return err_setx(&j->err, -r, "cannot write '%s'", path);
    (void)snprintf(path, sizeof(path), "/proc/%d/gid_map", (int)j->pid);
    r = write_existing_at(AT_FDCWD, path, map);
    if (r < 0)
        return err_setx(&j->err, -r, "cannot write '%s'", path);
    return 0;
}

static int
send_simple(struct jail *j, uint32_t type)
{
    char b[64];
    struct proto_writer w;
    proto_writer_init(&w, b, sizeof(b), type);
    long n = proto_writer_finish(&w);
    if (n < 0)
        return (int)n;
    if (send(j->ctl, b, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
        return -errno;
    return 0;
}

static void
protocol_violation(struct jail *j, const char *what)
{
    if (j->state == J_CREATING && !j->failure) {
        j->failure = -EPROTO;
        (void)err_set(&j->err, EPROTO, "sandbox init broke protocol: %s", what);
    }
    jail_kill(j);
}

static void
handle_event(struct jail *j, const struct proto_event *ev)
{
    switch (ev->type) {
    case PROTO_NEED_MAP:
        if (j->state != J_CREATING || j->host->mode != JAIL_NS) {
            protocol_violation(j, "unexpected map request");
            return;
        }
        if (write_maps(j) < 0 || send_simple(j, PROTO_MAPPED) < 0) {
            j->failure = -EIO;
            (void)err_set(&j->err, EIO, "cannot map the sandbox user namespace");
            jail_kill(j);
        }
        return;
    case PROTO_READY:
        if (j->state != J_CREATING) {
            protocol_violation(j, "unexpected READY");
            return;
        }
        j->state = J_READY;
        j->was_ready = true;
        loop_timer_disarm(j->timer);
        j->t.init_us = ev->usec;
        j->t.total_us = now_usec() - j->t0;
        j->cb->ready(j, 0, NULL, j->userdata);
        return;
    case PROTO_FAILED:
        if (j->state == J_CREATING && !j->failure) {
            j->failure = -(int)ev->errnum;
            char tmp[128];
            (void)err_set(&j->err, (int)ev->errnum, "sandbox set-up failed at '%.64s': %s",
                          ev->step, strerror_r((int)ev->errnum, tmp, sizeof(tmp)));
        }
        jail_kill(j);
        return;
    case PROTO_SPAWNED:
        if (j->state != J_READY)
            return;
        if (j->cb->spawned)
            j->cb->spawned(j, ev->token, ev->pid > 0 ? ev->pid : 0,
                           ev->pid > 0 ? 0 : -(int)ev->errnum, ev->step, j->userdata);
        return;
    case PROTO_EXITED:
        if (j->state != J_READY)
            return;
        if (j->cb->exited)
            j->cb->exited(j, ev->pid, ev->status, j->userdata);
        return;
    default:
        protocol_violation(j, "unknown message");
    }
}

static void
on_ctl(struct loop_io *io, uint32_t revents, void *ud)
{
    struct jail *j = ud;
    static char rx[JAIL_RX_MAX];
    (void)io;
    (void)revents;

    for (int i = 0; i < JAIL_RX_BATCH && j->ctl >= 0 && j->state != J_GONE; i++) {
        char cbuf[CMSG_SPACE(sizeof(int) * 8)];
        struct iovec iov = {rx, sizeof(rx)};
        struct msghdr mh = {.msg_iov = &iov,
                            .msg_iovlen = 1,
                            .msg_control = cbuf,
                            .msg_controllen = sizeof(cbuf)};
        ssize_t k = recvmsg(j->ctl, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (k < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        /* init never sends descriptors: close any it tries to give us. */
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
            if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
                size_t n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                for (size_t f = 0; f < n; f++) {
                    int fd;
                    memcpy(&fd, CMSG_DATA(cm) + f * sizeof(int), sizeof(int));
                    safe_close(fd);
                }
                protocol_violation(j, "sent descriptors");
                return;
            }
        }
        if (k <= 0) {
            /* init closed its end: it is exiting. The pidfd finishes the job. */
            loop_io_free(j->ctl_io);
            j->ctl_io = NULL;
            if (j->state == J_CREATING && !j->failure) {
                j->failure = -EIO;
                (void)err_set(&j->err, EIO, "sandbox init exited during set-up");
            }
            if (j->state != J_DYING)
                jail_kill(j);
            return;
        }
        if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
            protocol_violation(j, "oversized message");
            return;
        }
        struct proto_event ev;
        if (proto_decode_event(rx, (size_t)k, &ev) < 0) {
            protocol_violation(j, "malformed message");
            return;
        }
        handle_event(j, &ev);
    }
}

static int
prepare_dirs(struct jail *j, struct err *err)
{
    struct jail_host *h = j->host;

    if (h->disk) {
        int r = disk_area_create(h->disk, j->id, j->disk_limit, err);
        if (r < 0)
            return r;
    } else if (mkdirat(h->sandboxes_fd, j->id, 0700) < 0) {
        return err_setx(err, errno, "cannot create '%s/%s'", h->sandboxes_dir, j->id);
    }
    j->have_dir = true;
    /* uid mode has no mount namespace: the sandbox's uid itself walks the
     * host path to its workspace, so the directories above it must be
     * searchable (not listable). The workspace stays 0700 to its owner. */
    if (h->mode == JAIL_UID && fchmodat(h->sandboxes_fd, j->id, 0711, 0) < 0)
        return err_setx(err, errno, "cannot chmod '%s/%s'", h->sandboxes_dir, j->id);
    (void)snprintf(j->ws_path, sizeof(j->ws_path), "%s/%s/home", h->sandboxes_dir, j->id);
    _cleanup_close_ int dfd = openat(h->sandboxes_fd, j->id, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return err_setx(err, errno, "cannot open '%s/%s'", h->sandboxes_dir, j->id);
    if (mkdirat(dfd, "home", 0755) < 0)
        return err_setx(err, errno, "cannot create '%s'", j->ws_path);
    if (h->mode != JAIL_NONE) {
        if (fchownat(dfd, "home", jail_user_uid(j), jail_user_gid(j), AT_SYMLINK_NOFOLLOW) < 0)
            return err_setx(err, errno, "cannot chown '%s'", j->ws_path);
        if (h->mode == JAIL_UID && fchmodat(dfd, "home", 0700, 0) < 0)
            return err_setx(err, errno, "cannot chmod '%s'", j->ws_path);
    }
    j->wsfd = openat(dfd, "home", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (j->wsfd < 0)
        return err_setx(err, errno, "cannot open '%s'", j->ws_path);
    return 0;
}

static int
send_config(struct jail *j, struct err *err)
{
    struct jail_host *h = j->host;
    struct proto_config c = {
            .version = PROTO_VERSION,
            .mode = h->mode == JAIL_NS    ? PROTO_MODE_NS
                    : h->mode == JAIL_UID ? PROTO_MODE_UID
                                          : PROTO_MODE_NONE,
            .user_uid = (uint32_t)jail_user_uid(j),
            .user_gid = (uint32_t)jail_user_gid(j),
            .root_uid_host = (uint32_t)j->root_uid,
            .root_gid_host = (uint32_t)j->root_uid,
            .tty_gid_host = (uint32_t)j->root_uid + ROOTFS_TTY_GID,
            .root_bytes = h->root_bytes,
            .tmp_bytes = h->tmp_bytes,
            .shm_bytes = h->shm_bytes,
            .rootmnt = h->rootmnt,
            .workspace = j->ws_path,
            .etc = h->etc,
            .hostname = ROOTFS_HOSTNAME,
            .bpf = h->bpf.data,
            .bpf_len = (uint32_t)h->bpf.len,
            .upper = j->upper ? j->upper : "",
            .upper_bytes = j->disk_bytes,
            .sudo = h->sudo,
    };
    if (j->disk_bytes)
        c.root_bytes = j->disk_bytes;
    for (size_t i = 0; i < j->nlayers && i < PROTO_MAX_LAYERS; i++)
        c.layers[c.nlayers++] = j->layers[i];
    for (size_t i = 0; i < h->nbinds && c.nbinds < PROTO_MAX_BINDS; i++) {
        if (h->binds[i].if_nonempty && dir_is_empty(h->binds[i].src))
            continue;
        c.binds[c.nbinds].src = h->binds[i].src;
        c.binds[c.nbinds].dst = h->binds[i].dst;
        c.binds[c.nbinds].flags = h->binds[i].ro ? PROTO_BIND_RO : 0;
        c.nbinds++;
    }
    char cgpaths[PROTO_MAX_CGROUPS][512];
    if (j->have_cgroup) {
        int n = cgroup_procs_paths(h->cg, j->id, cgpaths, PROTO_MAX_CGROUPS);
        if (n < 0)
            return err_setx(err, -n, "cannot name the cgroups of '%s'", j->id);
        for (int i = 0; i < n; i++)
            c.cgroups[i] = cgpaths[i];
        c.ncgroups = (uint32_t)n;
    }
    _cleanup_free_ char *b = malloc(64 * 1024 + h->bpf.len);
    if (!b)
        return -ENOMEM;
    struct proto_writer w;
    proto_writer_init(&w, b, 64 * 1024 + h->bpf.len, PROTO_CONFIG);
    int r = proto_encode_config(&w, &c);
    if (r < 0)
        return err_setx(err, -r, "cannot encode the sandbox configuration");
    if (send(j->ctl, b, w.len, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
        return err_setx(err, errno, "cannot send the sandbox configuration");
    return 0;
}

/* The stack the clone child runs on until it execs init. One is enough:
 * only the loop thread clones, and CLONE_VFORK holds it until the exec. */
static char child_stack[64 * 1024] __attribute__((aligned(16)));

static int
clone_init(struct jail *j, int child_end, struct err *err)
{
    struct jail_host *h = j->host;
    struct jail_child_args args = {child_end, h->init_fd, h->null_fd};
    int flags = CLONE_VM | CLONE_VFORK | CLONE_PIDFD | SIGCHLD;
    int pidfd = -1;

    /* Only the pid namespace must exist at clone time (init is its pid 1);
     * init makes the others itself, so their cost is not the loop's. */
    if (h->mode == JAIL_NS)
        flags |= CLONE_NEWPID;
    pid_t pid = clone(jail_child_exec, child_stack + sizeof(child_stack), flags, &args, &pidfd);
    if (pid < 0)
        return err_setx(err, errno, "cannot clone the sandbox init");
    j->pid = pid;
    j->pidfd = pidfd;
    return 0;
}

static int
copy_fs(struct jail *j, const struct jail_fs *fs, struct err *err)
{
    if (!fs)
        return 0;
    _Static_assert(JAIL_MAX_LAYERS <= PROTO_MAX_LAYERS, "layers fit in the config");
    if (fs->nlayers > JAIL_MAX_LAYERS)
        return err_set(err, E2BIG, "%zu layers, at most %d", fs->nlayers, JAIL_MAX_LAYERS);
    if ((fs->nlayers || fs->upper_area) && j->host->mode != JAIL_NS)
        return err_set(err, EOPNOTSUPP, "layers need the ns isolation mode");
    j->disk_bytes = fs->disk_bytes;
    if (fs->upper_area) {
        char up[PATH_MAX + JAIL_LAYER_NAME_MAX + 8];
        if (!jail_layer_name_ok(fs->upper_area) || !strchr(fs->upper_area, '-'))
            return err_set(err, EINVAL, "'%.64s' is no area's name", fs->upper_area);
        (void)snprintf(up, sizeof(up), "%s/fs", fs->upper_area);
        if (mkdirat(j->host->sandboxes_fd, up, 0755) < 0 && errno != EEXIST)
            return err_set(err, errno, "cannot make the writable layer in area '%s'",
                           fs->upper_area);
        if ((size_t)snprintf(up, sizeof(up), "%s/%s/fs", j->host->sandboxes_dir, fs->upper_area) >=
            sizeof(up))
            return err_set(err, ENAMETOOLONG, "the area's path is too long");
        if (!(j->upper = strdup(up)))
            return -ENOMEM;
    }
    if (fs->nlayers && !(j->layers = calloc(fs->nlayers, sizeof(*j->layers))))
        return -ENOMEM;
    for (; j->nlayers < fs->nlayers; j->nlayers++)
        if (!(j->layers[j->nlayers] = strdup(fs->layers[j->nlayers])))
            return -ENOMEM;
    return 0;
}

int
jail_create(struct jail_host *h, struct loop *loop, const char *id,
            const struct jail_limits *limits, const struct jail_fs *fs,
            const struct jail_callbacks *cb, void *userdata, struct jail **ret, struct err *err)
{
    int r;
    int sp[2] = {-EBADF, -EBADF};
    int sz = JAIL_CTL_SNDBUF;
    char path[64];
    uint64_t t1;
    struct cgroup_limits cl = {limits->memory_bytes, limits->cpu_millis, limits->pids};

    if (strlen(id) == 0 || strlen(id) >= sizeof(((struct jail *)0)->id))
        return err_set(err, EINVAL, "invalid sandbox id");
    if (h->missing[0])
        return err_set(err, EOPNOTSUPP, "isolation mode '%s' is not available: %s",
                       jail_mode_name(h->mode), h->missing);
    struct jail *j = calloc(1, sizeof(*j));
    if (!j)
        return -ENOMEM;
    j->host = h;
    j->loop = loop;
    j->cb = cb;
    j->userdata = userdata;
    j->wsfd = j->ctl = j->pidfd = -EBADF;
    j->t0 = now_usec();
    j->disk_limit = limits->disk_bytes ? limits->disk_bytes : h->disk_bytes;
    (void)strscpy(j->id, id, sizeof(j->id));
    r = copy_fs(j, fs, err);
    if (r < 0)
        goto fail;
    r = loop_timer_new(loop, on_timer, j, &j->timer);
    if (r < 0)
        goto fail;

    if (h->mode != JAIL_NONE) {
        r = uidpool_acquire(h->pool, &j->slot);
        if (r < 0) {
            r = err_setx(err, -r, "no free uid range for another sandbox");
            goto fail;
        }
        j->have_slot = true;
        j->root_uid = uidpool_first_uid(h->pool, j->slot);
    } else {
        j->root_uid = geteuid();
    }
    r = prepare_dirs(j, err);
    if (r < 0)
        goto fail;
    if (h->mode != JAIL_NONE) {
        r = cgroup_create(h->cg, j->id, err);
        if (r < 0)
            goto fail;
        j->have_cgroup = true;
        r = cgroup_set_limits(h->cg, j->id, &cl, err);
        if (r < 0)
            goto fail;
    }
    j->t.prepare_us = now_usec() - j->t0;

    t1 = now_usec();
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0) {
        r = err_setx(err, errno, "socketpair");
        goto fail;
    }
    if (setsockopt(sp[0], SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz)) < 0)
        (void)setsockopt(sp[0], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
    r = clone_init(j, sp[1], err);
    safe_close(sp[1]);
    sp[1] = -EBADF;
    if (r < 0)
        goto fail;
    j->ctl = TAKE_FD(sp[0]);

    /* From here on a failure is handled by killing init. */
    j->state = J_CREATING;
    r = loop_io_add(loop, j->pidfd, EPOLLIN, on_init_exit, j, &j->pid_io);
    if (r < 0) {
        kill_and_reap(j->pidfd);
        r = err_setx(err, -r, "cannot watch the sandbox init");
        goto fail;
    }
    /* The OOM killer must take a sandbox's processes, never its init (the
     * whole sandbox would go). Needs CAP_SYS_RESOURCE; see jail_host_new. */
    (void)snprintf(path, sizeof(path), "/proc/%d/oom_score_adj", (int)j->pid);
    if (h->mode != JAIL_NONE && h->oom_protect)
        (void)write_existing_at(AT_FDCWD, path, "-1000");
    /* init joins its cgroups itself (see proto.h). */
    r = send_config(j, err);
    if (r >= 0)
        r = loop_io_add(loop, j->ctl, EPOLLIN, on_ctl, j, &j->ctl_io);
    if (r < 0) {
        j->failure = r;
        if (err && err_isset(err))
            j->err = *err;
        /* Async cleanup; report synchronously by returning the jail anyway
         * would confuse callers, so kill and wait here (init is new). */
        kill_and_reap(j->pidfd);
        loop_io_free(j->pid_io);
        j->pid_io = NULL;
        goto fail;
    }
    (void)loop_timer_arm(j->timer, now_msec() + JAIL_CREATE_TIMEOUT_MS);
    j->t.clone_us = now_usec() - t1;
    *ret = j;
    return 0;

fail:
    safe_close(sp[0]);
    safe_close(sp[1]);
    if (j->have_cgroup) {
        for (int i = 0; i < 50 && cgroup_destroy(h->cg, j->id) == -EBUSY; i++)
            (void)usleep(2000);
        j->have_cgroup = false;
    }
    release_resources(j);
    j->state = J_GONE;
    jail_free(j);
    return r < 0 ? r : -EIO;
}

void
jail_set_callbacks(struct jail *j, const struct jail_callbacks *cb, void *userdata)
{
    j->cb = cb;
    j->userdata = userdata;
}

int
jail_spawn(struct jail *j, uint64_t token, const struct jail_spawn *sp, struct err *err)
{
    struct jail_host *h = j->host;
    uint32_t uid, gid;

    if (j->state != J_READY)
        return err_set(err, ESRCH, "sandbox '%s' is not running", j->id);
    if (h->mode == JAIL_NS) {
        uid = gid = sp->root ? 0 : ROOTFS_USER_UID;
    } else {
        uid = (uint32_t)jail_user_uid(j);
        gid = (uint32_t)jail_user_gid(j);
    }
    /* One loop thread, so one encoding buffer: a 256 KiB malloc per spawn
     * would be an mmap/munmap pair on the hot path. */
    static char b[PROTO_MAX_MSG];
    struct proto_writer w;
    proto_writer_init(&w, b, sizeof(b), PROTO_SPAWN);
    int r = proto_encode_spawn(&w, token, uid, gid, PROTO_SPAWN_SETSID, sp->cwd, sp->argv, sp->env);
    if (r < 0)
        return err_set(err, E2BIG, "argv and env are larger than %d bytes (or %d entries)",
                       PROTO_MAX_MSG, PROTO_MAX_ARGS);

    char cbuf[CMSG_SPACE(sizeof(int) * 3)];
    memset(cbuf, 0, sizeof(cbuf));
    struct iovec iov = {b, w.len};
    struct msghdr mh = {
            .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int) * 3);
    memcpy(CMSG_DATA(cm), sp->fds, sizeof(int) * 3);
    if (sendmsg(j->ctl, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
        if (errno == EAGAIN)
            return err_set(err, EAGAIN, "sandbox '%s' is busy; try again", j->id);
        return err_setx(err, errno, "cannot reach the init of sandbox '%s'", j->id);
    }
    return 0;
}

int
jail_signal(struct jail *j, pid_t pid, int sig, bool group)
{
    char b[64];
    struct proto_writer w;

    if (j->state != J_READY)
        return -ESRCH;
    proto_writer_init(&w, b, sizeof(b), PROTO_SIGNAL);
    proto_put_u32(&w, (uint32_t)pid);
    proto_put_u32(&w, (uint32_t)sig);
    proto_put_u32(&w, group ? PROTO_SIGNAL_GROUP : 0);
    long n = proto_writer_finish(&w);
    if (n < 0)
        return (int)n;
    if (send(j->ctl, b, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
        return -errno;
    return 0;
}

int
jail_set_limits(struct jail *j, const struct jail_limits *l, struct err *err)
{
    if (!j->have_cgroup)
        return err_set(err, EOPNOTSUPP, "limits need a cgroup (isolation mode '%s')",
                       jail_mode_name(j->host->mode));
    struct cgroup_limits cl = {l->memory_bytes, l->cpu_millis, l->pids};
    int r = cgroup_set_limits(j->host->cg, j->id, &cl, err);
    uint64_t disk = l->disk_bytes ? l->disk_bytes : j->host->disk_bytes;
    if (r < 0 || !j->host->disk || disk == j->disk_limit)
        return r;
    r = disk_area_limit(j->host->disk, j->id, disk, err);
    if (r == 0)
        j->disk_limit = disk;
    return r;
}

int
jail_stats(struct jail *j, struct cgroup_stats *ret)
{
    memset(ret, 0, sizeof(*ret));
    if (!j->have_cgroup)
        return -EOPNOTSUPP;
    return cgroup_get_stats(j->host->cg, j->id, ret);
}

int
jail_disk_usage(struct jail *j, uint64_t *ret_bytes)
{
    if (!j->host->disk || !j->have_dir)
        return -EOPNOTSUPP;
    return disk_area_usage(j->host->disk, j->id, ret_bytes, NULL);
}

int
jail_freeze(struct jail *j, bool frozen, struct err *err)
{
    if (!j->have_cgroup)
        return err_set(err, EOPNOTSUPP, "freezing needs a cgroup");
    return cgroup_freeze(j->host->cg, j->id, frozen, err);
}

void
jail_kill(struct jail *j)
{
    if (j->state == J_DYING || j->state == J_GONE)
        return;
    j->state = J_DYING;
    loop_timer_disarm(j->timer);
    if (j->pidfd < 0) {
        teardown(j);
        return;
    }
    /* A frozen (paused) jail's processes cannot act on SIGKILL until thawed
     * (cgroup v1 freezer): a kill always thaws. */
    if (j->have_cgroup)
        (void)cgroup_freeze(j->host->cg, j->id, false, NULL);
    switch (j->host->mode) {
    case JAIL_NS:
        /* pid 1 dies, and the kernel kills its namespace with it. */
        pidfd_kill(j->pidfd);
        break;
    case JAIL_UID:
        (void)cgroup_kill_all(j->host->cg, j->id);
        pidfd_kill(j->pidfd);
        break;
    default:
        /* none: init kills the process groups it started when we hang up. */
        if (j->ctl >= 0)
            (void)shutdown(j->ctl, SHUT_RDWR);
        (void)loop_timer_arm(j->timer, now_msec() + JAIL_KILL_GRACE_MS);
        break;
    }
}

void
jail_free(struct jail *j)
{
    if (!j)
        return;
    loop_io_free(j->ctl_io);
    loop_io_free(j->pid_io);
    safe_close(j->ctl);
    if (j->pidfd >= 0) {
        kill_and_reap(j->pidfd);
        safe_close(j->pidfd);
    }
    if (j->have_cgroup)
        (void)cgroup_destroy(j->host->cg, j->id);
    release_resources(j);
    loop_timer_free(j->timer);
    for (size_t i = 0; i < j->nlayers; i++)
        free(j->layers[i]);
    free(j->layers);
    free(j->upper);
    free(j);
}

const char *
jail_id(const struct jail *j)
{
    return j->id;
}

const struct jail_timings *
jail_get_timings(const struct jail *j)
{
    return &j->t;
}

bool
jail_is_ready(const struct jail *j)
{
    return j->state == J_READY;
}

int
jail_workspace_fd(const struct jail *j)
{
    return j->wsfd;
}

const char *
jail_workspace_path(const struct jail *j)
{
    return j->ws_path;
}

uid_t
jail_user_uid(const struct jail *j)
{
    if (j->host->mode == JAIL_NONE)
        return geteuid();
    return j->root_uid + ROOTFS_USER_UID;
}

gid_t
jail_user_gid(const struct jail *j)
{
    if (j->host->mode == JAIL_NONE)
        return getegid();
    return (gid_t)(j->root_uid + ROOTFS_USER_UID);
}

const char *
jail_home(const struct jail *j, bool root)
{
    if (j->host->mode == JAIL_NS)
        return root ? "/root" : "/home/user";
    return j->ws_path;
}

pid_t
jail_init_pid(const struct jail *j)
{
    return j->pid;
}

uid_t
jail_root_uid(const struct jail *j)
{
    return j->root_uid;
}

/* --- helpers --- */

int
jail_open_userns(const struct jail *j)
{
    char path[64];
    if (j->host->mode != JAIL_NS || j->state != J_READY || j->pid <= 0)
        return -ESRCH;
    /* init is our child and not reaped while the jail is ready: the pid is its. */
    (void)snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)j->pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

uint64_t
jail_root_caps(void)
{
    uint64_t m = 0;
    for (size_t i = 0; i < ELEMENTSOF(jail_keep_caps); i++)
        m |= 1ull << jail_keep_caps[i];
    return m;
}
