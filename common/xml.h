/* S3's XML bodies read element by element with expat under size bounds:
 * the one reader of request bodies (stageind's S3 server) and of response
 * bodies (the S3 client: errors, listings, multipart uploads). Namespaces
 * are ignored (local names only). */
#ifndef SI_XML_H
#define SI_XML_H

#include <stddef.h>

#include "common/error.h"

#define SI_XML_DEPTH_MAX 8
#define SI_XML_TEXT_MAX (1024 * 6 + 16) /* an S3 key, escaped as numeric references */

typedef struct si_xml_state si_xml_state_t;

typedef struct {
    void *arg;            /* the caller's, for the callback */
    const char *code;     /* the error code si_xml_parse reports ("MalformedXML" unless a
                           * callback sets another before it stops the parse) */
    si_error_t *err;      /* where a callback says why it stops */
    si_xml_state_t *state;
} si_xml_ctx_t;

/* Called at the end of each element with its path ("Delete/Object/Key")
 * and text. Returns -1 (with x->err, maybe x->code, set) to stop. */
typedef int (*si_xml_element_fn)(si_xml_ctx_t *x, const char *path, const char *text, size_t len);

/* Parses body (at most max bytes), whose root element must be root,
 * calling on_end per element. -1 with *code and err on malformed XML, a
 * wrong root, nesting deeper than SI_XML_DEPTH_MAX, an element text over
 * SI_XML_TEXT_MAX or a callback's refusal. */
int si_xml_parse(const char *body, size_t len, size_t max, const char *root,
                 si_xml_element_fn on_end, void *arg, const char **code, si_error_t *err);

#endif
