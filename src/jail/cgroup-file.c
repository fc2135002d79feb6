/*
 * cgroup-file.c - reading and acting on a cgroup's files, for both
 * backends: one number, one key of a flat keyed file, killing what
 * cgroup.procs lists. Below cgroup.c and cgroup-v1/v2.c; calls neither.
 */
#include <errno.h>
#include <signal.h>
#include <string.h>

#include "jail/cgroup-internal.h"
#include "util/buf.h"
#include "util/fd.h"
#include "util/parse.h"

int
cgroup_read_u64(int dirfd, const char *file, uint64_t *ret)
{
    struct buf b;
    buf_init(&b, 256);
    int r = read_file_at(dirfd, file, 256, &b);
    if (r >= 0) {
        while (b.len && (b.data[b.len - 1] == '\n' || b.data[b.len - 1] == ' '))
            b.data[--b.len] = '\0';
        r = !strcmp(b.data, "max") ? (*ret = UINT64_MAX, 0) : parse_u64(b.data, ret);
    }
    buf_done(&b);
    return r;
}

int
cgroup_read_key(int dirfd, const char *file, const char *key, uint64_t *ret)
{
    struct buf b;
    buf_init(&b, 64 * 1024);
    int r = read_file_at(dirfd, file, 64 * 1024, &b);
    if (r < 0) {
        buf_done(&b);
        return r;
    }
    size_t kl = strlen(key);
    r = -ENOENT;
    for (char *line = b.data; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        if (!strncmp(line, key, kl) && line[kl] == ' ') {
            r = parse_u64(line + kl + 1, ret);
            break;
        }
        line = nl ? nl + 1 : NULL;
    }
    buf_done(&b);
    return r;
}

int
cgroup_kill_listed(int dirfd)
{
    struct buf b;
    buf_init(&b, 4 * 1024 * 1024);
    int r = read_file_at(dirfd, "cgroup.procs", b.max, &b);
    if (r < 0) {
        buf_done(&b);
        return r == -ENOENT ? 0 : r;
    }
    int n = 0;
    for (char *line = b.data; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        uint32_t pid;
        if (parse_u32(line, &pid) == 0 && pid > 1) {
            (void)kill((pid_t)pid, SIGKILL);
            n++;
        }
        line = nl ? nl + 1 : NULL;
    }
    buf_done(&b);
    return n;
}
