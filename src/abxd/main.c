/*
 * main.c - abxd's entry point: the set-up steps of daemon.h in order, the
 * loop, the teardown. A configuration error exits 2, any other failed step
 * 1 (after it has said why), --help and --version 0.
 *
 * With privilege separation (split.h) the same binary is two processes:
 * the privileged parent runs the steps up to the jail host and then
 * serves the network process, which it re-executes with SPLIT_ROLE_ARG
 * first and which runs the rest, confined, on the parent's sandboxes.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "abxd/daemon.h"
#include "abxd/split.h"
#include "api/api.h"
#include "util/log.h"

/* The network process's steps: no lock, no jail host of its own. */
static int
run_net(struct daemon *d)
{
    if (daemon_setup_process(d) < 0 || split_net_confine(d) < 0 || daemon_setup_state(d) < 0 ||
        daemon_setup_loop(d) < 0 || daemon_setup_tools(d) < 0 || daemon_setup_templates(d) < 0 ||
        split_net_connect(d) < 0 || daemon_setup_sandboxes(d) < 0 || daemon_setup_api(d) < 0 ||
        daemon_setup_store(d) < 0 || daemon_setup_attach(d) < 0 || api_adopt(d->api) < 0 ||
        daemon_setup_http(d) < 0 || daemon_setup_signals(d) < 0 || daemon_setup_sweeps(d) < 0)
        return 1;
    int r = daemon_run(d);
    daemon_teardown(d);
    return r < 0 ? 1 : 0;
}

int
main(int argc, char **argv)
{
    struct daemon d;
    int r;

    daemon_init(&d);
    if (argc >= 3 && !strcmp(argv[1], SPLIT_ROLE_ARG)) {
        /* argv: abxd SPLIT_ROLE_ARG CGROUP-NAME abxd's own arguments */
        d.role = ROLE_NET;
        (void)snprintf(d.cgroup_name, sizeof(d.cgroup_name), "%s", argv[2]);
        argv[2] = argv[0];
        argc -= 2;
        argv += 2;
    }
    r = daemon_setup_config(&d, argc, argv);
    if (r != 0)
        return r < 0 ? 2 : 0;
    if (d.role == ROLE_NET)
        return run_net(&d);
    /* Split by default where it can be: as root, with namespaces, its
     * network uid reaching what it must read. */
    if (d.cfg.privsep == CONFIG_AUTO) {
        char why[PATH_MAX * 2 + 128];
        d.cfg.privsep = d.cfg.isolation == JAIL_NS && geteuid() == 0;
        if (d.cfg.privsep && split_reachable(&d.cfg, why, sizeof(why)) < 0) {
            log_warn("privilege separation is off: %s; abxd parses requests as root (chmod o+x "
                     "it, or --privsep 0 to say so)",
                     why);
            d.cfg.privsep = 0;
            d.privsep_auto_off = true;
        }
    }
    if (d.cfg.privsep)
        d.role = ROLE_PARENT;
    if (d.role == ROLE_PARENT) {
        if (daemon_setup_process(&d) < 0 || daemon_setup_state(&d) < 0 ||
            daemon_setup_host_loop(&d) < 0 || daemon_setup_binds(&d) < 0 ||
            daemon_setup_jail_host(&d) < 0)
            return 1;
        return split_parent_run(&d, argc, argv);
    }
    if (daemon_setup_process(&d) < 0 || daemon_setup_state(&d) < 0 || daemon_setup_loop(&d) < 0 ||
        daemon_setup_tools(&d) < 0 || daemon_setup_templates(&d) < 0 ||
        daemon_setup_jail_host(&d) < 0 || daemon_setup_sandboxes(&d) < 0 ||
        daemon_setup_api(&d) < 0 || daemon_setup_store(&d) < 0 || daemon_setup_attach(&d) < 0 ||
        daemon_setup_http(&d) < 0 || daemon_setup_signals(&d) < 0 || daemon_setup_sweeps(&d) < 0)
        return 1;
    r = daemon_run(&d);
    daemon_teardown(&d);
    return r < 0 ? 1 : 0;
}
