/*
 * child.h - the only code that runs between clone3() and execve(abx-init).
 */
#pragma once

struct jail_child_args {
    int ctlfd, initfd, nullfd;
};

/* The clone() entry point: places ctlfd at 3 and /dev/null at 0..2, closes
 * every other descriptor, arms the parent-death signal and execs the init
 * image held in initfd. It runs with CLONE_VM|CLONE_VFORK on a stack of its
 * own, sharing abxd's memory until the exec: system calls only, no
 * allocation, no stdio, no writes to anything but its stack. Never returns
 * (the int is clone()'s signature). */
int jail_child_exec(void *args);
