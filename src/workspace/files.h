/*
 * files.h - file operations on a workspace, routed by its state.
 *
 * Each call first settles the workspace (waits out a wake or a sleep in
 * progress), then routes: warm to its live sandbox (as the sandbox's user,
 * like the sandbox file routes), cold to the store on a worker thread. No
 * file operation wakes a workspace: only workspaces_ensure() does.
 *
 * A precondition (match) is a version handed out earlier (warm: the
 * sandbox's 16-hex stamp), a content hash (64 hex, good in both states),
 * or "" for "must not exist"; a mismatch is -ESTALE.
 *
 * cb runs on the loop exactly once, possibly before the call returns,
 * with a result that lives until cb returns: cb may take its fd (TAKE_FD)
 * and its entries; whatever it leaves is freed after it.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sandbox/files.h"
#include "store/store.h"
#include "util/err.h"
#include "workspace/workspace.h"

/* What a request names; strings are copied by the call. */
struct workspace_file_req {
    const char *ws;
    const char *rel;   /* normalized ("." for the root) */
    const char *rel2;  /* rename: the destination */
    const char *match; /* NULL: no precondition */
    bool overwrite;    /* rename: replace what is at rel2 */
    /* put, cold: the disk bound of a workspace whose record names none;
     * 0 = the host bounds no disks (nor, then, workspaces). */
    uint64_t default_disk_bytes;
};

/* One entry of a walk, in either state. */
struct workspace_file_entry {
    char *path; /* "/a/b" */
    enum files_type type;
    uint64_t size;
    uint32_t mode;
    char version[STORE_HASH_LEN + 1]; /* warm: the stamp; cold: the hash, "" for a dir */
    char hash[STORE_HASH_LEN + 1];    /* cold files: the content hash, else "" */
    char *target;                     /* warm symlinks: where they point, else NULL */
};

struct workspace_file_result {
    int r;
    struct err err;
    bool warm;                     /* where it was done */
    bool created;                  /* put: a new file; mkdir: a new directory */
    struct store_entry e;          /* cold get, stat, put, rename: the entry */
    struct files_stat st;          /* warm get, stat, put, rename: the file's stat */
    char hash[STORE_HASH_LEN + 1]; /* warm put: the content's hash */
    int fd;                        /* get, and stat of a cold file: the file to send (cold: the
                                    * store's bytes, to verify against e as they go) */
    struct workspace_file_entry *entries; /* walk, sorted by path */
    size_t n_entries;
};

typedef void (*workspace_file_fn)(void *ud, struct workspace_file_result *res);

/* Opens a file for reading (get) or stats it (stat; a cold file is opened
 * too, so a damaged blob is found out); rel2 and overwrite are unused. */
void workspace_file_get(struct workspaces *w, const struct workspace_file_req *q,
                        workspace_file_fn cb, void *ud);
void workspace_file_stat(struct workspaces *w, const struct workspace_file_req *q,
                         workspace_file_fn cb, void *ud);
/* Writes the staged upload wr (from store_writer_begin() on
 * workspaces_loop_store()) at rel; takes wr whatever happens. A cold
 * write may not take the workspace past its disk bound (-EDQUOT). */
void workspace_file_put(struct workspaces *w, const struct workspace_file_req *q,
                        struct store_writer *wr, workspace_file_fn cb, void *ud);
void workspace_file_delete(struct workspaces *w, const struct workspace_file_req *q,
                           workspace_file_fn cb, void *ud);
/* Everything below rel, into entries. */
void workspace_file_walk(struct workspaces *w, const struct workspace_file_req *q,
                         workspace_file_fn cb, void *ud);
void workspace_file_mkdir(struct workspaces *w, const struct workspace_file_req *q,
                          workspace_file_fn cb, void *ud);
void workspace_file_rmdir(struct workspaces *w, const struct workspace_file_req *q,
                          workspace_file_fn cb, void *ud);
/* Renames rel to rel2; the result's entry (e or st) is rel2's. */
void workspace_file_rename(struct workspaces *w, const struct workspace_file_req *q,
                           workspace_file_fn cb, void *ud);

/* What bounds a workspace (its sandboxes' writable space and its files in
 * the store): its record's disk_bytes, else the host's default; 0 =
 * nothing, the host runs without disk bounds. */
static inline uint64_t
workspace_disk_bound(const struct store_ws *m, uint64_t default_bytes)
{
    if (!default_bytes)
        return 0;
    return m->disk_bytes ? m->disk_bytes : default_bytes;
}
