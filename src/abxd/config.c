/*
 * config.c - parse abxd's flags and ABX_* variables, strictly.
 *
 * One table, options[], names every setting once: its flag, its
 * environment variable, its type, the field of struct config it fills,
 * its bounds, its default and its help. config_load() applies the
 * defaults, then the environment, then the flags, all from the table, and
 * config_usage() prints it. A new setting is one more row.
 */
#include "abxd/config.h"

#include <errno.h>
#include <getopt.h>
#include <stddef.h>
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

enum opt_type {
    OPT_STRING, /* char[size]; too long is an error */
    OPT_LISTEN, /* ADDR:PORT into listen_host and listen_port */
    OPT_MODE,   /* ns|uid|none into an enum jail_mode */
    OPT_CGROUP, /* auto|v1|v2 into char[size] */
    OPT_AUTO01, /* auto|0|1 into a uint32_t: CONFIG_AUTO, 0 or 1 */
    OPT_DOMAIN, /* a DNS name, lowercased, into char[size]; an empty flag clears it */
    OPT_U32,    /* an integer in min..max */
    OPT_U64,    /* an integer in min..max */
    OPT_MB,     /* MiB in min..max, stored as bytes (uint64_t) */
    OPT_CORES,  /* a number of cores, 0.01..1024, stored as millicores (uint32_t) */
    OPT_HELP,   /* a flag without value: sets a bool */
    OPT_DOC,    /* read elsewhere (log.c): listed in the usage only */
};

struct config_option {
    const char *name; /* --name; NULL = environment only */
    const char *env;  /* ABX_*; NULL = a flag only */
    enum opt_type type;
    size_t offset, size;   /* the field of struct config */
    uint64_t min, max;     /* OPT_U32, OPT_U64, OPT_MB */
    uint64_t def;          /* default of a number, in the option's unit (MiB, millicores) */
    const char *def_str;   /* default of a string, in the option's syntax; NULL = "" */
    bool terse;            /* a bad flag's message does not repeat its value (as it never did) */
    const char *usage_def; /* the default the usage shows, when def (0) means "computed" */
    const char *arg;       /* the value in the usage: "DIR", "N" */
    const char *help;      /* one sentence; the usage adds the variable and the default */
};

#define F(field) offsetof(struct config, field), sizeof(((struct config *)0)->field)
#define DAYS(n)  ((n)*86400ull)
#define MB_MAX   (1ull << 30)

_Static_assert(DISK_IMAGE_DEFAULT >> 20 == 8192, "the usage of --disk-pool-mb shows 8192");

/* In the order the environment is read, which decides which of several
 * bad variables is reported. */
static const struct config_option options[] = {
        {"listen", "ABX_LISTEN", OPT_LISTEN, F(listen_host), .def_str = DEFAULT_LISTEN,
         .arg = "ADDR:PORT", .help = "address to serve on"},
        {"state-dir", "ABX_STATE_DIR", OPT_STRING, F(state_dir), .def_str = "/var/lib/abx",
         .arg = "DIR", .help = "where sandboxes, the API key and /etc live"},
        {NULL, "ABX_API_KEY", OPT_STRING, F(api_key), .arg = "KEY",
         .help = "the full API key; unset = read or generate <state>/api-key"},
        {"isolation", "ABX_ISOLATION", OPT_MODE, F(isolation), .def_str = "ns", .terse = true,
         .arg = "MODE", .help = "ns, uid or none"},
        {NULL, "ABX_CGROUP", OPT_CGROUP, F(cgroup), .def_str = "auto", .arg = "auto|v1|v2",
         .help = "which cgroup hierarchy limits sandboxes"},
        {NULL, "ABX_UID_LOCK", OPT_STRING, F(uid_lock), .def_str = "/run/abx/uid-pool.lock",
         .arg = "FILE", .help = "lock file of the uid pool"},
        {NULL, "ABX_UID_BASE", OPT_U32, F(uid_base), 65536, 0xF0000000u, 0x40000000u, .arg = "N",
         .help = "first host uid of the sandboxes' uid ranges"},
        {NULL, "ABX_UID_SLOTS", OPT_U32, F(uid_slots), 1, 60000, 4096, .arg = "N",
         .help = "uid ranges in the pool (sandboxes at once)"},
        {"privsep", "ABX_PRIVSEP", OPT_AUTO01, F(privsep), .def_str = "auto", .arg = "auto|0|1",
         .help = "1: parse requests in an unprivileged process apart from the privileged "
                 "parent (docs/security.md); auto: so when abxd is root and isolation is ns"},
        {NULL, "ABX_PRIVSEP_UID", OPT_U32, F(privsep_uid), 0, 0xFFFFFFFEu, 0,
         .usage_def = "ABX_UID_BASE - 1", .arg = "N",
         .help = "the uid and gid of the unprivileged process with ABX_PRIVSEP=1"},
        {NULL, "ABX_POOL", OPT_U32, F(pool), 0, 256, 2, .arg = "N",
         .help = "warm sandboxes kept ready"},
        {NULL, "ABX_PIDS", OPT_U32, F(pids), 8, 1u << 22, 512, .arg = "N",
         .help = "processes per sandbox"},
        {NULL, "ABX_TIMEOUT_S", OPT_U64, F(timeout_s), 0, DAYS(365), 0, .arg = "S",
         .help = "a sandbox is killed this long after creation unless it asks; 0 = never"},
        {NULL, "ABX_MAX_TIMEOUT_S", OPT_U64, F(max_timeout_s), 1, DAYS(365), DAYS(30), .arg = "S",
         .help = "the longest lifetime a sandbox may ask for"},
        {NULL, "ABX_IDLE_TIMEOUT_S", OPT_U64, F(idle_timeout_s), 0, DAYS(365), 1800, .arg = "S",
         .help = "a sandbox unused this long is killed; 0 = never"},
        {NULL, "ABX_EXEC_TIMEOUT_S", OPT_U64, F(exec_timeout_s), 0, DAYS(7), 300, .arg = "S",
         .help = "a command's timeout unless it asks; 0 = none"},
        {NULL, "ABX_READY_TIMEOUT_S", OPT_U64, F(ready_timeout_s), 1, 86400, 60, .arg = "S",
         .help = "how long a template's ready_cmd may take"},
        {NULL, "ABX_MAX_SANDBOXES", OPT_U32, F(max_sandboxes), 1, 60000, 2048, .arg = "N",
         .help = "sandboxes at once"},
        {NULL, "ABX_MEMORY_MB", OPT_MB, F(memory_bytes), 16, MB_MAX, 512, .arg = "N",
         .help = "memory of a sandbox unless it asks"},
        {NULL, "ABX_MAX_FILE_MB", OPT_MB, F(max_file_bytes), 1, MB_MAX, 8192, .arg = "N",
         .help = "the most bytes one file written to a sandbox may have"},
        {NULL, "ABX_TMP_MB", OPT_MB, F(tmp_bytes), 1, MB_MAX, 256, .arg = "N",
         .help = "size of a sandbox's /tmp"},
        {NULL, "ABX_ROOTFS_MB", OPT_MB, F(root_bytes), 1, MB_MAX, 64, .arg = "N",
         .help = "size of a sandbox's writable root"},
        {NULL, "ABX_SHM_MB", OPT_MB, F(shm_bytes), 1, MB_MAX, 64, .arg = "N",
         .help = "size of a sandbox's /dev/shm"},
        {"disk-mb", "ABX_DISK_MB", OPT_MB, F(disk_bytes), 0, DISK_MB_MAX, DEFAULT_DISK_MB,
         .arg = "N",
         .help = "bound of a sandbox's writable space unless it asks; 0 = unbounded, weaker"},
        {"disk-pool-mb", "ABX_DISK_POOL_MB", OPT_MB, F(disk_pool_bytes), DISK_IMAGE_MIN >> 20,
         DISK_MB_MAX, 0, .usage_def = "8192 or what fits", .arg = "N",
         .help = "size of the sandboxes' disk image <state>/disk.img when it is made"},
        {"disk-floor-mb", "ABX_DISK_FLOOR_MB", OPT_MB, F(disk_floor_bytes), 0, DISK_MB_MAX,
         DEFAULT_DISK_FLOOR_MB, .arg = "N",
         .help = "free space the state file system keeps: uploads past it get 507"},
        {NULL, "ABX_STORE", OPT_STRING, F(store), .arg = "DIR|URL",
         .help = "the workspace store: a directory or a postgres:// URL; unset = <state>/store "
                 "(docs/store.md)"},
        {"tools-dir", "ABX_TOOLS_DIR", OPT_STRING, F(tools_dir), .arg = "DIR",
         .help = "tool bundles offered to sandboxes at /.tools; unset = no tools (docs/tools.md)"},
        {NULL, "ABX_KEYS_FILE", OPT_STRING, F(keys_file), .arg = "FILE",
         .help = "scoped API keys (docs/templates.md); unset = only the full key"},
        {"templates-dir", "ABX_TEMPLATES_DIR", OPT_STRING, F(templates_dir), .arg = "DIR",
         .help = "sandbox templates besides 'base' (docs/templates.md)"},
        {"domain", "ABX_DOMAIN", OPT_DOMAIN, F(domain), .arg = "NAME",
         .help = "forward <port>-<sandbox>.NAME to that port in the sandbox; unset = no port "
                 "forwarding"},
        {NULL, "ABX_SYNC_IGNORE", OPT_STRING, F(sync_ignore), .arg = "RULES",
         .help = "comma-separated rules of what workspace sync skips, replacing the default ones (also when empty)"},
        {NULL, "ABX_STORE_WORKERS", OPT_U32, F(store_workers), 1, 64, 4, .arg = "N",
         .help = "store worker threads"},
        {NULL, "ABX_MIRROR_WINDOW_S", OPT_U64, F(mirror_window_s), 1, 86400, 30, .arg = "S",
         .help = "a warm workspace used since its last mirror is mirrored to the store this often"},
        {NULL, "ABX_WS_IDLE_S", OPT_U64, F(ws_idle_s), 0, DAYS(365), 1800, .arg = "S",
         .help = "a warm workspace untouched this long is closed; 0 = never"},
        {NULL, "ABX_HTTP_HEADER_TIMEOUT_S", OPT_U32, F(http_header_timeout_s), 0, 3600,
         HTTP_HEADER_TIMEOUT_S, .arg = "S",
         .help = "a request head must arrive within this; 0 = no timeout"},
        {NULL, "ABX_HTTP_BODY_TIMEOUT_S", OPT_U32, F(http_body_timeout_s), 0, 3600,
         HTTP_BODY_TIMEOUT_S, .arg = "S",
         .help = "a request body may pause this long; 0 = no timeout"},
        {NULL, "ABX_HTTP_BODY_MIN_RATE", OPT_U32, F(http_body_min_rate), 0, 1u << 30,
         HTTP_BODY_MIN_RATE, .arg = "N",
         .help = "bytes/s a body averages per such window; 0 = no rate"},
        {NULL, "ABX_HTTP_MAX_CONNS", OPT_U32, F(http_max_conns), 16, 1u << 20, HTTP_MAX_CONNECTIONS,
         .arg = "N", .help = "HTTP connections at once"},
        {NULL, "ABX_HTTP_MAX_CONNS_PER_IP", OPT_U32, F(http_max_per_client), 1, 1u << 20,
         HTTP_MAX_PER_CLIENT, .arg = "N",
         .help = "... from one IPv4 address or IPv6 /64; below ABX_HTTP_MAX_CONNS"},
        {NULL, "ABX_SYNC_MAX_FILE_MB", OPT_MB, F(sync_max_file_bytes), 0, MB_MAX, 10, .arg = "N",
         .help = "workspace sync skips files larger than this"},
        {"reserve-mb", "ABX_RESERVE_MB", OPT_MB, F(reserve_bytes), 0, MAX_RESERVE_MB,
         DEFAULT_RESERVE_MB, .terse = true, .arg = "N",
         .help = "room kept in <state>/reserve and given up when the state file system is full, "
                 "so deletes and GC still work; 0 = none"},
        {NULL, "ABX_CPU", OPT_CORES, F(cpu_millis), .def = 1000, .arg = "CORES",
         .help = "CPU of a sandbox unless it asks"},
        {NULL, "ABX_LOG_LEVEL", OPT_DOC, 0, 0, .arg = "LEVEL",
         .help = "debug, info, warn or error"},
        {"help", NULL, OPT_HELP, F(show_help), .help = "show this and exit"},
        {"version", NULL, OPT_HELP, F(show_version), .help = "show the version and exit"},
};

/* Prints text wrapped at 79 columns, continuing lines at column indent. */
static void
print_wrapped(const char *text, size_t col, size_t indent)
{
    const char *p = text;
    while (*p) {
        const char *word = p;
        while (*p && *p != ' ')
            p++;
        size_t n = (size_t)(p - word);
        if (col > indent && col + 1 + n > 79) {
            printf("\n%*s", (int)indent, "");
            col = indent;
        } else if (col > indent) {
            putchar(' ');
            col++;
        }
        printf("%.*s", (int)n, word);
        col += n;
        while (*p == ' ')
            p++;
    }
    putchar('\n');
}

static void
print_option(const struct config_option *o)
{
    char left[64], more[160], text[512];

    if (o->name)
        (void)snprintf(left, sizeof(left), "  --%s%s%s", o->name, o->arg ? " " : "",
                       o->arg ? o->arg : "");
    else
        (void)snprintf(left, sizeof(left), "  %s %s", o->env, o->arg);
    more[0] = '\0';
    if (o->type == OPT_HELP || o->type == OPT_DOC)
        ;
    else if (o->usage_def)
        (void)snprintf(more, sizeof(more), " (%s, default %s)", o->env, o->usage_def);
    else if (o->def_str && o->name)
        (void)snprintf(more, sizeof(more), " (%s, default %s)", o->env, o->def_str);
    else if (o->def_str)
        (void)snprintf(more, sizeof(more), " (default %s)", o->def_str);
    else if (o->type == OPT_CORES)
        (void)snprintf(more, sizeof(more), " (default %g)", (double)o->def / 1000);
    else if (o->def && o->name)
        (void)snprintf(more, sizeof(more), " (%s, default %llu)", o->env,
                       (unsigned long long)o->def);
    else if (o->def)
        (void)snprintf(more, sizeof(more), " (default %llu)", (unsigned long long)o->def);
    else if (o->name && o->env)
        (void)snprintf(more, sizeof(more), " (%s)", o->env);
    (void)snprintf(text, sizeof(text), "%s%s", o->help, more);
    size_t col = strlen(left);
    printf("%s", left);
    if (col >= 27) {
        printf("\n%27s", "");
        col = 27;
    } else {
        printf("%*s", (int)(27 - col), "");
        col = 27;
    }
    print_wrapped(text, col, 27);
}

void
config_usage(const char *prog)
{
    printf("Usage: %s [--listen ADDR:PORT] [--state-dir DIR] [--isolation ns|uid|none]\n"
           "       [--tools-dir DIR] [--templates-dir DIR] [--domain NAME] [OPTION]...\n"
           "\n"
           "abxd runs isolated sandboxes for AI agents and serves them over HTTP.\n"
           "A flag wins over its environment variable; an empty variable counts as unset.\n"
           "\n",
           prog);
    for (size_t i = 0; i < ELEMENTSOF(options); i++)
        if (options[i].name)
            print_option(&options[i]);
    printf("\nEnvironment only (docs/api.md; sizes in MiB, times in seconds):\n");
    for (size_t i = 0; i < ELEMENTSOF(options); i++)
        if (!options[i].name)
            print_option(&options[i]);
}

static int
set_string(char *dst, size_t n, const char *s, const char *what, struct err *err)
{
    if (strscpy(dst, s, n) < 0)
        return err_set(err, EINVAL, "%s is too long", what);
    return 0;
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

/* Sets option o of c from the text s, which came from what (the flag, the
 * variable, or NULL for the default). */
static int
set_option(struct config *c, const struct config_option *o, const char *s, const char *what,
           struct err *err)
{
    void *field = (char *)c + o->offset;
    bool flag = what && what[0] == '-';
    uint64_t v;

    switch (o->type) {
    case OPT_STRING:
        return set_string(field, o->size, s, what, err);
    case OPT_LISTEN:
        return set_listen(c, s, err);
    case OPT_MODE: {
        enum jail_mode m = jail_mode_from_name(s);
        if ((int)m < 0)
            return flag && o->terse ? err_set(err, EINVAL, "%s must be ns, uid or none", what)
                                    : err_set(err, EINVAL,
                                              "%s must be ns, uid or none, not '%.32s'", what, s);
        *(enum jail_mode *)field = m;
        return 0;
    }
    case OPT_CGROUP:
        if (strcmp(s, "auto") && strcmp(s, "v1") && strcmp(s, "v2"))
            return err_set(err, EINVAL, "%s must be auto, v1 or v2, not '%.32s'", what, s);
        return set_string(field, o->size, s, what, err);
    case OPT_AUTO01:
        if (strcmp(s, "auto") && strcmp(s, "0") && strcmp(s, "1"))
            return err_set(err, EINVAL, "%s must be auto, 0 or 1, not '%.32s'", what, s);
        *(uint32_t *)field = !strcmp(s, "auto") ? CONFIG_AUTO : (uint32_t)(s[0] - '0');
        return 0;
    case OPT_DOMAIN:
        if (!*s) { /* only a flag gets here empty: --domain '' */
            c->domain[0] = '\0';
            return 0;
        }
        return set_domain(c, s, what, err);
    case OPT_U32:
    case OPT_U64:
    case OPT_MB:
        if (parse_u64(s, &v) < 0 || v < o->min || v > o->max)
            return flag && o->terse
                           ? err_set(err, EINVAL, "%s must be an integer from %llu to %llu", what,
                                     (unsigned long long)o->min, (unsigned long long)o->max)
                           : err_set(err, EINVAL,
                                     "%s must be an integer from %llu to %llu, not '%.64s'", what,
                                     (unsigned long long)o->min, (unsigned long long)o->max, s);
        if (o->type == OPT_U32)
            *(uint32_t *)field = (uint32_t)v;
        else
            *(uint64_t *)field = o->type == OPT_MB ? v << 20 : v;
        return 0;
    case OPT_CORES: {
        char *end = NULL;
        errno = 0;
        double d = strtod(s, &end);
        if (errno || !end || *end || d < 0.01 || d > 1024)
            return err_set(err, EINVAL, "%s must be a number of cores, not '%.32s'", what, s);
        *(uint32_t *)field = (uint32_t)(d * 1000.0 + 0.5);
        return 0;
    }
    case OPT_HELP:
        *(bool *)field = true;
        return 0;
    case OPT_DOC:
        return 0;
    }
    return 0;
}

/* The defaults, straight into the fields (none of them is checked). */
static void
set_defaults(struct config *c)
{
    memset(c, 0, sizeof(*c));
    for (size_t i = 0; i < ELEMENTSOF(options); i++) {
        const struct config_option *o = &options[i];
        void *field = (char *)c + o->offset;
        switch (o->type) {
        case OPT_STRING:
        case OPT_CGROUP:
            if (o->def_str)
                (void)strscpy(field, o->def_str, o->size);
            break;
        case OPT_LISTEN:
            (void)set_listen(c, o->def_str, NULL);
            break;
        case OPT_MODE:
            *(enum jail_mode *)field = jail_mode_from_name(o->def_str);
            break;
        case OPT_AUTO01:
            *(uint32_t *)field = CONFIG_AUTO;
            break;
        case OPT_U32:
        case OPT_CORES:
            *(uint32_t *)field = (uint32_t)o->def;
            break;
        case OPT_U64:
            *(uint64_t *)field = o->def;
            break;
        case OPT_MB:
            *(uint64_t *)field = o->def << 20;
            break;
        default:
            break;
        }
    }
}

/* getopt_long() returns OPT_VAL + the option's index: clear of '?', 'h', 'V'. */
#define OPT_VAL 256

static const struct config_option *
find_flag(const char *name)
{
    for (size_t i = 0; i < ELEMENTSOF(options); i++)
        if (options[i].name && !strcmp(options[i].name, name))
            return &options[i];
    return NULL;
}

int
config_load(struct config *c, int argc, char **argv, struct err *err)
{
    struct option longopts[ELEMENTSOF(options) + 1];
    size_t n = 0;
    const char *s;
    int r;

    set_defaults(c);
    for (size_t i = 0; i < ELEMENTSOF(options); i++) {
        const struct config_option *o = &options[i];
        bool rules = o->offset == offsetof(struct config, sync_ignore);
        s = o->env && o->type != OPT_DOC ? getenv(o->env) : NULL;
        /* An empty variable counts as unset, but for the sync rules, where
         * empty means "ignore nothing". */
        if (s && (*s || rules)) {
            if ((r = set_option(c, o, s, o->env, err)) < 0)
                return r;
            c->sync_ignore_set |= rules;
        }
        /* One client must not be able to take every connection. */
        if (o->offset == offsetof(struct config, http_max_per_client) &&
            c->http_max_per_client >= c->http_max_conns)
            return err_set(err, EINVAL,
                           "ABX_HTTP_MAX_CONNS_PER_IP (%u) must be below ABX_HTTP_MAX_CONNS (%u)",
                           c->http_max_per_client, c->http_max_conns);
    }
    for (size_t i = 0; i < ELEMENTSOF(options); i++)
        if (options[i].name)
            longopts[n++] = (struct option){
                    options[i].name, options[i].type == OPT_HELP ? no_argument : required_argument,
                    NULL, OPT_VAL + (int)i};
    longopts[n] = (struct option){0};

    optind = 1;
    int o;
    while ((o = getopt_long(argc, argv, "hV", longopts, NULL)) != -1) {
        char what[40];
        const struct config_option *opt = NULL;
        if (o == 'h' || o == 'V')
            opt = find_flag(o == 'h' ? "help" : "version");
        else if (o >= OPT_VAL && (size_t)(o - OPT_VAL) < ELEMENTSOF(options))
            opt = &options[o - OPT_VAL];
        if (!opt)
            return err_set(err, EINVAL, "unknown option (see --help)");
        (void)snprintf(what, sizeof(what), "--%s", opt->name);
        if ((r = set_option(c, opt, optarg ? optarg : "", what, err)) < 0)
            return r;
    }
    if (optind < argc)
        return err_set(err, EINVAL, "unexpected argument '%.64s' (see --help)", argv[optind]);
    return 0;
}
