/*
 * config.c - parse abxd's flags and ABX_* variables, strictly.
 */
#include "abxd/config.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/server.h"
#include "jail/disk.h"
#include "util/parse.h"

#define DEFAULT_LISTEN        "127.0.0.1:8700"
#define DEFAULT_DISK_MB       2048 /* a sandbox's writable space (home) */
#define DEFAULT_DISK_FLOOR_MB 512  /* what the state file system keeps free */
#define DISK_MB_MAX           (1ull << 30)

#define DEFAULT_RESERVE_MB 64
#define MAX_RESERVE_MB     (1u << 20) /* 1 TiB */

void
config_usage(const char *prog)
{
    printf("Usage: %s [--listen ADDR:PORT] [--state-dir DIR] [--isolation ns|uid|none]\n"
           "       [--tools-dir DIR] [--templates-dir DIR] [--domain NAME]\n"
           "\n"
           "abxd runs isolated sandboxes for AI agents and serves them over HTTP.\n"
           "\n"
           "  --listen ADDR:PORT   address to serve on (ABX_LISTEN, default %s)\n"
           "  --state-dir DIR      where sandboxes, the API key and /etc live\n"
           "                       (ABX_STATE_DIR, default /var/lib/abx)\n"
           "  --isolation MODE     ns (default), uid or none (ABX_ISOLATION)\n"
           "  --tools-dir DIR      tool bundles offered to sandboxes at /.tools\n"
           "                       (ABX_TOOLS_DIR; unset = no tools; see docs/tools.md)\n"
           "  --templates-dir DIR  sandbox templates besides 'base' (ABX_TEMPLATES_DIR;\n"
           "                       see docs/templates.md)\n"
           "  --domain NAME        forward <port>-<sandbox>.NAME to that port in the sandbox\n"
           "                       (ABX_DOMAIN; unset = no port forwarding)\n"
           "  --reserve-mb N       room kept in <state>/reserve and given up when the state\n"
           "                       file system is full, so deletes and GC still work\n"
           "                       (ABX_RESERVE_MB, default %u; 0 = none)\n"
           "  --disk-mb N          bound of a sandbox's writable space unless it asks\n"
           "                       (ABX_DISK_MB, default %d; 0 = unbounded, weaker)\n"
           "  --disk-pool-mb N     size of the sandboxes' disk image <state>/disk.img when\n"
           "                       it is made (ABX_DISK_POOL_MB, default %llu or what fits)\n"
           "  --disk-floor-mb N    free space the state file system keeps: uploads past it\n"
           "                       get 507 (ABX_DISK_FLOOR_MB, default %d)\n"
           "  --help, --version\n"
           "\n"
           "Environment: ABX_API_KEY, ABX_CGROUP (auto|v1|v2), ABX_POOL, ABX_MEMORY_MB,\n"
           "ABX_CPU, ABX_PIDS, ABX_TIMEOUT_S, ABX_MAX_TIMEOUT_S, ABX_IDLE_TIMEOUT_S,\n"
           "ABX_EXEC_TIMEOUT_S, ABX_READY_TIMEOUT_S, ABX_MAX_SANDBOXES, ABX_MAX_FILE_MB, ABX_TMP_MB,\n"
           "ABX_ROOTFS_MB, ABX_SHM_MB, ABX_UID_BASE, ABX_UID_SLOTS, ABX_UID_LOCK,\n"
           "ABX_LOG_LEVEL (debug|info|warn|error), ABX_KEYS_FILE (scoped keys, docs/templates.md).\n"
           "Workspaces: ABX_STORE (a directory or postgres:// URL, default <state>/store),\n"
           "ABX_STORE_WORKERS, ABX_MIRROR_WINDOW_S, ABX_WS_IDLE_S, ABX_SYNC_IGNORE,\n"
           "ABX_SYNC_MAX_FILE_MB. See docs/api.md and docs/store.md.\n"
           "HTTP limits (docs/api.md, Limits; 0 turns a timeout or the rate off):\n"
           "  ABX_HTTP_HEADER_TIMEOUT_S  a request head must arrive within this (default %u)\n"
           "  ABX_HTTP_BODY_TIMEOUT_S    a request body may pause this long (default %u)\n"
           "  ABX_HTTP_BODY_MIN_RATE     bytes/s a body averages per such window (default %u)\n"
           "  ABX_HTTP_MAX_CONNS         connections at once (default %u)\n"
           "  ABX_HTTP_MAX_CONNS_PER_IP  ... from one IPv4 address or IPv6 /64 (default %u)\n",
           prog, DEFAULT_LISTEN, DEFAULT_RESERVE_MB, DEFAULT_DISK_MB,
           (unsigned long long)(DISK_IMAGE_DEFAULT >> 20), DEFAULT_DISK_FLOOR_MB,
           HTTP_HEADER_TIMEOUT_S, HTTP_BODY_TIMEOUT_S, HTTP_BODY_MIN_RATE, HTTP_MAX_CONNECTIONS,
           HTTP_MAX_PER_CLIENT);
}

static int
env_u64(const char *name, uint64_t min, uint64_t max, uint64_t *v, struct err *err)
{
    const char *s = getenv(name);
    uint64_t x;
    if (!s || !*s)
        return 0;
    if (parse_u64(s, &x) < 0 || x < min || x > max)
        return err_set(err, EINVAL, "%s must be an integer from %llu to %llu, not '%.64s'", name,
                       (unsigned long long)min, (unsigned long long)max, s);
    *v = x;
    return 0;
}

static int
env_u32(const char *name, uint32_t min, uint32_t max, uint32_t *v, struct err *err)
{
    uint64_t x = *v;
    int r = env_u64(name, min, max, &x, err);
    if (r == 0)
        *v = (uint32_t)x;
    return r;
}

static int
set_listen(struct config *c, const char *s, struct err *err)
{
    if (parse_listen(s, c->listen_host, sizeof(c->listen_host), &c->listen_port) < 0)
        return err_set(err, EINVAL, "listen address must be ADDR:PORT, not '%.64s'", s);
    return 0;
}

/* A DNS name, lowercased: labels of [a-z0-9-] separated by single dots. */
static int
set_domain(struct config *c, const char *s, const char *what, struct err *err)
{
    size_t n = strlen(s), label = 0;
    if (n >= sizeof(c->domain))
        return err_set(err, EINVAL, "%s is too long", what);
    for (size_t i = 0; i <= n; i++) {
        char ch = s[i];
        if (ch == '.' || ch == '\0') {
            if (label == 0 || s[i - 1] == '-')
                return err_set(err, EINVAL,
                               "%s must be a DNS name like 'sandbox.example.com', not '%.64s'",
                               what, s);
            label = 0;
        } else if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                   (ch >= '0' && ch <= '9') || (ch == '-' && label > 0)) {
            label++;
        } else {
            return err_set(err, EINVAL,
                           "%s must be a DNS name like 'sandbox.example.com', not '%.64s'", what,
                           s);
        }
        c->domain[i] = (ch >= 'A' && ch <= 'Z') ? (char)(ch - 'A' + 'a') : ch;
    }
    return 0;
}

static int
set_string(char *dst, size_t n, const char *s, const char *what, struct err *err)
{
    if (strscpy(dst, s, n) < 0)
        return err_set(err, EINVAL, "%s is too long", what);
    return 0;
}

/* A size in MiB from a flag, min..DISK_MB_MAX, into bytes. */
static int
set_mb(uint64_t *dst, const char *s, uint64_t min, const char *what, struct err *err)
{
    uint64_t mb;
    if (parse_u64(s, &mb) < 0 || mb < min || mb > DISK_MB_MAX)
        return err_set(err, EINVAL, "%s must be an integer from %llu to %llu, not '%.64s'", what,
                       (unsigned long long)min, (unsigned long long)DISK_MB_MAX, s);
    *dst = mb << 20;
    return 0;
}

int
config_load(struct config *c, int argc, char **argv, struct err *err)
{
    static const struct option opts[] = {
            {"listen", required_argument, NULL, 'l'},
            {"state-dir", required_argument, NULL, 's'},
            {"isolation", required_argument, NULL, 'i'},
            {"tools-dir", required_argument, NULL, 't'},
            {"templates-dir", required_argument, NULL, 'T'},
            {"domain", required_argument, NULL, 'D'},
            {"reserve-mb", required_argument, NULL, 'R'},
            {"disk-mb", required_argument, NULL, 'd'},
            {"disk-pool-mb", required_argument, NULL, 'P'},
            {"disk-floor-mb", required_argument, NULL, 'F'},
            {"help", no_argument, NULL, 'h'},
            {"version", no_argument, NULL, 'V'},
            {NULL, 0, NULL, 0},
    };
    const char *s;
    int r;
    uint64_t mb;

    memset(c, 0, sizeof(*c));
    c->isolation = JAIL_NS;
    strcpy(c->cgroup, "auto");
    strcpy(c->state_dir, "/var/lib/abx");
    strcpy(c->uid_lock, "/run/abx/uid-pool.lock");
    c->uid_base = 0x40000000u;
    c->uid_slots = 4096;
    c->pool = 2;
    c->memory_bytes = 512ull << 20;
    c->cpu_millis = 1000;
    c->pids = 512;
    c->timeout_s = 0;
    c->max_timeout_s = 30 * 86400;
    c->idle_timeout_s = 1800;
    c->exec_timeout_s = 300;
    c->ready_timeout_s = 60;
    c->max_sandboxes = 2048;
    c->max_file_bytes = 8ull << 30;
    c->root_bytes = 64ull << 20;
    c->tmp_bytes = 256ull << 20;
    c->shm_bytes = 64ull << 20;
    c->store_workers = 4;
    c->mirror_window_s = 30;
    c->ws_idle_s = 1800;
    c->sync_max_file_bytes = 10ull << 20;
    c->reserve_bytes = (uint64_t)DEFAULT_RESERVE_MB << 20;
    c->http_max_conns = HTTP_MAX_CONNECTIONS;
    c->http_max_per_client = HTTP_MAX_PER_CLIENT;
    c->http_header_timeout_s = HTTP_HEADER_TIMEOUT_S;
    c->http_body_timeout_s = HTTP_BODY_TIMEOUT_S;
    c->http_body_min_rate = HTTP_BODY_MIN_RATE;
    c->disk_bytes = (uint64_t)DEFAULT_DISK_MB << 20;
    c->disk_floor_bytes = (uint64_t)DEFAULT_DISK_FLOOR_MB << 20;

    if ((r = set_listen(c, (s = getenv("ABX_LISTEN")) && *s ? s : DEFAULT_LISTEN, err)) < 0)
        return r;
    if ((s = getenv("ABX_STATE_DIR")) && *s &&
        (r = set_string(c->state_dir, sizeof(c->state_dir), s, "ABX_STATE_DIR", err)) < 0)
        return r;
    if ((s = getenv("ABX_API_KEY")) && *s &&
        (r = set_string(c->api_key, sizeof(c->api_key), s, "ABX_API_KEY", err)) < 0)
        return r;
    if ((s = getenv("ABX_ISOLATION")) && *s) {
        c->isolation = jail_mode_from_name(s);
        if ((int)c->isolation < 0)
            return err_set(err, EINVAL, "ABX_ISOLATION must be ns, uid or none, not '%.32s'", s);
    }
    if ((s = getenv("ABX_CGROUP")) && *s) {
        if (strcmp(s, "auto") && strcmp(s, "v1") && strcmp(s, "v2"))
            return err_set(err, EINVAL, "ABX_CGROUP must be auto, v1 or v2, not '%.32s'", s);
        strcpy(c->cgroup, s);
    }
    if ((s = getenv("ABX_UID_LOCK")) && *s &&
        (r = set_string(c->uid_lock, sizeof(c->uid_lock), s, "ABX_UID_LOCK", err)) < 0)
        return r;
    if ((r = env_u32("ABX_UID_BASE", 65536, 0xF0000000u, &c->uid_base, err)) < 0 ||
        (r = env_u32("ABX_UID_SLOTS", 1, 60000, &c->uid_slots, err)) < 0 ||
        (r = env_u32("ABX_POOL", 0, 256, &c->pool, err)) < 0 ||
        (r = env_u32("ABX_PIDS", 8, 1u << 22, &c->pids, err)) < 0 ||
        (r = env_u64("ABX_TIMEOUT_S", 0, 365 * 86400ull, &c->timeout_s, err)) < 0 ||
        (r = env_u64("ABX_MAX_TIMEOUT_S", 1, 365 * 86400ull, &c->max_timeout_s, err)) < 0 ||
        (r = env_u64("ABX_IDLE_TIMEOUT_S", 0, 365 * 86400ull, &c->idle_timeout_s, err)) < 0 ||
        (r = env_u64("ABX_EXEC_TIMEOUT_S", 0, 7 * 86400ull, &c->exec_timeout_s, err)) < 0 ||
        (r = env_u64("ABX_READY_TIMEOUT_S", 1, 86400, &c->ready_timeout_s, err)) < 0 ||
        (r = env_u32("ABX_MAX_SANDBOXES", 1, 60000, &c->max_sandboxes, err)) < 0)
        return r;
    mb = c->memory_bytes >> 20;
    if ((r = env_u64("ABX_MEMORY_MB", 16, 1ull << 30, &mb, err)) < 0)
        return r;
    c->memory_bytes = mb << 20;
    mb = c->max_file_bytes >> 20;
    if ((r = env_u64("ABX_MAX_FILE_MB", 1, 1ull << 30, &mb, err)) < 0)
        return r;
    c->max_file_bytes = mb << 20;
    mb = c->tmp_bytes >> 20;
    if ((r = env_u64("ABX_TMP_MB", 1, 1ull << 30, &mb, err)) < 0)
        return r;
    c->tmp_bytes = mb << 20;
    mb = c->root_bytes >> 20;
    if ((r = env_u64("ABX_ROOTFS_MB", 1, 1ull << 30, &mb, err)) < 0)
        return r;
    c->root_bytes = mb << 20;
    mb = c->shm_bytes >> 20;
    if ((r = env_u64("ABX_SHM_MB", 1, 1ull << 30, &mb, err)) < 0)
        return r;
    c->shm_bytes = mb << 20;
    mb = c->disk_bytes >> 20;
    if ((r = env_u64("ABX_DISK_MB", 0, DISK_MB_MAX, &mb, err)) < 0)
        return r;
    c->disk_bytes = mb << 20;
    mb = c->disk_pool_bytes >> 20;
    if ((r = env_u64("ABX_DISK_POOL_MB", DISK_IMAGE_MIN >> 20, DISK_MB_MAX, &mb, err)) < 0)
        return r;
    c->disk_pool_bytes = mb << 20;
    mb = c->disk_floor_bytes >> 20;
    if ((r = env_u64("ABX_DISK_FLOOR_MB", 0, DISK_MB_MAX, &mb, err)) < 0)
        return r;
    c->disk_floor_bytes = mb << 20;
    if ((s = getenv("ABX_STORE")) && *s &&
        (r = set_string(c->store, sizeof(c->store), s, "ABX_STORE", err)) < 0)
        return r;
    if ((s = getenv("ABX_TOOLS_DIR")) && *s &&
        (r = set_string(c->tools_dir, sizeof(c->tools_dir), s, "ABX_TOOLS_DIR", err)) < 0)
        return r;
    if ((s = getenv("ABX_KEYS_FILE")) && *s &&
        (r = set_string(c->keys_file, sizeof(c->keys_file), s, "ABX_KEYS_FILE", err)) < 0)
        return r;
    if ((s = getenv("ABX_TEMPLATES_DIR")) && *s &&
        (r = set_string(c->templates_dir, sizeof(c->templates_dir), s, "ABX_TEMPLATES_DIR", err)) <
                0)
        return r;
    if ((s = getenv("ABX_DOMAIN")) && *s && (r = set_domain(c, s, "ABX_DOMAIN", err)) < 0)
        return r;
    if ((s = getenv("ABX_SYNC_IGNORE"))) {
        if ((r = set_string(c->sync_ignore, sizeof(c->sync_ignore), s, "ABX_SYNC_IGNORE", err)) < 0)
            return r;
        c->sync_ignore_set = true;
    }
    if ((r = env_u32("ABX_STORE_WORKERS", 1, 64, &c->store_workers, err)) < 0 ||
        (r = env_u64("ABX_MIRROR_WINDOW_S", 1, 86400, &c->mirror_window_s, err)) < 0 ||
        (r = env_u64("ABX_WS_IDLE_S", 0, 365 * 86400ull, &c->ws_idle_s, err)) < 0)
        return r;
    if ((r = env_u32("ABX_HTTP_HEADER_TIMEOUT_S", 0, 3600, &c->http_header_timeout_s, err)) < 0 ||
        (r = env_u32("ABX_HTTP_BODY_TIMEOUT_S", 0, 3600, &c->http_body_timeout_s, err)) < 0 ||
        (r = env_u32("ABX_HTTP_BODY_MIN_RATE", 0, 1u << 30, &c->http_body_min_rate, err)) < 0 ||
        (r = env_u32("ABX_HTTP_MAX_CONNS", 16, 1u << 20, &c->http_max_conns, err)) < 0 ||
        (r = env_u32("ABX_HTTP_MAX_CONNS_PER_IP", 1, 1u << 20, &c->http_max_per_client, err)) < 0)
        return r;
    /* One client must not be able to take every connection. */
    if (c->http_max_per_client >= c->http_max_conns)
        return err_set(err, EINVAL,
                       "ABX_HTTP_MAX_CONNS_PER_IP (%u) must be below ABX_HTTP_MAX_CONNS (%u)",
                       c->http_max_per_client, c->http_max_conns);
    mb = c->sync_max_file_bytes >> 20;
    if ((r = env_u64("ABX_SYNC_MAX_FILE_MB", 0, 1ull << 30, &mb, err)) < 0)
        return r;
    c->sync_max_file_bytes = mb << 20;
    mb = c->reserve_bytes >> 20;
    if ((r = env_u64("ABX_RESERVE_MB", 0, MAX_RESERVE_MB, &mb, err)) < 0)
        return r;
    c->reserve_bytes = mb << 20;
    if ((s = getenv("ABX_CPU")) && *s) {
        char *end = NULL;
        errno = 0;
        double d = strtod(s, &end);
        if (errno || !end || *end || d < 0.01 || d > 1024)
            return err_set(err, EINVAL, "ABX_CPU must be a number of cores, not '%.32s'", s);
        c->cpu_millis = (uint32_t)(d * 1000.0 + 0.5);
    }

    optind = 1;
    int o;
    while ((o = getopt_long(argc, argv, "hV", opts, NULL)) != -1) {
        switch (o) {
        case 'l':
            if ((r = set_listen(c, optarg, err)) < 0)
                return r;
            break;
        case 's':
            if ((r = set_string(c->state_dir, sizeof(c->state_dir), optarg, "--state-dir", err)) <
                0)
                return r;
            break;
        case 'i':
            c->isolation = jail_mode_from_name(optarg);
            if ((int)c->isolation < 0)
                return err_set(err, EINVAL, "--isolation must be ns, uid or none");
            break;
        case 't':
            if ((r = set_string(c->tools_dir, sizeof(c->tools_dir), optarg, "--tools-dir", err)) <
                0)
                return r;
            break;
        case 'T':
            if ((r = set_string(c->templates_dir, sizeof(c->templates_dir), optarg,
                                "--templates-dir", err)) < 0)
                return r;
            break;
        case 'D':
            if (*optarg && (r = set_domain(c, optarg, "--domain", err)) < 0)
                return r;
            if (!*optarg)
                c->domain[0] = '\0';
            break;
        case 'R':
            if (parse_u64(optarg, &mb) < 0 || mb > MAX_RESERVE_MB)
                return err_set(err, EINVAL, "--reserve-mb must be an integer from 0 to %u",
                               MAX_RESERVE_MB);
            c->reserve_bytes = mb << 20;
            break;
        case 'd':
            if ((r = set_mb(&c->disk_bytes, optarg, 0, "--disk-mb", err)) < 0)
                return r;
            break;
        case 'P':
            if ((r = set_mb(&c->disk_pool_bytes, optarg, DISK_IMAGE_MIN >> 20, "--disk-pool-mb",
                            err)) < 0)
                return r;
            break;
        case 'F':
            if ((r = set_mb(&c->disk_floor_bytes, optarg, 0, "--disk-floor-mb", err)) < 0)
                return r;
            break;
        case 'h':
            c->show_help = true;
            break;
        case 'V':
            c->show_version = true;
            break;
        default:
            return err_set(err, EINVAL, "unknown option (see --help)");
        }
    }
    if (optind < argc)
        return err_set(err, EINVAL, "unexpected argument '%.64s' (see --help)", argv[optind]);
    return 0;
}
