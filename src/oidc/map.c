/* map.c — verified claims to a principal: templates, tenant, the copied scalar claims. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "oidc_int.h"
#include "trigguard/canon.h"

struct tg_oidc_principal {
    tg_principal_t pub; /* its strings point into the members below */
    char subject[TG_GUARD_SUBJECT_MAX + 1];
    char issuer[TG_OIDC_URL_MAX + 1];
    tg_guard_str_t actors[TG_GUARD_MAX_BINDINGS];
    char actor_text[TG_GUARD_MAX_BINDINGS][TG_GUARD_NAME_MAX + 1];
    tg_guard_str_t surfaces[TG_GUARD_MAX_BINDINGS];
    char surface_text[TG_GUARD_MAX_BINDINGS][TG_GUARD_NAME_MAX + 1];
    tg_claim_t claims[TG_OIDC_CLAIMS_MAX];
    char claim_text[TG_OIDC_CLAIM_BYTES];
};

const tg_principal_t *tg_oidc_principal(const tg_oidc_principal_t *p) {
    return p != NULL ? &p->pub : NULL;
}

void tg_oidc_principal_free(tg_oidc_principal_t *p) { free(p); }

/* The text a scalar claim stands for in a template. */
static bool scalar_text(const json_t *v, char num[TG_CANON_NUMBER_MAX], const char **s, size_t *n) {
    if (json_is_string(v)) {
        *s = json_string_value(v);
        *n = json_string_length(v);
        return memchr(*s, '\0', *n) == NULL;
    }
    if (json_is_boolean(v)) {
        *s = json_is_true(v) ? "true" : "false";
        *n = strlen(*s);
        return true;
    }
    if (json_is_number(v)) {
        *s = num;
        return tg_canon_number(num, n, json_number_value(v)) == TG_OK;
    }
    return false;
}

tg_err_t oidc_render(char *out, size_t cap, size_t *len_out, const char *tpl,
                     const json_t *claims) {
    size_t o = 0;
    for (const char *p = tpl; *p != '\0';) {
        const char *piece = p;
        size_t n = 1;
        char num[TG_CANON_NUMBER_MAX];
        if (p[0] == '{' && p[1] == '{') {
            p += 2;
        } else if (p[0] == '}' && p[1] == '}') {
            piece = "}";
            p += 2;
        } else if (p[0] == '}') {
            return TG_ERR_CONFIG;
        } else if (p[0] == '{') {
            const char *end = strchr(p + 1, '}');
            size_t nl = end != NULL ? (size_t)(end - p - 1) : 0;
            if (end == NULL || nl == 0 || nl > TG_OIDC_NAME_MAX || memchr(p + 1, '{', nl)) {
                return TG_ERR_CONFIG;
            }
            if (claims == NULL) {
                piece = "x"; /* validation only: the name's shape is all there is to check */
            } else {
                char name[TG_OIDC_NAME_MAX + 1];
                memcpy(name, p + 1, nl);
                name[nl] = '\0';
                if (!scalar_text(json_object_get(claims, name), num, &piece, &n)) {
                    return TG_ERR_UNAUTHORIZED;
                }
            }
            p = end + 1;
        } else {
            p++;
        }
        if (o + n >= cap) {
            return claims == NULL ? TG_ERR_CONFIG : TG_ERR_UNAUTHORIZED;
        }
        memcpy(out + o, piece, n);
        o += n;
    }
    out[o] = '\0';
    *len_out = o;
    return TG_OK;
}

static bool in_list(char *const *l, size_t n, const char *s) {
    for (size_t i = 0; i < n; i++) {
        if (strcmp(l[i], s) == 0) {
            return true;
        }
    }
    return false;
}

/* The scalar claims, in the object's order, all of them or none: a claim left out would make
 * every condition on it false, which silently disarms a deny rule that names it. A verified
 * token cannot exceed the bounds (oidc.h), so a refusal here means the claims came from
 * somewhere bigger than a JWT, and the caller fails closed. */
static bool copy_claims(tg_oidc_principal_t *pp, const json_t *claims) {
    size_t used = 0, n = 0;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)claims, key, v) {
        if (n >= TG_OIDC_CLAIMS_MAX) {
            return false;
        }
        size_t kl = strlen(key);
        tg_value_t val;
        memset(&val, 0, sizeof val);
        size_t need = kl + 1;
        if (json_is_string(v)) {
            size_t sl = json_string_length(v);
            if (memchr(json_string_value(v), '\0', sl) != NULL || sl > UINT32_MAX) {
                return false; /* a NUL in a claim: no condition could compare it honestly */
            }
            need += sl + 1;
            val.type = TG_VT_STRING;
            val.len = (uint32_t)sl;
        } else if (json_is_boolean(v)) {
            val.type = TG_VT_BOOL;
            val.boolean = json_is_true(v) ? 1 : 0;
        } else if (json_is_number(v)) {
            val.type = TG_VT_NUMBER;
            val.num = json_number_value(v);
        } else {
            continue; /* objects, arrays, null: not facts a condition compares */
        }
        if (used + need > sizeof pp->claim_text) {
            return false;
        }
        char *name = pp->claim_text + used;
        memcpy(name, key, kl + 1);
        if (val.type == TG_VT_STRING) {
            char *s = name + kl + 1;
            memcpy(s, json_string_value(v), val.len);
            s[val.len] = '\0';
            val.str = s;
        }
        used += need;
        pp->claims[n].name = (tg_guard_str_t){name, kl};
        pp->claims[n].value = val;
        n++;
    }
    pp->pub.claims = n > 0 ? pp->claims : NULL;
    pp->pub.claims_count = n;
    return true;
}

tg_err_t tg_oidc_map(tg_oidc_principal_t **out, const tg_oidc_conf_t *c, size_t i,
                     const json_t *claims, const tg_tenants_t *t) {
    if (out == NULL || c == NULL || i >= c->n || !json_is_object(claims) || t == NULL) {
        return TG_ERR_INVALID_ARG;
    }
    *out = NULL;
    const oidc_issuer_t *is = c->issuers[i];
    /* the tenant first: the cheapest refusal, and the one an attacker probes */
    const char *tenant = is->tenant;
    if (is->tenant_claim != NULL) {
        const json_t *tv = json_object_get(claims, is->tenant_claim);
        if (!json_is_string(tv) || json_string_length(tv) == 0 ||
            json_string_length(tv) > TG_GUARD_TENANT_NAME_MAX) {
            return TG_ERR_UNAUTHORIZED;
        }
        tenant = json_string_value(tv);
    }
    size_t tl = strlen(tenant);
    int idx = tg_tenants_find(t, tenant, tl);
    /* An issuer that lists its tenants (or fixes one) reaches those and no other: a shared
     * issuer such as GitHub lets anyone mint a token whose tenant claim names any tenant with
     * tokens ("payments"), so the list is the operator's bound on it. Only an issuer without
     * a list falls back to the tenants of the tokens file. A name merely kept in the table
     * (seeded by a reload, or listed by another issuer) is reachable by neither. */
    bool has_list = is->n_tenants > 0 || is->tenant != NULL;
    bool listed = in_list(is->tenants, is->n_tenants, tenant) ||
                  (is->tenant != NULL && strcmp(is->tenant, tenant) == 0);
    if (idx < 0 || (has_list ? !listed : !tg_tenants_has_tokens(t, idx))) {
        return TG_ERR_TENANT_NOT_ALLOWED;
    }
    tg_oidc_principal_t *pp = calloc(1, sizeof *pp);
    if (pp == NULL) {
        return TG_ERR_NOMEM;
    }
    tg_err_t rc = TG_OK;
    size_t n = 0;
    rc = oidc_render(pp->subject, sizeof pp->subject, &n, is->subject, claims);
    if (rc == TG_OK && !tg_guard_subject_valid(pp->subject, n)) {
        rc = TG_ERR_UNAUTHORIZED;
    }
    pp->pub.subject = (tg_guard_str_t){pp->subject, n};
    size_t na = 0;
    for (size_t k = 0; rc == TG_OK && k < is->n_actors; k++) {
        char *a = pp->actor_text[na];
        rc = oidc_render(a, sizeof pp->actor_text[na], &n, is->actors[k], claims);
        if (rc == TG_OK && (!tg_guard_binding_valid(a, n) || a[0] == '@')) {
            rc = TG_ERR_UNAUTHORIZED;
        }
        bool dup = false;
        for (size_t j = 0; rc == TG_OK && j < na; j++) {
            dup = dup || (pp->actors[j].len == n && memcmp(pp->actors[j].ptr, a, n) == 0);
        }
        if (rc == TG_OK && !dup) {
            pp->actors[na++] = (tg_guard_str_t){a, n};
        }
    }
    if (rc == TG_OK) {
        for (size_t k = 0; k < is->n_surfaces; k++) {
            size_t sl = strlen(is->surfaces[k]); /* checked at load: fits */
            memcpy(pp->surface_text[k], is->surfaces[k], sl + 1);
            pp->surfaces[k] = (tg_guard_str_t){pp->surface_text[k], sl};
        }
        size_t il = strlen(is->issuer); /* at most TG_OIDC_URL_MAX: checked at load */
        memcpy(pp->issuer, is->issuer, il + 1);
        pp->pub.tenant = idx;
        pp->pub.role = is->role;
        pp->pub.observe = is->observe;
        pp->pub.subject_derived = false;
        pp->pub.actors = na > 0 ? pp->actors : NULL;
        pp->pub.actors_count = na;
        pp->pub.surfaces = is->n_surfaces > 0 ? pp->surfaces : NULL;
        pp->pub.surfaces_count = is->n_surfaces;
        pp->pub.issuer = (tg_guard_str_t){pp->issuer, il};
        if (!copy_claims(pp, claims)) {
            rc = TG_ERR_UNAUTHORIZED;
        }
    }
    if (rc != TG_OK) {
        free(pp);
        return rc;
    }
    *out = pp;
    return TG_OK;
}

static bool b64url_segment(const char *s, size_t n) {
    if (n == 0) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_')) {
            return false;
        }
    }
    return true;
}

bool tg_oidc_is_jwt_header(const char *h, size_t len) {
    if (h == NULL || len < 8 || strncasecmp(h, "Bearer ", 7) != 0) {
        return false;
    }
    const char *tok = h + 7;
    size_t n = len - 7;
    const char *d1 = memchr(tok, '.', n);
    if (d1 == NULL) {
        return false;
    }
    const char *d2 = memchr(d1 + 1, '.', n - (size_t)(d1 + 1 - tok));
    if (d2 == NULL) {
        return false;
    }
    /* "alg":"none" tokens have an empty third segment: they are still JWT-shaped (and
     * refused by the verifier), never looked up as a static token. */
    size_t third = n - (size_t)(d2 + 1 - tok);
    return b64url_segment(tok, (size_t)(d1 - tok)) &&
           b64url_segment(d1 + 1, (size_t)(d2 - d1 - 1)) &&
           (third == 0 || b64url_segment(d2 + 1, third));
}
