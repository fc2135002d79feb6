/*
 * fdpass.h - one packet and its descriptors over a unix socket (SCM_RIGHTS).
 *
 * For the SOCK_SEQPACKET protocols between abxd and its helpers
 * (fileops-proto.h, priv/proto.h): a packet is sent whole or not at all, and
 * a received one is either complete with every descriptor that came with it
 * accounted for, or an error with every such descriptor closed. Received
 * descriptors are O_CLOEXEC (MSG_CMSG_CLOEXEC). No allocation, no logging;
 * functions return a length or 0, or -errno.
 */
#pragma once

#include <stddef.h>
#include <sys/types.h>

#define FDPASS_MAX 8 /* descriptors one packet may carry */

/* Sends buf[0..n) as one packet with the nfds (<= FDPASS_MAX) descriptors
 * fds, which stay the caller's. flags are added to MSG_NOSIGNAL (e.g.
 * MSG_DONTWAIT). Retries EINTR; a short send is -EIO. */
int fdpass_send(int sock, const void *buf, size_t n, const int *fds, unsigned nfds, int flags);

/* Receives one packet of at most cap bytes into buf. The first maxfds
 * descriptors that came with it go to fds[], the rest are closed;
 * ret_nfds says how many came in all (so a caller can refuse a packet
 * with the wrong number). Returns the packet's length; 0 when the peer
 * has ended (any descriptors closed); -EBADMSG for a packet longer than
 * cap or a control message cut short (MSG_TRUNC, MSG_CTRUNC: every
 * descriptor closed); else -errno of recvmsg (-EAGAIN with MSG_DONTWAIT).
 * Entries of fds[] past the ones received are set to -EBADF. */
ssize_t fdpass_recv(int sock, void *buf, size_t cap, int flags, int *fds, unsigned maxfds,
                    unsigned *ret_nfds);

/* Closes fds[0..n) and sets them to -EBADF. */
void fdpass_close(int *fds, unsigned n);
