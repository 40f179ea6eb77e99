/* test_jwt.c — JWT and JWKS verification (include/trigguard/jwt.h): keys made here with
 * OpenSSL, key sets written from them, tokens signed here, every check refused by name. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trigguard/jwt.h"

#define NOW INT64_C(1800000000)
#define LEEWAY 60
#define ISS "https://token.actions.githubusercontent.com"
#define AUD "trigguard"
#define TEXT_MAX 300000

static const char *const AUDS[] = {"other", AUD};
static const tg_jwt_expect_t EXPECT = {ISS, AUDS, 2, NOW, LEEWAY};

/* The keys every test shares (RSA keygen is slow), their JWK objects and one set of all. */
static EVP_PKEY *rsa, *ec, *ed, *rsa1024;
static char *jwk_rsa, *jwk_ec, *jwk_ed;
static tg_jwks_t *all;

/* ---- helpers: text, base64url, JWKs, signing ---- */

static char *fmt(const char *f, ...) TG_PRINTF(1, 2);
static char *fmt(const char *f, ...) {
    char *s = malloc(TEXT_MAX);
    assert_non_null(s);
    va_list ap;
    va_start(ap, f);
    int n = vsnprintf(s, TEXT_MAX, f, ap);
    va_end(ap);
    assert_true(n >= 0 && n < TEXT_MAX);
    return s;
}

static char *b64(const void *d, size_t n) {
    size_t cap = sodium_base64_ENCODED_LEN(n, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
    char *s = malloc(cap);
    assert_non_null(s);
    sodium_bin2base64(s, cap, d, n, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
    return s;
}

static char *b64_bn(EVP_PKEY *k, const char *param, int pad) {
    BIGNUM *bn = NULL;
    uint8_t buf[1100];
    assert_int_equal(EVP_PKEY_get_bn_param(k, param, &bn), 1);
    int n = pad > 0 ? BN_bn2binpad(bn, buf, pad) : BN_bn2bin(bn, buf);
    assert_true(n > 0);
    BN_free(bn);
    return b64(buf, (size_t)n);
}

/* The key's public JWK object with kid (none when NULL) and `extra` members appended. */
static char *jwk(EVP_PKEY *k, const char *kid, const char *extra) {
    char kidm[300] = "";
    if (kid != NULL) {
        (void)snprintf(kidm, sizeof kidm, "\"kid\":\"%s\",", kid);
    }
    char *a, *b, *s;
    if (EVP_PKEY_is_a(k, "RSA")) {
        a = b64_bn(k, OSSL_PKEY_PARAM_RSA_N, 0);
        b = b64_bn(k, OSSL_PKEY_PARAM_RSA_E, 0);
        s = fmt("{%s\"kty\":\"RSA\",\"n\":\"%s\",\"e\":\"%s\"%s}", kidm, a, b, extra);
    } else if (EVP_PKEY_is_a(k, "EC")) {
        a = b64_bn(k, OSSL_PKEY_PARAM_EC_PUB_X, 32);
        b = b64_bn(k, OSSL_PKEY_PARAM_EC_PUB_Y, 32);
        s = fmt("{%s\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":\"%s\",\"y\":\"%s\"%s}", kidm, a, b,
                extra);
    } else {
        uint8_t x[32];
        size_t n = sizeof x;
        assert_int_equal(EVP_PKEY_get_raw_public_key(k, x, &n), 1);
        a = b64(x, n);
        b = NULL;
        s = fmt("{%s\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"%s\"%s}", kidm, a, extra);
    }
    free(a);
    free(b);
    return s;
}

/* {"keys":[objs...]} from a NULL-terminated list of JWK object texts. */
static char *set_of(const char *first, ...) {
    char *s = malloc(TEXT_MAX);
    assert_non_null(s);
    size_t n = (size_t)snprintf(s, TEXT_MAX, "{\"keys\":[");
    va_list ap;
    va_start(ap, first);
    for (const char *o = first; o != NULL; o = va_arg(ap, const char *)) {
        assert_true(n + strlen(o) + 4 < TEXT_MAX);
        n += (size_t)snprintf(s + n, TEXT_MAX - n, "%s%s", o == first ? "" : ",", o);
    }
    va_end(ap);
    (void)snprintf(s + n, TEXT_MAX - n, "]}");
    return s;
}

static tg_err_t parse_set(tg_jwks_t **out, const char *text, size_t *skipped, tg_diag_t *d) {
    return tg_jwks_parse(out, text, strlen(text), skipped, d);
}

static tg_jwks_t *must_set(const char *text) {
    tg_jwks_t *k = NULL;
    tg_diag_t d = {{0}};
    tg_err_t rc = parse_set(&k, text, NULL, &d);
    if (rc != TG_OK) {
        fail_msg("jwks refused: %s", d.msg);
    }
    return k;
}

/* How a token's signature is made. */
enum sig_mode { SIG_GOOD, SIG_DER, SIG_EMPTY, SIG_SHORT, SIG_LONG };

static size_t sign(uint8_t *sig, size_t cap, EVP_PKEY *k, const char *in, enum sig_mode mode) {
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    const char *md = EVP_PKEY_is_a(k, "ED25519") ? NULL : "SHA256";
    size_t n = cap;
    assert_non_null(ctx);
    assert_int_equal(EVP_DigestSignInit_ex(ctx, NULL, md, NULL, NULL, k, NULL), 1);
    assert_int_equal(EVP_DigestSign(ctx, sig, &n, (const uint8_t *)in, strlen(in)), 1);
    EVP_MD_CTX_free(ctx);
    if (EVP_PKEY_is_a(k, "EC") && mode != SIG_DER) { /* DER → JWS r || s */
        const uint8_t *p = sig;
        ECDSA_SIG *es = d2i_ECDSA_SIG(NULL, &p, (long)n);
        assert_non_null(es);
        uint8_t raw[64];
        assert_int_equal(BN_bn2binpad(ECDSA_SIG_get0_r(es), raw, 32), 32);
        assert_int_equal(BN_bn2binpad(ECDSA_SIG_get0_s(es), raw + 32, 32), 32);
        ECDSA_SIG_free(es);
        memcpy(sig, raw, 64);
        n = 64;
    }
    return n;
}

/* header.payload.signature from JSON texts, signed with k as mode says. */
static char *token(const char *header, const char *claims, EVP_PKEY *k, enum sig_mode mode) {
    char *h = b64(header, strlen(header)), *p = b64(claims, strlen(claims));
    char *in = fmt("%s.%s", h, p);
    uint8_t sig[1100];
    size_t n = 0;
    if (mode != SIG_EMPTY) {
        n = sign(sig, sizeof sig, k, in, mode);
        if (mode == SIG_SHORT) {
            n--;
        } else if (mode == SIG_LONG) {
            sig[n++] = 0;
        }
    }
    char *s = b64(sig, n);
    char *t = fmt("%s.%s", in, s);
    free(h);
    free(p);
    free(in);
    free(s);
    return t;
}

static char *claims_exp(int64_t exp) {
    return fmt("{\"iss\":\"" ISS "\",\"aud\":\"" AUD "\",\"exp\":%lld,\"sub\":\"repo:o/r\"}",
               (long long)exp);
}

#define CLAIMS_OK                                                                                  \
    "{\"iss\":\"" ISS "\",\"aud\":\"" AUD "\",\"exp\":1800000600,\"iat\":1799999990,"              \
    "\"nbf\":1799999990,\"sub\":\"repo:o/r:ref:refs/heads/main\"}"
#define H_RS "{\"alg\":\"RS256\",\"typ\":\"JWT\",\"kid\":\"r1\"}"
#define H_ES "{\"alg\":\"ES256\",\"kid\":\"e1\"}"
#define H_ED "{\"alg\":\"EdDSA\",\"kid\":\"d1\"}"

/* Parses and verifies tok against keys (expect e, EXPECT when NULL); checks that claims are
 * visible exactly when verification succeeded. */
static tg_err_t run(const char *tok, const tg_jwks_t *keys, const tg_jwt_expect_t *e,
                    tg_jwt_fail_t *why) {
    tg_jwt_t *j = (tg_jwt_t *)1;
    tg_err_t rc = tg_jwt_parse(&j, tok, strlen(tok), why);
    if (rc) {
        assert_null(j);
        return rc;
    }
    assert_null(tg_jwt_claims(j));
    assert_int_equal(tg_jwt_alg(j), TG_JWT_ALG_NONE);
    rc = tg_jwt_verify(j, keys, e != NULL ? e : &EXPECT, why);
    if (rc == TG_OK) {
        assert_non_null(tg_jwt_claims(j));
        assert_int_equal(*why, TG_JWT_FAIL_NONE);
    } else {
        assert_null(tg_jwt_claims(j));
        assert_int_equal(tg_jwt_alg(j), TG_JWT_ALG_NONE);
    }
    tg_jwt_free(j);
    return rc;
}

static void expect_fail(const char *tok, const tg_jwks_t *keys, const tg_jwt_expect_t *e,
                        tg_err_t want_rc, tg_jwt_fail_t want_why) {
    tg_jwt_fail_t why = TG_JWT_FAIL__COUNT;
    tg_err_t rc = run(tok, keys, e, &why);
    if (rc != want_rc || why != want_why) {
        fail_msg("got %s/%s, want %s/%s for %.80s", tg_err_name(rc), tg_jwt_fail_name(why),
                 tg_err_name(want_rc), tg_jwt_fail_name(want_why), tok);
    }
}

static void expect_ok(const char *tok, const tg_jwks_t *keys, const tg_jwt_expect_t *e) {
    expect_fail(tok, keys, e, TG_OK, TG_JWT_FAIL_NONE);
}

/* Refused at parse with `want` whatever the key set. */
static void expect_parse_fail(const char *header, const char *claims, EVP_PKEY *k,
                              tg_jwt_fail_t want) {
    char *t = token(header, claims, k, SIG_GOOD);
    expect_fail(t, all, NULL, TG_ERR_UNAUTHORIZED, want);
    free(t);
}

/* ---- fixtures ---- */

static int setup(void **state) {
    (void)state;
    if (sodium_init() < 0) {
        return -1;
    }
    rsa = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048);
    rsa1024 = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)1024);
    ec = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    ed = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
    if (rsa == NULL || rsa1024 == NULL || ec == NULL || ed == NULL) {
        return -1;
    }
    jwk_rsa = jwk(rsa, "r1", ",\"use\":\"sig\",\"alg\":\"RS256\"");
    jwk_ec = jwk(ec, "e1", ",\"alg\":\"ES256\"");
    jwk_ed = jwk(ed, "d1", ",\"key_ops\":[\"verify\"]");
    char *s = set_of(jwk_rsa, jwk_ec, jwk_ed, NULL);
    tg_err_t rc = tg_jwks_parse(&all, s, strlen(s), NULL, NULL);
    free(s);
    return rc == TG_OK ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    tg_jwks_free(all);
    free(jwk_rsa);
    free(jwk_ec);
    free(jwk_ed);
    EVP_PKEY_free(rsa);
    EVP_PKEY_free(rsa1024);
    EVP_PKEY_free(ec);
    EVP_PKEY_free(ed);
    return 0;
}

/* ---- tokens ---- */

static void test_valid_each_alg(void **state) {
    (void)state;
    struct {
        const char *h;
        EVP_PKEY **k;
        tg_jwt_alg_t alg;
        const char *kid;
    } cases[] = {{H_RS, &rsa, TG_JWT_ALG_RS256, "r1"},
                 {H_ES, &ec, TG_JWT_ALG_ES256, "e1"},
                 {H_ED, &ed, TG_JWT_ALG_EDDSA, "d1"}};
    assert_int_equal(tg_jwks_count(all), 3);
    for (size_t i = 0; i < 3; i++) {
        char *t = token(cases[i].h, CLAIMS_OK, *cases[i].k, SIG_GOOD);
        tg_jwt_t *j = NULL;
        tg_jwt_fail_t why = TG_JWT_FAIL__COUNT;
        assert_int_equal(tg_jwt_parse(&j, t, strlen(t), &why), TG_OK);
        assert_int_equal(why, TG_JWT_FAIL_NONE);
        assert_string_equal(tg_jwt_kid(j), cases[i].kid);
        assert_string_equal(tg_jwt_unverified_issuer(j), ISS);
        assert_null(tg_jwt_claims(j)); /* nothing before verify */
        assert_int_equal(tg_jwt_verify(j, all, &EXPECT, &why), TG_OK);
        assert_int_equal(tg_jwt_alg(j), cases[i].alg);
        const json_t *c = tg_jwt_claims(j);
        assert_non_null(c);
        assert_string_equal(json_string_value(json_object_get(c, "sub")),
                            "repo:o/r:ref:refs/heads/main");
        /* a failed second verification takes the verdict back */
        tg_jwt_expect_t e = EXPECT;
        e.issuer = "https://elsewhere";
        assert_int_equal(tg_jwt_verify(j, all, &e, &why), TG_ERR_UNAUTHORIZED);
        assert_null(tg_jwt_claims(j));
        assert_int_equal(tg_jwt_alg(j), TG_JWT_ALG_NONE);
        tg_jwt_free(j);
        free(t);
    }
}

static void test_expiry_edges(void **state) {
    (void)state;
    /* expired when now >= exp + leeway */
    char *at_edge = claims_exp(NOW - LEEWAY), *inside = claims_exp(NOW - LEEWAY + 1);
    char *t1 = token(H_ED, at_edge, ed, SIG_GOOD), *t2 = token(H_ED, inside, ed, SIG_GOOD);
    expect_fail(t1, all, NULL, TG_ERR_UNAUTHORIZED, TG_JWT_FAIL_EXPIRED);
    expect_ok(t2, all, NULL);
    tg_jwt_expect_t e = EXPECT;
    e.leeway_s = 0;
    expect_fail(t2, all, &e, TG_ERR_UNAUTHORIZED, TG_JWT_FAIL_EXPIRED);
    free(at_edge);
    free(inside);
    free(t1);
    free(t2);

    /* long expired; a fraction of a second never extends a token */
    const char *expired[] = {
        "{\"iss\":\"" ISS "\",\"aud\":\"" AUD "\",\"exp\":1700000000}",
        "{\"iss\":\"" ISS "\",\"aud\":\"" AUD "\",\"exp\":1799999940.9}",
        "{\"iss\":\"" ISS "\",\"aud\":\"" AUD "\",\"exp\":-1e300}",
        "{\"iss\":\"" ISS "\",\"aud\":\"" AUD "\",\"exp\":-9223372036854775808}",
        "{\"iss\":\"" ISS "\",\"aud\":\"" AUD "\"}", /* exp is required */
    };
    for (size_t i = 0; i < sizeof expired / sizeof expired[0]; i++) {
        char *t = token(H_ES, expired[i], ec, SIG_GOOD);
        expect_fail(t, all, NULL, TG_ERR_UNAUTHORIZED, TG_JWT_FAIL_EXPIRED);
        free(t);
    }
    /* huge values saturate instead of wrapping */
    char *t = token(H_ES, "{\"iss\":\"" ISS "\",\"aud\":\"" AUD "\",\"exp\":1e300,\"nbf\":-1e300}",
                    ec, SIG_GOOD);
    expect_ok(t, all, NULL);
    e = EXPECT;
    e.now_s = INT64_MAX;
    expect_ok(t, all, &e);
    e.now_s = INT64_MIN;
    expect_ok(t, all, &e);
    free(t);
    /* exp of the wrong type is a claims error, not a missing exp */
    expect_parse_fail(H_ES, "{\"iss\":\"" ISS "\",\"aud\":\"" AUD "\",\"exp\":\"1900000000\"}", ec,
                      TG_JWT_FAIL_CLAIMS);
}

static void test_not_yet_valid(void **state) {
    (void)state;
    struct {
        const char *claims;
        bool ok;
    } cases[] = {
        {"{\"iss\":\"" ISS "\",\"aud\":\"" AUD "\",\"exp\":1800000600,\"nbf\":1800000061}", false},
        {"{\"iss\":\"" ISS "\",\"aud\":\"" AUD "\",\"exp\":1800000600,\"nbf\":1800000060}", true},
        {"{\"iss\":\"" ISS "\",\"aud\":\"" AUD "\",\"exp\":1800000600,\"nbf\":1800000060.5}",
         false},
        {"{\"iss\":\"" ISS "\",\"aud\":\"" AUD "\",\"exp\":1800000600,\"iat\":1800000061}", false},
        {"{\"iss\":\"" ISS "\",\"aud\":\"" AUD "\",\"exp\":1800000600,\"iat\":1800000060}", true},
        {"{\"iss\":\"" ISS "\",\"aud\":\"" AUD "\",\"exp\":1800000600,\"iat\":1e300}", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *t = token(H_RS, cases[i].claims, rsa, SIG_GOOD);
        if (cases[i].ok) {
            expect_ok(t, all, NULL);
        } else {
            expect_fail(t, all, NULL, TG_ERR_UNAUTHORIZED, TG_JWT_FAIL_NOT_YET_VALID);
        }
        free(t);
    }
    expect_parse_fail(H_RS, "{\"iss\":\"" ISS "\",\"exp\":1800000600,\"nbf\":null}", rsa,
                      TG_JWT_FAIL_CLAIMS);
}

static void test_audience(void **state) {
    (void)state;
    struct {
        const char *aud;
        tg_jwt_fail_t why;
    } cases[] = {
        {",\"aud\":\"trigguard\"", TG_JWT_FAIL_NONE},
        {",\"aud\":\"other\"", TG_JWT_FAIL_NONE}, /* the second expected audience */
        {",\"aud\":\"nobody\"", TG_JWT_FAIL_AUDIENCE},
        {",\"aud\":\"Trigguard\"", TG_JWT_FAIL_AUDIENCE},
        {",\"aud\":[\"nobody\",\"else\"]", TG_JWT_FAIL_AUDIENCE},
        {",\"aud\":[\"nobody\",\"trigguard\"]", TG_JWT_FAIL_NONE},
        {",\"aud\":[\"trigguard\"]", TG_JWT_FAIL_NONE},
        {"", TG_JWT_FAIL_AUDIENCE},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *c = fmt("{\"iss\":\"" ISS "\",\"exp\":1800000600%s}", cases[i].aud);
        char *t = token(H_ED, c, ed, SIG_GOOD);
        expect_fail(t, all, NULL, cases[i].why == TG_JWT_FAIL_NONE ? TG_OK : TG_ERR_UNAUTHORIZED,
                    cases[i].why);
        free(c);
        free(t);
    }
    /* only the first expected audience: "other" no longer fits */
    tg_jwt_expect_t e = EXPECT;
    e.audience = AUDS + 1;
    e.n_audience = 1;
    char *t =
        token(H_ED, "{\"iss\":\"" ISS "\",\"exp\":1800000600,\"aud\":\"other\"}", ed, SIG_GOOD);
    expect_fail(t, all, &e, TG_ERR_UNAUTHORIZED, TG_JWT_FAIL_AUDIENCE);
    free(t);
    const char *bad[] = {",\"aud\":[]", ",\"aud\":[\"trigguard\",1]", ",\"aud\":7",
                         ",\"aud\":{\"a\":\"trigguard\"}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *c = fmt("{\"iss\":\"" ISS "\",\"exp\":1800000600%s}", bad[i]);
        expect_parse_fail(H_ED, c, ed, TG_JWT_FAIL_CLAIMS);
        free(c);
    }
}

static void test_issuer(void **state) {
    (void)state;
    const char *claims[] = {
        "{\"iss\":\"https://token.actions.githubusercontent.com/\",\"aud\":\"" AUD
        "\",\"exp\":1800000600}",
        "{\"iss\":\"https://evil.example\",\"aud\":\"" AUD "\",\"exp\":1800000600}",
        "{\"aud\":\"" AUD "\",\"exp\":1800000600}",
    };
    for (size_t i = 0; i < sizeof claims / sizeof claims[0]; i++) {
        char *t = token(H_RS, claims[i], rsa, SIG_GOOD);
        expect_fail(t, all, NULL, TG_ERR_UNAUTHORIZED, TG_JWT_FAIL_ISSUER);
        free(t);
    }
    expect_parse_fail(H_RS, "{\"iss\":[\"" ISS "\"],\"aud\":\"" AUD "\",\"exp\":1800000600}", rsa,
                      TG_JWT_FAIL_CLAIMS);
}

static void test_kid(void **state) {
    (void)state;
    char *t = token("{\"alg\":\"EdDSA\",\"kid\":\"d2\"}", CLAIMS_OK, ed, SIG_GOOD);
    expect_fail(t, all, NULL, TG_ERR_NOT_FOUND, TG_JWT_FAIL_KID_UNKNOWN);
    free(t);
    assert_true(tg_jwks_has_kid(all, "d1", 2));
    assert_false(tg_jwks_has_kid(all, "d2", 2));
    assert_false(tg_jwks_has_kid(all, "d", 1));
    assert_false(tg_jwks_has_kid(NULL, "d1", 2));

    /* no kid: fine with one key, refused with two (the token may not pick) */
    char *one_s = jwk(ed, NULL, ""), *two_s = jwk(ec, NULL, "");
    char *s1 = set_of(one_s, NULL), *s2 = set_of(one_s, two_s, NULL);
    tg_jwks_t *one = must_set(s1), *two = must_set(s2);
    t = token("{\"alg\":\"EdDSA\"}", CLAIMS_OK, ed, SIG_GOOD);
    expect_ok(t, one, NULL);
    expect_fail(t, two, NULL, TG_ERR_UNAUTHORIZED, TG_JWT_FAIL_KID_UNKNOWN);
    free(t);
    /* a kid the one kid-less key does not have is unknown */
    t = token("{\"alg\":\"EdDSA\",\"kid\":\"d1\"}", CLAIMS_OK, ed, SIG_GOOD);
    expect_fail(t, one, NULL, TG_ERR_NOT_FOUND, TG_JWT_FAIL_KID_UNKNOWN);
    free(t);
    tg_jwks_free(one);
    tg_jwks_free(two);
    free(one_s);
    free(two_s);
    free(s1);
    free(s2);

    /* kid bounds: TG_JWT_KID_MAX bytes parse, one more is a header error */
    char kid[TG_JWT_KID_MAX + 2];
    memset(kid, 'k', sizeof kid);
    kid[TG_JWT_KID_MAX] = '\0';
    char *h = fmt("{\"alg\":\"EdDSA\",\"kid\":\"%s\"}", kid);
    t = token(h, CLAIMS_OK, ed, SIG_GOOD);
    expect_fail(t, all, NULL, TG_ERR_NOT_FOUND, TG_JWT_FAIL_KID_UNKNOWN);
    free(h);
    free(t);
    kid[TG_JWT_KID_MAX] = 'k';
    kid[TG_JWT_KID_MAX + 1] = '\0';
    h = fmt("{\"alg\":\"EdDSA\",\"kid\":\"%s\"}", kid);
    expect_parse_fail(h, CLAIMS_OK, ed, TG_JWT_FAIL_HEADER);
    free(h);
    expect_parse_fail("{\"alg\":\"EdDSA\",\"kid\":7}", CLAIMS_OK, ed, TG_JWT_FAIL_HEADER);
}

static void test_alg_refused(void **state) {
    (void)state;
    /* alg none with an empty signature */
    char *t = token("{\"alg\":\"none\"}", CLAIMS_OK, NULL, SIG_EMPTY);
    expect_fail(t, all, NULL, TG_ERR_UNAUTHORIZED, TG_JWT_FAIL_ALG_REFUSED);
    free(t);
    const char *algs[] = {"none",  "None",    "HS256", "RS384", "PS256",
                          "ES384", "Ed25519", "rs256", "EDDSA", ""};
    for (size_t i = 0; i < sizeof algs / sizeof algs[0]; i++) {
        char *h = fmt("{\"alg\":\"%s\",\"kid\":\"r1\"}", algs[i]);
        expect_parse_fail(h, CLAIMS_OK, rsa, TG_JWT_FAIL_ALG_REFUSED);
        free(h);
    }
    expect_parse_fail("{\"kid\":\"r1\"}", CLAIMS_OK, rsa, TG_JWT_FAIL_HEADER);
    expect_parse_fail("{\"alg\":null,\"kid\":\"r1\"}", CLAIMS_OK, rsa, TG_JWT_FAIL_HEADER);
}

/* The classic confusion: HS256 keyed with the RSA public key's bytes, as a verifier that lets
 * the token choose the algorithm would check it. */
static void test_hs256_with_public_key(void **state) {
    (void)state;
    uint8_t *der = NULL;
    int der_len = i2d_PUBKEY(rsa, &der);
    assert_true(der_len > 0);
    BIO *bio = BIO_new(BIO_s_mem());
    assert_non_null(bio);
    assert_int_equal(PEM_write_bio_PUBKEY(bio, rsa), 1);
    char *pem = NULL;
    long pem_len = BIO_get_mem_data(bio, &pem);
    assert_true(pem_len > 0);
    struct {
        const void *key;
        size_t len;
    } keys[] = {{der, (size_t)der_len}, {pem, (size_t)pem_len}};
    const char *hdr = "{\"alg\":\"HS256\",\"typ\":\"JWT\",\"kid\":\"r1\"}";
    for (size_t i = 0; i < 2; i++) {
        char *h = b64(hdr, strlen(hdr)), *p = b64(CLAIMS_OK, strlen(CLAIMS_OK));
        char *in = fmt("%s.%s", h, p);
        uint8_t mac[32];
        unsigned int mac_len = 0;
        assert_non_null(HMAC(EVP_sha256(), keys[i].key, (int)keys[i].len, (const uint8_t *)in,
                             strlen(in), mac, &mac_len));
        char *m = b64(mac, mac_len);
        char *t = fmt("%s.%s", in, m);
        expect_fail(t, all, NULL, TG_ERR_UNAUTHORIZED, TG_JWT_FAIL_ALG_REFUSED);
        free(h);
        free(p);
        free(in);
        free(m);
        free(t);
    }
    BIO_free(bio);
    OPENSSL_free(der);
}

static void test_alg_mismatch(void **state) {
    (void)state;
    /* RS256 named in the header, the kid of the EC key: whoever signed, it is refused */
    char *t = token("{\"alg\":\"RS256\",\"kid\":\"e1\"}", CLAIMS_OK, rsa, SIG_GOOD);
    expect_fail(t, all, NULL, TG_ERR_UNAUTHORIZED, TG_JWT_FAIL_ALG_MISMATCH);
    free(t);
    t = token("{\"alg\":\"ES256\",\"kid\":\"d1\"}", CLAIMS_OK, ec, SIG_GOOD);
    expect_fail(t, all, NULL, TG_ERR_UNAUTHORIZED, TG_JWT_FAIL_ALG_MISMATCH);
    free(t);
    t = token("{\"alg\":\"EdDSA\",\"kid\":\"r1\"}", CLAIMS_OK, ed, SIG_GOOD);
    expect_fail(t, all, NULL, TG_ERR_UNAUTHORIZED, TG_JWT_FAIL_ALG_MISMATCH);
    free(t);
}

static void test_signature_shapes(void **state) {
    (void)state;
    struct {
        const char *h;
        EVP_PKEY **k;
        enum sig_mode mode;
    } cases[] = {
        {H_ES, &ec, SIG_DER}, /* JWS uses raw r || s: DER must not verify */
        {H_ES, &ec, SIG_SHORT}, {H_ES, &ec, SIG_LONG},  {H_RS, &rsa, SIG_SHORT},
        {H_RS, &rsa, SIG_LONG}, {H_ED, &ed, SIG_SHORT}, {H_ED, &ed, SIG_LONG},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *t = token(cases[i].h, CLAIMS_OK, *cases[i].k, cases[i].mode);
        expect_fail(t, all, NULL, TG_ERR_UNAUTHORIZED, TG_JWT_FAIL_SIGNATURE);
        free(t);
    }
    /* an empty signature is not even the shape of a JWS */
    char *t = token(H_ED, CLAIMS_OK, ed, SIG_EMPTY);
    expect_fail(t, all, NULL, TG_ERR_UNAUTHORIZED, TG_JWT_FAIL_FORMAT);
    free(t);
}

/* Re-encodes one part of a valid token with other content (the signature stays). */
static char *swap_part(const char *tok, int part, const void *data, size_t len) {
    const char *d1 = strchr(tok, '.'), *d2 = strchr(d1 + 1, '.');
    char *enc = b64(data, len), *t;
    if (part == 0) {
        t = fmt("%s%s", enc, d1);
    } else if (part == 1) {
        t = fmt("%.*s.%s%s", (int)(d1 - tok), tok, enc, d2);
    } else {
        t = fmt("%.*s.%s", (int)(d2 - tok), tok, enc);
    }
    free(enc);
    return t;
}

static void test_tampered(void **state) {
    (void)state;
    struct {
        const char *h, *h2;
        EVP_PKEY **k;
    } cases[] = {{H_RS, "{\"alg\":\"RS256\",\"typ\":\"jwt\",\"kid\":\"r1\"}", &rsa},
                 {H_ES, "{\"kid\":\"e1\",\"alg\":\"ES256\"}", &ec},
                 {H_ED, "{\"alg\":\"EdDSA\",\"kid\":\"d1\",\"x\":1}", &ed}};
    const char *claims2 = "{\"iss\":\"" ISS "\",\"aud\":\"" AUD "\",\"exp\":1800000600,"
                          "\"iat\":1799999990,\"nbf\":1799999990,\"sub\":\"repo:o/evil\"}";
    for (size_t i = 0; i < 3; i++) {
        char *t = token(cases[i].h, CLAIMS_OK, *cases[i].k, SIG_GOOD);
        expect_ok(t, all, NULL);
        char *a = swap_part(t, 0, cases[i].h2, strlen(cases[i].h2));
        char *b = swap_part(t, 1, claims2, strlen(claims2));
        /* flip one bit of the signature */
        const char *s = strrchr(t, '.') + 1;
        uint8_t sig[1100];
        size_t n = 0;
        assert_int_equal(sodium_base642bin(sig, sizeof sig, s, strlen(s), NULL, &n, NULL,
                                           sodium_base64_VARIANT_URLSAFE_NO_PADDING),
                         0);
        sig[n / 2] ^= 0x10;
        char *c = swap_part(t, 2, sig, n);
        expect_fail(a, all, NULL, TG_ERR_UNAUTHORIZED, TG_JWT_FAIL_SIGNATURE);
        expect_fail(b, all, NULL, TG_ERR_UNAUTHORIZED, TG_JWT_FAIL_SIGNATURE);
        expect_fail(c, all, NULL, TG_ERR_UNAUTHORIZED, TG_JWT_FAIL_SIGNATURE);
        free(a);
        free(b);
        free(c);
        free(t);
    }
}

static void test_token_size_limit(void **state) {
    (void)state;
    /* Grow a filler claim until the whole token is TG_JWT_MAX bytes (verifies) and
     * TG_JWT_MAX + 1 (refused as format); two header spellings reach both lengths. */
    const char *headers[] = {H_ED, "{\"alg\":\"EdDSA\", \"kid\":\"d1\"}"};
    bool at_max = false, over = false;
    char *fill = malloc(TG_JWT_MAX);
    assert_non_null(fill);
    for (size_t hi = 0; hi < 2; hi++) {
        for (size_t pad = 5800; pad < 6100; pad++) {
            memset(fill, 'f', pad);
            fill[pad] = '\0';
            char *c = fmt("{\"iss\":\"" ISS "\",\"aud\":\"" AUD "\",\"exp\":1800000600,"
                          "\"f\":\"%s\"}",
                          fill);
            char *t = token(headers[hi], c, ed, SIG_GOOD);
            size_t len = strlen(t);
            if (len == TG_JWT_MAX) {
                expect_ok(t, all, NULL);
                at_max = true;
            } else if (len == TG_JWT_MAX + 1) {
                expect_fail(t, all, NULL, TG_ERR_UNAUTHORIZED, TG_JWT_FAIL_FORMAT);
                over = true;
            }
            free(c);
            free(t);
        }
    }
    free(fill);
    assert_true(at_max);
    assert_true(over);
}

static void test_claims_limits(void **state) {
    (void)state;
    /* iss, aud, exp and fillers: TG_JWT_CLAIMS_MAX members verify, one more does not parse */
    for (int extra = 0; extra < 2; extra++) {
        char *c = malloc(TEXT_MAX);
        assert_non_null(c);
        size_t n = (size_t)snprintf(c, TEXT_MAX,
                                    "{\"iss\":\"" ISS "\",\"aud\":\"" AUD "\",\"exp\":1800000600");
        for (int i = 3; i < TG_JWT_CLAIMS_MAX + extra; i++) {
            n += (size_t)snprintf(c + n, TEXT_MAX - n, ",\"c%d\":%d", i, i);
        }
        (void)snprintf(c + n, TEXT_MAX - n, "}");
        char *t = token(H_RS, c, rsa, SIG_GOOD);
        if (extra == 0) {
            expect_ok(t, all, NULL);
        } else {
            expect_fail(t, all, NULL, TG_ERR_UNAUTHORIZED, TG_JWT_FAIL_CLAIMS);
        }
        free(c);
        free(t);
    }
    /* the claims object is depth 1: TG_JWT_DEPTH_MAX (4) verifies, 5 does not parse */
    char *t = token(H_RS,
                    "{\"iss\":\"" ISS "\",\"aud\":\"" AUD "\",\"exp\":1800000600,"
                    "\"a\":{\"b\":[{}]}}",
                    rsa, SIG_GOOD);
    expect_ok(t, all, NULL);
    free(t);
    expect_parse_fail(H_RS,
                      "{\"iss\":\"" ISS "\",\"aud\":\"" AUD "\",\"exp\":1800000600,"
                      "\"a\":{\"b\":[{\"c\":[]}]}}",
                      rsa, TG_JWT_FAIL_CLAIMS);
    /* claims must be an object of strict JSON */
    const char *bad[] = {"[1]",
                         "\"x\"",
                         "",
                         "{\"iss\":\"" ISS "\",\"iss\":\"" ISS "\",\"exp\":1800000600}",
                         "{\"iss\":\"\\ud800\",\"exp\":1800000600}",
                         "{\"iss\":\"\xc3\x28\",\"exp\":1800000600}",
                         "{\"exp\":1800000600,}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        expect_parse_fail(H_RS, bad[i], rsa, TG_JWT_FAIL_CLAIMS);
    }
}

static void test_header_rules(void **state) {
    (void)state;
    struct {
        const char *h;
        tg_jwt_fail_t why;
    } cases[] = {
        {"{\"alg\":\"EdDSA\",\"kid\":\"d1\",\"kid\":\"d1\"}", TG_JWT_FAIL_HEADER},
        {"{\"alg\":\"EdDSA\",\"kid\":\"d1\",\"crit\":[\"exp\"],\"exp\":1}", TG_JWT_FAIL_HEADER},
        {"{\"alg\":\"EdDSA\",\"kid\":\"d1\",\"crit\":[]}", TG_JWT_FAIL_HEADER},
        {"{\"alg\":\"EdDSA\",\"kid\":\"d1\",\"typ\":\"at+jwt\"}", TG_JWT_FAIL_HEADER},
        {"{\"alg\":\"EdDSA\",\"kid\":\"d1\",\"typ\":1}", TG_JWT_FAIL_HEADER},
        {"{\"alg\":\"EdDSA\",\"kid\":\"d1\",\"jku\":\"https://evil/jwks\"}", TG_JWT_FAIL_HEADER},
        {"{\"alg\":\"EdDSA\",\"kid\":\"d1\",\"x5u\":\"https://evil/c\"}", TG_JWT_FAIL_HEADER},
        {"{\"alg\":\"EdDSA\",\"kid\":\"d1\",\"x5c\":[\"MII\"]}", TG_JWT_FAIL_HEADER},
        {"{\"alg\":\"EdDSA\",\"kid\":\"d1\",\"jwk\":{\"kty\":\"OKP\"}}", TG_JWT_FAIL_HEADER},
        {"[\"EdDSA\"]", TG_JWT_FAIL_HEADER},
        {"{\"alg\":\"EdDSA\",\"kid\":\"d1\"", TG_JWT_FAIL_HEADER},
        {"{\"alg\":\"EdDSA\",\"kid\":\"d1\",\"x\":{\"a\":{\"b\":{\"c\":{}}}}}", TG_JWT_FAIL_HEADER},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        expect_parse_fail(cases[i].h, CLAIMS_OK, ed, cases[i].why);
    }
    /* typ is compared without case; other members (x5t, cty) are only ignored */
    const char *fine[] = {"{\"alg\":\"EdDSA\",\"kid\":\"d1\",\"typ\":\"jwt\"}",
                          "{\"alg\":\"EdDSA\",\"kid\":\"d1\",\"x5t\":\"abc\",\"cty\":\"x\"}"};
    for (size_t i = 0; i < 2; i++) {
        char *t = token(fine[i], CLAIMS_OK, ed, SIG_GOOD);
        expect_ok(t, all, NULL);
        free(t);
    }
    /* a header over TG_JWT_HEADER_MAX decoded bytes is refused before it is parsed */
    char *pad = malloc(TG_JWT_HEADER_MAX);
    assert_non_null(pad);
    const char *pre = "{\"alg\":\"EdDSA\",\"kid\":\"d1\",\"p\":\"", *post = "\"}";
    size_t fill = TG_JWT_HEADER_MAX - strlen(pre) - strlen(post);
    for (size_t extra = 0; extra < 2; extra++) {
        memset(pad, 'p', fill + extra);
        pad[fill + extra] = '\0';
        char *h = fmt("%s%s%s", pre, pad, post);
        assert_int_equal(strlen(h), TG_JWT_HEADER_MAX + extra);
        char *t = token(h, CLAIMS_OK, ed, SIG_GOOD);
        if (extra == 0) {
            expect_ok(t, all, NULL);
        } else {
            expect_fail(t, all, NULL, TG_ERR_UNAUTHORIZED, TG_JWT_FAIL_FORMAT);
        }
        free(h);
        free(t);
    }
    free(pad);
}

static void test_base64url_strict(void **state) {
    (void)state;
    char *t = token(H_ED, CLAIMS_OK, ed, SIG_GOOD);
    expect_ok(t, all, NULL);
    size_t len = strlen(t);
    const char *d1 = strchr(t, '.'), *d2 = strrchr(t, '.');
    size_t h_len = (size_t)(d1 - t), s_at = (size_t)(d2 - t) + 1;
    /* the Ed25519 signature is 64 bytes: 86 characters, so its last one carries 2 bits */
    assert_int_equal(len - s_at, 86);
    char *v[10];
    v[0] = fmt("%.*s=%s", (int)h_len, t, d1);   /* padding in the header */
    v[1] = fmt("%s==", t);                      /* padding on the signature */
    v[2] = fmt("%.*s+%s", (int)len - 1, t, ""); /* '+' instead of the last char */
    v[3] = fmt("%.*s/%s", (int)len - 1, t, ""); /* '/' instead of the last char */
    v[4] = fmt("%.*s %s", (int)h_len, t, d1);   /* whitespace */
    v[5] = fmt("%s.", t);                       /* four parts */
    v[6] = fmt("%.*s", (int)(d2 - t), t);       /* two parts */
    v[7] = fmt("%.*s%c", (int)len - 1, t, t[len - 1] == 'B' ? 'C' : 'B'); /* trailing bits */
    v[8] = fmt("%sAAA", t);                                               /* 4k+1 characters */
    v[9] = fmt("%.*s*%s", (int)h_len - 1, t, d1);                         /* not base64 at all */
    /* a trailing-bits change of the last character must not decode to the same bytes */
    assert_true(strchr("AQgw", t[len - 1]) != NULL);
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        expect_fail(v[i], all, NULL, TG_ERR_UNAUTHORIZED, TG_JWT_FAIL_FORMAT);
        free(v[i]);
    }
    free(t);
    tg_jwt_t *j = (tg_jwt_t *)1;
    tg_jwt_fail_t why;
    assert_int_equal(tg_jwt_parse(&j, "", 0, &why), TG_ERR_UNAUTHORIZED);
    assert_null(j);
    assert_int_equal(why, TG_JWT_FAIL_FORMAT);
    assert_int_equal(tg_jwt_parse(&j, "..", 2, &why), TG_ERR_UNAUTHORIZED);
    assert_int_equal(tg_jwt_parse(&j, NULL, 3, &why), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_jwt_parse(NULL, "a.b.c", 5, &why), TG_ERR_INVALID_ARG);
}

static void test_verify_args(void **state) {
    (void)state;
    char *t = token(H_ED, CLAIMS_OK, ed, SIG_GOOD);
    tg_jwt_t *j = NULL;
    tg_jwt_fail_t why;
    assert_int_equal(tg_jwt_parse(&j, t, strlen(t), NULL), TG_OK);
    tg_jwt_expect_t e = EXPECT;
    assert_int_equal(tg_jwt_verify(NULL, all, &e, &why), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_jwt_verify(j, NULL, &e, &why), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_jwt_verify(j, all, NULL, &why), TG_ERR_INVALID_ARG);
    e.issuer = NULL;
    assert_int_equal(tg_jwt_verify(j, all, &e, &why), TG_ERR_INVALID_ARG);
    e = EXPECT;
    e.n_audience = 0;
    assert_int_equal(tg_jwt_verify(j, all, &e, &why), TG_ERR_INVALID_ARG);
    e = EXPECT;
    e.leeway_s = 301;
    assert_int_equal(tg_jwt_verify(j, all, &e, &why), TG_ERR_INVALID_ARG);
    e.leeway_s = -1;
    assert_int_equal(tg_jwt_verify(j, all, &e, &why), TG_ERR_INVALID_ARG);
    e.leeway_s = 300;
    assert_int_equal(tg_jwt_verify(j, all, &e, NULL), TG_OK);
    assert_null(tg_jwt_claims(NULL));
    assert_null(tg_jwt_kid(NULL));
    assert_null(tg_jwt_unverified_issuer(NULL));
    assert_int_equal(tg_jwt_alg(NULL), TG_JWT_ALG_NONE);
    tg_jwt_free(j);
    tg_jwt_free(NULL);
    free(t);
}

static void test_names(void **state) {
    (void)state;
    assert_string_equal(tg_jwt_fail_name(TG_JWT_FAIL_NONE), "none");
    assert_string_equal(tg_jwt_fail_name(TG_JWT_FAIL_KID_UNKNOWN), "kid_unknown");
    assert_string_equal(tg_jwt_fail_name(TG_JWT_FAIL_NOT_YET_VALID), "not_yet_valid");
    assert_string_equal(tg_jwt_fail_name(TG_JWT_FAIL__COUNT), "?");
    for (int f = 0; f < TG_JWT_FAIL__COUNT; f++) {
        assert_non_null(tg_jwt_fail_name((tg_jwt_fail_t)f));
    }
    assert_string_equal(tg_jwt_alg_name(TG_JWT_ALG_RS256), "RS256");
    assert_string_equal(tg_jwt_alg_name(TG_JWT_ALG_ES256), "ES256");
    assert_string_equal(tg_jwt_alg_name(TG_JWT_ALG_EDDSA), "EdDSA");
    assert_string_equal(tg_jwt_alg_name(TG_JWT_ALG_NONE), "none");
}

/* ---- key sets ---- */

static void expect_set_error(const char *text, const char *diag_part) {
    tg_jwks_t *k = (tg_jwks_t *)1;
    tg_diag_t d = {{0}};
    tg_err_t rc = tg_jwks_parse(&k, text, strlen(text), NULL, &d);
    if (rc != TG_ERR_CONFIG || strstr(d.msg, diag_part) == NULL) {
        fail_msg("got %s \"%s\", want TG_ERR_CONFIG with \"%s\"", tg_err_name(rc), d.msg,
                 diag_part);
    }
    assert_null(k);
}

/* A JWK text with member `name`'s string value replaced by `value`. */
static char *with_member(const char *obj, const char *name, const char *value) {
    char key[32];
    (void)snprintf(key, sizeof key, "\"%s\":\"", name);
    const char *at = strstr(obj, key);
    assert_non_null(at);
    at += strlen(key);
    const char *end = strchr(at, '"');
    return fmt("%.*s%s%s", (int)(at - obj), obj, value, end);
}

static void test_jwks_key_errors(void **state) {
    (void)state;
    /* off-curve point: y + 1 */
    BIGNUM *y = NULL;
    uint8_t yb[32];
    assert_int_equal(EVP_PKEY_get_bn_param(ec, OSSL_PKEY_PARAM_EC_PUB_Y, &y), 1);
    assert_int_equal(BN_add_word(y, 1), 1);
    assert_int_equal(BN_bn2binpad(y, yb, 32), 32);
    BN_free(y);
    char *y64 = b64(yb, 32);
    char *off = with_member(jwk_ec, "y", y64);
    char *s = set_of(jwk_ed, off, NULL);
    expect_set_error(s, "keys[1].x: not on curve P-256");
    free(s);
    free(off);
    free(y64);

    char *weak = jwk(rsa1024, "w", "");
    s = set_of(weak, NULL);
    expect_set_error(s, "keys[0].n: modulus of 1024 bits");
    free(s);
    free(weak);

    const char *exps[] = {"AQAA" /* 65536 */, "AQ" /* 1 */, "Ag" /* 2 */, "AAAB" /* 1 */};
    for (size_t i = 0; i < sizeof exps / sizeof exps[0]; i++) {
        char *k = with_member(jwk_rsa, "e", exps[i]);
        s = set_of(k, NULL);
        expect_set_error(s, "keys[0].e: exponent must be odd");
        free(s);
        free(k);
    }
    struct {
        const char *member, *value, *diag;
    } bad[] = {
        {"x", "AAEC", "keys[0].x: not 32 bytes"},
        {"x", "AAEC=", "keys[0].x: not base64url"},
        {"x", "", "keys[0].x: not base64url"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *k = with_member(jwk_ed, bad[i].member, bad[i].value);
        s = set_of(k, NULL);
        expect_set_error(s, bad[i].diag);
        free(s);
        free(k);
    }
    /* an exponent longer than 8 bytes, a modulus over 8192 bits */
    char *k = with_member(jwk_rsa, "e", "AQAAAAAAAAAAAQ");
    s = set_of(k, NULL);
    expect_set_error(s, "keys[0].e: not base64url");
    free(s);
    free(k);

    /* alg that does not fit the key type */
    char *mis = jwk(rsa, "r9", ",\"alg\":\"ES256\"");
    s = set_of(jwk_ed, mis, NULL);
    expect_set_error(s, "keys[1].alg: ES256 does not fit");
    free(s);
    free(mis);
    mis = jwk(ed, "d9", ",\"alg\":\"RS256\"");
    s = set_of(mis, NULL);
    expect_set_error(s, "keys[0].alg: RS256 does not fit");
    free(s);
    free(mis);

    /* duplicate kid */
    char *dup = jwk(ec, "d1", "");
    s = set_of(jwk_ed, dup, NULL);
    expect_set_error(s, "keys[1].kid: used by an earlier key");
    free(s);
    free(dup);

    /* private material in a key set */
    char *priv = jwk(ed, "p", ",\"d\":\"AAAA\"");
    s = set_of(priv, NULL);
    expect_set_error(s, "keys[0].d: private key material");
    free(s);
    free(priv);

    expect_set_error("{\"keys\":[{\"kid\":\"x\"}]}", "keys[0].kty: missing");
    expect_set_error("{\"keys\":[{\"kty\":\"EC\",\"x\":\"AA\"}]}", "keys[0].crv: missing");
    expect_set_error("{\"keys\":[7]}", "keys[0]: not an object");
    char *kid7 = jwk(ed, NULL, ",\"kid\":7");
    s = set_of(kid7, NULL);
    expect_set_error(s, "keys[0].kid: not a string");
    free(s);
    free(kid7);
}

static void test_jwks_set_errors(void **state) {
    (void)state;
    expect_set_error("{\"keys\":[]}", "no usable key");
    expect_set_error("{\"keys\":[{\"kty\":\"oct\",\"k\":\"AAAA\"}]}", "no usable key (1 skipped)");
    expect_set_error("{}", "\"keys\" array");
    expect_set_error("[]", "\"keys\" array");
    expect_set_error("{\"keys\":[],\"keys\":[]}", "JWKS: ");
    expect_set_error("{\"keys\":[", "JWKS: ");

    /* TG_JWKS_KEYS_MAX usable keys parse, one more is refused (not truncated) */
    char *objs[TG_JWKS_KEYS_MAX + 1];
    for (int i = 0; i <= TG_JWKS_KEYS_MAX; i++) {
        char kid[16];
        (void)snprintf(kid, sizeof kid, "k%d", i);
        objs[i] = jwk(ed, kid, "");
    }
    char *s = malloc(TEXT_MAX);
    assert_non_null(s);
    for (int extra = 0; extra < 2; extra++) {
        size_t n = (size_t)snprintf(s, TEXT_MAX, "{\"keys\":[");
        for (int i = 0; i < TG_JWKS_KEYS_MAX + extra; i++) {
            n += (size_t)snprintf(s + n, TEXT_MAX - n, "%s%s", i ? "," : "", objs[i]);
        }
        (void)snprintf(s + n, TEXT_MAX - n, "]}");
        if (extra == 0) {
            tg_jwks_t *k = must_set(s);
            assert_int_equal(tg_jwks_count(k), TG_JWKS_KEYS_MAX);
            tg_jwks_free(k);
        } else {
            expect_set_error(s, "more than 32 usable keys");
        }
    }
    for (int i = 0; i <= TG_JWKS_KEYS_MAX; i++) {
        free(objs[i]);
    }
    free(s);

    /* TG_JWKS_MAX bytes parse (blank padding), one more is refused */
    char *base = set_of(jwk_ed, NULL);
    char *big = malloc(TG_JWKS_MAX + 2);
    assert_non_null(big);
    memset(big, ' ', TG_JWKS_MAX + 1);
    memcpy(big, base, strlen(base));
    big[TG_JWKS_MAX + 1] = '\0';
    tg_jwks_t *k = NULL;
    tg_diag_t d = {{0}};
    assert_int_equal(tg_jwks_parse(&k, big, TG_JWKS_MAX, NULL, &d), TG_OK);
    assert_int_equal(tg_jwks_count(k), 1);
    tg_jwks_free(k);
    assert_int_equal(tg_jwks_parse(&k, big, TG_JWKS_MAX + 1, NULL, &d), TG_ERR_CONFIG);
    assert_null(k);
    free(big);
    free(base);

    assert_int_equal(tg_jwks_parse(NULL, "{}", 2, NULL, NULL), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_jwks_parse(&k, NULL, 2, NULL, NULL), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_jwks_count(NULL), 0);
    tg_jwks_free(NULL);
}

static void test_jwks_skipped(void **state) {
    (void)state;
    char *enc = jwk(rsa, "enc", ",\"use\":\"enc\"");
    char *oaep = jwk(rsa, "oaep", ",\"alg\":\"RSA-OAEP\"");
    char *ops = jwk(ec, "ops", ",\"key_ops\":[\"sign\"]");
    const char *others[] = {
        "{\"kty\":\"oct\",\"kid\":\"h\",\"k\":\"c2VjcmV0\",\"alg\":\"HS256\"}",
        "{\"kty\":\"EC\",\"crv\":\"P-384\",\"kid\":\"p384\",\"x\":\"AA\",\"y\":\"AA\"}",
        "{\"kty\":\"OKP\",\"crv\":\"X25519\",\"kid\":\"xdh\",\"x\":\"AA\"}",
        "{\"kty\":\"EC\",\"crv\":\"P-256\",\"kid\":\"ops2\",\"key_ops\":[]}",
    };
    char *s = set_of(others[0], enc, jwk_ed, others[1], oaep, others[2], ops, others[3], NULL);
    tg_jwks_t *k = NULL;
    size_t skipped = 99;
    tg_diag_t d = {{0}};
    assert_int_equal(parse_set(&k, s, &skipped, &d), TG_OK);
    assert_int_equal(skipped, 7);
    assert_int_equal(tg_jwks_count(k), 1);
    assert_true(tg_jwks_has_kid(k, "d1", 2));
    assert_false(tg_jwks_has_kid(k, "enc", 3));
    assert_false(tg_jwks_has_kid(k, "h", 1));
    /* a token naming a skipped key's kid finds nothing */
    char *t = token("{\"alg\":\"RS256\",\"kid\":\"enc\"}", CLAIMS_OK, rsa, SIG_GOOD);
    expect_fail(t, k, NULL, TG_ERR_NOT_FOUND, TG_JWT_FAIL_KID_UNKNOWN);
    free(t);
    tg_jwks_free(k);
    free(s);
    free(enc);
    free(oaep);
    free(ops);
}

/* jwt.h: any number of threads may verify against one set at once. */
#define THREADS 4
#define ROUNDS 30

static void *verify_loop(void *arg) {
    char *const *toks = arg;
    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < 3; i++) {
            tg_jwt_t *j = NULL;
            tg_jwt_fail_t why;
            if (tg_jwt_parse(&j, toks[i], strlen(toks[i]), &why) != TG_OK ||
                tg_jwt_verify(j, all, &EXPECT, &why) != TG_OK) {
                tg_jwt_free(j);
                return (void *)1;
            }
            tg_jwt_free(j);
        }
    }
    return NULL;
}

static void test_verify_threads(void **state) {
    (void)state;
    char *toks[3] = {token(H_RS, CLAIMS_OK, rsa, SIG_GOOD), token(H_ES, CLAIMS_OK, ec, SIG_GOOD),
                     token(H_ED, CLAIMS_OK, ed, SIG_GOOD)};
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) {
        assert_int_equal(pthread_create(&th[i], NULL, verify_loop, toks), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        void *res = (void *)1;
        assert_int_equal(pthread_join(th[i], &res), 0);
        assert_null(res);
    }
    for (int i = 0; i < 3; i++) {
        free(toks[i]);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_each_alg),
        cmocka_unit_test(test_expiry_edges),
        cmocka_unit_test(test_not_yet_valid),
        cmocka_unit_test(test_audience),
        cmocka_unit_test(test_issuer),
        cmocka_unit_test(test_kid),
        cmocka_unit_test(test_alg_refused),
        cmocka_unit_test(test_hs256_with_public_key),
        cmocka_unit_test(test_alg_mismatch),
        cmocka_unit_test(test_signature_shapes),
        cmocka_unit_test(test_tampered),
        cmocka_unit_test(test_token_size_limit),
        cmocka_unit_test(test_claims_limits),
        cmocka_unit_test(test_header_rules),
        cmocka_unit_test(test_base64url_strict),
        cmocka_unit_test(test_verify_args),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_jwks_key_errors),
        cmocka_unit_test(test_jwks_set_errors),
        cmocka_unit_test(test_jwks_skipped),
        cmocka_unit_test(test_verify_threads),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
