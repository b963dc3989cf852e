/* The status page's own files (daemon/ui/assets/), built into stageind so
 * that it serves everything the page loads and needs no install path. */
#ifndef STAGEIN_UI_ASSETS_H
#define STAGEIN_UI_ASSETS_H

#include <stddef.h>

typedef struct {
    const char *name;              /* "app.js" */
    const char *content_type;
    const unsigned char *data;
    size_t len;
} ui_asset_t;

/* NULL when there is no such file. */
const ui_asset_t *ui_asset_find(const char *name);

#endif
