/* tls.c — the TLS certificate chain and key: loaded and checked aside, current in a swap,
 * reference counted per connection (tls.h says why and how long a pair lives). */
#include "trigguard/tls.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

#include "trigguard/io.h"
#include "trigguard/swap.h"

struct tg_tls_gen {
    /* One for the swap while this generation is current, one per connection that selected
     * it (tg_tls_select); the last tg_tls_unhold / retirement frees it. */
    atomic_uint refs;
    unsigned int n;                          /* certificates in pcert */
    gnutls_pcert_st pcert[TG_TLS_CHAIN_MAX]; /* the server's first (tls.h) */
    gnutls_privkey_t key;
};

struct tg_tls {
    tg_swap_t *cur; /* the current tg_tls_gen_t (never NULL once created) */
};

static atomic_uint live_generations;

unsigned tg_tls_live_generations(void) { return atomic_load(&live_generations); }

static void gen_free(tg_tls_gen_t *g) {
    for (unsigned i = 0; i < g->n; i++) {
        gnutls_pcert_deinit(&g->pcert[i]);
    }
    if (g->key != NULL) {
        gnutls_privkey_deinit(g->key); /* GnuTLS clears the key's numbers as it frees them */
    }
    free(g);
    atomic_fetch_sub(&live_generations, 1);
}

static void gen_unref(tg_tls_gen_t *g) {
    /* acq_rel: every use of g by a holder happens before the free by whoever is last */
    if (g != NULL && atomic_fetch_sub_explicit(&g->refs, 1, memory_order_acq_rel) == 1) {
        gen_free(g);
    }
}

/* The key's public half and the first certificate's public key name the same key when their
 * key ids (SHA-256 of the SubjectPublicKeyInfo) are equal. Public values: memcmp is fine. */
static bool key_matches(gnutls_privkey_t key, gnutls_pubkey_t cert_pub) {
    gnutls_pubkey_t pub = NULL;
    unsigned char a[64], b[64];
    size_t an = sizeof a, bn = sizeof b;
    bool same = false;
    if (gnutls_pubkey_init(&pub) == 0 && gnutls_pubkey_import_privkey(pub, key, 0, 0) == 0 &&
        gnutls_pubkey_get_key_id(pub, GNUTLS_KEYID_USE_SHA256, a, &an) == 0 &&
        gnutls_pubkey_get_key_id(cert_pub, GNUTLS_KEYID_USE_SHA256, b, &bn) == 0) {
        same = an == bn && memcmp(a, b, an) == 0;
    }
    if (pub != NULL) {
        gnutls_pubkey_deinit(pub);
    }
    return same;
}

static tg_err_t parse_chain(tg_tls_gen_t *g, const tg_file_t *f, const char *path,
                            tg_diag_t *diag) {
    gnutls_datum_t d = {(unsigned char *)f->data, (unsigned int)f->len};
    unsigned int n = TG_TLS_CHAIN_MAX;
    /* SORT: intermediates in another order are sent in chain order after the first
     * certificate, as a client expects. GnuTLS takes the first one as the server's (it does
     * not look for it), and so does key_matches. */
    int grc = gnutls_pcert_list_import_x509_raw(g->pcert, &n, &d, GNUTLS_X509_FMT_PEM,
                                                GNUTLS_X509_CRT_LIST_SORT);
    if (grc == GNUTLS_E_SHORT_MEMORY_BUFFER) {
        return tg_diag_set(diag, TG_ERR_LIMIT,
                           "TLS certificate %s: more than %d certificates in the chain", path,
                           TG_TLS_CHAIN_MAX);
    }
    if (grc < 0 || n == 0) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "TLS certificate %s: no PEM certificate in it (%s)",
                           path, grc < 0 ? gnutls_strerror(grc) : "empty");
    }
    g->n = n;
    return TG_OK;
}

static tg_err_t parse_key(tg_tls_gen_t *g, const tg_file_t *f, const char *path, tg_diag_t *diag) {
    gnutls_datum_t d = {(unsigned char *)f->data, (unsigned int)f->len};
    if (gnutls_privkey_init(&g->key) < 0) {
        g->key = NULL;
        return TG_ERR_NOMEM;
    }
    int grc = gnutls_privkey_import_x509_raw(g->key, &d, GNUTLS_X509_FMT_PEM, NULL, 0);
    if (grc < 0) {
        /* GnuTLS's message names the failure (base64, ASN.1, a password wanted), never a
         * byte of the key */
        return tg_diag_set(diag, TG_ERR_KEY_FORMAT,
                           "TLS key %s: not an unencrypted PEM private key (%s)", path,
                           gnutls_strerror(grc));
    }
    return TG_OK;
}

/* A new generation from the two files, with one reference (its future swap's). */
static tg_err_t gen_load(tg_tls_gen_t **out, const char *cert_path, const char *key_path,
                         tg_diag_t *diag) {
    *out = NULL;
    if (cert_path == NULL || key_path == NULL || cert_path[0] == '\0' || key_path[0] == '\0') {
        return tg_diag_set(diag, TG_ERR_CONFIG, "--tls-cert and --tls-key go together");
    }
    char label[64 + 1024];
    tg_file_t cf = {0}, kf = {0};
    (void)snprintf(label, sizeof label, "TLS certificate %s", cert_path);
    tg_err_t rc = tg_read_file(&cf, cert_path, TG_TLS_FILE_MAX, label, 0, diag);
    if (rc == TG_OK) {
        (void)snprintf(label, sizeof label, "TLS key %s", key_path);
        rc = tg_read_file(&kf, key_path, TG_TLS_FILE_MAX, label, TG_READ_SECRET, diag);
    }
    tg_tls_gen_t *g = NULL;
    if (rc == TG_OK) {
        g = calloc(1, sizeof *g);
        rc = g != NULL ? TG_OK : TG_ERR_NOMEM;
    }
    if (g != NULL) {
        atomic_init(&g->refs, 1);
        atomic_fetch_add(&live_generations, 1);
    }
    if (rc == TG_OK) {
        rc = parse_chain(g, &cf, cert_path, diag);
    }
    if (rc == TG_OK) {
        rc = parse_key(g, &kf, key_path, diag);
    }
    if (rc == TG_OK && !key_matches(g->key, g->pcert[0].pubkey)) {
        rc = tg_diag_set(diag, TG_ERR_CONFIG,
                         "TLS key %s does not match the certificate %s (its first one)", key_path,
                         cert_path);
    }
    tg_file_free(&cf);
    tg_file_free(&kf); /* wiped: read with TG_READ_SECRET */
    if (rc != TG_OK) {
        if (g != NULL) {
            gen_free(g);
        }
        return rc;
    }
    *out = g;
    return TG_OK;
}

tg_err_t tg_tls_create(tg_tls_t **out, const char *cert_path, const char *key_path,
                       tg_diag_t *diag) {
    *out = NULL;
    tg_tls_gen_t *g = NULL;
    tg_err_t rc = gen_load(&g, cert_path, key_path, diag);
    if (rc != TG_OK) {
        return rc;
    }
    tg_tls_t *t = calloc(1, sizeof *t);
    rc = t != NULL ? tg_swap_create(&t->cur, g) : TG_ERR_NOMEM;
    if (rc != TG_OK) {
        free(t);
        gen_unref(g);
        return rc;
    }
    *out = t;
    return TG_OK;
}

tg_err_t tg_tls_reload(tg_tls_t *t, const char *cert_path, const char *key_path, tg_diag_t *diag) {
    if (t == NULL) {
        return TG_ERR_INVALID_ARG;
    }
    tg_tls_gen_t *fresh = NULL;
    tg_err_t rc = gen_load(&fresh, cert_path, key_path, diag);
    if (rc != TG_OK) {
        return rc;
    }
    /* The exchange returns once no handshake can still be taking its reference on the old
     * generation; the connections that took one keep it alive past this unref. */
    gen_unref(tg_swap_exchange(t->cur, fresh));
    return TG_OK;
}

void tg_tls_destroy(tg_tls_t *t) {
    if (t != NULL) {
        gen_unref(tg_swap_peek(t->cur));
        tg_swap_destroy(t->cur);
        free(t);
    }
}

int tg_tls_select(tg_tls_t *t, tg_tls_gen_t **held, gnutls_pcert_st **pcert,
                  unsigned int *pcert_length, gnutls_privkey_t *key) {
    if (t == NULL || held == NULL) {
        return -1;
    }
    /* The reference is taken while the swap still counts this reader, so the generation
     * cannot be retired and freed between the load and the increment (swap.h's point). */
    tg_swap_ref_t ref;
    tg_tls_gen_t *g = tg_swap_acquire(t->cur, &ref);
    atomic_fetch_add_explicit(&g->refs, 1, memory_order_relaxed);
    tg_swap_release(t->cur, &ref);
    tg_tls_unhold(held); /* a repeated handshake on this connection replaces its pair */
    *held = g;
    *pcert = g->pcert;
    *pcert_length = g->n;
    *key = g->key;
    return 0;
}

void tg_tls_unhold(tg_tls_gen_t **held) {
    if (held != NULL && *held != NULL) {
        gen_unref(*held);
        *held = NULL;
    }
}
