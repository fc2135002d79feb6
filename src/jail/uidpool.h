/*
 * uidpool.h - pooled host uid ranges, one per live sandbox, host-wide.
 *
 * Slot i owns host uids [base + i*size, base + (i+1)*size). Exclusion across
 * every abxd on the host comes from an open-file-description write lock on
 * the bytes [first uid, first uid + size) of one lock file: the lock names
 * the absolute uids, not the slot, so two pools with any bases (and sizes)
 * conflict exactly when their ranges overlap, whichever daemon holds them.
 * The kernel drops the lock when the holder dies, so a crashed daemon's
 * ranges return to the pool by themselves. Within one process a bitmap
 * tracks what we hold (our own OFD locks never conflict with us).
 *
 * Every abxd of a host must open the same lock file (ABX_UID_LOCK, default
 * /run/abx/uid-pool.lock) on a file system they all see. Daemons older than
 * the range locks locked byte i for slot i; a range that overlaps the
 * default pool (UIDPOOL_LEGACY_*) also locks the bytes of the old slots it
 * overlaps, so such a daemon at the default base and a new one exclude each
 * other too. Old daemons at other bases are not recognised.
 */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include "util/err.h"

/* The pool of daemons that locked slot indices: their default base, range
 * size and most slots (the old ABX_UID_SLOTS limit). */
#define UIDPOOL_LEGACY_BASE  0x40000000u
#define UIDPOOL_LEGACY_RANGE 65536u
#define UIDPOOL_LEGACY_SLOTS 60000u

struct uidpool;

int uidpool_open(const char *lockfile, uint32_t base, uint32_t size, uint32_t nslots,
                 struct uidpool **ret, struct err *err);
struct uidpool *uidpool_free(struct uidpool *p);

/* Takes a free slot whose uid range nobody holds, round-robin from the
 * slot after the last one taken; -EAGAIN when none is free. */
int uidpool_acquire(struct uidpool *p, uint32_t *ret_slot);
void uidpool_release(struct uidpool *p, uint32_t slot);
uid_t uidpool_first_uid(const struct uidpool *p, uint32_t slot);
uint32_t uidpool_size(const struct uidpool *p);
uint32_t uidpool_in_use(const struct uidpool *p);
