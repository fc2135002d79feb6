/*
 * jailer-priv.c - jailer.h through the privileged parent (priv/client.h):
 * abxd's network process, which holds no capability, asks the parent for
 * every jail operation and gets descriptors back.
 *
 * Only the ns mode (the parent refuses to serve another). What this
 * process never gets: the sandbox's view or workspace as a descriptor (the
 * file helpers the parent starts have them: file work goes through
 * fileops handles whose start/idmap/stop hooks are priv/client.h's), host
 * paths (layers and areas go to the parent as names: a layer is a
 * directory of the parent's layers directory, which this process may
 * read but not change, and a host path given here must resolve into it),
 * a process it could signal itself.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "priv/client.h"
#include "sandbox/fileops-helper.h"
#include "sandbox/fileops.h"
#include "sandbox/jailer-internal.h"
#include "sandbox/jailer.h"
#include "util/cleanup.h"
#include "util/fd.h"

struct remote {
    struct jailer pub;
    struct priv_client *c;
    char state_dir[PATH_MAX];
    char layers_dir[PATH_MAX + sizeof(JAIL_LAYERS_DIR) + 1];
};

struct remote_jail {
    struct jailer_jail pub;
    struct priv_jail *j;
    /* the hooks' argument for this sandbox's fileops handles (kept until
     * the jail is freed, after sandbox-local.c shut its handles down) */
    struct priv_fileops fo;
};

#define REM(p)  container_of(p, struct remote, pub)
#define CREM(p) const_container_of(p, struct remote, pub)
#define RJ(p)   container_of(p, struct remote_jail, pub)
#define CRJ(p)  const_container_of(p, struct remote_jail, pub)

static const struct jailer_ops remote_ops;

_Static_assert(JAILER_RECORD_MAX == PRIV_RECORD_MAX, "a jail's record is the parent's SET_RECORD");

/* --- priv/client.h's callbacks, relayed (each the last thing done) --- */

static void
on_ready(struct priv_jail *j, int r, const struct err *err, void *ud)
{
    struct remote_jail *rj = ud;
    (void)j;
    if (rj->pub.cb->ready)
        rj->pub.cb->ready(&rj->pub, r, err, rj->pub.ud);
}

static void
on_spawned(struct priv_jail *j, uint64_t token, pid_t pid, int r, const char *step, void *ud)
{
    struct remote_jail *rj = ud;
    (void)j;
    if (rj->pub.cb->spawned)
        rj->pub.cb->spawned(&rj->pub, token, pid, r, step, rj->pub.ud);
}

static void
on_exited(struct priv_jail *j, pid_t pid, int status, void *ud)
{
    struct remote_jail *rj = ud;
    (void)j;
    if (rj->pub.cb->exited)
        rj->pub.cb->exited(&rj->pub, pid, status, rj->pub.ud);
}

static void
on_gone(struct priv_jail *j, void *ud)
{
    struct remote_jail *rj = ud;
    (void)j;
    if (rj->pub.cb->gone)
        rj->pub.cb->gone(&rj->pub, rj->pub.ud);
}

static const struct priv_jail_callbacks relay_cb = {
        .ready = on_ready,
        .spawned = on_spawned,
        .exited = on_exited,
        .gone = on_gone,
};

/* --- the host --- */

int
jailer_priv_new(struct loop *loop, struct priv_client *c, const char *state_dir,
                struct jailer **ret)
{
    if (priv_client_host(c)->mode != JAIL_NS)
        return -EOPNOTSUPP;
    struct remote *h = calloc(1, sizeof(*h));
    if (!h)
        return -ENOMEM;
    h->pub = (struct jailer){.ops = &remote_ops, .loop = loop};
    h->c = c;
    if ((size_t)snprintf(h->state_dir, sizeof(h->state_dir), "%s", state_dir) >=
                sizeof(h->state_dir) ||
        (size_t)snprintf(h->layers_dir, sizeof(h->layers_dir), "%s/" JAIL_LAYERS_DIR, state_dir) >=
                sizeof(h->layers_dir)) {
        free(h);
        return -ENAMETOOLONG;
    }
    *ret = &h->pub;
    return 0;
}

static void
remote_free(struct jailer *pub)
{
    free(REM(pub));
}

static enum jail_mode
remote_mode(const struct jailer *pub)
{
    return priv_client_host(CREM(pub)->c)->mode;
}

static const char *
remote_state_dir(const struct jailer *pub)
{
    return CREM(pub)->state_dir;
}

static int
remote_area_create(struct jailer *pub, const char *name, uint64_t limit_bytes, struct err *err)
{
    return priv_area_create(REM(pub)->c, name, limit_bytes, err);
}

static const char *
remote_layers_dir(const struct jailer *pub)
{
    return CREM(pub)->layers_dir;
}

static int
remote_layer_install(struct jailer *pub, const char *area, const char *name, uid_t first,
                     sandbox_layer_fn done, void *ud, struct err *err)
{
    (void)first; /* the parent knows which sandbox wrote the area */
    return priv_layer_install(REM(pub)->c, area, name, done, ud, err);
}

/* The parent's name of the layer at path: the entry of the layers
 * directory it resolves to, the only place the parent looks. */
static int
layer_name(const struct remote *h, const char *path, char ret[PRIV_NAME_MAX + 1], struct err *err)
{
    char real[PATH_MAX];
    size_t n = strlen(h->layers_dir);
    if (!realpath(path, real))
        return err_set(err, errno, "layer '%s' is missing", path);
    if (strncmp(real, h->layers_dir, n) != 0 || real[n] != '/' ||
        strlen(real + n + 1) > PRIV_NAME_MAX || !priv_name_ok(real + n + 1))
        return err_set(err, EINVAL,
                       "layer '%s' is not in '%s' (a template built before privilege "
                       "separation: restart abxd once, or build it again)",
                       path, h->layers_dir);
    (void)snprintf(ret, PRIV_NAME_MAX + 1, "%s", real + n + 1);
    return 0;
}

static int
remote_area_usage(struct jailer *pub, const char *name, uint64_t *ret_bytes)
{
    return priv_area_usage(REM(pub)->c, name, ret_bytes);
}

static void
remote_area_destroy(struct jailer *pub, const char *name)
{
    (void)priv_area_destroy(REM(pub)->c, name, NULL);
}

static int
remote_create(struct jailer *pub, const char *id, const struct jail_limits *limits,
              const struct sandbox_fs *fs, struct jailer_jail **ret, struct err *err)
{
    struct remote *h = REM(pub);
    char names[JAIL_MAX_LAYERS][PRIV_NAME_MAX + 1];
    const char *layers[JAIL_MAX_LAYERS];
    struct priv_fs pfs = {.disk_bytes = fs ? fs->disk_bytes : 0};
    if (fs && fs->nlayers > JAIL_MAX_LAYERS)
        return err_set(err, E2BIG, "%zu layers, at most %d", fs->nlayers, JAIL_MAX_LAYERS);
    for (size_t i = 0; fs && i < fs->nlayers; i++) {
        int r = layer_name(h, fs->layers[i], names[i], err);
        if (r < 0)
            return r;
        layers[i] = names[i];
    }
    if (fs) {
        pfs.layers = layers;
        pfs.nlayers = fs->nlayers;
        pfs.upper = fs->upper_area;
    }
    struct remote_jail *rj = calloc(1, sizeof(*rj));
    if (!rj)
        return -ENOMEM;
    rj->pub.jr = pub;
    priv_fileops_init(&rj->fo, h->c, id);
    int r = priv_jail_create(h->c, id, limits, fs ? &pfs : NULL, &relay_cb, rj, &rj->j, err);
    if (r < 0) {
        free(rj);
        return r;
    }
    *ret = &rj->pub;
    return 0;
}

/* --- one jail --- */

static int
remote_spawn(struct jailer_jail *pub, uint64_t token, const struct jail_spawn *sp, struct err *err)
{
    return priv_jail_spawn(RJ(pub)->j, token, sp, err);
}

static int
remote_signal(struct jailer_jail *pub, pid_t pid, int sig, bool group)
{
    return priv_jail_signal(RJ(pub)->j, pid, sig, group);
}

static int
remote_set_limits(struct jailer_jail *pub, const struct jail_limits *l, struct err *err)
{
    return priv_jail_set_limits(RJ(pub)->j, l, err);
}

static int
remote_freeze(struct jailer_jail *pub, bool frozen, struct err *err)
{
    return priv_jail_freeze(RJ(pub)->j, frozen, err);
}

static int
remote_stats(struct jailer_jail *pub, struct cgroup_stats *ret)
{
    return priv_jail_stats(RJ(pub)->j, ret);
}

static int
remote_disk_usage(struct jailer_jail *pub, uint64_t *ret_bytes)
{
    return priv_jail_disk_usage(RJ(pub)->j, ret_bytes);
}

static void
remote_kill(struct jailer_jail *pub)
{
    priv_jail_kill(RJ(pub)->j);
}

static void
remote_free_jail(struct jailer_jail *pub)
{
    struct remote_jail *rj = RJ(pub);
    priv_jail_free(rj->j);
    free(rj);
}

static bool
remote_is_ready(const struct jailer_jail *pub)
{
    return priv_jail_is_ready(CRJ(pub)->j);
}

static const struct jail_timings *
remote_timings(const struct jailer_jail *pub)
{
    return priv_jail_timings(CRJ(pub)->j);
}

static const char *
remote_home(const struct jailer_jail *pub, bool root)
{
    return priv_jail_home(CRJ(pub)->j, root);
}

/* Only ever read outside the ns mode (sandbox-local.c's cwd). The network
 * side never names a host path: it keeps the name the sandbox's processes
 * use, and the parent maps that to the host's itself (do_spawn()). */
static const char *
remote_workspace_path(const struct jailer_jail *pub)
{
    (void)pub;
    return "/home/user";
}

static int
remote_workspace_fd(const struct jailer_jail *pub)
{
    (void)pub;
    return -EOPNOTSUPP;
}

static void
remote_vfs_ids(const struct jailer_jail *pub, struct vfs_ids *ret)
{
    const struct priv_jail *j = CRJ(pub)->j;
    *ret = fileops_jail_ids(priv_jail_root_uid(j), priv_jail_user_uid(j), priv_jail_user_gid(j));
}

static int
remote_view_fd(const struct jailer_jail *pub)
{
    (void)pub;
    return -EOPNOTSUPP; /* the parent keeps it; its file helpers have it */
}

static bool
remote_has_view(const struct jailer_jail *pub)
{
    return priv_jail_is_ready(CRJ(pub)->j);
}

static int
remote_open_pty(struct jailer_jail *pub, bool root, unsigned rows, unsigned cols, int *ret_master,
                int *ret_tty, struct err *err)
{
    return priv_jail_open_pty(RJ(pub)->j, root, rows, cols, ret_master, ret_tty, err);
}

static int
remote_netns_socket(struct jailer_jail *pub, int family, int type, const char *label,
                    struct err *err)
{
    int fd = -EBADF;
    /* The parent makes every such socket O_CLOEXEC and O_NONBLOCK; the
     * protocol carries the plain type. */
    int r = priv_jail_netns_socket(RJ(pub)->j, family, type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC), &fd,
                                   err);
    if (r < 0 && err && !err->msg[0])
        (void)err_set(err, -r, "cannot make a socket in the network of %s", label);
    if (r < 0)
        return r;
    if (!(type & SOCK_NONBLOCK) && fd_set_nonblock(fd, false) < 0) {
        r = err_setx(err, errno, "cannot make a socket in the network of %s", label);
        safe_close(fd);
        return r;
    }
    return fd;
}

static int
remote_fileops(struct jailer_jail *pub, bool as_root, const char *label, struct fileops **ret,
               struct err *err)
{
    struct remote_jail *rj = RJ(pub);
    struct fileops_remote c = {
            .image_fd = -1,
            .userns_fd = -1,
            .ws_fd = -1,
            .view_fd = -1,
            .ns = true,
            .as_root = as_root,
            .label = label,
            .start = priv_fileops_start,
            .idmap = priv_fileops_idmap,
            .stop = priv_fileops_stop,
            .start_ud = &rj->fo,
            .has_view = true,
    };
    return fileops_new_remote(&c, ret, err);
}

/* --- sandboxes that outlive a network process --- */

static int
remote_set_record(struct jailer_jail *pub, const void *record, size_t len, struct err *err)
{
    return priv_jail_set_record(RJ(pub)->j, record, len, err);
}

struct orphans_job {
    jailer_orphan_fn fn;
    void *ud;
};

static int
on_orphan(const struct priv_entry *e, void *ud)
{
    struct orphans_job *job = ud;
    return job->fn(e->id, e->record, e->record_len, job->ud);
}

static int
remote_orphans(struct jailer *pub, jailer_orphan_fn fn, void *userdata, struct err *err)
{
    struct orphans_job job = {.fn = fn, .ud = userdata};
    return priv_client_orphans(REM(pub)->c, on_orphan, &job, err);
}

static int
remote_adopt(struct jailer *pub, const char *id, struct jailer_jail **ret, struct err *err)
{
    struct remote *h = REM(pub);
    struct remote_jail *rj = calloc(1, sizeof(*rj));
    if (!rj)
        return -ENOMEM;
    rj->pub.jr = pub;
    priv_fileops_init(&rj->fo, h->c, id);
    int r = priv_jail_adopt(h->c, id, &relay_cb, rj, &rj->j, err);
    if (r < 0) {
        free(rj);
        return r;
    }
    *ret = &rj->pub;
    return 0;
}

static int
remote_tree_empty(struct jailer *pub, int dirfd, struct err *err)
{
    return priv_client_tree_empty(REM(pub)->c, dirfd, err);
}

static const struct jailer_ops remote_ops = {
        .free = remote_free,
        .mode = remote_mode,
        .state_dir = remote_state_dir,
        .area_create = remote_area_create,
        .layers_dir = remote_layers_dir,
        .layer_install = remote_layer_install,
        .area_usage = remote_area_usage,
        .area_destroy = remote_area_destroy,
        .create = remote_create,
        .spawn = remote_spawn,
        .signal = remote_signal,
        .set_limits = remote_set_limits,
        .freeze = remote_freeze,
        .stats = remote_stats,
        .disk_usage = remote_disk_usage,
        .kill = remote_kill,
        .free_jail = remote_free_jail,
        .is_ready = remote_is_ready,
        .timings = remote_timings,
        .home = remote_home,
        .workspace_path = remote_workspace_path,
        .workspace_fd = remote_workspace_fd,
        .vfs_ids = remote_vfs_ids,
        .view_fd = remote_view_fd,
        .has_view = remote_has_view,
        .open_pty = remote_open_pty,
        .netns_socket = remote_netns_socket,
        .fileops = remote_fileops,
        .set_record = remote_set_record,
        .orphans = remote_orphans,
        .adopt = remote_adopt,
        .tree_empty = remote_tree_empty,
};
