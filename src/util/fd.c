/*
 * fd.c - descriptor helpers and trusted-tree file utilities.
 */
#include "fd.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "rand.h"

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

/* Empties the directory open at fd (which we own) without recursion: walk
 * down into the first subdirectory found, come back up via "..", and stop
 * once back at the start. Nothing else may modify the tree meanwhile. */
static int
empty_dir(int topfd)
{
    struct stat top;
    if (fstat(topfd, &top) < 0)
        return -errno;
    _cleanup_close_ int cur = fcntl(topfd, F_DUPFD_CLOEXEC, 3);
    if (cur < 0)
        return -errno;

    for (;;) {
        int dupfd = fcntl(cur, F_DUPFD_CLOEXEC, 3);
        if (dupfd < 0)
            return -errno;
        DIR *d = fdopendir(dupfd);
        if (!d) {
            int r = -errno;
            safe_close(dupfd);
            return r;
        }
        rewinddir(d);
        char sub[NAME_MAX + 1] = "";
        struct dirent *de;
        int r = 0;
        while ((errno = 0, de = readdir(d))) {
            if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                continue;
            if (unlinkat(cur, de->d_name, 0) == 0 || errno == ENOENT)
                continue;
            if (errno == EISDIR || errno == EPERM) {
                if (unlinkat(cur, de->d_name, AT_REMOVEDIR) == 0 || errno == ENOENT)
                    continue;
                if (errno == ENOTEMPTY || errno == EEXIST) {
                    (void)snprintf(sub, sizeof(sub), "%s", de->d_name);
                    break;
                }
            }
            r = -errno;
            break;
        }
        if (!de && errno)
            r = -errno;
        closedir(d);
        if (r < 0)
            return r;
        if (sub[0]) {
            int nfd = openat(cur, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (nfd < 0)
                return -errno;
            safe_close(cur);
            cur = nfd;
            continue;
        }
        /* cur is empty now */
        struct stat st;
        if (fstat(cur, &st) < 0)
            return -errno;
        if (st.st_dev == top.st_dev && st.st_ino == top.st_ino)
            return 0;
        int up = openat(cur, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (up < 0)
            return -errno;
        safe_close(cur);
        cur = up;
        /* the loop rescans the parent and removes the emptied child */
    }
}

int
rm_rf_at(int dirfd, const char *name)
{
    if (unlinkat(dirfd, name, 0) == 0 || errno == ENOENT)
        return 0;
    if (errno != EISDIR && errno != EPERM)
        return -errno;
    if (unlinkat(dirfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
        return 0;
    if (errno != ENOTEMPTY && errno != EEXIST)
        return -errno;
    _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : -errno;
    int r = empty_dir(fd);
    if (r < 0)
        return r;
    if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
        return -errno;
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
    for (;;) {
        ssize_t k = read(in, b, sizeof(b));
        if (k < 0) {
            if (errno == EINTR)
                continue;
            r = -errno;
            goto fail;
        }
        if (k == 0)
            break;
        r = write_full(out, b, (size_t)k);
        if (r < 0)
            goto fail;
    }
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
