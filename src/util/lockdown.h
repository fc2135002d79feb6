/*
 * lockdown.h - the settings a process that handles hostile input applies to
 * itself once it has the identity it keeps: no core dumps, not dumpable, no
 * new privileges, and a bounding set cut to what it may ever hold.
 *
 * abx-init, abx-fileops and abxd's network process (priv/confine.h) share
 * these. System calls only, no allocation, no stdio: safe in static helpers
 * and between clone() and execve(). Functions return 0 or -errno and set
 * *ret_step (when not NULL) to the name of the step that failed. They change
 * the calling thread; call them before any other thread exists.
 */
#pragma once

#include <stdint.h>

/* RLIMIT_CORE 0, PR_SET_DUMPABLE 0 (other processes of our uid can neither
 * ptrace us nor read /proc/<pid>/mem), PR_SET_NO_NEW_PRIVS 1. Call it after
 * the last credential change: changing uid resets the dumpable flag. */
int lockdown_self(const char **ret_step);

/* Drops every capability whose bit is not set in keep from the bounding set
 * (needs CAP_SETPCAP) and clears the ambient set. */
int lockdown_bound_caps(uint64_t keep, const char **ret_step);
