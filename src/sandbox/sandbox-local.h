/*
 * sandbox-local.h - the local Sandbox host: sandboxes as jails on this
 * machine (sandbox-local.c).
 *
 * Only the composition root (abxd) and sandbox/ include this: everything
 * else takes a struct sandbox_host and calls sandbox.h, which names no
 * jail type. The host borrows jh, which must outlive it.
 */
#pragma once

#include "jail/jail.h"
#include "sandbox/sandbox.h"
#include "util/loop.h"

int sandbox_host_new(struct loop *loop, struct jail_host *jh, const struct sandbox_host_config *c,
                     struct sandbox_host **ret);
