/*
 * sandbox.c - the Sandbox interface: each sandbox.h call dispatched to the
 * implementation behind the host or sandbox (sandbox-internal.h).
 *
 * Nothing here knows an implementation. The workspace file operations are
 * written once, on the implementation's "user" fileops handle.
 */
#include "sandbox/sandbox.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "sandbox/sandbox-internal.h"
#include "sandbox/vfs.h"

/* --- host --- */

int
sandbox_create(struct sandbox_host *h, const char *id, const struct sandbox_spec *spec,
               sandbox_ready_fn ready, void *ud, struct sandbox **ret, struct err *err)
{
    return h->ops->create(h, id, spec, ready, ud, ret, err);
}

int
sandbox_set_record(struct sandbox *sb, const void *record, size_t len, struct err *err)
{
    return sb->ops->set_record ? sb->ops->set_record(sb, record, len, err) : -EOPNOTSUPP;
}

int
sandbox_host_orphans(struct sandbox_host *h, sandbox_orphan_fn fn, void *ud, struct err *err)
{
    return h->ops->orphans ? h->ops->orphans(h, fn, ud, err) : -EOPNOTSUPP;
}

int
sandbox_adopt(struct sandbox_host *h, const char *orphan, const char *id,
              const struct sandbox_spec *spec, sandbox_ready_fn ready, void *ud,
              struct sandbox **ret, struct err *err)
{
    if (!h->ops->adopt)
        return err_set(err, EOPNOTSUPP,
                       "the %s sandbox host keeps no sandboxes of an earlier "
                       "process",
                       h->ops->name);
    return h->ops->adopt(h, orphan, id, spec, ready, ud, ret, err);
}

int
sandbox_host_tree_empty(struct sandbox_host *h, int dirfd, struct err *err)
{
    return h->ops->tree_empty ? h->ops->tree_empty(h, dirfd, err) : -EOPNOTSUPP;
}

int
sandbox_host_kill_orphan(struct sandbox_host *h, const char *id, struct err *err)
{
    if (!h->ops->kill_orphan)
        return err_set(err, EOPNOTSUPP,
                       "the %s sandbox host keeps no sandboxes of an earlier "
                       "process",
                       h->ops->name);
    return h->ops->kill_orphan(h, id, err);
}

void
sandbox_host_drain_pool(struct sandbox_host *h)
{
    if (h->ops->drain_pool)
        h->ops->drain_pool(h);
}

struct sandbox_host *
sandbox_host_free(struct sandbox_host *h)
{
    if (h)
        h->ops->free(h);
    return NULL;
}

uint32_t
sandbox_host_pool_ready(const struct sandbox_host *h)
{
    return h->ops->pool_ready ? h->ops->pool_ready(h) : 0;
}

void
sandbox_host_set_fd_budget(struct sandbox_host *h, uint32_t budget)
{
    if (h->ops->set_fd_budget)
        h->ops->set_fd_budget(h, budget);
}

uint32_t
sandbox_host_fds(const struct sandbox_host *h)
{
    return h->ops->fds ? h->ops->fds(h) : 0;
}

uint32_t
sandbox_fd_limit(const struct sandbox_host *h)
{
    return h->ops->fd_limit ? h->ops->fd_limit(h) : SANDBOX_MAX_FDS;
}

bool
sandbox_host_has_layers(const struct sandbox_host *h)
{
    return h->ops->has_layers && h->ops->has_layers(h);
}

const char *
sandbox_host_state_dir(const struct sandbox_host *h)
{
    return h->ops->state_dir ? h->ops->state_dir(h) : NULL;
}

int
sandbox_host_area_create(struct sandbox_host *h, const char *name, uint64_t limit_bytes,
                         struct err *err)
{
    if (!h->ops->area_create)
        return err_set(err, EOPNOTSUPP, "the %s sandbox host has no areas", h->ops->name);
    return h->ops->area_create(h, name, limit_bytes, err);
}

const char *
sandbox_host_layers_dir(const struct sandbox_host *h)
{
    return h->ops->layers_dir ? h->ops->layers_dir(h) : NULL;
}

int
sandbox_host_layer_install(struct sandbox_host *h, const char *area, const char *name, uid_t first,
                           sandbox_layer_fn done, void *userdata, struct err *err)
{
    if (!h->ops->layer_install)
        return err_set(err, EOPNOTSUPP, "the %s sandbox host has no layers", h->ops->name);
    return h->ops->layer_install(h, area, name, first, done, userdata, err);
}

int
sandbox_host_area_usage(struct sandbox_host *h, const char *name, uint64_t *ret_bytes)
{
    return h->ops->area_usage ? h->ops->area_usage(h, name, ret_bytes) : -EOPNOTSUPP;
}

void
sandbox_host_area_destroy(struct sandbox_host *h, const char *name)
{
    if (h->ops->area_destroy)
        h->ops->area_destroy(h, name);
}

/* --- one sandbox --- */

int
sandbox_init(struct sandbox *sb, const struct sandbox_ops *ops, const char *id,
             const struct sandbox_limits *limits, struct err *err)
{
    /* The id names directories of the implementation's (the jail's, the
     * memory host's workspace): never a path of its own. */
    size_t n = strlen(id);
    if (!n || n >= sizeof(sb->id) || strchr(id, '/') || !strcmp(id, ".") || !strcmp(id, ".."))
        return err_set(err, EINVAL, "invalid sandbox id '%.64s'", id);
    *sb = (struct sandbox){.ops = ops, .limits = *limits};
    memcpy(sb->id, id, n + 1);
    return 0;
}

void
sandbox_set_gone_handler(struct sandbox *sb, sandbox_gone_fn fn, void *ud)
{
    sb->gone = fn;
    sb->gone_ud = ud;
}

void
sandbox_kill(struct sandbox *sb)
{
    sb->ops->kill(sb);
}

void
sandbox_free(struct sandbox *sb)
{
    if (sb)
        sb->ops->free(sb);
}

const char *
sandbox_id(const struct sandbox *sb)
{
    return sb->id;
}

bool
sandbox_is_ready(const struct sandbox *sb)
{
    return sb->ops->is_ready(sb);
}

const struct sandbox_timings *
sandbox_get_timings(const struct sandbox *sb)
{
    return &sb->timings;
}

const struct sandbox_limits *
sandbox_limits(const struct sandbox *sb)
{
    return &sb->limits;
}

int
sandbox_set_limits(struct sandbox *sb, const struct sandbox_limits *l, struct err *err)
{
    if (!sb->ops->set_limits)
        return err_set(err, EOPNOTSUPP, "sandbox '%s' cannot change its limits", sb->id);
    int r = sb->ops->set_limits(sb, l, err);
    if (r == 0)
        sb->limits = *l;
    return r;
}

int
sandbox_stats(struct sandbox *sb, struct sandbox_stats *ret)
{
    if (!sb->ops->stats) {
        memset(ret, 0, sizeof(*ret));
        return -EOPNOTSUPP;
    }
    return sb->ops->stats(sb, ret);
}

int
sandbox_disk_usage(struct sandbox *sb, uint64_t *ret_bytes)
{
    return sb->ops->disk_usage ? sb->ops->disk_usage(sb, ret_bytes) : -EOPNOTSUPP;
}

int
sandbox_freeze(struct sandbox *sb, bool frozen, struct err *err)
{
    if (!sb->ops->freeze)
        return err_set(err, EOPNOTSUPP, "sandbox '%s' cannot be frozen", sb->id);
    return sb->ops->freeze(sb, frozen, err);
}

void
sandbox_vfs_ids(const struct sandbox *sb, struct vfs_ids *ret)
{
    if (sb->ops->vfs_ids)
        sb->ops->vfs_ids(sb, ret);
    else
        memset(ret, 0, sizeof(*ret));
}

int
sandbox_netns_socket(struct sandbox *sb, int family, int type, struct err *err)
{
    if (!sb->ops->netns_socket)
        return err_set(err, EOPNOTSUPP, "sandbox '%s' has no network namespace of its own", sb->id);
    return sb->ops->netns_socket(sb, family, type, err);
}

int
sandbox_exec(struct sandbox *sb, const struct sandbox_exec *x, sandbox_exec_fn cb, void *ud,
             struct err *err)
{
    return sb->ops->exec(sb, x, cb, ud, err);
}

struct proc *
sandbox_proc_find(struct sandbox *sb, pid_t pid)
{
    return sb->ops->proc_find(sb, pid);
}

size_t
sandbox_proc_count(const struct sandbox *sb, bool running_only)
{
    return sb->ops->proc_count(sb, running_only);
}

struct proc *
sandbox_proc_next(struct sandbox *sb, struct proc *prev)
{
    return sb->ops->proc_next(sb, prev);
}

int
sandbox_view_fd(const struct sandbox *sb)
{
    return sb->ops->view_fd ? sb->ops->view_fd(sb) : -EOPNOTSUPP;
}

bool
sandbox_has_view(const struct sandbox *sb)
{
    return sb->ops->has_view && sb->ops->has_view(sb);
}

int
sandbox_root_fd(const struct sandbox *sb)
{
    return sb->ops->root_fd ? sb->ops->root_fd(sb) : -EBADF;
}

int
sandbox_fileops(struct sandbox *sb, bool as_root, struct fileops **ret, struct err *err)
{
    if (!sb->ops->fileops)
        return err_set(err, EOPNOTSUPP, "sandbox '%s' has no file operations", sb->id);
    return sb->ops->fileops(sb, as_root, ret, err);
}

/* --- the workspace, as "user" --- */

/* The handle is also held by the sandbox until it is freed, so what a call
 * hands out (an upload) outlives the reference taken here. */
#define WITH_USER_OPS(sb, err, call)                  \
    do {                                              \
        struct fileops *f = NULL;                     \
        int r_ = sandbox_fileops(sb, false, &f, err); \
        if (r_ < 0)                                   \
            return r_;                                \
        r_ = (call);                                  \
        (void)fileops_unref(f);                       \
        return r_;                                    \
    } while (0)

int
sandbox_file_stat(struct sandbox *sb, const char *rel, struct files_stat *ret, struct err *err)
{
    WITH_USER_OPS(sb, err, fileops_stat(f, rel, ret, err));
}

int
sandbox_file_open_read(struct sandbox *sb, const char *rel, int *ret_fd, struct files_stat *ret,
                       struct err *err)
{
    WITH_USER_OPS(sb, err, fileops_open_read(f, rel, ret_fd, ret, err));
}

int
sandbox_upload_begin(struct sandbox *sb, const char *rel, struct fileops_upload **ret,
                     struct err *err)
{
    uint64_t max = sb->ops->max_file_bytes ? sb->ops->max_file_bytes(sb) : UINT64_MAX;
    WITH_USER_OPS(sb, err, fileops_upload_begin(f, rel, max, ret, err));
}

int
sandbox_file_delete(struct sandbox *sb, const char *rel, struct err *err)
{
    WITH_USER_OPS(sb, err, fileops_delete(f, rel, err));
}

int
sandbox_mkdir(struct sandbox *sb, const char *rel, bool *ret_created, struct err *err)
{
    WITH_USER_OPS(sb, err, fileops_mkdir(f, rel, ret_created, err));
}

int
sandbox_rmdir(struct sandbox *sb, const char *rel, struct err *err)
{
    WITH_USER_OPS(sb, err, fileops_rmdir(f, rel, err));
}

int
sandbox_rename(struct sandbox *sb, const char *from, const char *to, bool overwrite,
               struct err *err)
{
    WITH_USER_OPS(sb, err, fileops_rename(f, from, to, overwrite, err));
}

int
sandbox_walk(struct sandbox *sb, const char *rel, files_walk_fn fn, void *ud, struct err *err)
{
    WITH_USER_OPS(sb, err, fileops_walk(f, rel, fn, ud, err));
}
