/*
 * adopt.c - the sandboxes a network process before this one left
 * (sandbox_host_orphans()): each comes back into the table as its
 * record describes it (table_adopt()), or to its workspace
 * (workspaces_adopt()), or is killed.
 */
#include <errno.h>
#include <string.h>

#include "api/api-internal.h"
#include "api/core/table.h"
#include "template/set.h"
#include "util/log.h"
#include "workspace/workspace.h"

static const struct template *
find_template(void *ud, const char *name)
{
    struct api *a = ud;
    return a->templates ? template_set_find(a->templates, name) : NULL;
}

static int
find_scope(void *ud, const char *key, const struct api_scope **ret)
{
    const struct api_scope *s = api_scope_of(ud, key, strlen(key));
    if (!s)
        return -ENOENT;
    *ret = s;
    return 0;
}

struct adopt_run {
    struct api *a;
    int adopted, killed;
};

/* A sandbox we cannot take over is ended rather than left to run with
 * nobody to serve it: adopted and killed at once. */
static void
kill_orphan(struct adopt_run *run, const char *id, const char *why)
{
    struct err err = {0};
    log_warn("sandbox=%s left by the previous network process: %s; killing it", id, why);
    run->killed++;
    if (sandbox_host_kill_orphan(run->a->sh, id, &err) < 0)
        log_warn("sandbox=%s: cannot take it over to kill it (%s); the parent ends it after its "
                 "grace",
                 id, err.msg);
}

static int
on_orphan(const char *orphan, const void *record, size_t len, void *ud)
{
    struct adopt_run *run = ud;
    struct err err = {0};
    struct entry *e = NULL;
    const struct table_resolve res = {.tmpl = find_template, .scope = find_scope, .ud = run->a};

    if (!record || !len) {
        kill_orphan(run, orphan, "it has no record (a warm one, or one not ready or restored yet)");
        return 0;
    }
    if (workspaces_is_record(record, len)) {
        int r = run->a->ws ? workspaces_adopt(run->a->ws, orphan, record, len, &err)
                           : err_set(&err, ENOENT, "a workspace's, and workspaces are off");
        if (r < 0) {
            kill_orphan(run, orphan, err.msg[0] ? err.msg : strerror(-r));
            return 0;
        }
        run->adopted++; /* workspaces_adopt() names it */
        return 0;
    }
    int r = table_adopt(run->a->table, orphan, record, len, &res, &e, &err);
    if (r == -EEXIST)
        return 0;
    if (r < 0) {
        kill_orphan(run, orphan, err.msg[0] ? err.msg : strerror(-r));
        return 0;
    }
    run->adopted++;
    log_info("sandbox=%s taken over from the previous network process", e->id);
    return 0;
}

int
api_adopt(struct api *a)
{
    struct err err = {0};
    struct adopt_run run = {.a = a};
    int r = sandbox_host_orphans(a->sh, on_orphan, &run, &err);
    if (r == -EOPNOTSUPP)
        return 0;
    if (r < 0) {
        log_warn("cannot list the sandboxes the previous network process left: %s",
                 err.msg[0] ? err.msg : strerror(-r));
        return r;
    }
    if (run.adopted || run.killed)
        log_notice("took over %d sandbox(es) from the previous network process, killed %d",
                   run.adopted, run.killed);
    return run.adopted;
}
