/*
 * template.h - sandbox templates: parse and validate sandbox-template.yaml.
 *
 * A template is a directory holding sandbox-template.yaml (format:
 * docs/templates.md). This module turns that file into a struct template
 * whose every field has been checked, or refuses it with one error
 * "<file>:<line>: <key>: <reason>". It never fills in defaults for an
 * invalid file: a template that exists but does not validate is an error
 * for the caller to report, never "no template" (falling back to the default
 * capabilities would widen what a sandbox may do). It does not build images,
 * run commands or look templates up in a directory of templates.
 *
 * The YAML is read with libyaml, restricted to a safe subset: one document,
 * no anchors, aliases or merge keys, only the standard tags, no duplicate
 * mapping keys, bounded size, depth and node count. Unknown keys are errors
 * everywhere.
 *
 * Functions return 0 on success and -errno on failure: -EINVAL for a file
 * that is not a valid template, -EFBIG for one larger than
 * TEMPLATE_FILE_MAX, -ENOMEM, or what open()/read() failed with. They never
 * log; struct err (optional) says why. ret_ parameters are written only on
 * success and belong to the caller. Thread-safe: no global state.
 */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

/* Limits on what a template file can make us parse and allocate. */
#define TEMPLATE_FILE_NAME       "sandbox-template.yaml"
#define TEMPLATE_FILE_MAX        (1024 * 1024) /* bytes of YAML */
#define TEMPLATE_DEPTH_MAX       32            /* nested sequences/mappings */
#define TEMPLATE_NODES_MAX       100000        /* scalars + sequences + mappings */
#define TEMPLATE_COLLECTION_MAX  1024          /* items in one sequence or mapping */
#define TEMPLATE_NAME_MAX        64            /* template, alias, command names */
#define TEMPLATE_ALIASES_MAX     16
#define TEMPLATE_STEPS_MAX       256
#define TEMPLATE_ENV_MAX         256 /* entries in one env mapping */
#define TEMPLATE_ENV_NAME_MAX    256
#define TEMPLATE_ENV_VALUE_MAX   32768
#define TEMPLATE_PORTS_MAX       64
#define TEMPLATE_COMMANDS_MAX    64
#define TEMPLATE_ARGS_MAX        32 /* per command */
#define TEMPLATE_ARG_NAME_MAX    64
#define TEMPLATE_CMD_MAX         65536 /* run, cmd, start_cmd, ready_cmd */
#define TEMPLATE_DESCRIPTION_MAX 4096  /* also an arg's default */
#define TEMPLATE_PATH_MAX        4095  /* copy src/dst, workdir, cwd */
#define TEMPLATE_CPU_MAX         1024.0
#define TEMPLATE_MEMORY_MB_MAX   (UINT64_C(1) << 20) /* 1 TiB */
#define TEMPLATE_PIDS_MAX        (UINT64_C(1) << 22)
#define TEMPLATE_DISK_MB_MAX     (UINT64_C(1) << 24) /* 16 TiB */
#define TEMPLATE_TIMEOUT_MAX_S   86400.0
#define TEMPLATE_BASE_HOST       "host"

#define TEMPLATE_CAP_SHELL    (1u << 0)
#define TEMPLATE_CAP_FILES    (1u << 1)
#define TEMPLATE_CAP_CODE     (1u << 2)
#define TEMPLATE_CAP_TERMINAL (1u << 3)
#define TEMPLATE_CAP_PORTS    (1u << 4)
#define TEMPLATE_CAPS_ALL     ((1u << 5) - 1)
/* What a template gets when it has no capabilities key at all. */
#define TEMPLATE_CAPS_DEFAULT (TEMPLATE_CAP_SHELL | TEMPLATE_CAP_FILES | TEMPLATE_CAP_CODE)

enum template_arg_type {
    TEMPLATE_ARG_STR,
    TEMPLATE_ARG_INT,   /* int64 */
    TEMPLATE_ARG_FLOAT, /* finite double */
    TEMPLATE_ARG_BOOL,
    _TEMPLATE_ARG_TYPE_MAX,
    _TEMPLATE_ARG_TYPE_INVALID = -EINVAL,
};

struct template_arg {
    char *name; /* ^[A-Za-z_][A-Za-z0-9_]{0,63}$, unique in its command */
    enum template_arg_type type;
    bool required;      /* never together with a default */
    char *default_text; /* NULL = none; canonical for the type: int "-12"
                         * (no leading zeros or '+'), float shortest
                         * round-trip "%.17g" form, bool "true"/"false" */
    char *description;  /* NULL = none */
    unsigned line;
};

struct template_command {
    char *name;        /* ^[a-z0-9][a-z0-9_-]{0,63}$ */
    char *cmd;         /* shell text; every {placeholder} names an arg,
                        * "{{" and "}}" stand for literal braces */
    char *description; /* NULL = none */
    char *cwd;         /* absolute; NULL = the sandbox's default */
    char **env;        /* "K=V", file order */
    size_t n_env;
    uint64_t timeout_ms; /* 0 = none given (the caller's default applies) */
    struct template_arg *args;
    size_t n_args;
    unsigned line; /* where the command's name is */
};

enum template_step_kind {
    TEMPLATE_STEP_RUN,     /* a = shell text */
    TEMPLATE_STEP_ENV,     /* a = key, b = value; one step per entry */
    TEMPLATE_STEP_WORKDIR, /* a = absolute path */
    TEMPLATE_STEP_COPY,    /* a = src (relative to the template directory,
                            * no ".."), b = dst (absolute) */
};

struct template_step {
    enum template_step_kind kind;
    char *a, *b; /* b is NULL for run and workdir */
    unsigned line;
};

struct template
{
    char *name; /* ^[a-z0-9][a-z0-9_-]{0,63}$, not "host" */
    char **aliases;
    size_t n_aliases;
    char *description; /* NULL = none */
    char *base;        /* another template's name, or "host" (the default) */
    struct template_step *steps;
    size_t n_steps;
    char **env; /* "K=V", file order */
    size_t n_env;
    double cpu;         /* cores, 0 = unset */
    uint64_t memory_mb; /* MiB, 0 = unset */
    uint64_t pids;      /* 0 = unset */
    uint64_t disk_mb;   /* MiB, 0 = unset */
    unsigned caps;      /* TEMPLATE_CAP_* bits */
    uint16_t *ports;    /* 1..65535, unique, file order; needs TEMPLATE_CAP_PORTS */
    size_t n_ports;
    char *start_cmd; /* NULL = none */
    char *ready_cmd; /* NULL = none */
    struct template_command *cmds;
    size_t n_cmds;
    /* Not from the file: set by the template set for a built template. */
    char **layers; /* host directories of its layer and its bases', top first (layer.h) */
    size_t n_layers;
    char *digest; /* SHA-256 of the directory it was built from; NULL = not built */
};

/* Parses and validates len bytes of YAML (NUL bytes anywhere are refused;
 * data may be NULL when len is 0). file names the input in error messages. */
int template_parse(const char *data, size_t len, const char *file, struct template **ret,
                   struct err *err);

/* Reads <dirfd>/sandbox-template.yaml (a regular file, not through a
 * symlink, at most TEMPLATE_FILE_MAX bytes) and parses it; errors name
 * "<display_path>/sandbox-template.yaml". -ENOENT when there is no such
 * file. dirfd is borrowed. Blocks on file I/O. */
int template_load(int dirfd, const char *display_path, struct template **ret, struct err *err);

/* Frees t and everything in it; takes NULL, returns NULL. */
struct template *template_free(struct template *t);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct template *, template_free)

/* Whether name is t's name or one of its aliases. */
bool template_matches(const struct template *t, const char *name);

/* The command called name, or NULL. */
const struct template_command *template_find_command(const struct template *t, const char *name);

/* "shell", "files", ... for one TEMPLATE_CAP_* bit; NULL for anything else. */
const char *template_cap_name(unsigned cap);
/* The TEMPLATE_CAP_* bit called s, or -EINVAL. */
int template_cap_from_name(const char *s);

/* "str", "int", "float", "bool"; NULL when out of range. */
const char *template_arg_type_name(enum template_arg_type t);
enum template_arg_type template_arg_type_from_name(const char *s);

/* Whether s is a valid template, alias or command name. */
bool template_name_ok(const char *s);
