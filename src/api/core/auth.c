/*
 * auth.c - the bearer key, scoped API keys (limited to some templates and
 * commands) and the capability gate.
 *
 * Besides abxd's one full key, ABX_KEYS_FILE may name a JSON file:
 *
 *   {"keys": [{"key": "k_ci_...", "templates": ["toolbox"],
 *              "commands": ["toolbox:echo", "locked:*"]}]}
 *
 * A scoped key may list and read the templates it names, create sandboxes
 * of them, see and delete the sandboxes it created, and list and run the
 * commands it names (absent "commands": every command of its templates).
 * Discovery shows exactly what it may run, no more (the seed's "discovery
 * is a subset of execution", at command level). Every other route is 403.
 */
#include "api/core/auth.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "api/api-internal.h"
#include "template/set.h"
#include "template/template.h"
#include "util/json.h"

#define KEYS_MAX      256
#define KEYS_FILE_MAX (1024 * 1024)
#define KEY_MIN_LEN   16
#define KEY_ITEMS_MAX 256

static void
scope_free(struct api_scope *s)
{
    if (!s)
        return;
    free(s->key);
    for (size_t i = 0; i < s->n_templates; i++)
        free(s->templates[i]);
    free(s->templates);
    for (size_t i = 0; i < s->n_commands; i++)
        free(s->commands[i]);
    free(s->commands);
}

void
api_keys_free(struct api *a)
{
    for (size_t i = 0; i < a->n_scopes; i++)
        scope_free(&a->scopes[i]);
    free(a->scopes);
    a->scopes = NULL;
    a->n_scopes = 0;
}

static int
strings(json_t *arr, const char *what, size_t k, char ***ret, size_t *ret_n, struct err *err)
{
    if (!json_is_array(arr) || json_array_size(arr) > KEY_ITEMS_MAX)
        return err_set(err, EINVAL, "keys[%zu].%s must be a list of at most %d names", k, what,
                       KEY_ITEMS_MAX);
    size_t n = json_array_size(arr);
    char **v = calloc(n + 1, sizeof(*v));
    if (!v)
        return -ENOMEM;
    *ret = v;
    for (size_t i = 0; i < n; i++) {
        const char *s = json_string_value(json_array_get(arr, i));
        if (!s || !*s || strlen(s) > 2 * TEMPLATE_NAME_MAX + 1)
            return err_set(err, EINVAL, "keys[%zu].%s[%zu] must be a name", k, what, i);
        if (!(v[i] = strdup(s)))
            return -ENOMEM;
        *ret_n = i + 1;
    }
    return 0;
}

int
api_load_keys(struct api *a, const char *path, struct err *err)
{
    static const char *const top[] = {"keys", NULL};
    static const char *const fields[] = {"key", "templates", "commands", NULL};
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return err_setx(err, errno, "keys file '%s'", path);
    _cleanup_free_ char *b = malloc(KEYS_FILE_MAX + 1);
    if (!b)
        return -ENOMEM;
    ssize_t n = read(fd, b, KEYS_FILE_MAX + 1);
    if (n < 0)
        return err_setx(err, errno, "cannot read '%s'", path);
    if (n > KEYS_FILE_MAX)
        return err_set(err, EFBIG, "keys file '%s' is larger than %d bytes", path, KEYS_FILE_MAX);
    json_t *j = NULL;
    struct err perr = {0};
    int r = json_parse(b, (size_t)n, &j, &perr);
    if (r == 0)
        r = json_check_object(j, top, &perr);
    json_t *keys = r == 0 ? json_object_get(j, "keys") : NULL;
    if (r == 0 && (!json_is_array(keys) || json_array_size(keys) > KEYS_MAX))
        r = err_set(&perr, EINVAL, "'keys' must be a list of at most %d keys", KEYS_MAX);
    if (r < 0) {
        json_decref(j);
        return err_set(err, -r, "keys file '%s': %s", path, perr.msg);
    }
    a->scopes = calloc(json_array_size(keys) + 1, sizeof(*a->scopes));
    if (!a->scopes) {
        json_decref(j);
        return -ENOMEM;
    }
    size_t i;
    json_t *k;
    json_array_foreach (keys, i, k) {
        struct api_scope *s = &a->scopes[a->n_scopes++];
        const char *key = json_string_value(json_object_get(k, "key"));
        r = json_check_object(k, fields, &perr);
        if (r == 0 && (!key || strlen(key) < KEY_MIN_LEN || strlen(key) > 255))
            r = err_set(&perr, EINVAL, "keys[%zu].key must be a string of %d to 255 characters", i,
                        KEY_MIN_LEN);
        if (r == 0 && !strcmp(key, a->api_key))
            r = err_set(&perr, EINVAL, "keys[%zu] is abxd's full key", i);
        for (size_t m = 0; r == 0 && m + 1 < a->n_scopes; m++)
            if (!strcmp(a->scopes[m].key, key))
                r = err_set(&perr, EINVAL, "keys[%zu] repeats keys[%zu]", i, m);
        if (r == 0 && !(s->key = strdup(key)))
            r = -ENOMEM;
        if (r == 0)
            r = strings(json_object_get(k, "templates"), "templates", i, &s->templates,
                        &s->n_templates, &perr);
        json_t *cmds = r == 0 ? json_object_get(k, "commands") : NULL;
        s->all_commands = cmds == NULL;
        if (cmds && r == 0)
            r = strings(cmds, "commands", i, &s->commands, &s->n_commands, &perr);
        for (size_t m = 0; r == 0 && m < s->n_templates; m++) {
            const struct template *t = template_set_find(a->templates, s->templates[m]);
            if (!t) {
                r = err_set(&perr, EINVAL, "keys[%zu] names template '%s', which does not exist", i,
                            s->templates[m]);
            } else if (strcmp(t->name, s->templates[m]) != 0) { /* an alias */
                free(s->templates[m]);
                if (!(s->templates[m] = strdup(t->name)))
                    r = -ENOMEM;
            }
        }
        if (r < 0) {
            json_decref(j);
            api_keys_free(a);
            return err_set(err, -r, "keys file '%s': %s", path, perr.msg);
        }
    }
    json_decref(j);
    return (int)a->n_scopes;
}

const struct api_scope *
api_scope_of(const struct api *a, const char *tok, size_t len)
{
    for (size_t i = 0; i < a->n_scopes; i++) {
        const char *k = a->scopes[i].key;
        if (strlen(k) == len && CRYPTO_memcmp(k, tok, len) == 0)
            return &a->scopes[i];
    }
    return NULL;
}

bool
api_scope_template(const struct api_scope *s, const struct template *t)
{
    if (!s)
        return true;
    for (size_t i = 0; t && i < s->n_templates; i++)
        if (!strcmp(s->templates[i], t->name))
            return true;
    return false;
}

bool
api_scope_command(const struct api_scope *s, const struct template *t, const char *cmd)
{
    if (!s)
        return true;
    if (!api_scope_template(s, t))
        return false;
    if (s->all_commands)
        return true;
    size_t tl = strlen(t->name);
    for (size_t i = 0; i < s->n_commands; i++) {
        const char *c = s->commands[i];
        if (strncmp(c, t->name, tl) != 0 || c[tl] != ':')
            continue;
        if (!strcmp(c + tl + 1, "*") || !strcmp(c + tl + 1, cmd))
            return true;
    }
    return false;
}

int
api_key_check(const struct api *a, const char *tok, const struct api_scope **ret_scope)
{
    size_t kl = strlen(a->api_key);
    *ret_scope = NULL;
    if (!tok)
        return -ENOKEY;
    if (strlen(tok) == kl && CRYPTO_memcmp(tok, a->api_key, kl) == 0)
        return 0;
    if ((*ret_scope = api_scope_of(a, tok, strlen(tok))))
        return 0;
    return -EKEYREJECTED;
}

bool
api_authorized(struct api *a, struct http_req *req, const struct api_scope **ret_scope)
{
    const char *h = http_req_header(req, "Authorization");
    const char *tok = NULL;
    if (h && !strncasecmp(h, "Bearer ", 7))
        tok = h + 7;
    if (api_key_check(a, tok, ret_scope) == 0)
        return true;
    http_req_add_header(req, "WWW-Authenticate", "Bearer");
    api_error_msg(req, 401, "unauthorized",
                  tok ? "the API key is not valid"
                      : "missing 'Authorization: Bearer <key>' header");
    return false;
}

int
api_access_check(const struct api_scope *s, enum api_access acc, const struct entry *e)
{
    if (!s || acc == ACCESS_OPEN || acc == ACCESS_SCOPED)
        return 0;
    if (acc == ACCESS_FULL)
        return -EPERM;
    return e && e->scope == s ? 0 : -ENOENT;
}

bool
api_access_allows(struct api *a, struct http_req *req, const struct api_scope *s,
                  enum api_access acc, const char *id)
{
    const struct entry *e = s && acc == ACCESS_OWNED && id ? table_find(a->table, id) : NULL;
    int r = api_access_check(s, acc, e);
    if (r == -EPERM)
        api_error_msg(req, 403, "forbidden",
                      "this key may only use its templates, the sandboxes it creates and their "
                      "commands");
    else if (r == -ENOENT)
        api_error_msg(req, 404, "not_found", "no sandbox '%.64s'", id ? id : "");
    return r == 0;
}

bool
api_need_cap(struct http_req *req, const struct entry *e, unsigned cap)
{
    if (e->caps & cap)
        return true;
    const char *name = template_cap_name(cap);
    json_t *o = json_object();
    (void)json_set(o, "error", json_string("capability_missing"));
    (void)json_set(o, "capability", json_string(name));
    char msg[256];
    (void)snprintf(msg, sizeof(msg),
                   "sandbox '%s' (template '%s') does not have the '%s' capability", e->id,
                   e->tmpl ? e->tmpl->name : "base", name);
    (void)json_set(o, "message", json_string(msg));
    api_json(req, 403, o);
    return false;
}
