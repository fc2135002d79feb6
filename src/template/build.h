/*
 * build.h - build a template from its directory: the pipeline behind
 * POST /v1/templates, without the HTTP.
 *
 * The caller feeds a tar of the template directory, which is extracted as
 * it arrives into <state>/templates/.build-<id>/template/ by the safe
 * extractor of util/tar.h; then the template is parsed and checked, a
 * build sandbox of its base is made whose /usr, /etc and /opt are
 * overlays with their writable layer in .build-<id>/fs/, and the steps
 * run in it one after the other; their progress and output come back as
 * events. After the last step the sandbox is killed, fs/ gets the ids
 * every sandbox can use (layer.h), the directory becomes
 * templates/<name>/layer-<ms>, the template joins the set, and
 * templates/<name>/current points at it. A failed or abandoned build
 * leaves nothing.
 *
 * Where the host bounds sandboxes' disks (sandbox_host_area_create()), the
 * writable layer is not .build-<id>/fs but fs/ in a bounded directory of the
 * sandboxes' disk
 * (build-<id>, as large as the template's disk_mb): what the steps write
 * never reaches the state file system unbounded. Once the sandbox is gone
 * and the ids are shifted there, `cp -a` (a process watched through its
 * pidfd, so the loop does not wait) copies it to .build-<id>/fs - owners,
 * modes, xattrs (overlay's opaque markers), whiteouts, hard links and holes
 * as they are - if the state file system keeps its floor with it.
 *
 * Runs on the loop's thread; not thread-safe; file work blocks the loop
 * (copy steps, the id shift). Logs its outcome (template=<name>).
 */
#ifndef ABX_TEMPLATE_BUILD_H
#define ABX_TEMPLATE_BUILD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct err;
struct loop;
struct sandbox_host;
struct template_build;
struct template_set;

/* What builds run with; borrowed, outlives every build. */
struct template_build_host {
    struct loop *loop;
    struct sandbox_host *sh;
    struct template_set *set; /* bases are found here; the result joins it */
    uint64_t default_memory_bytes;
    uint32_t default_cpu_millis;
    uint32_t default_pids;
    uint64_t default_disk_bytes; /* 0 = sandboxes' disks are not bounded here */
    uint64_t disk_floor_bytes;   /* free space the state file system keeps */
};

enum template_build_event_kind {
    TEMPLATE_BUILD_STEP,  /* step starts: step, start ("run", "env", ...), line */
    TEMPLATE_BUILD_LINE,  /* step's output: step, text/len (one line, no '\n') */
    TEMPLATE_BUILD_DONE,  /* built: name, layer */
    TEMPLATE_BUILD_ERROR, /* failed: text (a message), step (0 = before any) */
};

struct template_build_event {
    enum template_build_event_kind kind;
    size_t step;       /* 1-based */
    const char *start; /* STEP: the kind of step */
    unsigned line;     /* STEP: its line in the template file */
    const char *text;  /* LINE: len bytes, any bytes; ERROR: a message */
    size_t len;
    const char *name, *layer; /* DONE */
};

struct template_build_ops {
    /* One event; after DONE or ERROR only end() follows. */
    void (*event)(void *ud, const struct template_build_event *ev);
    /* Whether the caller takes more output now; if not, it calls
     * template_build_pump() once it does. */
    bool (*room)(void *ud);
    /* Output is waiting to be read (call template_build_pump()). */
    void (*wake)(void *ud);
    /* No more events: end the output once it is delivered. */
    void (*end)(void *ud);
    /* The build is freed (its last reference went): free ud. */
    void (*released)(void *ud);
};

/* A new build of the directory to come, named display in messages; its
 * one reference is the caller's. -errno (the state directory, an id, the
 * extractor); nothing is kept then, released() is not called. */
int template_build_new(const struct template_build_host *host, const char *display,
                       const struct template_build_ops *ops, void *ud, struct template_build **ret);
void template_build_ref(struct template_build *b);
void template_build_unref(struct template_build *b); /* NULL is ok */

/* The tar, as it arrives, and its end: -EFBIG past util/tar.h's limits,
 * -EINVAL for a bad archive, err saying why. */
int template_build_feed(struct template_build *b, const void *data, size_t len, struct err *err);
int template_build_untar_done(struct template_build *b, struct err *err);
/* The layer's digest of the extracted directory. -errno, err. */
int template_build_digest(struct template_build *b, struct err *err);
/* Parses and checks the template: -ENOENT no template file at the top,
 * -EEXIST a name taken, -EFBIG, -EINVAL, -E2BIG; err says why. */
int template_build_load(struct template_build *b, struct err *err);
/* Makes the build sandbox; the steps follow, as events. -errno, err. */
int template_build_start(struct template_build *b, struct err *err);
/* Reads what the running step wrote while the caller has room. */
void template_build_pump(struct template_build *b);
/* The caller stops listening: a build still running is abandoned (logged
 * when loud), its sandbox killed. */
void template_build_abandon(struct template_build *b, bool loud);

const char *template_build_name(const struct template_build *b); /* once loaded */
const char *template_build_id(const struct template_build *b);   /* the build sandbox's */
size_t template_build_steps(const struct template_build *b);     /* once loaded */

#endif
