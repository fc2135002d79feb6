/*
 * main.c - abx-fileops: one sandbox user's hands on that sandbox's files.
 *
 * abxd starts one of us per sandbox and identity (its root, or "user") the
 * first time it has file work to do there, and talks to us over a
 * SOCK_SEQPACKET socket (fileops-proto.h). We run the very functions abxd
 * would otherwise run itself (files.h, vfs.h, snapshot.h), but as that
 * user: in ns mode we join the sandbox's user namespace and become its
 * uid 0 with the capabilities sandbox root keeps, or its uid 1000 with
 * none; in uid mode the sandbox's host uid with none. The kernel then
 * checks every open, listing, write, rename and attribute change exactly as
 * it checks the sandbox's own processes: a file only host root may read
 * stays unreadable, whatever path or symlink leads to it.
 *
 * We stay outside the sandbox's pid namespace (its processes cannot see,
 * signal or trace us) and outside its cgroup, in abxd's mount namespace
 * (so /proc/self/fd works for the O_TMPFILE links); the sandbox's files are
 * reached only through the descriptors abxd passes: the workspace (fd 4)
 * and the sandbox's whole view (fd 5). Once we are who we should be we set
 * no_new_privs, stop being dumpable and install the sandboxes' own seccomp
 * filter, so we can do nothing a sandbox process could not.
 *
 * Still, we read what the sandbox controls (names, links, attributes), so
 * abxd treats every answer as hostile. We treat abxd's requests strictly
 * too and exit on anything malformed. One request at a time; bulk data
 * never passes through us: reads and writes go through descriptors we
 * hand out. The socket closing (abxd gone or done) ends us.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sandbox/fileops-proto.h"
#include "util/cleanup.h"
#include "util/fd.h"
#include "util/lockdown.h"

#define CTL_FD    3
#define WS_FD     4
#define VIEW_FD   5
#define USERNS_FD 6

static char rx[FOP_MSG_MAX];
static char tx[FOP_MSG_MAX];
static struct fop_hello hello;
/* Uploads in flight: a workspace file's (files.h) or a view file's
 * (vfs.h), by id (slot + 1). */
static struct {
    struct files_upload *f;
    struct vfs_upload *v;
} uploads[FOP_UPLOADS_MAX];

static void __attribute__((noreturn)) die(int code)
{
    _exit(code);
}

/* --- sending --- */

static void
send_packet(void *buf, size_t n, int fd)
{
    struct iovec iov = {.iov_base = buf, .iov_len = n};
    union {
        char b[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    if (fd >= 0) {
        memset(&u, 0, sizeof(u));
        m.msg_control = u.b;
        m.msg_controllen = sizeof(u.b);
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof(int));
    }
    for (;;) {
        ssize_t k = sendmsg(CTL_FD, &m, MSG_NOSIGNAL);
        if (k == (ssize_t)n)
            return;
        if (k < 0 && errno == EINTR)
            continue;
        die(0); /* abxd is gone */
    }
}

static void
finish(struct proto_writer *w, int fd)
{
    long n = proto_writer_finish(w);
    if (n < 0)
        die(3); /* our own answer does not fit: a bug, not the sandbox's doing */
    send_packet(w->buf, (size_t)n, fd);
}

static void
answer_err(int r, const struct err *err)
{
    struct proto_writer w;
    int e = r < 0 ? -r : EIO;
    fop_answer_init(&w, tx, sizeof(tx), FOP_R_ERR);
    fop_put_err(&w, e > 0 && e < 4096 ? e : EIO, err && err->msg[0] ? err->msg : strerror(e));
    finish(&w, -1);
}

static void
answer_simple(enum fop_type t)
{
    struct proto_writer w;
    fop_answer_init(&w, tx, sizeof(tx), t);
    finish(&w, -1);
}

/* --- listings --- */

struct batch {
    struct proto_writer w;
    enum fop_type type;
    size_t count_at;
    uint32_t count;
};

static void
batch_open(struct batch *b, enum fop_type t)
{
    b->type = t;
    fop_answer_init(&b->w, tx, sizeof(tx), t);
    b->count_at = b->w.len;
    b->count = 0;
    proto_put_u32(&b->w, 0);
}

static void
batch_flush(struct batch *b, bool reopen)
{
    if (b->count) {
        memcpy(b->w.buf + b->count_at, &b->count, sizeof(b->count));
        finish(&b->w, -1);
    }
    if (reopen)
        batch_open(b, b->type);
}

static void
answer_done(uint64_t skipped)
{
    struct proto_writer w;
    fop_answer_init(&w, tx, sizeof(tx), FOP_R_DONE);
    proto_put_u64(&w, skipped);
    finish(&w, -1);
}

static int
list_one(void *ud, const struct vfs_entry *e)
{
    struct batch *b = ud;
    fop_put_ventry(&b->w, e);
    if (b->w.overflow)
        return -EMSGSIZE;
    b->count++;
    if (b->w.len > FOP_BATCH_BYTES)
        batch_flush(b, true);
    return 0;
}

static void
do_walk(const struct fop_request *rq)
{
    struct files_tree t = {0};
    struct files_walk_opts o = {
            .prune = rq->prune.n || rq->prune.max_file_bytes ? &rq->prune : NULL,
            .max = (size_t)rq->max,
            .limits_as_entries = rq->u == 1,
    };
    struct err err = {0};
    struct batch b;
    int r = files_tree_list(WS_FD, rq->a, &o, &t, &err);
    if (r < 0) {
        answer_err(r, &err);
        return;
    }
    batch_open(&b, FOP_R_FENTRIES);
    for (size_t i = 0; i < t.n; i++) {
        /* an entry is at most ~8 KiB: a batch flushed past FOP_BATCH_BYTES
         * always has room for one more */
        fop_put_fentry(&b.w, &t.v[i]);
        if (b.w.overflow)
            die(3);
        b.count++;
        if (b.w.len > FOP_BATCH_BYTES)
            batch_flush(&b, true);
    }
    batch_flush(&b, false);
    answer_done(t.skipped);
    files_tree_free(&t);
}

static void
do_list(const struct fop_request *rq)
{
    struct err err = {0};
    struct batch b;
    batch_open(&b, FOP_R_VENTRIES);
    int r = vfs_list(VIEW_FD, &hello.ids, rq->a, rq->u, list_one, &b, &err);
    batch_flush(&b, false);
    if (r < 0)
        answer_err(r, &err);
    else
        answer_done(0);
}

static void answer_bool(bool v);

/* --- uploads --- */

static int
upload_slot(void)
{
    for (int i = 0; i < FOP_UPLOADS_MAX; i++)
        if (!uploads[i].f && !uploads[i].v)
            return i;
    return -1;
}

static void
do_upload_begin(const struct fop_request *rq)
{
    struct err err = {0};
    struct proto_writer w;
    int slot = upload_slot();
    if (slot < 0) {
        answer_err(err_set(&err, EMFILE, "more than %d uploads at once", FOP_UPLOADS_MAX), &err);
        return;
    }
    /* abxd counts the bytes it writes; the kernel bounds the space */
    int r = rq->type == FOP_F_UPLOAD_BEGIN
                    ? files_upload_begin(WS_FD, rq->a, hello.uid, hello.gid, UINT64_MAX,
                                         &uploads[slot].f, &err)
                    : vfs_upload_begin(VIEW_FD, &hello.ids, rq->a, hello.as_root, UINT64_MAX,
                                       &uploads[slot].v, &err);
    if (r < 0) {
        answer_err(r, &err);
        return;
    }
    fop_answer_init(&w, tx, sizeof(tx), FOP_R_UPLOAD);
    proto_put_u32(&w, (uint32_t)slot + 1);
    finish(&w, uploads[slot].f ? files_upload_fd(uploads[slot].f) : vfs_upload_fd(uploads[slot].v));
}

/* The upload id names, of the kind (view or workspace) the request is for. */
static bool
take_upload(uint32_t id, bool view, struct files_upload **ret_f, struct vfs_upload **ret_v)
{
    if (id == 0 || id > FOP_UPLOADS_MAX || (view ? !uploads[id - 1].v : !uploads[id - 1].f))
        return false;
    *ret_f = uploads[id - 1].f;
    *ret_v = uploads[id - 1].v;
    uploads[id - 1].f = NULL;
    uploads[id - 1].v = NULL;
    return true;
}

static void
do_upload_end(const struct fop_request *rq)
{
    struct err err = {0};
    struct files_stat st;
    struct proto_writer w;
    bool created = false;
    bool view = rq->type == FOP_V_UPLOAD_COMMIT || rq->type == FOP_V_UPLOAD_ABORT;
    struct files_upload *up = NULL;
    struct vfs_upload *vup = NULL;
    if (!take_upload(rq->u, view, &up, &vup)) {
        answer_err(err_set(&err, EBADF, "no upload %u", rq->u), &err);
        return;
    }
    if (rq->type == FOP_F_UPLOAD_ABORT || rq->type == FOP_V_UPLOAD_ABORT) {
        files_upload_abort(up);
        vfs_upload_abort(vup);
        answer_simple(FOP_R_OK);
        return;
    }
    if (view) {
        int r = vfs_upload_commit(vup, &created, &err);
        if (r < 0)
            answer_err(r, &err);
        else
            answer_bool(created);
        return;
    }
    int r = files_upload_commit(up, &st, &created, &err);
    if (r < 0) {
        answer_err(r, &err);
        return;
    }
    fop_answer_init(&w, tx, sizeof(tx), FOP_R_CREATED);
    fop_put_fstat(&w, &st);
    proto_put_u32(&w, created ? 1 : 0);
    finish(&w, -1);
}

/* --- one request --- */

static void
answer_fstat(enum fop_type t, const struct files_stat *st, int fd)
{
    struct proto_writer w;
    fop_answer_init(&w, tx, sizeof(tx), t);
    fop_put_fstat(&w, st);
    finish(&w, fd);
}

static void
answer_bool(bool v)
{
    struct proto_writer w;
    fop_answer_init(&w, tx, sizeof(tx), FOP_R_BOOL);
    proto_put_u32(&w, v ? 1 : 0);
    finish(&w, -1);
}

static void
answer_wd(int wd)
{
    struct proto_writer w;
    fop_answer_init(&w, tx, sizeof(tx), FOP_R_WD);
    proto_put_u32(&w, (uint32_t)wd);
    finish(&w, -1);
}

/* A watch on dirfd in abxd's inotify instance ifd, added with our rights:
 * abxd reads the events, the kernel checked that we may read the
 * directory. */
static int
watch_add(int ifd, int dirfd, uint32_t mask, int *ret_wd, struct err *err)
{
    struct stat st;
    char proc[64];
    if (fstat(dirfd, &st) < 0 || !S_ISDIR(st.st_mode))
        return err_set(err, ENOTDIR, "a watch is of a directory");
    (void)snprintf(proc, sizeof(proc), "/proc/self/fd/%d", dirfd);
    int wd = inotify_add_watch(ifd, proc, mask);
    if (wd < 0)
        return err_setx(err, errno, "cannot watch the directory");
    *ret_wd = wd;
    return 0;
}

static void
answer_fd(enum fop_type t, uint64_t size, int fd)
{
    struct proto_writer w;
    fop_answer_init(&w, tx, sizeof(tx), t);
    if (t == FOP_R_SIZE_FD)
        proto_put_u64(&w, size);
    finish(&w, fd);
}

static void
answer_ventry(const struct vfs_entry *e)
{
    struct proto_writer w;
    fop_answer_init(&w, tx, sizeof(tx), FOP_R_VENTRY);
    fop_put_ventry(&w, e);
    finish(&w, -1);
}

/* One vfs_entry is 13 KiB: not on the stack of every request. */
static struct vfs_entry ventry;

static void
handle(const struct fop_request *rq, int rxfd, int rxfd2)
{
    struct err err = {0};
    struct files_stat st;
    bool flag = false;
    int fd = -EBADF, r;
    uint64_t size = 0;

    switch (rq->type) {
    case FOP_F_STAT:
        if ((r = files_stat(WS_FD, rq->a, &st, &err)) == 0)
            answer_fstat(FOP_R_FSTAT, &st, -1);
        break;
    case FOP_F_OPEN_READ:
        if ((r = files_open_read(WS_FD, rq->a, &fd, &st, &err)) == 0)
            answer_fstat(FOP_R_FSTAT_FD, &st, fd);
        break;
    case FOP_F_UPLOAD_BEGIN:
    case FOP_V_UPLOAD_BEGIN:
        do_upload_begin(rq);
        return;
    case FOP_F_UPLOAD_COMMIT:
    case FOP_F_UPLOAD_ABORT:
    case FOP_V_UPLOAD_COMMIT:
    case FOP_V_UPLOAD_ABORT:
        do_upload_end(rq);
        return;
    case FOP_F_DELETE:
        if ((r = files_delete(WS_FD, rq->a, &err)) == 0)
            answer_simple(FOP_R_OK);
        break;
    case FOP_F_MKDIR:
        if ((r = files_mkdir(WS_FD, rq->a, hello.uid, hello.gid, &flag, &err)) == 0)
            answer_bool(flag);
        break;
    case FOP_F_RMDIR:
        if ((r = files_rmdir(WS_FD, rq->a, &err)) == 0)
            answer_simple(FOP_R_OK);
        break;
    case FOP_F_RENAME:
        if ((r = files_rename(WS_FD, rq->a, rq->b, rq->u == 1, hello.uid, hello.gid, &err)) == 0)
            answer_simple(FOP_R_OK);
        break;
    case FOP_F_WALK:
        do_walk(rq);
        return;
    case FOP_V_STAT:
        if ((r = vfs_stat(VIEW_FD, &hello.ids, rq->a, &ventry, &err)) == 0)
            answer_ventry(&ventry);
        break;
    case FOP_V_STAT_FD:
        if ((r = vfs_stat_fd(rxfd, &hello.ids, rq->a, &ventry, &err)) == 0)
            answer_ventry(&ventry);
        break;
    case FOP_V_LIST:
        do_list(rq);
        return;
    case FOP_V_OPEN_DIR:
        if ((r = vfs_open_dir(VIEW_FD, rq->a, &fd, &err)) == 0)
            answer_fd(FOP_R_FD, 0, fd);
        break;
    case FOP_V_OPEN_BELOW:
        if ((r = vfs_open_below(rxfd, rq->a, &fd, &err)) == 0)
            answer_fd(FOP_R_FD, 0, fd);
        break;
    case FOP_V_WATCH_ADD: {
        int wd = 0;
        if ((r = watch_add(rxfd, rxfd2, rq->u, &wd, &err)) == 0)
            answer_wd(wd);
        break;
    }
    case FOP_V_MKDIR:
        if ((r = vfs_mkdir(VIEW_FD, &hello.ids, rq->a, hello.as_root, &flag, &err)) == 0)
            answer_bool(flag);
        break;
    case FOP_V_RENAME:
        if ((r = vfs_rename(VIEW_FD, &hello.ids, rq->a, rq->b, hello.as_root, &err)) == 0)
            answer_simple(FOP_R_OK);
        break;
    case FOP_V_REMOVE:
        if ((r = vfs_remove(VIEW_FD, rq->a, &err)) == 0)
            answer_simple(FOP_R_OK);
        break;
    case FOP_V_OPEN_READ:
        if ((r = vfs_open_read(VIEW_FD, &hello.ids, rq->a, hello.as_root, &fd, &size, &err)) == 0)
            answer_fd(FOP_R_SIZE_FD, size, fd);
        break;
    case FOP_V_SET_META:
        if ((r = vfs_set_meta(rxfd, &rq->meta, &err)) == 0)
            answer_simple(FOP_R_OK);
        break;
    case FOP_V_COPY_IN:
        if ((r = vfs_copy_in(VIEW_FD, &hello.ids, rxfd, rq->a, rq->b, hello.as_root, &err)) == 0)
            answer_simple(FOP_R_OK);
        break;
    case FOP_S_COPY_OUT: {
        struct snapshot_stats s = {0};
        r = snapshot_copy_out(VIEW_FD, &hello.ids, rxfd, rq->max, &s, &err);
        if (r == 0) {
            struct proto_writer w;
            fop_answer_init(&w, tx, sizeof(tx), FOP_R_SNAPSHOT);
            fop_put_snapshot(&w, &s);
            finish(&w, -1);
        }
        break;
    }
    case FOP_S_COPY_IN:
        if ((r = snapshot_copy_in(rxfd, VIEW_FD, &hello.ids, &err)) == 0)
            answer_simple(FOP_R_OK);
        break;
    default:
        die(2);
    }
    safe_close(fd); /* sent: the kernel holds abxd's copy */
    if (r < 0)
        answer_err(r, &err);
}

/* --- becoming the sandbox user --- */

static void
check(bool ok)
{
    if (!ok)
        die(4);
}

static int
capset_raw(uint64_t eff, uint64_t perm)
{
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct d[2] = {
            {.effective = (uint32_t)eff, .permitted = (uint32_t)perm, .inheritable = 0},
            {.effective = (uint32_t)(eff >> 32),
             .permitted = (uint32_t)(perm >> 32),
             .inheritable = 0},
    };
    return (int)syscall(SYS_capset, &h, d);
}

static uint64_t
caps_now(bool effective)
{
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct d[2];
    if (syscall(SYS_capget, &h, d) < 0)
        die(4);
    return effective ? d[0].effective | (uint64_t)d[1].effective << 32
                     : d[0].permitted | (uint64_t)d[1].permitted << 32;
}

/* Drops every capability not in keep from the bounding set. */
static void
bound(uint64_t keep)
{
    check(lockdown_bound_caps(keep, NULL) == 0);
}

static void
become(void)
{
    gid_t g = hello.gid;
    bool root = hello.uid == 0;

    if (hello.mode == FOP_MODE_NS) {
        check(setns(USERNS_FD, CLONE_NEWUSER) == 0);
        /* Host root's uid is unmapped in there: first become its root, so
         * that leaving root for "user" clears every capability the way
         * setuid() does, then who we should be. */
        check(syscall(SYS_setgroups, 1, &g) == 0);
        check(syscall(SYS_setresgid, g, g, g) == 0);
        check(syscall(SYS_setresuid, 0, 0, 0) == 0);
        bound(root ? hello.caps : 0);
        if (root)
            check(capset_raw(hello.caps & caps_now(false), hello.caps & caps_now(false)) == 0);
        else
            check(syscall(SYS_setresuid, hello.uid, hello.uid, hello.uid) == 0);
    } else {
        /* never host root */
        check(hello.uid != 0 && hello.gid != 0);
        check(syscall(SYS_setgroups, 1, &g) == 0);
        check(syscall(SYS_setresgid, g, g, g) == 0);
        bound(0);
        check(syscall(SYS_setresuid, hello.uid, hello.uid, hello.uid) == 0);
    }
    (void)close(USERNS_FD);
    /* What we hold is what sandbox root holds, or nothing. */
    uint64_t want = hello.mode == FOP_MODE_NS && root ? hello.caps : 0;
    check((caps_now(true) & ~want) == 0 && (caps_now(false) & ~want) == 0);
    check(lockdown_self(NULL) == 0);
    if (hello.bpf_len) {
        struct sock_fprog prog = {
                .len = (unsigned short)(hello.bpf_len / sizeof(struct sock_filter)),
                .filter = (struct sock_filter *)(uintptr_t)hello.bpf,
        };
        check(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) == 0);
    }
    umask(022);
}

/* --- the loop --- */

static ssize_t
receive(int ret_fds[2], unsigned *ret_nfds)
{
    struct iovec iov = {.iov_base = rx, .iov_len = sizeof(rx)};
    union {
        char b[CMSG_SPACE(sizeof(int) * 4)];
        struct cmsghdr align;
    } u;
    struct msghdr m = {
            .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b, .msg_controllen = sizeof(u.b)};
    ssize_t n;
    do
        n = recvmsg(CTL_FD, &m, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (n <= 0)
        die(0); /* abxd closed the socket: we are done */
    ret_fds[0] = ret_fds[1] = -EBADF;
    *ret_nfds = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            die(2);
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
            if (*ret_nfds < 2)
                ret_fds[*ret_nfds] = fd;
            else
                (void)close(fd);
            (*ret_nfds)++;
        }
    }
    if (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC))
        die(2);
    return n;
}

int
main(void)
{
    int rxfd[2];
    unsigned nfds;
    ssize_t n = receive(rxfd, &nfds);
    if (fop_decode_hello(rx, (size_t)n, nfds, &hello) < 0)
        die(2);
    /* The program is in rx, which the next request overwrites: keep it. */
    static char bpf[FOP_BPF_MAX];
    memcpy(bpf, hello.bpf, hello.bpf_len);
    hello.bpf = bpf;
    become();
    answer_simple(FOP_R_OK);
    for (;;) {
        struct fop_request rq;
        n = receive(rxfd, &nfds);
        if (fop_decode_request(rx, (size_t)n, nfds, &rq) < 0)
            die(2);
        handle(&rq, rxfd[0], rxfd[1]);
        safe_close(rxfd[0]);
        safe_close(rxfd[1]);
    }
}
