/*
 * ports.h - the port proxy, as the router and the api's life see it.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

struct api;
struct http_req;

/* The port proxy (api/ports/ports.c). A request whose Host is <port>-<id>.<domain>
 * (an optional :port after it) goes to the server on that port inside
 * sandbox id, before any other route and without an API key. */
#define PORTS_ID_MAX 64 /* longest id a Host may name */
/* 1 and the port and id (lowercased; idsz bytes with the NUL) when host
 * has that shape under domain; 0 otherwise, and always when domain is
 * NULL or empty. */
int ports_match_host(const char *host, const char *domain, uint16_t *ret_port, char *ret_id,
                     size_t idsz);
void ports_begin(struct api *a, struct http_req *req, uint16_t port, const char *id);
