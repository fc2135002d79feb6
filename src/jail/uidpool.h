/*
 * uidpool.h - pooled host uid ranges, one per live sandbox, host-wide.
 *
 * Slot i owns host uids [base + i*size, base + (i+1)*size). Exclusion across
 * every abxd on the host comes from an open-file-description lock on byte i
 * of one lock file: the kernel drops it when the holder dies, so a crashed
 * daemon's slots return to the pool by themselves. Within one process a
 * bitmap tracks what we hold (our own OFD locks never conflict with us).
 */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include "../util/err.h"

struct uidpool;

int uidpool_open(const char *lockfile, uint32_t base, uint32_t size, uint32_t nslots,
                 struct uidpool **ret, struct err *err);
struct uidpool *uidpool_free(struct uidpool *p);

/* Takes a free slot; -EAGAIN when every slot is held by someone. */
int uidpool_acquire(struct uidpool *p, uint32_t *ret_slot);
void uidpool_release(struct uidpool *p, uint32_t slot);
uid_t uidpool_first_uid(const struct uidpool *p, uint32_t slot);
uint32_t uidpool_size(const struct uidpool *p);
uint32_t uidpool_in_use(const struct uidpool *p);
