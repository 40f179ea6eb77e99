/* media.c — the request's media type (see http.h). */
#include <stdbool.h>
#include <string.h>
#include <strings.h>

#include "trigguard/http.h"

/* RFC 9110 token characters (media type parameter names and unquoted values). */
static bool is_tchar(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static const char *skip_ows(const char *p) {
    while (*p == ' ' || *p == '\t') {
        p++;
    }
    return p;
}

/* application/json, then only `OWS ";" OWS name=value` parameters (RFC 9110 §8.3.1). A
 * list ("application/json, text/plain") is not one media type, and the body is parsed as
 * UTF-8 whatever it claims, so a charset other than utf-8 is refused, not ignored. */
bool tg_http_content_type_is_json(const char *ct) {
    static const char want[] = "application/json";
    if (ct == NULL) {
        return false;
    }
    const char *p = skip_ows(ct);
    if (strncasecmp(p, want, sizeof want - 1) != 0) {
        return false;
    }
    p = skip_ows(p + sizeof want - 1);
    while (*p == ';') {
        p = skip_ows(p + 1);
        if (*p == '\0' || *p == ';') {
            continue; /* an empty parameter is allowed */
        }
        const char *name = p;
        while (is_tchar(*p)) {
            p++;
        }
        size_t name_len = (size_t)(p - name);
        if (name_len == 0 || *p != '=') {
            return false;
        }
        p++;
        char value[16];
        size_t vlen = 0;
        bool overflow = false;
        if (*p == '"') {
            for (p++; *p != '"'; p++) {
                if (*p == '\\' && p[1] != '\0') {
                    p++;
                } else if (*p == '\0' || (unsigned char)*p < 0x20 || *p == 0x7f) {
                    return false;
                }
                if (vlen < sizeof value - 1) {
                    value[vlen++] = *p;
                } else {
                    overflow = true;
                }
            }
            p++;
        } else {
            const char *v = p;
            while (is_tchar(*p)) {
                p++;
            }
            if (p == v) {
                return false;
            }
            overflow = (size_t)(p - v) >= sizeof value;
            vlen = overflow ? 0 : (size_t)(p - v);
            memcpy(value, v, vlen);
        }
        value[vlen] = '\0';
        if (name_len == 7 && strncasecmp(name, "charset", 7) == 0 &&
            (overflow || strcasecmp(value, "utf-8") != 0)) {
            return false;
        }
        p = skip_ows(p);
    }
    return *p == '\0';
}
