/* fuzz_gate.c — the gate's routing (policy.h tg_policy_route_request) on hostile original
 * requests: input lines are the method, the target, then header values (X-Git-Ref, X-Env).
 * It must never crash or leak, and what it accepts must be what the routes promise: a
 * target whose path has a "." or ".." segment, an empty segment, a backslash, a control byte
 * or an encoded '/', '\' or '.' never maps; a mapped request is an object with the route's
 * surface whose context values are strings. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "trigguard/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char BUNDLE[] =
    "{\"version\":\"fuzz\",\"surfaces\":{\"s\":{\"tier\":3,\"default\":\"permit\"},"
    "\"d\":{\"tier\":2,\"required_context\":{\"target\":\"string\"}}},"
    "\"routes\":[{\"method\":\"POST\",\"path\":\"/deploy/{target}/{version}\",\"surface\":\"d\","
    "\"context\":{\"target\":\"{target}\",\"version\":\"{version}\",\"ref\":\"header:X-Git-Ref\"}},"
    "{\"method\":[\"GET\",\"HEAD\"],\"path\":\"/docs/*\",\"surface\":\"s\","
    "\"context\":{\"env\":\"header:X-Env\",\"kind\":\"docs\"}},"
    "{\"path\":\"/\",\"surface\":\"s\"}]}";

typedef struct {
    const char *ref, *env;
} hdrs_t;

static const char *header(void *ud, const char *name) {
    const hdrs_t *h = ud;
    return strcmp(name, "X-Git-Ref") == 0 ? h->ref : strcmp(name, "X-Env") == 0 ? h->env : NULL;
}

/* The path part of uri has a segment the gate must refuse. */
static int unsafe(const char *uri) {
    size_t len = strcspn(uri, "?#");
    if (len == 0 || uri[0] != '/') {
        return 1;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)uri[i];
        if (c < 0x21 || c == 0x7f || c == '\\') {
            return 1;
        }
        if (c == '/' && i + 1 < len && uri[i + 1] == '/') {
            return 1;
        }
        if (c == '/' && i + 1 < len && uri[i + 1] == '.' &&
            (i + 2 == len || uri[i + 2] == '/' ||
             (uri[i + 2] == '.' && (i + 3 == len || uri[i + 3] == '/')))) {
            return 1;
        }
        if (c == '%' && i + 2 < len) {
            char h[3] = {uri[i + 1], uri[i + 2], 0};
            long v = strtol(h, NULL, 16);
            if (v == '/' || v == '\\' || v == '.') {
                return 1;
            }
        }
    }
    return len > 1 && uri[len - 1] == '/';
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static tg_policy_t *p;
    if (p == NULL && tg_policy_load_text(&p, BUNDLE, sizeof BUNDLE - 1, NULL) != TG_OK) {
        abort();
    }
    char *text = malloc(size + 1);
    if (text == NULL) {
        return 0;
    }
    memcpy(text, data, size);
    text[size] = '\0';
    const char *fields[4] = {"", "", NULL, NULL};
    char *s = text;
    for (int i = 0; i < 4 && s != NULL; i++) {
        char *nl = strchr(s, '\n');
        if (nl != NULL) {
            *nl = '\0';
        }
        fields[i] = s;
        s = nl != NULL ? nl + 1 : NULL;
    }
    hdrs_t h = {fields[2], fields[3]};
    json_t *req = NULL;
    tg_err_t rc = tg_policy_route_request(&req, p, fields[0], fields[1], header, &h, NULL);
    if (rc == TG_OK) {
        const char *sf = json_string_value(json_object_get(req, "surface"));
        if (unsafe(fields[1]) || sf == NULL || (strcmp(sf, "s") != 0 && strcmp(sf, "d") != 0)) {
            abort();
        }
        const char *k;
        json_t *v;
        json_object_foreach(json_object_get(req, "context"), k, v) {
            if (!json_is_string(v)) {
                abort();
            }
        }
    } else if (rc != TG_ERR_NOT_FOUND && rc != TG_ERR_REQUEST_INVALID && rc != TG_ERR_NOMEM) {
        abort();
    } else if (req != NULL) {
        abort();
    }
    json_decref(req);
    free(text);
    return 0;
}
