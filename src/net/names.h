/*
 * names.h - the resolver's record of which addresses each allowed name
 * resolved to, for one sandbox: the proof a TCP connection naming a host
 * (TLS SNI, HTTP Host) goes where that name points, and not to an address
 * the sandbox chose and decorated with an allowed name.
 *
 * A fixed table of (name, address, expiry) entries, made once with its
 * capacity (at most NET_NAMES_MAX); adding never allocates. The TTL an
 * answer carried is clamped to [NET_NAMES_TTL_MIN, NET_NAMES_TTL_MAX]: a
 * 0-second TTL must still let the connection that follows the lookup
 * through, and programs keep addresses a little past their TTL. When the
 * table is full the entry that expires first goes (an expired one if
 * any). Time is the caller's monotonic clock in seconds; nothing here reads
 * a clock. Not thread-safe; lookups are linear (a few microseconds at the
 * largest size), once per connection.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "net/net.h"
#include "util/cleanup.h"

#define NET_NAMES_MAX     4096  /* entries one record may be made with */
#define NET_NAMES_DEFAULT 1024  /* a sandbox's record: ~280 KiB */
#define NET_NAMES_TTL_MIN 300   /* seconds an entry is kept at least */
#define NET_NAMES_TTL_MAX 86400 /* seconds an entry is kept at most */

struct net_names;

/* A record of max entries (1..NET_NAMES_MAX). -EINVAL, -ENOMEM. */
int net_names_new(size_t max, struct net_names **ret);
struct net_names *net_names_free(struct net_names *n);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct net_names *, net_names_free)

/* Records that name (normalised, net_name_valid() with underscores
 * allowed) resolved to a at time now with the answer's ttl (seconds).
 * Again for a known pair, the later expiry wins. -EINVAL for a bad name. */
int net_names_add(struct net_names *n, const char *name, const struct net_addr *a, uint32_t ttl,
                  uint64_t now);

/* Whether name resolved to a and that has not expired at now. */
bool net_names_has(const struct net_names *n, const char *name, const struct net_addr *a,
                   uint64_t now);

/* Entries not expired at now. */
size_t net_names_count(const struct net_names *n, uint64_t now);

/* Forgets everything (a policy update: what was allowed may not be). */
void net_names_clear(struct net_names *n);
