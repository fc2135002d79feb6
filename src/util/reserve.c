/*
 * reserve.c - the ballast file: measure, allocate, release.
 *
 * Allocation prefers fallocate(), which reserves blocks without writing
 * them (ext4, xfs, btrfs, tmpfs); where it is not supported the file is
 * written with zeros, which a compressing file system would not keep.
 */
#include "util/reserve.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/fd.h"

static int
fs_free(int dirfd, uint64_t *ret)
{
    struct statvfs v;
    if (fstatvfs(dirfd, &v) < 0)
        return -errno;
    /* Root may use the blocks ext4 keeps back from everyone else (sandbox
     * uids among them), so for abxd as root the file system is full only
     * when those are gone too. */
    uint64_t blocks = geteuid() == 0 ? v.f_bfree : v.f_bavail;
    *ret = blocks * (uint64_t)v.f_frsize;
    return 0;
}

/* 1 when dirfd/RESERVE_NAME is a complete reserve of size bytes, 0 when
 * nothing is there, -EEXIST when something else is. */
static int
have_reserve(int dirfd, uint64_t size)
{
    struct stat st;
    if (fstatat(dirfd, RESERVE_NAME, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : -errno;
    if (S_ISREG(st.st_mode) && (uint64_t)st.st_size == size &&
        (uint64_t)st.st_blocks * 512u >= size)
        return 1;
    return -EEXIST;
}

static int
allocate(int fd, uint64_t size)
{
    if (fallocate(fd, 0, 0, (off_t)size) == 0)
        return 0;
    if (errno != EOPNOTSUPP && errno != ENOSYS)
        return -errno;
    static const char zero[65536];
    for (uint64_t done = 0; done < size;) {
        size_t n = size - done < sizeof(zero) ? (size_t)(size - done) : sizeof(zero);
        int r = write_full(fd, zero, n);
        if (r < 0)
            return r;
        done += n;
    }
    return 0;
}

static int
create_reserve(int dirfd, uint64_t size)
{
    _cleanup_close_ int fd = openat(dirfd, RESERVE_TMP_NAME,
                                    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    int r = allocate(fd, size);
    if (r == 0 && fsync(fd) < 0)
        r = -errno;
    if (r == 0 && renameat(dirfd, RESERVE_TMP_NAME, dirfd, RESERVE_NAME) < 0)
        r = -errno;
    if (r < 0)
        (void)unlinkat(dirfd, RESERVE_TMP_NAME, 0);
    return r;
}

int
reserve_check(int dirfd, uint64_t size, struct reserve_state *ret, struct err *err)
{
    struct reserve_state st = {
            .low_bytes = size / RESERVE_LOW_DIV,
            .high_bytes =
                    size > UINT64_MAX / RESERVE_HIGH_MUL ? UINT64_MAX : size * RESERVE_HIGH_MUL,
    };
    int ev = RESERVE_UNCHANGED;
    int r;

    /* A half-allocated reserve of a crashed run only takes room. */
    if (unlinkat(dirfd, RESERVE_TMP_NAME, 0) < 0 && errno != ENOENT)
        return err_setx(err, errno, "cannot remove '%s'", RESERVE_TMP_NAME);
    r = have_reserve(dirfd, size);
    if (r == -EEXIST || (r == 1 && size == 0)) {
        /* Another size (the configuration changed), sparse or foreign: go.
         * Only turning the reserve off counts as a release; a replacement
         * is reported by what follows (created, or absent for lack of room). */
        if (unlinkat(dirfd, RESERVE_NAME, 0) < 0)
            return err_setx(err, errno, "cannot remove the old '%s'", RESERVE_NAME);
        if (size == 0)
            ev = RESERVE_RELEASED;
        r = 0;
    }
    if (r < 0)
        return err_setx(err, -r, "cannot inspect '%s'", RESERVE_NAME);
    st.present = r == 1;
    r = fs_free(dirfd, &st.free_bytes);
    if (r < 0)
        return err_setx(err, -r, "cannot measure the free space");

    if (st.present && st.free_bytes < st.low_bytes) {
        if (unlinkat(dirfd, RESERVE_NAME, 0) < 0)
            return err_setx(err, errno, "cannot release '%s'", RESERVE_NAME);
        st.present = false;
        ev = RESERVE_RELEASED;
    } else if (!st.present && size > 0 && st.free_bytes >= st.high_bytes) {
        r = create_reserve(dirfd, size);
        if (r < 0 && r != -ENOSPC && r != -EDQUOT)
            return err_setx(err, -r, "cannot create '%s' of %llu bytes", RESERVE_NAME,
                            (unsigned long long)size);
        st.present = r == 0;
        if (r == 0)
            ev = RESERVE_CREATED;
    }
    if (ret)
        *ret = st;
    return ev;
}
