/* tenants.c — tenant table from the tokens file / TRIGGUARD_API_KEYS, bearer auth. */
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

struct tg_tenants {
    size_t count;
    bool bypass;
    int local_index;
    tenant_t names[TG_GUARD_MAX_TENANTS];
    uint8_t digests[TG_GUARD_MAX_TENANTS][32]; /* contiguous: the auth loop reads only these */
};

/* One tenant parsed from a source, not yet committed to the table. */
typedef struct pending {
    const char *name;
    size_t name_len;
    uint8_t digest[32];
} pending_t;

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
    sodium_memzero(t, sizeof *t);
    free(t);
}

size_t tg_tenants_count(const tg_tenants_t *t) { return t != NULL ? t->count : 0; }

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

/* Visible ASCII except ',' (the API_KEYS separator never reaches here, but ' ' and controls
 * could). */
static bool token_char_ok(unsigned char c) { return c >= 0x21 && c <= 0x7e; }

/* Checks p[0..n) against the table and each other, then appends all or nothing. The
 * comparisons are not constant-time: this runs once at startup on operator input. */
static tg_err_t commit(tg_tenants_t *t, const pending_t *p, size_t n, const char *origin,
                       tg_diag_t *diag) {
    if (n > TG_GUARD_MAX_TENANTS - t->count) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "%s: too many tenants (%zu + %zu > %d)", origin,
                           t->count, n, TG_GUARD_MAX_TENANTS);
    }
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < t->count + i; j++) {
            const char *nm = j < t->count ? t->names[j].name : p[j - t->count].name;
            size_t nl = j < t->count ? t->names[j].name_len : p[j - t->count].name_len;
            const uint8_t *dg = j < t->count ? t->digests[j] : p[j - t->count].digest;
            if (nl == p[i].name_len && memcmp(nm, p[i].name, nl) == 0) {
                return tg_diag_set(diag, TG_ERR_CONFIG, "%s: duplicate tenant \"%.*s\"", origin,
                                   (int)p[i].name_len, p[i].name);
            }
            if (memcmp(dg, p[i].digest, 32) == 0) {
                return tg_diag_set(diag, TG_ERR_CONFIG,
                                   "%s: tenant \"%.*s\" has the same token as tenant \"%.*s\"",
                                   origin, (int)p[i].name_len, p[i].name, (int)nl, nm);
            }
        }
    }
    for (size_t i = 0; i < n; i++) {
        tenant_t *dst = &t->names[t->count];
        memcpy(dst->name, p[i].name, p[i].name_len);
        dst->name[p[i].name_len] = '\0';
        dst->name_len = p[i].name_len;
        memcpy(t->digests[t->count], p[i].digest, 32);
        t->count++;
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
    p.name = name;
    p.name_len = name_len;
    memcpy(p.digest, token_sha256, 32);
    tg_err_t rc = commit(t, &p, 1, "tenants", diag);
    sodium_memzero(&p, sizeof p);
    return rc;
}

tg_err_t tg_tenants_set_local_bypass(tg_tenants_t *t, bool on) {
    if (t == NULL) {
        return TG_ERR_INVALID_ARG;
    }
    if (on) {
        const char *local = TG_GUARD_LOCAL_TENANT;
        int idx = tg_tenants_find(t, local, strlen(local));
        if (idx < 0) {
            uint8_t digest[32];
            randombytes_buf(digest, sizeof digest);
            tg_err_t rc = tg_tenants_add(t, local, strlen(local), digest, NULL);
            sodium_memzero(digest, sizeof digest);
            if (rc) {
                return rc;
            }
            idx = (int)t->count - 1;
        }
        t->local_index = idx;
    }
    t->bypass = on;
    return TG_OK;
}

tg_err_t tg_tenants_load_json(tg_tenants_t *t, const char *text, size_t len, const char *origin,
                              tg_diag_t *diag) {
    json_t *root = NULL;
    pending_t *p = NULL;
    size_t n = 0;
    tg_diag_t jd = {{0}};
    tg_err_t rc = TG_OK;
    /* An array of flat objects is depth 2; the slack lets a mistyped member (an object where
     * a string belongs) or a stray member get the precise message below. */
    const tg_json_limits_t lim = {TG_GUARD_TOKENS_FILE_MAX, 3, 4096, 8};
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
                         "%s: expected a JSON array of {\"tenant\", \"token_sha256\"} objects",
                         origin);
        goto done;
    }
    n = json_array_size(root);
    if (n > TG_GUARD_MAX_TENANTS) {
        rc = tg_diag_set(diag, TG_ERR_CONFIG, "%s: %zu tenants, at most %d", origin, n,
                         TG_GUARD_MAX_TENANTS);
        goto done;
    }
    p = calloc(n > 0 ? n : 1, sizeof *p);
    if (p == NULL) {
        rc = tg_diag_set(diag, TG_ERR_NOMEM, "%s: out of memory", origin);
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *item = json_array_get(root, i);
        json_t *jn = NULL;
        json_t *jh = NULL;
        const char *k = NULL;
        json_t *v = NULL;
        if (!json_is_object(item)) {
            rc = tg_diag_set(diag, TG_ERR_CONFIG, "%s: [%zu]: expected an object", origin, i);
            goto done;
        }
        json_object_foreach(item, k, v) {
            if (strcmp(k, "tenant") == 0) {
                jn = v;
            } else if (strcmp(k, "token_sha256") == 0) {
                jh = v;
            } else {
                rc = tg_diag_set(diag, TG_ERR_CONFIG, "%s: [%zu]: unknown member \"%.64s\"", origin,
                                 i, k);
                goto done;
            }
        }
        if (jn == NULL || jh == NULL) {
            rc = tg_diag_set(diag, TG_ERR_CONFIG, "%s: [%zu]: missing member \"%s\"", origin, i,
                             jn == NULL ? "tenant" : "token_sha256");
            goto done;
        }
        if (!json_is_string(jn) || !name_valid(json_string_value(jn), json_string_length(jn))) {
            rc = tg_diag_set(diag, TG_ERR_CONFIG,
                             "%s: [%zu].tenant: expected 1..%d chars of [A-Za-z0-9._-]", origin, i,
                             TG_GUARD_TENANT_NAME_MAX);
            goto done;
        }
        if (!json_is_string(jh) || json_string_length(jh) != 64 ||
            tg_unhex(p[i].digest, 32, json_string_value(jh), 64) != TG_OK) {
            rc = tg_diag_set(diag, TG_ERR_CONFIG, "%s: [%zu].token_sha256: expected 64 hex digits",
                             origin, i);
            goto done;
        }
        p[i].name = json_string_value(jn);
        p[i].name_len = json_string_length(jn);
    }
    rc = commit(t, p, n, origin, diag);

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
    p = calloc(TG_GUARD_MAX_TENANTS, sizeof *p);
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
        if (n == TG_GUARD_MAX_TENANTS) {
            rc = tg_diag_set(diag, TG_ERR_CONFIG, "%s: more than %d entries", origin,
                             TG_GUARD_MAX_TENANTS);
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
        n++;
        if (end >= len) {
            break;
        }
        pos = end + 1;
    }
    rc = commit(t, p, n, origin, diag);

done:
    sodium_memzero(p, TG_GUARD_MAX_TENANTS * sizeof *p);
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

tg_err_t tg_auth_check(const tg_tenants_t *t, const char *header, size_t len,
                       int *tenant_index_out) {
    uint8_t digest[32];
    if (t == NULL || tenant_index_out == NULL) {
        return TG_ERR_INVALID_ARG;
    }
    *tenant_index_out = -1;
    if (t->bypass) {
        *tenant_index_out = t->local_index;
        return TG_OK;
    }
    /* "Bearer" + ' ' + at least one token char */
    if (header == NULL || len < 8 || len > 7 + TG_GUARD_TOKEN_MAX || !scheme_is_bearer(header) ||
        header[6] != ' ') {
        return TG_ERR_UNAUTHORIZED;
    }
    const char *token = header + 7;
    size_t tlen = len - 7;
    for (size_t i = 0; i < tlen; i++) {
        if (!token_char_ok((unsigned char)token[i])) {
            return TG_ERR_UNAUTHORIZED;
        }
    }
    tg_sha256(digest, token, tlen);
    /* Visit every digest and select the match with masks: no early exit, no branch on it. */
    unsigned found = 0;
    size_t sel = 0;
    for (size_t i = 0; i < t->count; i++) {
        unsigned eq = (unsigned)(sodium_memcmp(digest, t->digests[i], 32) + 1); /* 1 or 0 */
        size_t mask = (size_t)0 - (size_t)eq;
        sel = (sel & ~mask) | (i & mask);
        found |= eq;
    }
    sodium_memzero(digest, sizeof digest);
    if (!found) {
        return TG_ERR_UNAUTHORIZED;
    }
    *tenant_index_out = (int)sel;
    return TG_OK;
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
