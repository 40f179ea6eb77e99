/* routes.c — the bundle's "routes": a request of the gate (GET|POST /v1/gate, in front of a
 * service) mapped to a decision request (docs/POLICY.md "Routes").
 *
 *   "routes": [{"method": "POST" | ["GET", "HEAD"] | "*", "path": "/deploy/{env}/<star>",
 *               "surface": "deploy.release", "action": "deploy",
 *               "context": {"target": "{env}", "ref": "header:X-Git-Ref", "kind": "web"}}]
 *
 * A path is '/'-separated segments: a literal, "{name}" (exactly one non-empty segment,
 * bound to name) or, last, <star> = "*" (any rest, even empty). The first route whose method and
 * path match decides the surface, the action (default: the method in lower case) and the
 * context: "{name}" is the bound segment, "header:NAME" the original request's header
 * (absent when not sent), anything else the literal text. Every value is a string.
 *
 * Fail closed on paths: a target that is not an absolute path, or whose path has an empty,
 * "." or ".." segment, a percent-encoded '/', '\' or '.', a backslash or a control byte,
 * matches no route (what the proxy forwards and what the gate decided could differ).
 * Compiled at load into a table of its own, beside the kernel's: routing is not a decision
 * and the kernel never sees it. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy_internal.h"

#define MAX_PATH 256 /* bytes of a route's path pattern */
#define MAX_SEGS 32  /* segments of a pattern */
#define MAX_CTX 32   /* context members of a route */
#define MAX_URI 8192 /* bytes of the original request target considered */

enum { SEG_LIT, SEG_PARAM };
enum { SRC_PARAM, SRC_HEADER, SRC_LITERAL };

typedef struct {
    uint8_t kind;
    char *text; /* literal, or the parameter's name */
} seg_t;

typedef struct {
    char *name;
    uint8_t src;
    char *text; /* parameter name, header name or literal */
} ctxmap_t;

struct tg_gate_route {
    unsigned methods; /* bit per method below; all bits = "*" */
    seg_t segs[MAX_SEGS];
    uint32_t n_segs;
    bool rest; /* ends in "*" */
    char *surface;
    char *action; /* NULL: the method in lower case */
    ctxmap_t ctx[MAX_CTX];
    uint32_t n_ctx;
};

static const char *const METHODS[] = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"};
#define N_METHODS (sizeof METHODS / sizeof METHODS[0])

static int method_bit(const char *m) {
    for (size_t i = 0; i < N_METHODS; i++) {
        if (strcmp(m, METHODS[i]) == 0) {
            return (int)i;
        }
    }
    return -1;
}

static char *dup_str(const char *s) {
    size_t n = strlen(s);
    char *d = malloc(n + 1);
    if (d != NULL) {
        memcpy(d, s, n + 1);
    }
    return d;
}

static void route_free(tg_gate_route_t *r) {
    for (uint32_t i = 0; i < r->n_segs; i++) {
        free(r->segs[i].text);
    }
    for (uint32_t i = 0; i < r->n_ctx; i++) {
        free(r->ctx[i].name);
        free(r->ctx[i].text);
    }
    free(r->surface);
    free(r->action);
}

void tg_policy_routes_free_(tg_policy_t *p) {
    for (uint32_t i = 0; i < p->n_routes; i++) {
        route_free(&p->routes[i]);
    }
    free(p->routes);
    p->routes = NULL;
    p->n_routes = 0;
}

static bool name_ok(const char *s, size_t n) {
    if (n == 0 || n > 64) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '-') {
            return false;
        }
    }
    return true;
}

static tg_err_t compile_path(tg_gate_route_t *r, const char *path, const char *where,
                             tg_diag_t *diag) {
    size_t n = strlen(path);
    if (n == 0 || n > MAX_PATH || path[0] != '/') {
        return tg_diag_set(diag, TG_ERR_POLICY_INVALID,
                           "%s.path: must start with '/' and have at most %d bytes", where,
                           MAX_PATH);
    }
    const char *s = path + 1;
    while (*s != '\0' || (s == path + 1 && n == 1)) {
        if (n == 1) {
            break; /* "/" alone: no segment */
        }
        const char *slash = strchr(s, '/');
        size_t len = slash ? (size_t)(slash - s) : strlen(s);
        if (r->rest) {
            return tg_diag_set(diag, TG_ERR_POLICY_INVALID, "%s.path: '*' must be the last segment",
                               where);
        }
        if (len == 1 && s[0] == '*') {
            r->rest = true;
        } else {
            if (r->n_segs == MAX_SEGS) {
                return tg_diag_set(diag, TG_ERR_POLICY_INVALID, "%s.path: more than %d segments",
                                   where, MAX_SEGS);
            }
            seg_t *g = &r->segs[r->n_segs];
            if (len >= 2 && s[0] == '{' && s[len - 1] == '}') {
                if (!name_ok(s + 1, len - 2)) {
                    return tg_diag_set(diag, TG_ERR_POLICY_INVALID,
                                       "%s.path: a parameter name is 1..64 of [A-Za-z0-9_-]",
                                       where);
                }
                g->kind = SEG_PARAM;
                g->text = strndup(s + 1, len - 2);
            } else {
                if (len == 0 || memchr(s, '{', len) || memchr(s, '}', len) || memchr(s, '*', len) ||
                    (len == 1 && s[0] == '.') || (len == 2 && s[0] == '.' && s[1] == '.')) {
                    return tg_diag_set(diag, TG_ERR_POLICY_INVALID,
                                       "%s.path: segment %u is empty, '.', '..' or mixes text "
                                       "with '{', '}' or '*'",
                                       where, r->n_segs + 1);
                }
                g->kind = SEG_LIT;
                g->text = strndup(s, len);
            }
            if (g->text == NULL) {
                return TG_ERR_NOMEM;
            }
            r->n_segs++;
        }
        if (slash == NULL) {
            break;
        }
        s = slash + 1;
        if (*s == '\0') {
            return tg_diag_set(diag, TG_ERR_POLICY_INVALID, "%s.path: a trailing '/'", where);
        }
    }
    return TG_OK;
}

static bool has_param(const tg_gate_route_t *r, const char *name) {
    for (uint32_t i = 0; i < r->n_segs; i++) {
        if (r->segs[i].kind == SEG_PARAM && strcmp(r->segs[i].text, name) == 0) {
            return true;
        }
    }
    return false;
}

static tg_err_t compile_route(tg_policy_t *p, tg_gate_route_t *r, const json_t *v,
                              const char *where, tg_diag_t *diag) {
    if (!json_is_object(v)) {
        return tg_diag_set(diag, TG_ERR_POLICY_INVALID, "%s: must be an object", where);
    }
    const char *key;
    const json_t *val;
    static const char *const members[] = {"method", "path",    "surface",
                                          "action", "context", "description"};
    json_object_foreach((json_t *)v, key, val) {
        bool known = false;
        for (size_t i = 0; i < sizeof members / sizeof members[0] && !known; i++) {
            known = strcmp(key, members[i]) == 0;
        }
        if (!known) {
            return tg_diag_set(diag, TG_ERR_POLICY_INVALID,
                               "%s.%s: unknown member (method, path, surface, action, context, "
                               "description)",
                               where, key);
        }
    }
    const json_t *m = json_object_get(v, "method");
    if (m == NULL || (json_is_string(m) && strcmp(json_string_value(m), "*") == 0)) {
        r->methods = (1u << N_METHODS) - 1;
    } else if (json_is_string(m) || (json_is_array(m) && json_array_size(m) > 0)) {
        size_t n = json_is_string(m) ? 1 : json_array_size(m);
        for (size_t i = 0; i < n; i++) {
            const json_t *e = json_is_string(m) ? m : json_array_get(m, i);
            int b = json_is_string(e) ? method_bit(json_string_value(e)) : -1;
            if (b < 0) {
                return tg_diag_set(diag, TG_ERR_POLICY_INVALID,
                                   "%s.method: GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS or "
                                   "\"*\"",
                                   where);
            }
            r->methods |= 1u << b;
        }
    } else {
        return tg_diag_set(diag, TG_ERR_POLICY_INVALID,
                           "%s.method: a method, a non-empty list of them, or \"*\"", where);
    }
    const json_t *path = json_object_get(v, "path");
    if (!json_is_string(path)) {
        return tg_diag_set(diag, TG_ERR_POLICY_INVALID, "%s.path: required, a string", where);
    }
    tg_err_t rc = compile_path(r, json_string_value(path), where, diag);
    if (rc != TG_OK) {
        return rc;
    }
    const json_t *sf = json_object_get(v, "surface");
    uint32_t sid;
    if (!json_is_string(sf) ||
        tg_policy_surface_find(&sid, p, json_string_value(sf), json_string_length(sf)) != TG_OK) {
        return tg_diag_set(diag, TG_ERR_POLICY_INVALID, "%s.surface: must name a surface", where);
    }
    r->surface = dup_str(json_string_value(sf));
    const json_t *ac = json_object_get(v, "action");
    if (ac != NULL) {
        if (!json_is_string(ac) || json_string_length(ac) == 0 ||
            json_string_length(ac) > TG_POLICY_MAX_NAME) {
            return tg_diag_set(diag, TG_ERR_POLICY_INVALID, "%s.action: 1..%d bytes of text", where,
                               TG_POLICY_MAX_NAME);
        }
        r->action = dup_str(json_string_value(ac));
    }
    const json_t *ctx = json_object_get(v, "context");
    if (ctx != NULL && !json_is_object(ctx)) {
        return tg_diag_set(diag, TG_ERR_POLICY_INVALID, "%s.context: must be an object", where);
    }
    if (ctx != NULL && json_object_size(ctx) > MAX_CTX) {
        return tg_diag_set(diag, TG_ERR_POLICY_INVALID, "%s.context: more than %d members", where,
                           MAX_CTX);
    }
    json_object_foreach((json_t *)ctx, key, val) {
        ctxmap_t *c = &r->ctx[r->n_ctx];
        const char *t = json_is_string(val) ? json_string_value(val) : NULL;
        size_t tl = t != NULL ? strlen(t) : 0;
        if (t == NULL || tl == 0 || tl > TG_POLICY_MAX_VALUE) {
            return tg_diag_set(diag, TG_ERR_POLICY_INVALID,
                               "%s.context.%s: a string: \"{param}\", \"header:NAME\" or text",
                               where, key);
        }
        c->name = dup_str(key);
        if (tl >= 3 && t[0] == '{' && t[tl - 1] == '}') {
            c->src = SRC_PARAM;
            c->text = strndup(t + 1, tl - 2);
            if (c->text != NULL && !has_param(r, c->text)) {
                r->n_ctx++;
                return tg_diag_set(diag, TG_ERR_POLICY_INVALID,
                                   "%s.context.%s: the path has no parameter {%s}", where, key,
                                   c->text);
            }
        } else if (strncmp(t, "header:", 7) == 0) {
            c->src = SRC_HEADER;
            c->text = dup_str(t + 7);
            if (!name_ok(t + 7, tl - 7)) {
                r->n_ctx++;
                return tg_diag_set(diag, TG_ERR_POLICY_INVALID,
                                   "%s.context.%s: a header name is 1..64 of [A-Za-z0-9_-]", where,
                                   key);
            }
        } else {
            c->src = SRC_LITERAL;
            c->text = dup_str(t);
        }
        r->n_ctx++;
        if (c->name == NULL || c->text == NULL) {
            return TG_ERR_NOMEM;
        }
    }
    return r->surface != NULL && (ac == NULL || r->action != NULL) ? TG_OK : TG_ERR_NOMEM;
}

tg_err_t tg_policy_routes_compile_(tg_policy_t *p, const json_t *routes, tg_diag_t *diag) {
    if (routes == NULL) {
        return TG_OK;
    }
    if (!json_is_array(routes) || json_array_size(routes) > TG_POLICY_MAX_ROUTES) {
        return tg_diag_set(diag, TG_ERR_POLICY_INVALID, "routes: an array of at most %d routes",
                           TG_POLICY_MAX_ROUTES);
    }
    size_t n = json_array_size(routes);
    p->routes = calloc(n ? n : 1, sizeof *p->routes);
    if (p->routes == NULL) {
        return TG_ERR_NOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        char where[32];
        (void)snprintf(where, sizeof where, "routes[%zu]", i);
        p->n_routes++;
        tg_err_t rc = compile_route(p, &p->routes[i], json_array_get(routes, i), where, diag);
        if (rc != TG_OK) {
            if (rc == TG_ERR_NOMEM) {
                (void)tg_diag_set(diag, rc, "out of memory compiling the routes");
            }
            return rc;
        }
    }
    return TG_OK;
}

size_t tg_policy_route_count(const tg_policy_t *p) { return p->n_routes; }

static int hexv(char c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* The path of an origin-form target, split into segments, or false when it is not one the
 * gate may decide on (header comment). Segments point into buf. */
static bool split_path(char *buf, const char *uri, const char **segs, uint32_t *n) {
    size_t len = strcspn(uri, "?#");
    if (len == 0 || len > MAX_URI || uri[0] != '/') {
        return false;
    }
    memcpy(buf, uri, len);
    buf[len] = '\0';
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)buf[i];
        if (c < 0x21 || c == 0x7f || c == '\\') {
            return false;
        }
        if (c == '%') {
            int hi = i + 2 < len + 1 ? hexv(buf[i + 1]) : -1;
            int lo = hi >= 0 ? hexv(buf[i + 2]) : -1;
            if (hi < 0 || lo < 0) {
                return false;
            }
            int v = hi * 16 + lo;
            if (v == '/' || v == '\\' || v == '.' || v < 0x20 || v == 0x7f) {
                return false;
            }
        }
    }
    *n = 0;
    if (len == 1) {
        return true; /* "/" */
    }
    char *s = buf + 1;
    for (;;) {
        char *slash = strchr(s, '/');
        if (slash != NULL) {
            *slash = '\0';
        }
        if (*s == '\0' || strcmp(s, ".") == 0 || strcmp(s, "..") == 0 || *n == MAX_URI / 2) {
            return false;
        }
        segs[(*n)++] = s;
        if (slash == NULL) {
            return true;
        }
        s = slash + 1;
    }
}

static bool route_matches(const tg_gate_route_t *r, int mb, const char *const *segs, uint32_t n) {
    if (!(r->methods & (1u << mb)) || n < r->n_segs || (!r->rest && n != r->n_segs)) {
        return false;
    }
    for (uint32_t i = 0; i < r->n_segs; i++) {
        if (r->segs[i].kind == SEG_LIT && strcmp(r->segs[i].text, segs[i]) != 0) {
            return false;
        }
    }
    return true;
}

static const char *param_value(const tg_gate_route_t *r, const char *name,
                               const char *const *segs) {
    for (uint32_t i = 0; i < r->n_segs; i++) {
        if (r->segs[i].kind == SEG_PARAM && strcmp(r->segs[i].text, name) == 0) {
            return segs[i];
        }
    }
    return NULL;
}

tg_err_t tg_policy_route_request(json_t **out, const tg_policy_t *p, const char *method,
                                 const char *uri, tg_header_fn header, void *ud, tg_diag_t *diag) {
    *out = NULL;
    int mb = method != NULL ? method_bit(method) : -1;
    if (mb < 0 || uri == NULL) {
        return tg_diag_set(diag, TG_ERR_NOT_FOUND, "the original method is not one a route names");
    }
    char *buf = malloc(MAX_URI + 1);
    const char **segs = malloc(sizeof *segs * (MAX_URI / 2 + 1));
    tg_err_t rc = TG_OK;
    uint32_t n = 0;
    if (buf == NULL || segs == NULL) {
        rc = TG_ERR_NOMEM;
    } else if (!split_path(buf, uri, segs, &n)) {
        rc = tg_diag_set(
            diag, TG_ERR_NOT_FOUND,
            "the original path is not a plain absolute path (empty, '.' or '..' "
            "segments, encoded '/', '\\\\' or '.', control bytes): no route decides it");
    }
    const tg_gate_route_t *r = NULL;
    for (uint32_t i = 0; rc == TG_OK && i < p->n_routes && r == NULL; i++) {
        r = route_matches(&p->routes[i], mb, segs, n) ? &p->routes[i] : NULL;
    }
    if (rc == TG_OK && r == NULL) {
        rc = tg_diag_set(diag, TG_ERR_NOT_FOUND, "no route maps %s to a surface", method);
    }
    json_t *req = NULL, *ctx = NULL;
    if (rc == TG_OK && r != NULL) {
        char action[16];
        size_t i = 0;
        for (; method[i] != '\0' && i < sizeof action - 1; i++) {
            action[i] = (char)tolower((unsigned char)method[i]);
        }
        action[i] = '\0';
        req = json_object();
        ctx = json_object();
        if (req == NULL || ctx == NULL ||
            json_object_set_new(req, "surface", json_string(r->surface)) != 0 ||
            json_object_set_new(req, "action", json_string(r->action ? r->action : action)) != 0) {
            rc = TG_ERR_NOMEM;
        }
    }
    for (uint32_t i = 0; rc == TG_OK && r != NULL && i < r->n_ctx; i++) {
        const ctxmap_t *c = &r->ctx[i];
        const char *v = c->src == SRC_PARAM    ? param_value(r, c->text, segs)
                        : c->src == SRC_HEADER ? (header != NULL ? header(ud, c->text) : NULL)
                                               : c->text;
        if (v == NULL) {
            continue; /* absent: the surface's required_context decides what that means */
        }
        json_t *s = json_string(v); /* NULL for invalid UTF-8 (a header's bytes) */
        if (s == NULL) {
            rc = tg_diag_set(diag, TG_ERR_REQUEST_INVALID, "the value for context.%s is not UTF-8",
                             c->name);
        } else if (json_object_set_new(ctx, c->name, s) != 0) {
            rc = TG_ERR_NOMEM;
        }
    }
    if (rc == TG_OK && json_object_size(ctx) > 0) {
        rc = json_object_set(req, "context", ctx) != 0 ? TG_ERR_NOMEM : TG_OK;
    }
    json_decref(ctx);
    if (rc == TG_OK) {
        *out = req;
    } else {
        json_decref(req);
    }
    free(buf);
    free(segs);
    return rc;
}
