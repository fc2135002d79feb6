/*
 * registry.h - the tool bundles abxd offers: strict discovery, selection,
 * lookup, and the interpreter shims of a carrier bundle.
 *
 * A tools directory holds one bundle per package (see docs/tools.md):
 * launch, commands.json, schemas/<cmd>.json and build-stamp.json. Loading is
 * strict: a bundle missing any of them, a command without its schema, a
 * schema we could not enforce, or two carrier bundles stop the load with a
 * message naming the bundle and what is wrong; there is no silent skip,
 * because an agent quietly left with fewer tools is only noticed when a
 * model answers badly. Names starting with '.' are the builder's staging
 * directories and are ignored.
 *
 * Schemas are JSON documents and stay jansson values here; the registry
 * never runs a tool (the api piece does, in a sandbox). Loaded once at start
 * and read-only afterwards. Not thread-safe.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "util/cleanup.h"
#include "util/err.h"

#define TOOLS_NAME_MAX     64            /* bytes of a package or command name */
#define TOOLS_MAX_PACKAGES 256           /* bundles in a tools directory */
#define TOOLS_MAX_COMMANDS 256           /* commands in one bundle */
#define TOOLS_JSON_MAX     (1024 * 1024) /* bytes of commands.json or a stamp */
#define TOOLS_SCHEMA_MAX   (256 * 1024)  /* bytes of one schema */
#define TOOLS_MOUNT        "/.tools"     /* where sandboxes see the bundles (ns mode) */
#define TOOLS_SHIM_MOUNT   "/.toolbin"   /* where they see a carrier's shims (ns mode) */

struct tools_command {
    char name[TOOLS_NAME_MAX + 1];
    char *description;
    json_t *schema; /* checked with tool_schema_check() */
};

struct tools_package {
    char name[TOOLS_NAME_MAX + 1];
    bool carrier; /* no commands; gives sandboxes python and pip */
    char *description;
    char *built_at; /* from the stamp, "" when it has none */
    struct tools_command *cmds;
    size_t ncmds;
};

struct tools_registry;

/* Loads every bundle under dir. -ENOENT when dir does not exist (the caller
 * configured it, so that is an error too), -EINVAL naming the bad bundle. */
int tools_registry_load(const char *dir, struct tools_registry **ret, struct err *err);
struct tools_registry *tools_registry_free(struct tools_registry *r);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct tools_registry *, tools_registry_free)

const char *tools_registry_dir(const struct tools_registry *r);
size_t tools_registry_count(const struct tools_registry *r);
const struct tools_package *tools_registry_at(const struct tools_registry *r, size_t i);
/* The carrier bundle, or NULL. */
const struct tools_package *tools_registry_carrier(const struct tools_registry *r);
/* Commands over all bundles. */
size_t tools_registry_commands(const struct tools_registry *r);

struct tools_pick {
    const struct tools_package *pkg;
    const struct tools_command *cmd;
};

/* Expands a selection: allowed NULL = every command, "" = none, otherwise
 * comma-separated "pkg" or "pkg:cmd" items (blanks around items ignored).
 * Unknown names are skipped (a typo in a deployment's list must not make
 * every model call fail); a command picked twice appears once. Two selected
 * packages exporting one name -> -EEXIST naming both. *ret is malloc'ed
 * (NULL when *ret_n is 0), in registry order. */
int tools_select(const struct tools_registry *r, const char *allowed, struct tools_pick **ret,
                 size_t *ret_n, struct err *err);

/* Finds "pkg:cmd" or a bare "cmd". -ENOENT unknown, -EEXIST when a bare
 * name is exported by two packages (the message names both). */
int tools_lookup(const struct tools_registry *r, const char *name, struct tools_pick *ret,
                 struct err *err);

/* (Re)creates dir holding, when there is a carrier, the symlinks python,
 * python3, python3.N, pip, pip3 and pip3.N -> <mount>/<carrier>/launch
 * (N from the host's /usr/bin/python3). Without a carrier dir stays empty:
 * a pip shim pointing at nothing would be worse than none. Returns 1 when
 * shims were written, 0 when not. */
int tools_write_shims(const struct tools_registry *r, const char *dir, const char *mount,
                      struct err *err);

/* Whether s is a valid package or command name: [a-z0-9][a-z0-9_-]{0,63}. */
bool tools_name_ok(const char *s);
