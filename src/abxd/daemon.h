/*
 * daemon.h - abxd's composition root, internal to abxd: the set-up steps
 * main() runs, in order, and the teardown.
 */
#pragma once

/* Runs abxd: set-up, the loop, teardown; returns the process exit code. */
int daemon_main(int argc, char **argv);
