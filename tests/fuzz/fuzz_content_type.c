/* fuzz_content_type.c — Content-Type header value → tg_http_content_type_is_json: never
 * crash or read past the value, deterministic, and an accepted value is application/json
 * followed by parameters only: no list, no other type, no charset but utf-8. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "trigguard/http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The value as libmicrohttpd hands it over: NUL-terminated, cut at the first NUL. */
static char *as_header(const uint8_t *data, size_t size) {
    char *s = malloc(size + 1);
    if (s == NULL) {
        abort();
    }
    memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

/* An unquoted charset parameter (after a ';' outside quotes) that does not name utf-8. */
static bool charset_not_utf8(const char *q) {
    while (*q == ' ' || *q == '\t') {
        q++;
    }
    if (strncasecmp(q, "charset=", 8) != 0 || q[8] == '"') {
        return false;
    }
    return strncasecmp(q + 8, "utf-8", 5) != 0 ||
           (q[13] != '\0' && q[13] != ';' && q[13] != ' ' && q[13] != '\t');
}

/* Of an accepted value: a comma outside a quoted string (a list), or a bad charset. */
static bool broken_outside_quotes(const char *s) {
    bool quoted = false;
    for (const char *p = s; *p; p++) {
        if (quoted && *p == '\\' && p[1] != '\0') {
            p++;
        } else if (*p == '"') {
            quoted = !quoted;
        } else if (!quoted && *p == ',') {
            return true;
        } else if (!quoted && *p == ';' && charset_not_utf8(p + 1)) {
            return true;
        }
    }
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *ct = as_header(data, size);
    bool ok = tg_http_content_type_is_json(ct);
    if (tg_http_content_type_is_json(ct) != ok) {
        abort();
    }
    if (ok) {
        const char *p = ct;
        while (*p == ' ' || *p == '\t') {
            p++;
        }
        if (strncasecmp(p, "application/json", 16) != 0) {
            abort();
        }
        char next = p[16];
        if (next != '\0' && next != ';' && next != ' ' && next != '\t') {
            abort(); /* application/jsonp, application/json-patch+json, ... */
        }
        if (broken_outside_quotes(ct)) {
            abort();
        }
    }
    free(ct);
    return 0;
}
