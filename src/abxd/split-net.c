/*
 * split-net.c - the network process's own steps (split.h): its cage and
 * its connection to the privileged parent.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "abxd/split.h"
#include "priv/client.h"
#include "priv/confine.h"
#include "sandbox/jailer.h"
#include "util/log.h"

/* --- the network process --- */

/* path made absolute (the flags may name relative ones; Landlock takes
 * absolute paths): into out, or path itself when it cannot be resolved
 * (confine_self() then says which). */
static const char *
absolute(const char *path, char out[PATH_MAX])
{
    return realpath(path, out) ? out : path;
}

int
split_net_confine(struct daemon *d)
{
    struct err err = {0};
    struct config *c = &d->cfg;
    char paths[8][PATH_MAX], given[4][PATH_MAX];
    const char *rw[16], *ro[24];
    size_t nrw = 0, nro = 0, np = 0;
    struct stat st;

    /* The state lock, held for as long as this process lives, never
     * handed on (split.c's exec_net()). */
    (void)fcntl(SPLIT_LOCK_FD, F_SETFD, FD_CLOEXEC);
    /* As the parent resolved it (lock_state()): every path below is built
     * from it. */
    if (realpath(c->state_dir, paths[0]) && strlen(paths[0]) < sizeof(c->state_dir))
        memcpy(c->state_dir, paths[0], strlen(paths[0]) + 1);
    for (size_t i = 0; i < SPLIT_NET_DIRS; i++) {
        (void)split_path(paths[np], sizeof(paths[np]), c->state_dir, split_net_dirs[i].name);
        rw[nrw++] = paths[np++];
    }
    if (!c->store[0]) {
        (void)split_path(paths[np], sizeof(paths[np]), c->state_dir, "store");
        rw[nrw++] = paths[np++];
    } else if (strncmp(c->store, "postgres", 8) != 0) {
        rw[nrw++] = absolute(c->store, given[0]);
    }
    rw[nrw++] = "/dev/null";
    (void)split_path(paths[np], sizeof(paths[np]), c->state_dir, "api-key");
    if (stat(paths[np], &st) == 0)
        ro[nro++] = paths[np++];
    if (c->tools_dir[0])
        ro[nro++] = absolute(c->tools_dir, given[1]);
    if (c->templates_dir[0])
        ro[nro++] = absolute(c->templates_dir, given[2]);
    if (c->keys_file[0])
        ro[nro++] = absolute(c->keys_file, given[3]);
    /* the resolver, certificates, time zones, libraries glibc loads
     * (NSS), randomness, CPU counts; /proc as any user sees it: our own
     * status, the boot's id and whether a dead abxd's pid still runs (the
     * store's GC lease), inotify's limits */
    static const char *const sys[] = {"/etc", "/usr", "/dev/urandom", "/sys/devices/system/cpu",
                                      "/proc"};
    for (size_t i = 0; i < ELEMENTSOF(sys); i++)
        ro[nro++] = sys[i];
    rw[nrw] = ro[nro] = NULL;

    struct confine_config cc = {
            .uid = split_net_uid(c),
            .gid = (gid_t)split_net_uid(c),
            .rw_paths = rw,
            .ro_paths = ro,
            /* Without the parent its sandboxes are gone and nothing can be
             * served; the store is safe at any instant, and its lock must
             * be free for the next abxd at once. */
            .parent_death_signal = SIGKILL,
    };
    int r = confine_self(&cc, &err);
    if (r < 0)
        return log_err("cannot confine the network process: %s", err.msg), r;
    struct confine_status cs;
    char line[512] = "";
    if (confine_report(&cs, NULL) == 0)
        (void)confine_status_format(&cs, line, sizeof(line));
    log_info("network process confined (Landlock ABI %d): %s", r, line);
    return 0;
}

int
split_net_connect(struct daemon *d)
{
    struct err err = {0};
    int r = priv_client_new(d->loop, SPLIT_PRIV_FD, &d->priv, &err);
    if (r < 0)
        return log_err("cannot reach the privileged parent: %s", err.msg), r;
    const struct priv_host_facts *f = priv_client_host(d->priv);
    if (f->missing[0])
        (void)buf_printf(&d->missing, "%s", f->missing);
    r = jailer_priv_new(d->loop, d->priv, d->cfg.state_dir, &d->jr);
    if (r < 0)
        return log_err_errno(r, "cannot use the privileged parent's sandboxes"), r;
    return 0;
}
