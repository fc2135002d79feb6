/*
 * rootfs.c - build the shared /etc from generated files and a host allowlist,
 * and place abx-sudo; both only when what a previous start left differs.
 */
#include "jail/rootfs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/fd.h"
#include "util/rand.h"
#include "util/tree.h"

#define COPY_MAX_DEPTH 8
#define COPY_MAX_FILES 50000

static const char passwd[] = "root:x:0:0:root:/root:/bin/bash\n"
                             "user:x:1000:1000:user:/home/user:/bin/bash\n"
                             "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
static const char group[] = "root:x:0:\n"
                            "tty:x:5:\n"
                            "users:x:100:user\n"
                            "user:x:1000:\n"
                            "nogroup:x:65534:\n";
static const char hosts[] = "127.0.0.1\tlocalhost\n"
                            "::1\tlocalhost ip6-localhost ip6-loopback\n"
                            "127.0.1.1\t" ROOTFS_HOSTNAME "\n";
static const char nsswitch[] = "passwd: files\ngroup: files\nshadow: files\nhosts: files\n"
                               "networks: files\nprotocols: files\nservices: files\n";
static const char resolv[] = "# no network: sandboxes reach loopback only\n";
/* Debian's /etc/profile resets PATH, so login shells (bash -lc, sh -lc)
 * would lose the tool shims (python, pip of a carrier bundle) that exec puts
 * first; put them back. A no-op when the directory is absent. */
static const char profile_tools[] =
        "# abx: tool shims (see docs/tools.md) stay first on PATH in login shells.\n"
        "if [ -d /.toolbin ]; then\n"
        "    case \":$PATH:\" in\n"
        "    *:/.toolbin:*) ;;\n"
        "    *) PATH=\"/.toolbin:$PATH\"; export PATH ;;\n"
        "    esac\n"
        "fi\n";

/* Host entries copied verbatim (files, symlinks or whole directories). */
static const char *const allow[] = {
        "ld.so.cache",
        "ld.so.conf",
        "ld.so.conf.d",
        "alternatives",
        "localtime",
        "timezone",
        "mime.types",
        "services",
        "protocols",
        "ethertypes",
        "inputrc",
        "profile",
        "profile.d",
        "bash.bashrc",
        "environment",
        "shells",
        "login.defs",
        "debian_version",
        "os-release",
        "issue",
        "magic",
        "magic.mime",
        "ca-certificates",
        "ca-certificates.conf",
        /* The host's CA bundle (certs/, ca-certificates.crt, openssl.cnf),
         * so TLS clients in sandboxes (pip, curl, git, requests, Node
         * with NODE_EXTRA_CA_CERTS) verify servers; ssl/private is a
         * denied name and never copied. */
        "ssl",
        "fonts",
        "terminfo",
        "skel",
        "gai.conf",
        "host.conf",
        "locale.alias",
        "locale.gen",
        "papersize",
        "mailcap",
        "python3",
        "python3.11",
        "python3.12",
        "perl",
        "vim",
        "nanorc",
        "bash_completion",
        "bash_completion.d",
        "subversion",
        "X11",
        "gitconfig.d",
        "xdg",
        "dpkg",
        "ImageMagick-6",
        "matplotlibrc", /* Debian's matplotlib reads its defaults from here */
        NULL,
};
/* Inside copied directories, names never copied. */
static bool
denied(const char *name)
{
    return !strcmp(name, "private") || strstr(name, "shadow") || strstr(name, "ssh") ||
           strstr(name, "secret") || strstr(name, ".key");
}

/*
 * One walk of the host's /etc either builds the copy or, as a plan, lists
 * what the copy would hold without writing anything. Both come from the
 * same code, so the plan is exactly what a build makes; comparing it with
 * the etc a previous start left tells whether a rebuild is needed at all
 * (a full disk must not stop abxd from starting, and usually nothing
 * changed). Modes are set explicitly, so the umask does not enter.
 */
struct etc_entry {
    char *path;          /* below etc/, e.g. "ssl/certs/ca.pem" */
    mode_t mode;         /* type and permission bits */
    char *target;        /* symlinks */
    const char *content; /* generated files; NULL = a copy of /etc/<path> */
    size_t seq;          /* later entries for one path replace earlier ones */
};

struct etc_tree {
    struct etc_entry *v;
    size_t n, cap;
};

struct walk {
    struct etc_tree *plan; /* NULL = build */
    int budget;            /* entries a build may still copy; past it, the rest is left out */
};

static void
tree_done(struct etc_tree *t)
{
    for (size_t i = 0; i < t->n; i++) {
        free(t->v[i].path);
        free(t->v[i].target);
    }
    free(t->v);
    *t = (struct etc_tree){0};
}

static int
tree_add(struct etc_tree *t, const char *dir, const char *name, mode_t mode, const char *target,
         const char *content)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 256;
        struct etc_entry *v = realloc(t->v, cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        t->v = v;
        t->cap = cap;
    }
    char path[PATH_MAX];
    if ((size_t)snprintf(path, sizeof(path), "%s%s%s", dir, dir[0] ? "/" : "", name) >=
        sizeof(path))
        return -ENAMETOOLONG;
    struct etc_entry *e = &t->v[t->n];
    *e = (struct etc_entry){.mode = mode, .content = content, .seq = t->n};
    if (!(e->path = strdup(path)))
        return -ENOMEM;
    if (target && !(e->target = strdup(target))) {
        free(e->path);
        return -ENOMEM;
    }
    t->n++;
    return 0;
}

static int
entry_cmp(const void *a, const void *b)
{
    const struct etc_entry *x = a, *y = b;
    int c = strcmp(x->path, y->path);
    return c ? c : x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Sorts by path and keeps the last entry of each path. */
static void
tree_sort(struct etc_tree *t)
{
    size_t k = 0;
    if (t->n == 0)
        return;
    qsort(t->v, t->n, sizeof(*t->v), entry_cmp);
    for (size_t i = 0; i < t->n; i++) {
        if (i + 1 < t->n && !strcmp(t->v[i].path, t->v[i + 1].path)) {
            free(t->v[i].path);
            free(t->v[i].target);
            continue;
        }
        t->v[k++] = t->v[i];
    }
    t->n = k;
}

/* What of the host's /etc a build copies (util/tree.h): files, symlinks
 * and directories of the allowlist, down to COPY_MAX_DEPTH levels and
 * COPY_MAX_FILES entries (silently: the rest is left out), only
 * world-readable regular files, no denied names inside directories; all
 * ours (abxd's), 0755 directories, file modes as the host's but write. */
static int
etc_decide(void *ud, const struct tree_entry *e, struct tree_make *mk)
{
    struct walk *w = ud;
    if (e->depth > 0 && denied(e->name))
        return TREE_SKIP;
    if (--w->budget < 0)
        return TREE_SKIP;
    switch (e->st.st_mode & S_IFMT) {
    case S_IFLNK:
        mk->mode = 0777;
        return 0;
    case S_IFDIR:
        mk->mode = 0755;
        return e->depth > COPY_MAX_DEPTH ? TREE_SKIP : 0;
    case S_IFREG:
        mk->mode = e->st.st_mode & 0755;
        return e->st.st_mode & S_IROTH ? 0 : TREE_SKIP;
    default:
        return TREE_SKIP;
    }
}

/* Gone, or unreadable (what a build cannot open, it skips): left out. */
static int
etc_failed(void *ud, const struct tree_entry *e, enum tree_step step, int error)
{
    (void)ud;
    (void)e;
    if ((step == TREE_STEP_STAT && error == ENOENT) ||
        (step == TREE_STEP_OPEN_FILE && error == EACCES) || step == TREE_STEP_READ)
        return 0;
    return -error;
}

/* A plan lists what a build makes, as it would make it. */
static int
etc_made(void *ud, const struct tree_entry *e, const struct tree_make *mk, const char *target)
{
    struct walk *w = ud;
    if (!w->plan)
        return 0;
    return tree_add(w->plan, "", e->path, (e->st.st_mode & S_IFMT) | mk->mode, target, NULL);
}

static const struct tree_copy_ops etc_ops = {
        .decide = etc_decide,
        .failed = etc_failed,
        .made = etc_made,
};

/* Copies (or plans, d -EBADF) the allowed entry name of host into d. */
static int
copy_entry(struct walk *w, int host, int d, const char *name)
{
    const struct tree_copy_opts o = {
            .walk = {.max_depth = COPY_MAX_DEPTH, .path_max = PATH_MAX - 1},
            .mode = w->plan ? TREE_COPY_DRY : TREE_COPY_NEW,
            .ops = &etc_ops,
            .ud = w,
    };
    return tree_copy_at(host, name, d, name, &o, NULL);
}

/* The generated files, written over whatever the allowlist copied. */
struct gen_file {
    const char *name, *content;
};
static const struct gen_file gen[] = {
        {"passwd", passwd},
        {"group", group},
        {"hosts", hosts},
        {"hostname", ROOTFS_HOSTNAME "\n"},
        {"nsswitch.conf", nsswitch},
        {"resolv.conf", resolv},
        {"profile.d/zz-abx-tools.sh", profile_tools},
};

/* Walks host into d (build) or into w->plan; the generated files last. */
static int
walk_etc(struct walk *w, int host, int d, struct err *err)
{
    int r;
    for (const char *const *a = allow; *a; a++) {
        r = copy_entry(w, host, d, *a);
        if (r < 0)
            return err_setx(err, -r, "cannot copy /etc/%s", *a);
    }
    if (w->plan) {
        r = tree_add(w->plan, "", "profile.d", S_IFDIR | 0755, NULL, NULL);
        for (size_t i = 0; r == 0 && i < ELEMENTSOF(gen); i++)
            r = tree_add(w->plan, "", gen[i].name, S_IFREG | 0644, NULL, gen[i].content);
        return r < 0 ? err_setx(err, -r, "cannot list etc") : 0;
    }
    /* Our file goes into a real directory, whatever the host's profile.d
     * is (a symlink copied as such would lead the write out of etc). */
    struct stat st;
    if (fstatat(d, "profile.d", &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode) &&
        unlinkat(d, "profile.d", 0) < 0)
        return err_setx(err, errno, "cannot replace etc/profile.d");
    if (mkdirat(d, "profile.d", 0755) < 0 && errno != EEXIST)
        return err_setx(err, errno, "cannot create etc/profile.d");
    _cleanup_close_ int pd =
            openat(d, "profile.d", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (pd < 0 || fchmod(pd, 0755) < 0)
        return err_setx(err, errno, "cannot open etc/profile.d");
    for (size_t i = 0; i < ELEMENTSOF(gen); i++) {
        (void)unlinkat(d, gen[i].name, 0);
        r = write_file_at(d, gen[i].name, gen[i].content, 0644);
        if (r == 0 && fchmodat(d, gen[i].name, 0644, 0) < 0)
            r = -errno;
        if (r < 0)
            return err_setx(err, -r, "cannot write etc/%s", gen[i].name);
    }
    return 0;
}

/* Lists the existing etc (every entry, no filter) into t; -E2BIG past the
 * bounds a build keeps, -EPERM at anything a build does not make. */
static int
list_fn(void *ud, enum tree_event ev, struct tree_entry *e)
{
    struct etc_tree *t = ud;
    char target[PATH_MAX];
    const char *tp = NULL;

    if (ev == TREE_ERROR)
        return -e->error;
    if (ev != TREE_ENTRY)
        return 0;
    if (t->n > COPY_MAX_FILES + ELEMENTSOF(gen) + 1)
        return -E2BIG; /* more than any build makes */
    const struct stat *st = &e->st;
    /* Only what abxd itself wrote; anything else is a reason to rebuild. */
    if (st->st_uid != geteuid() || st->st_gid != getegid() ||
        !(S_ISREG(st->st_mode) || S_ISDIR(st->st_mode) || S_ISLNK(st->st_mode)))
        return -EPERM;
    mode_t mode = st->st_mode & (S_IFMT | 07777);
    if (S_ISLNK(st->st_mode)) {
        ssize_t n = readlinkat(e->dirfd, e->name, target, sizeof(target) - 1);
        if (n < 0)
            return -errno;
        target[n] = '\0';
        tp = target;
        mode = S_IFLNK | 0777;
    }
    int r = tree_add(t, "", e->path, mode, tp, NULL);
    if (r < 0 || !S_ISDIR(st->st_mode))
        return r;
    return e->depth > COPY_MAX_DEPTH + 1 ? -E2BIG : TREE_ENTER;
}

static int
list_tree(struct etc_tree *t, int dfd)
{
    const struct tree_opts o = {.max_depth = COPY_MAX_DEPTH + 1, .path_max = PATH_MAX - 1};
    return tree_walk(dfd, -EBADF, &o, list_fn, t);
}

/* 1 when fd holds exactly the n bytes at mem, 0 when not, or -errno. */
static int
fd_holds(int fd, const char *mem, size_t n)
{
    struct stat st;
    char b[65536];
    size_t off = 0;

    if (fstat(fd, &st) < 0)
        return -errno;
    if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != n)
        return 0;
    for (;;) {
        ssize_t k = read(fd, b, sizeof(b));
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (k == 0)
            return off == n;
        if ((size_t)k > n - off || memcmp(b, mem + off, (size_t)k) != 0)
            return 0;
        off += (size_t)k;
    }
}

/* 1 when the two regular files hold the same bytes, 0 when not, or -errno. */
static int
fds_same(int a, int b)
{
    struct stat sa, sb;
    char x[32768], y[32768];

    if (fstat(a, &sa) < 0 || fstat(b, &sb) < 0)
        return -errno;
    if (!S_ISREG(sa.st_mode) || !S_ISREG(sb.st_mode) || sa.st_size != sb.st_size)
        return 0;
    for (;;) {
        ssize_t k = read_full(a, x, sizeof(x));
        if (k < 0)
            return (int)k;
        ssize_t m = read_full(b, y, (size_t)k);
        if (m < 0)
            return (int)m;
        if (m != k || memcmp(x, y, (size_t)k) != 0)
            return 0;
        if ((size_t)k < sizeof(x))
            return read_full(b, y, 1) == 0; /* b must end here too */
    }
}

/* 1 when state/etc is exactly what a build from host would make now. */
static int
etc_is_current(int state, int host, struct err *err)
{
    struct walk w = {.budget = COPY_MAX_FILES};
    struct etc_tree want = {0}, have = {0};
    int r;

    struct stat st;
    _cleanup_close_ int etc = openat(state, "etc", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (etc < 0)
        return errno == ENOENT || errno == ENOTDIR || errno == ELOOP ? 0 : -errno;
    if (fstat(etc, &st) < 0)
        return -errno;
    if ((st.st_mode & 07777) != 0755 || st.st_uid != geteuid() || st.st_gid != getegid())
        return 0;
    w.plan = &want;
    r = walk_etc(&w, host, -EBADF, err);
    if (r < 0)
        goto done;
    /* Whatever keeps us from reading the old etc (too big, foreign files,
     * an I/O error) is a reason to rebuild it, not to fail: the build
     * reports its own errors. */
    r = list_tree(&have, etc);
    if (r < 0) {
        r = r == -ENOMEM ? r : 0;
        goto done;
    }
    tree_sort(&want);
    tree_sort(&have);
    r = want.n == have.n;
    for (size_t i = 0; r == 1 && i < want.n; i++) {
        const struct etc_entry *a = &want.v[i], *b = &have.v[i];
        if (strcmp(a->path, b->path) || a->mode != b->mode ||
            (S_ISLNK(a->mode) && strcmp(a->target, b->target))) {
            r = 0;
            break;
        }
        if (!S_ISREG(a->mode))
            continue;
        _cleanup_close_ int cur = openat(etc, a->path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (cur < 0) {
            r = 0;
            break;
        }
        if (a->content) {
            r = fd_holds(cur, a->content, strlen(a->content));
        } else {
            _cleanup_close_ int src = openat(host, a->path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
            r = src < 0 ? 0 : fds_same(src, cur);
        }
        if (r < 0) {
            r = r == -ENOMEM ? r : 0;
            break;
        }
    }
done:
    tree_done(&want);
    tree_done(&have);
    return r;
}

int
rootfs_prepare_etc(const char *statedir, struct err *err)
{
    char tmpname[64], rnd[17];
    int r;
    struct walk w = {.budget = COPY_MAX_FILES};
    _cleanup_close_ int d = -EBADF;
    _cleanup_close_ int host = -EBADF;

    _cleanup_close_ int state = open(statedir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (state < 0)
        return err_setx(err, errno, "cannot open state directory '%s'", statedir);
    host = open("/etc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (host < 0)
        return err_setx(err, errno, "cannot open /etc");
    r = etc_is_current(state, host, err);
    if (r < 0)
        return r;
    if (r > 0)
        return ROOTFS_KEPT;

    r = rand_hex(rnd, 8);
    if (r < 0)
        return err_setx(err, -r, "random");
    (void)snprintf(tmpname, sizeof(tmpname), ".etc-%s", rnd);
    if (mkdirat(state, tmpname, 0755) < 0)
        return err_setx(err, errno, "cannot create '%s/%s'", statedir, tmpname);
    d = openat(state, tmpname, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d < 0) {
        r = -errno;
        goto fail;
    }
    (void)fchmod(d, 0755);
    r = walk_etc(&w, host, d, err);
    if (r < 0)
        goto fail;

    /* Swap in atomically. Only called at start, before any sandbox has
     * bound the previous directory, so removing it is safe. */
    if (renameat2(state, tmpname, state, "etc", RENAME_EXCHANGE) == 0) {
        r = rm_rf_at(state, tmpname);
        if (r < 0)
            return err_setx(err, -r, "cannot remove the previous etc");
        return ROOTFS_WRITTEN;
    }
    if (errno != ENOENT) {
        r = -errno;
        goto fail;
    }
    if (renameat(state, tmpname, state, "etc") < 0) {
        r = -errno;
        goto fail;
    }
    return ROOTFS_WRITTEN;
fail:
    (void)rm_rf_at(state, tmpname);
    return err_isset(err) ? r : err_setx(err, -r, "cannot build '%s/etc'", statedir);
}

/* The static abx-sudo binary, embedded by sudo-blob.S. */
extern const char abx_sudo_blob[];
extern const char abx_sudo_blob_end[];

int
rootfs_prepare_sudo(const char *statedir, char *ret_path, size_t size, struct err *err)
{
    char tmpname[64], rnd[17];
    size_t n = (size_t)(abx_sudo_blob_end - abx_sudo_blob);
    int r;

    if ((size_t)snprintf(ret_path, size, "%s/abx-sudo", statedir) >= size)
        return err_set(err, ENAMETOOLONG, "state directory path too long");
    _cleanup_close_ int state = open(statedir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (state < 0)
        return err_setx(err, errno, "cannot open state directory '%s'", statedir);
    /* The file a previous start wrote is kept when it is ours, 0555 and
     * byte for byte the embedded one: a start writes nothing it need not. */
    {
        struct stat st;
        _cleanup_close_ int cur = openat(state, "abx-sudo", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (cur >= 0 && fstat(cur, &st) == 0 && S_ISREG(st.st_mode) &&
            (st.st_mode & 07777) == 0555 && st.st_uid == geteuid() && st.st_nlink == 1 &&
            fd_holds(cur, abx_sudo_blob, n) == 1)
            return ROOTFS_KEPT;
    }
    r = rand_hex(rnd, 8);
    if (r < 0)
        return err_setx(err, -r, "random");
    (void)snprintf(tmpname, sizeof(tmpname), ".abx-sudo-%s", rnd);
    _cleanup_close_ int fd =
            openat(state, tmpname, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0555);
    if (fd < 0)
        return err_setx(err, errno, "cannot create '%s/%s'", statedir, tmpname);
    r = write_full(fd, abx_sudo_blob, n);
    if (r >= 0 && fchmod(fd, 0555) < 0)
        r = -errno;
    /* Sandboxes of a previous run may still bind the old file: rename, do
     * not rewrite it in place. */
    if (r >= 0 && renameat(state, tmpname, state, "abx-sudo") < 0)
        r = -errno;
    if (r < 0) {
        (void)unlinkat(state, tmpname, 0);
        return err_setx(err, -r, "cannot write '%s'", ret_path);
    }
    return ROOTFS_WRITTEN;
}
