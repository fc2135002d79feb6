/*
 * layers.c - the host's store of built layers (jail.h "Layers"): a
 * template build's writable layer made into one every sandbox can stack,
 * and what no template names any more collected.
 *
 * The install runs on a worker thread of its own (a copy of a large tree
 * must hold neither the loop nor the teardown worker) and touches only the
 * job it was given and the host's directories, by descriptor.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jail/idshift.h"
#include "jail/jail-internal.h"
#include "jail/jail.h"
#include "util/cleanup.h"
#include "util/fd.h"
#include "util/workq.h"

#define LAYER_CP_ERR_MAX 400 /* bytes of cp's complaints kept for the message */

struct layer_job {
    struct jail_host *h;
    char area[JAIL_LAYER_NAME_MAX + 1];
    char name[JAIL_LAYER_NAME_MAX + 1];
    uid_t first;
    jail_layer_done_fn done;
    void *ud;
    int r;
    struct err err;
};

bool
jail_layer_name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > JAIL_LAYER_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
            return false;
    return true;
}

/* cp -a of the tree src (a path the host owns every part of) to
 * layers/tmp, waited for here. */
static int
copy_tree(struct jail_host *h, const char *src, const char *tmp, struct err *err)
{
    char dst[PATH_MAX + JAIL_LAYER_NAME_MAX + 8], msg[LAYER_CP_ERR_MAX + 1];
    static const char *const envp[] = {"PATH=/usr/bin:/bin", "LC_ALL=C", NULL};
    const char *cp = access("/usr/bin/cp", X_OK) == 0 ? "/usr/bin/cp" : "/bin/cp";
    posix_spawn_file_actions_t fa;
    pid_t pid = 0;
    int status = 0;

    if ((size_t)snprintf(dst, sizeof(dst), "%s/%s", h->layers_dir, tmp) >= sizeof(dst))
        return err_set(err, ENAMETOOLONG, "the layers directory's path is too long");
    const char *argv[] = {cp, "-a", "--reflink=never", "--no-target-directory", src, dst, NULL};
    _cleanup_close_ int errfd = memfd_create("abx-cp-err", MFD_CLOEXEC);
    if (errfd < 0 || posix_spawn_file_actions_init(&fa) != 0)
        return err_set(err, errno, "cannot copy the layer");
    int r = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    if (r == 0)
        r = posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    if (r == 0)
        r = posix_spawn_file_actions_adddup2(&fa, errfd, 2);
    if (r == 0)
        r = posix_spawn(&pid, cp, &fa, NULL, (char *const *)(uintptr_t)argv,
                        (char *const *)(uintptr_t)envp);
    (void)posix_spawn_file_actions_destroy(&fa);
    if (r != 0)
        return err_set(err, r, "cannot start cp");
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return err_set(err, errno, "cannot wait for cp");
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    ssize_t k = pread(errfd, msg, LAYER_CP_ERR_MAX, 0);
    msg[k > 0 ? k : 0] = '\0';
    for (char *c = msg; *c; c++)
        if (*c == '\n' || (unsigned char)*c < 0x20)
            *c = ' ';
    return err_set(err, EIO, "cp failed: %s", msg[0] ? msg : "no message");
}

static int
install(struct layer_job *j)
{
    struct jail_host *h = j->h;
    struct err *err = &j->err;
    char tmp[JAIL_LAYER_NAME_MAX + 8], src[PATH_MAX + 2 * JAIL_LAYER_NAME_MAX];
    struct stat st;
    int r;

    _cleanup_close_ int afd =
            openat(h->sandboxes_fd, j->area, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (afd < 0)
        return err_set(err, errno, "no area '%s'", j->area);
    _cleanup_close_ int fsfd = openat(afd, "fs", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fsfd < 0)
        return err_set(err, errno, "area '%s' holds no writable layer", j->area);
    if (fstatat(h->layers_fd, j->name, &st, AT_SYMLINK_NOFOLLOW) == 0)
        return err_set(err, EEXIST, "layer '%s' exists", j->name);
    /* As every sandbox can stack it: overlay's work directories gone, the
     * three tops there, the ids a sandbox sees. */
    static const char *const tops[] = {"usr", "etc", "opt"};
    for (size_t i = 0; i < ELEMENTSOF(tops); i++) {
        char w[16];
        (void)snprintf(w, sizeof(w), ".work-%s", tops[i]);
        (void)rm_rf_at(fsfd, w);
        /* A top is mounted by its path, which must not lead elsewhere:
         * a link (or a file) the build put there instead goes. */
        if (fstatat(fsfd, tops[i], &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode) &&
            unlinkat(fsfd, tops[i], 0) < 0)
            return err_set(err, errno, "cannot remove '%s' in the layer", tops[i]);
        if (mkdirat(fsfd, tops[i], 0755) < 0 && errno != EEXIST)
            return err_set(err, errno, "cannot create '%s' in the layer", tops[i]);
    }
    if ((r = idshift_tree(fsfd, j->first, err)) < 0)
        return r;
    if (fchmod(fsfd, 0755) < 0)
        return err_set(err, errno, "cannot open the layer to sandboxes");
    /* One rename when the area is on the state file system; else a copy
     * that appears whole or not at all. */
    if (renameat(afd, "fs", h->layers_fd, j->name) == 0) {
        (void)fsync(h->layers_fd);
        return 0;
    }
    if (errno != EXDEV)
        return err_set(err, errno, "cannot move the layer into place");
    (void)snprintf(tmp, sizeof(tmp), ".new-%s", j->name);
    (void)rm_rf_at(h->layers_fd, tmp);
    (void)snprintf(src, sizeof(src), "%s/%s/fs", h->sandboxes_dir, j->area);
    r = copy_tree(h, src, tmp, err);
    if (r == 0 && syncfs(h->layers_fd) < 0)
        r = err_set(err, errno, "cannot write the layer to disk");
    if (r == 0 && renameat(h->layers_fd, tmp, h->layers_fd, j->name) < 0)
        r = err_set(err, errno, "cannot move the layer into place");
    if (r < 0) {
        (void)rm_rf_at(h->layers_fd, tmp);
        return r;
    }
    (void)fsync(h->layers_fd);
    return 0;
}

static void
install_work(void *ud)
{
    struct layer_job *j = ud;
    j->r = install(j);
}

static void
install_done(void *ud)
{
    struct layer_job *j = ud;
    j->done(j->r, j->r < 0 ? &j->err : NULL, j->ud);
    free(j);
}

int
jail_host_layer_install(struct jail_host *h, const char *area, const char *name, uid_t first,
                        jail_layer_done_fn done, void *ud, struct err *err)
{
    if (h->mode != JAIL_NS || h->layers_fd < 0)
        return err_set(err, EOPNOTSUPP, "layers need the ns isolation mode");
    if (!jail_layer_name_ok(area) || !jail_layer_name_ok(name))
        return err_set(err, EINVAL, "bad area or layer name");
    if (!h->layer_wq) {
        int r = workq_new(h->loop, 1, &h->layer_wq);
        if (r < 0)
            return err_set(err, -r, "cannot start the layer worker");
    }
    struct layer_job *j = calloc(1, sizeof(*j));
    if (!j)
        return -ENOMEM;
    *j = (struct layer_job){.h = h, .first = first, .done = done, .ud = ud};
    (void)snprintf(j->area, sizeof(j->area), "%s", area);
    (void)snprintf(j->name, sizeof(j->name), "%s", name);
    int r = workq_submit(h->layer_wq, install_work, install_done, j);
    if (r < 0) {
        free(j);
        return err_set(err, -r, "cannot queue the layer's install");
    }
    return 0;
}

const char *
jail_host_layers_dir(const struct jail_host *h)
{
    return h->layers_fd >= 0 ? h->layers_dir : NULL;
}

int
jail_host_layers_collect(struct jail_host *h, const char *const *keep, size_t nkeep)
{
    char **names = NULL;
    size_t n = 0;
    int removed = 0;

    if (h->layers_fd < 0 || fd_dir_names(h->layers_fd, SIZE_MAX, &names, &n) < 0)
        return 0;
    for (size_t i = 0; i < n; i++) {
        bool kept = false;
        for (size_t k = 0; !kept && k < nkeep; k++)
            kept = !strcmp(keep[k], names[i]);
        if (!kept && rm_rf_at(h->layers_fd, names[i]) == 0)
            removed++;
    }
    fd_names_free(names, n);
    return removed;
}
