/*
 * nft-internal.h - between nft.c (the text, and its run through
 * libnftables) and nft-nl.c (the hot path's netlink batches, built with
 * libnftnl, no cache). For these two files only.
 */
#pragma once

#include <stdint.h>

#include "net/nft.h"
#include "util/err.h"

#define NET_NFT_NL_BATCH_MAX (64u * 1024u) /* bytes of one batch we build */

struct mnl_socket;

/* A NETLINK_NETFILTER socket (CLOEXEC) in the caller's network namespace. */
int net_nft_nl_open(struct mnl_socket **ret, struct err *err);

/* What net_nft_gen_sandbox_add() and net_nft_gen_sandbox_remove() say, as
 * one batch each sent on nl: the same objects, rules and errors (-EEXIST,
 * -ENOENT), without reading anything back from the kernel first. Add
 * refuses a sandbox with a proxy port (-EOPNOTSUPP): its caller runs the
 * text then. seq is the socket's sequence counter, advanced. */
int net_nft_nl_sandbox_add(struct mnl_socket *nl, uint32_t *seq, const struct net_nft_sandbox *sb,
                           struct err *err);
int net_nft_nl_sandbox_remove(struct mnl_socket *nl, uint32_t *seq, const char *ifname,
                              struct err *err);
