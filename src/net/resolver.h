/*
 * resolver.h - the DNS resolver the sandboxes use: it answers every
 * sandbox's queries at its gateway address with the egress policy
 * enforced, asks the upstream servers for what the policy allows, and
 * records the addresses it handed out (names.h) for the egress checks. It
 * is the I/O around dns.h's message rules; it decides nothing itself.
 *
 * Where it runs. In abxd's unprivileged network process, on that process's
 * event loop (loop.h): no threads, no blocking call. It cannot bind port
 * 53, so the wiring redirects (nftables, in each sandbox's input path) the
 * DNS a sandbox sends to its gateway's port 53, UDP and TCP, to one local
 * unprivileged port, and the resolver listens there on ONE UDP socket and
 * ONE TCP listener for all sandboxes (bound here from an address and port,
 * or passed in already bound). The sandbox is known by the query's source
 * address alone: the data path lets a sandbox send only from its own
 * address (nft.h's sb_X/in_X chains), so the source is trustworthy, and a
 * caller callback maps it to the sandbox's policy, names record and stats.
 * An unknown source gets nothing (dropped, counted in resolver_totals()).
 *
 * One query (UDP or TCP from the sandbox):
 *   1. dns_query_parse(); its refusals are answered at once (FORMERR,
 *      NOTIMP, REFUSED, dns_answer_error()), a response or a runt is
 *      dropped; a refused type (dns_type_allowed()) is REFUSED and a name
 *      the policy denies (policy_check_name()) is NXDOMAIN, both without
 *      asking anyone (dns_answer_rcode()).
 *   2. Past the caps (in flight per sandbox, in flight in all): REFUSED at
 *      once. Not a drop: the answer goes only to the sandbox's own
 *      checked address (no amplification towards anyone else), and the
 *      program learns at once that it asks too much instead of waiting out
 *      its retry timers and asking again, which is what a drop would make
 *      it do while the flood lasts.
 *   3. Forwarded upstream (dns_upstream_query()) with a fresh random id
 *      (getrandom) from a new connected UDP socket, so from a fresh
 *      kernel-chosen random source port (Linux picks autobind ports at
 *      random in ip_local_port_range), to the first upstream server, with
 *      a deadline (timeout_ms). A reply that is not the answer to what we
 *      sent (another id, another question: dns_answer_filter()'s -EPROTO)
 *      is ignored and the wait goes on: a spoofed or stray packet. TC set:
 *      the same query again over TCP to the same server. A timeout, an
 *      ICMP error, a broken answer, or an upstream SERVFAIL/REFUSED moves
 *      on to the next server; when the last one failed the sandbox gets
 *      SERVFAIL.
 *   4. The answer goes through dns_answer_filter() (the policy on the
 *      CNAME chain, what the sandbox may see, TC for its UDP size) and
 *      dns_result_record() (into the sandbox's names record, at
 *      now_msec() / 1000: the monotonic clock in seconds the egress checks
 *      must use too), and back to the sandbox with its own id.
 *
 * TCP from sandboxes (RFC 7766): two-byte length, then the message; any
 * number of queries per connection, answered in the order they finish. A
 * length past DNS_QUERY_MAX or a full output buffer closes the
 * connection; at most RESOLVER_TCP_INFLIGHT queries of a connection are in
 * flight (reading pauses meanwhile); idle (nothing in flight, nothing to
 * write) for RESOLVER_TCP_IDLE_MS (tcp_idle_ms) closes it; a half-close is answered and
 * then closed. Connections are capped in all and per sandbox; past a cap a
 * new connection is closed at once.
 *
 * Upstream servers are the caller's to give (addresses and ports), and to
 * change (resolver_set_upstreams()): reading /etc/resolv.conf, or the
 * operator's configuration, is the wiring's, which knows which namespace
 * the network process is in (a systemd-resolved stub at 127.0.0.53 only
 * works where it shares the host's loopback). Not a cache: every allowed
 * query is asked upstream, which does the recursion and the caching.
 *
 * Bounds. Memory is a fixed part per query, per TCP connection (its input
 * of 2 + DNS_QUERY_MAX bytes, its output of at most RESOLVER_TCP_OUT_MAX)
 * and per upstream TCP fallback (at most DNS_ANSWER_MAX, at most
 * RESOLVER_TCP_UPSTREAM_MAX of them at once: past that the query gets
 * SERVFAIL), plus two shared buffers of DNS_ANSWER_MAX; every count has a
 * cap below and every wait a timer.
 *
 * Lifetimes. What lookup returns (policy, names, stats) is borrowed: it
 * must stay valid until resolver_forget() for that sandbox id returns
 * (which cancels its queries without an answer and closes its TCP
 * connections) or resolver_free(). The policy may be changed in place
 * meanwhile: answers are filtered with it as it is when they arrive. Call
 * resolver_forget() before a sandbox's policy, names or stats go away,
 * and when its address is given to another sandbox.
 *
 * Functions return 0 (or a count) on success and -errno on failure, never
 * log, and fill err when given one. Not thread-safe: the loop's thread.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "net/dns.h"
#include "net/net.h"
#include "util/cleanup.h"
#include "util/err.h"

struct loop;
struct net_names;
struct net_policy;

#define RESOLVER_UPSTREAMS_MAX        3     /* servers asked in turn (resolv.conf's MAXNS) */
#define RESOLVER_TIMEOUT_MS           2000  /* default wait for one upstream server */
#define RESOLVER_INFLIGHT_MAX         1024  /* default queries in flight in all */
#define RESOLVER_INFLIGHT_SANDBOX_MAX 64    /* default queries in flight per sandbox */
#define RESOLVER_TCP_CONNS_MAX        256   /* default sandbox TCP connections in all */
#define RESOLVER_TCP_CONNS_SANDBOX    8     /* default TCP connections per sandbox */
#define RESOLVER_TCP_INFLIGHT         16    /* queries in flight per TCP connection */
#define RESOLVER_TCP_IDLE_MS          10000 /* an idle sandbox TCP connection is closed */
#define RESOLVER_TCP_OUT_MAX          (2 * (2 + DNS_ANSWER_MAX)) /* bytes queued to a conn */
#define RESOLVER_TCP_UPSTREAM_MAX     64 /* TCP fallbacks to upstream at once */

/* One upstream server. */
struct resolver_upstream {
    struct net_addr addr;
    uint16_t port; /* host order; 0 = 53 */
};

/* One sandbox's counters, owned by the caller (it reads them for
 * /metrics), updated by the resolver. Zero them when the sandbox is made. */
struct resolver_stats {
    uint64_t queries;           /* messages received (UDP datagrams, TCP messages) */
    uint64_t refused;           /* answered by us without asking: FORMERR, NOTIMP, REFUSED */
    uint64_t denied;            /* NXDOMAIN for a name the policy denies (asked or in a chain) */
    uint64_t over_limit;        /* REFUSED past an in-flight cap (also in refused), or a
                                   TCP connection closed past a connection cap */
    uint64_t dropped;           /* not answered: runts, responses, cancelled */
    uint64_t forwarded;         /* queries sent upstream */
    uint64_t answered;          /* upstream answers passed to the sandbox */
    uint64_t upstream_failures; /* upstream attempts that failed (timeout, error, bad answer) */
    uint64_t servfail;          /* SERVFAIL because every upstream failed */
    uint64_t tcp_fallbacks;     /* truncated upstream answers asked again over TCP */
    uint32_t inflight;          /* now: queries waiting for upstream */
    uint32_t tcp_conns;         /* now: open TCP connections */
};

/* Counters of the resolver as a whole. */
struct resolver_totals {
    uint64_t unknown;  /* messages and connections from sources lookup did not know */
    uint64_t errors;   /* socket errors on the listeners, ignored */
    uint32_t inflight; /* now: queries in flight */
    uint32_t tcp_conns;
};

/* What lookup says about a source address. */
struct resolver_client {
    uint64_t id;                     /* the sandbox: resolver_forget()'s key */
    const struct net_policy *policy; /* required */
    struct net_names *names;         /* NULL: record nothing */
    struct resolver_stats *stats;    /* required */
    unsigned dns_flags;              /* dns_type_allowed()'s flags: DNS_ALL_TYPES */
};

/* Maps a query's source address to its sandbox: 0 and ret filled, or
 * -ENOENT for a source of no sandbox (the query is dropped). Must not call
 * back into the resolver. */
typedef int (*resolver_lookup_fn)(const struct net_addr *src, struct resolver_client *ret,
                                  void *userdata);

struct resolver_config {
    struct loop *loop; /* required; borrowed */
    /* Bound sockets to listen on (borrowed: never closed here, made
     * non-blocking), or -EBADF to bind listen:port here (O_CLOEXEC,
     * non-blocking, owned). With port 0 the UDP socket gets a free port
     * and TCP binds the same one. */
    int udp_fd;
    int tcp_fd;
    struct net_addr listen;
    uint16_t port;
    const struct resolver_upstream *upstreams; /* copied; 1..RESOLVER_UPSTREAMS_MAX */
    size_t n_upstreams;
    resolver_lookup_fn lookup; /* required */
    void *userdata;
    /* 0 = the defaults above. */
    unsigned timeout_ms;
    unsigned inflight_max;
    unsigned inflight_sandbox_max;
    unsigned tcp_conns_max;
    unsigned tcp_conns_sandbox_max;
    unsigned tcp_idle_ms;
};

struct resolver;

/* Starts answering on c's sockets. -EINVAL for a bad config (err says
 * what), a bind or listen errno, -ENOMEM. */
int resolver_new(const struct resolver_config *c, struct resolver **ret, struct err *err);
/* Cancels everything in flight, closes what it opened. NULL is ok. */
struct resolver *resolver_free(struct resolver *r);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct resolver *, resolver_free)

/* The local ports it listens on (host order). */
uint16_t resolver_udp_port(const struct resolver *r);
uint16_t resolver_tcp_port(const struct resolver *r);

/* Cancels sandbox id's queries (no answer, counted as dropped) and closes
 * its TCP connections; afterwards nothing of what lookup gave for it is
 * used. Returns how many queries and connections went. */
size_t resolver_forget(struct resolver *r, uint64_t id);

/* Replaces the upstream servers (1..RESOLVER_UPSTREAMS_MAX, copied);
 * queries in flight finish with the servers they started with. -EINVAL. */
int resolver_set_upstreams(struct resolver *r, const struct resolver_upstream *u, size_t n,
                           struct err *err);

/* Handles one datagram of len bytes from src:port as if the UDP socket had
 * read it (answers go to src:port through that socket): the UDP path's
 * entry, for the fuzz target. -ENOENT for a source lookup does not know. */
int resolver_datagram(struct resolver *r, const struct net_addr *src, uint16_t port,
                      const void *msg, size_t len);

void resolver_totals(const struct resolver *r, struct resolver_totals *ret);
