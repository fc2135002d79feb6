/*
 * jailer.c - jailer.h's calls, dispatched to the implementation
 * (jailer-here.c or jailer-priv.c).
 */
#include "sandbox/jailer.h"

#include <errno.h>

#include "sandbox/jailer-internal.h"

struct jailer *
jailer_free(struct jailer *jr)
{
    if (jr)
        jr->ops->free(jr);
    return NULL;
}

enum jail_mode
jailer_mode(const struct jailer *jr)
{
    return jr->ops->mode(jr);
}

const char *
jailer_state_dir(const struct jailer *jr)
{
    return jr->ops->state_dir(jr);
}

int
jailer_area_create(struct jailer *jr, const char *name, uint64_t limit_bytes, struct err *err)
{
    return jr->ops->area_create(jr, name, limit_bytes, err);
}

const char *
jailer_layers_dir(const struct jailer *jr)
{
    return jr->ops->layers_dir(jr);
}

int
jailer_layer_install(struct jailer *jr, const char *area, const char *name, uid_t first,
                     sandbox_layer_fn done, void *userdata, struct err *err)
{
    return jr->ops->layer_install(jr, area, name, first, done, userdata, err);
}

int
jailer_area_usage(struct jailer *jr, const char *name, uint64_t *ret_bytes)
{
    return jr->ops->area_usage(jr, name, ret_bytes);
}

void
jailer_area_destroy(struct jailer *jr, const char *name)
{
    jr->ops->area_destroy(jr, name);
}

int
jailer_create(struct jailer *jr, const char *id, const struct jail_limits *limits,
              const struct sandbox_fs *fs, const struct jailer_callbacks *cb, void *userdata,
              struct jailer_jail **ret, struct err *err)
{
    struct jailer_jail *j = NULL;
    int r = jr->ops->create(jr, id, limits, fs, &j, err);
    if (r < 0)
        return r;
    j->jr = jr;
    j->cb = cb;
    j->ud = userdata;
    *ret = j;
    return 0;
}

void
jailer_set_callbacks(struct jailer_jail *j, const struct jailer_callbacks *cb, void *userdata)
{
    j->cb = cb;
    j->ud = userdata;
}

int
jailer_spawn(struct jailer_jail *j, uint64_t token, const struct jail_spawn *sp, struct err *err)
{
    return j->jr->ops->spawn(j, token, sp, err);
}

int
jailer_signal(struct jailer_jail *j, pid_t pid, int sig, bool group)
{
    return j->jr->ops->signal(j, pid, sig, group);
}

int
jailer_set_limits(struct jailer_jail *j, const struct jail_limits *l, struct err *err)
{
    return j->jr->ops->set_limits(j, l, err);
}

int
jailer_freeze(struct jailer_jail *j, bool frozen, struct err *err)
{
    return j->jr->ops->freeze(j, frozen, err);
}

int
jailer_stats(struct jailer_jail *j, struct cgroup_stats *ret)
{
    return j->jr->ops->stats(j, ret);
}

int
jailer_disk_usage(struct jailer_jail *j, uint64_t *ret_bytes)
{
    return j->jr->ops->disk_usage(j, ret_bytes);
}

void
jailer_kill(struct jailer_jail *j)
{
    j->jr->ops->kill(j);
}

void
jailer_free_jail(struct jailer_jail *j)
{
    if (j)
        j->jr->ops->free_jail(j);
}

bool
jailer_is_ready(const struct jailer_jail *j)
{
    return j->jr->ops->is_ready(j);
}

const struct jail_timings *
jailer_timings(const struct jailer_jail *j)
{
    return j->jr->ops->timings(j);
}

const char *
jailer_home(const struct jailer_jail *j, bool root)
{
    return j->jr->ops->home(j, root);
}

const char *
jailer_workspace_path(const struct jailer_jail *j)
{
    return j->jr->ops->workspace_path(j);
}

int
jailer_workspace_fd(const struct jailer_jail *j)
{
    return j->jr->ops->workspace_fd(j);
}

void
jailer_vfs_ids(const struct jailer_jail *j, struct vfs_ids *ret)
{
    j->jr->ops->vfs_ids(j, ret);
}

int
jailer_view_fd(const struct jailer_jail *j)
{
    return j->jr->ops->view_fd(j);
}

bool
jailer_has_view(const struct jailer_jail *j)
{
    return j->jr->ops->has_view(j);
}

int
jailer_open_pty(struct jailer_jail *j, bool root, unsigned rows, unsigned cols, int *ret_master,
                int *ret_tty, struct err *err)
{
    return j->jr->ops->open_pty(j, root, rows, cols, ret_master, ret_tty, err);
}

int
jailer_netns_socket(struct jailer_jail *j, int family, int type, const char *label, struct err *err)
{
    return j->jr->ops->netns_socket(j, family, type, label, err);
}

int
jailer_fileops(struct jailer_jail *j, bool as_root, const char *label, struct fileops **ret,
               struct err *err)
{
    return j->jr->ops->fileops(j, as_root, label, ret, err);
}

int
jailer_set_record(struct jailer_jail *j, const void *record, size_t len, struct err *err)
{
    if (!j->jr->ops->set_record)
        return -EOPNOTSUPP;
    return j->jr->ops->set_record(j, record, len, err);
}

int
jailer_orphans(struct jailer *jr, jailer_orphan_fn fn, void *userdata, struct err *err)
{
    if (!jr->ops->orphans)
        return -EOPNOTSUPP;
    return jr->ops->orphans(jr, fn, userdata, err);
}

int
jailer_adopt(struct jailer *jr, const char *id, const struct jailer_callbacks *cb, void *userdata,
             struct jailer_jail **ret, struct err *err)
{
    struct jailer_jail *j = NULL;
    if (!jr->ops->adopt)
        return err_set(err, EOPNOTSUPP,
                       "sandboxes of an earlier process cannot be taken over here");
    int r = jr->ops->adopt(jr, id, &j, err);
    if (r < 0)
        return r;
    j->jr = jr;
    j->cb = cb;
    j->ud = userdata;
    *ret = j;
    return 0;
}

int
jailer_tree_empty(struct jailer *jr, int dirfd, struct err *err)
{
    return jr->ops->tree_empty ? jr->ops->tree_empty(jr, dirfd, err) : -EOPNOTSUPP;
}
