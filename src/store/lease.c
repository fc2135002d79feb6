/*
 * lease.c - the GC lease as both backends use it: this process's name as a
 * holder, whether a holder's process is gone, taking the lease (over from a
 * dead holder), and store_gc() around a backend's collection. The lease row
 * itself (compare and swap) is the backend's.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "store/store-internal.h"
#include "store/store.h"
#include "util/cleanup.h"
#include "util/fd.h"
#include "util/parse.h"

/* --- GC lease holders --- */

/* The start time of pid in clock ticks since boot (field 22 of
 * /proc/<pid>/stat, counted after the parenthesised command name, which
 * may hold spaces and parentheses itself). -ENOENT when there is no such
 * process, or only its corpse: a zombie (state Z or X, field 3) holds
 * nothing, and one whose parent died waits for whoever reaps orphans -
 * abxd's network process, killed with its parent, may wait long. */
static int
proc_start_time(long pid, uint64_t *ret)
{
    char path[64], b[1024], *p;
    (void)snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ESRCH ? -ENOENT : -errno;
    ssize_t n = read_full(fd, b, sizeof(b) - 1);
    if (n < 0)
        return errno == ESRCH ? -ENOENT : (int)n;
    b[n] = '\0';
    p = strrchr(b, ')');
    if (!p)
        return -EINVAL;
    p++;
    if (p[0] == ' ' && (p[1] == 'Z' || p[1] == 'X'))
        return -ENOENT;
    for (int field = 2; field < 22; field++) {
        p = strchr(p, ' ');
        if (!p)
            return -EINVAL;
        p++;
    }
    char num[32];
    size_t k = strcspn(p, " \n");
    if (k == 0 || k >= sizeof(num))
        return -EINVAL;
    memcpy(num, p, k);
    num[k] = '\0';
    return parse_u64(num, ret);
}

/* The boot id without its dashes: 32 hex digits. */
static int
boot_id(char out[33])
{
    char b[64];
    _cleanup_close_ int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = read_full(fd, b, sizeof(b) - 1);
    if (n < 0)
        return (int)n;
    size_t k = 0;
    for (ssize_t i = 0; i < n && k < 32; i++)
        if ((b[i] >= '0' && b[i] <= '9') || (b[i] >= 'a' && b[i] <= 'f'))
            out[k++] = b[i];
    out[k] = '\0';
    return k == 32 ? 0 : -EINVAL;
}

static int
host_name(char out[65])
{
    if (gethostname(out, 64) < 0)
        return -errno;
    out[64] = '\0';
    return out[0] ? 0 : -EINVAL;
}

int
store_holder_name(const char *prefix, char *buf, size_t n)
{
    char host[65], boot[33];
    uint64_t start;
    int r;

    if ((r = host_name(host)) < 0 || (r = boot_id(boot)) < 0 ||
        (r = proc_start_time((long)getpid(), &start)) < 0)
        return r;
    int k = snprintf(buf, n, "%s-%s-%ld-%llu-%s", prefix, host, (long)getpid(),
                     (unsigned long long)start, boot);
    return k < 0 || (size_t)k >= n || (size_t)k > STORE_HOLDER_MAX ? -ENAMETOOLONG : 0;
}

/* Splits off the last '-'-separated field of holder[0, *len): *len becomes
 * the length before that '-'. */
static const char *
last_field(const char *holder, size_t *len, size_t *ret_flen)
{
    size_t i = *len;
    while (i > 0 && holder[i - 1] != '-')
        i--;
    if (i == 0)
        return NULL;
    *ret_flen = *len - i;
    *len = i - 1;
    return holder + i;
}

int
store_holder_parse(const char *holder, const char *host, struct store_holder_id *ret)
{
    char num[32];
    size_t len = holder ? strlen(holder) : 0, blen, slen, plen, hl = strlen(host);
    const char *b, *st, *pd;

    if (len == 0 || len > STORE_HOLDER_MAX || hl == 0)
        return 0;
    if (!(b = last_field(holder, &len, &blen)) || !(st = last_field(holder, &len, &slen)) ||
        !(pd = last_field(holder, &len, &plen)))
        return 0;
    /* What is left is "<prefix>-<host>": the host must be this one. */
    if (len < hl + 2 || holder[len - hl - 1] != '-' || memcmp(holder + len - hl, host, hl) != 0)
        return 0;
    if (slen == 0 || slen >= sizeof(num))
        return 0;
    memcpy(num, st, slen);
    num[slen] = '\0';
    if (parse_u64(num, &ret->start) < 0)
        return 0;
    if (plen == 0 || plen >= sizeof(num))
        return 0;
    memcpy(num, pd, plen);
    num[plen] = '\0';
    if (parse_u64(num, &ret->pid) < 0 || ret->pid == 0 || ret->pid > INT32_MAX)
        return 0;
    if (blen != 32)
        return 0;
    memcpy(ret->boot, b, 32);
    ret->boot[32] = '\0';
    return 1;
}

bool
store_holder_dead(const char *holder)
{
    char host[65], boot[33];
    struct store_holder_id id;
    uint64_t now_start;

    if (host_name(host) < 0 || boot_id(boot) < 0 || store_holder_parse(holder, host, &id) <= 0)
        return false;
    if (memcmp(id.boot, boot, 32) != 0)
        return true; /* this host has rebooted since */
    int r = proc_start_time((long)id.pid, &now_start);
    if (r == -ENOENT)
        return true;
    return r == 0 && now_start != id.start; /* the pid was reused */
}

int
store_lease_take(struct store *s, const char *holder, uint64_t lease_ms, bool *ret_held,
                 struct err *err)
{
    char cur[STORE_HOLDER_MAX + 64];
    int r = s->ops->lease(s, holder, lease_ms, NULL, ret_held, err);
    if (r < 0 || *ret_held)
        return r;
    r = s->ops->lease_holder(s, cur, sizeof(cur), err);
    if (r < 0)
        return r;
    if (!cur[0] || !strcmp(cur, holder) || !store_holder_dead(cur))
        return 0;
    /* Compare and swap on the dead holder's name: if two of us see it dead
     * at once, one wins. */
    return s->ops->lease(s, holder, lease_ms, cur, ret_held, err);
}

int
store_gc(struct store *s, const char *holder, uint64_t lease_ms, struct store_gc_stats *ret,
         struct err *err)
{
    bool held = false;
    memset(ret, 0, sizeof(*ret));
    if (!holder || !*holder || strlen(holder) > STORE_HOLDER_MAX)
        return err_set(err, EINVAL, "invalid GC holder name");
    int r = store_lease_take(s, holder, lease_ms, &held, err);
    if (r < 0)
        return r;
    ret->held_lease = held;
    if (!held)
        return 0;
    r = s->ops->collect(s, holder, lease_ms, ret, err);
    /* Whatever happened, the next run (ours or another host's) need not
     * wait for the lease to expire. A release that fails leaves it to
     * expire. */
    (void)s->ops->lease_release(s, holder, NULL);
    return r;
}

int
store_gc_release(struct store *s, const char *holder, struct err *err)
{
    if (!holder || !*holder || strlen(holder) > STORE_HOLDER_MAX)
        return err_set(err, EINVAL, "invalid GC holder name");
    return s->ops->lease_release(s, holder, err);
}
