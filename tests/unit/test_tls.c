/* test_tls.c — the TLS certificate store (tls.h): a pair loads only when its key is the
 * certificate's, a failed reload leaves the current pair serving, a reload reaches the next
 * select, and a retired pair stays allocated exactly as long as a connection holds it. The
 * concurrent test selects and unholds on threads while the main thread reloads; it runs
 * under ASan and TSan (scripts/test lists it). The pairs are made here with GnuTLS. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

#include "trigguard/tls.h"

typedef struct pair {
    char cert[512], key[512];
    unsigned char der[2048]; /* the certificate as a client receives it */
    size_t der_len;
} pair_t;

static char dir[] = "/tmp/tg-test-tls.XXXXXX";
static pair_t A, B;

static void write_datum(const char *path, const gnutls_datum_t *d) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fwrite(d->data, 1, d->size, f), d->size);
    assert_int_equal(fclose(f), 0);
}

/* A self-signed EC P-256 certificate for 127.0.0.1 and its key, in dir/NAME.crt/.key. */
static void make_pair(pair_t *p, const char *name) {
    (void)snprintf(p->cert, sizeof p->cert, "%s/%s.crt", dir, name);
    (void)snprintf(p->key, sizeof p->key, "%s/%s.key", dir, name);
    gnutls_x509_privkey_t k;
    gnutls_x509_crt_t c;
    assert_int_equal(gnutls_x509_privkey_init(&k), 0);
    assert_int_equal(gnutls_x509_privkey_generate(
                         k, GNUTLS_PK_ECDSA, GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0),
                     0);
    assert_int_equal(gnutls_x509_crt_init(&c), 0);
    unsigned char serial[8];
    gnutls_rnd(GNUTLS_RND_NONCE, serial, sizeof serial);
    serial[0] &= 0x7f;
    time_t now = time(NULL);
    assert_int_equal(gnutls_x509_crt_set_version(c, 3), 0);
    assert_int_equal(gnutls_x509_crt_set_serial(c, serial, sizeof serial), 0);
    assert_int_equal(gnutls_x509_crt_set_activation_time(c, now - 60), 0);
    assert_int_equal(gnutls_x509_crt_set_expiration_time(c, now + 86400), 0);
    assert_int_equal(
        gnutls_x509_crt_set_dn_by_oid(c, GNUTLS_OID_X520_COMMON_NAME, 0, "127.0.0.1", 9), 0);
    assert_int_equal(gnutls_x509_crt_set_key(c, k), 0);
    assert_int_equal(gnutls_x509_crt_sign2(c, c, k, GNUTLS_DIG_SHA256, 0), 0);
    gnutls_datum_t d;
    assert_int_equal(gnutls_x509_crt_export2(c, GNUTLS_X509_FMT_PEM, &d), 0);
    write_datum(p->cert, &d);
    gnutls_free(d.data);
    assert_int_equal(gnutls_x509_crt_export2(c, GNUTLS_X509_FMT_DER, &d), 0);
    assert_true(d.size <= sizeof p->der);
    memcpy(p->der, d.data, d.size);
    p->der_len = d.size;
    gnutls_free(d.data);
    assert_int_equal(gnutls_x509_privkey_export2(k, GNUTLS_X509_FMT_PEM, &d), 0);
    write_datum(p->key, &d);
    gnutls_free(d.data);
    gnutls_x509_crt_deinit(c);
    gnutls_x509_privkey_deinit(k);
}

static void write_text(const char *path, const char *text) {
    gnutls_datum_t d = {(unsigned char *)text, (unsigned int)strlen(text)};
    write_datum(path, &d);
}

static int setup(void **state) {
    (void)state;
    if (mkdtemp(dir) == NULL) {
        return -1;
    }
    make_pair(&A, "a");
    make_pair(&B, "b");
    char p[600];
    (void)snprintf(p, sizeof p, "%s/garbage.pem", dir);
    write_text(p, "-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n");
    return 0;
}

static int teardown(void **state) {
    (void)state;
    const char *names[] = {"a.crt", "a.key", "b.crt", "b.key", "garbage.pem"};
    char p[600];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        (void)snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        (void)unlink(p);
    }
    (void)rmdir(dir);
    return 0;
}

/* Selects on behalf of a connection and says whether it got pair p. */
static bool selects(tg_tls_t *t, tg_tls_gen_t **held, const pair_t *p) {
    gnutls_pcert_st *pc = NULL;
    unsigned int n = 0;
    gnutls_privkey_t key = NULL;
    assert_int_equal(tg_tls_select(t, held, &pc, &n, &key), 0);
    assert_non_null(*held);
    assert_int_equal(n, 1);
    assert_non_null(key);
    return pc[0].cert.size == p->der_len && memcmp(pc[0].cert.data, p->der, p->der_len) == 0;
}

static void test_create_checks_the_pair(void **state) {
    (void)state;
    unsigned live = tg_tls_live_generations();
    tg_tls_t *t = NULL;
    tg_diag_t d = {{0}};
    assert_int_equal(tg_tls_create(&t, A.cert, B.key, &d), TG_ERR_CONFIG);
    assert_null(t);
    assert_non_null(strstr(d.msg, "does not match"));
    char garbage[600];
    (void)snprintf(garbage, sizeof garbage, "%s/garbage.pem", dir);
    assert_int_equal(tg_tls_create(&t, garbage, A.key, &d), TG_ERR_CONFIG);
    assert_int_equal(tg_tls_create(&t, A.cert, garbage, &d), TG_ERR_KEY_FORMAT);
    assert_int_equal(tg_tls_create(&t, A.cert, "/nonexistent/tls.key", &d), TG_ERR_NOT_FOUND);
    assert_non_null(strstr(d.msg, "TLS key /nonexistent/tls.key"));
    assert_int_equal(tg_tls_create(&t, A.cert, "", &d), TG_ERR_CONFIG);
    assert_int_equal(tg_tls_live_generations(), live); /* nothing left behind by a failure */
    assert_int_equal(tg_tls_create(&t, A.cert, A.key, &d), TG_OK);
    tg_tls_gen_t *held = NULL;
    assert_true(selects(t, &held, &A));
    tg_tls_unhold(&held);
    assert_null(held);
    tg_tls_destroy(t);
    assert_int_equal(tg_tls_live_generations(), live);
    gnutls_pcert_st *pc = NULL;
    unsigned int n = 0;
    gnutls_privkey_t key = NULL;
    assert_int_equal(tg_tls_select(NULL, &held, &pc, &n, &key), -1); /* no store: no handshake */
}

static void test_failed_reload_keeps_the_pair(void **state) {
    (void)state;
    tg_tls_t *t = NULL;
    tg_diag_t d = {{0}};
    assert_int_equal(tg_tls_create(&t, A.cert, A.key, &d), TG_OK);
    char garbage[600];
    (void)snprintf(garbage, sizeof garbage, "%s/garbage.pem", dir);
    assert_int_equal(tg_tls_reload(t, garbage, A.key, &d), TG_ERR_CONFIG);
    assert_int_equal(tg_tls_reload(t, A.cert, B.key, &d), TG_ERR_CONFIG);
    assert_int_equal(tg_tls_reload(t, B.cert, "/nonexistent/b.key", &d), TG_ERR_NOT_FOUND);
    tg_tls_gen_t *held = NULL;
    assert_true(selects(t, &held, &A));
    tg_tls_unhold(&held);
    tg_tls_destroy(t);
}

/* The lifetime rule of tls.h: a retired pair lives while a connection holds it, and no
 * longer; a pair nobody holds is freed by the reload that retires it. */
static void test_retired_pair_lives_while_held(void **state) {
    (void)state;
    unsigned live = tg_tls_live_generations();
    tg_tls_t *t = NULL;
    tg_diag_t d = {{0}};
    assert_int_equal(tg_tls_create(&t, A.cert, A.key, &d), TG_OK);
    tg_tls_gen_t *old_conn = NULL, *new_conn = NULL;
    assert_true(selects(t, &old_conn, &A));
    assert_int_equal(tg_tls_reload(t, B.cert, B.key, &d), TG_OK);
    assert_int_equal(tg_tls_live_generations(), live + 2); /* A is held by old_conn */
    assert_true(selects(t, &new_conn, &B));
    tg_tls_unhold(&old_conn); /* the old connection closes: A goes */
    assert_int_equal(tg_tls_live_generations(), live + 1);
    assert_int_equal(tg_tls_reload(t, A.cert, A.key, &d), TG_OK);
    assert_int_equal(tg_tls_live_generations(), live + 2); /* B is held by new_conn */
    /* A second handshake on a connection replaces what it held. */
    assert_true(selects(t, &new_conn, &A));
    assert_int_equal(tg_tls_live_generations(), live + 1);
    assert_int_equal(tg_tls_reload(t, B.cert, B.key, &d), TG_OK);
    tg_tls_destroy(t); /* a connection may outlive the store's own reference */
    assert_int_equal(tg_tls_live_generations(), live + 1);
    tg_tls_unhold(&new_conn);
    assert_int_equal(tg_tls_live_generations(), live);
    tg_tls_unhold(&new_conn); /* NULL-safe */
}

typedef struct {
    tg_tls_t *t;
    atomic_bool stop;
    atomic_uint selected;
} race_t;

static void *handshakes(void *arg) {
    race_t *r = arg;
    tg_tls_gen_t *held[4] = {NULL, NULL, NULL, NULL};
    unsigned i = 0;
    while (!atomic_load(&r->stop) || i < 64) {
        gnutls_pcert_st *pc = NULL;
        unsigned int n = 0;
        gnutls_privkey_t key = NULL;
        tg_tls_gen_t **h = &held[i % 4];
        tg_tls_unhold(h); /* the connection that had this slot closed */
        if (tg_tls_select(r->t, h, &pc, &n, &key) != 0) {
            break;
        }
        /* read what a handshake reads: under ASan a freed pair is a report */
        volatile unsigned char first = pc[0].cert.data[0];
        (void)first;
        atomic_fetch_add(&r->selected, 1);
        i++;
    }
    for (unsigned j = 0; j < 4; j++) {
        tg_tls_unhold(&held[j]);
    }
    return NULL;
}

static void test_reloads_race_handshakes(void **state) {
    (void)state;
    unsigned live = tg_tls_live_generations();
    race_t r = {.t = NULL};
    atomic_init(&r.stop, false);
    atomic_init(&r.selected, 0);
    tg_diag_t d = {{0}};
    assert_int_equal(tg_tls_create(&r.t, A.cert, A.key, &d), TG_OK);
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        assert_int_equal(pthread_create(&th[i], NULL, handshakes, &r), 0);
    }
    for (int i = 0; i < 40; i++) {
        const pair_t *p = i % 2 ? &A : &B;
        assert_int_equal(tg_tls_reload(r.t, p->cert, p->key, &d), TG_OK);
    }
    atomic_store(&r.stop, true);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
    }
    assert_true(atomic_load(&r.selected) > 0);
    assert_int_equal(tg_tls_live_generations(), live + 1); /* only the current pair */
    tg_tls_destroy(r.t);
    assert_int_equal(tg_tls_live_generations(), live);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_checks_the_pair),
        cmocka_unit_test(test_failed_reload_keeps_the_pair),
        cmocka_unit_test(test_retired_pair_lives_while_held),
        cmocka_unit_test(test_reloads_race_handshakes),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
