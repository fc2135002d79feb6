/*
 * tar.h - read and write uncompressed tar streams: a push parser for hostile
 * input, a safe extractor into a directory, and a writer for directories.
 *
 * The reader understands ustar headers, GNU long names ('L') and long link
 * targets ('K'), and pax extended headers ('x', only "path" and "linkpath"
 * are used; global 'g' headers are skipped). It is a parser only: it never
 * touches the file system, checks every checksum, octal field and length,
 * and bounds what a stream can make it allocate (TAR_NAME_MAX bytes of name,
 * TAR_PAX_MAX bytes of pax header). Input arrives in pieces of any size.
 *
 * The extractor writes regular files, directories and symlinks below a
 * directory it holds open, and refuses everything else: absolute names,
 * ".." components, symlinks whose target is absolute or climbs out of the
 * tree, paths through a symlink, hard links, devices, fifos, duplicates, more
 * than max_entries entries or max_bytes bytes of content. Files get mode
 * 0644 or 0755 (the owner's execute bit), directories 0755; owners and times
 * in the stream are ignored.
 *
 * The writer emits ustar (GNU 'L' records for names over 100 bytes) for
 * regular files, directories and symlinks (targets of at most 100 bytes), in
 * sorted order, and refuses any other file type.
 *
 * Functions return 0 or -errno (-EBADMSG for a malformed stream, -EPERM for
 * a refused entry, -EFBIG / -E2BIG for a limit) and fill the optional err.
 * Not thread-safe per object; no global state.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/err.h"

#define TAR_BLOCK       512
#define TAR_NAME_MAX    4095         /* bytes of a path or link target */
#define TAR_PAX_MAX     65536        /* bytes of one pax extended header */
#define TAR_BYTES_MAX   (1ULL << 30) /* default content bound of the extractor */
#define TAR_ENTRIES_MAX 20000        /* default entry bound of the extractor */

enum tar_type {
    TAR_FILE,
    TAR_DIR,
    TAR_SYMLINK,
    TAR_HARDLINK,
    TAR_OTHER, /* devices, fifos, anything else */
};

struct tar_entry {
    enum tar_type type;
    const char *name; /* as in the stream (NUL-terminated, no NUL inside) */
    const char *link; /* symlink/hard link target, "" otherwise */
    uint64_t size;    /* bytes of content (files only; 0 otherwise) */
    uint32_t mode;    /* permission bits as in the stream */
};

struct tar_reader_ops {
    /* A header; its content follows in data() calls. < 0 stops the reader. */
    int (*entry)(void *ud, const struct tar_entry *e);
    int (*data)(void *ud, const void *p, size_t n);
};

struct tar_reader;

int tar_reader_new(const struct tar_reader_ops *ops, void *ud, struct tar_reader **ret);
struct tar_reader *tar_reader_free(struct tar_reader *t);
/* Feeds n more bytes. After the end-of-archive blocks, further input must
 * be zeros (padding). */
int tar_reader_feed(struct tar_reader *t, const void *p, size_t n, struct err *err);
/* The stream ended: 0 when it ended at an entry boundary (with or without
 * the end-of-archive blocks), -EBADMSG inside an entry. */
int tar_reader_finish(struct tar_reader *t, struct err *err);
uint64_t tar_reader_entries(const struct tar_reader *t);

/* Safe extraction below dirfd (borrowed, must stay open). */
struct tar_extract;
int tar_extract_new(int dirfd, uint64_t max_bytes, uint64_t max_entries, struct tar_extract **ret);
struct tar_extract *tar_extract_free(struct tar_extract *x);
int tar_extract_feed(struct tar_extract *x, const void *p, size_t n, struct err *err);
int tar_extract_finish(struct tar_extract *x, struct err *err);

/* Whether a name from a stream is acceptable: relative, no "..", no empty
 * component after removing "./" and trailing '/'; writes the clean form. */
int tar_clean_name(const char *name, char *out, size_t outsz);

/* Writes dirfd's tree (borrowed) as a tar stream through write(ud, p, n)
 * (< 0 stops). Names are relative to dirfd; at most max_bytes of content. */
typedef int (*tar_write_fn)(void *ud, const void *p, size_t n);
int tar_write_dir(int dirfd, tar_write_fn write, void *ud, uint64_t max_bytes, struct err *err);
