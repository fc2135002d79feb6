/*
 * confine.h - the cage abxd's network process puts itself in, once, right
 * after the privileged parent fork+execs it and before it starts a thread.
 *
 * The network process runs the HTTP server and every parser of hostile
 * input; the parent keeps host root for the jail operations. confine_self()
 * makes a bug in the network process worth as little as possible: its own
 * uid and gid with no supplementary groups; no capability in any set
 * (effective, permitted, inheritable, ambient, bounding); no_new_privs, not
 * dumpable, no core dumps; Landlock (where the kernel has it) limiting the
 * file system to the directories named in the config; and a seccomp
 * allow-list whose default action kills the process. It is not a sandbox for
 * tenants' code (that is jail/), and it does not decide what to allow: the
 * caller names the directories.
 *
 * Functions return >= 0 on success and -errno on failure, and never log.
 * confine_self() changes the whole process for good; on failure the
 * process is half-confined and must exit.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct err;

/* Landlock ABIs: what each adds that we handle (handled rights are denied
 * outside the rules; rights of a newer ABI than the kernel's are skipped). */
#define CONFINE_LANDLOCK_ABI_REFER     2 /* rename/link across directories */
#define CONFINE_LANDLOCK_ABI_TRUNCATE  3 /* truncate(), O_TRUNC */
#define CONFINE_LANDLOCK_ABI_IOCTL_DEV 5 /* ioctl on device files */
#define CONFINE_LANDLOCK_ABI_SCOPE     6 /* abstract unix sockets, signals */

/* Paths per list (read-write, read-only): far more than a config names. */
#define CONFINE_PATHS_MAX 64

struct confine_config {
    uid_t uid; /* must not be 0 */
    gid_t gid; /* must not be 0 */
    /* NULL-terminated lists (NULL = empty) of absolute paths the process
     * keeps, each a directory (with everything beneath it) or a single
     * file; any missing one fails the call. Read-write allows reading,
     * writing, creating, removing, renaming and truncating, but never
     * executing (execve is not in the filter anyway); read-only allows
     * reading files and listing directories. Everything else is denied
     * when Landlock is there. /proc/self is worth naming read-only:
     * confine_report() reads /proc/self/status. */
    const char *const *rw_paths;
    const char *const *ro_paths;
    /* Sent to us when the parent dies, 0 = none. Set after the uid
     * change, which clears it. */
    int parent_death_signal;
    /* Let kill() and pidfd_send_signal() reach processes outside our
     * Landlock domain (ABI >= 6 scopes them out otherwise). */
    bool signal_outside;
    /* Fail with -EOPNOTSUPP instead of going on without Landlock. */
    bool landlock_required;
};

/* Confines the calling process as above. Refuses with -EBUSY if another
 * thread already runs (seccomp and Landlock would miss it; and a thread
 * might hold a lock the filter later keeps it from releasing). Returns the
 * Landlock ABI enforced, 0 when the kernel has none (the caller logs it). */
int confine_self(const struct confine_config *c, struct err *err);

/* The kernel's Landlock ABI: > 0, or 0 when it has none (ENOSYS, or
 * EOPNOTSUPP: built in but disabled at boot). */
int confine_landlock_abi(void);

/* What /proc/self/status says about the calling process. */
struct confine_status {
    uid_t uid[4]; /* real, effective, saved, file system */
    gid_t gid[4];
    unsigned threads;
    uint64_t cap_inh, cap_prm, cap_eff, cap_bnd, cap_amb;
    int no_new_privs; /* -1 = not shown */
    int seccomp;      /* 0 off, 1 strict, 2 filter; -1 = not shown */
    int landlock_abi; /* confine_landlock_abi(): what the kernel offers; the
                       * kernel does not show whether we are restricted */
};

/* Reads /proc/self/status into *ret. */
int confine_report(struct confine_status *ret, struct err *err);

/* Formats *s on one line for a log ("uid=65534 ... seccomp=2"). */
int confine_status_format(const struct confine_status *s, char *buf, size_t n);

/* The system calls the filter allows outright, NULL-terminated; those it
 * allows with argument checks (clone, socket, socketpair, ioctl, prctl,
 * prlimit64) and clone3 (ENOSYS) are not in it. For tests and docs. */
extern const char *const confine_allowed[];
