/*
 * snapstore.h - the snapshot store: file-system snapshots of sandboxes
 * kept on the host, and their files copied back into new sandboxes. It
 * knows directories, info records and a worker thread; not HTTP, not who
 * asks (E2B's snapshots, pauses and forks all use it).
 *
 * A snapshot is files only, never memory or processes (sandbox/snapshot.h
 * says which directories and what is kept). It lives in <dir>/<id>/:
 * info.json (its record, below) and root/ (the tree). It is made in
 * .tmp-<id> and renamed into place when complete; a delete renames it to
 * .del-<id>-<random> and removes it on the worker. Opening the store
 * sweeps what an earlier run left: half-made and half-deleted snapshots,
 * and hidden ones (whose sandboxes died with that run). Copies in both
 * directions run on one worker thread, so the loop never waits for them;
 * their callbacks run on the loop. Freezing the sandbox meanwhile is the
 * caller's business.
 *
 * info.json, written once by the store:
 *   {"snapshotID":"snap-0123456789abcdef","names":["ckpt"],"sandboxID":"i1",
 *    "templateID":"base","alias":"base","createdAt":1764633600000,
 *    "hidden":false,"bytes":4096,"entries":3}
 *
 * Functions return 0 on success and -errno on failure, and never log.
 * Everything but the copies runs on the loop's thread.
 */
#ifndef ABX_SNAPSHOT_SNAPSTORE_H
#define ABX_SNAPSHOT_SNAPSTORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sandbox/snapshot.h"

struct err;
struct fileops;
struct loop;
struct snapstore;

#define SNAPSTORE_ID_MAX   63   /* bytes of an id: [a-z0-9-], not starting with '.' */
#define SNAPSTORE_NAME_MAX 128  /* bytes of a name: letters, digits and -_.:/ */
#define SNAPSTORE_SCAN_MAX 4096 /* snapshots a listing reads */
#define SNAPSTORE_INFO_MAX 8192 /* bytes of one info.json */

/* A snapshot's record. Strings are "" when the record lacks them. */
struct snap_info {
    char id[SNAPSTORE_ID_MAX + 1];
    char **names; /* n_names names it may be found by (heap) */
    size_t n_names;
    char sandbox_id[128]; /* the sandbox it was taken of */
    char template_id[128];
    char alias[128];     /* what that sandbox was created as */
    uint64_t created_ms; /* wall clock */
    bool hidden;         /* kept out of listings; swept at the next open */
    uint64_t bytes, entries;
};
void snap_info_done(struct snap_info *i);

/* Opens (making it, 0700) the store in the directory path and starts its
 * worker; sweeps what an earlier run left. err says what failed. */
int snapstore_open(struct loop *loop, const char *path, struct snapstore **ret, struct err *err);
/* Finishes what the worker has (the done callbacks run, before this
 * returns) and frees s. NULL is ok; returns NULL. */
struct snapstore *snapstore_free(struct snapstore *s);

bool snapstore_id_ok(const char *id);
bool snapstore_name_ok(const char *name);

/* What to record about a snapshot being taken. */
struct snap_spec {
    const char *name; /* NULL = none */
    const char *sandbox_id, *template_id, *alias;
    bool hidden;
};

/* r: 0 when stored, else -errno (-EFBIG / -E2BIG over the limits of
 * sandbox/snapshot.h), err saying why; id is the snapshot's. */
typedef void (*snapstore_taken_fn)(int r, const struct err *err, const char *id,
                                   const struct snapshot_stats *st, void *ud);
/* Copies what fo (the sandbox's root, a reference is taken) sees into a new
 * snapshot on the worker, then calls done on the loop (also while
 * snapstore_free() runs). ret_id (SNAPSTORE_ID_MAX + 1 bytes) gets its
 * id. On failure done is never called. */
int snapstore_take(struct snapstore *s, struct fileops *fo, const struct snap_spec *spec,
                   snapstore_taken_fn done, void *ud, char *ret_id);

/* The tree of snapshot id, to restore from: -ENOENT (err: "snapshot 'x' is
 * gone") or -errno. */
int snapstore_open_root(struct snapstore *s, const char *id, int *ret_fd, struct err *err);

/* Who empties a snapshot's directory this process may not remove (its
 * tree belongs to the sandboxes' ids: abxd's network process, split):
 * fn(ud, dirfd) removes what is inside dirfd, maybe in the background;
 * called from the store's worker. Without one, removal is ours alone. */
struct snapstore_emptier {
    int (*fn)(void *ud, int dirfd, struct err *err);
    void *ud;
};
void snapstore_set_emptier(struct snapstore *s, const struct snapstore_emptier *em);
typedef void (*snapstore_restored_fn)(int r, const struct err *err, void *ud);
/* Copies the tree rootfd (taken over, also on failure) into what fo (a
 * reference is taken) sees, on the worker; then done on the loop. On
 * failure done is never called. */
int snapstore_restore(struct snapstore *s, int rootfd, struct fileops *fo,
                      snapstore_restored_fn done, void *ud);

/* Removes snapshot id (the copy's removal happens on the worker). -ENOENT. */
int snapstore_delete(struct snapstore *s, const char *id);
/* The snapshot with id id_or_name, or else the newest one named so.
 * -ENOENT. ret is the caller's to snap_info_done(). */
int snapstore_find(struct snapstore *s, const char *id_or_name, struct snap_info *ret);
/* Every snapshot (hidden ones too), at most SNAPSTORE_SCAN_MAX, in the
 * directory's order. *ret is the caller's: snapstore_list_free(). */
int snapstore_list(struct snapstore *s, struct snap_info **ret, size_t *ret_n);
void snapstore_list_free(struct snap_info *v, size_t n);
/* Whether i may be found by name. */
bool snap_info_has_name(const struct snap_info *i, const char *name);

#endif
