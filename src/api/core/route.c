/*
 * route.c - what every surface's router shares: splitting a path into
 * its segments.
 */
#include "api/core/route.h"

#include <string.h>

int
api_split(char *path, char **seg, int max)
{
    int n = 0;
    char *save = NULL;
    for (char *t = strtok_r(path, "/", &save); t; t = strtok_r(NULL, "/", &save)) {
        if (n == max)
            return -1;
        seg[n++] = t;
    }
    return n;
}
