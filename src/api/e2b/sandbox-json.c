/*
 * sandbox-json.c - the Sandbox object that E2B's create, connect, resume and
 * fork answer with. Calls nothing else of the surface, so the snapshot
 * code below the platform API can answer with it too.
 */
#include "api/e2b/e2b-internal.h"
#include "template/template.h"
#include "util/json.h"

const char *
e2b_template_id(const struct entry *e)
{
    return e->tmpl ? e->tmpl->name : "base";
}

static json_t *
sandbox_json(struct api *a, struct entry *e)
{
    json_t *o = json_object();
    (void)json_set(o, "sandboxID", json_string(e2b_public_id(e)));
    (void)json_set(o, "templateID", json_string(e2b_template_id(e)));
    if (e2b_of(e) && e2b_of(e)->alias[0])
        (void)json_set(o, "alias", json_string(e2b_of(e)->alias));
    (void)json_set(o, "clientID", json_string("abx"));
    (void)json_set(o, "envdVersion", json_string(E2B_ENVD_VERSION));
    if (e2b_of(e))
        (void)json_set(o, "envdAccessToken", json_string(e2b_of(e)->token));
    (void)json_set(o, "trafficAccessToken", json_null());
    (void)json_set(o, "domain",
                   a->cfg.e2b_domain && *a->cfg.e2b_domain ? json_string(a->cfg.e2b_domain)
                                                           : json_null());
    return o;
}

json_t *
e2b_create_answer(struct api *a, struct entry *e)
{
    return sandbox_json(a, e);
}
