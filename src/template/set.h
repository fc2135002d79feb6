/*
 * set.h - the templates one abxd offers: the built-in "base" and those in a
 * templates directory, looked up by name or alias.
 *
 * Loading is strict, as for tool bundles: every subdirectory (names starting
 * with '.' aside) must hold a valid sandbox-template.yaml, names and aliases
 * must be unique across the set, and a template's base must be "host" or
 * another template of the set (no cycles). A template that does not load
 * stops the load with its file, line and reason; it is never skipped or
 * replaced by defaults, since a fallback would widen what its sandboxes
 * may do. A template with build steps needs a built layer of exactly its
 * content in the state directory (layer.h), else it is refused, saying so.
 * Templates built through the API are stored there too and load with the
 * set, unless the templates directory has one of the same name.
 *
 * Loaded at start; template_set_put() adds or replaces one built template
 * later. A replaced template is kept until the set is freed (sandboxes
 * borrow it). Not thread-safe.
 */
#pragma once

#include <stddef.h>

#include "template/template.h"
#include "util/err.h"

#define TEMPLATE_SET_MAX    256 /* templates in a directory */
#define TEMPLATE_BASE       "base"
#define TEMPLATE_LAYERS_DIR "templates" /* below the state directory */
#define TEMPLATE_LAYERS_MAX 16          /* layers stacked under one sandbox */

struct template_set;

/* dir NULL: only "base" and the stored templates. state_dir NULL: no built
 * layers at all (templates with steps are refused). Removes interrupted
 * builds and the layers no template stacks any more. */
int template_set_load(const char *dir, const char *state_dir, struct template_set **ret,
                      struct err *err);
/* Adds built template t (taken over on success) or replaces the one of its
 * name; its names must be unique and its base present. -EINVAL with err. */
int template_set_put(struct template_set *s, struct template *t, struct err *err);
/* The layers a sandbox of t stacks (those of the nearest built template in
 * its chain, top first), at most max, into out; returns the count. */
size_t template_layers(const struct template_set *s, const struct template *t, const char **out,
                       size_t max);
struct template_set *template_set_free(struct template_set *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct template_set *, template_set_free)

/* The template called name (or an alias of it), NULL when none. */
const struct template *template_set_find(const struct template_set *s, const char *name);
size_t template_set_count(const struct template_set *s);
const struct template *template_set_at(const struct template_set *s, size_t i);

/* What a sandbox of t gets, its base chain applied: env (base first, later
 * keys win; written into out[] up to max, returns the count or -E2BIG),
 * and resources (the nearest template that sets each). */
int template_effective_env(const struct template_set *s, const struct template *t, const char **out,
                           size_t max);
void template_effective_resources(const struct template_set *s, const struct template *t,
                                  double *cpu, uint64_t *memory_mb, uint64_t *pids);
