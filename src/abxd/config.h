/*
 * config.h - abxd's configuration: command line over environment over defaults.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "jail/jail.h"
#include "util/err.h"

#define CONFIG_AUTO 2u /* an auto|0|1 option left to abxd (privsep) */

struct config {
    char listen_host[64];
    uint16_t listen_port;
    char state_dir[4096];
    char api_key[256]; /* "" = read or generate <state>/api-key */
    enum jail_mode isolation;
    char cgroup[8]; /* auto, v1, v2 */
    char uid_lock[4096];
    uint32_t uid_base, uid_slots;
    uint32_t pool;         /* warm sandboxes */
    uint64_t memory_bytes; /* default per sandbox */
    uint32_t cpu_millis;
    uint32_t pids;
    uint64_t timeout_s, max_timeout_s, idle_timeout_s;
    uint64_t exec_timeout_s;
    uint64_t ready_timeout_s; /* a template's ready_cmd */
    uint32_t max_sandboxes;
    uint64_t max_file_bytes;
    uint64_t root_bytes, tmp_bytes, shm_bytes;
    uint64_t disk_bytes;       /* default bound of a sandbox's writable space; 0 = none (weaker) */
    uint64_t disk_pool_bytes;  /* size of <state>/disk.img when made; 0 = DISK_IMAGE_DEFAULT */
    uint64_t disk_floor_bytes; /* free space the state file system keeps (image, store writes) */
    char store[4096];          /* "" = <state>/store (SQLite); or postgres://... */
    uint32_t store_workers;
    uint64_t mirror_window_s;
    uint64_t ws_idle_s;     /* warm workspace untouched this long is closed; 0 = never */
    char sync_ignore[4096]; /* replaces the default rules when sync_ignore_set */
    bool sync_ignore_set;
    uint64_t sync_max_file_bytes;
    char tools_dir[4096];     /* "" = no tools; else an existing directory of bundles */
    char keys_file[4096];     /* "" = only the full key; else scoped keys (JSON) */
    char templates_dir[4096]; /* "" = only "base"; else a directory of template directories */
    char domain[256];         /* ports: <port>-<id>.<domain>; "" = no port forwarding */
    uint64_t reserve_bytes;   /* ballast kept in the state directory; 0 = none */
    /* HTTP limits (ABX_HTTP_*, defaults in http/server.h); 0 turns a timeout off */
    uint32_t http_max_conns, http_max_per_client;
    uint32_t http_header_timeout_s, http_body_timeout_s;
    uint32_t http_body_min_rate; /* bytes/s */
    /* Privilege separation (docs/security.md): 1 = a privileged parent
     * and an unprivileged network process of uid privsep_uid (0 =
     * uid_base - 1); CONFIG_AUTO until main() decides (1 when root with
     * the ns isolation mode) */
    uint32_t privsep;
    uint32_t privsep_uid;
    bool show_help, show_version;
};

/* Fills c from argv and the ABX_* environment; -EINVAL with a message. */
int config_load(struct config *c, int argc, char **argv, struct err *err);
void config_usage(const char *prog);
