/*
 * blob.c - blob files on disk, for a backend that keeps its blobs as files
 * beside its database (SQLite): <blobs>/<2 hex>/<64 hex>, one immutable
 * file per content, made durable before any row names it. What a file's
 * name means and how to find, place and scan them lives here; which files
 * may go (a question for the rows) is the backend's, under its lock.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/store-internal.h"
#include "util/cleanup.h"
#include "util/fd.h"

static bool
is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

int
blob_name_kind(const char *name)
{
    size_t n = strlen(name);
    if (n != STORE_HASH_LEN && !(n == STORE_HASH_LEN + 4 && !strcmp(name + STORE_HASH_LEN, ".tmp")))
        return BLOB_NAME_OTHER;
    for (size_t i = 0; i < STORE_HASH_LEN; i++)
        if (!is_hex(name[i]))
            return BLOB_NAME_OTHER;
    return n == STORE_HASH_LEN ? BLOB_NAME_BLOB : BLOB_NAME_TMP;
}

int
blob_dir(int blobs_fd, const char *hash, bool create, struct err *err)
{
    char sub[3] = {hash[0], hash[1], '\0'};
    int fd = openat(blobs_fd, sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0 || errno != ENOENT || !create)
        return fd >= 0 ? fd : err_setx(err, errno, "cannot open blob directory '%s'", sub);
    /* The first of 256: made once, and durably (its entry in blobs/). */
    if (mkdirat(blobs_fd, sub, 0755) == 0) {
        if (fsync(blobs_fd) < 0)
            return err_setx(err, errno, "cannot sync the blob directory");
    } else if (errno != EEXIST) {
        return err_setx(err, errno, "cannot create blob directory '%s'", sub);
    }
    fd = openat(blobs_fd, sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return err_setx(err, errno, "cannot open blob directory '%s'", sub);
    return fd;
}

int
blob_open(int blobs_fd, const char *hash, struct err *err)
{
    _cleanup_close_ int d = blob_dir(blobs_fd, hash, false, err);
    if (d < 0)
        return d;
    int fd = openat(d, hash, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return err_setx(err, errno == ENOENT ? EIO : errno,
                        "blob %.16s... is missing from the store", hash);
    return fd;
}

/*
 * Links the staged data in as the blob, durable on return. Called under
 * the write lock by a writer that found no usable file for hash. If a file
 * of that name exists all the same, it has no row (a crash between placing
 * a blob and committing its row, or between GC's steps, left it): nobody
 * ever checked its bytes, and adopting them would acknowledge a write
 * whose content may be anything. Our own staged data (hashed as it came
 * in, fsynced) replaces it instead: linked to "<hash>.tmp" and renamed
 * over it, so the name never goes missing. A crash anywhere in between
 * leaves the old file or ours under the name, maybe a temporary (GC
 * deletes it), and no row: the write was not acknowledged.
 */
int
blob_place(int blobs_fd, int fd, const char *hash, struct err *err)
{
    char proc[64], tmp[STORE_HASH_LEN + 5];
    _cleanup_close_ int d = blob_dir(blobs_fd, hash, true, err);
    if (d < 0)
        return d;
    (void)snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
    if (linkat(AT_FDCWD, proc, d, hash, AT_SYMLINK_FOLLOW) < 0) {
        if (errno != EEXIST)
            return err_setx(err, errno == ENOSPC ? ENOSPC : errno, "cannot store blob %.16s...",
                            hash);
        (void)snprintf(tmp, sizeof(tmp), "%s.tmp", hash);
        if (unlinkat(d, tmp, 0) < 0 && errno != ENOENT)
            return err_setx(err, errno, "cannot remove '%.16s....tmp'", hash);
        if (linkat(AT_FDCWD, proc, d, tmp, AT_SYMLINK_FOLLOW) < 0)
            return err_setx(err, errno == ENOSPC ? ENOSPC : errno, "cannot store blob %.16s...",
                            hash);
        if (renameat(d, tmp, d, hash) < 0) {
            int r = err_setx(err, errno, "cannot store blob %.16s...", hash);
            (void)unlinkat(d, tmp, 0);
            return r;
        }
    }
    if (fsync(d) < 0)
        return err_setx(err, errno, "cannot sync the blob directory");
    return 0;
}

/*
 * Hands fn the names in the blob directory that a crash may have left, up
 * to batch at a time: blob files ("<hash>") not changed within min_age_ms,
 * and writers' temporaries ("<hash>.tmp") of any age. A first look, made
 * without any lock so that young files cost nothing: fn decides again
 * under its own. An error of fn stops the scan and is returned.
 */
int
blob_scan(int blobs_fd, uint64_t min_age_ms, int batch, blob_scan_fn fn, void *ud, struct err *err)
{
    _cleanup_free_ struct blob_name *items = calloc((size_t)batch, sizeof(*items));
    uint64_t now = store_now_ms();
    int n = 0, r = 0;

    if (!items)
        return err_set(err, ENOMEM, "store: out of memory");
    /* A directory stream of its own every time: a dup of blobs_fd would
     * share blobs_fd's file offset, left at the end by the first sweep. */
    int dfd = openat(blobs_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *top = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!top) {
        r = err_setx(err, errno, "cannot scan the blob directory");
        safe_close(dfd);
        return r;
    }
    struct dirent *de;
    while (r >= 0 && (de = readdir(top))) {
        if (strlen(de->d_name) != 2 || !is_hex(de->d_name[0]) || !is_hex(de->d_name[1]))
            continue;
        int sfd = openat(blobs_fd, de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *sub = sfd >= 0 ? fdopendir(sfd) : NULL;
        if (!sub) {
            safe_close(sfd);
            continue;
        }
        struct dirent *b;
        while (r >= 0 && (b = readdir(sub))) {
            int kind = blob_name_kind(b->d_name);
            if (kind == BLOB_NAME_OTHER || memcmp(b->d_name, de->d_name, 2) != 0)
                continue;
            struct stat sb;
            if (kind == BLOB_NAME_BLOB) {
                if (fstatat(dirfd(sub), b->d_name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
                    continue;
                uint64_t mtime = (uint64_t)sb.st_mtim.tv_sec * 1000u;
                if (mtime > now || now - mtime < min_age_ms)
                    continue;
            }
            memcpy(items[n++].name, b->d_name, strlen(b->d_name) + 1);
            if (n == batch) {
                r = fn(ud, items, n, err);
                n = 0;
            }
        }
        closedir(sub);
    }
    closedir(top);
    if (r >= 0 && n > 0)
        r = fn(ud, items, n, err);
    return r;
}
