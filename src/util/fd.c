/*
 * fd.c - descriptor helpers and trusted-tree file utilities.
 */
#include "util/fd.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/rand.h"

int
fd_set_nonblock(int fd, bool on)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0)
        return -errno;
    int nfl = on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK;
    if (nfl != fl && fcntl(fd, F_SETFL, nfl) < 0)
        return -errno;
    return 0;
}

int
fd_set_cloexec(int fd, bool on)
{
    int fl = fcntl(fd, F_GETFD);
    if (fl < 0)
        return -errno;
    int nfl = on ? fl | FD_CLOEXEC : fl & ~FD_CLOEXEC;
    if (nfl != fl && fcntl(fd, F_SETFD, nfl) < 0)
        return -errno;
    return 0;
}

ssize_t
read_full(int fd, void *buf, size_t n)
{
    size_t done = 0;
    while (done < n) {
        ssize_t k = read(fd, (char *)buf + done, n - done);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (k == 0)
            break;
        done += (size_t)k;
    }
    return (ssize_t)done;
}

int
write_full(int fd, const void *buf, size_t n)
{
    size_t done = 0;
    while (done < n) {
        ssize_t k = write(fd, (const char *)buf + done, n - done);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        done += (size_t)k;
    }
    return 0;
}

int
write_file_at(int dirfd, const char *name, const char *s, mode_t mode)
{
    _cleanup_close_ int fd =
            openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0)
        return -errno;
    return write_full(fd, s, strlen(s));
}

int
write_existing_at(int dirfd, const char *name, const char *s)
{
    _cleanup_close_ int fd = openat(dirfd, name, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -errno;
    /* cgroupfs and procfs take one write(2) per value. */
    size_t n = strlen(s);
    ssize_t k = write(fd, s, n);
    if (k < 0)
        return -errno;
    return (size_t)k == n ? 0 : -EIO;
}

int
read_file_at(int dirfd, const char *name, size_t max, struct buf *b)
{
    _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -errno;
    buf_reset(b);
    char tmp[4096];
    for (;;) {
        ssize_t k = read(fd, tmp, sizeof(tmp));
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (k == 0)
            return 0;
        if (b->len + (size_t)k > max)
            return -EFBIG;
        int r = buf_put(b, tmp, (size_t)k);
        if (r < 0)
            return r;
    }
}

int
mkdir_p(const char *path, mode_t mode)
{
    char p[PATH_MAX];
    size_t n = strlen(path);

    if (n == 0 || n >= sizeof(p))
        return -EINVAL;
    memcpy(p, path, n + 1);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(p, mode) < 0 && errno != EEXIST)
            return -errno;
        *s = '/';
    }
    if (mkdir(p, mode) < 0 && errno != EEXIST)
        return -errno;
    struct stat st;
    if (stat(p, &st) < 0)
        return -errno;
    return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

/* --- removing trees --- */

/* One directory on the way down. Only the deepest levels keep a stream
 * open; the others are known by identity and reached again by "..". */
struct rm_level {
    dev_t dev;
    ino_t ino;
    DIR *dir;    /* open, or NULL once out of the window */
    char *child; /* while dir is open: the subdirectory being emptied */
};

struct rm_walk {
    struct rm_level *v;
    size_t n, cap;
    size_t open;   /* levels with a stream */
    size_t window; /* streams to keep at most: RM_TREE_FDS, less after EMFILE */
    struct rm_tree *t;
};

static void
rm_close_level(struct rm_walk *w, struct rm_level *l)
{
    if (l->dir) {
        (void)closedir(l->dir);
        l->dir = NULL;
        w->open--;
    }
    free(l->child);
    l->child = NULL;
}

/* Closes the stream of the shallowest level that has one, except the
 * deepest (the one being read). false when nothing could be closed. */
static bool
rm_shrink(struct rm_walk *w)
{
    for (size_t i = 0; i + 1 < w->n; i++)
        if (w->v[i].dir) {
            rm_close_level(w, &w->v[i]);
            return true;
        }
    return false;
}

/* openat() that makes room when the process is out of descriptors. */
static int
rm_openat(struct rm_walk *w, int dfd, const char *name)
{
    for (;;) {
        int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0)
            return fd;
        if ((errno != EMFILE && errno != ENFILE) || !rm_shrink(w))
            return -errno;
        if (w->window > 1)
            w->window--;
    }
}

/* Pushes the directory open at fd (taken) as a new deepest level. */
static int
rm_push(struct rm_walk *w, int fd)
{
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int r = -errno;
        safe_close(fd);
        return r;
    }
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 64;
        struct rm_level *v = realloc(w->v, cap * sizeof(*v));
        if (!v) {
            safe_close(fd);
            return -ENOMEM;
        }
        w->v = v;
        w->cap = cap;
    }
    DIR *d = fdopendir(fd);
    if (!d) {
        int r = -errno;
        safe_close(fd);
        return r;
    }
    w->v[w->n++] = (struct rm_level){.dev = st.st_dev, .ino = st.st_ino, .dir = d};
    w->open++;
    while (w->open > w->window && rm_shrink(w))
        ;
    return 0;
}

/* Counts one more entry looked at: -E2BIG past the limit. */
static int
rm_count(struct rm_walk *w)
{
    if (!w->t)
        return 0;
    w->t->seen++;
    return w->t->max && w->t->seen > w->t->max ? -E2BIG : 0;
}

static int
rm_fail(struct rm_walk *w, int r, const char *name)
{
    if (w->t) {
        w->t->depth = (unsigned)w->n; /* the entry is in level n - 1 */
        (void)snprintf(w->t->failed, sizeof(w->t->failed), "%s", name);
    }
    return r;
}

/* Removes name in dfd if it is a file, a link or an empty directory: 0
 * when gone, 1 when it is a directory with something in it. */
static int
rm_entry(int dfd, const char *name)
{
    if (unlinkat(dfd, name, 0) == 0 || errno == ENOENT)
        return 0;
    int e = errno;
    if (e != EISDIR && e != EPERM)
        return -e;
    if (unlinkat(dfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
        return 0;
    if (errno == ENOTEMPTY || errno == EEXIST)
        return 1;
    /* EPERM from unlink on a file that is no directory: that is the cause. */
    return errno == ENOTDIR ? -e : -errno;
}

/* Enters the subdirectory name of the deepest level. */
static int
rm_descend(struct rm_walk *w, const char *name)
{
    struct rm_level *l = &w->v[w->n - 1];
    int fd = rm_openat(w, dirfd(l->dir), name);
    if (fd == -ENOENT)
        return 0; /* gone meanwhile */
    if (fd == -ENOTDIR || fd == -ELOOP) {
        /* Swapped for a file or a link: that is removed as it is (and a
         * directory swapped back in keeps the parent from going, which
         * the parent's removal notices). */
        int r = rm_entry(dirfd(l->dir), name);
        return r < 0 ? rm_fail(w, r, name) : 0;
    }
    if (fd < 0)
        return rm_fail(w, fd, name);
    l->child = strdup(name);
    if (!l->child) {
        safe_close(fd);
        return -ENOMEM;
    }
    int r = rm_push(w, fd);
    if (r < 0) {
        free(l->child);
        l->child = NULL;
        return rm_fail(w, r, name);
    }
    return 0;
}

/* The deepest level is empty: back to its parent, removing it there when
 * the parent's stream is still open (else the parent's new stream finds it
 * again). -ESTALE when ".." is not the directory we came down from. */
static int
rm_ascend(struct rm_walk *w)
{
    struct rm_level *cur = &w->v[w->n - 1], *up = &w->v[w->n - 2];
    if (!up->dir) {
        struct stat st;
        int fd = rm_openat(w, dirfd(cur->dir), "..");
        if (fd < 0)
            return rm_fail(w, fd, "..");
        if (fstat(fd, &st) < 0 || st.st_dev != up->dev || st.st_ino != up->ino) {
            safe_close(fd);
            return -ESTALE; /* moved: ".." is somebody else's directory now */
        }
        rm_close_level(w, cur);
        w->n--;
        up->dir = fdopendir(fd);
        if (!up->dir) {
            int r = -errno;
            safe_close(fd);
            return r;
        }
        w->open++;
        return 0;
    }
    rm_close_level(w, cur);
    w->n--;
    char *name = TAKE_PTR(up->child);
    int r = rm_entry(dirfd(up->dir), name);
    if (r > 0 && (r = rm_count(w)) == 0) /* filled again meanwhile: go down once more */
        r = rm_descend(w, name);
    else if (r < 0)
        r = rm_fail(w, r, name);
    free(name);
    return r;
}

/* Empties the directory topfd (borrowed). */
static int
rm_empty(int topfd, struct rm_tree *t)
{
    struct rm_walk w = {.window = RM_TREE_FDS, .t = t};
    int r = 0;

    for (unsigned restarts = 0;; restarts++) {
        int fd = fcntl(topfd, F_DUPFD_CLOEXEC, 3);
        if (fd < 0) {
            r = -errno;
            break;
        }
        /* fdopendir() shares the offset with topfd: start from the top. */
        (void)lseek(fd, 0, SEEK_SET);
        if ((r = rm_push(&w, fd)) < 0)
            break;
        while (r == 0) {
            struct rm_level *l = &w.v[w.n - 1];
            errno = 0;
            struct dirent *de = readdir(l->dir);
            if (!de) {
                if (errno)
                    r = rm_fail(&w, -errno, "");
                else if (w.n == 1)
                    break; /* the top is empty */
                else
                    r = rm_ascend(&w);
                continue;
            }
            if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                continue;
            if ((r = rm_count(&w)) < 0)
                break;
            int k = rm_entry(dirfd(l->dir), de->d_name);
            if (k < 0)
                r = rm_fail(&w, k, de->d_name);
            else if (k > 0)
                r = rm_descend(&w, de->d_name);
        }
        while (w.n > 0)
            rm_close_level(&w, &w.v[--w.n]);
        if (r != -ESTALE || restarts + 1 >= RM_TREE_RESTARTS)
            break;
        r = 0; /* the tree changed under us: start over from the top */
    }
    free(w.v);
    return r;
}

int
rm_tree_at(int dirfd, const char *name, struct rm_tree *t)
{
    int r;

    if (t) {
        t->seen = 0;
        t->depth = 0;
        t->failed[0] = '\0';
    }
    for (unsigned tries = 0; tries < RM_TREE_RESTARTS; tries++) {
        r = rm_entry(dirfd, name);
        if (r <= 0)
            return r;
        _cleanup_close_ int fd =
                openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT)
            return 0;
        if (fd < 0 && (errno == ENOTDIR || errno == ELOOP))
            continue; /* swapped for a file or a link: remove that */
        if (fd < 0)
            return -errno;
        r = rm_empty(fd, t);
        if (r < 0)
            return r;
        if (unlinkat(dirfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
            return 0;
        if (errno != ENOTEMPTY && errno != EEXIST)
            return -errno;
        /* Something was added while we emptied it: go again. */
    }
    return -ESTALE;
}

int
rm_rf_at(int dirfd, const char *name)
{
    return rm_tree_at(dirfd, name, NULL);
}

const char *
fd_type_name(mode_t mode)
{
    switch (mode & S_IFMT) {
    case S_IFREG:
        return "regular file";
    case S_IFDIR:
        return "directory";
    case S_IFLNK:
        return "symlink";
    case S_IFIFO:
        return "fifo";
    case S_IFSOCK:
        return "unix socket";
    case S_IFCHR:
        return "character device";
    case S_IFBLK:
        return "block device";
    default:
        return "file of unknown type";
    }
}

/* --- copying --- */

static int
pwrite_full(int fd, const char *buf, size_t n, off_t off)
{
    while (n > 0) {
        ssize_t k = pwrite(fd, buf, n, off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return -errno;
        buf += k;
        n -= (size_t)k;
        off += k;
    }
    return 0;
}

int
fd_copy_sparse(int in, int out, uint64_t size, char *buf, size_t bufsz, uint64_t *budget,
               uint64_t *ret_data)
{
    uint64_t off = 0, data = 0, end = size;
    bool seek = true;

    while (off < end) {
        uint64_t from = off, to = end;
        if (seek) {
            off_t d = lseek(in, (off_t)off, SEEK_DATA);
            if (d < 0 && errno == ENXIO)
                break; /* a hole up to the end */
            if (d < 0 && (errno == EINVAL || errno == EOPNOTSUPP)) {
                seek = false; /* no SEEK_DATA here: all data */
            } else if (d < 0) {
                return -errno;
            } else {
                off_t h = lseek(in, d, SEEK_HOLE);
                if (h < 0)
                    return -errno;
                from = (uint64_t)d;
                to = MIN((uint64_t)h, end);
            }
        }
        for (off = from; off < to;) {
            size_t want = (size_t)MIN(to - off, (uint64_t)bufsz);
            ssize_t k = pread(in, buf, want, (off_t)off);
            if (k < 0 && errno == EINTR)
                continue;
            if (k < 0)
                return -errno;
            if (k == 0) {
                end = off; /* shrank under us: stop at its end */
                break;
            }
            if (budget && (uint64_t)k > *budget)
                return -EFBIG;
            int r = pwrite_full(out, buf, (size_t)k, (off_t)off);
            if (r < 0)
                return r;
            if (budget)
                *budget -= (uint64_t)k;
            off += (uint64_t)k;
            data += (uint64_t)k;
        }
        if (!seek && off >= to)
            break;
    }
    if (ftruncate(out, (off_t)end) < 0)
        return -errno;
    if (ret_data)
        *ret_data = data;
    return 0;
}

int
copy_file_at(int srcdirfd, const char *src, int dirfd, const char *name, mode_t mode)
{
    char tmp[NAME_MAX + 1];
    char rnd[17];
    int r;

    _cleanup_close_ int in = openat(srcdirfd, src, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return -errno;
    struct stat st;
    if (fstat(in, &st) < 0)
        return -errno;
    if (!S_ISREG(st.st_mode))
        return -EINVAL;
    r = rand_hex(rnd, 8);
    if (r < 0)
        return r;
    if (snprintf(tmp, sizeof(tmp), ".tmp-%s", rnd) >= (int)sizeof(tmp))
        return -ENAMETOOLONG;
    _cleanup_close_ int out = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (out < 0)
        return -errno;
    char b[65536];
    r = fd_copy_sparse(in, out, (uint64_t)st.st_size, b, sizeof(b), NULL, NULL);
    if (r < 0)
        goto fail;
    if (fchmod(out, mode) < 0 || renameat(dirfd, tmp, dirfd, name) < 0) {
        r = -errno;
        goto fail;
    }
    return 0;
fail:
    (void)unlinkat(dirfd, tmp, 0);
    return r;
}

static int
cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void
fd_names_free(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

int
fd_dir_names(int dirfd, size_t max, char ***ret, size_t *ret_n)
{
    int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    DIR *d = fdopendir(fd);
    if (!d) {
        int r = -errno;
        (void)close(fd);
        return r;
    }
    char **v = NULL;
    size_t n = 0, cap = 0;
    int r = 0;
    struct dirent *de;
    while ((errno = 0, de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        if (n >= max) {
            r = -E2BIG;
            break;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 32;
            char **nv = realloc(v, cap * sizeof(*v));
            if (!nv) {
                r = -ENOMEM;
                break;
            }
            v = nv;
        }
        if (!(v[n] = strdup(de->d_name))) {
            r = -ENOMEM;
            break;
        }
        n++;
    }
    if (r == 0 && errno)
        r = -errno;
    closedir(d);
    if (r < 0) {
        fd_names_free(v, n);
        return r;
    }
    if (n)
        qsort(v, n, sizeof(*v), cmp_names);
    *ret = v;
    *ret_n = n;
    return 0;
}
