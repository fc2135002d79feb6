/*
 * paths.c - how the native surfaces take paths from a request: the URL
 * path and query (percent-decoded by the server) and JSON bodies ("path"
 * or "path_b64", util/json.h). Any byte but NUL may be in a name; a NUL
 * can only be asked for as "%00" or in base64, and both are refused here.
 * Not the E2B surface, whose paths are the sandbox's view (sandbox/vfs.h).
 */
#include <errno.h>
#include <string.h>

#include "api/api-internal.h"
#include "api/wire/wire.h"
#include "util/json.h"
#include "util/path.h"

int
api_path_nul_check(struct http_req *req)
{
    if (!http_req_nul_escaped(req))
        return 0;
    api_error_msg(req, 400, "bad_request", "a path cannot hold a NUL byte (%%00)");
    return -EINVAL;
}

int
api_body_path(json_t *j, const char *key, char *out, size_t outsz, struct err *err)
{
    _cleanup_buf_ struct buf raw;
    int r;

    /* The raw path may be one byte longer than a normalized one ("/a"). */
    buf_init(&raw, PATH_MAX_LEN + 1);
    r = json_get_name(j, key, true, &raw, err);
    if (r == -ENAMETOOLONG) {
        err_clear(err);
        return err_set(err, EINVAL, "'%s' is too long (%d bytes, %d per name at most)", key,
                       PATH_MAX_LEN, PATH_NAME_MAX);
    }
    if (r < 0)
        return r;
    r = path_normalize(raw.data, raw.len, out, outsz);
    if (r == -ENAMETOOLONG)
        return err_set(err, EINVAL, "'%s' is too long (%d bytes, %d per name at most)", key,
                       PATH_MAX_LEN, PATH_NAME_MAX);
    if (r < 0)
        return err_set(err, EINVAL, "'%s' must be a '/'-rooted path in the workspace, without '..'",
                       key);
    return 0;
}
