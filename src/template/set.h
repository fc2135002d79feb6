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
 * may do. Build steps need a built layer, which this abxd cannot make yet:
 * a template with steps is refused, saying so.
 *
 * Loaded once at start, read-only afterwards. Not thread-safe.
 */
#pragma once

#include <stddef.h>

#include "template/template.h"
#include "util/err.h"

#define TEMPLATE_SET_MAX 256 /* templates in a directory */
#define TEMPLATE_BASE    "base"

struct template_set;

/* dir NULL: only "base". */
int template_set_load(const char *dir, struct template_set **ret, struct err *err);
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
