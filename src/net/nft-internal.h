/*
 * nft-internal.h - between nft.c (the text, and its run through
 * libnftables) and nft-nl.c (the hot path's netlink batches, built with
 * libnftnl, no cache). For these two files only.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "net/nft.h"
#include "util/err.h"

struct mnl_socket;

/* A NETLINK_NETFILTER socket (CLOEXEC) in the caller's network namespace. */
int net_nft_nl_open(struct mnl_socket **ret, struct err *err);

/* Bytes of the buffer of one batch we build: twice (the last message may
 * run past the limit) a sandbox's rules and both ends of every block of
 * its lists, at most. */
#define NET_NFT_NL_ELEM_MAX  64u /* bytes of one set element in a message, at most */
#define NET_NFT_NL_BATCH_MAX (2u * (64u * 1024u + 4u * NET_NFT_LIST_MAX * NET_NFT_NL_ELEM_MAX))
#define NET_NFT_NL_ACKS_MAX  (1u << 20) /* bytes of receive buffer for one batch's acks */

/* A sandbox's lists, normalised by net_nft_blocks_normal() (borrowed). */
struct net_nft_lists {
    const struct net_block *allow, *deny;
    size_t n_allow, n_deny;
};

/* The order of net_nft_blocks_normal()'s result (qsort()'s signature). */
int net_nft_block_cmp(const void *a, const void *b);

/* Checks n <= NET_NFT_LIST_MAX and every block, then sorts a copy by
 * family, address and prefix and leaves out the blocks inside another
 * (interval sets refuse overlaps). *ret is the caller's to free (NULL
 * when *ret_n is 0); what names the list in errors. */
int net_nft_blocks_normal(const struct net_block *blocks, size_t n, const char *what,
                          struct net_block **ret, size_t *ret_n, struct err *err);

/* What net_nft_gen_sandbox_add(), _remove(), _lists() and _redirect() say,
 * as one batch each sent on nl: the same objects, rules and errors
 * (-EEXIST, -ENOENT), without reading anything back from the kernel
 * first. seq is the socket's sequence counter, advanced. */
int net_nft_nl_sandbox_add(struct mnl_socket *nl, uint32_t *seq, const struct net_nft_sandbox *sb,
                           struct err *err);
int net_nft_nl_sandbox_remove(struct mnl_socket *nl, uint32_t *seq, const char *ifname,
                              struct err *err);
int net_nft_nl_lists(struct mnl_socket *nl, uint32_t *seq, const char *ifname,
                     const struct net_nft_lists *l, struct err *err);
int net_nft_nl_redirect(struct mnl_socket *nl, uint32_t *seq, const struct net_nft_sandbox *sb,
                        struct err *err);
