/*
 * main.c - abxd's entry point; the daemon itself is in daemon.c.
 */
#include "abxd/daemon.h"

int
main(int argc, char **argv)
{
    return daemon_main(argc, argv);
}
