/*
 * auth.h - who may do what: the bearer key, scoped keys and what they may
 * reach, and the capability gate of a sandbox's template.
 *
 * abxd has one full key (--api-key) and may load scoped keys from a file
 * (api_load_keys(), format in auth.c). The router authenticates a request
 * once (api_authorized()) and asks api_access_allows() with the access
 * class of the route it matched, so that what a scoped key may reach is
 * written once, beside each route. Handlers then narrow by template and
 * command (api_scope_template(), api_scope_command()) and by capability
 * (api_need_cap()). Functions that answer write the native error body.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct api;
struct entry;
struct http_req;
struct template;

/* A key limited to some templates and commands. */
struct api_scope {
    char *key;
    char **templates; /* canonical names */
    size_t n_templates;
    char **commands; /* "template:command" or "template:*" */
    size_t n_commands;
    bool all_commands; /* no "commands" list: every command of its templates */
};

/* Who may use a route. */
enum api_access {
    ACCESS_OPEN,   /* no credential at all (health probes) */
    ACCESS_FULL,   /* the full key only */
    ACCESS_SCOPED, /* scoped keys too; the handler narrows by template and command */
    ACCESS_OWNED,  /* scoped keys too, on the sandboxes they created (the route's {id}) */
};

void api_keys_free(struct api *a);
/* The scoped key tok (len bytes) names, or NULL. */
const struct api_scope *api_scope_of(const struct api *a, const char *tok, size_t len);
/* Whether scope (NULL = the full key) may use template t / run its command cmd. */
bool api_scope_template(const struct api_scope *s, const struct template *t);
bool api_scope_command(const struct api_scope *s, const struct template *t, const char *cmd);

/* Whether tok (NULL = none given) is the full key (0, *ret_scope NULL) or a
 * scoped one (0, *ret_scope); -ENOKEY none given, -EKEYREJECTED unknown.
 * Compares in constant time. Each surface takes tok from its own header. */
int api_key_check(const struct api *a, const char *tok, const struct api_scope **ret_scope);
/* Authenticates req's "Authorization: Bearer" key: true with *ret_scope
 * (NULL = the full key), or answers 401 and returns false. */
bool api_authorized(struct api *a, struct http_req *req, const struct api_scope **ret_scope);
/* Whether scope s (NULL = the full key) may use a route of class acc: 0,
 * -EPERM (not with this key) or -ENOENT (an ACCESS_OWNED route on e, the
 * entry its {id} names or NULL, which s did not create). */
int api_access_check(const struct api_scope *s, enum api_access acc, const struct entry *e);
/* The same, answering: for
 * ACCESS_OWNED, id names the sandbox. Answers 403 (or 404 for a sandbox s
 * did not create) and returns false when it may not. */
bool api_access_allows(struct api *a, struct http_req *req, const struct api_scope *s,
                       enum api_access acc, const char *id);
/* Answers 403 capability_missing and returns false unless e's template
 * grants cap (a TEMPLATE_CAP_* bit). */
bool api_need_cap(struct http_req *req, const struct entry *e, unsigned cap);
