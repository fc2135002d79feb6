/*
 * nft.h - the sandboxes' packet filter and NAT: abx's own nftables table,
 * set up through libnftables, changed by one netlink batch per call.
 *
 * Layout (`nft list table inet abx`; NET_NFT_TABLE):
 *
 *   sets  never4/6    never reachable: this host's loopback, link-local
 *                     (169.254.0.0/16 and the cloud metadata address,
 *                     fe80::/10, fd00:ec2::254), unspecified, multicast,
 *                     reserved, broadcast, v4-mapped
 *         private4/6  RFC 1918, CGNAT 100.64.0.0/10, ULA fc00::/7,
 *                     NAT64 64:ff9b::/96: closed unless in allowed4/6
 *         allowed4/6  the operator's private CIDRs (net_nft_set_allowed())
 *         dnsproto    tcp, udp;  nd6: the neighbour discovery types
 *   maps  egress, ingress, redir: host veth name -> jump to its chain
 *   chains forward (filter): sandbox traffic jumps to sb_<veth>, any other
 *             from or to a veth of ours is dropped unless established;
 *          input (filter): from a veth jumps to in_<veth>, else dropped;
 *          prerouting (nat, dstnat): jumps to nat_<veth> (the proxy hook);
 *          postrouting (nat, srcnat): masquerade out of the uplink.
 *   per sandbox, keyed by its host veth name X:
 *          sb_X   established; source must be the sandbox's address; no
 *                 other sandbox; no DNS (53) anywhere; never4/6; X_d4/6;
 *                 private4/6 unless allowed4/6; X_a4/6 accept; then the
 *                 sandbox's default (accept, or drop for allow-lists only)
 *          in_X   established; DNS (udp/tcp 53) to its gateway address;
 *                 with a proxy port, redirected TCP to it; IPv6 neighbour
 *                 discovery; all else dropped (abxd's API, any host address)
 *          nat_X  empty, or a rule per proxied TCP port redirecting it
 *          X_a4, X_a6, X_d4, X_d6: the sandbox's allow and deny sets
 *
 * The kernel finds a set by a linear scan of the table's sets on every
 * new set and every set a rule names, so a sandbox has no sets beyond its
 * four lists (no anonymous ones). Not shared `ifname . address` interval
 * sets either: deleting an element of one (nft_pipapo_remove) walks the
 * whole set, every sandbox's elements (docs/performance.md).
 *
 * The set-up's text and the batches are generated here from C structs
 * only: numbers and addresses formatted by us, names checked with
 * net_ifname_valid(); no client string reaches them. A failed
 * transaction changes nothing; its error (libnftables' first lines, or
 * the failing message of a batch) ends up in err. Functions return 0 on
 * success and -errno on failure, never log. Blocking; a struct net_nft
 * is for one thread at a time and works in the network namespace it was
 * made in. No global state.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "net/pool.h"
#include "util/buf.h"
#include "util/err.h"

#define NET_NFT_TABLE      "abx"
#define NET_NFT_PREFIX     "abx"      /* every veth we filter is named abx*; others pass */
#define NET_NFT_LIST_MAX   4096u      /* CIDRs in one allow or deny list, or in allowed */
#define NET_NFT_DPORTS_MAX 8u         /* ports redirected to the proxy */
#define NET_NFT_CMD_MAX    (1u << 20) /* bytes of one transaction's text */

struct net_nft_config {
    /* Masquerade out of this link ([a-z0-9]{1,15}); NULL = out of any
     * link that is not one of ours. */
    const char *uplink;
    /* The closed ranges; NULL = the default list above (tests pass their
     * own from documentation ranges). */
    const struct net_block *private_ranges;
    size_t n_private;
    /* The operator's exceptions to private_ranges. */
    const struct net_block *allowed;
    size_t n_allowed;
};

/* One sandbox's rules. */
struct net_nft_sandbox {
    const char *ifname;                        /* host end of its veth: the key */
    const struct net_slot *slot;               /* its addresses */
    bool default_drop;                         /* drop what no allow list names (else accept) */
    uint16_t proxy_port;                       /* 0 = no redirect */
    uint16_t proxy_dports[NET_NFT_DPORTS_MAX]; /* TCP ports sent to proxy_port */
    size_t n_proxy_dports;
};

struct net_nft;

/* Makes a libnftables context in the caller's network namespace and
 * replaces whatever abx table is there (a crashed run's, with all its
 * sandboxes' rules) by an empty one, in one transaction. */
int net_nft_new(const struct net_nft_config *c, struct net_nft **ret, struct err *err);
/* Frees the context; the rules stay (net_nft_remove_all() removes them). */
struct net_nft *net_nft_free(struct net_nft *n);
static inline void
net_nft_freep(struct net_nft **n)
{
    net_nft_free(*n);
}

/* Deletes abx's table with everything in it (shutdown). Absent is fine. */
int net_nft_remove_all(struct net_nft *n, struct err *err);

/* Adds a sandbox's chains, sets and map entries (its lists empty).
 * -EEXIST when it has them already. Add before making its veth: until
 * then its traffic would meet only the catch-all drops. */
int net_nft_sandbox_add(struct net_nft *n, const struct net_nft_sandbox *sb, struct err *err);

/* Removes everything of the sandbox with host veth ifname. -ENOENT when
 * there is nothing. */
int net_nft_sandbox_remove(struct net_nft *n, const char *ifname, struct err *err);

/* Replaces the sandbox's allow and deny sets at once (the egress policy's
 * address lists); either may be empty. One batch flushes and fills them:
 * established connections keep going; new ones meet the new sets, with
 * no moment of neither. Blocks contained in another of the same list are
 * dropped first (interval sets refuse overlaps). -ENOENT for a sandbox
 * without rules. */
int net_nft_sandbox_set_lists(struct net_nft *n, const char *ifname, const struct net_block *allow,
                              size_t n_allow, const struct net_block *deny, size_t n_deny,
                              struct err *err);

/* Rewrites the sandbox's redirect (sb->proxy_port, sb->proxy_dports) and
 * what its input chain lets through to the proxy. */
int net_nft_sandbox_redirect(struct net_nft *n, const struct net_nft_sandbox *sb, struct err *err);

/* Replaces the operator's allowed private CIDRs. */
int net_nft_set_allowed(struct net_nft *n, const struct net_block *allowed, size_t n_allowed,
                        struct err *err);

/* The text of each call above, appended to b: pure, for tests and for
 * reading; the calls but set-up and allowed run the same as a netlink
 * batch. The same checks and errors as the calls. */
int net_nft_gen_init(const struct net_nft_config *c, struct buf *b, struct err *err);
int net_nft_gen_sandbox_add(const struct net_nft_sandbox *sb, struct buf *b, struct err *err);
int net_nft_gen_sandbox_remove(const char *ifname, struct buf *b, struct err *err);
int net_nft_gen_lists(const char *ifname, const struct net_block *allow, size_t n_allow,
                      const struct net_block *deny, size_t n_deny, struct buf *b, struct err *err);
int net_nft_gen_redirect(const struct net_nft_sandbox *sb, struct buf *b, struct err *err);
int net_nft_gen_allowed(const struct net_block *allowed, size_t n_allowed, struct buf *b,
                        struct err *err);
