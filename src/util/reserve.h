/*
 * reserve.h - a ballast file that keeps room on a file system for abxd's
 * own writes when the file system fills up.
 *
 * A full state file system must not stop what frees space: deleting a
 * workspace, the store's GC and SQLite's own journal all write before they
 * free anything. So abxd keeps <dir>/reserve, a fully allocated file of a
 * configured size, while there is room, and deletes it when the free space
 * falls below a low-water mark (a quarter of the reserve); it is created
 * again once free space has come back above a high-water mark (twice the
 * reserve), so one check never undoes the other. Not a quota: whoever
 * writes first gets the released room, so it buys abxd time, it does not
 * fence anyone out. Non-logging and not thread-safe: the caller (abxd's
 * start and its sweeps) logs what changed.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "util/err.h"

#define RESERVE_NAME     "reserve"      /* below the directory given */
#define RESERVE_TMP_NAME ".reserve.tmp" /* while it is being allocated */
#define RESERVE_LOW_DIV  4              /* released below size / 4 free */
#define RESERVE_HIGH_MUL 2              /* created again at size * 2 free */

enum reserve_event {
    RESERVE_UNCHANGED, /* present and room enough, or absent and too little room */
    RESERVE_CREATED,
    RESERVE_RELEASED,
};

struct reserve_state {
    uint64_t free_bytes; /* free on the file system when checked, before any
                          * release or creation (what abxd may use: f_bfree
                          * as root, else f_bavail) */
    uint64_t low_bytes;  /* released below this */
    uint64_t high_bytes; /* created at or above this */
    bool present;        /* the reserve exists after the check */
};

/* Checks the file system of dirfd and creates, keeps or releases the
 * reserve of size bytes in it; size 0 removes any reserve. A file at the
 * name that is not a complete reserve of that size (another size, sparse,
 * not a regular file) is replaced. Running out of room while creating is
 * not an error (RESERVE_UNCHANGED, not present). Returns a reserve_event
 * or -errno; ret (NULL = not wanted) is filled on success. */
int reserve_check(int dirfd, uint64_t size, struct reserve_state *ret, struct err *err);
