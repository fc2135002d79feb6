/*
 * uidpool.c - uid range slots guarded by OFD locks on their absolute uids.
 *
 * Byte u of the lock file stands for host uid u. The file stays empty: locks
 * past the end of a file are legal, and off_t covers every 32-bit uid.
 *
 * Daemons of earlier versions locked byte i for their slot i, and nearly all
 * of them ran with the default base. So that one of those and one of ours
 * can share a host during an upgrade, a range that overlaps the default
 * pool also takes the bytes of the old slot indices it overlaps there. Those
 * bytes lie below 65536, where no range lock reaches (bases start there).
 */
#include "jail/uidpool.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/fd.h"

struct uidpool {
    int fd;
    uint32_t base, size, nslots, next, used;
    uint8_t *held; /* bitmap of slots this process holds */
};

int
uidpool_open(const char *lockfile, uint32_t base, uint32_t size, uint32_t nslots,
             struct uidpool **ret, struct err *err)
{
    if (size == 0 || nslots == 0 || (uint64_t)base + (uint64_t)size * nslots > UINT32_MAX - 1)
        return err_set(err, EINVAL, "uid pool %u + %u x %u does not fit in 32 bits", base, nslots,
                       size);
    if (base < 65536)
        return err_set(err, EINVAL, "uid pool base %u overlaps ordinary host users", base);
    char dir[512];
    const char *slash = strrchr(lockfile, '/');
    if (slash && slash != lockfile) {
        size_t n = (size_t)(slash - lockfile);
        if (n >= sizeof(dir))
            return err_set(err, ENAMETOOLONG, "uid pool lock path too long");
        memcpy(dir, lockfile, n);
        dir[n] = '\0';
        int r = mkdir_p(dir, 0755);
        if (r < 0)
            return err_setx(err, -r, "cannot create '%s'", dir);
    }
    struct uidpool *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->held = calloc((nslots + 7) / 8, 1);
    if (!p->held) {
        free(p);
        return -ENOMEM;
    }
    p->fd = open(lockfile, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (p->fd < 0) {
        int r = err_setx(err, errno, "cannot open uid pool lock '%s'", lockfile);
        free(p->held);
        free(p);
        return r;
    }
    p->base = base;
    p->size = size;
    p->nslots = nslots;
    *ret = p;
    return 0;
}

struct uidpool *
uidpool_free(struct uidpool *p)
{
    if (!p)
        return NULL;
    safe_close(p->fd); /* drops every lock we hold */
    free(p->held);
    free(p);
    return NULL;
}

static bool
is_held(const struct uidpool *p, uint32_t s)
{
    return p->held[s / 8] & (1u << (s % 8));
}

static int
lock_bytes(int fd, uint64_t start, uint64_t len, short type)
{
    struct flock fl = {
            .l_type = type,
            .l_whence = SEEK_SET,
            .l_start = (off_t)start,
            .l_len = (off_t)len,
    };
    return fcntl(fd, F_OFD_SETLK, &fl) < 0 ? -errno : 0;
}

/* The old slot indices (of a pool at UIDPOOL_LEGACY_BASE) that uids
 * [first, first + size) overlap, as [*lo, *hi); false when none. */
static bool
legacy_span(uint64_t first, uint64_t size, uint64_t *lo, uint64_t *hi)
{
    const uint64_t b = UIDPOOL_LEGACY_BASE, r = UIDPOOL_LEGACY_RANGE;
    const uint64_t end = b + (uint64_t)UIDPOOL_LEGACY_SLOTS * r;
    if (first + size <= b || first >= end)
        return false;
    uint64_t from = first < b ? b : first, to = first + size > end ? end : first + size;
    *lo = (from - b) / r;
    *hi = (to - b + r - 1) / r;
    return true;
}

/* Locks (or unlocks) slot s: exactly its uids, and the old slot bytes
 * that stand for them. Either both locks are taken or neither. */
static int
lock_slot(const struct uidpool *p, uint32_t s, short type)
{
    uint64_t first = uidpool_first_uid(p, s), lo, hi;
    int r = lock_bytes(p->fd, first, p->size, type);
    if (r < 0 || !legacy_span(first, p->size, &lo, &hi))
        return r;
    r = lock_bytes(p->fd, lo, hi - lo, type);
    if (r < 0 && type != F_UNLCK)
        (void)lock_bytes(p->fd, first, p->size, F_UNLCK);
    return r;
}

int
uidpool_acquire(struct uidpool *p, uint32_t *ret_slot)
{
    for (uint32_t i = 0; i < p->nslots; i++) {
        uint32_t s = (p->next + i) % p->nslots;
        if (is_held(p, s))
            continue;
        int r = lock_slot(p, s, F_WRLCK);
        if (r == -EAGAIN || r == -EACCES)
            continue; /* another pool holds some of these uids */
        if (r < 0)
            return r;
        p->held[s / 8] |= (uint8_t)(1u << (s % 8));
        p->used++;
        /* Round-robin, so a slot just released is not reused at once. */
        p->next = (s + 1) % p->nslots;
        *ret_slot = s;
        return 0;
    }
    return -EAGAIN;
}

void
uidpool_release(struct uidpool *p, uint32_t slot)
{
    if (slot >= p->nslots || !is_held(p, slot))
        return;
    (void)lock_slot(p, slot, F_UNLCK);
    p->held[slot / 8] &= (uint8_t) ~(1u << (slot % 8));
    p->used--;
}

uid_t
uidpool_first_uid(const struct uidpool *p, uint32_t slot)
{
    return (uid_t)(p->base + slot * p->size);
}

uint32_t
uidpool_size(const struct uidpool *p)
{
    return p->size;
}

uint32_t
uidpool_in_use(const struct uidpool *p)
{
    return p->used;
}
