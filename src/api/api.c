/*
 * api.c - the api's life: api_new() makes the table and lets the surfaces
 * register their per-sandbox hooks; setters; the operations abxd drives
 * (drain, idle sweep, kill-all). Requests enter at api_begin() (router.c).
 */
#include "api/api.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api-internal.h"
#include "api/e2b/e2b.h"
#include "api/ports/ports.h"
#include "util/timeutil.h"

void
api_set_workspaces(struct api *a, struct workspaces *ws)
{
    a->ws = ws;
}

void
api_set_templates(struct api *a, struct template_set *templates)
{
    a->templates = templates;
}

void
api_set_tools(struct api *a, const struct tools_registry *tools, const char *mount)
{
    a->tools = tools;
    (void)snprintf(a->tools_mount, sizeof(a->tools_mount), "%s", mount ? mount : "");
}

int
api_new(struct loop *loop, struct sandbox_host *sh, const struct api_config *c, struct api **ret)
{
    struct table_config tc = {.max_sandboxes = c->max_sandboxes,
                              .idle_timeout_s = c->idle_timeout_s};
    struct api *a = calloc(1, sizeof(*a));
    if (!a)
        return -ENOMEM;
    a->loop = loop;
    a->sh = sh;
    a->cfg = *c;
    a->api_key = strdup(c->api_key);
    a->started_wall_ms = wall_msec();
    if (!a->api_key || table_new(loop, sh, a, &tc, &a->table) < 0 || e2b_init(a) < 0) {
        table_free(a->table);
        free(a->api_key);
        free(a);
        return -ENOMEM;
    }
    a->cfg.api_key = a->api_key;
    *ret = a;
    return 0;
}

void
api_free(struct api *a)
{
    if (!a)
        return;
    e2b_snaps_free(a);
    table_free(a->table);
    api_keys_free(a);
    free(a->api_key);
    free(a);
}

void
api_set_missing(struct api *a, const char *missing)
{
    table_set_missing(a->table, missing);
}

void
api_drain(struct api *a)
{
    table_drain(a->table);
}

bool
api_draining(const struct api *a)
{
    return table_draining(a->table);
}

int
api_sweep_idle(struct api *a)
{
    return table_sweep_idle(a->table);
}

void
api_kill_all(struct api *a, void (*done)(void *ud), void *ud)
{
    table_kill_all(a->table, done, ud);
}

uint32_t
api_sandbox_count(const struct api *a)
{
    return table_count(a->table);
}
