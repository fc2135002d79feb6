/*
 * api.h - the HTTP surfaces of abxd: the native wire (sandboxes, exec,
 * processes, files), health, readiness, drain and metrics.
 *
 * The api owns the table of live sandboxes, their deadlines and idle
 * clocks. Requests are decoded here, once, into the sandbox module's C
 * structs; JSON never travels further down. Errors are answered as
 * {"error": code, "message": text} with a status from one errno table.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "http/server.h"
#include "sandbox/sandbox.h"
#include "util/buf.h"
#include "util/loop.h"
#include "workspace/workspace.h"

struct api;

struct api_config {
    const char *api_key;   /* required on everything but health probes */
    const char *isolation; /* name of the jail mode, for info */
    const char *cgroup;    /* "v1", "v2" or "none", for info */
    uint64_t default_memory_bytes;
    uint32_t default_cpu_millis;
    uint32_t default_pids;
    uint64_t default_disk_bytes; /* bound of a sandbox's writable space; 0 = none on this host */
    uint64_t disk_floor_bytes;   /* free space the state file system keeps (template layers) */
    uint64_t default_timeout_s;  /* sandbox life when create gives none; 0 = none */
    uint64_t max_timeout_s;
    uint64_t idle_timeout_s;   /* host backstop; 0 = off */
    uint64_t exec_timeout_ms;  /* default exec deadline; 0 = none */
    uint64_t ready_timeout_ms; /* how long a template's ready_cmd may take; 0 = 60 s */
    uint32_t max_sandboxes;
    unsigned host_cpus;
    uint64_t host_memory_bytes;
    uint64_t max_file_bytes;
    const char *gc_holder;  /* this process's name for the store's GC lease */
    uint64_t gc_lease_ms;   /* how long one collection may hold it */
    const char *e2b_domain; /* E2B create answers' "domain" (ports: <port>-<id>.<domain>); NULL =
                               none */
    const char *state_dir;  /* E2B snapshots live in <state_dir>/snapshots; NULL = none */
};

int api_new(struct loop *loop, struct sandbox_host *sh, const struct api_config *c,
            struct api **ret);
void api_free(struct api *a);
/* Serves /v1/workspaces and /v1/store from ws (owned by the caller, which
 * frees it after api_free). Without it those routes answer 404. */
void api_set_workspaces(struct api *a, struct workspaces *ws);

/* Offers the bundles of tools (owned by the caller, freed after api_free)
 * at /v1/tools; sandboxes see them under mount (TOOLS_MOUNT in ns mode).
 * Without it the tool routes answer as if the directory were empty. */
struct tools_registry;
void api_set_tools(struct api *a, const struct tools_registry *tools, const char *mount);

/* The templates sandboxes may be created from (owned by the caller, freed
 * after api_free; POST /v1/templates adds to it). Without it only "base"
 * exists. */
struct template_set;
void api_set_templates(struct api *a, struct template_set *templates);

/* Loads scoped keys from a JSON file (see core/auth.c); call after
 * api_set_templates(). Returns how many, or -errno with err. */
int api_load_keys(struct api *a, const char *path, struct err *err);

/* The http server's begin() callback; ud is the api. */
void api_begin(struct http_req *req, void *ud);

/* Readiness: missing is "" when the configured isolation works. */
void api_set_missing(struct api *a, const char *missing);
/* Takes over the sandboxes an earlier network process left (privilege
 * separation: core/adopt.c), after templates and keys are set; kills those
 * it cannot. Returns how many it took over, or -errno. */
int api_adopt(struct api *a);
/* Stops accepting new sandboxes (create answers 503). */
void api_drain(struct api *a);
bool api_draining(const struct api *a);
/* Kills sandboxes idle past the backstop; returns how many. */
int api_sweep_idle(struct api *a);
/* Kills every sandbox; done() fires when all are gone. */
void api_kill_all(struct api *a, void (*done)(void *ud), void *ud);
uint32_t api_sandbox_count(const struct api *a);
