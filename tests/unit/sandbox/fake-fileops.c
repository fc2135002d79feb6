/*
 * fake-fileops.c - a hostile stand-in for abx-fileops, for test-fileops.
 *
 * It answers the greeting, then answers each request by what its first
 * path names: the ways a taken-over helper could lie to abxd. Built as a
 * plain executable; test-fileops starts it through fileops_new_remote().
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sandbox/fileops-proto.h"

#define CTL 3

static char rx[FOP_MSG_MAX], tx[FOP_MSG_MAX];

static void
send_fd(const void *buf, size_t n, int fd)
{
    struct iovec iov = {.iov_base = (void *)(uintptr_t)buf, .iov_len = n};
    union {
        char b[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    if (fd >= 0) {
        memset(&u, 0, sizeof(u));
        m.msg_control = u.b;
        m.msg_controllen = sizeof(u.b);
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof(int));
    }
    if (sendmsg(CTL, &m, MSG_NOSIGNAL) < 0)
        _exit(0);
}

static void
finish(struct proto_writer *w, int fd)
{
    long n = proto_writer_finish(w);
    if (n < 0)
        _exit(3);
    send_fd(w->buf, (size_t)n, fd);
}

static const struct files_stat good = {
        .type = FILES_FILE, .size = 5, .mode = 0644, .mtime_ms = 1, .version = "0123456789abcdef"};

static void
answer(const struct fop_request *rq)
{
    struct proto_writer w;
    const char *what = rq->a ? rq->a : "";
    if (!strcmp(what, "garbage")) {
        memcpy(tx, "\x66\x00\x00\x00\x10\x00\x00\x00garbage!", 16);
        send_fd(tx, 16, -1);
    } else if (!strcmp(what, "trailing")) {
        fop_answer_init(&w, tx, sizeof(tx), FOP_R_FSTAT);
        fop_put_fstat(&w, &good);
        proto_put_u32(&w, 7);
        finish(&w, -1);
    } else if (!strcmp(what, "badversion")) {
        struct files_stat st = good;
        memcpy(st.version, "0123456789abcdeZ", 17);
        fop_answer_init(&w, tx, sizeof(tx), FOP_R_FSTAT);
        fop_put_fstat(&w, &st);
        finish(&w, -1);
    } else if (!strcmp(what, "other")) {
        fop_answer_init(&w, tx, sizeof(tx), FOP_R_BOOL); /* not a stat's answer */
        proto_put_u32(&w, 1);
        finish(&w, -1);
    } else if (!strcmp(what, "pipe")) {
        int p[2];
        if (pipe(p) < 0)
            _exit(3);
        fop_answer_init(&w, tx, sizeof(tx), FOP_R_FSTAT_FD);
        fop_put_fstat(&w, &good);
        finish(&w, p[0]);
    } else if (!strcmp(what, "twofds")) {
        /* FOP_R_FSTAT carries none */
        fop_answer_init(&w, tx, sizeof(tx), FOP_R_FSTAT);
        fop_put_fstat(&w, &good);
        finish(&w, 0);
    } else if (!strcmp(what, "escape")) {
        fop_answer_init(&w, tx, sizeof(tx), FOP_R_ERR);
        fop_put_err(&w, EACCES, "forged\n<3>line\x1b[31m");
        finish(&w, -1);
    } else if (!strcmp(what, "die")) {
        _exit(1);
    } else if (!strcmp(what, "hang")) {
        for (;;)
            pause();
    } else if (!strcmp(what, "lying-batch")) {
        fop_answer_init(&w, tx, sizeof(tx), FOP_R_FENTRIES);
        proto_put_u32(&w, 1000); /* and no entries */
        finish(&w, -1);
    } else if (!strcmp(what, "walk-in-stat")) {
        fop_answer_init(&w, tx, sizeof(tx), FOP_R_FENTRIES);
        proto_put_u32(&w, 0);
        finish(&w, -1);
    } else if (!strcmp(what, "ok")) {
        fop_answer_init(&w, tx, sizeof(tx), FOP_R_FSTAT);
        fop_put_fstat(&w, &good);
        finish(&w, -1);
    } else {
        fop_answer_init(&w, tx, sizeof(tx), FOP_R_ERR);
        fop_put_err(&w, ENOENT, "no such thing");
        finish(&w, -1);
    }
}

static ssize_t
receive(unsigned *nfds)
{
    struct iovec iov = {.iov_base = rx, .iov_len = sizeof(rx)};
    union {
        char b[CMSG_SPACE(sizeof(int) * 4)];
        struct cmsghdr align;
    } u;
    struct msghdr m = {
            .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b, .msg_controllen = sizeof(u.b)};
    ssize_t n = recvmsg(CTL, &m, MSG_CMSG_CLOEXEC);
    if (n <= 0)
        _exit(0);
    *nfds = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
        *nfds += (unsigned)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
    return n;
}

int
main(void)
{
    unsigned nfds;
    struct fop_hello h;
    ssize_t n = receive(&nfds);
    if (fop_decode_hello(rx, (size_t)n, nfds, &h) < 0)
        _exit(2);
    if (h.uid == 4242) /* the test's "cannot become the user" */
        _exit(4);
    struct proto_writer w;
    fop_answer_init(&w, tx, sizeof(tx), FOP_R_OK);
    finish(&w, -1);
    for (;;) {
        struct fop_request rq;
        n = receive(&nfds);
        if (fop_decode_request(rx, (size_t)n, nfds, &rq) < 0)
            _exit(2);
        answer(&rq);
    }
}
