/*
 * sandbox-local.h - the local Sandbox host: sandboxes as jails on this
 * machine (sandbox-local.c).
 *
 * Only the composition root (abxd) and sandbox/ include this: everything
 * else takes a struct sandbox_host and calls sandbox.h, which names no
 * jail type. The host borrows jr (jailer.h: the jail operations here or
 * through the privileged parent), which must outlive it.
 */
#pragma once

#include "sandbox/jailer.h"
#include "sandbox/sandbox.h"
#include "util/loop.h"

int sandbox_host_new(struct loop *loop, struct jailer *jr, const struct sandbox_host_config *c,
                     struct sandbox_host **ret);
