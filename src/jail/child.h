/*
 * child.h - the only code that runs between clone3() and execve(abx-init).
 */
#pragma once

/* Places ctlfd at 3 and /dev/null at 0..2, closes every other descriptor,
 * arms the parent-death signal and execs the init image held in initfd.
 * System calls only: no allocation, no stdio, no errno-based libc helpers
 * that might take a lock another thread held at clone time. Never returns. */
void jail_child_exec(int ctlfd, int initfd, int nullfd) __attribute__((noreturn));
