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

#define JAIL_HELPER_FDS 4 /* descriptors a helper gets, at 3.. */

struct jail_helper_args {
    int exec_fd, null_fd;
    int fds[JAIL_HELPER_FDS]; /* -1: leave that number closed */
};

/* The clone() entry point of a helper (jail_spawn_helper()): fds[i] at
 * 3 + i, /dev/null at 0..2, every other descriptor closed, then exec of
 * the image in exec_fd. No parent-death signal: that would follow the
 * spawning thread, not abxd; a helper ends when its socket closes. Same
 * rules as jail_child_exec(). */
int jail_helper_exec(void *args);
