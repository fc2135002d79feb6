/*
 * snapstore.c - snapshots on disk (see snapstore.h): the directory layout,
 * info.json, the worker that copies, removal and lookup. info.json is
 * parsed here into a struct snap_info and never leaves as JSON.
 */
#include "snapshot/snapstore.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox/fileops.h"
#include "util/buf.h"
#include "util/cleanup.h"
#include "util/err.h"
#include "util/fd.h"
#include "util/json.h"
#include "util/rand.h"
#include "util/timeutil.h"
#include "util/workq.h"

#define SNAPSTORE_NAMES_MAX 64 /* names one record may carry */

#define REMOVE_TRIES   100   /* removals after the emptier began, */
#define REMOVE_WAIT_US 20000 /* this far apart (2 s in all) */

struct snapstore {
    struct workq *wq;
    int dirfd; /* the store's directory */
    struct snapstore_emptier em;
};

/* Removes dirfd/name, a snapshot's directory: its tree (root/) belongs to
 * the sandboxes' ids, so where this process may not remove it, the
 * emptier empties it first (in the background: the removal is retried for
 * a bounded time; what is still there then, the next open's sweep takes). */
static void
remove_tree(const struct snapstore_emptier *em, int dirfd, const char *name)
{
    if (rm_rf_at(dirfd, name) == 0 || !em->fn)
        return;
    _cleanup_close_ int fd = openat(dirfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || em->fn(em->ud, fd, NULL) < 0)
        return;
    for (int i = 0; i < REMOVE_TRIES && rm_rf_at(dirfd, name) < 0; i++)
        (void)usleep(REMOVE_WAIT_US);
}

void
snap_info_done(struct snap_info *i)
{
    if (!i)
        return;
    for (size_t k = 0; k < i->n_names; k++)
        free(i->names[k]);
    free(i->names);
    i->names = NULL;
    i->n_names = 0;
}

bool
snapstore_id_ok(const char *id)
{
    size_t n = strlen(id);
    if (n == 0 || n > SNAPSTORE_ID_MAX || id[0] == '.')
        return false;
    for (const char *p = id; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-'))
            return false;
    return true;
}

bool
snapstore_name_ok(const char *n)
{
    size_t l = strlen(n);
    if (l == 0 || l > SNAPSTORE_NAME_MAX)
        return false;
    for (const char *p = n; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              strchr("-_.:/", *p)))
            return false;
    return true;
}

bool
snap_info_has_name(const struct snap_info *i, const char *name)
{
    for (size_t k = 0; k < i->n_names; k++)
        if (!strcmp(i->names[k], name))
            return true;
    return false;
}

/* --- info.json --- */

static void
copy_str(char *dst, size_t sz, json_t *o, const char *k)
{
    const char *v = json_string_value(json_object_get(o, k));
    (void)snprintf(dst, sz, "%s", v ? v : "");
}

/* The record of snapshot id: 1 when read, 0 when missing or unreadable,
 * -ENOMEM. */
static int
read_info(struct snapstore *s, const char *id, struct snap_info *ret)
{
    char path[128];
    struct buf b;
    json_t *j = NULL, *names, *v;
    json_int_t n;
    size_t k;
    int r = 0;

    memset(ret, 0, sizeof(*ret));
    (void)snprintf(path, sizeof(path), "%s/info.json", id);
    buf_init(&b, SNAPSTORE_INFO_MAX);
    if (read_file_at(s->dirfd, path, SNAPSTORE_INFO_MAX, &b) < 0 ||
        json_parse(b.data, b.len, &j, NULL) < 0 || !json_is_object(j))
        goto out;
    copy_str(ret->id, sizeof(ret->id), j, "snapshotID");
    copy_str(ret->sandbox_id, sizeof(ret->sandbox_id), j, "sandboxID");
    copy_str(ret->template_id, sizeof(ret->template_id), j, "templateID");
    copy_str(ret->alias, sizeof(ret->alias), j, "alias");
    n = json_integer_value(json_object_get(j, "createdAt"));
    ret->created_ms = n > 0 ? (uint64_t)n : 0;
    ret->hidden = json_is_true(json_object_get(j, "hidden"));
    n = json_integer_value(json_object_get(j, "bytes"));
    ret->bytes = n > 0 ? (uint64_t)n : 0;
    n = json_integer_value(json_object_get(j, "entries"));
    ret->entries = n > 0 ? (uint64_t)n : 0;
    names = json_object_get(j, "names");
    ret->names = calloc(MIN(json_array_size(names), SNAPSTORE_NAMES_MAX) + 1, sizeof(char *));
    if (!ret->names) {
        r = -ENOMEM;
        goto out;
    }
    json_array_foreach (names, k, v) {
        if (ret->n_names == SNAPSTORE_NAMES_MAX)
            break;
        if (!json_is_string(v))
            continue;
        if (!(ret->names[ret->n_names] = strdup(json_string_value(v)))) {
            r = -ENOMEM;
            goto out;
        }
        ret->n_names++;
    }
    r = 1;
out:
    if (r <= 0)
        snap_info_done(ret);
    json_decref(j);
    buf_done(&b);
    return r;
}

static char *
info_text(const struct snap_spec *spec, const char *id, uint64_t created_ms,
          const struct snapshot_stats *st)
{
    json_t *o = json_object(), *names = json_array();
    char *text = NULL;

    if (o && names) {
        if (spec->name)
            (void)json_array_append_new(names, json_string(spec->name));
        (void)json_set(o, "snapshotID", json_string(id));
        (void)json_set(o, "names", json_incref(names));
        (void)json_set(o, "sandboxID", json_string(spec->sandbox_id));
        (void)json_set(o, "templateID", json_string(spec->template_id));
        (void)json_set(o, "alias", json_string(spec->alias));
        (void)json_set(o, "createdAt", json_integer((json_int_t)created_ms));
        (void)json_set(o, "hidden", json_boolean(spec->hidden));
        (void)json_set(o, "bytes", json_integer((json_int_t)st->bytes));
        (void)json_set(o, "entries", json_integer((json_int_t)st->entries));
        text = json_dumps(o, JSON_COMPACT);
    }
    json_decref(names);
    json_decref(o);
    return text;
}

/* --- removal --- */

struct rmjob {
    int dirfd;
    char name[96];
    struct snapstore_emptier em;
};

static void
rm_work(void *ud)
{
    struct rmjob *j = ud;
    remove_tree(&j->em, j->dirfd, j->name);
}

static void
rm_done(void *ud)
{
    struct rmjob *j = ud;
    (void)close(j->dirfd);
    free(j);
}

/* Removes dirfd/name (ours) on the worker. */
static void
remove_later(struct snapstore *s, const char *name)
{
    struct rmjob *j = calloc(1, sizeof(*j));
    if (!j)
        return;
    j->dirfd = fcntl(s->dirfd, F_DUPFD_CLOEXEC, 3);
    j->em = s->em;
    (void)snprintf(j->name, sizeof(j->name), "%s", name);
    if (j->dirfd < 0 || workq_submit(s->wq, rm_work, rm_done, j) < 0) {
        if (j->dirfd >= 0)
            (void)close(j->dirfd);
        free(j);
    }
}

int
snapstore_delete(struct snapstore *s, const char *id)
{
    struct snap_info info;
    char del[96], tail[16];
    int r;

    if (!snapstore_id_ok(id))
        return -ENOENT;
    r = read_info(s, id, &info);
    if (r <= 0)
        return r < 0 ? r : -ENOENT;
    snap_info_done(&info);
    if ((r = rand_id(tail, 8)) < 0)
        return r;
    (void)snprintf(del, sizeof(del), ".del-%s-%s", id, tail);
    if (renameat(s->dirfd, id, s->dirfd, del) < 0)
        return -errno;
    remove_later(s, del);
    return 0;
}

/* --- opening --- */

/* What an earlier run left: half-made and half-deleted snapshots, and
 * hidden ones (a fork's, a pause's) whose sandboxes died with it. */
static void
sweep(struct snapstore *s)
{
    int fd = fcntl(s->dirfd, F_DUPFD_CLOEXEC, 3);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    struct dirent *de;
    if (!d) {
        if (fd >= 0)
            (void)close(fd);
        return;
    }
    while ((de = readdir(d))) {
        bool stale = !strncmp(de->d_name, ".tmp-", 5) || !strncmp(de->d_name, ".del-", 5);
        if (!stale && de->d_name[0] != '.') {
            struct snap_info info;
            stale = read_info(s, de->d_name, &info) > 0 && info.hidden;
            snap_info_done(&info);
        }
        if (stale)
            remove_later(s, de->d_name);
    }
    (void)closedir(d);
}

int
snapstore_open(struct loop *loop, const char *path, struct snapstore **ret, struct err *err)
{
    if (mkdir(path, 0700) < 0 && errno != EEXIST)
        return err_set(err, errno, "cannot create '%s'", path);
    struct snapstore *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->dirfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (s->dirfd < 0) {
        int r = err_set(err, errno, "cannot open '%s'", path);
        free(s);
        return r;
    }
    int r = workq_new(loop, 1, &s->wq);
    if (r < 0) {
        (void)close(s->dirfd);
        free(s);
        return err_set(err, -r, "cannot start the snapshot worker");
    }
    sweep(s);
    *ret = s;
    return 0;
}

struct snapstore *
snapstore_free(struct snapstore *s)
{
    if (!s)
        return NULL;
    workq_free(s->wq); /* runs the pending done callbacks */
    if (s->dirfd >= 0)
        (void)close(s->dirfd);
    free(s);
    return NULL;
}

/* --- taking one --- */

struct takejob {
    char id[SNAPSTORE_ID_MAX + 1];
    snapstore_taken_fn done;
    void *ud;
    /* the worker's */
    int dirfd;
    struct snapstore_emptier em;
    struct fileops *fo; /* as the sandbox's root */
    char *name, *sandbox_id, *template_id, *alias;
    bool hidden;
    uint64_t created_ms;
    int r;
    struct err err;
    struct snapshot_stats st;
};

static void
take_work(void *ud)
{
    struct takejob *j = ud;
    char tmp[96];
    _cleanup_close_ int t = -EBADF, root = -EBADF;
    char *text = NULL;
    struct snap_spec spec = {
            .name = j->name,
            .sandbox_id = j->sandbox_id,
            .template_id = j->template_id,
            .alias = j->alias,
            .hidden = j->hidden,
    };

    (void)snprintf(tmp, sizeof(tmp), ".tmp-%s", j->id);
    if (mkdirat(j->dirfd, tmp, 0700) < 0 ||
        (t = openat(j->dirfd, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
        mkdirat(t, "root", 0700) < 0 ||
        (root = openat(t, "root", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
        j->r = err_set(&j->err, errno, "cannot create the snapshot directory");
        goto out;
    }
    j->r = fileops_snapshot_out(j->fo, root, SNAPSHOT_MAX_BYTES, &j->st, &j->err);
    if (j->r < 0)
        goto out;
    text = info_text(&spec, j->id, j->created_ms, &j->st);
    if (!text) {
        j->r = -ENOMEM;
        goto out;
    }
    if ((j->r = write_file_at(t, "info.json", text, 0600)) < 0) {
        (void)err_set(&j->err, -j->r, "cannot write info.json");
        goto out;
    }
    if (renameat(j->dirfd, tmp, j->dirfd, j->id) < 0)
        j->r = err_set(&j->err, errno, "cannot put the snapshot in place");
out:
    free(text);
    if (j->r < 0)
        remove_tree(&j->em, j->dirfd, tmp);
}

static void
takejob_free(struct takejob *j)
{
    if (j->dirfd >= 0)
        (void)close(j->dirfd);
    fileops_unref(j->fo);
    free(j->name);
    free(j->sandbox_id);
    free(j->template_id);
    free(j->alias);
    free(j);
}

static void
take_done(void *ud)
{
    struct takejob *j = ud;
    j->done(j->r, &j->err, j->id, &j->st, j->ud);
    takejob_free(j);
}

static char *
dup_or_empty(const char *s)
{
    return strdup(s ? s : "");
}

int
snapstore_take(struct snapstore *s, struct fileops *fo, const struct snap_spec *spec,
               snapstore_taken_fn done, void *ud, char *ret_id)
{
    char rid[17];
    int r;

    struct takejob *j = calloc(1, sizeof(*j));
    if (!j)
        return -ENOMEM;
    j->dirfd = -EBADF;
    if ((r = rand_id(rid, 16)) < 0)
        goto fail;
    (void)snprintf(j->id, sizeof(j->id), "snap-%s", rid);
    j->done = done;
    j->ud = ud;
    j->hidden = spec->hidden;
    j->created_ms = wall_msec();
    j->fo = fileops_ref(fo);
    j->dirfd = fcntl(s->dirfd, F_DUPFD_CLOEXEC, 3);
    j->em = s->em;
    if (j->dirfd < 0) {
        r = -errno;
        goto fail;
    }
    j->sandbox_id = dup_or_empty(spec->sandbox_id);
    j->template_id = dup_or_empty(spec->template_id);
    j->alias = dup_or_empty(spec->alias);
    if ((spec->name && !(j->name = strdup(spec->name))) || !j->sandbox_id || !j->template_id ||
        !j->alias) {
        r = -ENOMEM;
        goto fail;
    }
    if ((r = workq_submit(s->wq, take_work, take_done, j)) < 0)
        goto fail;
    (void)snprintf(ret_id, SNAPSTORE_ID_MAX + 1, "%s", j->id);
    return 0;
fail:
    takejob_free(j);
    return r;
}

/* --- restoring --- */

struct restorejob {
    snapstore_restored_fn done;
    void *ud;
    /* the worker's */
    int srcfd;
    struct fileops *fo;
    int r;
    struct err err;
};

static void
restore_work(void *ud)
{
    struct restorejob *j = ud;
    j->r = fileops_snapshot_in(j->fo, j->srcfd, &j->err);
}

static void
restore_done(void *ud)
{
    struct restorejob *j = ud;
    j->done(j->r, &j->err, j->ud);
    (void)close(j->srcfd);
    fileops_unref(j->fo);
    free(j);
}

void
snapstore_set_emptier(struct snapstore *s, const struct snapstore_emptier *em)
{
    s->em = *em;
}

int
snapstore_open_root(struct snapstore *s, const char *id, int *ret_fd, struct err *err)
{
    char path[96];
    (void)snprintf(path, sizeof(path), "%s/root", id);
    int fd = openat(s->dirfd, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    /* A tree the sandboxes' ids own may be closed to this uid: the file
     * helper reads it, through a mapping made from the path. */
    if (fd < 0 && errno == EACCES)
        fd = openat(s->dirfd, path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return err_set(err, errno == ENOENT ? ENOENT : errno, "snapshot '%s' is gone", id);
    *ret_fd = fd;
    return 0;
}

int
snapstore_restore(struct snapstore *s, int rootfd, struct fileops *fo, snapstore_restored_fn done,
                  void *ud)
{
    struct restorejob *j = calloc(1, sizeof(*j));
    if (!j) {
        (void)close(rootfd);
        return -ENOMEM;
    }
    j->done = done;
    j->ud = ud;
    j->srcfd = rootfd;
    j->fo = fileops_ref(fo);
    int r = workq_submit(s->wq, restore_work, restore_done, j);
    if (r < 0) {
        (void)close(j->srcfd);
        fileops_unref(j->fo);
        free(j);
    }
    return r;
}

/* --- finding and listing --- */

void
snapstore_list_free(struct snap_info *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        snap_info_done(&v[i]);
    free(v);
}

int
snapstore_list(struct snapstore *s, struct snap_info **ret, size_t *ret_n)
{
    struct snap_info *v = NULL;
    size_t n = 0, cap = 0;
    int r = 0;

    int fd = fcntl(s->dirfd, F_DUPFD_CLOEXEC, 3);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            (void)close(fd);
        *ret = NULL;
        *ret_n = 0;
        return 0;
    }
    rewinddir(d);
    struct dirent *de;
    while ((de = readdir(d)) && n < SNAPSTORE_SCAN_MAX) {
        if (!snapstore_id_ok(de->d_name))
            continue;
        if (n == cap) {
            size_t c = cap ? cap * 2 : 16;
            struct snap_info *nv = realloc(v, c * sizeof(*nv));
            if (!nv) {
                r = -ENOMEM;
                break;
            }
            v = nv;
            cap = c;
        }
        r = read_info(s, de->d_name, &v[n]);
        if (r < 0)
            break;
        if (r > 0 && !strcmp(v[n].id, de->d_name))
            n++;
        else
            snap_info_done(&v[n]);
        r = 0;
    }
    (void)closedir(d);
    if (r < 0) {
        snapstore_list_free(v, n);
        return r;
    }
    *ret = v;
    *ret_n = n;
    return 0;
}

int
snapstore_find(struct snapstore *s, const char *id, struct snap_info *ret)
{
    int r = 0;

    memset(ret, 0, sizeof(*ret));
    if (snapstore_id_ok(id) && (r = read_info(s, id, ret)) != 0)
        return r < 0 ? r : 0;
    if (!snapstore_name_ok(id))
        return -ENOENT;
    struct snap_info *all = NULL;
    size_t n = 0, best = SIZE_MAX;
    if ((r = snapstore_list(s, &all, &n)) < 0)
        return r;
    for (size_t i = 0; i < n; i++)
        if (snap_info_has_name(&all[i], id) &&
            (best == SIZE_MAX || all[i].created_ms > all[best].created_ms))
            best = i;
    if (best == SIZE_MAX) {
        snapstore_list_free(all, n);
        return -ENOENT;
    }
    *ret = all[best];
    memset(&all[best], 0, sizeof(all[best])); /* ret has its names now */
    snapstore_list_free(all, n);
    return 0;
}
