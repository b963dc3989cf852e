#include "config.h"
#include "common/xml.h"

#include <expat.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "common/strbuf.h"

struct si_xml_state {
    XML_Parser parser;
    const char *root;
    si_xml_element_fn on_end;
    int depth;
    char path[SI_XML_DEPTH_MAX * 64];
    size_t path_len[SI_XML_DEPTH_MAX + 1];
    si_strbuf_t text;
    bool failed;
};

static void stop(si_xml_ctx_t *x)
{
    x->state->failed = true;
    XML_StopParser(x->state->parser, XML_FALSE);
}

static void XMLCALL on_start(void *ud, const XML_Char *name, const XML_Char **attrs)
{
    (void)attrs;
    si_xml_ctx_t *x = ud;
    si_xml_state_t *st = x->state;
    if (st->failed)
        return;
    /* namespaced names arrive as "uri|Local" (the separator given to the parser) */
    const char *local = strrchr(name, '|');
    local = local ? local + 1 : name;
    if (st->depth == 0 && strcmp(local, st->root) != 0) {
        si_errprintf(x->err, "the root element is <%.64s>, expected <%s>", local, st->root);
        return stop(x);
    }
    if (st->depth >= SI_XML_DEPTH_MAX) {
        si_errprintf(x->err, "elements nested deeper than %d", SI_XML_DEPTH_MAX);
        return stop(x);
    }
    size_t at = st->path_len[st->depth];
    int n = snprintf(st->path + at, sizeof(st->path) - at, "%s%s", st->depth ? "/" : "", local);
    if (n < 0 || (size_t)n >= sizeof(st->path) - at) {
        si_errprintf(x->err, "element name too long");
        return stop(x);
    }
    st->depth++;
    st->path_len[st->depth] = at + (size_t)n;
    si_strbuf_reset(&st->text);
}

static void XMLCALL on_element_end(void *ud, const XML_Char *name)
{
    (void)name;
    si_xml_ctx_t *x = ud;
    si_xml_state_t *st = x->state;
    if (st->failed)
        return;
    if (st->text.failed) {
        si_errprintf(x->err, "the text of <%s> is longer than %d bytes", st->path,
                     SI_XML_TEXT_MAX);
        return stop(x);
    }
    if (st->on_end(x, st->path, si_strbuf_str(&st->text), st->text.len) < 0)
        return stop(x);
    st->depth--;
    st->path[st->path_len[st->depth]] = '\0';
    si_strbuf_reset(&st->text);
}

static void XMLCALL on_text(void *ud, const XML_Char *s, int len)
{
    si_xml_ctx_t *x = ud;
    if (!x->state->failed)
        si_strbuf_append(&x->state->text, s, (size_t)len);
}

int si_xml_parse(const char *body, size_t len, size_t max, const char *root,
                 si_xml_element_fn on_end, void *arg, const char **code, si_error_t *err)
{
    *code = "MalformedXML";
    if (len > max)
        return si_errprintf(err, "the XML body is %zu bytes, more than %zu", len, max);
    si_xml_state_t st = {.root = root, .on_end = on_end};
    si_xml_ctx_t x = {.arg = arg, .code = "MalformedXML", .err = err, .state = &st};
    si_strbuf_init(&st.text, SI_XML_TEXT_MAX);
    st.parser = XML_ParserCreateNS("UTF-8", '|');
    if (!st.parser) {
        *code = "InternalError";
        return si_errprintf(err, "out of memory");
    }
    XML_SetUserData(st.parser, &x);
    XML_SetElementHandler(st.parser, on_start, on_element_end);
    XML_SetCharacterDataHandler(st.parser, on_text);
    int rc = 0;
    if (XML_Parse(st.parser, body, (int)len, XML_TRUE) == XML_STATUS_ERROR || st.failed) {
        if (!st.failed)
            si_errprintf(err, "line %lu, column %lu: %s",
                         (unsigned long)XML_GetCurrentLineNumber(st.parser),
                         (unsigned long)XML_GetCurrentColumnNumber(st.parser),
                         XML_ErrorString(XML_GetErrorCode(st.parser)));
        *code = x.code;
        rc = -1;
    }
    XML_ParserFree(st.parser);
    si_strbuf_free(&st.text);
    return rc;
}
