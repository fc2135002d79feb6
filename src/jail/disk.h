/*
 * disk.h - kernel-bounded writable space for sandboxes: one btrfs file
 * system with quotas, a subvolume per sandbox with a qgroup limit.
 *
 * The file system is mounted at a directory abxd owns (<state>/sandboxes).
 * It is either one the operator provides there (its own btrfs, not the one
 * the state directory is on, quotas enabled), or an image file abxd makes
 * once (<state>/disk.img), fully allocated, formatted by mkfs.btrfs and
 * mounted through a loop device at every start. The image is the
 * sandboxes' whole share of the state file system: its blocks are taken
 * when it is made, so what sandboxes write never takes space from the
 * store, the database or the log, and the image never fails a write for
 * lack of space on the host.
 *
 * An area is one subvolume named after its owner; its qgroup limit bounds
 * what anybody (the sandbox, or abxd writing for it) can store there:
 * writes past it fail with EDQUOT. Creating, limiting and destroying an
 * area are a few ioctls (no process is started), whatever the area holds.
 * A sandbox must not be able to create subvolumes of its own (a nested
 * subvolume is outside its parent's qgroup): seccomp.h refuses those
 * ioctls.
 *
 * Non-logging. Functions return 0 (or a count) or -errno and fill the
 * optional err. disk_open() and disk_free() block (mkfs, mount, umount);
 * the area functions are ioctls on descriptors the disk does not change,
 * safe from any thread.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "util/err.h"

#define DISK_IMAGE_DEFAULT (8ull << 30)   /* image size when none is configured */
#define DISK_IMAGE_MIN     (256ull << 20) /* smallest image (btrfs needs ~120 MiB) */
#define DISK_MIXED_BELOW   (1ull << 30)   /* smaller images mix data and metadata */
#define DISK_LABEL         "abx-disk"     /* label of the file systems abxd makes */
#define DISK_NAME_MAX      63             /* area names: [a-z0-9-], 1..63 */

struct disk_config {
    const char *dir;   /* absolute; where areas live; created if missing */
    const char *image; /* absolute; the image used unless dir is a btrfs of its own */
    /* Size of an image made now, in bytes; 0 = DISK_IMAGE_DEFAULT, or half
     * of what the file system has above floor_bytes when that is less. An
     * existing image of another configured size is made anew (it holds
     * only what dead sandboxes left). */
    uint64_t image_bytes;
    uint64_t floor_bytes; /* free space the image's file system keeps when it is made */
};

struct disk;

/* Makes dir a bounded disk: uses the btrfs already there, or makes,
 * attaches and mounts the image (then whatever was in dir beneath it is
 * removed first: it belonged to an earlier run). */
int disk_open(const struct disk_config *c, struct disk **ret, struct err *err);
/* Unmounts the image (the loop device detaches itself); NULL is ok. Areas
 * must be gone (sandboxes dead): a lazy unmount, nothing is waited for. */
struct disk *disk_free(struct disk *d);

/* The root of dir (borrowed, O_DIRECTORY). */
int disk_dir_fd(const struct disk *d);
/* What the disk is, for logs: "btrfs image /s/disk.img (512 MiB, /dev/loop3)". */
const char *disk_describe(const struct disk *d);
/* Bytes of the file system (the image's size). */
uint64_t disk_size(const struct disk *d);
/* Whether disk_open() made the image now (rather than finding one). */
bool disk_made_image(const struct disk *d);

/* Creates area name (mode 0700, owned by root) bounded by limit_bytes
 * (0 = only by the disk). -EEXIST when it exists. */
int disk_area_create(struct disk *d, const char *name, uint64_t limit_bytes, struct err *err);
/* Sets a new bound (0 = none); what the area holds already stays. */
int disk_area_limit(struct disk *d, const char *name, uint64_t limit_bytes, struct err *err);
/* Bytes the area holds, as the quota counts them (updated when the file
 * system commits, within seconds). */
int disk_area_usage(struct disk *d, const char *name, uint64_t *ret_bytes, struct err *err);
/* Removes the area and everything in it; a plain directory of that name
 * is removed too. -ENOENT is 0. */
int disk_area_destroy(struct disk *d, const char *name, struct err *err);
/* Removes everything in dir (what an earlier run left) and, on an image,
 * the quota groups of subvolumes that are gone. Call before creating
 * areas. Returns how many entries it removed. */
int disk_reclaim(struct disk *d, struct err *err);
