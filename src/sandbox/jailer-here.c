/*
 * jailer-here.c - jailer.h in this process, on jail.h: the jail host is
 * ours, and so is every privilege its operations need (host root).
 *
 * What needs privilege beyond the jail's calls lives here too: the
 * sandbox's pinned view (/proc/<init>/root), its terminals (its devpts),
 * a socket in its network namespace (setns on a thread of its own), and
 * the file helpers this process forks with the sandbox's descriptors.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <termios.h>
#include <unistd.h>

#include "sandbox/fileops-helper.h"
#include "sandbox/fileops.h"
#include "sandbox/jailer-internal.h"
#include "sandbox/jailer.h"
#include "util/cleanup.h"
#include "util/fd.h"

struct here {
    struct jailer pub;
    struct jail_host *jh;
    int fileops_image; /* the abx-fileops helper (a sealed memfd) */
};

struct here_jail {
    struct jailer_jail pub;
    struct jail *j;
    int view_fd; /* the sandbox's "/" (see pin_view()), or -errno */
};

#define HERE(p)    container_of(p, struct here, pub)
#define CHERE(p)   const_container_of(p, struct here, pub)
#define HJ(p)      container_of(p, struct here_jail, pub)
#define CHJ(p)     const_container_of(p, struct here_jail, pub)
#define HOST_OF(j) HERE((j)->pub.jr)

static const struct jailer_ops here_ops;

/* Pins the root of the sandbox's view once it is ready. Init is our child
 * and not reaped yet (jail_init_pid() turns 0 when it is), so its pid cannot
 * have been reused and /proc/<pid>/root is the root it pivoted into. Only
 * the ns mode has a view of its own: elsewhere init's root is the host's. */
static void
pin_view(struct here_jail *hj)
{
    char p[64];
    struct stat a, b;
    pid_t pid = jail_init_pid(hj->j);

    safe_close(hj->view_fd);
    hj->view_fd = -EOPNOTSUPP;
    if (jail_host_mode(HOST_OF(hj)->jh) != JAIL_NS)
        return;
    hj->view_fd = -ESRCH;
    if (pid <= 0)
        return;
    (void)snprintf(p, sizeof(p), "/proc/%d/root", (int)pid);
    int fd = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        hj->view_fd = -errno;
        return;
    }
    if (fstat(fd, &a) < 0 || stat("/", &b) < 0 || (a.st_dev == b.st_dev && a.st_ino == b.st_ino)) {
        safe_close(fd);
        hj->view_fd = -EXDEV; /* never hand out the host's root */
        return;
    }
    hj->view_fd = fd;
}

/* --- jail.h's callbacks, relayed (each call the last thing done: the
 * callee may free the jail) --- */

static void
on_ready(struct jail *j, int r, const struct err *err, void *ud)
{
    struct here_jail *hj = ud;
    (void)j;
    if (r == 0)
        pin_view(hj);
    if (hj->pub.cb->ready)
        hj->pub.cb->ready(&hj->pub, r, err, hj->pub.ud);
}

static void
on_spawned(struct jail *j, uint64_t token, pid_t pid, int r, const char *step, void *ud)
{
    struct here_jail *hj = ud;
    (void)j;
    if (hj->pub.cb->spawned)
        hj->pub.cb->spawned(&hj->pub, token, pid, r, step, hj->pub.ud);
}

static void
on_exited(struct jail *j, pid_t pid, int status, void *ud)
{
    struct here_jail *hj = ud;
    (void)j;
    if (hj->pub.cb->exited)
        hj->pub.cb->exited(&hj->pub, pid, status, hj->pub.ud);
}

static void
on_gone(struct jail *j, void *ud)
{
    struct here_jail *hj = ud;
    (void)j;
    hj->view_fd = safe_close(hj->view_fd);
    if (hj->pub.cb->gone)
        hj->pub.cb->gone(&hj->pub, hj->pub.ud);
}

static const struct jail_callbacks relay_cb = {
        .ready = on_ready,
        .spawned = on_spawned,
        .exited = on_exited,
        .gone = on_gone,
};

/* --- the host --- */

int
jailer_here_new(struct loop *loop, struct jail_host *jh, struct jailer **ret)
{
    struct here *h = calloc(1, sizeof(*h));
    if (!h)
        return -ENOMEM;
    h->pub = (struct jailer){.ops = &here_ops, .loop = loop};
    h->jh = jh;
    h->fileops_image = fileops_helper_image();
    if (h->fileops_image < 0) {
        int r = h->fileops_image;
        free(h);
        return r;
    }
    *ret = &h->pub;
    return 0;
}

static void
here_free(struct jailer *pub)
{
    struct here *h = HERE(pub);
    safe_close(h->fileops_image);
    free(h);
}

static enum jail_mode
here_mode(const struct jailer *pub)
{
    return jail_host_mode(CHERE(pub)->jh);
}

static const char *
here_state_dir(const struct jailer *pub)
{
    return jail_host_state_dir(CHERE(pub)->jh);
}

static int
here_area_create(struct jailer *pub, const char *name, uint64_t limit_bytes, struct err *err)
{
    char path[PATH_MAX];
    return jail_host_area_create(HERE(pub)->jh, name, limit_bytes, path, sizeof(path), err);
}

static const char *
here_layers_dir(const struct jailer *pub)
{
    return jail_host_layers_dir(CHERE(pub)->jh);
}

static int
here_layer_install(struct jailer *pub, const char *area, const char *name, uid_t first,
                   sandbox_layer_fn done, void *ud, struct err *err)
{
    return jail_host_layer_install(HERE(pub)->jh, area, name, first, done, ud, err);
}

static int
here_area_usage(struct jailer *pub, const char *name, uint64_t *ret_bytes)
{
    return jail_host_area_usage(HERE(pub)->jh, name, ret_bytes);
}

static void
here_area_destroy(struct jailer *pub, const char *name)
{
    jail_host_area_destroy(HERE(pub)->jh, name);
}

static int
here_create(struct jailer *pub, const char *id, const struct jail_limits *limits,
            const struct sandbox_fs *fs, struct jailer_jail **ret, struct err *err)
{
    struct here *h = HERE(pub);
    struct jail_fs jfs = {0};
    if (fs)
        jfs = (struct jail_fs){.layers = fs->layers,
                               .nlayers = fs->nlayers,
                               .upper_area = fs->upper_area,
                               .disk_bytes = fs->disk_bytes};
    struct here_jail *hj = calloc(1, sizeof(*hj));
    if (!hj)
        return -ENOMEM;
    hj->pub.jr = pub;
    hj->view_fd = -ESRCH;
    int r = jail_create(h->jh, pub->loop, id, limits, fs ? &jfs : NULL, &relay_cb, hj, &hj->j, err);
    if (r < 0) {
        free(hj);
        return r;
    }
    *ret = &hj->pub;
    return 0;
}

/* --- one jail --- */

static int
here_spawn(struct jailer_jail *pub, uint64_t token, const struct jail_spawn *sp, struct err *err)
{
    return jail_spawn(HJ(pub)->j, token, sp, err);
}

static int
here_signal(struct jailer_jail *pub, pid_t pid, int sig, bool group)
{
    return jail_signal(HJ(pub)->j, pid, sig, group);
}

static int
here_set_limits(struct jailer_jail *pub, const struct jail_limits *l, struct err *err)
{
    return jail_set_limits(HJ(pub)->j, l, err);
}

static int
here_freeze(struct jailer_jail *pub, bool frozen, struct err *err)
{
    return jail_freeze(HJ(pub)->j, frozen, err);
}

static int
here_stats(struct jailer_jail *pub, struct cgroup_stats *ret)
{
    return jail_stats(HJ(pub)->j, ret);
}

static int
here_disk_usage(struct jailer_jail *pub, uint64_t *ret_bytes)
{
    return jail_disk_usage(HJ(pub)->j, ret_bytes);
}

static void
here_kill(struct jailer_jail *pub)
{
    jail_kill(HJ(pub)->j);
}

static void
here_free_jail(struct jailer_jail *pub)
{
    struct here_jail *hj = HJ(pub);
    safe_close(hj->view_fd);
    jail_free(hj->j);
    free(hj);
}

static bool
here_is_ready(const struct jailer_jail *pub)
{
    return jail_is_ready(CHJ(pub)->j);
}

static const struct jail_timings *
here_timings(const struct jailer_jail *pub)
{
    return jail_get_timings(CHJ(pub)->j);
}

static const char *
here_home(const struct jailer_jail *pub, bool root)
{
    return jail_home(CHJ(pub)->j, root);
}

static const char *
here_workspace_path(const struct jailer_jail *pub)
{
    return jail_workspace_path(CHJ(pub)->j);
}

static int
here_workspace_fd(const struct jailer_jail *pub)
{
    return jail_workspace_fd(CHJ(pub)->j);
}

static void
here_vfs_ids(const struct jailer_jail *pub, struct vfs_ids *ret)
{
    const struct jail *j = CHJ(pub)->j;
    *ret = fileops_jail_ids(jail_root_uid(j), jail_user_uid(j), jail_user_gid(j));
}

static int
here_view_fd(const struct jailer_jail *pub)
{
    return CHJ(pub)->view_fd;
}

static bool
here_has_view(const struct jailer_jail *pub)
{
    return CHJ(pub)->view_fd >= 0;
}

/* A terminal from the sandbox's own devpts instance: the master stays
 * here, the other side (ret_tty, owned by the process's user) becomes the
 * process's stdin, stdout and stderr and, through init, its controlling
 * terminal. */
static int
here_open_pty(struct jailer_jail *pub, bool root, unsigned rows, unsigned cols, int *ret_master,
              int *ret_tty, struct err *err)
{
    struct here_jail *hj = HJ(pub);
    int unlock = 0;
    struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};
    if (hj->view_fd < 0)
        return err_set(err, EOPNOTSUPP, "terminals need a sandbox with its own /dev");
    /* Crossing into /dev and /dev/pts (mounts), never a symlink: the
     * sandbox's root is the sandbox's to change. */
    struct open_how how = {.flags = O_RDWR | O_NOCTTY | O_CLOEXEC,
                           .resolve =
                                   RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
    _cleanup_close_ int m =
            (int)syscall(SYS_openat2, hj->view_fd, "dev/pts/ptmx", &how, sizeof(how));
    if (m < 0)
        return err_setx(err, errno, "cannot open the sandbox's /dev/pts/ptmx");
    if (ioctl(m, TIOCSPTLCK, &unlock) < 0 || ioctl(m, TIOCSWINSZ, &ws) < 0)
        return err_setx(err, errno, "cannot set up the terminal");
    int t = ioctl(m, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (t < 0)
        return err_setx(err, errno, "cannot open the terminal's other side");
    uid_t uid = root ? jail_root_uid(hj->j) : jail_user_uid(hj->j);
    if (fchown(t, uid, (gid_t)-1) < 0) {
        int e = errno;
        safe_close(t);
        return err_setx(err, e, "cannot hand the terminal to the process's user");
    }
    *ret_master = TAKE_FD(m);
    *ret_tty = t;
    return 0;
}

/* One socket made in a sandbox's network namespace (here_netns_socket()). */
struct netns_job {
    int nsfd; /* borrowed */
    int family, type;
    int r; /* the socket, or -errno */
    bool entered;
};

/* Runs on its own short-lived thread, touches only j: setns() moves only
 * the calling thread, and this one ends right after the socket() call, so
 * no thread of abxd's ever runs in a sandbox's namespace or has to find
 * its way back. The socket stays bound to the namespace it was born in. */
static void *
netns_socket_thread(void *ud)
{
    struct netns_job *j = ud;

    if (setns(j->nsfd, CLONE_NEWNET) < 0) {
        j->r = -errno;
        return NULL; /* never make the socket anywhere else */
    }
    j->entered = true;
    int fd = socket(j->family, j->type | SOCK_CLOEXEC, 0);
    j->r = fd < 0 ? -errno : fd;
    return NULL;
}

static int
here_netns_socket(struct jailer_jail *pub, int family, int type, const char *label, struct err *err)
{
    struct here_jail *hj = HJ(pub);
    struct stat ns, home;
    pthread_t t;
    char path[64];

    /* init is our child and not reaped while we are ready: the pid is its. */
    pid_t pid = jail_init_pid(hj->j);
    if (pid <= 0)
        return err_set(err, ESRCH, "%s is not running", label);
    (void)snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)pid);
    _cleanup_close_ int nsfd = open(path, O_RDONLY | O_CLOEXEC);
    if (nsfd < 0)
        return err_set(err, errno, "cannot open the network namespace of %s", label);
    /* uid and none isolation share the host's network: a socket there
     * would reach the host's loopback services, not the sandbox's. The
     * calling thread is abxd's and never changes namespace. */
    if (fstat(nsfd, &ns) < 0 || stat("/proc/thread-self/ns/net", &home) < 0 ||
        (ns.st_dev == home.st_dev && ns.st_ino == home.st_ino))
        return err_set(err, EOPNOTSUPP, "%s shares the host's network namespace (isolation '%s')",
                       label, jail_mode_name(jail_host_mode(HOST_OF(hj)->jh)));
    struct netns_job j = {.nsfd = nsfd, .family = family, .type = type, .r = -EIO};
    int r = pthread_create(&t, NULL, netns_socket_thread, &j);
    if (r != 0)
        return err_set(err, r, "cannot start a thread to enter the network of %s", label);
    (void)pthread_join(t, NULL);
    if (j.r < 0 && !j.entered)
        return err_set(err, -j.r, "cannot enter the network namespace of %s", label);
    if (j.r < 0)
        return err_set(err, -j.r, "cannot make a socket in the network of %s", label);
    return j.r;
}

static int
here_fileops(struct jailer_jail *pub, bool as_root, const char *label, struct fileops **ret,
             struct err *err)
{
    struct here_jail *hj = HJ(pub);
    struct here *h = HOST_OF(hj);
    struct jail *j = hj->j;
    enum jail_mode mode = jail_host_mode(h->jh);
    int r;

    if (mode == JAIL_NONE) {
        /* No isolation to keep: abxd's own rights, as for its processes. */
        struct vfs_ids ids;
        here_vfs_ids(pub, &ids);
        return fileops_new_direct(jail_workspace_fd(j), hj->view_fd, &ids, jail_user_uid(j),
                                  jail_user_gid(j), as_root, ret);
    }
    struct fileops_helper_spec id = {0};
    r = fileops_jail_identity(h->jh, j, as_root, &id);
    if (r < 0)
        return err_setx(err, -r, "cannot tell who the file helper of %s is", label);
    struct fileops_remote c = {
            .image_fd = h->fileops_image,
            .userns_fd = -1,
            .ws_fd = jail_workspace_fd(j),
            .view_fd = hj->view_fd >= 0 ? hj->view_fd : -1,
            .ns = id.ns,
            .as_root = as_root,
            .uid = id.uid,
            .gid = id.gid,
            .ids = id.ids,
            .caps = id.caps,
            .bpf = id.bpf,
            .bpf_len = id.bpf_len,
            .label = label,
    };
    _cleanup_close_ int userns = -EBADF;
    if (mode == JAIL_NS) {
        userns = jail_open_userns(j);
        if (userns < 0)
            return err_setx(err, -userns, "cannot open the user namespace of %s", label);
        c.userns_fd = userns;
    }
    return fileops_new_remote(&c, ret, err);
}

static const struct jailer_ops here_ops = {
        .free = here_free,
        .mode = here_mode,
        .state_dir = here_state_dir,
        .area_create = here_area_create,
        .layers_dir = here_layers_dir,
        .layer_install = here_layer_install,
        .area_usage = here_area_usage,
        .area_destroy = here_area_destroy,
        .create = here_create,
        .spawn = here_spawn,
        .signal = here_signal,
        .set_limits = here_set_limits,
        .freeze = here_freeze,
        .stats = here_stats,
        .disk_usage = here_disk_usage,
        .kill = here_kill,
        .free_jail = here_free_jail,
        .is_ready = here_is_ready,
        .timings = here_timings,
        .home = here_home,
        .workspace_path = here_workspace_path,
        .workspace_fd = here_workspace_fd,
        .vfs_ids = here_vfs_ids,
        .view_fd = here_view_fd,
        .has_view = here_has_view,
        .open_pty = here_open_pty,
        .netns_socket = here_netns_socket,
        .fileops = here_fileops,
};
