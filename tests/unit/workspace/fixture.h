/*
 * fixture.h - what the workspace unit tests share: a temp dir holding a
 * SQLite store and the memory Sandbox's workspaces, a loop, the memory
 * Sandbox host (sandbox-memory.h) and the workspaces over them.
 */
#pragma once

#include "sandbox/sandbox-memory.h"
#include "workspace/workspace.h"

extern struct loop *loop;
extern struct sandbox_host *host;
extern struct workspaces *ws;

/* cmocka setup and teardown: a fresh fixture for each test. */
int ws_fixture_setup(void **state);
int ws_fixture_teardown(void **state);
/* Turns the loop until *flag is set (at most 10 s; then the test fails). */
void run_until(const int *flag);
