/* conf.c — the OIDC issuers: from the flags and the --oidc-config file, validated. */
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oidc_int.h"
#include "trigguard/canon.h"
#include "trigguard/clock.h"
#include "trigguard/io.h"

#define CONF_STR_MAX 2048 /* longest string anywhere in the file (a URL, a template) */
#define JPATH_MAX 1280    /* a JSON path in a message: the file name (cut) and the members */

/* ---- key sets --------------------------------------------------------------------------- */

void oidc_keys_free(oidc_keys_t *k) {
    if (k != NULL) {
        tg_jwks_free(k->set);
        free(k->text);
        free(k);
    }
}

tg_err_t oidc_keys_make(oidc_keys_t **out, const char *text, size_t len, int64_t at_ms,
                        tg_diag_t *diag) {
    *out = NULL;
    oidc_keys_t *k = calloc(1, sizeof *k);
    if (k == NULL) {
        return TG_ERR_NOMEM;
    }
    k->text = malloc(len + 1);
    if (k->text == NULL) {
        free(k);
        return TG_ERR_NOMEM;
    }
    memcpy(k->text, text, len);
    k->text[len] = '\0';
    k->len = len;
    k->at_ms = at_ms;
    tg_err_t rc = tg_jwks_parse(&k->set, text, len, NULL, diag);
    if (rc != TG_OK) {
        oidc_keys_free(k);
        return rc;
    }
    *out = k;
    return TG_OK;
}

/* ---- issuers ---------------------------------------------------------------------------- */

tg_err_t oidc_issuer_new(oidc_issuer_t **out) {
    *out = NULL;
    oidc_issuer_t *is = calloc(1, sizeof *is);
    if (is == NULL) {
        return TG_ERR_NOMEM;
    }
    is->leeway_s = TG_OIDC_LEEWAY_DEFAULT;
    is->role = TG_ROLE_CALLER;
    if (pthread_mutex_init(&is->keys_mu, NULL) != 0) {
        free(is);
        return TG_ERR_INTERNAL;
    }
    is->keys_mu_init = true;
    tg_err_t rc = tg_swap_create(&is->keys, NULL);
    if (rc != TG_OK) {
        pthread_mutex_destroy(&is->keys_mu);
        free(is);
        return rc;
    }
    atomic_init(&is->next_fetch_ms, 0);
    atomic_init(&is->last_kick_ms, INT64_MIN / 2);
    atomic_init(&is->attempts, 0);
    for (size_t i = 0; i < OIDC_RESULTS; i++) {
        atomic_init(&is->verify[i], 0);
    }
    atomic_init(&is->refresh[0], 0);
    atomic_init(&is->refresh[1], 0);
    *out = is;
    return TG_OK;
}

static void issuer_free(oidc_issuer_t *is) {
    if (is == NULL) {
        return;
    }
    if (is->keys != NULL) {
        oidc_keys_free(tg_swap_peek(is->keys));
        tg_swap_destroy(is->keys);
    }
    if (is->keys_mu_init) {
        pthread_mutex_destroy(&is->keys_mu);
    }
    free(is->issuer);
    free(is->jwks);
    free(is->tenant_claim);
    free(is->tenant);
    free(is->subject);
    for (size_t i = 0; i < is->n_audiences; i++) {
        free(is->audiences[i]);
    }
    for (size_t i = 0; i < is->n_tenants; i++) {
        free(is->tenants[i]);
    }
    for (size_t i = 0; i < is->n_actors; i++) {
        free(is->actors[i]);
    }
    for (size_t i = 0; i < is->n_surfaces; i++) {
        free(is->surfaces[i]);
    }
    free(is);
}

void tg_oidc_conf_free(tg_oidc_conf_t *c) {
    if (c == NULL) {
        return;
    }
    for (size_t i = 0; i < c->n; i++) {
        issuer_free(c->issuers[i]);
    }
    free(c);
}

size_t tg_oidc_conf_count(const tg_oidc_conf_t *c) { return c != NULL ? c->n : 0; }

const char *tg_oidc_conf_name(const tg_oidc_conf_t *c, size_t i) {
    return c != NULL && i < c->n ? c->issuers[i]->name : NULL;
}

const char *tg_oidc_conf_issuer(const tg_oidc_conf_t *c, size_t i) {
    return c != NULL && i < c->n ? c->issuers[i]->issuer : NULL;
}

static bool name_ok(const char *s, size_t max) {
    size_t n = strlen(s);
    if (n == 0 || n > max) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-')) {
            return false;
        }
    }
    return true;
}

/* Printable ASCII without spaces: issuers, audiences, URLs, claim names. */
static bool token_ok(const char *s, size_t max) {
    size_t n = strlen(s);
    if (n == 0 || n > max) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f) {
            return false;
        }
    }
    return true;
}

/* A bound actor or surface name as the tokens file takes them (guard.h). */
static bool binding_ok(const char *s, bool actor) {
    size_t n = strlen(s);
    if (n == 0 || n > TG_GUARD_NAME_MAX || (actor && s[0] == '@')) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) {
            return false;
        }
    }
    return true;
}

/* "http://HOST[:port]/..." with HOST a loopback name or literal. */
static bool http_loopback(const char *url) {
    const char *h = url + strlen("http://");
    char host[256];
    size_t n = strcspn(h, "/?#");
    /* User info anywhere in the authority is refused rather than parsed: in
     * "http://127.0.0.1:80@evil.test/" the host curl connects to is evil.test, whatever the
     * text before the '@' looks like. */
    if (memchr(h, '@', n) != NULL) {
        return false;
    }
    if (*h == '[') {
        const char *end = strchr(h, ']');
        if (end == NULL || (size_t)(end - h) + 1 >= sizeof host) {
            return false;
        }
        n = (size_t)(end - h) + 1;
    } else {
        n = strcspn(h, ":/?#");
        if (n >= sizeof host) {
            return false;
        }
    }
    memcpy(host, h, n);
    host[n] = '\0';
    return tg_guard_listen_is_loopback(host);
}

/* Validates everything of one issuer whose members are set; where names it in diag. */
static tg_err_t issuer_check(oidc_issuer_t *is, const char *where, tg_diag_t *diag) {
    if (!name_ok(is->name, TG_OIDC_NAME_MAX)) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "%s: name must be 1..%d chars of [A-Za-z0-9._-]",
                           where, TG_OIDC_NAME_MAX);
    }
    if (is->issuer == NULL || !token_ok(is->issuer, TG_OIDC_URL_MAX)) {
        return tg_diag_set(diag, TG_ERR_CONFIG,
                           "%s (%s): issuer must be 1..%d printable characters (the exact iss)",
                           where, is->name, TG_OIDC_URL_MAX);
    }
    if (is->jwks == NULL || !token_ok(is->jwks, TG_OIDC_URL_MAX)) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "%s (%s): a JWKS file or URL is required", where,
                           is->name);
    }
    if (strncmp(is->jwks, "https://", 8) == 0) {
        /* A key set is public: credentials in its URL would only end up in the logs, which
         * name the URL of every fetch. */
        const char *auth = is->jwks + 8;
        if (memchr(auth, '@', strcspn(auth, "/?#")) != NULL) {
            return tg_diag_set(diag, TG_ERR_CONFIG,
                               "%s (%s): a JWKS URL must not carry user info (user@ or "
                               "user:password@): it is logged",
                               where, is->name);
        }
        is->jwks_url = true;
    } else if (strncmp(is->jwks, "http://", 7) == 0) {
        if (!http_loopback(is->jwks)) {
            return tg_diag_set(diag, TG_ERR_CONFIG,
                               "%s (%s): a JWKS URL must be https:// (http:// only to a "
                               "loopback host)",
                               where, is->name);
        }
        is->jwks_url = true;
    } else if (strstr(is->jwks, "://") != NULL) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "%s (%s): JWKS URL scheme not https", where,
                           is->name);
    }
    if (is->n_audiences == 0) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "%s (%s): at least one audience is required", where,
                           is->name);
    }
    for (size_t i = 0; i < is->n_audiences; i++) {
        if (!token_ok(is->audiences[i], TG_OIDC_URL_MAX)) {
            return tg_diag_set(diag, TG_ERR_CONFIG,
                               "%s (%s): audience %zu is empty or not "
                               "printable",
                               where, is->name, i);
        }
    }
    if (is->leeway_s < 0 || is->leeway_s > TG_OIDC_LEEWAY_MAX) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "%s (%s): leeway_s must be 0..%d", where, is->name,
                           TG_OIDC_LEEWAY_MAX);
    }
    if ((is->tenant_claim == NULL) == (is->tenant == NULL)) {
        return tg_diag_set(diag, TG_ERR_CONFIG,
                           "%s (%s): exactly one of tenant_claim (a claim naming the tenant) "
                           "and tenant (a fixed tenant) is required",
                           where, is->name);
    }
    if (is->tenant_claim != NULL && !token_ok(is->tenant_claim, TG_OIDC_NAME_MAX)) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "%s (%s): tenant_claim is not a claim name", where,
                           is->name);
    }
    if (is->tenant != NULL && !name_ok(is->tenant, TG_GUARD_TENANT_NAME_MAX)) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "%s (%s): tenant \"%s\" is not a tenant name",
                           where, is->name, is->tenant);
    }
    for (size_t i = 0; i < is->n_tenants; i++) {
        if (!name_ok(is->tenants[i], TG_GUARD_TENANT_NAME_MAX)) {
            return tg_diag_set(diag, TG_ERR_CONFIG, "%s (%s): tenants[%zu] is not a tenant name",
                               where, is->name, i);
        }
    }
    if (is->subject == NULL) {
        is->subject = strdup("{sub}");
        if (is->subject == NULL) {
            return TG_ERR_NOMEM;
        }
    }
    char buf[TG_OIDC_TEMPLATE_MAX + 1];
    size_t bl;
    if (strlen(is->subject) > TG_OIDC_TEMPLATE_MAX ||
        oidc_render(buf, sizeof buf, &bl, is->subject, NULL) != TG_OK) {
        return tg_diag_set(diag, TG_ERR_CONFIG,
                           "%s (%s): subject template is malformed (text with {claim} "
                           "references, at most %d bytes)",
                           where, is->name, TG_OIDC_TEMPLATE_MAX);
    }
    for (size_t i = 0; i < is->n_actors; i++) {
        if (strlen(is->actors[i]) > TG_OIDC_TEMPLATE_MAX || is->actors[i][0] == '@' ||
            oidc_render(buf, sizeof buf, &bl, is->actors[i], NULL) != TG_OK) {
            return tg_diag_set(diag, TG_ERR_CONFIG,
                               "%s (%s): actors[%zu] template is malformed (text with {claim} "
                               "references, at most %d bytes, not starting with '@')",
                               where, is->name, i, TG_OIDC_TEMPLATE_MAX);
        }
    }
    for (size_t i = 0; i < is->n_surfaces; i++) {
        if (!binding_ok(is->surfaces[i], false)) {
            return tg_diag_set(diag, TG_ERR_CONFIG, "%s (%s): surfaces[%zu] is not a surface name",
                               where, is->name, i);
        }
    }
    return TG_OK;
}

/* Reads a file source now (start, reload): a bad file is a configuration error. */
static tg_err_t issuer_load_file(oidc_issuer_t *is, tg_diag_t *diag) {
    if (is->jwks_url) {
        return TG_OK;
    }
    tg_file_t f;
    char label[TG_OIDC_NAME_MAX + 32];
    (void)snprintf(label, sizeof label, "JWKS of issuer %s", is->name);
    tg_err_t rc = tg_read_file(&f, is->jwks, TG_JWKS_MAX, label, 0, diag);
    if (rc != TG_OK) {
        return rc;
    }
    oidc_keys_t *k = NULL;
    tg_diag_t d = {{0}};
    rc = oidc_keys_make(&k, f.data, f.len, tg_clock_now_ms(), &d);
    tg_file_free(&f);
    if (rc != TG_OK) {
        return tg_diag_set(diag, rc == TG_ERR_NOMEM ? rc : TG_ERR_CONFIG, "%s (%s): %s", label,
                           is->jwks, d.msg);
    }
    oidc_keys_free(tg_swap_exchange(is->keys, k)); /* NULL: the issuer is new */
    return TG_OK;
}

static tg_err_t conf_add(tg_oidc_conf_t *c, oidc_issuer_t *is, const char *where, tg_diag_t *diag) {
    if (c->n >= TG_OIDC_MAX_ISSUERS) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "%s: more than %d issuers", where,
                           TG_OIDC_MAX_ISSUERS);
    }
    for (size_t i = 0; i < c->n; i++) {
        if (strcmp(c->issuers[i]->name, is->name) == 0) {
            return tg_diag_set(diag, TG_ERR_CONFIG, "%s: issuer name \"%s\" given twice", where,
                               is->name);
        }
        if (strcmp(c->issuers[i]->issuer, is->issuer) == 0) {
            return tg_diag_set(diag, TG_ERR_CONFIG,
                               "%s (%s): issuer %s is also issuer \"%s\" (one configuration "
                               "per iss)",
                               where, is->name, is->issuer, c->issuers[i]->name);
        }
    }
    c->issuers[c->n++] = is;
    return TG_OK;
}

/* ---- the file --------------------------------------------------------------------------- */

static tg_err_t want_str(char **dst, const json_t *v, const char *path, tg_diag_t *diag) {
    if (!json_is_string(v) || json_string_length(v) == 0 ||
        strlen(json_string_value(v)) != json_string_length(v)) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "%s: expected a non-empty string", path);
    }
    *dst = strdup(json_string_value(v));
    return *dst != NULL ? TG_OK : TG_ERR_NOMEM;
}

static tg_err_t want_list(char **dst, size_t *n, size_t max, const json_t *v, const char *path,
                          tg_diag_t *diag) {
    if (!json_is_array(v) || json_array_size(v) == 0 || json_array_size(v) > max) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "%s: expected an array of 1..%zu strings", path,
                           max);
    }
    for (size_t i = 0; i < json_array_size(v); i++) {
        char p[JPATH_MAX];
        (void)snprintf(p, sizeof p, "%.1200s[%zu]", path, i);
        tg_err_t rc = want_str(&dst[*n], json_array_get(v, i), p, diag);
        if (rc != TG_OK) {
            return rc;
        }
        for (size_t j = 0; j < *n; j++) {
            if (strcmp(dst[j], dst[*n]) == 0) {
                free(dst[*n]);
                return tg_diag_set(diag, TG_ERR_CONFIG, "%s: \"%s\" is listed twice", p, dst[j]);
            }
        }
        (*n)++;
    }
    return TG_OK;
}

static tg_err_t parse_issuer(oidc_issuer_t *is, const json_t *o, const char *path,
                             tg_diag_t *diag) {
    if (!json_is_object(o)) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "%s: expected an object", path);
    }
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)o, key, v) {
        char p[JPATH_MAX];
        (void)snprintf(p, sizeof p, "%.1100s.%.40s", path, key);
        tg_err_t rc = TG_OK;
        if (strcmp(key, "name") == 0) {
            char *s = NULL;
            rc = want_str(&s, v, p, diag);
            if (rc == TG_OK && s != NULL) {
                if (strlen(s) > TG_OIDC_NAME_MAX) {
                    rc = tg_diag_set(diag, TG_ERR_CONFIG, "%s: longer than %d bytes", p,
                                     TG_OIDC_NAME_MAX);
                } else {
                    memcpy(is->name, s, strlen(s) + 1);
                }
                free(s);
            }
        } else if (strcmp(key, "issuer") == 0) {
            rc = want_str(&is->issuer, v, p, diag);
        } else if (strcmp(key, "jwks") == 0) {
            rc = want_str(&is->jwks, v, p, diag);
        } else if (strcmp(key, "audiences") == 0) {
            rc = want_list(is->audiences, &is->n_audiences, TG_OIDC_MAX_AUDIENCES, v, p, diag);
        } else if (strcmp(key, "leeway_s") == 0) {
            double d = json_is_number(v) ? json_number_value(v) : -1;
            if (!(d >= 0 && d <= TG_OIDC_LEEWAY_MAX) || d != (double)(int64_t)d) {
                rc = tg_diag_set(diag, TG_ERR_CONFIG, "%s: expected an integer 0..%d", p,
                                 TG_OIDC_LEEWAY_MAX);
            } else {
                is->leeway_s = (int64_t)d;
            }
        } else if (strcmp(key, "tenant_claim") == 0) {
            rc = want_str(&is->tenant_claim, v, p, diag);
        } else if (strcmp(key, "tenant") == 0) {
            rc = want_str(&is->tenant, v, p, diag);
        } else if (strcmp(key, "tenants") == 0) {
            rc = want_list(is->tenants, &is->n_tenants, TG_OIDC_MAX_TENANTS, v, p, diag);
        } else if (strcmp(key, "subject") == 0) {
            rc = want_str(&is->subject, v, p, diag);
        } else if (strcmp(key, "actors") == 0) {
            rc = want_list(is->actors, &is->n_actors, TG_GUARD_MAX_BINDINGS, v, p, diag);
        } else if (strcmp(key, "surfaces") == 0) {
            rc = want_list(is->surfaces, &is->n_surfaces, TG_GUARD_MAX_BINDINGS, v, p, diag);
        } else if (strcmp(key, "observe") == 0) {
            if (!json_is_boolean(v)) {
                rc = tg_diag_set(diag, TG_ERR_CONFIG, "%s: expected true or false", p);
            }
            is->observe = json_is_true(v);
        } else if (strcmp(key, "role") == 0) {
            if (!json_is_string(v) ||
                !tg_role_parse(&is->role, json_string_value(v), json_string_length(v))) {
                rc = tg_diag_set(diag, TG_ERR_CONFIG,
                                 "%s: expected \"caller\", \"approver\", \"executor\" or "
                                 "\"admin\"",
                                 p);
            }
        } else {
            rc = tg_diag_set(diag, TG_ERR_CONFIG, "%s: unknown member", p);
        }
        if (rc != TG_OK) {
            return rc;
        }
    }
    if (is->name[0] == '\0') {
        return tg_diag_set(diag, TG_ERR_CONFIG, "%s.name: required", path);
    }
    return TG_OK;
}

static tg_err_t parse_into(tg_oidc_conf_t *c, const char *text, size_t len, const char *origin,
                           bool load_files, tg_diag_t *diag) {
    if (origin == NULL) {
        origin = "oidc config";
    }
    json_t *root = NULL;
    tg_json_limits_t lim = {TG_OIDC_CONFIG_MAX, 8, CONF_STR_MAX, 64};
    tg_diag_t d = {{0}};
    tg_err_t rc = tg_json_parse(&root, text, len, &lim, &d);
    if (rc != TG_OK) {
        return rc == TG_ERR_NOMEM ? rc : tg_diag_set(diag, TG_ERR_CONFIG, "%s: %s", origin, d.msg);
    }
    const char *key;
    json_t *v;
    if (!json_is_object(root)) {
        rc = tg_diag_set(diag, TG_ERR_CONFIG, "%s: expected a JSON object {\"issuers\": [...]}",
                         origin);
        goto done;
    }
    json_object_foreach(root, key, v) {
        if (strcmp(key, "issuers") != 0) {
            rc = tg_diag_set(diag, TG_ERR_CONFIG, "%s: %.40s: unknown member", origin, key);
            goto done;
        }
    }
    json_t *arr = json_object_get(root, "issuers");
    if (!json_is_array(arr) || json_array_size(arr) > TG_OIDC_MAX_ISSUERS) {
        rc = tg_diag_set(diag, TG_ERR_CONFIG, "%s: issuers: expected an array of at most %d",
                         origin, TG_OIDC_MAX_ISSUERS);
        goto done;
    }
    for (size_t i = 0; i < json_array_size(arr); i++) {
        char where[64];
        (void)snprintf(where, sizeof where, "issuers[%zu]", i);
        oidc_issuer_t *is = NULL;
        rc = oidc_issuer_new(&is);
        if (rc != TG_OK) {
            goto done;
        }
        char full[TG_CONFIG_STR_MAX + 80];
        (void)snprintf(full, sizeof full, "%.1000s: %s", origin, where);
        rc = parse_issuer(is, json_array_get(arr, i), full, diag);
        if (rc == TG_OK) {
            rc = issuer_check(is, full, diag);
        }
        if (rc == TG_OK && load_files) {
            rc = issuer_load_file(is, diag);
        }
        if (rc == TG_OK) {
            rc = conf_add(c, is, full, diag);
        }
        if (rc != TG_OK) {
            issuer_free(is);
            goto done;
        }
    }
done:
    json_decref(root);
    return rc;
}

tg_err_t tg_oidc_conf_parse(tg_oidc_conf_t **out, const char *text, size_t len, const char *origin,
                            bool load_files, tg_diag_t *diag) {
    if (out == NULL || (text == NULL && len > 0)) {
        return TG_ERR_INVALID_ARG;
    }
    *out = NULL;
    tg_oidc_conf_t *c = calloc(1, sizeof *c);
    if (c == NULL) {
        return TG_ERR_NOMEM;
    }
    tg_err_t rc = parse_into(c, text != NULL ? text : "", len, origin, load_files, diag);
    if (rc != TG_OK) {
        tg_oidc_conf_free(c);
        return rc;
    }
    *out = c;
    return TG_OK;
}

/* ---- the flags -------------------------------------------------------------------------- */

/* Splits "NAME=VALUE"; false when there is no '=' or either side is empty. */
static bool split_nv(const char *s, char name[TG_OIDC_NAME_MAX + 1], const char **value) {
    const char *eq = strchr(s, '=');
    if (eq == NULL || eq == s || eq[1] == '\0' || (size_t)(eq - s) > TG_OIDC_NAME_MAX) {
        return false;
    }
    memcpy(name, s, (size_t)(eq - s));
    name[eq - s] = '\0';
    *value = eq + 1;
    return true;
}

static oidc_issuer_t *flag_issuer(oidc_issuer_t **fl, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++) {
        if (strcmp(fl[i]->name, name) == 0) {
            return fl[i];
        }
    }
    return NULL;
}

/* One list flag's values into the issuers --oidc named. */
static tg_err_t flag_values(oidc_issuer_t **fl, size_t n, const tg_config_list_t *l,
                            const char *flag, tg_diag_t *diag) {
    for (uint32_t k = 0; k < l->n; k++) {
        const char *val = NULL;
        char name[TG_OIDC_NAME_MAX + 1];
        if (!split_nv(tg_config_list_get(l, k), name, &val)) {
            return tg_diag_set(diag, TG_ERR_CONFIG, "--%s: expected NAME=VALUE", flag);
        }
        oidc_issuer_t *is = flag_issuer(fl, n, name);
        if (is == NULL) {
            return tg_diag_set(diag, TG_ERR_CONFIG, "--%s %s=...: no --oidc %s=ISSUER", flag, name,
                               name);
        }
        char *dup = strdup(val);
        if (dup == NULL) {
            return TG_ERR_NOMEM;
        }
        char **single = NULL;
        char **list = NULL;
        size_t *count = NULL, max = 0;
        if (strcmp(flag, "oidc-jwks") == 0) {
            single = &is->jwks;
        } else if (strcmp(flag, "oidc-tenant-claim") == 0) {
            single = &is->tenant_claim;
        } else if (strcmp(flag, "oidc-audience") == 0) {
            list = is->audiences, count = &is->n_audiences, max = TG_OIDC_MAX_AUDIENCES;
        } else {
            list = is->actors, count = &is->n_actors, max = TG_GUARD_MAX_BINDINGS;
        }
        if (single != NULL && *single != NULL) {
            free(dup);
            return tg_diag_set(diag, TG_ERR_CONFIG, "--%s %s=...: given twice", flag, name);
        }
        if (single != NULL) {
            *single = dup;
            continue;
        }
        if (*count >= max) {
            free(dup);
            return tg_diag_set(diag, TG_ERR_CONFIG, "--%s %s=...: more than %zu", flag, name, max);
        }
        list[(*count)++] = dup;
    }
    return TG_OK;
}

static tg_err_t build_flags(tg_oidc_conf_t *c, const tg_config_t *cfg, tg_diag_t *diag) {
    oidc_issuer_t *fl[TG_OIDC_MAX_ISSUERS];
    size_t n = 0;
    tg_err_t rc = TG_OK;
    for (uint32_t k = 0; k < cfg->oidc.n && rc == TG_OK; k++) {
        const char *val = NULL;
        char name[TG_OIDC_NAME_MAX + 1];
        if (!split_nv(tg_config_list_get(&cfg->oidc, k), name, &val)) {
            rc = tg_diag_set(diag, TG_ERR_CONFIG, "--oidc: expected NAME=ISSUER");
        } else if (flag_issuer(fl, n, name) != NULL) {
            rc = tg_diag_set(diag, TG_ERR_CONFIG, "--oidc %s=...: given twice", name);
        } else if (n >= TG_OIDC_MAX_ISSUERS) {
            rc = tg_diag_set(diag, TG_ERR_CONFIG, "--oidc: more than %d issuers",
                             TG_OIDC_MAX_ISSUERS);
        } else if ((rc = oidc_issuer_new(&fl[n])) == TG_OK) {
            memcpy(fl[n]->name, name, strlen(name) + 1);
            fl[n]->issuer = strdup(val);
            rc = fl[n++]->issuer != NULL ? TG_OK : TG_ERR_NOMEM;
        }
    }
    if (rc == TG_OK) {
        rc = flag_values(fl, n, &cfg->oidc_jwks, "oidc-jwks", diag);
    }
    if (rc == TG_OK) {
        rc = flag_values(fl, n, &cfg->oidc_audience, "oidc-audience", diag);
    }
    if (rc == TG_OK) {
        rc = flag_values(fl, n, &cfg->oidc_tenant_claim, "oidc-tenant-claim", diag);
    }
    if (rc == TG_OK) {
        rc = flag_values(fl, n, &cfg->oidc_actor, "oidc-actor", diag);
    }
    size_t done = 0;
    for (; rc == TG_OK && done < n; done++) {
        char where[TG_OIDC_NAME_MAX + 16];
        (void)snprintf(where, sizeof where, "--oidc %s", fl[done]->name);
        rc = issuer_check(fl[done], where, diag);
        if (rc == TG_OK) {
            rc = issuer_load_file(fl[done], diag);
        }
        if (rc == TG_OK) {
            rc = conf_add(c, fl[done], where, diag);
        }
        if (rc != TG_OK) {
            break; /* fl[done] is not c's */
        }
    }
    for (size_t i = done; i < n; i++) {
        issuer_free(fl[i]);
    }
    return rc;
}

tg_err_t tg_oidc_conf_build(tg_oidc_conf_t **out, const tg_config_t *cfg, tg_diag_t *diag) {
    if (out == NULL || cfg == NULL) {
        return TG_ERR_INVALID_ARG;
    }
    *out = NULL;
    tg_oidc_conf_t *c = calloc(1, sizeof *c);
    if (c == NULL) {
        return TG_ERR_NOMEM;
    }
    tg_err_t rc = build_flags(c, cfg, diag);
    if (rc == TG_OK && cfg->oidc_config[0] != '\0') {
        tg_file_t f;
        rc = tg_read_file(&f, cfg->oidc_config, TG_OIDC_CONFIG_MAX, "--oidc-config", 0, diag);
        if (rc == TG_OK) {
            rc = parse_into(c, f.data, f.len, cfg->oidc_config, true, diag);
            tg_file_free(&f);
        }
    }
    if (rc != TG_OK) {
        tg_oidc_conf_free(c);
        return rc;
    }
    *out = c;
    return TG_OK;
}

tg_err_t tg_oidc_conf_add_tenants(const tg_oidc_conf_t *c, tg_tenants_t *t, tg_diag_t *diag) {
    for (size_t i = 0; c != NULL && i < c->n; i++) {
        const oidc_issuer_t *is = c->issuers[i];
        for (size_t k = 0; k <= is->n_tenants; k++) {
            const char *name = k < is->n_tenants ? is->tenants[k] : is->tenant;
            if (name == NULL) {
                continue;
            }
            tg_err_t rc = tg_tenants_add_name(t, name, strlen(name), diag);
            if (rc != TG_OK) {
                return rc;
            }
        }
    }
    return TG_OK;
}
