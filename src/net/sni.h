/*
 * sni.h - the host name a sandbox's outbound TCP connection names, from its
 * first bytes: TLS SNI from a ClientHello (port 443), or the Host of a
 * plain HTTP/1.x request head (port 80), for the egress proxy to hold
 * against the policy and the resolver record (policy_check_conn()). Hand
 * written, strict and bounded; pure functions on the bytes received so
 * far, no allocation. Not a TLS or HTTP implementation: nothing here
 * decides what the proxy forwards, only what the connection claims.
 *
 * Both take everything received so far (call again with more) and return:
 *   0          the name, normalised (lowercase LDH, net_name_normalize(),
 *              no final dot) into ret
 *   -EAGAIN    a consistent beginning: call again with more bytes; never
 *              once len reaches the bound (SNI_HELLO_MAX, SNI_HEAD_MAX)
 *   -ENOENT    a complete message that names no host (a ClientHello
 *              without server_name; HTTP/1.0 without Host)
 *   -EINVAL    a name that is no host name: an IP literal, non-LDH bytes,
 *              a final dot in SNI, several names in server_name
 *   -EBADMSG   not the protocol, or malformed (with the reason in err)
 *   -EMSGSIZE  longer than the bound without being complete
 * Given a longer input with the same beginning, a result other than
 * -EAGAIN never changes (the fuzz target checks it at every cut).
 *
 * TLS: records of type handshake (22), version 3.x, 1..16384 bytes, carry
 * a ClientHello (handshake type 1) that may span several records (large
 * post-quantum key shares do); legacy_version 3.1..3.3, session id of at
 * most 32 bytes, cipher suites (even, non-empty), compression methods
 * (1..255), extensions exactly filling the message, one server_name
 * extension at most, holding exactly one host_name. SSLv2 hellos and
 * anything else are -EBADMSG. With ECH the name is the outer, public
 * one: what the connection really reaches, which is what we judge.
 *
 * HTTP: a request line "METHOD SP target SP HTTP/1.0|1.1" CRLF, then at
 * most SNI_HEADERS_MAX fields "name: value" CRLF and an empty line; CRLF
 * only (a bare CR or LF is -EBADMSG), no obs-fold, no control bytes;
 * exactly one Host, its port (if any) dropped; HTTP/1.1 without Host,
 * CONNECT and authority-form targets, and an absolute-form target
 * (http://host/...) naming another host than Host are -EBADMSG.
 */
#pragma once

#include <stddef.h>

#include "net/net.h"
#include "util/err.h"

#define SNI_HELLO_MAX   16384 /* bytes of TLS records we read for one ClientHello */
#define SNI_RECORD_MAX  16384 /* bytes of one TLS record's payload (2^14) */
#define SNI_HEAD_MAX    8192  /* bytes of an HTTP request head, with its empty line */
#define SNI_HEADERS_MAX 100   /* header fields in that head */

/* The SNI host name of the ClientHello at the start of data. */
int sni_tls_name(const void *data, size_t len, char ret[static NET_NAME_MAX + 1], struct err *err);

/* The Host of the HTTP/1.x request head at the start of data. */
int sni_http_host(const void *data, size_t len, char ret[static NET_NAME_MAX + 1], struct err *err);
