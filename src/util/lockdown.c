/*
 * lockdown.c - no core dumps, not dumpable, no_new_privs; the bounding set.
 */
#include "util/lockdown.h"

#include <errno.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/resource.h>

static int
fail(const char **ret_step, const char *step)
{
    int r = -errno;
    if (ret_step)
        *ret_step = step;
    return r < 0 ? r : -EIO;
}

int
lockdown_self(const char **ret_step)
{
    struct rlimit core = {0, 0};

    if (setrlimit(RLIMIT_CORE, &core) < 0)
        return fail(ret_step, "rlimit core");
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
        return fail(ret_step, "not dumpable");
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return fail(ret_step, "no_new_privs");
    return 0;
}

int
lockdown_bound_caps(uint64_t keep, const char **ret_step)
{
    /* Past the kernel's last capability PR_CAPBSET_DROP answers EINVAL:
     * walking all 64 bits needs no /proc/sys/kernel/cap_last_cap. */
    for (int cap = 0; cap < 64; cap++) {
        if (keep & (UINT64_C(1) << cap))
            continue;
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
            return fail(ret_step, "drop capability");
    }
    /* EINVAL: a kernel older than 4.3, which has no ambient set. */
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
        return fail(ret_step, "clear ambient capabilities");
    return 0;
}
