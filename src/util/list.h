/*
 * list.h - intrusive circular doubly linked list (after the Linux kernel's).
 *
 * Embed a struct list in the element; a struct list head is empty when it
 * points at itself. Header only; no allocation.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct list {
    struct list *next, *prev;
};

#define LIST_INIT(name)  \
    {                    \
        &(name), &(name) \
    }

static inline void
list_init(struct list *l)
{
    l->next = l->prev = l;
}

static inline bool
list_empty(const struct list *l)
{
    return l->next == l;
}

static inline void
list_insert_after(struct list *pos, struct list *n)
{
    n->prev = pos;
    n->next = pos->next;
    pos->next->prev = n;
    pos->next = n;
}

static inline void
list_add_tail(struct list *head, struct list *n)
{
    list_insert_after(head->prev, n);
}

static inline void
list_add_head(struct list *head, struct list *n)
{
    list_insert_after(head, n);
}

/* Unlinks n and re-initialises it, so removing twice is harmless. */
static inline void
list_remove(struct list *n)
{
    n->prev->next = n->next;
    n->next->prev = n->prev;
    list_init(n);
}

#define container_of(ptr, type, member) ((type *)(void *)((char *)(ptr)-offsetof(type, member)))
#define list_entry(ptr, type, member)   container_of(ptr, type, member)

#define list_foreach(pos, head) \
    for (struct list *pos = (head)->next; pos != (head); pos = pos->next)
#define list_foreach_safe(pos, tmp, head)                                  \
    for (struct list *pos = (head)->next, *tmp = pos->next; pos != (head); \
         pos = tmp, tmp = pos->next)
