/*
 * fuzz-resolver.c - the resolver's UDP query path on arbitrary bytes, with
 * a stand-in upstream, all on loopback (127.0.0.1 and 127.0.0.2, random
 * ports; nothing leaves the machine). Input: byte 0 picks the sandbox
 * (bit 0: a closed policy allowing api.x.test, else an open one denying
 * *.evil.test; bit 1: DNS_ALL_TYPES) and whether the upstream's answer
 * gets the id the resolver used (bit 2); bytes 1-2 are the length L of
 * the query that follows; the rest is what the upstream answers with.
 * The query comes in through resolver_datagram() from 127.0.0.2; if it is
 * forwarded, the stand-in upstream answers it once with the rest.
 * Contract: no crash, nothing left in flight after resolver_forget(),
 * each query counted once, and every answer the sandbox gets is a
 * response with its query's id.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ldns/ldns.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz-common.h"
#include "net/dns.h"
#include "net/names.h"
#include "net/policy.h"
#include "net/resolver.h"
#include "util/loop.h"

static struct loop *loop;
static struct resolver *res;
static struct net_policy *open_p, *closed_p;
static struct net_names *names;
static struct resolver_stats stats;
static unsigned flags;
static bool closed;
static int up = -1, sb = -1;
static uint16_t sb_port;

static int
lookup(const struct net_addr *src, struct resolver_client *ret, void *userdata)
{
    (void)src;
    (void)userdata;
    *ret = (struct resolver_client){1, closed ? closed_p : open_p, names, &stats, flags};
    return 0;
}

/* A UDP socket on 127.0.0.<host>, any port. */
static int
bound(uint32_t host)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

    CHECK(fd >= 0);
    a.sin_addr.s_addr = htonl(0x7f000000 | host);
    CHECK(bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
    return fd;
}

static uint16_t
port_of(int fd)
{
    struct sockaddr_in a;
    socklen_t n = sizeof(a);

    CHECK(getsockname(fd, (struct sockaddr *)&a, &n) == 0);
    return ntohs(a.sin_port);
}

static void
init(void)
{
    struct resolver_upstream u = {0};
    struct resolver_config c = {0};

    CHECK(loop_new(&loop) == 0);
    CHECK(policy_new(&open_p) == 0 && policy_new(&closed_p) == 0);
    CHECK(policy_add(open_p, POLICY_DENY, "*.evil.test", 0, NULL) == 0);
    CHECK(policy_add(closed_p, POLICY_DENY, "0.0.0.0/0", 0, NULL) == 0);
    CHECK(policy_add(closed_p, POLICY_ALLOW, "api.x.test", 0, NULL) == 0);
    CHECK(net_names_new(64, &names) == 0);
    up = bound(1);
    sb = bound(2);
    sb_port = port_of(sb);
    CHECK(net_addr_parse("127.0.0.1", &u.addr, NULL) == 0);
    u.port = port_of(up);
    c.loop = loop;
    c.udp_fd = c.tcp_fd = -EBADF;
    CHECK(net_addr_parse("127.0.0.1", &c.listen, NULL) == 0);
    c.upstreams = &u;
    c.n_upstreams = 1;
    c.lookup = lookup;
    c.timeout_ms = 50;
    CHECK(resolver_new(&c, &res, NULL) == 0);
}

/* Reads what reached the sandbox: each must be a response with id (when
 * the query had one). */
static void
drain_sandbox(bool has_id, uint16_t id)
{
    uint8_t buf[DNS_ANSWER_MAX];
    ssize_t n;

    while ((n = recv(sb, buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
        CHECK(n >= DNS_HEADER_LEN);
        CHECK(!has_id || (buf[0] << 8 | buf[1]) == id);
        CHECK(buf[2] & 0x80);
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t msg[DNS_ANSWER_MAX];
    struct net_addr src;
    struct resolver_stats before;
    size_t qlen;
    ssize_t n;

    if (!loop)
        init();
    if (size < 3)
        return 0;
    closed = data[0] & 1;
    flags = data[0] & 2 ? DNS_ALL_TYPES : 0;
    qlen = MIN((size_t)(data[1] << 8 | data[2]), size - 3);
    CHECK(net_addr_parse("127.0.0.2", &src, NULL) == 0);
    before = stats;

    CHECK(resolver_datagram(res, &src, sb_port, data + 3, qlen) == 0);
    CHECK(stats.queries == before.queries + 1);
    /* Forwarded: the upstream got it at once (connected UDP on loopback). */
    struct pollfd p = {.fd = up, .events = POLLIN};
    if (stats.forwarded > before.forwarded && poll(&p, 1, 100) == 1) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        uint8_t q[512];
        n = recvfrom(up, q, sizeof(q), 0, (struct sockaddr *)&ss, &sl);
        CHECK(n >= DNS_HEADER_LEN);
        size_t alen = MIN(size - 3 - qlen, sizeof(msg));
        memcpy(msg, data + 3 + qlen, alen);
        if ((data[0] & 4) && alen >= 2)
            memcpy(msg, q, 2);
        (void)sendto(up, msg, alen, 0, (struct sockaddr *)&ss, sl);
        for (int i = 0; i < 4; i++)
            (void)loop_run_once(loop, 1);
    }
    drain_sandbox(qlen >= 2, qlen >= 2 ? (uint16_t)(data[3] << 8 | data[4]) : 0);
    (void)resolver_forget(res, 1);
    CHECK(stats.inflight == 0);
    /* Each query is refused, denied, dropped or forwarded. */
    CHECK(stats.refused + stats.denied + stats.dropped + stats.forwarded >
          before.refused + before.denied + before.dropped + before.forwarded);
    /* A stale upstream datagram must not reach the next input. */
    while (recv(up, msg, sizeof(msg), MSG_DONTWAIT) > 0)
        ;
    return 0;
}
