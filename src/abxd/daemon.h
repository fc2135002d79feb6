/*
 * daemon.h - abxd's composition root, internal to abxd: the set-up steps
 * main() runs, in this order, the loop, and the teardown.
 *
 * Each step returns 0 or a negative errno after it has logged why; main()
 * then exits 1 (2 for a configuration error) without tearing down, as a
 * failed start always has: the process exit releases the state lock, and
 * an atexit handler unmounts the sandboxes' disk once the jail host exists.
 */
#pragma once

#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "abxd/config.h"
#include "jail/jail.h"
#include "sandbox/jailer.h"
#include "store/store.h"
#include "sync/sync.h"
#include "util/buf.h"

/* Which process this is (split.h): all in one, or one of two. */
enum daemon_role { ROLE_ONE, ROLE_PARENT, ROLE_NET };

/* Where the tools' python shims live below the state directory: one
 * process writes them into SHIMS_DIR; split, the network process writes
 * them into SHIMS_SPLIT_DIR, which the parent binds (split.c). */
#define SHIMS_DIR       "toolbin"
#define SHIMS_SPLIT_DIR SHIMS_DIR "/shims"

struct daemon {
    enum daemon_role role;
    bool privsep_auto_off; /* --privsep auto found it cannot split, and said why */
    struct config cfg;
    struct loop *loop;
    struct jail_host *jh;
    struct jailer *jr;        /* the jail operations, here on jh or through the parent */
    struct priv_client *priv; /* ROLE_NET: the privileged parent */
    char cgroup_name[16];     /* the sandboxes' cgroup hierarchy (jail_host_cgroup_name()) */
    struct sandbox_host *sh;
    struct api *api;
    struct workspaces *ws;
    struct sync_ignore ignore;
    struct tools_registry *tools;
    struct template_set *templates;
    char tools_real[PATH_MAX];
    char holder[STORE_HOLDER_MAX + 1];
    struct http_server *http;
    struct loop_io *sig_io;
    int sig_fd;
    struct loop_timer *sweep;
    struct loop_timer *shutdown_timer;
    bool stopping;
    int statefd;
    uint32_t nofile;           /* RLIMIT_NOFILE, raised */
    sigset_t sigmask;          /* SIGTERM, SIGINT: blocked, read from sig_fd */
    struct buf missing;        /* what isolation lacks; empty when ready */
    struct jail_bind binds[2]; /* the tools into every sandbox */
    size_t nbinds;
    const char *path_prefix; /* the tool shims' directory, first on PATH */
    unsigned http_connections;
};

/* Starts the log and zeroes d; cannot fail. */
void daemon_init(struct daemon *d);
/* Flags and environment; 1 when --help or --version was answered. */
int daemon_setup_config(struct daemon *d, int argc, char **argv);
/* Descriptor limit, SIGPIPE ignored, SIGTERM/SIGINT blocked. */
int daemon_setup_process(struct daemon *d);
/* State directory locked, disk reserve, API key. */
int daemon_setup_state(struct daemon *d);
/* The descriptor that holds the state directory's lock (-1 before
 * daemon_setup_state()): the lock is free only once every process that
 * holds a copy of it has ended. */
int daemon_state_lock_fd(void);
/* The event loop and its sweep and shutdown timers. */
int daemon_setup_loop(struct daemon *d);
/* The event loop alone (the privileged parent's). */
int daemon_setup_host_loop(struct daemon *d);
/* Tool bundles and the binds that show them to sandboxes. */
int daemon_setup_tools(struct daemon *d);
/* The binds alone, without reading a bundle (the privileged parent's:
 * both the bundles and the shims' directory, toolbin/shims). */
int daemon_setup_binds(struct daemon *d);
/* Templates: 'base' and those of --templates-dir. */
int daemon_setup_templates(struct daemon *d);
/* The jail host; reclaims what an earlier run left. */
int daemon_setup_jail_host(struct daemon *d);
/* The sandbox host: a self-test that decides readiness, then the pool. */
int daemon_setup_sandboxes(struct daemon *d);
/* The GC lease holder's name and the api. */
int daemon_setup_api(struct daemon *d);
/* The workspace store and lifecycle, given to the api. */
int daemon_setup_store(struct daemon *d);
/* Gives the api its templates, scoped keys and tools. */
int daemon_setup_attach(struct daemon *d);
/* The HTTP server, listening. */
int daemon_setup_http(struct daemon *d);
/* SIGTERM/SIGINT read from a signalfd: they drain. */
int daemon_setup_signals(struct daemon *d);
/* The idle sweep armed; the descriptor budget set. */
int daemon_setup_sweeps(struct daemon *d);
/* Keeps, gives up or re-creates the reserve in the state directory. */
void daemon_check_reserve(struct daemon *d, bool at_start);
/* jail_host_free(), and the exit handler forgets it. */
void daemon_free_jail_host(struct daemon *d);
/* Says it listens and runs the loop until the drain ends; < 0 on error. */
int daemon_run(struct daemon *d);
/* Frees everything, in the reverse order of set-up. */
void daemon_teardown(struct daemon *d);
