/* policy.c — validate a policy bundle and compile it into the kernel's flat tables. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "policy_internal.h"
#include "trigguard/approval.h"
#include "trigguard/canon.h"
#include "trigguard/guard.h"
#include "trigguard/io.h"
#include "trigguard/policy.h"
#include "trigguard/tzif.h"

/* ---- arena: every compiled table and string, freed at once ---------------------------- */

struct tg_arena_chunk {
    tg_arena_chunk_t *next;
    size_t used;
    size_t cap;
    _Alignas(16) unsigned char data[];
};

#define ARENA_CHUNK ((size_t)16 * 1024)

static void *arena_alloc(tg_policy_t *p, size_t n) {
    n = (n + 15u) & ~(size_t)15u;
    tg_arena_chunk_t *c = p->arena;
    if (c == NULL || c->cap - c->used < n) {
        size_t cap = n > ARENA_CHUNK ? n : ARENA_CHUNK;
        c = malloc(sizeof *c + cap);
        if (c == NULL) {
            return NULL;
        }
        c->next = p->arena;
        c->used = 0;
        c->cap = cap;
        p->arena = c;
    }
    void *r = c->data + c->used;
    c->used += n;
    memset(r, 0, n);
    return r;
}

void *tg_policy_arena_alloc_(tg_policy_t *p, size_t n) { return arena_alloc(p, n); }

/* ---- name index ----------------------------------------------------------------------- */

static uint64_t fnv1a(const char *s, size_t n) {
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= UINT64_C(0x100000001b3);
    }
    return h;
}

/* Tables index arrays of structs whose first member is the name (tg_sv_t). */
static const tg_sv_t *name_at(const void *base, size_t stride, uint32_t id) {
    return (const tg_sv_t *)(const void *)((const char *)base + (size_t)id * stride);
}

static int htab_init(tg_policy_t *p, tg_htab_t *h, uint32_t n) {
    uint32_t cap = 8;
    while (cap < 2 * n) {
        cap *= 2;
    }
    h->slots = arena_alloc(p, (size_t)cap * sizeof *h->slots);
    h->mask = cap - 1;
    return h->slots != NULL;
}

static int htab_get(const tg_htab_t *h, const void *base, size_t stride, const char *s, size_t n,
                    uint32_t *id) {
    if (h->slots == NULL || n > UINT32_MAX) {
        return 0;
    }
    uint32_t i = (uint32_t)fnv1a(s, n) & h->mask;
    for (;;) {
        uint32_t slot = h->slots[i];
        if (slot == 0) {
            return 0;
        }
        const tg_sv_t *nm = name_at(base, stride, slot - 1);
        if (nm->len == n && memcmp(nm->ptr, s, n) == 0) {
            *id = slot - 1;
            return 1;
        }
        i = (i + 1) & h->mask;
    }
}

static void htab_put(tg_htab_t *h, const void *base, size_t stride, uint32_t id) {
    const tg_sv_t *nm = name_at(base, stride, id);
    uint32_t i = (uint32_t)fnv1a(nm->ptr, nm->len) & h->mask;
    while (h->slots[i] != 0) {
        i = (i + 1) & h->mask;
    }
    h->slots[i] = id + 1;
}

/* ---- compile context: JSON path and first error ------------------------------------- */

typedef struct cc {
    tg_policy_t *p;
    tg_diag_t *diag;
    tg_err_t err;
    size_t path_len;
    char path[384];
    /* Compile-time scratch (freed after compile). */
    const json_t *groups;   /* "actors" object or NULL */
    tg_sv_t *fields;        /* = p->tables.fields, capacity TG_POLICY_MAX_FIELDS */
    tg_sv_t *claims;        /* = p->tables.claims, capacity TG_POLICY_MAX_CLAIMS */
    tg_surface_t *surfaces; /* writable views of p's tables */
    tg_signal_t *signals;
    double tier_threshold[4];
    /* time.* and data sets (the "Time" / "Data sets" section below) */
    const tg_policy_opts_t *opts;
    tg_zone_t *zones;  /* = p->tables.zones, capacity TG_POLICY_MAX_ZONES */
    uint32_t zone_cur; /* the zone of the surface being compiled */
    uint32_t zone_bundle;
    struct cset *sets; /* compiled data sets, by name order */
    uint32_t n_sets;
    const json_t *bundle;
    json_t *hashed;    /* NULL, or the bundle with each file set's "sha256" (what is hashed) */
    size_t cond_nodes; /* conditions of the rule being compiled, groups and members */
    size_t cond_depth; /* groups around the condition being compiled */
} cc_t;

static const char RISK_SCORE[] = "riskScore";

/* Copies at most 64 bytes of s into out with control characters as '?', for messages. */
static const char *printable(char out[80], const char *s, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n && k < 64; i++) {
        unsigned char ch = (unsigned char)s[i];
        out[k++] = (ch < 0x20 || ch == 0x7f) ? '?' : (char)ch;
    }
    if (n > 64) {
        memcpy(out + k, "...", 3);
        k += 3;
    }
    out[k] = '\0';
    return out;
}

static size_t path_push_key(cc_t *c, const char *key) {
    size_t saved = c->path_len;
    char pk[80];
    int w = snprintf(c->path + c->path_len, sizeof c->path - c->path_len, "%s%s",
                     c->path_len ? "." : "", printable(pk, key, strlen(key)));
    if (w > 0) {
        c->path_len += (size_t)w;
        if (c->path_len >= sizeof c->path) {
            c->path_len = sizeof c->path - 1;
        }
    }
    return saved;
}

static size_t path_push_index(cc_t *c, size_t i) {
    size_t saved = c->path_len;
    int w = snprintf(c->path + c->path_len, sizeof c->path - c->path_len, "[%zu]", i);
    if (w > 0) {
        c->path_len += (size_t)w;
        if (c->path_len >= sizeof c->path) {
            c->path_len = sizeof c->path - 1;
        }
    }
    return saved;
}

static void path_pop(cc_t *c, size_t saved) {
    c->path_len = saved;
    c->path[saved] = '\0';
}

/* Records "<path>: <problem>" as TG_ERR_POLICY_INVALID; returns that error. */
TG_PRINTF(2, 3) static tg_err_t fail(cc_t *c, const char *fmt, ...) {
    char msg[TG_DIAG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    c->err = TG_ERR_POLICY_INVALID;
    return tg_diag_set(c->diag, TG_ERR_POLICY_INVALID, "%s: %s", c->path_len ? c->path : "policy",
                       msg);
}

static tg_err_t nomem(cc_t *c) {
    c->err = TG_ERR_NOMEM;
    return tg_diag_set(c->diag, TG_ERR_NOMEM, "out of memory compiling the policy");
}

const char *tg_policy_json_type_(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
    case JSON_REAL:
        return "a number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    default:
        return "null";
    }
}

static const char *json_type_name(const json_t *v) { return tg_policy_json_type_(v); }

static int is_number(const json_t *v) { return json_is_real(v) || json_is_integer(v); }

static double num_of(const json_t *v) {
    return json_is_integer(v) ? (double)json_integer_value(v) : json_real_value(v);
}

/* Copies n bytes into the arena as a NUL-terminated view. */
static int arena_sv(cc_t *c, tg_sv_t *out, const char *s, size_t n) {
    char *d = arena_alloc(c->p, n + 1);
    if (d == NULL) {
        return 0;
    }
    memcpy(d, s, n);
    d[n] = '\0';
    out->ptr = d;
    out->len = (uint32_t)n;
    return 1;
}

/* Names (surfaces, fields, signals, actors, tools, rule ids): 1..TG_POLICY_MAX_NAME bytes,
 * no control characters. `what` is the noun for the message. */
static tg_err_t check_name(cc_t *c, const char *s, size_t n, const char *what) {
    char pk[80];
    if (n == 0) {
        return fail(c, "%s must not be empty", what);
    }
    if (n > TG_POLICY_MAX_NAME) {
        return fail(c, "%s \"%s\" is longer than %d bytes", what, printable(pk, s, n),
                    TG_POLICY_MAX_NAME);
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch < 0x20 || ch == 0x7f) {
            return fail(c, "%s \"%s\" contains a control character", what, printable(pk, s, n));
        }
    }
    return TG_OK;
}

/* Reads member `key` of obj as a reason code into *out (arena copy). Absent: *out
 * untouched. */
static tg_err_t get_reason(cc_t *c, const json_t *obj, const char *key, const char **out) {
    const json_t *v = json_object_get(obj, key);
    if (v == NULL) {
        return TG_OK;
    }
    size_t saved = path_push_key(c, key);
    tg_err_t rc = TG_OK;
    char pk[80];
    if (!json_is_string(v)) {
        rc = fail(c, "must be a string, not %s", json_type_name(v));
    } else if (!tg_reason_code_valid(json_string_value(v), json_string_length(v))) {
        rc = fail(c, "reason code \"%s\" must be UPPER_SNAKE ([A-Z][A-Z0-9_]*, at most %d bytes)",
                  printable(pk, json_string_value(v), json_string_length(v)), TG_POLICY_MAX_REASON);
    } else {
        tg_sv_t sv;
        if (!arena_sv(c, &sv, json_string_value(v), json_string_length(v))) {
            rc = nomem(c);
        } else {
            *out = sv.ptr;
        }
    }
    if (rc == TG_OK) {
        path_pop(c, saved);
    }
    return rc;
}

/* Fails on a member of obj not in the NULL-terminated list `allowed`. */
static tg_err_t check_members(cc_t *c, const json_t *obj, const char *const *allowed,
                              const char *expected) {
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)(uintptr_t)obj, key, v) {
        int ok = 0;
        for (size_t i = 0; allowed[i] != NULL && !ok; i++) {
            ok = strcmp(key, allowed[i]) == 0;
        }
        if (!ok) {
            path_push_key(c, key);
            return fail(c, "unknown member (expected %s)", expected);
        }
    }
    return TG_OK;
}

typedef struct {
    const char *key;
    size_t len;
    const json_t *value;
} member_t;

static int member_cmp(const void *a, const void *b) {
    const member_t *x = a, *y = b;
    return tg_sv_lexcmp(x->key, (uint32_t)x->len, y->key, (uint32_t)y->len);
}

/* The members of obj sorted bytewise (malloc'd; caller frees). Content order,
 * not text order, so equal bundles compile alike. */
static member_t *sorted_members(cc_t *c, const json_t *obj, size_t *n_out) {
    size_t n = json_object_size(obj);
    member_t *m = malloc((n ? n : 1) * sizeof *m);
    if (m == NULL) {
        nomem(c);
        return NULL;
    }
    size_t i = 0;
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)(uintptr_t)obj, key, v) {
        m[i].key = key;
        m[i].len = strlen(key);
        m[i].value = v;
        i++;
    }
    qsort(m, i, sizeof *m, member_cmp);
    *n_out = i;
    return m;
}

/* ---- tiers -------------------------------------------------------------------------- */

static tg_err_t compile_threshold(cc_t *c, const json_t *v, double *out) {
    if (!is_number(v)) {
        return fail(c, "must be a number in [0, 1], not %s", json_type_name(v));
    }
    double d = num_of(v);
    if (!(d >= 0.0 && d <= 1.0)) {
        return fail(c, "threshold %g is outside [0, 1]", d);
    }
    *out = d;
    return TG_OK;
}

static int tier_key(const char *key) {
    if (key[0] >= '1' && key[0] <= '3' && key[1] == '\0') {
        return key[0] - '0';
    }
    return 0;
}

static tg_err_t compile_tiers(cc_t *c, const json_t *tiers) {
    c->tier_threshold[1] = 0.3;
    c->tier_threshold[2] = 0.6;
    c->tier_threshold[3] = 0.8;
    if (tiers == NULL) {
        return TG_OK;
    }
    size_t saved = path_push_key(c, "tiers");
    if (!json_is_object(tiers)) {
        return fail(c, "must be an object, not %s", json_type_name(tiers));
    }
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)(uintptr_t)tiers, key, v) {
        size_t s2 = path_push_key(c, key);
        int t = tier_key(key);
        if (t == 0) {
            return fail(c, "unknown tier (expected \"1\", \"2\" or \"3\")");
        }
        if (json_is_object(v)) {
            static const char *const allowed[] = {"risk_threshold", "description", NULL};
            tg_err_t rc = check_members(c, v, allowed, "risk_threshold, description");
            if (rc) {
                return rc;
            }
            const json_t *rt = json_object_get(v, "risk_threshold");
            if (rt == NULL) {
                return fail(c, "risk_threshold is required");
            }
            size_t s3 = path_push_key(c, "risk_threshold");
            rc = compile_threshold(c, rt, &c->tier_threshold[t]);
            if (rc) {
                return rc;
            }
            path_pop(c, s3);
        } else {
            tg_err_t rc = compile_threshold(c, v, &c->tier_threshold[t]);
            if (rc) {
                return rc;
            }
        }
        path_pop(c, s2);
    }
    path_pop(c, saved);
    return TG_OK;
}

/* ---- actor groups ------------------------------------------------------------------- */

static tg_err_t check_groups(cc_t *c, const json_t *groups) {
    if (groups == NULL) {
        return TG_OK;
    }
    size_t saved = path_push_key(c, "actors");
    if (!json_is_object(groups)) {
        return fail(c, "must be an object of actor groups, not %s", json_type_name(groups));
    }
    if (json_object_size(groups) > TG_POLICY_MAX_GROUPS) {
        return fail(c, "%zu actor groups (limit %d)", json_object_size(groups),
                    TG_POLICY_MAX_GROUPS);
    }
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)(uintptr_t)groups, key, v) {
        size_t s2 = path_push_key(c, key);
        tg_err_t rc = check_name(c, key, strlen(key), "group name");
        if (rc) {
            return rc;
        }
        if (!json_is_array(v)) {
            return fail(c, "must be an array of actor ids, not %s", json_type_name(v));
        }
        if (json_array_size(v) > TG_POLICY_MAX_ACTORS) {
            return fail(c, "%zu actors (limit %d)", json_array_size(v), TG_POLICY_MAX_ACTORS);
        }
        for (size_t i = 0; i < json_array_size(v); i++) {
            const json_t *a = json_array_get(v, i);
            size_t s3 = path_push_index(c, i);
            if (!json_is_string(a)) {
                return fail(c, "must be a string, not %s", json_type_name(a));
            }
            rc = check_name(c, json_string_value(a), json_string_length(a), "actor id");
            if (rc) {
                return rc;
            }
            if (json_string_value(a)[0] == '@') {
                return fail(c, "groups cannot contain groups");
            }
            path_pop(c, s3);
        }
        path_pop(c, s2);
    }
    path_pop(c, saved);
    return TG_OK;
}

/* Appends the strings of an actor list (ids and "@group" references, expanded) to
 * out[*n], at most `limit`. The path points at the list. */
static tg_err_t expand_actor(cc_t *c, tg_sv_t *out, size_t *n, size_t limit, const json_t *a) {
    char pk[80];
    if (!json_is_string(a)) {
        return fail(c, "actor must be a string, not %s", json_type_name(a));
    }
    const char *s = json_string_value(a);
    size_t len = json_string_length(a);
    tg_err_t rc = check_name(c, s, len, "actor id");
    if (rc) {
        return rc;
    }
    if (s[0] == '@') {
        const json_t *g = c->groups != NULL ? json_object_get(c->groups, s + 1) : NULL;
        if (g == NULL || strlen(s + 1) != len - 1) {
            return fail(c, "unknown actor group \"%s\"", printable(pk, s, len));
        }
        for (size_t i = 0; i < json_array_size(g); i++) {
            const json_t *m = json_array_get(g, i);
            if (*n >= limit) {
                return fail(c, "more than %zu actors after expanding groups", limit);
            }
            out[*n].ptr = json_string_value(m);
            out[*n].len = (uint32_t)json_string_length(m);
            (*n)++;
        }
        return TG_OK;
    }
    if (*n >= limit) {
        return fail(c, "more than %zu actors", limit);
    }
    out[*n].ptr = s;
    out[*n].len = (uint32_t)len;
    (*n)++;
    return TG_OK;
}

static int sv_qcmp(const void *a, const void *b) {
    const tg_sv_t *x = a, *y = b;
    return tg_sv_cmp(x->ptr, x->len, y->ptr, y->len);
}

/* Sorts, dedupes and copies views into the arena. */
static tg_err_t intern_sorted(cc_t *c, tg_sv_t *tmp, size_t n, const tg_sv_t **out,
                              uint32_t *n_out) {
    qsort(tmp, n, sizeof *tmp, sv_qcmp);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (k == 0 || sv_qcmp(&tmp[k - 1], &tmp[i]) != 0) {
            tmp[k++] = tmp[i];
        }
    }
    tg_sv_t *arr = arena_alloc(c->p, (k ? k : 1) * sizeof *arr);
    if (arr == NULL) {
        return nomem(c);
    }
    for (size_t i = 0; i < k; i++) {
        if (!arena_sv(c, &arr[i], tmp[i].ptr, tmp[i].len)) {
            return nomem(c);
        }
    }
    *out = arr;
    *n_out = (uint32_t)k;
    return TG_OK;
}

/* ---- context field interning ----------------------------------------------------------- */

/* Id of context field `name`, adding it on first sight (encounter order is deterministic
 * because every object is walked in sorted order). */
static tg_err_t intern_field(cc_t *c, const char *name, size_t n, uint32_t *id) {
    tg_policy_t *p = c->p;
    if (htab_get(&p->field_index, c->fields, sizeof *c->fields, name, n, id)) {
        return TG_OK;
    }
    if (p->tables.n_fields >= TG_POLICY_MAX_FIELDS) {
        return fail(c, "more than %d distinct context fields in the policy", TG_POLICY_MAX_FIELDS);
    }
    if (!arena_sv(c, &c->fields[p->tables.n_fields], name, n)) {
        return nomem(c);
    }
    *id = p->tables.n_fields++;
    htab_put(&p->field_index, c->fields, sizeof *c->fields, *id);
    return TG_OK;
}

/* Id of principal claim `name` (principal.claims.<name>), adding it on first sight, as
 * intern_field does for context fields. A linear scan: there are at most
 * TG_POLICY_MAX_CLAIMS of them. */
static tg_err_t intern_claim(cc_t *c, const char *name, size_t n, uint32_t *id) {
    tg_policy_t *p = c->p;
    for (uint32_t i = 0; i < p->tables.n_claims; i++) {
        if (c->claims[i].len == n && memcmp(c->claims[i].ptr, name, n) == 0) {
            *id = i;
            return TG_OK;
        }
    }
    if (p->tables.n_claims >= TG_POLICY_MAX_CLAIMS) {
        return fail(c, "more than %d distinct principal claims in the policy",
                    TG_POLICY_MAX_CLAIMS);
    }
    if (!arena_sv(c, &c->claims[p->tables.n_claims], name, n)) {
        return nomem(c);
    }
    *id = p->tables.n_claims++;
    return TG_OK;
}

/* ---- surfaces: names first (signals and tools refer to them) ------------------------- */

static tg_err_t compile_surface_names(cc_t *c, const json_t *surfaces) {
    tg_policy_t *p = c->p;
    size_t saved = path_push_key(c, "surfaces");
    if (surfaces == NULL) {
        return fail(c, "required member missing");
    }
    if (!json_is_object(surfaces)) {
        return fail(c, "must be an object of surfaces, not %s", json_type_name(surfaces));
    }
    size_t n = json_object_size(surfaces);
    if (n == 0) {
        return fail(c, "at least one surface is required");
    }
    if (n > TG_POLICY_MAX_SURFACES) {
        return fail(c, "%zu surfaces (limit %d)", n, TG_POLICY_MAX_SURFACES);
    }
    size_t nm;
    member_t *m = sorted_members(c, surfaces, &nm);
    if (m == NULL) {
        return c->err;
    }
    tg_err_t rc = TG_OK;
    c->surfaces = arena_alloc(p, nm * sizeof *c->surfaces);
    p->approvals = arena_alloc(p, (nm ? nm : 1) * sizeof *p->approvals);
    if (c->surfaces == NULL || p->approvals == NULL ||
        !htab_init(p, &p->surface_index, (uint32_t)nm)) {
        rc = nomem(c);
        goto done;
    }
    for (size_t i = 0; i < nm; i++) {
        size_t s2 = path_push_key(c, m[i].key);
        rc = check_name(c, m[i].key, m[i].len, "surface name");
        if (rc) {
            goto done;
        }
        path_pop(c, s2);
        if (!arena_sv(c, &c->surfaces[i].name, m[i].key, m[i].len)) {
            rc = nomem(c);
            goto done;
        }
        htab_put(&p->surface_index, c->surfaces, sizeof *c->surfaces, (uint32_t)i);
    }
    p->tables.surfaces = c->surfaces;
    p->tables.n_surfaces = (uint32_t)nm;
    path_pop(c, saved);
done:
    free(m);
    return rc;
}

/* Surface id of a name that must exist; the path points at the referring member. */
static tg_err_t surface_ref(cc_t *c, const json_t *v, uint32_t *id) {
    char pk[80];
    if (!json_is_string(v)) {
        return fail(c, "must be a surface name (string), not %s", json_type_name(v));
    }
    if (!htab_get(&c->p->surface_index, c->surfaces, sizeof *c->surfaces, json_string_value(v),
                  json_string_length(v), id)) {
        return fail(c, "unknown surface \"%s\"",
                    printable(pk, json_string_value(v), json_string_length(v)));
    }
    return TG_OK;
}

/* ---- signals -------------------------------------------------------------------------- */

/* rsdSpike -> RSD_SPIKE: the default reason of a boolean signal. 0 if not derivable. */
static int derive_reason(char out[TG_POLICY_MAX_REASON + 1], const char *name, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = name[i];
        int upper = ch >= 'A' && ch <= 'Z', lower = ch >= 'a' && ch <= 'z';
        int digit = ch >= '0' && ch <= '9';
        if (upper && i > 0) {
            char pr = name[i - 1];
            if ((pr >= 'a' && pr <= 'z') || (pr >= '0' && pr <= '9')) {
                if (k >= TG_POLICY_MAX_REASON) {
                    return 0;
                }
                out[k++] = '_';
            }
        }
        if (k >= TG_POLICY_MAX_REASON) {
            return 0;
        }
        out[k++] = lower ? (char)(ch - 'a' + 'A') : (upper || digit) ? ch : '_';
    }
    out[k] = '\0';
    return tg_reason_code_valid(out, k);
}

static tg_err_t compile_tier_list(cc_t *c, const json_t *v, uint8_t *mask) {
    if (!json_is_array(v)) {
        return fail(c, "must be an array of tiers, not %s", json_type_name(v));
    }
    for (size_t i = 0; i < json_array_size(v); i++) {
        const json_t *t = json_array_get(v, i);
        double d = is_number(t) ? num_of(t) : 0.0;
        if (!(d == 1.0 || d == 2.0 || d == 3.0)) {
            path_push_index(c, i);
            return fail(c, "tier must be 1, 2 or 3");
        }
        *mask = (uint8_t)(*mask | (1u << (unsigned)d));
    }
    return TG_OK;
}

static tg_err_t compile_signal(cc_t *c, tg_signal_t *sig, uint32_t id, const json_t *body) {
    static const char *const allowed[] = {"type",       "description",  "reason", "deny_on_tier",
                                          "thresholds", "required_for", NULL};
    int is_risk = sig->name.len == sizeof RISK_SCORE - 1 &&
                  memcmp(sig->name.ptr, RISK_SCORE, sizeof RISK_SCORE - 1) == 0;
    if (body == NULL) { /* implicit riskScore */
        sig->type = TG_SIG_NUMBER;
        sig->reason = tg_reason_code(TG_REASON_RISK_THRESHOLD_EXCEEDED);
        for (int t = 1; t <= 3; t++) {
            sig->threshold[t] = c->tier_threshold[t];
        }
        sig->threshold_tiers = 0x0e;
        return TG_OK;
    }
    if (!json_is_object(body)) {
        return fail(c, "must be an object, not %s", json_type_name(body));
    }
    tg_err_t rc = check_members(c, body, allowed,
                                "type, description, reason, deny_on_tier, thresholds, "
                                "required_for");
    if (rc) {
        return rc;
    }
    const json_t *type = json_object_get(body, "type");
    size_t saved = path_push_key(c, "type");
    if (type == NULL) {
        return fail(c, "required member missing (\"number\" or \"boolean\")");
    }
    if (json_is_string(type) && strcmp(json_string_value(type), "number") == 0) {
        sig->type = TG_SIG_NUMBER;
    } else if (json_is_string(type) && strcmp(json_string_value(type), "boolean") == 0) {
        sig->type = TG_SIG_BOOLEAN;
    } else {
        return fail(c, "must be \"number\" or \"boolean\"");
    }
    path_pop(c, saved);
    if (is_risk && sig->type != TG_SIG_NUMBER) {
        return fail(c, "riskScore is a number signal");
    }
    rc = get_reason(c, body, "reason", &sig->reason);
    if (rc) {
        return rc;
    }
    const json_t *dot = json_object_get(body, "deny_on_tier");
    if (dot != NULL) {
        saved = path_push_key(c, "deny_on_tier");
        if (sig->type != TG_SIG_BOOLEAN) {
            return fail(c, "applies to boolean signals only (number signals use thresholds)");
        }
        rc = compile_tier_list(c, dot, &sig->deny_tiers);
        if (rc) {
            return rc;
        }
        path_pop(c, saved);
    }
    const json_t *th = json_object_get(body, "thresholds");
    if (is_risk) {
        for (int t = 1; t <= 3; t++) {
            sig->threshold[t] = c->tier_threshold[t];
        }
        sig->threshold_tiers = 0x0e;
    }
    if (th != NULL) {
        saved = path_push_key(c, "thresholds");
        if (sig->type != TG_SIG_NUMBER) {
            return fail(c, "applies to number signals only (boolean signals use deny_on_tier)");
        }
        if (!json_is_object(th)) {
            return fail(c, "must be an object of tier -> number, not %s", json_type_name(th));
        }
        const char *key;
        const json_t *v;
        json_object_foreach((json_t *)(uintptr_t)th, key, v) {
            size_t s2 = path_push_key(c, key);
            int t = tier_key(key);
            if (t == 0) {
                return fail(c, "unknown tier (expected \"1\", \"2\" or \"3\")");
            }
            rc = compile_threshold(c, v, &sig->threshold[t]);
            if (rc) {
                return rc;
            }
            sig->threshold_tiers = (uint8_t)(sig->threshold_tiers | (1u << t));
            path_pop(c, s2);
        }
        path_pop(c, saved);
    }
    if (sig->reason == NULL && (sig->deny_tiers || sig->threshold_tiers)) {
        if (is_risk) {
            sig->reason = tg_reason_code(TG_REASON_RISK_THRESHOLD_EXCEEDED);
        } else {
            char buf[TG_POLICY_MAX_REASON + 1];
            tg_sv_t sv;
            if (!derive_reason(buf, sig->name.ptr, sig->name.len)) {
                return fail(c, "reason is required (cannot derive one from the name)");
            }
            if (!arena_sv(c, &sv, buf, strlen(buf))) {
                return nomem(c);
            }
            sig->reason = sv.ptr;
        }
    }
    const json_t *rf = json_object_get(body, "required_for");
    if (rf != NULL) {
        saved = path_push_key(c, "required_for");
        if (!json_is_array(rf)) {
            return fail(c, "must be an array of surface names, not %s", json_type_name(rf));
        }
        for (size_t i = 0; i < json_array_size(rf); i++) {
            const json_t *s = json_array_get(rf, i);
            size_t s2 = path_push_index(c, i);
            if (json_is_string(s) && strcmp(json_string_value(s), "*") == 0) {
                for (uint32_t k = 0; k < c->p->tables.n_surfaces; k++) {
                    c->surfaces[k].required_signals |= UINT32_C(1) << id;
                }
            } else {
                uint32_t sid;
                rc = surface_ref(c, s, &sid);
                if (rc) {
                    return rc;
                }
                c->surfaces[sid].required_signals |= UINT32_C(1) << id;
            }
            path_pop(c, s2);
        }
        path_pop(c, saved);
    }
    return TG_OK;
}

static tg_err_t compile_signals(cc_t *c, const json_t *signals) {
    tg_policy_t *p = c->p;
    size_t saved = path_push_key(c, "signals");
    size_t n = 0;
    member_t *m = NULL;
    if (signals != NULL) {
        if (!json_is_object(signals)) {
            return fail(c, "must be an object of signals, not %s", json_type_name(signals));
        }
        m = sorted_members(c, signals, &n);
        if (m == NULL) {
            return c->err;
        }
    }
    tg_err_t rc = TG_OK;
    int has_risk = signals != NULL && json_object_get(signals, RISK_SCORE) != NULL;
    size_t total = n + (has_risk ? 0 : 1);
    if (total > TG_POLICY_MAX_SIGNALS) {
        rc = fail(c, "%zu signals with riskScore (limit %d)", total, TG_POLICY_MAX_SIGNALS);
        goto done;
    }
    /* Merge the implicit riskScore into the sorted order. */
    member_t *all = realloc(m, (total ? total : 1) * sizeof *all);
    if (all == NULL) {
        rc = nomem(c);
        goto done;
    }
    m = all;
    if (!has_risk) {
        m[n].key = RISK_SCORE;
        m[n].len = sizeof RISK_SCORE - 1;
        m[n].value = NULL;
        qsort(m, total, sizeof *m, member_cmp);
    }
    c->signals = arena_alloc(p, total * sizeof *c->signals);
    if (c->signals == NULL || !htab_init(p, &p->signal_index, (uint32_t)total)) {
        rc = nomem(c);
        goto done;
    }
    for (size_t i = 0; i < total; i++) {
        size_t s2 = path_push_key(c, m[i].key);
        rc = check_name(c, m[i].key, m[i].len, "signal name");
        if (rc) {
            goto done;
        }
        if (!arena_sv(c, &c->signals[i].name, m[i].key, m[i].len)) {
            rc = nomem(c);
            goto done;
        }
        htab_put(&p->signal_index, c->signals, sizeof *c->signals, (uint32_t)i);
        rc = compile_signal(c, &c->signals[i], (uint32_t)i, m[i].value);
        if (rc) {
            goto done;
        }
        path_pop(c, s2);
    }
    p->tables.signals = c->signals;
    p->tables.n_signals = (uint32_t)total;
    for (uint32_t i = 0; i < total; i++) {
        for (unsigned t = 1; t <= 3; t++) {
            if (c->signals[i].deny_tiers & (1u << t)) {
                p->tables.bool_deny_mask[t] |= UINT32_C(1) << i;
            }
            if (c->signals[i].threshold_tiers & (1u << t)) {
                p->tables.threshold_mask[t] |= UINT32_C(1) << i;
            }
        }
    }
    path_pop(c, saved);
done:
    free(m);
    return rc;
}

/* ---- rules and conditions ------------------------------------------------------------- */

static const char *const OP_NAMES[] = {
    "eq", "ne",     "gt",     "gte",    "lt",     "lte",
    "in", "not_in", "exists", "prefix", "suffix", "glob"}; /* by tg_op_t; groups have none */

const char *tg_policy_op_name(unsigned op) {
    if (op == TG_OP_IN_SET || op == TG_OP_NOT_IN_SET) { /* "in" / "not_in" with "set" */
        return op == TG_OP_IN_SET ? "in" : "not_in";
    }
    if (op < sizeof OP_NAMES / sizeof OP_NAMES[0]) {
        return OP_NAMES[op];
    }
    /* Groups are written as their member name in a bundle ({"any_of": [...]}). */
    return op == TG_OP_ALL ? "all_of" : op == TG_OP_ANY ? "any_of" : op == TG_OP_NOT ? "not" : "?";
}

static const char *ft_name(uint8_t ft) {
    static const char *const names[] = {"any", "string", "number", "boolean", "object", "array"};
    return ft < 6 ? names[ft] : "?";
}

/* Declared type of context field `id` on surface s (required_context or optional_context),
 * or -1 when not declared. */
static int declared_type(const tg_surface_t *s, uint32_t id) {
    for (uint32_t i = 0; i < s->n_required; i++) {
        if (s->required[i].id == id) {
            return s->required[i].type;
        }
    }
    for (uint32_t i = 0; i < s->n_optional; i++) {
        if (s->optional[i].id == id) {
            return s->optional[i].type;
        }
    }
    return -1;
}

/* One scalar operand; `want` is the type the field can have (TG_FT_ANY = unconstrained).
 * The path points at the operand. */
static tg_err_t compile_operand(cc_t *c, tg_value_t *out, const json_t *v, uint8_t want) {
    if (json_is_string(v)) {
        if (json_string_length(v) > TG_POLICY_MAX_VALUE) {
            return fail(c, "string longer than %d bytes", TG_POLICY_MAX_VALUE);
        }
        tg_sv_t sv;
        if (!arena_sv(c, &sv, json_string_value(v), json_string_length(v))) {
            return nomem(c);
        }
        out->type = TG_VT_STRING;
        out->str = sv.ptr;
        out->len = sv.len;
    } else if (is_number(v)) {
        out->type = TG_VT_NUMBER;
        out->num = num_of(v);
    } else if (json_is_boolean(v)) {
        out->type = TG_VT_BOOL;
        out->boolean = json_is_true(v) ? 1 : 0;
    } else {
        return fail(c, "must be a string, number or boolean, not %s", json_type_name(v));
    }
    static const uint8_t vt_of_ft[] = {0, TG_VT_STRING, TG_VT_NUMBER, TG_VT_BOOL, 0, 0};
    if (want != TG_FT_ANY && (want > TG_FT_BOOLEAN || out->type != vt_of_ft[want])) {
        return fail(c, "%s operand never matches a field of type %s", json_type_name(v),
                    ft_name(want));
    }
    return TG_OK;
}

/* ---- time zones and data sets (docs/POLICY.md "Time", "Data sets") -------------------- */

/* IANA zone names: [A-Za-z0-9_+-/], no leading '/', no "." or ".." component. */
static int zone_name_ok(const char *s, size_t n) {
    if (n == 0 || n > 64 || s[0] == '/') {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        int ok = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
                 ch == '_' || ch == '+' || ch == '-' || ch == '/';
        if (!ok) {
            return 0;
        }
    }
    return tg_dataset_path_ok(s, n);
}

/* The zone named by string member v (the path points at it): its id in c->zones, loading it
 * from the tz database the first time. "UTC" is built in (no file). */
static tg_err_t intern_zone(cc_t *c, const json_t *v, uint32_t *id) {
    char pk[80];
    if (!json_is_string(v)) {
        return fail(c, "must be a string (an IANA time zone name), not %s", json_type_name(v));
    }
    const char *name = json_string_value(v);
    size_t n = json_string_length(v);
    if (!zone_name_ok(name, n)) {
        return fail(c, "\"%s\" is not a time zone name ([A-Za-z0-9_+-/], no \"..\")",
                    printable(pk, name, n));
    }
    for (uint32_t i = 0; i < c->p->tables.n_zones; i++) {
        if (c->zones[i].name.len == n && memcmp(c->zones[i].name.ptr, name, n) == 0) {
            *id = i;
            return TG_OK;
        }
    }
    if (c->p->tables.n_zones == TG_POLICY_MAX_ZONES) {
        return fail(c, "more than %d time zones", TG_POLICY_MAX_ZONES);
    }
    tg_zone_t z;
    memset(&z, 0, sizeof z);
    if (strcmp(name, "UTC") != 0) {
        const char *dir = c->opts != NULL && c->opts->zoneinfo_dir != NULL ? c->opts->zoneinfo_dir
                                                                           : TG_POLICY_ZONEINFO;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, name);
        tg_file_t f;
        tg_diag_t d2 = {0};
        tg_tzif_t tz;
        tg_err_t rc = tg_read_file(&f, path, TG_TZIF_MAX_FILE, "time zone file", 0, &d2);
        if (rc == TG_OK) {
            rc = tg_tzif_parse(&tz, (const uint8_t *)f.data, f.len, &d2);
            tg_file_free(&f);
        }
        if (rc == TG_ERR_NOMEM) {
            return nomem(c);
        }
        if (rc) {
            return fail(c, "time zone \"%s\" (%s): %s", printable(pk, name, n), path,
                        rc == TG_ERR_NOT_FOUND ? "unknown zone (no such file)" : d2.msg);
        }
        z = tz.zone;
        int64_t *at = z.n ? arena_alloc(c->p, z.n * sizeof *at) : NULL;
        int32_t *off = z.n ? arena_alloc(c->p, z.n * sizeof *off) : NULL;
        if (z.n && (at == NULL || off == NULL)) {
            tg_tzif_free(&tz);
            return nomem(c);
        }
        if (z.n) {
            memcpy(at, tz.at, z.n * sizeof *at);
            memcpy(off, tz.off, z.n * sizeof *off);
        }
        z.at = at;
        z.off = off;
        tg_tzif_free(&tz);
    }
    if (!arena_sv(c, &z.name, name, n)) {
        return nomem(c);
    }
    *id = c->p->tables.n_zones++;
    c->zones[*id] = z;
    return TG_OK;
}

/* The bundle's (or a surface's) "timezone" member into *id; absent: keeps *id. */
static tg_err_t compile_timezone(cc_t *c, const json_t *obj, uint32_t *id) {
    const json_t *v = json_object_get(obj, "timezone");
    if (v == NULL) {
        return TG_OK;
    }
    size_t saved = path_push_key(c, "timezone");
    tg_err_t rc = intern_zone(c, v, id);
    if (rc == TG_OK) {
        path_pop(c, saved);
    }
    return rc;
}

/* time.<part> of a condition's field (the path points at "field"). */
static tg_err_t compile_time_field(cc_t *c, tg_cond_t *cd, const char *fs, size_t fl) {
    char pk[80];
    if (strcmp(fs, "time.hour") == 0) {
        cd->src = TG_SRC_TIME_HOUR;
    } else if (strcmp(fs, "time.weekday") == 0) {
        cd->src = TG_SRC_TIME_WEEKDAY;
    } else if (strcmp(fs, "time.date") == 0) {
        cd->src = TG_SRC_TIME_DATE;
    } else {
        return fail(c, "unknown time field \"%s\" (expected time.hour, time.weekday or time.date)",
                    printable(pk, fs, fl));
    }
    cd->id = c->zone_cur;
    cd->zone = &c->zones[c->zone_cur];
    return TG_OK;
}

/* "YYYY-MM-DD" (a real date, years 0001..9999) as the number YYYYMMDD; 0 when invalid. */
static double parse_date(const char *s, size_t n) {
    if (n != 10 || s[4] != '-' || s[7] != '-') {
        return 0;
    }
    unsigned v[3] = {0, 0, 0};
    const size_t at[3] = {0, 5, 8}, len[3] = {4, 2, 2};
    for (int k = 0; k < 3; k++) {
        for (size_t i = at[k]; i < at[k] + len[k]; i++) {
            if (s[i] < '0' || s[i] > '9') {
                return 0;
            }
            v[k] = v[k] * 10 + (unsigned)(s[i] - '0');
        }
    }
    if (v[0] == 0 || v[1] < 1 || v[1] > 12 || v[2] < 1) {
        return 0;
    }
    /* the day must exist in its month: round-trip through the kernel's calendar */
    int64_t y;
    unsigned m, d;
    tg_civil_from_days(tg_days_from_civil(v[0], v[1], v[2]), &y, &m, &d);
    if (m != v[1] || d != v[2]) {
        return 0;
    }
    return (double)v[0] * 10000 + v[1] * 100 + v[2];
}

/* One operand of a time condition (the path points at it). */
static tg_err_t compile_time_operand(cc_t *c, tg_value_t *out, const tg_cond_t *cd,
                                     const json_t *v) {
    char pk[80];
    memset(out, 0, sizeof *out);
    if (cd->src == TG_SRC_TIME_HOUR) {
        double h = is_number(v) ? num_of(v) : -1;
        if (!(h >= 0 && h <= 23 && h == (double)(int)h)) {
            return fail(c, "time.hour compares with an hour, an integer 0..23");
        }
        out->type = TG_VT_NUMBER;
        out->num = h;
        return TG_OK;
    }
    const char *s = json_is_string(v) ? json_string_value(v) : "";
    size_t n = json_is_string(v) ? json_string_length(v) : 0;
    if (cd->src == TG_SRC_TIME_DATE) {
        out->type = TG_VT_NUMBER;
        out->num = parse_date(s, n);
        if (out->num == 0) {
            return fail(c, "time.date compares with a date \"YYYY-MM-DD\", not \"%s\"",
                        printable(pk, s, n));
        }
        return TG_OK;
    }
    for (unsigned wd = 0; wd < 7; wd++) {
        if (n == 3 && memcmp(s, tg_weekday_name(wd), 3) == 0) {
            out->type = TG_VT_STRING;
            out->str = tg_weekday_name(wd);
            out->len = 3;
            return TG_OK;
        }
    }
    return fail(c, "time.weekday compares with mon, tue, wed, thu, fri, sat or sun");
}

/* The value(s) of a time condition other than exists (the path points at the condition). */
static tg_err_t compile_time_cond(cc_t *c, tg_cond_t *cd, const json_t *v, int op) {
    const json_t *vv = json_object_get(v, "value");
    int ordered = op == TG_OP_GT || op == TG_OP_GTE || op == TG_OP_LT || op == TG_OP_LTE;
    if (json_object_get(v, "set") != NULL) {
        path_push_key(c, "set");
        return fail(c, "time fields compare with values, not data sets");
    }
    if (ordered && cd->src == TG_SRC_TIME_WEEKDAY) {
        path_push_key(c, "op");
        return fail(c, "%s does not order weekdays (use in / not_in)", OP_NAMES[op]);
    }
    if (op != TG_OP_EQ && op != TG_OP_NE && !ordered && op != TG_OP_IN && op != TG_OP_NOT_IN) {
        path_push_key(c, "op");
        return fail(c, "time fields compare with eq, ne, gt, gte, lt, lte, in or not_in, not %s",
                    OP_NAMES[op]);
    }
    size_t saved = path_push_key(c, "value");
    if (vv == NULL) {
        return fail(c, "required member missing for operator %s", OP_NAMES[op]);
    }
    tg_err_t rc;
    if (op != TG_OP_IN && op != TG_OP_NOT_IN) {
        rc = compile_time_operand(c, &cd->value, cd, vv);
        if (rc == TG_OK) {
            path_pop(c, saved);
        }
        return rc;
    }
    size_t n = json_is_array(vv) ? json_array_size(vv) : 0;
    if (n == 0 || n > TG_POLICY_MAX_LIST) {
        return fail(c, "%s needs an array of 1 to %d values", OP_NAMES[op], TG_POLICY_MAX_LIST);
    }
    tg_value_t *list = arena_alloc(c->p, n * sizeof *list);
    if (list == NULL) {
        return nomem(c);
    }
    for (size_t i = 0; i < n; i++) {
        size_t s2 = path_push_index(c, i);
        rc = compile_time_operand(c, &list[i], cd, json_array_get(vv, i));
        if (rc) {
            return rc;
        }
        path_pop(c, s2);
    }
    cd->list = list;
    cd->n_list = (uint32_t)n;
    path_pop(c, saved);
    return TG_OK;
}

/* A compiled data set: its values sorted by tg_value_cmp, unique, in the arena. */
typedef struct cset {
    const char *name;
    tg_value_t *values;
    uint32_t n;
    uint8_t type; /* TG_VT_STRING or TG_VT_NUMBER */
} cset_t;

static int value_qcmp(const void *a, const void *b) { return tg_value_cmp(a, b); }

/* Sorts and dedups set->values (duplicates are harmless: a set holds a value or not). */
static void cset_finish(cset_t *set) {
    qsort(set->values, set->n, sizeof *set->values, value_qcmp);
    uint32_t k = 0;
    for (uint32_t i = 0; i < set->n; i++) {
        if (k == 0 || tg_value_cmp(&set->values[k - 1], &set->values[i]) != 0) {
            set->values[k++] = set->values[i];
        }
    }
    set->n = k;
}

/* A JSON array of values (inline "values" or a .json file) into set (path at the array). */
static tg_err_t cset_from_array(cc_t *c, cset_t *set, const json_t *arr, int want) {
    if (!json_is_array(arr)) {
        return fail(c, "must be an array of strings or numbers, not %s", json_type_name(arr));
    }
    size_t n = json_array_size(arr);
    if (n > TG_POLICY_MAX_SET_VALUES) {
        return fail(c, "%zu values (limit %d)", n, TG_POLICY_MAX_SET_VALUES);
    }
    set->values = arena_alloc(c->p, (n ? n : 1) * sizeof *set->values);
    if (set->values == NULL) {
        return nomem(c);
    }
    set->type = (uint8_t)(want >= 0                                    ? want
                          : n > 0 && is_number(json_array_get(arr, 0)) ? TG_VT_NUMBER
                                                                       : TG_VT_STRING);
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(arr, i);
        size_t s2 = path_push_index(c, i);
        tg_value_t *out = &set->values[i];
        if (set->type == TG_VT_NUMBER && is_number(e)) {
            out->type = TG_VT_NUMBER;
            out->num = num_of(e);
        } else if (set->type == TG_VT_STRING && json_is_string(e) &&
                   json_string_length(e) <= TG_POLICY_MAX_VALUE) {
            tg_sv_t sv;
            if (!arena_sv(c, &sv, json_string_value(e), json_string_length(e))) {
                return nomem(c);
            }
            out->type = TG_VT_STRING;
            out->str = sv.ptr;
            out->len = sv.len;
        } else {
            return fail(c, "the set holds %ss (at most %d bytes); this is %s",
                        set->type == TG_VT_NUMBER ? "number" : "string", TG_POLICY_MAX_VALUE,
                        json_type_name(e));
        }
        path_pop(c, s2);
    }
    set->n = (uint32_t)n;
    cset_finish(set);
    return TG_OK;
}

/* The lines of a text file into set (path at "file"). Strings are copied into one arena
 * block; numbers parsed strictly (JSON number syntax). */
static tg_err_t cset_from_lines(cc_t *c, cset_t *set, const char *data, size_t len, int want) {
    tg_sv_t *lines = NULL;
    size_t n = 0;
    tg_diag_t d2 = {0};
    tg_err_t rc = tg_dataset_lines(&lines, &n, data, len, &d2);
    if (rc == TG_ERR_NOMEM) {
        return nomem(c);
    }
    if (rc) {
        return fail(c, "%s", d2.msg);
    }
    set->type = (uint8_t)(want >= 0 ? want : TG_VT_STRING);
    set->values = arena_alloc(c->p, (n ? n : 1) * sizeof *set->values);
    char *blob = set->type == TG_VT_STRING ? arena_alloc(c->p, len + 1) : NULL;
    if (set->values == NULL || (set->type == TG_VT_STRING && blob == NULL)) {
        free(lines);
        return nomem(c);
    }
    size_t used = 0;
    for (size_t i = 0; i < n; i++) {
        tg_value_t *out = &set->values[i];
        if (set->type == TG_VT_STRING) {
            memcpy(blob + used, lines[i].ptr, lines[i].len);
            out->type = TG_VT_STRING;
            out->str = blob + used;
            out->len = lines[i].len;
            used += lines[i].len;
            continue;
        }
        json_t *num = NULL;
        tg_json_limits_t lim = TG_JSON_LIMITS_DEFAULT;
        if (tg_json_parse(&num, lines[i].ptr, lines[i].len, &lim, NULL) != TG_OK ||
            !is_number(num)) {
            json_decref(num);
            free(lines);
            return fail(c, "line %zu is not a number (the set's type is number)", i + 1);
        }
        out->type = TG_VT_NUMBER;
        out->num = num_of(num);
        json_decref(num);
    }
    free(lines);
    set->n = (uint32_t)n;
    cset_finish(set);
    return TG_OK;
}

/* A set from a file beside the bundle (path at the set). Records the file's SHA-256 in
 * c->hashed (the policyHash covers it) and checks a pinned "sha256". */
static tg_err_t cset_from_file(cc_t *c, cset_t *set, const char *name, const json_t *body,
                               int want) {
    char pk[80];
    const json_t *fv = json_object_get(body, "file");
    size_t saved = path_push_key(c, "file");
    if (!json_is_string(fv) || !tg_dataset_path_ok(json_string_value(fv), json_string_length(fv))) {
        return fail(c, "must be a relative path without \".\" or \"..\" components");
    }
    const char *rel = json_string_value(fv);
    if (c->opts == NULL || c->opts->base_dir == NULL) {
        return fail(c, "data set files need the bundle's directory (load the bundle from a file)");
    }
    tg_file_t f;
    uint8_t sha[32];
    char hex[65];
    tg_diag_t d2 = {0};
    tg_err_t rc = tg_dataset_read(&f, sha, c->opts->base_dir, rel, &d2);
    if (rc == TG_ERR_NOMEM) {
        return nomem(c);
    }
    if (rc) {
        return fail(c, "%s", d2.msg);
    }
    tg_hex(hex, sha, sizeof sha);
    const json_t *pin = json_object_get(body, "sha256");
    if (pin != NULL && (!json_is_string(pin) || strcmp(json_string_value(pin), hex) != 0)) {
        tg_file_free(&f);
        path_pop(c, saved);
        path_push_key(c, "sha256");
        return fail(c, "the file %s has SHA-256 %s, not the pinned value",
                    printable(pk, rel, strlen(rel)), hex);
    }
    size_t rl = strlen(rel);
    if (rl > 5 && strcmp(rel + rl - 5, ".json") == 0) {
        json_t *arr = NULL;
        tg_json_limits_t lim = {TG_POLICY_MAX_SET_BYTES, 2, TG_POLICY_MAX_VALUE, 1};
        rc = tg_json_parse(&arr, f.data, f.len, &lim, &d2);
        if (rc == TG_ERR_NOMEM) {
            tg_file_free(&f);
            return nomem(c);
        }
        if (rc) {
            tg_file_free(&f);
            return fail(c, "%s: %s", printable(pk, rel, rl), d2.msg);
        }
        rc = cset_from_array(c, set, arr, want);
        json_decref(arr);
    } else {
        rc = cset_from_lines(c, set, f.data, f.len, want);
    }
    tg_file_free(&f);
    if (rc) {
        return rc;
    }
    if (c->hashed == NULL) {
        /* the first file set: hash a copy of the bundle with the files' digests in it */
        c->hashed = json_deep_copy(c->bundle);
        if (c->hashed == NULL) {
            return nomem(c);
        }
    }
    json_t *sets = json_object_get(c->hashed, "sets");
    json_t *obj = json_object_get(sets, name);
    if (obj == NULL || json_object_set_new(obj, "sha256", json_string(hex)) != 0) {
        return nomem(c);
    }
    path_pop(c, saved);
    return TG_OK;
}

/* The bundle's "sets" object: every set compiled in name order (ids are not needed: a
 * condition points at its set's values). */
static tg_err_t compile_sets(cc_t *c, const json_t *sets) {
    static const char *const allowed[] = {"file", "values", "type", "sha256", "description", NULL};
    if (sets == NULL) {
        return TG_OK;
    }
    size_t saved = path_push_key(c, "sets");
    if (!json_is_object(sets)) {
        return fail(c, "must be an object (name -> data set), not %s", json_type_name(sets));
    }
    if (json_object_size(sets) > TG_POLICY_MAX_SETS) {
        return fail(c, "%zu data sets (limit %d)", json_object_size(sets), TG_POLICY_MAX_SETS);
    }
    size_t n = 0;
    member_t *m = sorted_members(c, sets, &n);
    if (m == NULL && n > 0) {
        return nomem(c);
    }
    c->sets = arena_alloc(c->p, (n ? n : 1) * sizeof *c->sets);
    if (c->sets == NULL) {
        free(m);
        return nomem(c);
    }
    tg_err_t rc = TG_OK;
    for (size_t i = 0; i < n && rc == TG_OK; i++) {
        size_t s1 = path_push_key(c, m[i].key);
        const json_t *body = m[i].value;
        cset_t *set = &c->sets[i];
        rc = check_name(c, m[i].key, m[i].len, "data set name");
        if (rc == TG_OK && !json_is_object(body)) {
            rc = fail(c, "data set must be an object, not %s", json_type_name(body));
        }
        if (rc == TG_OK) {
            rc = check_members(c, body, allowed, "file, values, type, sha256, description");
        }
        int want = -1;
        const json_t *tv = json_object_get(body, "type");
        if (rc == TG_OK && tv != NULL) {
            const char *ts = json_is_string(tv) ? json_string_value(tv) : "";
            want = strcmp(ts, "string") == 0   ? TG_VT_STRING
                   : strcmp(ts, "number") == 0 ? TG_VT_NUMBER
                                               : -2;
            if (want == -2) {
                path_push_key(c, "type");
                rc = fail(c, "must be \"string\" or \"number\"");
            }
        }
        const json_t *fv = json_object_get(body, "file"), *vv = json_object_get(body, "values");
        if (rc == TG_OK && (fv == NULL) == (vv == NULL)) {
            rc = fail(c, "a data set has exactly one of file and values");
        }
        if (rc == TG_OK && vv != NULL && json_object_get(body, "sha256") != NULL) {
            rc = fail(c, "sha256 pins a file; this set has values");
        }
        if (rc == TG_OK && fv != NULL) {
            rc = cset_from_file(c, set, m[i].key, body, want);
        } else if (rc == TG_OK) {
            size_t s2 = path_push_key(c, "values");
            rc = cset_from_array(c, set, vv, want);
            if (rc == TG_OK) {
                path_pop(c, s2);
            }
        }
        if (rc == TG_OK) {
            tg_sv_t sv;
            if (!arena_sv(c, &sv, m[i].key, m[i].len)) {
                rc = nomem(c);
            } else {
                set->name = sv.ptr;
                c->n_sets++;
                path_pop(c, s1);
            }
        }
    }
    free(m);
    if (rc == TG_OK) {
        path_pop(c, saved);
    }
    return rc;
}

/* {"field", "op": in|not_in, "set": NAME}: the set's values become the condition's sorted
 * list (path at the condition; `want` the field's type, TG_FT_ANY when unconstrained). */
static tg_err_t compile_set_cond(cc_t *c, tg_cond_t *cd, const json_t *v, int op, uint8_t want) {
    char pk[80];
    const json_t *sv = json_object_get(v, "set");
    if (json_object_get(v, "value") != NULL || json_object_get(v, "value_from") != NULL) {
        path_push_key(c, json_object_get(v, "value") != NULL ? "value" : "value_from");
        return fail(c, "a condition compares with a value, another field or a set: one of them");
    }
    if (op != TG_OP_IN && op != TG_OP_NOT_IN) {
        path_push_key(c, "op");
        return fail(c, "a data set is compared with in or not_in, not %s", OP_NAMES[op]);
    }
    size_t saved = path_push_key(c, "set");
    if (!json_is_string(sv)) {
        return fail(c, "must be the name of a data set, not %s", json_type_name(sv));
    }
    const cset_t *set = NULL;
    for (uint32_t i = 0; i < c->n_sets && set == NULL; i++) {
        if (strcmp(c->sets[i].name, json_string_value(sv)) == 0) {
            set = &c->sets[i];
        }
    }
    if (set == NULL) {
        return fail(c, "unknown data set \"%s\" (not in sets)",
                    printable(pk, json_string_value(sv), json_string_length(sv)));
    }
    if ((want == TG_FT_STRING && set->type != TG_VT_STRING) ||
        (want == TG_FT_NUMBER && set->type != TG_VT_NUMBER) ||
        (want != TG_FT_ANY && want != TG_FT_STRING && want != TG_FT_NUMBER)) {
        return fail(c, "data set \"%s\" holds %ss, which never match a field of type %s", set->name,
                    set->type == TG_VT_NUMBER ? "number" : "string", ft_name(want));
    }
    cd->op = (uint8_t)(op == TG_OP_IN ? TG_OP_IN_SET : TG_OP_NOT_IN_SET);
    cd->list = set->values;
    cd->n_list = set->n;
    /* value is no operand of a set condition: it carries the set's name, for explain */
    cd->value.type = TG_VT_STRING;
    cd->value.str = set->name;
    cd->value.len = (uint32_t)strlen(set->name);
    path_pop(c, saved);
    return TG_OK;
}

/* Resolves field name fs (fl bytes) to where the kernel reads it: *src, *id (field, signal
 * or claim id, interned on first sight) and *want, the type it can hold on surface s
 * (TG_FT_ANY = unconstrained). The path points at the member that names the field. One
 * function for `field` and `value_from`, so both follow the same field rules. */
static tg_err_t resolve_field(cc_t *c, const tg_surface_t *s, const char *fs, size_t fl,
                              uint8_t *src, uint32_t *id, uint8_t *want) {
    char pk[80];
    tg_err_t rc;
    *want = TG_FT_ANY;
    if (strcmp(fs, "actor") == 0 || strcmp(fs, "action") == 0) {
        *src = strcmp(fs, "actor") == 0 ? TG_SRC_ACTOR : TG_SRC_ACTION;
        *want = TG_FT_STRING;
    } else if (fl > 8 && memcmp(fs, "context.", 8) == 0) {
        *src = TG_SRC_CONTEXT;
        rc = check_name(c, fs + 8, fl - 8, "context field name");
        if (rc) {
            return rc;
        }
        rc = intern_field(c, fs + 8, fl - 8, id);
        if (rc) {
            return rc;
        }
        int dt = declared_type(s, *id);
        if (dt > 0) {
            *want = (uint8_t)dt;
        }
    } else if (fl > 8 && memcmp(fs, "signals.", 8) == 0) {
        *src = TG_SRC_SIGNAL;
        if (!htab_get(&c->p->signal_index, c->signals, sizeof *c->signals, fs + 8, fl - 8, id)) {
            return fail(c, "signal \"%s\" is not declared in signals",
                        printable(pk, fs + 8, fl - 8));
        }
        *want = c->signals[*id].type == TG_SIG_BOOLEAN ? TG_FT_BOOLEAN : TG_FT_NUMBER;
    } else if (strcmp(fs, "tenant") == 0 || strcmp(fs, "principal.subject") == 0 ||
               strcmp(fs, "principal.issuer") == 0) {
        /* Verified facts of the authenticated caller (kernel.h), strings. */
        *src = (uint8_t)(fs[0] == 't'    ? TG_SRC_TENANT
                         : fs[10] == 's' ? TG_SRC_PRINCIPAL_SUBJECT
                                         : TG_SRC_PRINCIPAL_ISSUER);
        *want = TG_FT_STRING;
    } else if (fl > 17 && memcmp(fs, "principal.claims.", 17) == 0) {
        /* A verified claim may be a string, a number or a boolean: typed like an
         * undeclared context field. */
        *src = TG_SRC_CLAIM;
        rc = check_name(c, fs + 17, fl - 17, "principal claim name");
        if (rc) {
            return rc;
        }
        rc = intern_claim(c, fs + 17, fl - 17, id);
        if (rc) {
            return rc;
        }
    } else if (fl >= 10 && memcmp(fs, "principal.", 10) == 0) {
        return fail(c,
                    "unknown principal field \"%s\" (expected principal.subject, "
                    "principal.issuer or principal.claims.<name>)",
                    printable(pk, fs, fl));
    } else {
        return fail(c,
                    "unknown field \"%s\" (expected context.<name>, signals.<name>, actor, "
                    "action, tenant or principal.<subject|issuer|claims.<name>>)",
                    printable(pk, fs, fl));
    }
    return TG_OK;
}

static tg_err_t compile_group(cc_t *c, tg_cond_t *cd, const tg_surface_t *s, const json_t *v);
static tg_err_t compile_value_from(cc_t *c, tg_cond_t *cd, const tg_surface_t *s, const json_t *v,
                                   uint8_t want);

static tg_err_t compile_cond(cc_t *c, tg_cond_t *cd, const tg_surface_t *s, const json_t *v) {
    static const char *const allowed[] = {"field", "op",          "value", "value_from",
                                          "set",   "description", NULL};
    char pk[80];
    if (!json_is_object(v)) {
        return fail(c, "condition must be an object, not %s", json_type_name(v));
    }
    if (json_object_get(v, "any_of") || json_object_get(v, "all_of") || json_object_get(v, "not")) {
        return compile_group(c, cd, s, v);
    }
    tg_err_t rc = check_members(c, v, allowed, "field, op, value, value_from, set, description");
    if (rc) {
        return rc;
    }
    /* field */
    const json_t *fv = json_object_get(v, "field");
    size_t saved = path_push_key(c, "field");
    if (fv == NULL) {
        return fail(c, "required member missing");
    }
    if (!json_is_string(fv)) {
        return fail(c, "must be a string, not %s", json_type_name(fv));
    }
    const char *fs = json_string_value(fv);
    size_t fl = json_string_length(fv);
    uint8_t want = TG_FT_ANY; /* what the field can hold */
    if (fl > 5 && memcmp(fs, "time.", 5) == 0) {
        rc = compile_time_field(c, cd, fs, fl); /* not in resolve_field: no value_from */
    } else {
        rc = resolve_field(c, s, fs, fl, &cd->src, &cd->id, &want);
    }
    if (rc) {
        return rc;
    }
    if (!arena_sv(c, &cd->field, fs, fl)) {
        return nomem(c);
    }
    path_pop(c, saved);
    /* op */
    const json_t *ov = json_object_get(v, "op");
    saved = path_push_key(c, "op");
    if (ov == NULL) {
        return fail(c, "required member missing");
    }
    if (!json_is_string(ov)) {
        return fail(c, "must be a string, not %s", json_type_name(ov));
    }
    int op = -1;
    for (int i = 0; i <= TG_OP_GLOB; i++) {
        if (strcmp(json_string_value(ov), OP_NAMES[i]) == 0) {
            op = i;
        }
    }
    if (op < 0) {
        return fail(c, "unknown operator \"%s\"",
                    printable(pk, json_string_value(ov), json_string_length(ov)));
    }
    cd->op = (uint8_t)op;
    path_pop(c, saved);
    if (cd->src >= TG_SRC_TIME_HOUR && op != TG_OP_EXISTS) {
        return compile_time_cond(c, cd, v, op);
    }
    if (json_object_get(v, "set") != NULL) {
        return compile_set_cond(c, cd, v, op, want);
    }
    saved = path_push_key(c, "op");
    int ordered = op == TG_OP_GT || op == TG_OP_GTE || op == TG_OP_LT || op == TG_OP_LTE;
    if (ordered && want != TG_FT_ANY && want != TG_FT_NUMBER) {
        return fail(c, "%s compares numbers but %s is of type %s", OP_NAMES[op], fs, ft_name(want));
    }
    if (op >= TG_OP_PREFIX && want != TG_FT_ANY && want != TG_FT_STRING) {
        return fail(c, "%s matches strings but %s is of type %s", OP_NAMES[op], fs, ft_name(want));
    }
    path_pop(c, saved);
    if (json_object_get(v, "value_from") != NULL) {
        return compile_value_from(c, cd, s, v, want);
    }
    /* value */
    const json_t *vv = json_object_get(v, "value");
    saved = path_push_key(c, "value");
    if (op == TG_OP_EXISTS) {
        cd->value.type = TG_VT_BOOL;
        cd->value.boolean = 1;
        if (vv != NULL) {
            if (!json_is_boolean(vv)) {
                return fail(c, "exists takes true or false, not %s", json_type_name(vv));
            }
            cd->value.boolean = json_is_true(vv) ? 1 : 0;
        }
    } else if (vv == NULL) {
        return fail(c, "required member missing for operator %s", OP_NAMES[op]);
    } else if (ordered) {
        if (!is_number(vv)) {
            return fail(c, "%s needs a number, not %s", OP_NAMES[op], json_type_name(vv));
        }
        cd->value.type = TG_VT_NUMBER;
        cd->value.num = num_of(vv);
    } else if (op == TG_OP_EQ || op == TG_OP_NE) {
        rc = compile_operand(c, &cd->value, vv, want);
        if (rc) {
            return rc;
        }
    } else if (op >= TG_OP_PREFIX) {
        if (!json_is_string(vv)) {
            return fail(c, "%s needs a string, not %s", OP_NAMES[op], json_type_name(vv));
        }
        rc = compile_operand(c, &cd->value, vv, TG_FT_STRING);
        if (rc) {
            return rc;
        }
    } else { /* in, not_in */
        size_t limit = cd->src == TG_SRC_ACTOR ? TG_POLICY_MAX_ACTORS : TG_POLICY_MAX_LIST;
        if (!json_is_array(vv)) {
            return fail(c, "%s needs an array, not %s", OP_NAMES[op], json_type_name(vv));
        }
        if (json_array_size(vv) == 0) {
            return fail(c, "%s needs at least one value", OP_NAMES[op]);
        }
        if (json_array_size(vv) > limit) {
            return fail(c, "%zu values (limit %zu)", json_array_size(vv), limit);
        }
        tg_sv_t *actors = NULL;
        size_t n = json_array_size(vv);
        if (cd->src == TG_SRC_ACTOR) { /* "@group" expands */
            actors = malloc(limit * sizeof *actors);
            if (actors == NULL) {
                return nomem(c);
            }
            size_t k = 0;
            for (size_t i = 0; i < json_array_size(vv) && rc == TG_OK; i++) {
                size_t s2 = path_push_index(c, i);
                rc = expand_actor(c, actors, &k, limit, json_array_get(vv, i));
                if (rc == TG_OK) {
                    path_pop(c, s2);
                }
            }
            n = k;
        }
        tg_value_t *list = rc ? NULL : arena_alloc(c->p, n * sizeof *list);
        if (rc == TG_OK && list == NULL) {
            rc = nomem(c);
        }
        for (size_t i = 0; i < n && rc == TG_OK; i++) {
            if (actors != NULL) {
                tg_sv_t sv;
                if (!arena_sv(c, &sv, actors[i].ptr, actors[i].len)) {
                    rc = nomem(c);
                    break;
                }
                list[i].type = TG_VT_STRING;
                list[i].str = sv.ptr;
                list[i].len = sv.len;
            } else {
                size_t s2 = path_push_index(c, i);
                rc = compile_operand(c, &list[i], json_array_get(vv, i), want);
                if (rc == TG_OK) {
                    path_pop(c, s2);
                }
            }
        }
        free(actors);
        if (rc) {
            return rc;
        }
        cd->list = list;
        cd->n_list = (uint32_t)n;
    }
    path_pop(c, saved);
    return TG_OK;
}

_Static_assert(TG_POLICY_MAX_NESTING <= TG_COND_MAX_NESTING,
               "the kernel walks every group nesting the compiler accepts");

/* ---- condition groups and value_from (issue 21) ---------------------------------------
 * A group {"any_of"|"all_of": [cond, ...]} or {"not": cond} compiles to a tg_cond_t with op
 * TG_OP_ANY / ALL / NOT and its members in sub[]. Bounds (policy.h): groups nest at most
 * TG_POLICY_MAX_NESTING deep, a group has 1..TG_POLICY_MAX_GROUP members, a rule has at most
 * TG_POLICY_MAX_RULE_NODES conditions in all (groups and leaves, counted in c->cond_nodes).
 */
static tg_err_t compile_group(cc_t *c, tg_cond_t *cd, const tg_surface_t *s, const json_t *v) {
    static const char *const allowed[] = {"any_of", "all_of", "not", "description", NULL};
    static const char *const keys[] = {"all_of", "any_of", "not"};
    static const uint8_t ops[] = {TG_OP_ALL, TG_OP_ANY, TG_OP_NOT};
    tg_err_t rc = check_members(c, v, allowed, "any_of, all_of or not, and description");
    if (rc) {
        return rc;
    }
    const json_t *gv = NULL;
    size_t k = 0;
    for (size_t i = 0; i < 3; i++) {
        const json_t *m = json_object_get(v, keys[i]);
        if (m != NULL && gv != NULL) {
            return fail(c, "a group has one of any_of, all_of and not, not both %s and %s", keys[k],
                        keys[i]);
        }
        if (m != NULL) {
            gv = m;
            k = i;
        }
    }
    if (gv == NULL) { /* compile_cond calls this for an object with one of the keys */
        return fail(c, "a group needs any_of, all_of or not");
    }
    size_t saved = path_push_key(c, keys[k]);
    if (c->cond_depth >= TG_POLICY_MAX_NESTING) {
        return fail(c, "groups nested more than %d deep", TG_POLICY_MAX_NESTING);
    }
    size_t n;
    if (ops[k] == TG_OP_NOT) {
        if (!json_is_object(gv)) {
            return fail(c, "not takes one condition (an object), not %s", json_type_name(gv));
        }
        n = 1;
    } else {
        if (!json_is_array(gv)) {
            return fail(c, "%s takes an array of conditions, not %s", keys[k], json_type_name(gv));
        }
        n = json_array_size(gv);
        if (n == 0) {
            return fail(c, "an empty %s is an error (it would hold %s)", keys[k],
                        ops[k] == TG_OP_ALL ? "always" : "never");
        }
        if (n > TG_POLICY_MAX_GROUP) {
            return fail(c, "%zu members (limit %d)", n, TG_POLICY_MAX_GROUP);
        }
    }
    c->cond_nodes += n;
    if (c->cond_nodes > TG_POLICY_MAX_RULE_NODES) {
        return fail(c, "more than %d conditions in the rule (groups and their members)",
                    TG_POLICY_MAX_RULE_NODES);
    }
    tg_cond_t *sub = arena_alloc(c->p, n * sizeof *sub);
    if (sub == NULL) {
        return nomem(c);
    }
    c->cond_depth++;
    for (size_t i = 0; i < n; i++) {
        size_t s2 = ops[k] == TG_OP_NOT ? c->path_len : path_push_index(c, i);
        rc = compile_cond(c, &sub[i], s, ops[k] == TG_OP_NOT ? gv : json_array_get(gv, i));
        if (rc) {
            return rc;
        }
        path_pop(c, s2);
    }
    c->cond_depth--;
    cd->op = ops[k];
    cd->sub = sub;
    cd->n_sub = (uint32_t)n;
    path_pop(c, saved);
    return TG_OK;
}

/* {"field": F, "op": eq..lte, "value_from": F2}: the operand is the request's own F2. want
 * is what F can hold; F2 follows the same field rules (resolve_field), and the two must be
 * able to compare (ordered: numbers; eq/ne: the same type when both are typed). */
static tg_err_t compile_value_from(cc_t *c, tg_cond_t *cd, const tg_surface_t *s, const json_t *v,
                                   uint8_t want) {
    const json_t *fv = json_object_get(v, "value_from");
    if (json_object_get(v, "value") != NULL) {
        path_push_key(c, "value");
        return fail(c, "value and value_from together (a condition compares with one of them)");
    }
    size_t saved = path_push_key(c, "value_from");
    if (cd->op > TG_OP_LTE) {
        return fail(c, "value_from works with eq, ne, gt, gte, lt and lte, not %s",
                    OP_NAMES[cd->op]);
    }
    if (fv == NULL || !json_is_string(fv)) {
        return fail(c, "must be a field name (a string), not %s",
                    fv == NULL ? "absent" : json_type_name(fv));
    }
    const char *fs = json_string_value(fv);
    size_t fl = json_string_length(fv);
    uint8_t other = TG_FT_ANY;
    tg_err_t rc = resolve_field(c, s, fs, fl, &cd->from_src, &cd->from_id, &other);
    if (rc) {
        return rc;
    }
    int ordered = cd->op >= TG_OP_GT;
    if (ordered && other != TG_FT_ANY && other != TG_FT_NUMBER) {
        return fail(c, "%s compares numbers but %s is of type %s", OP_NAMES[cd->op], fs,
                    ft_name(other));
    }
    if (!ordered && want != TG_FT_ANY && other != TG_FT_ANY && want != other) {
        return fail(c, "%s is of type %s and %.*s of type %s: %s never holds as meant", fs,
                    ft_name(other), (int)cd->field.len, cd->field.ptr, ft_name(want),
                    OP_NAMES[cd->op]);
    }
    if (!arena_sv(c, &cd->from_field, fs, fl)) {
        return nomem(c);
    }
    cd->has_from = 1;
    path_pop(c, saved);
    return TG_OK;
}

/* An integer member `key` of obj in lo..hi into *out; absent: *out untouched. */
static tg_err_t get_int_in(cc_t *c, const json_t *obj, const char *key, int64_t lo, int64_t hi,
                           int64_t *out) {
    const json_t *v = json_object_get(obj, key);
    if (v == NULL) {
        return TG_OK;
    }
    size_t saved = path_push_key(c, key);
    /* The strict parser reads every number as a double: an integer is one without a
     * fraction (checked after the range, so the cast is defined). */
    if (!is_number(v)) {
        return fail(c, "must be an integer, not %s", json_type_name(v));
    }
    double n = num_of(v);
    if (!(n >= (double)lo && n <= (double)hi)) {
        return fail(c, "%.17g is out of range (%lld..%lld)", n, (long long)lo, (long long)hi);
    }
    if (n != (double)(int64_t)n) {
        return fail(c, "%.17g is not an integer", n);
    }
    *out = (int64_t)n;
    path_pop(c, saved);
    return TG_OK;
}

/* One "approvers" entry: a subject's shape (tg_guard_subject_valid), or '@' and a group
 * name of that shape; the whole entry fits TG_APPROVAL_ENTRY_MAX. Sets *group. */
static int approver_entry_valid(const char *s, size_t n, int *group) {
    *group = n > 0 && s[0] == '@';
    if (n == 0 || n > TG_APPROVAL_ENTRY_MAX) {
        return 0;
    }
    return *group ? n > 1 && tg_guard_subject_valid(s + 1, n - 1) : tg_guard_subject_valid(s, n);
}

/* An escalate rule's "approval" object (policy.h tg_policy_rule_approval) into an arena spec,
 * defaults filled in; v NULL (absent) is refused: an escalate rule must say who approves. */
static tg_err_t compile_approval(cc_t *c, const json_t *v, const tg_approval_spec_t **out) {
    static const char *const allowed[] = {"required", "approvers", "ttl_s", "consume_within_s",
                                          NULL};
    char pk[80];
    if (v == NULL) {
        return fail(c, "an escalate rule needs \"approval\": {\"approvers\": [...]}");
    }
    size_t saved = path_push_key(c, "approval");
    if (!json_is_object(v)) {
        return fail(c, "must be an object, not %s", json_type_name(v));
    }
    tg_err_t rc = check_members(c, v, allowed, "required, approvers, ttl_s, consume_within_s");
    if (rc) {
        return rc;
    }
    tg_approval_spec_t *sp = arena_alloc(c->p, sizeof *sp);
    if (sp == NULL) {
        return nomem(c);
    }
    int64_t required = 1;
    sp->ttl_s = 3600;
    sp->consume_within_s = 900;
    rc = get_int_in(c, v, "required", 1, TG_APPROVAL_MAX_REQUIRED, &required);
    if (!rc) {
        rc = get_int_in(c, v, "ttl_s", 1, TG_APPROVAL_TTL_MAX_S, &sp->ttl_s);
    }
    if (!rc) {
        rc = get_int_in(c, v, "consume_within_s", 1, TG_APPROVAL_TTL_MAX_S, &sp->consume_within_s);
    }
    if (rc) {
        return rc;
    }
    sp->required = (uint32_t)required;
    const json_t *av = json_object_get(v, "approvers");
    size_t s2 = path_push_key(c, "approvers");
    if (av == NULL) {
        return fail(c, "required member missing (an array of \"@group\" or subject entries)");
    }
    if (!json_is_array(av)) {
        return fail(c, "must be an array of \"@group\" or subject entries, not %s",
                    json_type_name(av));
    }
    size_t n = json_array_size(av);
    if (n == 0 || n > TG_APPROVAL_MAX_APPROVERS) {
        return fail(c, "%zu entries (1..%d)", n, TG_APPROVAL_MAX_APPROVERS);
    }
    int any_group = 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(av, i);
        size_t s3 = path_push_index(c, i);
        int group = 0;
        if (!json_is_string(e)) {
            return fail(c, "must be a string, not %s", json_type_name(e));
        }
        const char *es = json_string_value(e);
        size_t el = json_string_length(e);
        if (!approver_entry_valid(es, el, &group)) {
            return fail(c,
                        "\"%s\" is neither a subject nor \"@group\" (1..%d of "
                        "[A-Za-z0-9._:@/+-] in all)",
                        printable(pk, es, el), TG_APPROVAL_ENTRY_MAX);
        }
        for (size_t j = 0; j < i; j++) {
            if (strlen(sp->approvers[j]) == el && memcmp(sp->approvers[j], es, el) == 0) {
                return fail(c, "duplicate entry \"%s\"", printable(pk, es, el));
            }
        }
        tg_sv_t sv;
        if (!arena_sv(c, &sv, es, el)) {
            return nomem(c);
        }
        sp->approvers[i] = sv.ptr;
        any_group |= group;
        path_pop(c, s3);
    }
    sp->n_approvers = (uint32_t)n;
    path_pop(c, s2);
    if (!any_group && sp->required > sp->n_approvers) {
        path_push_key(c, "required");
        return fail(c, "%u approvals required of %u listed subjects: it can never be approved",
                    sp->required, sp->n_approvers);
    }
    *out = sp;
    path_pop(c, saved);
    return TG_OK;
}

static tg_err_t compile_rule(cc_t *c, tg_rule_t *r, const tg_approval_spec_t **approval,
                             const tg_surface_t *s, size_t index, const json_t *v,
                             const tg_rule_t *prev, size_t n_prev) {
    static const char *const allowed[] = {"id",          "effect",        "reason",   "when",
                                          "description", "unconditional", "approval", NULL};
    char pk[80];
    if (!json_is_object(v)) {
        return fail(c, "rule must be an object, not %s", json_type_name(v));
    }
    tg_err_t rc = check_members(c, v, allowed,
                                "id, effect, reason, when, description, unconditional, approval");
    if (rc) {
        return rc;
    }
    /* The author's word that a permit without conditions is meant (tg_policy_lint); the
     * kernel does not read it, the bundle hash covers it. */
    const json_t *uv = json_object_get(v, "unconditional");
    if (uv != NULL && !json_is_boolean(uv)) {
        path_push_key(c, "unconditional");
        return fail(c, "must be true or false, not %s", json_type_name(uv));
    }
    const json_t *idv = json_object_get(v, "id");
    size_t saved = path_push_key(c, "id");
    if (idv != NULL) {
        if (!json_is_string(idv)) {
            return fail(c, "must be a string, not %s", json_type_name(idv));
        }
        rc = check_name(c, json_string_value(idv), json_string_length(idv), "rule id");
        if (rc) {
            return rc;
        }
        if (!arena_sv(c, &r->id, json_string_value(idv), json_string_length(idv))) {
            return nomem(c);
        }
    } else {
        char gen[32];
        int w = snprintf(gen, sizeof gen, "rules[%zu]", index);
        if (w < 0 || !arena_sv(c, &r->id, gen, (size_t)w)) {
            return nomem(c);
        }
    }
    for (size_t i = 0; i < n_prev; i++) {
        if (prev[i].id.len == r->id.len && memcmp(prev[i].id.ptr, r->id.ptr, r->id.len) == 0) {
            return fail(c, "duplicate rule id \"%s\"", printable(pk, r->id.ptr, r->id.len));
        }
    }
    path_pop(c, saved);
    const json_t *ev = json_object_get(v, "effect");
    saved = path_push_key(c, "effect");
    if (ev == NULL) {
        return fail(c, "required member missing (\"permit\", \"deny\" or \"escalate\")");
    }
    if (json_is_string(ev) && strcmp(json_string_value(ev), "permit") == 0) {
        r->effect = TG_EFFECT_PERMIT;
    } else if (json_is_string(ev) && strcmp(json_string_value(ev), "deny") == 0) {
        r->effect = TG_EFFECT_DENY;
    } else if (json_is_string(ev) && strcmp(json_string_value(ev), "escalate") == 0) {
        r->effect = TG_EFFECT_ESCALATE;
    } else {
        return fail(c, "must be \"permit\", \"deny\" or \"escalate\"");
    }
    path_pop(c, saved);
    r->reason = NULL;
    rc = get_reason(c, v, "reason", &r->reason);
    if (rc) {
        return rc;
    }
    const json_t *apv = json_object_get(v, "approval");
    *approval = NULL;
    if (r->effect == TG_EFFECT_ESCALATE) {
        rc = compile_approval(c, apv, approval);
        if (rc) {
            return rc;
        }
    } else if (apv != NULL) {
        path_push_key(c, "approval");
        return fail(c, "only an escalate rule has an approval");
    }
    if (r->effect == TG_EFFECT_PERMIT) {
        /* a PERMIT always says NO_POLICY_VIOLATION (SPEC §3.2) */
        r->reason = tg_reason_code(TG_REASON_NO_POLICY_VIOLATION);
    } else if (r->reason == NULL) {
        r->reason = tg_reason_code(r->effect == TG_EFFECT_ESCALATE ? TG_REASON_APPROVAL_REQUIRED
                                                                   : TG_REASON_POLICY_DENY);
    }
    const json_t *wv = json_object_get(v, "when");
    if (wv == NULL) {
        return TG_OK; /* unconditional */
    }
    saved = path_push_key(c, "when");
    if (!json_is_array(wv)) {
        return fail(c, "must be an array of conditions, not %s", json_type_name(wv));
    }
    size_t n = json_array_size(wv);
    if (n > TG_POLICY_MAX_CONDITIONS) {
        return fail(c, "%zu conditions (limit %d)", n, TG_POLICY_MAX_CONDITIONS);
    }
    tg_cond_t *conds = arena_alloc(c->p, (n ? n : 1) * sizeof *conds);
    if (conds == NULL) {
        return nomem(c);
    }
    c->cond_nodes = n; /* groups add their members (compile_group) */
    c->cond_depth = 0;
    for (size_t i = 0; i < n; i++) {
        size_t s2 = path_push_index(c, i);
        rc = compile_cond(c, &conds[i], s, json_array_get(wv, i));
        if (rc) {
            return rc;
        }
        path_pop(c, s2);
    }
    r->conds = conds;
    r->n_conds = (uint32_t)n;
    path_pop(c, saved);
    return TG_OK;
}

/* ---- one surface ---------------------------------------------------------------------- */

static int ft_parse(const char *s, uint8_t *out) {
    static const char *const names[] = {"any", "string", "number", "boolean", "object", "array"};
    for (uint8_t i = 0; i < 6; i++) {
        if (strcmp(s, names[i]) == 0) {
            *out = i;
            return 1;
        }
    }
    return 0;
}

/* required_context or optional_context (`key`, at most `limit` fields): the declared fields
 * and their types into *out, ordered by name bytewise. */
static tg_err_t compile_declared(cc_t *c, const char *key, size_t limit, const json_t *rq,
                                 const tg_reqfield_t **out, uint32_t *n_out) {
    char pk[80];
    size_t saved = path_push_key(c, key);
    if (!json_is_object(rq) && !json_is_array(rq)) {
        return fail(c, "must be an object of name -> type or an array of names, not %s",
                    json_type_name(rq));
    }
    size_t n = json_is_object(rq) ? json_object_size(rq) : json_array_size(rq);
    if (n > limit) {
        return fail(c, "%zu %s fields (limit %zu)", n, key[0] == 'r' ? "required" : "optional",
                    limit);
    }
    tg_reqfield_t *req = arena_alloc(c->p, (n ? n : 1) * sizeof *req);
    if (req == NULL) {
        return nomem(c);
    }
    tg_err_t rc = TG_OK;
    if (json_is_object(rq)) {
        size_t nm;
        member_t *m = sorted_members(c, rq, &nm);
        if (m == NULL) {
            return c->err;
        }
        for (size_t i = 0; i < nm && rc == TG_OK; i++) {
            size_t s2 = path_push_key(c, m[i].key);
            rc = check_name(c, m[i].key, m[i].len, "context field name");
            if (rc == TG_OK) {
                rc = intern_field(c, m[i].key, m[i].len, &req[i].id);
            }
            if (rc == TG_OK && (!json_is_string(m[i].value) ||
                                !ft_parse(json_string_value(m[i].value), &req[i].type))) {
                rc = fail(c, "type must be one of string, number, boolean, object, array, any");
            }
            if (rc == TG_OK) {
                path_pop(c, s2);
            }
        }
        free(m);
    } else {
        for (size_t i = 0; i < n && rc == TG_OK; i++) {
            const json_t *v = json_array_get(rq, i);
            size_t s2 = path_push_index(c, i);
            if (!json_is_string(v)) {
                return fail(c, "must be a field name (string), not %s", json_type_name(v));
            }
            rc = check_name(c, json_string_value(v), json_string_length(v), "context field name");
            if (rc) {
                return rc;
            }
            rc = intern_field(c, json_string_value(v), json_string_length(v), &req[i].id);
            if (rc) {
                return rc;
            }
            req[i].type = TG_FT_ANY;
            for (size_t k = 0; k < i; k++) {
                if (req[k].id == req[i].id) {
                    return fail(c, "duplicate field \"%s\"",
                                printable(pk, json_string_value(v), json_string_length(v)));
                }
            }
            path_pop(c, s2);
        }
    }
    if (rc) {
        return rc;
    }
    *out = req;
    *n_out = (uint32_t)n;
    path_pop(c, saved);
    return TG_OK;
}

/* A field is either required or optional: declared in both, one of the two is a mistake. */
static tg_err_t check_declared_once(cc_t *c, const tg_surface_t *s) {
    char pk[80];
    for (uint32_t i = 0; i < s->n_optional; i++) {
        for (uint32_t k = 0; k < s->n_required; k++) {
            if (s->optional[i].id == s->required[k].id) {
                const tg_sv_t *nm = &c->fields[s->optional[i].id];
                size_t saved = path_push_key(c, "optional_context");
                path_push_key(c, nm->ptr);
                tg_err_t rc = fail(c, "field \"%s\" is declared in required_context too",
                                   printable(pk, nm->ptr, nm->len));
                path_pop(c, saved);
                return rc;
            }
        }
    }
    return TG_OK;
}

static tg_err_t compile_default(cc_t *c, tg_surface_t *s, const json_t *dv) {
    s->default_effect = TG_EFFECT_DENY;
    s->default_reason = tg_reason_code(TG_REASON_NO_MATCHING_POLICY);
    if (dv == NULL) {
        return TG_OK; /* fail closed: no matching rule is a DENY on every tier */
    }
    size_t saved = path_push_key(c, "default");
    const json_t *ev = dv;
    if (json_is_object(dv)) {
        static const char *const allowed[] = {"effect", "reason", NULL};
        tg_err_t rc = check_members(c, dv, allowed, "effect, reason");
        if (rc) {
            return rc;
        }
        ev = json_object_get(dv, "effect");
        if (ev == NULL) {
            return fail(c, "effect is required (\"permit\" or \"deny\")");
        }
        rc = get_reason(c, dv, "reason", &s->default_reason);
        if (rc) {
            return rc;
        }
    }
    if (json_is_string(ev) && strcmp(json_string_value(ev), "permit") == 0) {
        if (s->tier == 1) {
            return fail(c, "a tier-1 (irreversible) surface cannot default to permit");
        }
        s->default_effect = TG_EFFECT_PERMIT;
        s->default_reason = tg_reason_code(TG_REASON_NO_POLICY_VIOLATION);
    } else if (!(json_is_string(ev) && strcmp(json_string_value(ev), "deny") == 0)) {
        return fail(c, "must be \"permit\", \"deny\" or {\"effect\", \"reason\"}");
    }
    path_pop(c, saved);
    return TG_OK;
}

static tg_err_t compile_surface_rules(cc_t *c, tg_surface_t *s, const json_t *body);

static tg_err_t compile_surface(cc_t *c, tg_surface_t *s, const json_t *body) {
    static const char *const allowed[] = {"tier",
                                          "frozen",
                                          "description",
                                          "required_context",
                                          "optional_context",
                                          "actors",
                                          "rules",
                                          "default",
                                          "mode",
                                          "timezone",
                                          NULL};
    if (!json_is_object(body)) {
        return fail(c, "surface must be an object, not %s", json_type_name(body));
    }
    tg_err_t rc = check_members(c, body, allowed,
                                "tier, frozen, description, required_context, optional_context, "
                                "actors, rules, default, mode, timezone");
    if (rc) {
        return rc;
    }
    c->zone_cur = c->zone_bundle; /* time.* in this surface's rules: its zone, else the bundle's */
    rc = compile_timezone(c, body, &c->zone_cur);
    if (rc) {
        return rc;
    }
    /* SPEC §11.1: an operator's rollout, observed for every caller. Not the kernel's: the
     * pipeline applies it after the decision. */
    const json_t *mv = json_object_get(body, "mode");
    if (mv != NULL) {
        size_t msaved = path_push_key(c, "mode");
        const char *ms = json_is_string(mv) ? json_string_value(mv) : "";
        if (strcmp(ms, "observe") != 0 && strcmp(ms, "enforce") != 0) {
            return fail(c, "must be \"enforce\" or \"observe\"");
        }
        s->observe = strcmp(ms, "observe") == 0 ? 1 : 0;
        path_pop(c, msaved);
    }
    const json_t *tv = json_object_get(body, "tier");
    size_t saved = path_push_key(c, "tier");
    if (tv == NULL) {
        return fail(c, "required member missing (1, 2 or 3)");
    }
    double t = is_number(tv) ? num_of(tv) : 0.0;
    if (!(t == 1.0 || t == 2.0 || t == 3.0)) {
        return fail(c, "must be 1, 2 or 3");
    }
    s->tier = (uint8_t)t;
    path_pop(c, saved);
    const json_t *fz = json_object_get(body, "frozen");
    if (fz != NULL) {
        saved = path_push_key(c, "frozen");
        if (!json_is_boolean(fz)) {
            return fail(c, "must be true or false, not %s", json_type_name(fz));
        }
        s->frozen = json_is_true(fz) ? 1 : 0;
        path_pop(c, saved);
    }
    const json_t *dsc = json_object_get(body, "description");
    if (dsc != NULL && !json_is_string(dsc)) {
        path_push_key(c, "description");
        return fail(c, "must be a string, not %s", json_type_name(dsc));
    }
    const json_t *rq = json_object_get(body, "required_context");
    if (rq != NULL) {
        rc = compile_declared(c, "required_context", TG_POLICY_MAX_REQUIRED, rq, &s->required,
                              &s->n_required);
        if (rc) {
            return rc;
        }
    }
    const json_t *oq = json_object_get(body, "optional_context");
    if (oq != NULL) {
        rc = compile_declared(c, "optional_context", TG_POLICY_MAX_OPTIONAL, oq, &s->optional,
                              &s->n_optional);
        if (rc == TG_OK) {
            rc = check_declared_once(c, s);
        }
        if (rc) {
            return rc;
        }
    }
    const json_t *av = json_object_get(body, "actors");
    if (av != NULL) {
        saved = path_push_key(c, "actors");
        if (!json_is_array(av)) {
            return fail(c, "must be an array of actor ids, not %s", json_type_name(av));
        }
        tg_sv_t *tmp = malloc(TG_POLICY_MAX_ACTORS * sizeof *tmp);
        if (tmp == NULL) {
            return nomem(c);
        }
        size_t k = 0;
        for (size_t i = 0; i < json_array_size(av) && rc == TG_OK; i++) {
            size_t s2 = path_push_index(c, i);
            rc = expand_actor(c, tmp, &k, TG_POLICY_MAX_ACTORS, json_array_get(av, i));
            if (rc == TG_OK) {
                path_pop(c, s2);
            }
        }
        if (rc == TG_OK) {
            rc = intern_sorted(c, tmp, k, &s->actors, &s->n_actors);
        }
        free(tmp);
        if (rc) {
            return rc;
        }
        s->has_actors = 1;
        path_pop(c, saved);
    }
    rc = compile_default(c, s, json_object_get(body, "default"));
    if (rc) {
        return rc;
    }
    return compile_surface_rules(c, s, body);
}

/* Rules after the required list: operands are checked against the declared types. */
static tg_err_t compile_surface_rules(cc_t *c, tg_surface_t *s, const json_t *body) {
    const json_t *rv = json_object_get(body, "rules");
    if (rv == NULL) {
        return TG_OK;
    }
    size_t saved = path_push_key(c, "rules");
    if (!json_is_array(rv)) {
        return fail(c, "must be an array of rules, not %s", json_type_name(rv));
    }
    size_t n = json_array_size(rv);
    if (n > TG_POLICY_MAX_RULES) {
        return fail(c, "%zu rules (limit %d)", n, TG_POLICY_MAX_RULES);
    }
    tg_rule_t *rules = arena_alloc(c->p, (n ? n : 1) * sizeof *rules);
    /* an array of pointers, one per rule (NULL but for escalate rules) */
    const tg_approval_spec_t **approvals =
        arena_alloc(c->p, (n ? n : 1) * sizeof *approvals); /* NOLINT(bugprone-sizeof-expression) */
    if (rules == NULL || approvals == NULL) {
        return nomem(c);
    }
    c->p->approvals[s - c->surfaces] = approvals;
    for (size_t i = 0; i < n; i++) {
        size_t s2 = path_push_index(c, i);
        tg_err_t rc =
            compile_rule(c, &rules[i], &approvals[i], s, i, json_array_get(rv, i), rules, i);
        if (rc) {
            return rc;
        }
        path_pop(c, s2);
    }
    s->rules = rules;
    s->n_rules = (uint32_t)n;
    c->p->n_rules += (uint32_t)n;
    path_pop(c, saved);
    return TG_OK;
}

/* ---- tools ------------------------------------------------------------------------- */

static tg_err_t compile_tools(cc_t *c, const json_t *tools) {
    tg_policy_t *p = c->p;
    if (tools == NULL) {
        return TG_OK;
    }
    size_t saved = path_push_key(c, "tools");
    if (!json_is_object(tools)) {
        return fail(c, "must be an object of tool -> surface, not %s", json_type_name(tools));
    }
    size_t n = json_object_size(tools);
    if (n > TG_POLICY_MAX_TOOLS) {
        return fail(c, "%zu tools (limit %d)", n, TG_POLICY_MAX_TOOLS);
    }
    size_t nm;
    member_t *m = sorted_members(c, tools, &nm);
    if (m == NULL) {
        return c->err;
    }
    tg_err_t rc = TG_OK;
    tg_tool_t *t = arena_alloc(p, (nm ? nm : 1) * sizeof *t);
    if (t == NULL || !htab_init(p, &p->tool_index, (uint32_t)nm)) {
        rc = nomem(c);
        goto done;
    }
    for (size_t i = 0; i < nm; i++) {
        size_t s2 = path_push_key(c, m[i].key);
        rc = check_name(c, m[i].key, m[i].len, "tool name");
        if (rc) {
            goto done;
        }
        const json_t *v = m[i].value;
        if (json_is_object(v)) {
            static const char *const allowed[] = {"surface", "action", "description", NULL};
            rc = check_members(c, v, allowed, "surface, action, description");
            if (rc) {
                goto done;
            }
            const json_t *sv = json_object_get(v, "surface");
            size_t s3 = path_push_key(c, "surface");
            if (sv == NULL) {
                rc = fail(c, "required member missing");
                goto done;
            }
            rc = surface_ref(c, sv, &t[i].surface);
            if (rc) {
                goto done;
            }
            path_pop(c, s3);
            const json_t *act = json_object_get(v, "action");
            if (act != NULL) {
                s3 = path_push_key(c, "action");
                if (!json_is_string(act)) {
                    rc = fail(c, "must be a string, not %s", json_type_name(act));
                    goto done;
                }
                rc = check_name(c, json_string_value(act), json_string_length(act), "action");
                if (rc) {
                    goto done;
                }
                if (!arena_sv(c, &t[i].action, json_string_value(act), json_string_length(act))) {
                    rc = nomem(c);
                    goto done;
                }
                path_pop(c, s3);
            }
        } else {
            rc = surface_ref(c, v, &t[i].surface);
            if (rc) {
                goto done;
            }
        }
        if (!arena_sv(c, &t[i].name, m[i].key, m[i].len)) {
            rc = nomem(c);
            goto done;
        }
        htab_put(&p->tool_index, t, sizeof *t, (uint32_t)i);
        path_pop(c, s2);
    }
    p->tools = t;
    p->n_tools = (uint32_t)nm;
    path_pop(c, saved);
done:
    free(m);
    return rc;
}

/* ---- the bundle ------------------------------------------------------------------------ */

static tg_err_t compile_string_member(cc_t *c, const json_t *bundle, const char *key, size_t max,
                                      int required, const char *dflt, const char **out) {
    const json_t *v = json_object_get(bundle, key);
    size_t saved = path_push_key(c, key);
    if (v == NULL) {
        if (required) {
            return fail(c, "required member missing");
        }
        v = NULL;
    } else if (!json_is_string(v)) {
        return fail(c, "must be a string, not %s", json_type_name(v));
    }
    const char *s = v != NULL ? json_string_value(v) : dflt;
    size_t n = v != NULL ? json_string_length(v) : strlen(dflt);
    if (n == 0) {
        return fail(c, "must not be empty");
    }
    if (n > max) {
        return fail(c, "longer than %zu bytes", max);
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch < 0x20 || ch == 0x7f) {
            return fail(c, "contains a control character");
        }
    }
    tg_sv_t sv;
    if (!arena_sv(c, &sv, s, n)) {
        return nomem(c);
    }
    *out = sv.ptr;
    path_pop(c, saved);
    return TG_OK;
}

tg_err_t tg_policy_compile(tg_policy_t **out, const json_t *bundle, tg_diag_t *diag) {
    return tg_policy_compile_opts(out, bundle, NULL, diag);
}

/* The zones table (zone 0 = the bundle's, "UTC" by default) and the data sets, before the
 * surfaces whose conditions refer to them. */
static tg_err_t compile_time_and_sets(cc_t *c, const json_t *bundle) {
    c->zones = arena_alloc(c->p, TG_POLICY_MAX_ZONES * sizeof *c->zones);
    if (c->zones == NULL) {
        return nomem(c);
    }
    c->p->tables.zones = c->zones;
    json_t *utc = json_string("UTC");
    if (utc == NULL) {
        return nomem(c);
    }
    const json_t *tz = json_object_get(bundle, "timezone");
    size_t saved = path_push_key(c, "timezone");
    tg_err_t rc = intern_zone(c, tz != NULL ? tz : utc, &c->zone_bundle);
    json_decref(utc);
    if (rc) {
        return rc;
    }
    path_pop(c, saved);
    return compile_sets(c, json_object_get(bundle, "sets"));
}

tg_err_t tg_policy_compile_opts(tg_policy_t **out, const json_t *bundle,
                                const tg_policy_opts_t *opts, tg_diag_t *diag) {
    static const char *const allowed[] = {
        "version", "authority", "description", "surfaces", "signals", "actors", "tools",
        "tiers",   "timezone",  "sets",        "limits",   "routes",  NULL};
    if (out == NULL || bundle == NULL) {
        return tg_diag_set(diag, TG_ERR_INVALID_ARG, "tg_policy_compile: NULL argument");
    }
    *out = NULL;
    tg_policy_t *p = calloc(1, sizeof *p);
    if (p == NULL) {
        return tg_diag_set(diag, TG_ERR_NOMEM, "out of memory compiling the policy");
    }
    cc_t c;
    memset(&c, 0, sizeof c);
    c.p = p;
    c.diag = diag;
    c.opts = opts;
    c.bundle = bundle;
    tg_err_t rc = TG_OK;
    if (!json_is_object(bundle)) {
        rc = fail(&c, "the bundle must be a JSON object, not %s", json_type_name(bundle));
        goto done;
    }
    rc = check_members(&c, bundle, allowed,
                       "version, authority, description, surfaces, signals, actors, tools, "
                       "tiers, timezone, sets, limits, routes");
    if (rc) {
        goto done;
    }
    rc = compile_string_member(&c, bundle, "version", TG_POLICY_MAX_VERSION, 1, NULL, &p->version);
    if (rc) {
        goto done;
    }
    rc = compile_string_member(&c, bundle, "authority", TG_POLICY_MAX_AUTHORITY, 0,
                               "trigguard-local", &p->authority);
    if (rc) {
        goto done;
    }
    const json_t *dsc = json_object_get(bundle, "description");
    if (dsc != NULL && !json_is_string(dsc)) {
        path_push_key(&c, "description");
        rc = fail(&c, "must be a string, not %s", json_type_name(dsc));
        goto done;
    }
    rc = compile_tiers(&c, json_object_get(bundle, "tiers"));
    if (rc) {
        goto done;
    }
    c.groups = json_object_get(bundle, "actors");
    rc = check_groups(&c, c.groups);
    if (rc) {
        goto done;
    }
    const json_t *surfaces = json_object_get(bundle, "surfaces");
    rc = compile_surface_names(&c, surfaces);
    if (rc) {
        goto done;
    }
    rc = compile_signals(&c, json_object_get(bundle, "signals"));
    if (rc) {
        goto done;
    }
    c.fields = arena_alloc(p, TG_POLICY_MAX_FIELDS * sizeof *c.fields);
    if (c.fields == NULL || !htab_init(p, &p->field_index, TG_POLICY_MAX_FIELDS)) {
        rc = nomem(&c);
        goto done;
    }
    p->tables.fields = c.fields;
    c.claims = arena_alloc(p, TG_POLICY_MAX_CLAIMS * sizeof *c.claims);
    if (c.claims == NULL) {
        rc = nomem(&c);
        goto done;
    }
    p->tables.claims = c.claims;
    rc = compile_time_and_sets(&c, bundle);
    if (rc) {
        goto done;
    }
    for (uint32_t i = 0; i < p->tables.n_surfaces; i++) {
        size_t s1 = path_push_key(&c, "surfaces");
        path_push_key(&c, c.surfaces[i].name.ptr);
        rc = compile_surface(&c, &c.surfaces[i], json_object_get(surfaces, c.surfaces[i].name.ptr));
        if (rc) {
            goto done;
        }
        path_pop(&c, s1);
    }
    rc = compile_tools(&c, json_object_get(bundle, "tools"));
    if (rc) {
        goto done;
    }
    rc = tg_policy_compile_limits_(p, json_object_get(bundle, "limits"), diag);
    if (rc) {
        goto done;
    }
    rc = tg_policy_routes_compile_(p, json_object_get(bundle, "routes"), diag);
    if (rc) {
        goto done;
    }
    /* policy.h: with file data sets, the hash covers their content through "sha256" */
    rc = tg_canon_sha256(p->tables.policy_hash, c.hashed != NULL ? c.hashed : bundle, diag);
    if (rc) {
        goto done;
    }
    tg_hex(p->hash_hex, p->tables.policy_hash, sizeof p->tables.policy_hash);
done:
    json_decref(c.hashed);
    if (rc) {
        tg_policy_destroy(p);
        return rc;
    }
    *out = p;
    return TG_OK;
}

tg_err_t tg_policy_parse_(json_t **out, const char *text, size_t len, tg_diag_t *diag) {
    tg_json_limits_t lim = TG_JSON_LIMITS_DEFAULT;
    lim.max_bytes = TG_POLICY_MAX_FILE;
    lim.max_keys = TG_POLICY_MAX_TOOLS;
    return tg_json_parse(out, text, len, &lim, diag);
}

tg_err_t tg_policy_load_text(tg_policy_t **out, const char *text, size_t len, tg_diag_t *diag) {
    return tg_policy_load_text_opts(out, text, len, NULL, diag);
}

tg_err_t tg_policy_load_text_opts(tg_policy_t **out, const char *text, size_t len,
                                  const tg_policy_opts_t *opts, tg_diag_t *diag) {
    if (out == NULL) {
        return tg_diag_set(diag, TG_ERR_INVALID_ARG, "tg_policy_load_text: NULL argument");
    }
    *out = NULL;
    json_t *bundle = NULL;
    tg_err_t rc = tg_policy_parse_(&bundle, text, len, diag);
    if (rc) {
        return rc;
    }
    rc = tg_policy_compile_opts(out, bundle, opts, diag);
    json_decref(bundle);
    return rc;
}

tg_err_t tg_policy_dir_of_(char dir[TG_POLICY_DIR_MAX], const char *path, tg_diag_t *diag) {
    const char *slash = strrchr(path, '/');
    size_t dl = slash == NULL ? 0 : (size_t)(slash - path);
    if (dl >= TG_POLICY_DIR_MAX) {
        return tg_diag_set(diag, TG_ERR_LIMIT, "policy %s: path too long", path);
    }
    if (slash == NULL) {
        memcpy(dir, ".", 2);
    } else if (dl == 0) {
        memcpy(dir, "/", 2);
    } else {
        memcpy(dir, path, dl);
        dir[dl] = '\0';
    }
    return TG_OK;
}

tg_err_t tg_policy_load_file(tg_policy_t **out, const char *path, tg_diag_t *diag) {
    if (out == NULL || path == NULL) {
        return tg_diag_set(diag, TG_ERR_INVALID_ARG, "tg_policy_load_file: NULL argument");
    }
    *out = NULL;
    char label[320];
    snprintf(label, sizeof label, "policy %s", path);
    tg_file_t f;
    tg_err_t rc = tg_read_file(&f, path, TG_POLICY_MAX_FILE, label, 0, diag);
    if (rc == TG_OK) {
        /* data set files resolve against the bundle's own directory */
        char dir[TG_POLICY_DIR_MAX];
        rc = tg_policy_dir_of_(dir, path, diag);
        tg_policy_opts_t opts = {dir, NULL};
        if (rc == TG_OK) {
            rc = tg_policy_load_text_opts(out, f.data, f.len, &opts, diag);
        }
        tg_file_free(&f);
    }
    return rc;
}

void tg_policy_destroy(tg_policy_t *p) {
    if (p == NULL) {
        return;
    }
    tg_policy_routes_free_(p);
    tg_arena_chunk_t *c = p->arena;
    while (c != NULL) {
        tg_arena_chunk_t *next = c->next;
        free(c);
        c = next;
    }
    free(p);
}

/* ---- accessors ------------------------------------------------------------------------ */

const char *tg_policy_version(const tg_policy_t *p) { return p->version; }

const char *tg_policy_authority(const tg_policy_t *p) { return p->authority; }

const char *tg_policy_authority_id(const tg_policy_t *p, const char *configured) {
    /* empty = not given: an unset variable and an empty one mean the same (OPERATIONS.md) */
    return configured != NULL && configured[0] != '\0' ? configured : p->authority;
}

const char *tg_policy_hash_hex(const tg_policy_t *p) { return p->hash_hex; }

const uint8_t *tg_policy_hash(const tg_policy_t *p) { return p->tables.policy_hash; }

const tg_kernel_tables_t *tg_policy_tables(const tg_policy_t *p) {
    return p != NULL ? &p->tables : NULL;
}

size_t tg_policy_surface_count(const tg_policy_t *p) { return p->tables.n_surfaces; }

size_t tg_policy_rule_count(const tg_policy_t *p) { return p->n_rules; }

size_t tg_policy_signal_count(const tg_policy_t *p) { return p->tables.n_signals; }

size_t tg_policy_claim_count(const tg_policy_t *p) { return p->tables.n_claims; }

tg_sv_t tg_policy_claim_name(const tg_policy_t *p, uint32_t id) {
    if (id >= p->tables.n_claims) {
        return (tg_sv_t){NULL, 0};
    }
    return p->tables.claims[id];
}

size_t tg_policy_tool_count(const tg_policy_t *p) { return p->n_tools; }

tg_err_t tg_policy_surface_find(uint32_t *index, const tg_policy_t *p, const char *name,
                                size_t len) {
    if (index == NULL || p == NULL || (name == NULL && len > 0)) {
        return TG_ERR_INVALID_ARG;
    }
    if (!htab_get(&p->surface_index, p->tables.surfaces, sizeof *p->tables.surfaces, name, len,
                  index)) {
        return TG_ERR_UNKNOWN_SURFACE;
    }
    return TG_OK;
}

tg_sv_t tg_policy_surface_name(const tg_policy_t *p, uint32_t index) {
    tg_sv_t none = {NULL, 0};
    return index < p->tables.n_surfaces ? p->tables.surfaces[index].name : none;
}

int tg_policy_surface_tier(const tg_policy_t *p, uint32_t index) {
    return index < p->tables.n_surfaces ? p->tables.surfaces[index].tier : 0;
}

bool tg_policy_surface_observe(const tg_policy_t *p, uint32_t index) {
    return index < p->tables.n_surfaces && p->tables.surfaces[index].observe != 0;
}

const tg_approval_spec_t *tg_policy_rule_approval(const tg_policy_t *p, uint32_t surface,
                                                  tg_sv_t rule_id) {
    if (p == NULL || surface >= p->tables.n_surfaces || p->approvals == NULL ||
        p->approvals[surface] == NULL || rule_id.ptr == NULL) {
        return NULL;
    }
    const tg_surface_t *s = &p->tables.surfaces[surface];
    for (uint32_t i = 0; i < s->n_rules; i++) {
        const tg_rule_t *r = &s->rules[i];
        if (r->effect == TG_EFFECT_ESCALATE && r->id.len == rule_id.len &&
            memcmp(r->id.ptr, rule_id.ptr, rule_id.len) == 0) {
            return p->approvals[surface][i];
        }
    }
    return NULL;
}

int tg_policy_find_field_(const tg_policy_t *p, const char *s, size_t n, uint32_t *id) {
    return htab_get(&p->field_index, p->tables.fields, sizeof *p->tables.fields, s, n, id);
}

int tg_policy_find_signal_(const tg_policy_t *p, const char *s, size_t n, uint32_t *id) {
    return htab_get(&p->signal_index, p->tables.signals, sizeof *p->tables.signals, s, n, id);
}

int tg_policy_find_tool_(const tg_policy_t *p, const char *s, size_t n, uint32_t *id) {
    return htab_get(&p->tool_index, p->tools, sizeof *p->tools, s, n, id);
}
