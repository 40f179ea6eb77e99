/* tenants.c — tenants and their principals from the tokens file / TRIGGUARD_API_KEYS, bearer
 * auth. */
#include "trigguard/canon.h"
#include "trigguard/guard.h"
#include "trigguard/io.h"

#include <arpa/inet.h>
#include <jansson.h>
#include <netinet/in.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct tenant {
    char name[TG_GUARD_TENANT_NAME_MAX + 1];
    size_t name_len;
} tenant_t;

typedef struct principal {
    tg_principal_t pub; /* its strings point into subject and lists */
    char subject[TG_GUARD_SUBJECT_MAX + 1];
    void *lists; /* one allocation: the actors' and surfaces' tg_guard_str_t, then bytes */
} principal_t;

struct tg_tenants {
    size_t count;  /* tenants */
    size_t tokens; /* principals */
    bool bypass;
    int local_index; /* the bypass principal */
    tenant_t names[TG_GUARD_MAX_TENANTS];
    principal_t principals[TG_GUARD_MAX_TOKENS];
    uint8_t digests[TG_GUARD_MAX_TOKENS][32]; /* contiguous: the auth loop reads only these */
};

/* One principal parsed from a source, not yet committed to the table. The lists are views
 * into the parsed JSON (NULL = unbound). */
typedef struct pending {
    const char *name;
    size_t name_len;
    uint8_t digest[32];
    char subject[TG_GUARD_SUBJECT_MAX + 1];
    size_t subject_len;
    bool subject_derived;
    tg_role_t role;
    bool observe; /* "observe": true (SPEC §11.1: may ask for observe mode) */
    const json_t *actors;
    const json_t *surfaces;
    const json_t *groups; /* an approver's groups (SPEC §11.2 "@group" approvers) */
} pending_t;

static const char *const role_names[] = {"caller", "approver", "executor", "admin"};

const char *tg_role_name(tg_role_t role) {
    return (unsigned)role < sizeof role_names / sizeof role_names[0] ? role_names[role] : "?";
}

bool tg_role_parse(tg_role_t *out, const char *s, size_t len) {
    for (size_t i = 0; s != NULL && i < sizeof role_names / sizeof role_names[0]; i++) {
        if (strlen(role_names[i]) == len && memcmp(role_names[i], s, len) == 0) {
            *out = (tg_role_t)i;
            return true;
        }
    }
    return false;
}

bool tg_role_may_decide(tg_role_t role) { return role == TG_ROLE_CALLER || role == TG_ROLE_ADMIN; }

bool tg_role_may_read_receipts(tg_role_t role) {
    return role == TG_ROLE_CALLER || role == TG_ROLE_EXECUTOR || role == TG_ROLE_ADMIN;
}

static bool in_list(const tg_guard_str_t *l, size_t n, const char *s, size_t len) {
    for (size_t i = 0; i < n; i++) {
        if (l[i].len == len && memcmp(l[i].ptr, s, len) == 0) {
            return true;
        }
    }
    return false;
}

bool tg_principal_actor_allowed(const tg_principal_t *p, const char *actor, size_t len) {
    if (p == NULL) {
        return false;
    }
    return p->actors_count == 0 ||
           (actor != NULL && in_list(p->actors, p->actors_count, actor, len));
}

bool tg_principal_surface_allowed(const tg_principal_t *p, const char *surface, size_t len) {
    if (p == NULL) {
        return false;
    }
    return p->surfaces_count == 0 ||
           (surface != NULL && in_list(p->surfaces, p->surfaces_count, surface, len));
}

tg_err_t tg_tenants_create(tg_tenants_t **out) {
    if (out == NULL) {
        return TG_ERR_INVALID_ARG;
    }
    *out = NULL;
    if (sodium_init() < 0) {
        return TG_ERR_CRYPTO;
    }
    tg_tenants_t *t = calloc(1, sizeof *t);
    if (t == NULL) {
        return TG_ERR_NOMEM;
    }
    t->local_index = -1;
    *out = t;
    return TG_OK;
}

void tg_tenants_destroy(tg_tenants_t *t) {
    if (t == NULL) {
        return;
    }
    for (size_t i = 0; i < t->tokens; i++) {
        free(t->principals[i].lists);
    }
    sodium_memzero(t, sizeof *t);
    free(t);
}

size_t tg_tenants_count(const tg_tenants_t *t) { return t != NULL ? t->count : 0; }

size_t tg_tenants_token_count(const tg_tenants_t *t) { return t != NULL ? t->tokens : 0; }

const tg_principal_t *tg_tenants_principal(const tg_tenants_t *t, size_t index) {
    return t != NULL && index < t->tokens ? &t->principals[index].pub : NULL;
}

bool tg_tenants_digest_hex(const tg_tenants_t *t, size_t index, char *out, size_t n) {
    if (t == NULL || out == NULL || index >= t->tokens || n > 32) {
        return false;
    }
    char full[65];
    tg_hex(full, t->digests[index], 32);
    memcpy(out, full, 2 * n);
    out[2 * n] = '\0';
    return true;
}

bool tg_tenants_local_bypass(const tg_tenants_t *t) { return t != NULL && t->bypass; }

const char *tg_tenants_name(const tg_tenants_t *t, int index, size_t *len_out) {
    if (t == NULL || index < 0 || (size_t)index >= t->count) {
        if (len_out != NULL) {
            *len_out = 0;
        }
        return NULL;
    }
    if (len_out != NULL) {
        *len_out = t->names[index].name_len;
    }
    return t->names[index].name;
}

int tg_tenants_find(const tg_tenants_t *t, const char *name, size_t len) {
    if (t == NULL || name == NULL) {
        return -1;
    }
    for (size_t i = 0; i < t->count; i++) {
        if (t->names[i].name_len == len && memcmp(t->names[i].name, name, len) == 0) {
            return (int)i;
        }
    }
    return -1;
}

static bool name_valid(const char *name, size_t len) {
    if (name == NULL || len == 0 || len > TG_GUARD_TENANT_NAME_MAX) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == '-';
        if (!ok) {
            return false;
        }
    }
    return true;
}

bool tg_guard_subject_valid(const char *s, size_t len) {
    if (s == NULL || len == 0 || len > TG_GUARD_SUBJECT_MAX) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  strchr("._:@/+-", c) != NULL;
        if (!ok || c == '\0') {
            return false;
        }
    }
    return true;
}

/* "<tenant>:<first 8 hex of the digest>": stable across restarts and edits of other entries.
 * Only 32 bits of the digest reach the logs: enough to tell a tenant's tokens apart, and
 * nothing for a random token (a weak, guessable one is weak anyway). */
static void derive_subject(pending_t *p) {
    char hx[65];
    tg_hex(hx, p->digest, 32);
    int n = snprintf(p->subject, sizeof p->subject, "%.*s:%.8s", (int)p->name_len, p->name, hx);
    p->subject_len = n > 0 ? (size_t)n : 0;
    p->subject_derived = true;
}

/* Visible ASCII except ',' (the API_KEYS separator never reaches here, but ' ' and controls
 * could). */
static bool token_char_ok(unsigned char c) { return c >= 0x21 && c <= 0x7e; }

/* Whether entry i adds a tenant: neither in the table nor named by an earlier entry. */
static bool pending_new_tenant(const tg_tenants_t *t, const pending_t *p, size_t i) {
    if (tg_tenants_find(t, p[i].name, p[i].name_len) >= 0) {
        return false;
    }
    for (size_t j = 0; j < i; j++) {
        if (p[j].name_len == p[i].name_len && memcmp(p[j].name, p[i].name, p[i].name_len) == 0) {
            return false;
        }
    }
    return true;
}

/* The lists of one pending entry in one allocation (NULL when all are absent): actors,
 * then surfaces, then groups. */
static tg_err_t build_lists(principal_t *dst, const pending_t *p) {
    const json_t *lists[3] = {p->actors, p->surfaces, p->groups};
    size_t count[3];
    size_t total = 0;
    size_t bytes = 0;
    for (int l = 0; l < 3; l++) {
        count[l] = lists[l] != NULL ? json_array_size(lists[l]) : 0;
        total += count[l];
        for (size_t i = 0; i < count[l]; i++) {
            bytes += json_string_length(json_array_get(lists[l], i)) + 1;
        }
    }
    dst->lists = NULL;
    dst->pub.actors = NULL;
    dst->pub.actors_count = 0;
    dst->pub.surfaces = NULL;
    dst->pub.surfaces_count = 0;
    dst->pub.groups = NULL;
    dst->pub.groups_count = 0;
    if (total == 0) {
        return TG_OK;
    }
    char *blob = malloc(total * sizeof(tg_guard_str_t) + bytes);
    if (blob == NULL) {
        return TG_ERR_NOMEM;
    }
    tg_guard_str_t *strs = (tg_guard_str_t *)(void *)blob;
    char *text = blob + total * sizeof(tg_guard_str_t);
    tg_guard_str_t *at = strs;
    for (int l = 0; l < 3; l++) {
        for (size_t i = 0; i < count[l]; i++) {
            const json_t *v = json_array_get(lists[l], i);
            size_t len = json_string_length(v);
            memcpy(text, json_string_value(v), len);
            text[len] = '\0';
            at[i] = (tg_guard_str_t){text, len};
            text += len + 1;
        }
        at += count[l];
    }
    dst->lists = blob;
    dst->pub.actors = count[0] > 0 ? strs : NULL;
    dst->pub.actors_count = count[0];
    dst->pub.surfaces = count[1] > 0 ? strs + count[0] : NULL;
    dst->pub.surfaces_count = count[1];
    dst->pub.groups = count[2] > 0 ? strs + count[0] + count[1] : NULL;
    dst->pub.groups_count = count[2];
    return TG_OK;
}

/* Checks p[0..n) against the table and each other, then appends all or nothing. The
 * comparisons are not constant-time: this runs once at startup on operator input. */
static tg_err_t commit(tg_tenants_t *t, const pending_t *p, size_t n, const char *origin,
                       tg_diag_t *diag) {
    if (n > TG_GUARD_MAX_TOKENS - t->tokens) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "%s: too many tokens (%zu + %zu > %d)", origin,
                           t->tokens, n, TG_GUARD_MAX_TOKENS);
    }
    size_t fresh = 0;
    for (size_t i = 0; i < n; i++) {
        fresh += pending_new_tenant(t, p, i) ? 1 : 0;
    }
    if (fresh > TG_GUARD_MAX_TENANTS - t->count) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "%s: too many tenants (%zu + %zu > %d)", origin,
                           t->count, fresh, TG_GUARD_MAX_TENANTS);
    }
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < t->tokens + i; j++) {
            bool old = j < t->tokens;
            const char *sj = old ? t->principals[j].subject : p[j - t->tokens].subject;
            size_t sl = old ? t->principals[j].pub.subject.len : p[j - t->tokens].subject_len;
            const uint8_t *dg = old ? t->digests[j] : p[j - t->tokens].digest;
            if (memcmp(dg, p[i].digest, 32) == 0) {
                return tg_diag_set(diag, TG_ERR_CONFIG,
                                   "%s: tenant \"%.*s\" has the same token as subject \"%.*s\"",
                                   origin, (int)p[i].name_len, p[i].name, (int)sl, sj);
            }
            if (sl == p[i].subject_len && memcmp(sj, p[i].subject, sl) == 0) {
                return tg_diag_set(
                    diag, TG_ERR_CONFIG, "%s: duplicate subject \"%.*s\"%s", origin, (int)sl, sj,
                    p[i].subject_derived ? " (derived from tenant and digest: set \"subject\")"
                                         : "");
            }
        }
    }
    size_t built = 0;
    tg_err_t rc = TG_OK;
    for (; built < n && rc == TG_OK; built++) {
        rc = build_lists(&t->principals[t->tokens + built], &p[built]);
    }
    if (rc != TG_OK) {
        for (size_t i = 0; i < built; i++) {
            free(t->principals[t->tokens + i].lists);
            t->principals[t->tokens + i].lists = NULL;
        }
        return tg_diag_set(diag, TG_ERR_NOMEM, "%s: out of memory", origin);
    }
    for (size_t i = 0; i < n; i++) {
        int ti = tg_tenants_find(t, p[i].name, p[i].name_len);
        if (ti < 0) {
            tenant_t *nt = &t->names[t->count];
            memcpy(nt->name, p[i].name, p[i].name_len);
            nt->name[p[i].name_len] = '\0';
            nt->name_len = p[i].name_len;
            ti = (int)t->count++;
        }
        principal_t *dst = &t->principals[t->tokens];
        memcpy(dst->subject, p[i].subject, p[i].subject_len);
        dst->subject[p[i].subject_len] = '\0';
        dst->pub.subject = (tg_guard_str_t){dst->subject, p[i].subject_len};
        dst->pub.subject_derived = p[i].subject_derived;
        dst->pub.tenant = ti;
        dst->pub.role = p[i].role;
        dst->pub.observe = p[i].observe;
        memcpy(t->digests[t->tokens], p[i].digest, 32);
        t->tokens++;
    }
    return TG_OK;
}

tg_err_t tg_tenants_add(tg_tenants_t *t, const char *name, size_t name_len,
                        const uint8_t token_sha256[32], tg_diag_t *diag) {
    pending_t p;
    if (t == NULL || name == NULL || token_sha256 == NULL) {
        return tg_diag_set(diag, TG_ERR_INVALID_ARG, "tenants: NULL argument");
    }
    if (!name_valid(name, name_len)) {
        return tg_diag_set(diag, TG_ERR_CONFIG,
                           "tenants: invalid tenant name (1..%d chars of [A-Za-z0-9._-])",
                           TG_GUARD_TENANT_NAME_MAX);
    }
    memset(&p, 0, sizeof p);
    p.name = name;
    p.name_len = name_len;
    memcpy(p.digest, token_sha256, 32);
    derive_subject(&p);
    tg_err_t rc = commit(t, &p, 1, "tenants", diag);
    sodium_memzero(&p, sizeof p);
    return rc;
}

tg_err_t tg_tenants_seed(tg_tenants_t *t, const tg_tenants_t *from) {
    if (t == NULL || from == NULL || t->count != 0 || t->tokens != 0) {
        return TG_ERR_INVALID_ARG;
    }
    memcpy(t->names, from->names, from->count * sizeof from->names[0]);
    t->count = from->count;
    return TG_OK;
}

tg_err_t tg_tenants_add_name(tg_tenants_t *t, const char *name, size_t len, tg_diag_t *diag) {
    if (t == NULL || name == NULL) {
        return TG_ERR_INVALID_ARG;
    }
    if (!name_valid(name, len)) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "tenant \"%.*s\": 1..%d chars of [A-Za-z0-9._-]",
                           (int)(len > 64 ? 64 : len), name, TG_GUARD_TENANT_NAME_MAX);
    }
    if (tg_tenants_find(t, name, len) >= 0) {
        return TG_OK;
    }
    if (t->count >= TG_GUARD_MAX_TENANTS) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "more than %d tenants", TG_GUARD_MAX_TENANTS);
    }
    memcpy(t->names[t->count].name, name, len);
    t->names[t->count].name[len] = '\0';
    t->names[t->count].name_len = len;
    t->count++;
    return TG_OK;
}

bool tg_tenants_has_tokens(const tg_tenants_t *t, int index) {
    for (size_t i = 0; t != NULL && index >= 0 && i < t->tokens; i++) {
        if (t->principals[i].pub.tenant == index) {
            return true;
        }
    }
    return false;
}

tg_err_t tg_tenants_set_local_bypass(tg_tenants_t *t, bool on) {
    if (t == NULL) {
        return TG_ERR_INVALID_ARG;
    }
    if (on && t->local_index < 0) {
        const char *local = TG_GUARD_LOCAL_TENANT;
        pending_t p;
        memset(&p, 0, sizeof p);
        p.name = local;
        p.name_len = strlen(local);
        randombytes_buf(p.digest, sizeof p.digest);
        memcpy(p.subject, local, p.name_len + 1);
        p.subject_len = p.name_len;
        tg_err_t rc = commit(t, &p, 1, "tenants", NULL);
        sodium_memzero(&p, sizeof p);
        if (rc) {
            return rc;
        }
        t->local_index = (int)t->tokens - 1;
    }
    t->bypass = on;
    return TG_OK;
}

bool tg_guard_binding_valid(const char *s, size_t len) {
    if (s == NULL || len == 0 || len > TG_GUARD_NAME_MAX) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch < 0x20 || ch == 0x7f) {
            return false;
        }
    }
    return true;
}

/* One list member ("actors", "surfaces" or "groups") of entry i: 1..TG_GUARD_MAX_BINDINGS
 * distinct strings of 1..TG_GUARD_NAME_MAX bytes without control characters (actors: not
 * "@..."; groups: a subject's shape without a leading '@', so that "@" + the name is an
 * approvers entry of an escalate rule). */
static tg_err_t check_list(const json_t *v, const char *member, bool is_actor, const char *origin,
                           size_t i, tg_diag_t *diag) {
    bool is_group = strcmp(member, "groups") == 0;
    if (!json_is_array(v) || json_array_size(v) == 0 ||
        json_array_size(v) > TG_GUARD_MAX_BINDINGS) {
        return tg_diag_set(diag, TG_ERR_CONFIG,
                           "%s: [%zu].%s: expected an array of 1..%d strings (leave the member "
                           "out for no restriction)",
                           origin, i, member, TG_GUARD_MAX_BINDINGS);
    }
    for (size_t k = 0; k < json_array_size(v); k++) {
        const json_t *e = json_array_get(v, k);
        const char *s = json_string_value(e);
        size_t len = json_string_length(e);
        if (!json_is_string(e) || !tg_guard_binding_valid(s, len)) {
            return tg_diag_set(diag, TG_ERR_CONFIG,
                               "%s: [%zu].%s[%zu]: expected 1..%d bytes without control "
                               "characters",
                               origin, i, member, k, TG_GUARD_NAME_MAX);
        }
        if (is_group && (!tg_guard_subject_valid(s, len) || s[0] == '@')) {
            return tg_diag_set(diag, TG_ERR_CONFIG,
                               "%s: [%zu].%s[%zu]: expected 1..%d chars of [A-Za-z0-9._:@/+-], "
                               "not starting with \"@\" (a rule names the group as \"@<name>\")",
                               origin, i, member, k, TG_GUARD_SUBJECT_MAX);
        }
        if (is_actor && s[0] == '@') {
            return tg_diag_set(diag, TG_ERR_CONFIG,
                               "%s: [%zu].%s[%zu]: \"@\" names a policy actor group; bind "
                               "the actor ids themselves",
                               origin, i, member, k);
        }
        for (size_t m = 0; m < k; m++) {
            const json_t *o = json_array_get(v, m);
            if (json_string_length(o) == len && memcmp(json_string_value(o), s, len) == 0) {
                return tg_diag_set(diag, TG_ERR_CONFIG, "%s: [%zu].%s: \"%.*s\" is listed twice",
                                   origin, i, member, (int)(len > 64 ? 64 : len), s);
            }
        }
    }
    return TG_OK;
}

/* Entry i of a tokens file into *p (views into item). */
static tg_err_t parse_entry(pending_t *p, const json_t *item, const char *origin, size_t i,
                            tg_diag_t *diag) {
    json_t *jn = NULL, *jh = NULL, *js = NULL, *ja = NULL, *jsf = NULL, *jr = NULL, *jo = NULL,
           *jg = NULL;
    const char *k = NULL;
    json_t *v = NULL;
    if (!json_is_object(item)) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "%s: [%zu]: expected an object", origin, i);
    }
    json_object_foreach((json_t *)item, k, v) {
        json_t **slot = strcmp(k, "tenant") == 0         ? &jn
                        : strcmp(k, "token_sha256") == 0 ? &jh
                        : strcmp(k, "subject") == 0      ? &js
                        : strcmp(k, "actors") == 0       ? &ja
                        : strcmp(k, "surfaces") == 0     ? &jsf
                        : strcmp(k, "role") == 0         ? &jr
                        : strcmp(k, "observe") == 0      ? &jo
                        : strcmp(k, "groups") == 0       ? &jg
                                                         : NULL;
        if (slot == NULL) {
            return tg_diag_set(diag, TG_ERR_CONFIG,
                               "%s: [%zu]: unknown member \"%.64s\" (an entry has tenant, "
                               "token_sha256, subject, actors, surfaces, role, observe, groups)",
                               origin, i, k);
        }
        *slot = v;
    }
    if (jn == NULL || jh == NULL) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "%s: [%zu]: missing member \"%s\"", origin, i,
                           jn == NULL ? "tenant" : "token_sha256");
    }
    if (!json_is_string(jn) || !name_valid(json_string_value(jn), json_string_length(jn))) {
        return tg_diag_set(diag, TG_ERR_CONFIG,
                           "%s: [%zu].tenant: expected 1..%d chars of [A-Za-z0-9._-]", origin, i,
                           TG_GUARD_TENANT_NAME_MAX);
    }
    if (!json_is_string(jh) || json_string_length(jh) != 64 ||
        tg_unhex(p->digest, 32, json_string_value(jh), 64) != TG_OK) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "%s: [%zu].token_sha256: expected 64 hex digits",
                           origin, i);
    }
    p->name = json_string_value(jn);
    p->name_len = json_string_length(jn);
    if (js != NULL) {
        if (!json_is_string(js) ||
            !tg_guard_subject_valid(json_string_value(js), json_string_length(js))) {
            return tg_diag_set(diag, TG_ERR_CONFIG,
                               "%s: [%zu].subject: expected 1..%d chars of [A-Za-z0-9._:@/+-]",
                               origin, i, TG_GUARD_SUBJECT_MAX);
        }
        p->subject_len = json_string_length(js);
        memcpy(p->subject, json_string_value(js), p->subject_len);
        p->subject[p->subject_len] = '\0';
        p->subject_derived = false;
    } else {
        derive_subject(p);
    }
    p->role = TG_ROLE_CALLER;
    if (jr != NULL && (!json_is_string(jr) ||
                       !tg_role_parse(&p->role, json_string_value(jr), json_string_length(jr)))) {
        return tg_diag_set(diag, TG_ERR_CONFIG,
                           "%s: [%zu].role: expected \"caller\", \"approver\", \"executor\" or "
                           "\"admin\"",
                           origin, i);
    }
    if (jo != NULL && !json_is_boolean(jo)) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "%s: [%zu].observe: expected true or false", origin,
                           i);
    }
    p->observe = json_is_true(jo);
    tg_err_t rc = ja != NULL ? check_list(ja, "actors", true, origin, i, diag) : TG_OK;
    if (rc == TG_OK && jsf != NULL) {
        rc = check_list(jsf, "surfaces", false, origin, i, diag);
    }
    if (rc == TG_OK && jg != NULL) {
        rc = check_list(jg, "groups", false, origin, i, diag);
    }
    p->actors = ja;
    p->surfaces = jsf;
    p->groups = jg;
    return rc;
}

tg_err_t tg_tenants_load_json(tg_tenants_t *t, const char *text, size_t len, const char *origin,
                              tg_diag_t *diag) {
    json_t *root = NULL;
    pending_t *p = NULL;
    size_t n = 0;
    tg_diag_t jd = {{0}};
    tg_err_t rc = TG_OK;
    /* An array of objects holding arrays of strings is depth 3; the slack lets a mistyped
     * member (an object where a string belongs) get the precise message below. Seven members
     * and some room for a stray one, which then gets its own message. */
    const tg_json_limits_t lim = {TG_GUARD_TOKENS_FILE_MAX, 4, 4096, 16};
    if (origin == NULL) {
        origin = "tokens";
    }
    if (t == NULL || (text == NULL && len > 0)) {
        return tg_diag_set(diag, TG_ERR_INVALID_ARG, "%s: NULL argument", origin);
    }
    if (len > TG_GUARD_TOKENS_FILE_MAX) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "%s: larger than %zu bytes", origin,
                           TG_GUARD_TOKENS_FILE_MAX);
    }
    rc = tg_json_parse(&root, text != NULL ? text : "", len, &lim, &jd);
    if (rc == TG_ERR_NOMEM) {
        return tg_diag_set(diag, rc, "%s: out of memory", origin);
    }
    if (rc) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "%s: %s", origin, jd.msg);
    }
    if (!json_is_array(root)) {
        rc = tg_diag_set(diag, TG_ERR_CONFIG,
                         "%s: expected a JSON array of {\"tenant\", \"token_sha256\", ...} objects",
                         origin);
        goto done;
    }
    n = json_array_size(root);
    if (n > TG_GUARD_MAX_TOKENS) {
        rc = tg_diag_set(diag, TG_ERR_CONFIG, "%s: %zu tokens, at most %d", origin, n,
                         TG_GUARD_MAX_TOKENS);
        goto done;
    }
    p = calloc(n > 0 ? n : 1, sizeof *p);
    if (p == NULL) {
        rc = tg_diag_set(diag, TG_ERR_NOMEM, "%s: out of memory", origin);
        goto done;
    }
    for (size_t i = 0; i < n && rc == TG_OK; i++) {
        rc = parse_entry(&p[i], json_array_get(root, i), origin, i, diag);
    }
    if (rc == TG_OK) {
        rc = commit(t, p, n, origin, diag);
    }

done:
    if (p != NULL) {
        sodium_memzero(p, n * sizeof *p);
        free(p);
    }
    json_decref(root);
    return rc;
}

tg_err_t tg_tenants_load_file(tg_tenants_t *t, const char *path, tg_diag_t *diag) {
    if (t == NULL || path == NULL) {
        return tg_diag_set(diag, TG_ERR_INVALID_ARG, "tokens file: NULL argument");
    }
    char label[320];
    snprintf(label, sizeof label, "tokens file %s", path);
    /* Secret: the digests are as good as the tokens for a dictionary of weak ones. */
    tg_file_t f;
    tg_err_t rc = tg_read_file(&f, path, TG_GUARD_TOKENS_FILE_MAX, label, TG_READ_SECRET, diag);
    if (rc == TG_ERR_LIMIT) {
        return TG_ERR_CONFIG; /* guard.h: an oversized file is a configuration error */
    }
    if (rc == TG_OK) {
        rc = tg_tenants_load_json(t, f.data, f.len, path, diag);
        tg_file_free(&f);
    }
    return rc;
}

static bool is_blank(char c) { return c == ' ' || c == '\t'; }

tg_err_t tg_tenants_load_env(tg_tenants_t *t, const char *value, size_t len, tg_diag_t *diag) {
    static const char origin[] = "TRIGGUARD_API_KEYS";
    static const char prefix[] = "sha256:";
    const size_t plen = sizeof prefix - 1;
    pending_t *p = NULL;
    size_t n = 0;
    size_t pos = 0;
    tg_err_t rc = TG_OK;
    if (t == NULL || (value == NULL && len > 0)) {
        return tg_diag_set(diag, TG_ERR_INVALID_ARG, "%s: NULL argument", origin);
    }
    p = calloc(TG_GUARD_MAX_TOKENS, sizeof *p);
    if (p == NULL) {
        return tg_diag_set(diag, TG_ERR_NOMEM, "%s: out of memory", origin);
    }
    for (size_t entry = 1;; entry++) {
        size_t end = pos;
        while (end < len && value[end] != ',') {
            end++;
        }
        size_t a = pos;
        size_t b = end;
        while (a < b && is_blank(value[a])) {
            a++;
        }
        while (b > a && is_blank(value[b - 1])) {
            b--;
        }
        if (a == b) {
            rc = tg_diag_set(diag, TG_ERR_CONFIG, "%s: entry %zu is empty", origin, entry);
            goto done;
        }
        if (n == TG_GUARD_MAX_TOKENS) {
            rc = tg_diag_set(diag, TG_ERR_CONFIG, "%s: more than %d entries", origin,
                             TG_GUARD_MAX_TOKENS);
            goto done;
        }
        const char *e = value + a;
        size_t elen = b - a;
        const char *colon = memchr(e, ':', elen);
        if (colon == NULL) {
            rc = tg_diag_set(diag, TG_ERR_CONFIG,
                             "%s: entry %zu: expected tenant:token or tenant:sha256:<64 hex>",
                             origin, entry);
            goto done;
        }
        size_t nlen = (size_t)(colon - e);
        const char *secret = colon + 1;
        size_t slen = elen - nlen - 1;
        if (!name_valid(e, nlen)) {
            rc = tg_diag_set(diag, TG_ERR_CONFIG,
                             "%s: entry %zu: tenant name must be 1..%d chars of [A-Za-z0-9._-]",
                             origin, entry, TG_GUARD_TENANT_NAME_MAX);
            goto done;
        }
        if (slen >= plen && memcmp(secret, prefix, plen) == 0) {
            if (slen - plen != 64 || tg_unhex(p[n].digest, 32, secret + plen, 64) != TG_OK) {
                rc = tg_diag_set(diag, TG_ERR_CONFIG,
                                 "%s: entry %zu (tenant \"%.*s\"): sha256: needs 64 hex digits",
                                 origin, entry, (int)nlen, e);
                goto done;
            }
        } else {
            bool ok = slen >= 1 && slen <= TG_GUARD_TOKEN_MAX;
            for (size_t i = 0; ok && i < slen; i++) {
                ok = token_char_ok((unsigned char)secret[i]);
            }
            if (!ok) {
                rc = tg_diag_set(diag, TG_ERR_CONFIG,
                                 "%s: entry %zu (tenant \"%.*s\"): token must be 1..%d visible "
                                 "ASCII characters",
                                 origin, entry, (int)nlen, e, TG_GUARD_TOKEN_MAX);
                goto done;
            }
            tg_sha256(p[n].digest, secret, slen);
        }
        p[n].name = e;
        p[n].name_len = nlen;
        derive_subject(&p[n]);
        n++;
        if (end >= len) {
            break;
        }
        pos = end + 1;
    }
    rc = commit(t, p, n, origin, diag);

done:
    sodium_memzero(p, TG_GUARD_MAX_TOKENS * sizeof *p);
    free(p);
    return rc;
}

/* ------------------------------------------------------------------ auth */

static bool scheme_is_bearer(const char *h) {
    static const char bearer[] = "bearer";
    for (size_t i = 0; i < sizeof bearer - 1; i++) {
        char c = h[i];
        if (c >= 'A' && c <= 'Z') {
            c = (char)(c - 'A' + 'a');
        }
        if (c != bearer[i]) {
            return false;
        }
    }
    return true;
}

/* The principal index of a header, or -1. */
static int auth_index(const tg_tenants_t *t, const char *header, size_t len) {
    uint8_t digest[32];
    if (t->bypass) {
        return t->local_index;
    }
    /* "Bearer" + ' ' + at least one token char */
    if (header == NULL || len < 8 || len > 7 + TG_GUARD_TOKEN_MAX || !scheme_is_bearer(header) ||
        header[6] != ' ') {
        return -1;
    }
    const char *token = header + 7;
    size_t tlen = len - 7;
    for (size_t i = 0; i < tlen; i++) {
        if (!token_char_ok((unsigned char)token[i])) {
            return -1;
        }
    }
    tg_sha256(digest, token, tlen);
    /* Visit every digest and select the match with masks: no early exit, no branch on it. */
    unsigned found = 0;
    size_t sel = 0;
    for (size_t i = 0; i < t->tokens; i++) {
        unsigned eq = (unsigned)(sodium_memcmp(digest, t->digests[i], 32) + 1); /* 1 or 0 */
        size_t mask = (size_t)0 - (size_t)eq;
        sel = (sel & ~mask) | (i & mask);
        found |= eq;
    }
    sodium_memzero(digest, sizeof digest);
    return found ? (int)sel : -1;
}

tg_err_t tg_auth_principal(const tg_tenants_t *t, const char *header, size_t len,
                           const tg_principal_t **out) {
    if (t == NULL || out == NULL) {
        return TG_ERR_INVALID_ARG;
    }
    int i = auth_index(t, header, len);
    *out = i >= 0 ? &t->principals[i].pub : NULL;
    return i >= 0 ? TG_OK : TG_ERR_UNAUTHORIZED;
}

tg_err_t tg_auth_check(const tg_tenants_t *t, const char *header, size_t len,
                       int *tenant_index_out) {
    if (t == NULL || tenant_index_out == NULL) {
        return TG_ERR_INVALID_ARG;
    }
    const tg_principal_t *p = NULL;
    tg_err_t rc = tg_auth_principal(t, header, len, &p);
    *tenant_index_out = p != NULL ? p->tenant : -1;
    return rc;
}

bool tg_guard_listen_is_loopback(const char *addr) {
    char buf[INET6_ADDRSTRLEN + 2];
    struct in_addr v4;
    struct in6_addr v6;
    if (addr == NULL) {
        return false;
    }
    size_t len = strlen(addr);
    if (strcmp(addr, "localhost") == 0) {
        return true;
    }
    if (len >= sizeof buf) {
        return false;
    }
    if (len >= 2 && addr[0] == '[' && addr[len - 1] == ']') {
        memcpy(buf, addr + 1, len - 2);
        buf[len - 2] = '\0';
    } else {
        memcpy(buf, addr, len + 1);
        if (inet_pton(AF_INET, buf, &v4) == 1) {
            return ((const uint8_t *)&v4.s_addr)[0] == 127;
        }
    }
    if (inet_pton(AF_INET6, buf, &v6) != 1) {
        return false;
    }
    static const uint8_t loop6[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (memcmp(v6.s6_addr, loop6, 16) == 0) {
        return true;
    }
    return memcmp(v6.s6_addr, mapped, 12) == 0 && v6.s6_addr[12] == 127;
}
