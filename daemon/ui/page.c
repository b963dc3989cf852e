/* The status page's own files (built in: assets.c), served to a logged-in
 * viewer. */
#include "config.h"
#include "daemon/ui/internal.h"

#include "daemon/ui/assets.h"

static void serve_asset(http_request_t *req, const char *name)
{
    const ui_asset_t *a = ui_asset_find(name);
    if (!a) {
        http_respond_error(req, 404, "no file %.64s in the status page", name);
        return;
    }
    http_add_header(req, "Cache-Control", "no-cache");
    http_add_header(req, "X-Content-Type-Options", "nosniff");
    /* every file is ours: nothing may come from elsewhere */
    http_add_header(req, "Content-Security-Policy",
                    "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'");
    http_respond(req, 200, a->content_type, a->data, a->len);
}

void ui_on_index(http_request_t *req, void *arg)
{
    viewer_t v;
    if (ui_viewer_of(arg, req, true, &v))
        serve_asset(req, "index.html");
}

void ui_on_asset(http_request_t *req, void *arg)
{
    viewer_t v;
    if (ui_viewer_of(arg, req, true, &v))
        serve_asset(req, http_request_param(req, "file"));
}
