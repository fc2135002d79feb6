/*
 * main.c - abxd's entry point: the set-up steps of daemon.h in order, the
 * loop, the teardown. A configuration error exits 2, any other failed step
 * 1 (after it has said why), --help and --version 0.
 */
#include "abxd/daemon.h"

int
main(int argc, char **argv)
{
    struct daemon d;
    int r;

    daemon_init(&d);
    r = daemon_setup_config(&d, argc, argv);
    if (r != 0)
        return r < 0 ? 2 : 0;
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
