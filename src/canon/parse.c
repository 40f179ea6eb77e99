/* parse.c — strict JSON parsing with jansson: error mapping, limits walk, precise diagnostics. */
#include <string.h>

#include "canon_int.h"
#include "trigguard/canon.h"

/* Line and column (1-based, in bytes) of byte offset off. Only used on error paths. */
static void locate(size_t *line, size_t *col, const char *text, size_t off) {
    size_t l = 1, bol = 0;
    for (size_t i = 0; i < off; i++) {
        if (text[i] == '\n') {
            l++;
            bol = i + 1;
        }
    }
    *line = l;
    *col = off - bol + 1;
}

static tg_err_t utf8_error(const char *text, size_t len, const json_error_t *je, tg_diag_t *diag) {
    const unsigned char *p = (const unsigned char *)text;
    size_t i = 0;
    tg_err_t rc = TG_ERR_JSON_UTF8;
    while (i < len) {
        size_t k = tg_canon_utf8_seq(p + i, len - i, &rc);
        if (k == 0) {
            size_t line, col;
            locate(&line, &col, text, i);
            return tg_diag_set(diag, rc, "%s (byte 0x%02x) at line %zu, column %zu, byte %zu",
                               rc == TG_ERR_JSON_SURROGATE ? "UTF-8-encoded surrogate"
                                                           : "invalid UTF-8",
                               p[i], line, col, i);
        }
        i += k;
    }
    /* jansson saw something our validator accepts: still invalid, keep its position. */
    return tg_diag_set(diag, TG_ERR_JSON_UTF8, "invalid UTF-8 at line %d, column %d, byte %d: %s",
                       je->line, je->column, je->position, je->text);
}

static tg_err_t map_error(const char *text, size_t len, const json_error_t *je, tg_diag_t *diag) {
    tg_err_t rc;
    switch (json_error_code(je)) {
    case json_error_out_of_memory:
        rc = TG_ERR_NOMEM;
        break;
    case json_error_unknown:
        /* jansson 2.14 returns NULL without setting an error when an allocation fails in the
         * lexer or while building the tree (other allocation failures surface as syntax
         * errors: a rejection either way). */
        return tg_diag_set(diag, TG_ERR_NOMEM, "out of memory parsing JSON");
    case json_error_stack_overflow:
        rc = TG_ERR_JSON_DEPTH;
        break;
    case json_error_invalid_utf8:
        return utf8_error(text, len, je, diag);
    case json_error_duplicate_key:
        rc = TG_ERR_JSON_DUPLICATE_KEY;
        break;
    case json_error_numeric_overflow:
        rc = TG_ERR_JSON_NONFINITE;
        break;
    case json_error_invalid_syntax:
        /* jansson reports \uD800-\uDFFF escapes without their pair as "invalid Unicode". */
        rc = strncmp(je->text, "invalid Unicode", 15) == 0 ? TG_ERR_JSON_SURROGATE
                                                           : TG_ERR_JSON_SYNTAX;
        break;
    case json_error_null_character:
    case json_error_null_byte_in_key:
        /* Valid JSON, but a NUL inside a C string truncates it: refused on purpose. */
        return tg_diag_set(diag, TG_ERR_JSON_SYNTAX,
                           "\\u0000 is not accepted in strings or member names "
                           "(line %d, column %d, byte %d)",
                           je->line, je->column, je->position);
    default: /* premature end, trailing data, anything unexpected: still a rejection */
        rc = TG_ERR_JSON_SYNTAX;
        break;
    }
    return tg_diag_set(diag, rc, "%s at line %d, column %d, byte %d: %s", tg_strerror(rc), je->line,
                       je->column, je->position, je->text);
}

static tg_err_t limit_error(tg_err_t rc, tg_diag_t *diag, const tg_jpath_t *path, const char *what,
                            size_t have, size_t max) {
    char where[160];
    tg_canon_path_format(where, sizeof where, path);
    return tg_diag_set(diag, rc, "%s at %s: %zu, limit %zu", what, where, have, max);
}

/* jansson has already bounded recursion (2048); this walk enforces the configured limits. */
static tg_err_t check_tree(const json_t *v, size_t depth, const tg_jpath_t *path,
                           const tg_json_limits_t *lim, tg_diag_t *diag) {
    tg_err_t rc;
    switch (json_typeof(v)) {
    case JSON_STRING:
        if (json_string_length(v) > lim->max_string) {
            return limit_error(TG_ERR_JSON_STRING_LONG, diag, path, "string length in bytes",
                               json_string_length(v), lim->max_string);
        }
        return TG_OK;
    case JSON_ARRAY:
        if (depth + 1 > lim->max_depth) {
            return limit_error(TG_ERR_JSON_DEPTH, diag, path, "nesting depth", depth + 1,
                               lim->max_depth);
        }
        for (size_t i = 0; i < json_array_size(v); i++) {
            tg_jpath_t step = {path, NULL, 0, i};
            rc = check_tree(json_array_get(v, i), depth + 1, &step, lim, diag);
            if (rc) {
                return rc;
            }
        }
        return TG_OK;
    case JSON_OBJECT: {
        if (depth + 1 > lim->max_depth) {
            return limit_error(TG_ERR_JSON_DEPTH, diag, path, "nesting depth", depth + 1,
                               lim->max_depth);
        }
        if (json_object_size(v) > lim->max_keys) {
            return limit_error(TG_ERR_JSON_MEMBERS, diag, path, "members in object",
                               json_object_size(v), lim->max_keys);
        }
        json_t *obj = (json_t *)(uintptr_t)v; /* iteration does not modify */
        for (void *it = json_object_iter(obj); it != NULL; it = json_object_iter_next(obj, it)) {
            tg_jpath_t step = {path, json_object_iter_key(it), json_object_iter_key_len(it), 0};
            if (step.klen > lim->max_string) {
                return limit_error(TG_ERR_JSON_NAME_LONG, diag, &step,
                                   "member name length in bytes", step.klen, lim->max_string);
            }
            rc = check_tree(json_object_iter_value(it), depth + 1, &step, lim, diag);
            if (rc) {
                return rc;
            }
        }
        return TG_OK;
    }
    default:
        return TG_OK;
    }
}

tg_err_t tg_json_parse(json_t **out, const char *text, size_t len, const tg_json_limits_t *lim,
                       tg_diag_t *diag) {
    if (out == NULL || (text == NULL && len > 0)) {
        return tg_diag_set(diag, TG_ERR_INVALID_ARG, "tg_json_parse: NULL argument");
    }
    *out = NULL;
    tg_json_limits_t l = lim != NULL ? *lim : TG_JSON_LIMITS_DEFAULT;
    if (len > l.max_bytes) {
        return tg_diag_set(diag, TG_ERR_JSON_TOO_LARGE, "JSON text is %zu bytes, limit %zu", len,
                           l.max_bytes);
    }
    /* jansson stops reading at a raw NUL byte and would accept "{}\0anything". */
    const char *nul = len > 0 ? memchr(text, '\0', len) : NULL;
    if (nul != NULL) {
        size_t line, col, off = (size_t)(nul - text);
        locate(&line, &col, text, off);
        return tg_diag_set(diag, TG_ERR_JSON_SYNTAX,
                           "raw NUL byte at line %zu, column %zu, byte %zu", line, col, off);
    }
    /* jansson fills je only on the errors it reports. On some allocation failures (lexer
     * set-up, tree building) it returns NULL having set nothing but text[0], and
     * json_error_code() then reads text[JSON_ERROR_TEXT_LENGTH - 1], never written:
     * whatever the stack held, e.g. "duplicate key" for an out-of-memory. Zeroed, that
     * byte reads json_error_unknown, which map_error treats as out of memory. */
    json_error_t je;
    memset(&je, 0, sizeof je);
    json_t *v = json_loadb(len > 0 ? text : "", len,
                           JSON_REJECT_DUPLICATES | JSON_DECODE_INT_AS_REAL | JSON_DECODE_ANY, &je);
    if (v == NULL) {
        return map_error(text, len, &je, diag);
    }
    tg_err_t rc = check_tree(v, 0, NULL, &l, diag);
    if (rc) {
        json_decref(v);
        return rc;
    }
    *out = v;
    return TG_OK;
}
