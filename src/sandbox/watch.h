/*
 * watch.h - inotify on a directory of a sandbox, from the host: the tree
 * watch every watching surface shares. It knows directories and events,
 * not how a surface frames or queues them.
 *
 * The watched directory lives in the sandbox's mount namespace; the caller
 * opens it (through fileops, as the acting user) and hands its descriptor
 * over. It is watched through that descriptor, by the file helper
 * (fileops_vwatch_add(): inotify_add_watch on "/proc/self/fd/N", which
 * follows the magic link to the very inode, with the acting user's
 * rights; the inotify instance and its events stay ours), and in a
 * recursive watch every subdirectory is opened below it through fileops,
 * never following a symlink, and watched too: at the start, and whenever a
 * directory is made or moved in below, when what is already inside it is
 * reported as CREATE (fsnotify does the same, for "mkdir -p a/b/c"). A
 * directory moved away stops being watched with everything below it. Names
 * are relative to the watched directory ("" is the directory itself).
 * Pseudo file systems (proc, sysfs, cgroup, debugfs, securityfs) are not
 * entered. At most WATCH_DIRS_MAX directories and VFS_MAX_DEPTH levels.
 *
 * Events map as envd's fsnotify maps them: IN_CREATE and IN_MOVED_TO are
 * CREATE, IN_MODIFY WRITE, IN_DELETE REMOVE, IN_MOVED_FROM RENAME,
 * IN_ATTRIB CHMOD; one kernel event with several meanings reports them in
 * that order. The watched directory reports CHMOD, REMOVE (deleted) and
 * RENAME (moved; its subdirectories are dropped then).
 *
 * Everything runs on the loop's thread. Back-pressure is the caller's: its
 * full() callback pauses reading (the kernel queues meanwhile, up to its
 * own limit, past which the watch fails with -EOVERFLOW rather than lose
 * events silently), and watch_resume() reads again.
 */
#ifndef ABX_SANDBOX_WATCH_H
#define ABX_SANDBOX_WATCH_H

#include <stdbool.h>
#include <stddef.h>

struct fileops;
struct loop;
struct watch;

#define WATCH_DIRS_MAX 8192 /* inotify watches (directories) of one watch */

enum watch_event { WATCH_CREATE = 1, WATCH_WRITE, WATCH_REMOVE, WATCH_RENAME, WATCH_CHMOD };

struct watch_ops {
    /* One event about rel. A negative return (the caller's queue is full:
     * -EFBIG, say) fails the watch with that value. */
    int (*event)(void *ud, enum watch_event ev, const char *rel);
    /* After each read of events: true stops reading until watch_resume(). */
    bool (*full)(void *ud);
    /* After a wakeup's reads: hand what was queued on. */
    void (*flush)(void *ud);
    /* The watch cannot go on: -EOVERFLOW (the kernel's queue overflowed),
     * -E2BIG (past WATCH_DIRS_MAX), -ENOSPC (the kernel's limit of
     * watches), -ELOOP (past VFS_MAX_DEPTH), -ENAMETOOLONG (past name_max),
     * what event() returned, or another -errno. No callback follows; the
     * caller frees the watch (it may do so here). */
    void (*failed)(void *ud, int r);
};

/* Makes an inotify instance for the directory dirfd (taken over, also on
 * failure), whose subdirectories are opened through fo (a reference is
 * taken). name_max bounds the names reported (bytes). Nothing is watched
 * yet: watch_start(), then watch_listen(). -errno from inotify_init1(). */
int watch_new(struct loop *loop, struct fileops *fo, int dirfd, bool recursive, size_t name_max,
              const struct watch_ops *ops, void *ud, struct watch **ret);
/* Watches the directory and, when recursive, the tree below it (nothing
 * reported). The errors of failed(), or -errno. */
int watch_start(struct watch *w);
/* Starts reading events on the loop. -errno. */
int watch_listen(struct watch *w);
/* Reads events again after full() said stop; a no-op otherwise. */
void watch_resume(struct watch *w);
/* Whether full() stopped the reading. */
bool watch_paused(const struct watch *w);
/* Directories watched now. */
size_t watch_dirs(const struct watch *w);
/* Stops watching and frees w; NULL is ok; returns NULL. */
struct watch *watch_free(struct watch *w);

#endif
