/*
 * link.h - a sandbox's links over rtnetlink (libmnl): the veth pair between
 * the host and the sandbox's network namespace, addresses, the default
 * route, and listing and deleting our links for reclaim.
 *
 * A struct net_link is one NETLINK_ROUTE socket bound in one network
 * namespace: net_link_open() opens it in the caller's namespace or, given a
 * namespace fd, on a short-lived thread that enters that namespace (the
 * socket stays there; the calling thread never moves). Requests are sent
 * one at a time and wait for their ACK (extended ACK messages end up in
 * err) at most NET_LINK_TIMEOUT_MS per reply; replies are read into a
 * bounded buffer and a dump stops after NET_LINK_DUMP_MAX messages. Names
 * are checked with net_ifname_valid(). Functions return 0 (or a count) on
 * success and -errno on failure, never log, and fill err. Blocking; a
 * struct net_link is for one thread at a time. No global state.
 */
#pragma once

#include <net/if.h>
#include <stddef.h>

#include "net/pool.h"
#include "util/err.h"

#define NET_LINK_TIMEOUT_MS 2000u  /* wait for one netlink reply */
#define NET_LINK_DUMP_MAX   65536u /* messages of one dump we read at most */

struct net_link;

/* Opens an rtnetlink socket in the namespace netns_fd (borrowed; -EBADF =
 * the caller's own). */
int net_link_open(int netns_fd, struct net_link **ret, struct err *err);
struct net_link *net_link_free(struct net_link *l);
static inline void
net_link_freep(struct net_link **l)
{
    net_link_free(*l);
}

/* The ifindex of name; -ENODEV when there is none. */
int net_link_index(struct net_link *l, const char *name, int *ret_index, struct err *err);

/* Creates a veth pair: name here, peer in the namespace peer_netns_fd
 * (borrowed; -EBADF = here too). -EEXIST when a name is taken. */
int net_link_veth_add(struct net_link *l, const char *name, const char *peer, int peer_netns_fd,
                      struct err *err);

/* Moves link name into the namespace netns_fd (borrowed). */
int net_link_move(struct net_link *l, const char *name, int netns_fd, struct err *err);

/* Brings link name up. */
int net_link_up(struct net_link *l, const char *name, struct err *err);

/* Adds address ip/prefix to link name (IPv6 without duplicate address
 * detection: the link is a veth we made, and DAD would hold the address
 * tentative for a second). */
int net_link_addr_add(struct net_link *l, const char *name, const struct net_ip *ip,
                      unsigned prefix, struct err *err);

/* Adds the default route of gw's family via gw out of link name. */
int net_link_route_default(struct net_link *l, const char *name, const struct net_ip *gw,
                           struct err *err);

/* Adds a route to dst via gw out of link name (same family). */
int net_link_route_add(struct net_link *l, const char *name, const struct net_block *dst,
                       const struct net_ip *gw, struct err *err);

/* Deletes link name (a veth's peer goes with it). -ENODEV when absent. */
int net_link_del(struct net_link *l, const char *name, struct err *err);

/* Writes into names (max entries) the links whose names start with prefix;
 * returns how many there are (more than max: -E2BIG). */
int net_link_list(struct net_link *l, const char *prefix, char (*names)[IFNAMSIZ], size_t max,
                  struct err *err);

/* One sandbox's side of the data path. */
struct net_link_sandbox {
    const char *host_ifname;    /* host end, e.g. "abx7h" */
    const char *sandbox_ifname; /* sandbox end inside its namespace, e.g. "abx7s" */
    int netns_fd;               /* the sandbox's network namespace (borrowed) */
    const struct net_slot *slot;
};

/* Makes the veth pair (the peer straight into the namespace), gives both
 * ends their slot's addresses, brings up both ends and the namespace's
 * loopback, and adds the sandbox's default routes via the gateway. On
 * failure removes the pair again. host is a socket in the host's
 * namespace; a socket in the sandbox's is opened and closed here. */
int net_link_sandbox_up(struct net_link *host, const struct net_link_sandbox *sb, struct err *err);

/* Removes the sandbox's veth pair by its host end; -ENODEV when absent. */
int net_link_sandbox_down(struct net_link *host, const char *host_ifname, struct err *err);

/* Deletes every link of host's namespace whose name starts with prefix
 * (what a crashed run left); returns how many. */
int net_link_reclaim(struct net_link *host, const char *prefix, struct err *err);

/* Turns on IPv4 (and with ipv6, IPv6) forwarding in the caller's network
 * namespace (/proc/sys/net/...): the host must forward for the sandboxes.
 * A host-wide setting: the wiring calls it once, at start. */
int net_link_forwarding_on(bool ipv6, struct err *err);
