/*
 * listen.h - a listening TCP socket on a numeric address: the HTTP
 * server's (http/server.h), made either there or by abxd's privileged
 * parent, which hands it to the network process (so that a restarted one
 * serves the same port, and a port below 1024 needs no capability there).
 */
#pragma once

#include <stdint.h>

#include "util/err.h"

/* host: numeric IPv4 or IPv6; port 0 = any free one. Returns the socket
 * (O_CLOEXEC, O_NONBLOCK, SO_REUSEADDR, backlog 1024) and its port in
 * *ret_port, or -errno. */
int listen_tcp(const char *host, uint16_t port, uint16_t *ret_port, struct err *err);
/* The port a listening socket is bound to, 0 if none. */
uint16_t listen_port(int fd);
