/* limits.c — the bundle's stateful limits: compiled into the kernel's tables, and the key
 * and window of a frame's running total (policy.h "stateful limits"). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "policy_internal.h"
#include "trigguard/canon.h"
#include "trigguard/sha256.h"

/* "limits[i].<member>: <problem>" as TG_ERR_POLICY_INVALID. */
TG_PRINTF(4, 5)
static tg_err_t lfail(tg_diag_t *diag, size_t i, const char *member, const char *fmt, ...) {
    char msg[TG_DIAG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (member == NULL) {
        return tg_diag_set(diag, TG_ERR_POLICY_INVALID, "limits[%zu]: %s", i, msg);
    }
    return tg_diag_set(diag, TG_ERR_POLICY_INVALID, "limits[%zu].%s: %s", i, member, msg);
}

/* The declared type of context field `fid` in surface s's required_context; -1 when the
 * surface does not require it. */
static int required_type(const tg_surface_t *s, uint32_t fid) {
    for (uint32_t i = 0; i < s->n_required; i++) {
        if (s->required[i].id == fid) {
            return s->required[i].type;
        }
    }
    return -1;
}

/* A "context.<f>" reference that the surface requires with one of the types in `ok` (a bit
 * per tg_field_type_t): a limit reads it before the kernel checks anything, so a request
 * without it must be refused by MISSING_CONTEXT, never counted under an empty value. */
static tg_err_t context_ref(tg_diag_t *diag, size_t i, const char *member, const tg_policy_t *p,
                            const tg_surface_t *s, const json_t *v, unsigned ok, const char *want,
                            uint32_t *fid) {
    const char *txt = json_string_value(v);
    size_t n = json_string_length(v);
    if (n <= 8 || strncmp(txt, "context.", 8) != 0) {
        return lfail(diag, i, member, "\"%.64s\" is not a context.<field> reference", txt);
    }
    int t = tg_policy_find_field_(p, txt + 8, n - 8, fid) ? required_type(s, *fid) : -1;
    if (t < 0 || !(ok & (1u << (unsigned)t))) {
        return lfail(diag, i, member,
                     "%.64s must be in required_context of surface \"%s\" with type %s (a "
                     "request without it is then SILENCE MISSING_CONTEXT before any limit)",
                     txt, s->name.ptr, want);
    }
    return TG_OK;
}

static tg_err_t compile_key(tg_diag_t *diag, size_t i, const tg_policy_t *p, const tg_surface_t *s,
                            const json_t *key, tg_limit_spec_t *spec) {
    if (key == NULL) {
        return TG_OK; /* no key: one total for the surface per tenant */
    }
    if (!json_is_array(key)) {
        return lfail(diag, i, "key", "must be an array, not %s", tg_policy_json_type_(key));
    }
    if (json_array_size(key) > TG_LIMIT_KEY_PARTS) {
        return lfail(diag, i, "key", "%zu parts (limit %d)", json_array_size(key),
                     TG_LIMIT_KEY_PARTS);
    }
    for (size_t k = 0; k < json_array_size(key); k++) {
        const json_t *v = json_array_get(key, k);
        char member[32];
        snprintf(member, sizeof member, "key[%zu]", k);
        if (!json_is_string(v)) {
            return lfail(diag, i, member, "must be a string, not %s", tg_policy_json_type_(v));
        }
        const char *t = json_string_value(v);
        uint8_t src;
        uint32_t fid = 0;
        if (strcmp(t, "actor") == 0) {
            src = TG_LIMIT_KEY_ACTOR;
        } else if (strcmp(t, "tenant") == 0) {
            src = TG_LIMIT_KEY_TENANT;
        } else if (strcmp(t, "principal.subject") == 0) {
            src = TG_LIMIT_KEY_SUBJECT;
        } else if (strcmp(t, "principal.issuer") == 0) {
            src = TG_LIMIT_KEY_ISSUER;
        } else if (strncmp(t, "context.", 8) == 0) {
            src = TG_LIMIT_KEY_CONTEXT;
            tg_err_t rc =
                context_ref(diag, i, member, p, s, v, (1u << TG_FT_STRING) | (1u << TG_FT_NUMBER),
                            "string or number", &fid);
            if (rc) {
                return rc;
            }
        } else {
            return lfail(diag, i, member,
                         "\"%.64s\" is not a key part (actor, tenant, principal.subject, "
                         "principal.issuer, context.<field>)",
                         t);
        }
        for (uint32_t j = 0; j < spec->n_key; j++) {
            if (spec->key_src[j] == src && spec->key_field[j] == fid) {
                return lfail(diag, i, member, "\"%.64s\" appears twice", t);
            }
        }
        spec->key_src[spec->n_key] = src;
        spec->key_field[spec->n_key] = fid;
        spec->n_key++;
    }
    return TG_OK;
}

static tg_err_t compile_limit(tg_diag_t *diag, size_t i, tg_policy_t *p, const json_t *v,
                              tg_limit_t *l, tg_limit_spec_t *spec) {
    static const char *const allowed[] = {"id",  "surface", "key",      "sum",         "count",
                                          "max", "reason",  "window_s", "description", NULL};
    if (!json_is_object(v)) {
        return lfail(diag, i, NULL, "a limit must be an object, not %s", tg_policy_json_type_(v));
    }
    const char *mk;
    const json_t *mv;
    json_object_foreach((json_t *)(uintptr_t)v, mk, mv) {
        size_t a = 0;
        while (allowed[a] != NULL && strcmp(allowed[a], mk) != 0) {
            a++;
        }
        if (allowed[a] == NULL) {
            return lfail(diag, i, NULL,
                         "unknown member \"%.64s\" (expected id, surface, key, sum, count, "
                         "window_s, max, reason, description)",
                         mk);
        }
    }
    const json_t *id = json_object_get(v, "id");
    if (!json_is_string(id) || json_string_length(id) == 0 ||
        json_string_length(id) > TG_POLICY_MAX_NAME) {
        return lfail(diag, i, "id", "required: a name of 1..%d bytes", TG_POLICY_MAX_NAME);
    }
    for (size_t k = 0; k < json_string_length(id); k++) {
        unsigned char ch = (unsigned char)json_string_value(id)[k];
        if (ch < 0x20 || ch == 0x7f) {
            return lfail(diag, i, "id", "contains a control character");
        }
    }
    char *name = tg_policy_arena_alloc_(p, json_string_length(id) + 1);
    if (name == NULL) {
        return tg_diag_set(diag, TG_ERR_NOMEM, "out of memory compiling the policy");
    }
    memcpy(name, json_string_value(id), json_string_length(id));
    l->id = (tg_sv_t){name, (uint32_t)json_string_length(id)};
    for (size_t k = 0; k < i; k++) {
        if (tg_sv_lexcmp(p->tables.limits[k].id.ptr, p->tables.limits[k].id.len, name, l->id.len) ==
            0) {
            return lfail(diag, i, "id", "\"%.64s\" is also limits[%zu]'s id", name, k);
        }
    }
    const json_t *sv = json_object_get(v, "surface");
    if (!json_is_string(sv)) {
        return lfail(diag, i, "surface", "required: a surface name");
    }
    if (tg_policy_surface_find(&spec->surface, p, json_string_value(sv), json_string_length(sv)) !=
        TG_OK) {
        return lfail(diag, i, "surface", "no surface \"%.64s\" in surfaces", json_string_value(sv));
    }
    const tg_surface_t *s = &p->tables.surfaces[spec->surface];
    if (s->n_limits >= TG_FRAME_MAX_LIMITS) {
        return lfail(diag, i, "surface", "more than %d limits on surface \"%s\"",
                     TG_FRAME_MAX_LIMITS, s->name.ptr);
    }
    tg_err_t rc = compile_key(diag, i, p, s, json_object_get(v, "key"), spec);
    if (rc) {
        return rc;
    }
    const json_t *sum = json_object_get(v, "sum");
    const json_t *count = json_object_get(v, "count");
    if ((sum == NULL) == (count == NULL)) {
        return lfail(diag, i, NULL, "exactly one of \"sum\" and \"count\" is required");
    }
    if (count != NULL) {
        if (!json_is_true(count)) {
            return lfail(diag, i, "count", "must be true (or use \"sum\")");
        }
        l->kind = TG_LIMIT_COUNT;
    } else {
        if (!json_is_string(sum)) {
            return lfail(diag, i, "sum", "must be a context.<field> string, not %s",
                         tg_policy_json_type_(sum));
        }
        rc = context_ref(diag, i, "sum", p, s, sum, 1u << TG_FT_NUMBER, "number", &l->field);
        if (rc) {
            return rc;
        }
        l->kind = TG_LIMIT_SUM;
    }
    /* The strict parser reads every number as a double: an integer is one without a
     * fraction. */
    const json_t *w = json_object_get(v, "window_s");
    double ws = json_is_number(w) ? json_number_value(w) : 0;
    if (!(ws >= 1 && ws <= TG_LIMIT_WINDOW_MAX_S) || ws != (double)(int64_t)ws) {
        return lfail(diag, i, "window_s", "required: an integer 1..%d (seconds; 31 days at most)",
                     TG_LIMIT_WINDOW_MAX_S);
    }
    spec->window_s = (int64_t)ws;
    const json_t *mx = json_object_get(v, "max");
    double max = json_is_number(mx) ? json_number_value(mx) : -1;
    if (!json_is_number(mx) || !isfinite(max) || max < 0) {
        return lfail(diag, i, "max", "required: a finite number >= 0 (money: integer minor units)");
    }
    l->max = max;
    const json_t *rv = json_object_get(v, "reason");
    l->reason = TG_LIMIT_DEFAULT_REASON;
    if (rv != NULL) {
        if (!json_is_string(rv) ||
            !tg_reason_code_valid(json_string_value(rv), json_string_length(rv))) {
            return lfail(diag, i, "reason",
                         "must be an UPPER_SNAKE reason code ([A-Z][A-Z0-9_]*, "
                         "at most %d bytes)",
                         TG_REASON_MAX);
        }
        char *r = tg_policy_arena_alloc_(p, json_string_length(rv) + 1);
        if (r == NULL) {
            return tg_diag_set(diag, TG_ERR_NOMEM, "out of memory compiling the policy");
        }
        memcpy(r, json_string_value(rv), json_string_length(rv));
        l->reason = r;
    }
    const json_t *dv = json_object_get(v, "description");
    if (dv != NULL && !json_is_string(dv)) {
        return lfail(diag, i, "description", "must be a string, not %s", tg_policy_json_type_(dv));
    }
    return TG_OK;
}

tg_err_t tg_policy_compile_limits_(tg_policy_t *p, const json_t *limits, tg_diag_t *diag) {
    if (limits == NULL) {
        return TG_OK;
    }
    if (!json_is_array(limits)) {
        return tg_diag_set(diag, TG_ERR_POLICY_INVALID, "limits: must be an array, not %s",
                           tg_policy_json_type_(limits));
    }
    size_t n = json_array_size(limits);
    if (n > TG_POLICY_MAX_LIMITS) {
        return tg_diag_set(diag, TG_ERR_POLICY_INVALID, "limits: %zu limits (limit %d)", n,
                           TG_POLICY_MAX_LIMITS);
    }
    if (n == 0) {
        return TG_OK;
    }
    tg_limit_t *ls = tg_policy_arena_alloc_(p, n * sizeof *ls);
    tg_limit_spec_t *specs = tg_policy_arena_alloc_(p, n * sizeof *specs);
    /* One id array per surface, each with room for the most it may hold. */
    uint32_t *ids =
        tg_policy_arena_alloc_(p, (size_t)p->tables.n_surfaces * TG_FRAME_MAX_LIMITS * sizeof *ids);
    if (ls == NULL || specs == NULL || ids == NULL) {
        return tg_diag_set(diag, TG_ERR_NOMEM, "out of memory compiling the policy");
    }
    p->tables.limits = ls;
    p->limit_specs = specs;
    /* The surfaces are the arena's and writable until compile returns (policy_internal.h). */
    tg_surface_t *surfaces = (tg_surface_t *)(uintptr_t)p->tables.surfaces;
    for (uint32_t s = 0; s < p->tables.n_surfaces; s++) {
        surfaces[s].limits = ids + (size_t)s * TG_FRAME_MAX_LIMITS;
        surfaces[s].n_limits = 0;
    }
    for (size_t i = 0; i < n; i++) {
        p->tables.n_limits = (uint32_t)i; /* the ids before i, for the duplicate check */
        tg_err_t rc = compile_limit(diag, i, p, json_array_get(limits, i), &ls[i], &specs[i]);
        if (rc) {
            p->tables.n_limits = 0;
            return rc;
        }
        tg_surface_t *s = &surfaces[specs[i].surface];
        ids[(size_t)specs[i].surface * TG_FRAME_MAX_LIMITS + s->n_limits] = (uint32_t)i;
        s->n_limits++; /* ascending: limits are met in id order */
    }
    p->tables.n_limits = (uint32_t)n;
    return TG_OK;
}

/* ---- accessors and keys --------------------------------------------------------------- */

size_t tg_policy_limit_count(const tg_policy_t *p) { return p != NULL ? p->tables.n_limits : 0; }

const tg_limit_t *tg_policy_limit(const tg_policy_t *p, uint32_t id) {
    return p != NULL && id < p->tables.n_limits ? &p->tables.limits[id] : NULL;
}

tg_err_t tg_policy_limit_find(uint32_t *id, const tg_policy_t *p, const char *name, size_t len) {
    if (id == NULL || p == NULL || (name == NULL && len > 0)) {
        return TG_ERR_INVALID_ARG;
    }
    for (uint32_t i = 0; i < p->tables.n_limits; i++) {
        const tg_sv_t *n = &p->tables.limits[i].id;
        if (n->len == len && (len == 0 || memcmp(n->ptr, name, len) == 0)) {
            *id = i;
            return TG_OK;
        }
    }
    return TG_ERR_NOT_FOUND;
}

const uint32_t *tg_policy_surface_limits(const tg_policy_t *p, uint32_t index, uint32_t *n) {
    if (p == NULL || index >= p->tables.n_surfaces || p->tables.surfaces[index].n_limits == 0) {
        if (n != NULL) {
            *n = 0;
        }
        return NULL;
    }
    if (n != NULL) {
        *n = p->tables.surfaces[index].n_limits;
    }
    return p->tables.surfaces[index].limits;
}

int64_t tg_policy_limit_window_s(const tg_policy_t *p, uint32_t id) {
    return p != NULL && id < p->tables.n_limits ? p->limit_specs[id].window_s : 0;
}

/* Hashes one key part: type byte, 4-byte big-endian length, bytes. */
static void key_part(tg_sha256_ctx_t *h, uint8_t type, const char *s, uint32_t n) {
    uint8_t hdr[5] = {type, (uint8_t)(n >> 24), (uint8_t)(n >> 16), (uint8_t)(n >> 8), (uint8_t)n};
    tg_sha256_update(h, hdr, sizeof hdr);
    if (n > 0) {
        tg_sha256_update(h, s, n);
    }
}

static void key_sv(tg_sha256_ctx_t *h, tg_sv_t v) {
    key_part(h, v.ptr != NULL ? 1 : 0, v.ptr, v.ptr != NULL ? v.len : 0);
}

static const tg_value_t *context_value(const tg_frame_t *f, uint32_t fid) {
    uint32_t n = f->n_context < TG_FRAME_MAX_CONTEXT ? f->n_context : TG_FRAME_MAX_CONTEXT;
    for (uint32_t i = 0; i < n; i++) {
        if (f->context[i].id == fid) {
            return &f->context[i].v;
        }
    }
    return NULL;
}

static void key_value(tg_sha256_ctx_t *h, const tg_value_t *v) {
    char num[TG_CANON_NUMBER_MAX];
    size_t len = 0;
    /* Absent, and any other type (which the kernel refuses before any limit): part 0. */
    uint8_t type = 0;
    const char *bytes = NULL;
    if (v != NULL && v->type == TG_VT_STRING) {
        type = 1;
        bytes = v->str;
        len = v->len;
    } else if (v != NULL && v->type == TG_VT_NUMBER &&
               tg_canon_number(num, &len, v->num) == TG_OK) {
        type = 2;
        bytes = num;
    } else if (v != NULL && v->type == TG_VT_BOOL) {
        type = 3;
        bytes = v->boolean ? "true" : "false";
        len = v->boolean ? 4 : 5;
    } else {
        len = 0;
    }
    key_part(h, type, bytes, (uint32_t)len);
}

static const char KEY_TAG[] = "trigguard-limit-key-v1";

tg_err_t tg_policy_limit_key(uint8_t key[32], int64_t *window_start_s, const tg_policy_t *p,
                             uint32_t id, const tg_frame_t *f, int64_t now_ms) {
    if (key == NULL || window_start_s == NULL || p == NULL || f == NULL ||
        id >= p->tables.n_limits || now_ms < 0) {
        return TG_ERR_INVALID_ARG;
    }
    const tg_limit_spec_t *spec = &p->limit_specs[id];
    tg_sha256_ctx_t h;
    tg_sha256_init(&h);
    tg_sha256_update(&h, KEY_TAG, sizeof KEY_TAG); /* with NUL */
    key_sv(&h, f->tenant);
    for (uint32_t k = 0; k < spec->n_key; k++) {
        switch (spec->key_src[k]) {
        case TG_LIMIT_KEY_ACTOR:
            key_sv(&h, f->actor);
            break;
        case TG_LIMIT_KEY_TENANT:
            key_sv(&h, f->tenant);
            break;
        case TG_LIMIT_KEY_SUBJECT:
            key_sv(&h, f->principal_subject);
            break;
        case TG_LIMIT_KEY_ISSUER:
            key_sv(&h, f->principal_issuer);
            break;
        default:
            key_value(&h, context_value(f, spec->key_field[k]));
            break;
        }
    }
    tg_sha256_final(&h, key);
    int64_t now_s = now_ms / 1000;
    *window_start_s = now_s / spec->window_s * spec->window_s;
    return TG_OK;
}
