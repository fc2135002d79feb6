/*
 * serve.h - the privileged parent of the priv tests, in a child process: a
 * real ns jail host in DIR/state (uid lock DIR/uid.lock, idmap root
 * DIR/idmap), served on the unix socket SOCK_PATH (mode 0777, so a peer of
 * another uid can try) until the control descriptor becomes readable or
 * closes. Static functions: each test binary includes it once, and sets
 * what differs (the uid range, the slots, its helper start, the orphan
 * grace) through configure. The child writes 'R' on ready_fd when it
 * serves, 'S' when this host lacks isolation (the test then skips).
 */
#pragma once

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "priv/parent.h"
#include "util/buf.h"
#include "util/cleanup.h"

struct serve_opts {
    uint32_t uid_base, uid_slots;
    /* Fills what the test varies in pc (start_helper, helper_ud,
     * orphan_grace_ms...); h is the host just made. */
    void (*configure)(struct jail_host *h, struct priv_parent_config *pc);
};

static void
serve_on_accept(struct loop_io *io, uint32_t revents, void *ud)
{
    (void)revents;
    int fd = accept4(loop_io_fd(io), NULL, NULL, SOCK_CLOEXEC);
    if (fd >= 0)
        (void)priv_parent_serve(ud, fd, NULL);
}

static void
serve_on_ctl(struct loop_io *io, uint32_t revents, void *ud)
{
    (void)io;
    (void)revents;
    loop_quit(ud, 0);
}

static _noreturn_ void
serve_parent(const char *dir, const char *sock_path, int ready_fd, int ctl_fd,
             const struct serve_opts *o)
{
    struct loop *loop = NULL;
    struct jail_host *h = NULL;
    struct priv_parent *parent = NULL;
    struct err err = {0};
    char state[300], lock[300], idm[300];
    struct buf miss;

    (void)snprintf(state, sizeof(state), "%s/state", dir);
    (void)snprintf(lock, sizeof(lock), "%s/uid.lock", dir);
    (void)snprintf(idm, sizeof(idm), "%s/idmap", dir);
    if (loop_new(&loop) < 0)
        _exit(2);
    struct jail_host_config jc = {.loop = loop,
                                  .mode = JAIL_NS,
                                  .state_dir = state,
                                  .cgroup = "auto",
                                  .uid_lockfile = lock,
                                  .uid_base = o->uid_base,
                                  .uid_slots = o->uid_slots,
                                  .root_bytes = 64 << 20,
                                  .tmp_bytes = 64 << 20,
                                  .shm_bytes = 16 << 20};
    buf_init(&miss, 4096);
    if (jail_host_new(&jc, &h, &err) < 0 || jail_host_missing(h, &miss) < 0 || miss.len) {
        fprintf(stderr, "skip: %s%s\n", err.msg, miss.data);
        if (write(ready_fd, "S", 1) < 0)
            _exit(1);
        _exit(0);
    }
    (void)mkdir(idm, 0755);
    int idfd = open(idm, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct priv_parent_config pc = {.host = h,
                                    .loop = loop,
                                    .peer_uid = 0,
                                    .max_sandboxes = o->uid_slots,
                                    .idmap_root_fd = idfd,
                                    .idmap_ro_root_fd = -1};
    if (o->configure)
        o->configure(h, &pc);
    if (priv_parent_new(&pc, &parent, &err) < 0)
        _exit(3);
    int ls = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, sock_path, strlen(sock_path) + 1);
    if (bind(ls, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(ls, 16) < 0 ||
        chmod(sock_path, 0777) < 0)
        _exit(4);
    struct loop_io *a = NULL, *c = NULL;
    if (loop_io_add(loop, ls, EPOLLIN, serve_on_accept, parent, &a) < 0 ||
        loop_io_add(loop, ctl_fd, EPOLLIN, serve_on_ctl, loop, &c) < 0)
        _exit(5);
    if (write(ready_fd, "R", 1) < 0)
        _exit(1);
    (void)loop_run(loop);
    loop_io_free(a);
    loop_io_free(c);
    parent = priv_parent_free(parent);
    jail_host_flush(h);
    jail_host_free(h);
    _exit(0);
}
