/*
 * build.h - the tool bundle builder: a package source directory in, an
 * opaque bundle directory out (`abx tools build`).
 *
 * A package is a directory with an `abx-tool.json` manifest (format in
 * docs/tools.md, "Building bundles"). The builder validates the manifest,
 * runs the package's build command into a staging directory beside the
 * bundle, copies the listed files, writes `launch` from a compiled-in
 * template, runs the three-stage contract on the host to collect
 * `commands.json` and `schemas/<cmd>.json`, writes `build-stamp.json` and
 * swaps the staging directory in atomically. A bundle is rebuilt only when
 * the package's content hash or the builder's fingerprint (templates, format
 * version, SDK files) differs from its stamp. A failed build leaves the
 * previous bundle as it was and no staging directory behind.
 *
 * This module does not discover or mount bundles (abxd does) and does not log:
 * functions return 0 (or a count) or -errno and fill struct err; a package's
 * build output comes back in the report for the caller to show. The builder
 * runs commands from the package on this host as the calling user: build only
 * packages you trust.
 */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tools/registry.h"
#include "util/buf.h"
#include "util/err.h"

#define TOOLS_BUILD_FORMAT              1 /* bundle and stamp format version */
#define TOOLS_BUILD_MANIFEST            "abx-tool.json"
#define TOOLS_BUILD_MANIFEST_MAX        (64 * 1024)  /* bytes of abx-tool.json */
#define TOOLS_BUILD_LIST_MAX            1024         /* entries of "files" or "python.modules" */
#define TOOLS_BUILD_FILES_MAX           100000       /* regular files hashed in one package */
#define TOOLS_BUILD_COMMANDS_MAX        256          /* commands one package may export */
#define TOOLS_BUILD_OUTPUT_MAX          (4u << 20)   /* bytes a contract stage may print */
#define TOOLS_BUILD_CONTRACT_TIMEOUT_MS 30000        /* per contract stage */
#define TOOLS_BUILD_COMMAND_TIMEOUT_MS  (600 * 1000) /* the package's build command */
#define TOOLS_BUILD_LOG_TAIL_MAX        (16 * 1024)  /* bytes of build output kept for the report */
#define TOOLS_BUILD_HASH_HEX            65           /* SHA-256 in hex plus NUL */

enum tools_build_kind {
    TOOLS_BUILD_KIND_CLI,
    TOOLS_BUILD_KIND_CARRIER,
    _TOOLS_BUILD_KIND_MAX,
    _TOOLS_BUILD_KIND_INVALID = -EINVAL,
};

enum tools_build_run {
    TOOLS_BUILD_RUN_NONE,   /* carrier */
    TOOLS_BUILD_RUN_EXEC,   /* a native program in the bundle */
    TOOLS_BUILD_RUN_PYTHON, /* a script run by /usr/bin/python3 with <bundle>/lib on PYTHONPATH */
};

/* A parsed abx-tool.json. Paths are relative, normalized ("a/b"), without
 * "." or ".." components. */
struct tools_build_manifest {
    char *name;
    enum tools_build_kind kind;
    char *description;
    char *build; /* sh -c command, NULL = none */
    char **files;
    size_t n_files;
    enum tools_build_run run;
    char *run_path; /* relative to the bundle; NULL for a carrier */
    char **modules; /* carrier: Python modules that must import */
    size_t n_modules;
};

/* Parses and validates a manifest of len bytes. Unknown keys, a bad name or
 * kind, a missing or extra "run", absolute paths or ".." fail with -EINVAL
 * and a message naming the field. */
int tools_build_manifest_parse(const char *data, size_t len, struct tools_build_manifest **ret,
                               struct err *err);
struct tools_build_manifest *tools_build_manifest_free(struct tools_build_manifest *m);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct tools_build_manifest *, tools_build_manifest_free)

/* True for ^[a-z0-9][a-z0-9_-]{0,63}$ (package and command names). */
bool tools_build_name_valid(const char *s);

/* SHA-256 (hex) of the package below dirfd: every regular file, in byte
 * order of its relative path, as path, exec bit, size and content. Hidden
 * entries (".git", ".venv", ".env") and __pycache__ are skipped; a symlink or
 * special file anywhere else fails with -ELOOP / -EINVAL naming it. */
int tools_build_source_hash(int dirfd, char ret_hex[TOOLS_BUILD_HASH_HEX], struct err *err);

/* The launcher templates. "@RUN@" is replaced with the manifest's run path,
 * "@NAME@" with the package name. */
struct tools_build_templates {
    const char *exec;
    const char *python;
    const char *carrier;
};
extern const struct tools_build_templates tools_build_templates_default;

/* Where the author SDK lives: the files packages build against and the
 * fingerprint covers. */
struct tools_build_sdk {
    const char *include_dir; /* holds abx/tool.h */
    const char *lib;         /* libabxtool.a */
    const char *python_dir;  /* holds abx_tool.py */
};

/* The SDK of this build tree (paths compiled in by meson), each overridden
 * by ABX_TOOLS_SDK_INCLUDE, ABX_TOOLS_SDK_LIB, ABX_TOOLS_SDK_PYTHON when set. */
void tools_build_sdk_default(struct tools_build_sdk *ret);

/* SHA-256 (hex) of the templates, TOOLS_BUILD_FORMAT and the SDK files' contents.
 * A missing SDK file fails with -ENOENT naming it. */
int tools_build_fingerprint(const struct tools_build_templates *t,
                            const struct tools_build_sdk *sdk, char ret_hex[TOOLS_BUILD_HASH_HEX],
                            struct err *err);

struct tools_build_opts {
    const char *out_dir; /* created if missing */
    struct tools_build_sdk sdk;
    bool force;                              /* rebuild even when the stamp matches */
    const struct tools_build_templates *tpl; /* NULL = tools_build_templates_default */
};

enum tools_build_outcome {
    TOOLS_BUILD_BUILT,
    TOOLS_BUILD_UP_TO_DATE,
};

/* What one package's build did; tools_build_report_done() frees it. */
struct tools_build_report {
    char name[TOOLS_NAME_MAX + 1]; /* "" until the manifest named it */
    enum tools_build_outcome outcome;
    size_t n_commands;
    uint64_t duration_ms;
    bool source_changed; /* the build wrote into the package directory */
    struct buf log;      /* the last TOOLS_BUILD_LOG_TAIL_MAX bytes of build output */
};
void tools_build_report_init(struct tools_build_report *rep);
void tools_build_report_done(struct tools_build_report *rep);

struct tools_builder;

/* Opens (creating) the output directory, takes an exclusive lock on it for
 * the builder's life (-EBUSY when another build holds it), computes the
 * fingerprint and removes staging directories (".<name>.tmp-*") a crashed
 * build left. */
int tools_builder_new(const struct tools_build_opts *opts, struct tools_builder **ret,
                      struct err *err);
struct tools_builder *tools_builder_free(struct tools_builder *b);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct tools_builder *, tools_builder_free)

/* The fingerprint in use (hex). */
const char *tools_builder_fingerprint(const struct tools_builder *b);

/* Builds the package in src_dir into <out>/<name>, or leaves it when up to
 * date. On failure nothing in the output directory changed; rep->name and
 * rep->log say which package and what its build printed. A second package
 * with a name already built by this builder fails with -EEXIST. */
int tools_builder_build(struct tools_builder *b, const char *src_dir,
                        struct tools_build_report *rep, struct err *err);

/* True when dir holds a manifest (is a package rather than a dir of them). */
bool tools_build_is_package(const char *dir);
