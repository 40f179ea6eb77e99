/* test_receipt.c — RFC 8032 vectors, golden receipts, builder vs generic path, verifier. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <jansson.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trigguard/canon.h"
#include "trigguard/clock.h"
#include "trigguard/keys.h"
#include "trigguard/receipt.h"
#include "trigguard/version.h"

/* Fixed inputs of the golden receipts (see vectors/receipt/README.md). The hex values are
 * SHA-256 of ASCII phrases, computed with python3 hashlib:
 *   REQ  = "trigguard golden request"      CTX  = "trigguard golden context"
 *   POL  = "trigguard golden policy"       SUBJ = "sha256:" + "trigguard golden subject"
 *   PREV = "trigguard golden previous receipt"
 * FP = SHA-256 of {"engineVersion":"trigguard/0.1.0","policyHash":POL,
 *                  "protocolVersion":"trigguard/v1"}
 * EXEC = "exec_" + 32 hex of SHA-256("acme\0payments.charge\0" REQ "\0tx_9921") */
#define REQ "3f3ddace61d643b2f4306f20ab43e2467e0511dc1dc04268d35d053c625f4b85"
#define CTX "1bfd31ae0f604d9c0c10413e11b34b06dd131565d9cb9b18183f168c1a28f123"
#define POL "7da50284afecd9e8d50da934d3efa11b7b63727f9d4779e3bdf812b2f377e2f1"
#define SUBJ "sha256:dfbcddccd8fddcbf0ad6b26a5b475588c1a2d55ee343b1a9b4236a6094cd4541"
#define PREV "e763a4131562f934ec14d20f27600fba5cf59273ee941efac5f5286913b9a840"
#define FP "51bb6cf740039831a5fba37d7fbdc5074d9de5775883c8d6076bb6babf98cdcf"
#define EXEC "exec_1383b2a1dbbc5092b3d9fb3924c76a21"
#define EXEC2 "exec_437792c5c0bd849df57005c14a79ee7f"
#define TS_MS INT64_C(1796017210123) /* 2026-11-30T05:40:10.123Z */
#define EXP_MS (TS_MS + 600000)

static tg_key_t signer;   /* seed 00..1f, id trigguard-key-1 */
static tg_keyring_t ring; /* its public key, verify-only */

static int setup(void **state) {
    (void)state;
    uint8_t seed[32];
    tg_key_t pub;
    if (sodium_init() < 0) {
        return -1;
    }
    for (int i = 0; i < 32; i++) {
        seed[i] = (uint8_t)i;
    }
    if (tg_key_from_seed(&signer, seed, "trigguard-key-1") != TG_OK ||
        tg_key_from_public(&pub, signer.pk, "trigguard-key-1") != TG_OK) {
        return -1;
    }
    tg_keyring_init(&ring);
    return tg_keyring_add(&ring, &pub, TG_KEY_VERIFY_ONLY) == TG_OK ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    tg_key_wipe(&signer);
    tg_keyring_wipe(&ring);
    return 0;
}

static void unhex(uint8_t *out, const char *hex) {
    size_t n = strlen(hex) / 2;
    assert_int_equal(tg_unhex(out, n, hex, 2 * n), TG_OK);
}

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char *buf = malloc(65536);
    assert_non_null(buf);
    *len = fread(buf, 1, 65535, f);
    buf[*len] = '\0';
    fclose(f);
    return buf;
}

/* Golden file content without its one trailing newline. */
static char *golden(const char *path, size_t *len) {
    char *g = slurp(path, len);
    assert_true(*len > 0 && g[*len - 1] == '\n');
    g[--*len] = '\0';
    return g;
}

static json_t *parse_json(const char *text) {
    json_t *v = NULL;
    tg_diag_t d;
    tg_err_t rc = tg_json_parse(&v, text, strlen(text), NULL, &d);
    if (rc) {
        fail_msg("parse: %s %s", tg_err_name(rc), d.msg);
    }
    return v;
}

static tg_receipt_fields_t golden_fields(void) {
    tg_receipt_fields_t f;
    memset(&f, 0, sizeof f);
    f.execution_id = TG_RSTR(EXEC);
    f.authority_id = TG_RSTR("trigguard-local");
    f.tenant_id = TG_RSTR("acme");
    f.surface = TG_RSTR("payments.charge");
    f.action = TG_RSTR("transfer_funds");
    f.actor_id = TG_RSTR("agent.billing");
    f.decision = TG_RSTR("PERMIT");
    f.reason_code = TG_RSTR("NO_POLICY_VIOLATION");
    f.request_hash = TG_RSTR(REQ);
    f.execution_context_hash = TG_RSTR(CTX);
    f.subject_digest = TG_RSTR(SUBJ);
    f.prev_receipt_hash = TG_RSTR(PREV);
    f.policy_version = TG_RSTR("2026-11-30.1");
    f.policy_hash = TG_RSTR(POL);
    f.protocol_fingerprint = TG_RSTR(FP);
    f.engine_version = TG_RSTR("trigguard/0.1.0");
    f.timestamp_ms = TS_MS;
    f.expires_at_ms = EXP_MS;
    return f;
}

/* ---- RFC 8032 section 7.1 ----------------------------------------------------------- */

typedef struct {
    const char *sk, *pk, *msg, *sig;
} rfc_vector_t;

static const rfc_vector_t RFC8032[] = {
    {"9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
     "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", "",
     "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9"
     "b46bd25bf5f0595bbe24655141438e7a100b"},
    {"4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
     "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", "72",
     "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f1"
     "1d8c387b2eaeb4302aeeb00d291612bb0c00"},
    {"c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
     "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025", "af82",
     "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984d"
     "c6594a7c15e9716ed28dc027beceea1ec40a"},
    /* TEST SHA(abc): the message is SHA-512("abc") */
    {"833fe62409237b9d62ec77587520911e9a759cec1d19755b7da901b96dca3d42",
     "ec172b93ad5e563bf4932c70e1245034c35467ef2efd4d64ebf819683467e2bf",
     "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3fe"
     "ebbd454d4423643ce80e2a9ac94fa54ca49f",
     "dc2a4459e7369633a52b1bf277839a00201009a3efbf3ecb69bea2186c26b58909351fc9ac90b3ecfdfbc7c66431"
     "e0303dca179c138ac17ad9bef1177331a704"},
};

static void test_rfc8032_vectors(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof RFC8032 / sizeof RFC8032[0]; i++) {
        uint8_t sk[32], pk[32], msg[64], sig[64], want[64];
        size_t mlen = strlen(RFC8032[i].msg) / 2;
        tg_key_t k, pub;
        unhex(sk, RFC8032[i].sk);
        unhex(pk, RFC8032[i].pk);
        if (mlen > 0) {
            unhex(msg, RFC8032[i].msg);
        }
        unhex(want, RFC8032[i].sig);
        assert_int_equal(tg_key_from_seed(&k, sk, NULL), TG_OK);
        assert_memory_equal(k.pk, pk, 32);
        assert_int_equal(tg_key_sign(sig, &k, msg, mlen), TG_OK);
        assert_memory_equal(sig, want, 64);
        assert_int_equal(tg_key_from_public(&pub, pk, NULL), TG_OK);
        assert_int_equal(tg_key_verify(&pub, want, msg, mlen), TG_OK);
        want[63] ^= 0x01;
        assert_int_equal(tg_key_verify(&pub, want, msg, mlen), TG_ERR_CRYPTO);
        tg_key_wipe(&k);
    }
}

/* ---- golden receipts ------------------------------------------------------------------ */

static void test_golden_fast_builder(void **state) {
    (void)state;
    size_t glen;
    char *g = golden("vectors/receipt/golden.json", &glen);
    tg_receipt_fields_t f = golden_fields();
    tg_receipt_signed_t info;
    tg_buf_t out;
    tg_diag_t d;
    tg_buf_init(&out, 0);
    /* the builder appends: whatever the buffer holds stays */
    assert_int_equal(tg_buf_puts(&out, "{\"receipt\":"), TG_OK);
    assert_int_equal(tg_receipt_sign_fields(&out, &info, &signer, &f, &d), TG_OK);
    assert_int_equal(info.offset, 11);
    assert_int_equal(info.length, glen);
    assert_memory_equal(out.data + info.offset, g, glen);
    assert_int_equal(out.len, 11 + glen);
    assert_non_null(strstr(g, info.hash_hex));
    uint8_t h[32];
    unhex(h, info.hash_hex);
    assert_memory_equal(h, info.hash, 32);

    /* the unsigned canonical bytes hash to receiptHash */
    tg_buf_reset(&out);
    assert_int_equal(tg_receipt_write_unsigned(&out, &f, &d), TG_OK);
    tg_sha256(h, out.data, out.len);
    assert_memory_equal(h, info.hash, 32);
    assert_null(strstr(out.data, "receiptHash"));

    /* NULL protocol/engine versions mean the compiled-in ones */
    f.protocol_version.ptr = NULL;
    if (strcmp(TG_ENGINE_VERSION, "trigguard/0.1.0") == 0) {
        f.engine_version.ptr = NULL;
    }
    tg_buf_reset(&out);
    assert_int_equal(tg_receipt_sign_fields(&out, NULL, &signer, &f, &d), TG_OK);
    assert_string_equal(out.data, g);
    tg_buf_free(&out);
    free(g);
}

static void check_generic(const char *body_path, const char *golden_path) {
    size_t blen, glen;
    char *body_text = slurp(body_path, &blen);
    char *g = golden(golden_path, &glen);
    json_t *body = parse_json(body_text);
    tg_receipt_signed_t info;
    tg_buf_t out;
    tg_diag_t d;
    tg_buf_init(&out, 0);
    assert_int_equal(tg_buf_puts(&out, "xy"), TG_OK);
    tg_err_t rc = tg_receipt_sign_json(&out, &info, &signer, body, &d);
    if (rc) {
        fail_msg("%s %s", tg_err_name(rc), d.msg);
    }
    assert_int_equal(info.offset, 2);
    assert_int_equal(info.length, glen);
    assert_string_equal(out.data + 2, g);
    /* the signed golden verifies, is still valid 1 ms before expiry, expired at expiresAt */
    assert_int_equal(tg_receipt_verify_text(&ring, g, glen, TS_MS, NULL, &d), TG_OK);
    assert_int_equal(tg_receipt_verify_text(&ring, g, glen, EXP_MS - 1, NULL, &d), TG_OK);
    assert_int_equal(tg_receipt_verify_text(&ring, g, glen, EXP_MS, NULL, &d),
                     TG_ERR_RECEIPT_EXPIRED);
    assert_non_null(strstr(d.msg, "2026-11-30T05:50:10.123Z"));
    json_decref(body);
    tg_buf_free(&out);
    free(body_text);
    free(g);
}

static void test_golden_generic_path(void **state) {
    (void)state;
    check_generic("vectors/receipt/golden-body.json", "vectors/receipt/golden.json");
    check_generic("vectors/receipt/golden-deny-minimal-body.json",
                  "vectors/receipt/golden-deny-minimal.json");
}

static void test_golden_minimal_fast(void **state) {
    (void)state;
    size_t glen;
    char *g = golden("vectors/receipt/golden-deny-minimal.json", &glen);
    tg_receipt_fields_t f = golden_fields();
    f.execution_id = TG_RSTR(EXEC2);
    f.surface = TG_RSTR("deploy.release");
    f.action = TG_RSTR("");
    f.actor_id = TG_RSTR("");
    f.decision = TG_RSTR("DENY");
    f.reason_code = TG_RSTR("NO_MATCHING_POLICY");
    f.execution_context_hash.ptr = NULL;
    f.subject_digest.ptr = NULL;
    f.prev_receipt_hash.ptr = NULL;
    tg_buf_t out;
    tg_buf_init(&out, 0);
    assert_int_equal(tg_receipt_sign_fields(&out, NULL, &signer, &f, NULL), TG_OK);
    assert_string_equal(out.data, g);
    tg_buf_free(&out);
    free(g);
}

/* Fast path == generic path == canonical form, for strings that need JCS escapes. */
static void test_fast_equals_generic(void **state) {
    (void)state;
    static const char *const texts[] = {
        "plain",
        "quote\" backslash\\ slash/",
        "ctl\x01\x1f\b\f\n\r\t del\x7f",
        "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xef\xbf\xbf",
        "",
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        tg_receipt_fields_t f = golden_fields();
        f.actor_id = TG_RSTR(texts[i]);
        f.action = TG_RSTR(texts[(i + 1) % 5]);
        f.subject_digest = TG_RSTR(texts[(i + 2) % 4]); /* non-empty ones */
        f.tenant_id = TG_RSTR(texts[(i + 3) % 4]);
        f.policy_version = TG_RSTR(texts[(i + 1) % 4]); /* reasonCode must be UPPER_SNAKE */
        tg_buf_t fast, generic, canon;
        tg_diag_t d;
        tg_buf_init(&fast, 0);
        tg_buf_init(&generic, 0);
        tg_buf_init(&canon, 0);
        assert_int_equal(tg_receipt_sign_fields(&fast, NULL, &signer, &f, &d), TG_OK);
        /* the output is canonical: parse + tg_canon_write gives the same bytes */
        json_t *signed_obj = parse_json(fast.data);
        assert_int_equal(tg_canon_write(&canon, signed_obj, &d), TG_OK);
        assert_string_equal(canon.data, fast.data);
        /* generic signing of the same fields gives the same bytes (Ed25519 is deterministic) */
        json_t *body = json_deep_copy(signed_obj);
        assert_int_equal(json_object_del(body, "receiptHash"), 0);
        assert_int_equal(json_object_del(body, "authoritySignature"), 0);
        assert_int_equal(json_object_del(body, "authorityKeyId"), 0);
        assert_int_equal(tg_receipt_sign_json(&generic, NULL, &signer, body, &d), TG_OK);
        assert_string_equal(generic.data, fast.data);
        /* the unsigned writer equals tg_canon_write of the body */
        tg_buf_reset(&canon);
        tg_buf_reset(&generic);
        assert_int_equal(tg_canon_write(&canon, body, &d), TG_OK);
        assert_int_equal(tg_receipt_write_unsigned(&generic, &f, &d), TG_OK);
        assert_string_equal(generic.data, canon.data);
        assert_int_equal(tg_receipt_verify(&ring, signed_obj, TS_MS, &d), TG_OK);
        json_decref(signed_obj);
        json_decref(body);
        tg_buf_free(&fast);
        tg_buf_free(&generic);
        tg_buf_free(&canon);
    }
}

/* ---- builder errors -------------------------------------------------------------------- */

static void expect_build_error(tg_receipt_fields_t f, const char *needle) {
    tg_buf_t out;
    tg_diag_t d;
    tg_buf_init(&out, 0);
    assert_int_equal(tg_buf_puts(&out, "keep"), TG_OK);
    tg_err_t rc = tg_receipt_sign_fields(&out, NULL, &signer, &f, &d);
    if (rc != TG_ERR_INVALID_ARG) {
        fail_msg("got %s, want TG_ERR_INVALID_ARG (%s)", tg_err_name(rc), needle);
    }
    if (strstr(d.msg, needle) == NULL) {
        fail_msg("diag '%s' does not mention '%s'", d.msg, needle);
    }
    assert_string_equal(out.data, "keep"); /* restored on error */
    tg_buf_reset(&out);
    assert_int_equal(tg_receipt_write_unsigned(&out, &f, NULL), TG_ERR_INVALID_ARG);
    assert_int_equal(out.len, 0);
    tg_buf_free(&out);
}

static void test_builder_rejects(void **state) {
    (void)state;
    tg_receipt_fields_t f;
    char long_text[TG_RECEIPT_TEXT_MAX + 2];
    f = golden_fields();
    f.execution_id.ptr = NULL;
    expect_build_error(f, "executionId is missing");
    f = golden_fields();
    f.execution_id = TG_RSTR("exec_1383b2a1dbbc5092b3d9fb3924c76a2");
    expect_build_error(f, "executionId");
    f = golden_fields();
    f.execution_id = TG_RSTR("exec_1383B2a1dbbc5092b3d9fb3924c76a21");
    expect_build_error(f, "executionId");
    f = golden_fields();
    f.request_hash = TG_RSTR(REQ "0");
    expect_build_error(f, "requestHash");
    f = golden_fields();
    f.policy_hash = TG_RSTR("7DA50284afecd9e8d50da934d3efa11b7b63727f9d4779e3bdf812b2f377e2f1");
    expect_build_error(f, "policyHash");
    f = golden_fields();
    f.execution_context_hash = TG_RSTR("xyz");
    expect_build_error(f, "executionContextHash");
    f = golden_fields();
    f.decision = TG_RSTR("SILENCE");
    expect_build_error(f, "decision");
    f = golden_fields();
    f.protocol_version = TG_RSTR("trigguard/v2");
    expect_build_error(f, "protocolVersion");
    f = golden_fields();
    f.surface = TG_RSTR("");
    expect_build_error(f, "surface is empty");
    f = golden_fields();
    f.tenant_id.ptr = NULL;
    expect_build_error(f, "tenantId is missing");
    f = golden_fields();
    f.action.ptr = NULL; /* may be empty, not absent */
    expect_build_error(f, "action is missing");
    f = golden_fields();
    f.actor_id = TG_RSTR("bad\xff utf8");
    expect_build_error(f, "actorId is not valid UTF-8");
    f = golden_fields();
    f.surface = TG_RSTR("surrogate \xed\xa0\x80");
    expect_build_error(f, "surface is not valid UTF-8");
    f = golden_fields();
    f.timestamp_ms = -1;
    expect_build_error(f, "outside");
    f = golden_fields();
    f.expires_at_ms = TG_TIME_MAX_MS + 1;
    expect_build_error(f, "outside");
    f = golden_fields();
    f.expires_at_ms = f.timestamp_ms - 1;
    expect_build_error(f, "before timestamp");

    /* text at the limit is fine, one byte more is not */
    memset(long_text, 'a', sizeof long_text);
    f = golden_fields();
    f.actor_id = (tg_receipt_str_t){long_text, TG_RECEIPT_TEXT_MAX};
    tg_buf_t out;
    tg_buf_init(&out, 0);
    assert_int_equal(tg_receipt_sign_fields(&out, NULL, &signer, &f, NULL), TG_OK);
    f.actor_id.len++;
    expect_build_error(f, "longer than 4096");

    /* key without secret / NULL key */
    tg_key_t pub;
    tg_diag_t d;
    f = golden_fields();
    assert_int_equal(tg_key_from_public(&pub, signer.pk, "p"), TG_OK);
    tg_buf_reset(&out);
    assert_int_equal(tg_receipt_sign_fields(&out, NULL, &pub, &f, &d), TG_ERR_NO_KEY);
    assert_int_equal(tg_receipt_sign_fields(&out, NULL, NULL, &f, &d), TG_ERR_NO_KEY);
    assert_int_equal(out.len, 0);
    /* a bounded output buffer: the receipt does not fit -> TG_ERR_LIMIT, nothing left */
    tg_buf_t tiny;
    tg_buf_init(&tiny, 200);
    assert_int_equal(tg_buf_puts(&tiny, "pre"), TG_OK);
    assert_int_equal(tg_receipt_sign_fields(&tiny, NULL, &signer, &f, &d), TG_ERR_LIMIT);
    assert_string_equal(tiny.data, "pre");
    /* the unsigned form fits in 1000 bytes, the signed one (1159) does not: the failure
     * happens while inserting the signature members */
    tg_buf_free(&tiny);
    tg_buf_init(&tiny, 1000);
    assert_int_equal(tg_receipt_write_unsigned(&tiny, &f, &d), TG_OK);
    tg_buf_reset(&tiny);
    assert_int_equal(tg_receipt_sign_fields(&tiny, NULL, &signer, &f, &d), TG_ERR_LIMIT);
    assert_int_equal(tiny.len, 0);
    tg_buf_free(&tiny);
    tg_buf_free(&out);
}

static void test_sign_json_rejects(void **state) {
    (void)state;
    size_t blen;
    char *body_text = slurp("vectors/receipt/golden-body.json", &blen);
    json_t *body = parse_json(body_text);
    tg_buf_t out;
    tg_diag_t d;
    tg_key_t pub;
    tg_buf_init(&out, 0);
    assert_int_equal(tg_key_from_public(&pub, signer.pk, "p"), TG_OK);
    assert_int_equal(tg_receipt_sign_json(&out, NULL, &pub, body, &d), TG_ERR_NO_KEY);

    json_t *b2 = json_deep_copy(body);
    assert_int_equal(json_object_set_new(b2, "receiptHash", json_string(REQ)), 0);
    assert_int_equal(tg_receipt_sign_json(&out, NULL, &signer, b2, &d), TG_ERR_RECEIPT_SHAPE);
    assert_non_null(strstr(d.msg, "receiptHash must not be present"));
    json_decref(b2);

    b2 = json_deep_copy(body);
    assert_int_equal(json_object_del(b2, "policyHash"), 0);
    assert_int_equal(tg_receipt_sign_json(&out, NULL, &signer, b2, &d), TG_ERR_RECEIPT_SHAPE);
    assert_non_null(strstr(d.msg, "policyHash is missing"));
    json_decref(b2);

    b2 = json_deep_copy(body);
    assert_int_equal(json_object_set_new(b2, "extra", json_string("x")), 0);
    assert_int_equal(tg_receipt_sign_json(&out, NULL, &signer, b2, &d), TG_ERR_RECEIPT_SHAPE);
    json_decref(b2);

    tg_buf_t tiny;
    tg_buf_init(&tiny, 300);
    assert_int_equal(tg_receipt_sign_json(&tiny, NULL, &signer, body, &d), TG_ERR_LIMIT);
    assert_int_equal(tiny.len, 0);
    tg_buf_free(&tiny);
    assert_int_equal(out.len, 0);
    json_decref(body);
    tg_buf_free(&out);
    free(body_text);
}

/* ---- verifier ------------------------------------------------------------------------- */

static tg_err_t verify_str(const char *text, int64_t now, tg_diag_t *d) {
    return tg_receipt_verify_text(&ring, text, strlen(text), now, NULL, d);
}

/* Changes one byte of member `name`'s value at index idx (negative: from the end) to c. */
static char *tamper(const char *g, const char *name, int idx, char c) {
    char pat[64];
    (void)snprintf(pat, sizeof pat, "\"%s\":\"", name);
    const char *p = strstr(g, pat);
    assert_non_null(p);
    char *t = strdup(g);
    assert_non_null(t);
    size_t start = (size_t)(p - g) + strlen(pat);
    size_t end = start;
    while (g[end] != '"') {
        end++;
    }
    size_t at = idx >= 0 ? start + (size_t)idx : end - (size_t)(-idx);
    assert_true(at >= start && at < end);
    assert_true(t[at] != c);
    t[at] = c;
    return t;
}

typedef struct {
    const char *name;
    int idx;
    char c;
    tg_err_t want;
} tamper_case_t;

static void test_verify_tampering(void **state) {
    (void)state;
    size_t glen;
    char *g = golden("vectors/receipt/golden.json", &glen);
    static const tamper_case_t cases[] = {
        {"action", 0, 'T', TG_ERR_RECEIPT_HASH},
        {"actorId", -1, 'x', TG_ERR_RECEIPT_HASH},
        {"authorityId", 0, 'T', TG_ERR_RECEIPT_HASH},
        {"decision", 0, 'Q', TG_ERR_RECEIPT_SHAPE}, /* QERMIT is no decision */
        {"engineVersion", -1, '1', TG_ERR_RECEIPT_HASH},
        {"executionContextHash", 0, '2', TG_ERR_RECEIPT_HASH},
        {"executionId", 5, '2', TG_ERR_RECEIPT_HASH},
        {"expiresAt", -2, '4', TG_ERR_RECEIPT_HASH},
        {"policyHash", -1, '0', TG_ERR_RECEIPT_HASH},
        {"policyVersion", -1, '2', TG_ERR_RECEIPT_HASH},
        {"prevReceiptHash", 3, 'b', TG_ERR_RECEIPT_HASH},
        {"protocolFingerprint", 10, 'a', TG_ERR_RECEIPT_HASH},
        {"protocolVersion", -1, '2', TG_ERR_RECEIPT_SHAPE}, /* only v1 exists */
        {"reasonCode", 0, 'M', TG_ERR_RECEIPT_HASH},
        {"reasonCode", 0, 'n', TG_ERR_RECEIPT_SHAPE}, /* SPEC §1: UPPER_SNAKE */
        {"reasonCode", -1, '-', TG_ERR_RECEIPT_SHAPE},
        {"requestHash", 0, '4', TG_ERR_RECEIPT_HASH},
        {"subjectDigest", -1, '0', TG_ERR_RECEIPT_HASH},
        {"surface", 0, 'q', TG_ERR_RECEIPT_HASH},
        {"tenantId", 0, 'b', TG_ERR_RECEIPT_HASH},
        {"timestamp", -2, '2', TG_ERR_RECEIPT_HASH},
        /* the signature members */
        {"receiptHash", 0, '4', TG_ERR_RECEIPT_SIGNATURE},
        {"receiptHash", -1, '6', TG_ERR_RECEIPT_SIGNATURE},
        {"authoritySignature", 0, 'g', TG_ERR_RECEIPT_SIGNATURE},
        {"authoritySignature", 40, 'A', TG_ERR_RECEIPT_SIGNATURE},
        {"authoritySignature", -3, 'D', TG_ERR_RECEIPT_SHAPE}, /* non-canonical base64 */
        {"authorityKeyId", -1, '2', TG_ERR_KEY_UNKNOWN},
        /* format errors in hashed members are shape errors before anything else */
        {"requestHash", 0, 'A', TG_ERR_RECEIPT_SHAPE},
        {"executionId", 0, 'E', TG_ERR_RECEIPT_SHAPE},
        {"timestamp", 4, '/', TG_ERR_RECEIPT_SHAPE},
        {"expiresAt", 5, '2', TG_ERR_RECEIPT_SHAPE}, /* month 21 */
    };
    tg_diag_t d;
    assert_int_equal(verify_str(g, TS_MS, &d), TG_OK);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *t = tamper(g, cases[i].name, cases[i].idx, cases[i].c);
        tg_err_t rc = verify_str(t, TS_MS, &d);
        if (rc != cases[i].want) {
            fail_msg("case %zu (%s): got %s (%s), want %s", i, cases[i].name, tg_err_name(rc),
                     d.msg, tg_err_name(cases[i].want));
        }
        free(t);
    }
    /* a changed decision with a valid value */
    char *t = strdup(g);
    char *p = strstr(t, "\"PERMIT\"");
    memcpy(p, "\"DENY\"  ", 8);
    memmove(p + 6, p + 8, strlen(p + 8) + 1);
    assert_int_equal(verify_str(t, TS_MS, &d), TG_ERR_RECEIPT_HASH);
    assert_non_null(strstr(d.msg, "does not match"));
    free(t);
    /* whitespace and member order do not matter to the verifier (it canonicalizes) */
    json_t *obj = parse_json(g);
    char *pretty = json_dumps(obj, JSON_INDENT(2));
    assert_non_null(pretty);
    assert_int_equal(verify_str(pretty, TS_MS, &d), TG_OK);
    free(pretty);
    json_decref(obj);
    free(g);
}

static void expect_shape(json_t *obj, const char *needle) {
    tg_diag_t d;
    d.msg[0] = '\0';
    tg_err_t rc = tg_receipt_verify(&ring, obj, TS_MS, &d);
    if (rc != TG_ERR_RECEIPT_SHAPE) {
        fail_msg("got %s (%s), want TG_ERR_RECEIPT_SHAPE (%s)", tg_err_name(rc), d.msg, needle);
    }
    if (strstr(d.msg, needle) == NULL) {
        fail_msg("diag '%s' does not mention '%s'", d.msg, needle);
    }
    assert_string_equal(tg_receipt_reason_code(rc), "malformed");
}

static void test_verify_shape(void **state) {
    (void)state;
    size_t glen;
    char *g = golden("vectors/receipt/golden.json", &glen);
    json_t *base = parse_json(g);
    const char *name;
    json_t *v;

    /* every member: missing (optional ones are fine), null, a number */
    json_object_foreach(base, name, v) {
        json_t *o = json_deep_copy(base);
        assert_int_equal(json_object_del(o, name), 0);
        bool optional = strcmp(name, "executionContextHash") == 0 ||
                        strcmp(name, "subjectDigest") == 0 || strcmp(name, "prevReceiptHash") == 0;
        tg_diag_t d;
        if (optional) {
            /* authentic signature over the original hash: removing it is a hash mismatch */
            assert_int_equal(tg_receipt_verify(&ring, o, TS_MS, &d), TG_ERR_RECEIPT_HASH);
        } else {
            expect_shape(o, "is missing");
        }
        assert_int_equal(json_object_set_new(o, name, json_null()), 0);
        expect_shape(o, "is null");
        assert_int_equal(json_object_set_new(o, name, json_integer(1)), 0);
        expect_shape(o, "must be a string");
        assert_int_equal(json_object_set_new(o, name, json_object()), 0);
        expect_shape(o, "must be a string");
        json_decref(o);
    }
    json_t *o = json_deep_copy(base);
    assert_int_equal(json_object_set_new(o, "note", json_string("x")), 0);
    expect_shape(o, "unknown member \"note\"");
    json_decref(o);
    o = json_deep_copy(base);
    assert_int_equal(json_object_set_new(o, "bad\nname\"", json_string("x")), 0);
    expect_shape(o, "unknown member \"bad?name?\"");
    json_decref(o);
    o = json_deep_copy(base);
    assert_int_equal(json_object_set_new(o, "Action", json_string("x")), 0);
    expect_shape(o, "unknown member");
    json_decref(o);

    static const struct {
        const char *name, *value, *needle;
    } bad[] = {
        {"executionId", "exec_1383b2a1", "exec_"},
        {"executionId", "xxxx_1383b2a1dbbc5092b3d9fb3924c76a21", "exec_"},
        {"receiptHash", "3C7C7A42AE69E59663352FF435EE0CD66F89C8258C004DA8D1EE32F7EA076997", "hex"},
        {"receiptHash", "", "hex"},
        {"authoritySignature", "AAAA", "base64"},
        {"authoritySignature",
         "foxdmEeGx2fTW9HomoyZEWucy3jSr5drxmJvk2rU5ZpUiSrWmhXyFkasC2RvMvKexPjhlJ4VW+d1M//YfXX7CQ",
         "base64"},
        {"authoritySignature",
         "foxdmEeGx2fTW9HomoyZEWucy3jSr5drxmJvk2rU5ZpUiSrWmhXyFkasC2RvMvKexPjhlJ4VW+d1M//"
         "YfXX7CQ=\n",
         "base64"},
        {"authorityKeyId", "", "key id"},
        {"authorityKeyId", "has space", "key id"},
        {"decision", "SILENCE", "SILENCE without executionMode observe"},
        {"decision", "permit", "PERMIT, DENY, ESCALATE or SILENCE"},
        {"executionMode", "enforce", "executionMode is not \"observe\""},
        {"timestamp", "2026-11-30T05:40:10Z", "timestamp"},
        {"timestamp", "2026-11-30 05:40:10.123Z", "timestamp"},
        {"timestamp", "2026-02-29T05:40:10.123Z", "timestamp"},
        {"expiresAt", "2026-11-30T05:40:10.122Z", "before timestamp"},
        {"surface", "", "empty"},
        {"tenantId", "", "empty"},
        {"protocolVersion", "trigguard/v1 ", "trigguard/v1"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        o = json_deep_copy(base);
        assert_int_equal(json_object_set_new(o, bad[i].name, json_string(bad[i].value)), 0);
        expect_shape(o, bad[i].needle);
        json_decref(o);
    }
    /* text over 4096 bytes */
    char *big = malloc(TG_RECEIPT_TEXT_MAX + 2);
    memset(big, 'a', TG_RECEIPT_TEXT_MAX + 1);
    big[TG_RECEIPT_TEXT_MAX + 1] = '\0';
    o = json_deep_copy(base);
    assert_int_equal(json_object_set_new(o, "actorId", json_string(big)), 0);
    expect_shape(o, "longer than 4096");
    json_decref(o);
    free(big);

    /* not an object at all */
    json_t *arr = json_array();
    expect_shape(arr, "must be a JSON object");
    json_decref(arr);
    tg_diag_t d;
    assert_int_equal(verify_str("\"receipt\"", TS_MS, &d), TG_ERR_RECEIPT_SHAPE);
    assert_int_equal(verify_str("{}", TS_MS, &d), TG_ERR_RECEIPT_SHAPE);
    json_decref(base);
    free(g);
}

/* ---- principal (SPEC 1.1) ----------------------------------------------------------- */

static char *sign_to_text(const tg_receipt_fields_t *f) {
    tg_buf_t out;
    tg_diag_t d;
    tg_buf_init(&out, 0);
    tg_err_t rc = tg_receipt_sign_fields(&out, NULL, &signer, f, &d);
    if (rc) {
        fail_msg("sign: %s %s", tg_err_name(rc), d.msg);
    }
    char *t = strdup(out.data);
    tg_buf_free(&out);
    return t;
}

static void test_principal(void **state) {
    (void)state;
    tg_diag_t d;
    /* Without a principal the receipt is the v1 golden receipt, byte for byte. */
    size_t glen;
    char *g = golden("vectors/receipt/golden.json", &glen);
    tg_receipt_fields_t f = golden_fields();
    char *v1 = sign_to_text(&f);
    assert_string_equal(v1, g);
    assert_null(strstr(v1, "principal"));

    /* A token with an explicit subject: {"subject"}; an OIDC caller: {"issuer","subject"},
     * in canonical order, signed like the rest and equal to the generic path's bytes. */
    f.principal_subject = TG_RSTR("ci-deploy");
    char *tok = sign_to_text(&f);
    assert_non_null(
        strstr(tok, ",\"principal\":{\"subject\":\"ci-deploy\"},\"protocolFingerprint\""));
    f.principal_issuer = TG_RSTR("https://token.actions.githubusercontent.com");
    char *oidc = sign_to_text(&f);
    assert_non_null(strstr(oidc, "\"principal\":{\"issuer\":\"https://token.actions."
                                 "githubusercontent.com\",\"subject\":\"ci-deploy\"}"));
    const char *texts[] = {tok, oidc};
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(verify_str(texts[i], TS_MS, &d), TG_OK);
        json_t *obj = parse_json(texts[i]);
        tg_buf_t canon, generic;
        tg_buf_init(&canon, 0);
        tg_buf_init(&generic, 0);
        assert_int_equal(tg_canon_write(&canon, obj, &d), TG_OK);
        assert_string_equal(canon.data, texts[i]);
        json_t *body = json_deep_copy(obj);
        json_object_del(body, "receiptHash");
        json_object_del(body, "authoritySignature");
        json_object_del(body, "authorityKeyId");
        assert_int_equal(tg_receipt_sign_json(&generic, NULL, &signer, body, &d), TG_OK);
        assert_string_equal(generic.data, texts[i]);
        json_decref(body);
        json_decref(obj);
        tg_buf_free(&canon);
        tg_buf_free(&generic);
    }

    /* Tampered principal: the hash no longer matches (the principal is signed). */
    char *t = strdup(oidc);
    char *at = strstr(t, "ci-deploy");
    at[0] = 'C';
    assert_int_equal(verify_str(t, TS_MS, &d), TG_ERR_RECEIPT_HASH);
    free(t);
    /* Removing the principal from a signed receipt breaks it too. */
    json_t *obj = parse_json(oidc);
    json_object_del(obj, "principal");
    assert_int_equal(tg_receipt_verify(&ring, obj, TS_MS, &d), TG_ERR_RECEIPT_HASH);
    json_decref(obj);

    /* Shape: an object with exactly a string subject and an optional string issuer. */
    static const struct {
        const char *value, *needle;
    } bad[] = {
        {"\"ci-deploy\"", "principal must be an object"},
        {"null", "is null"},
        {"{}", "string subject"},
        {"{\"subject\":5}", "string subject"},
        {"{\"subject\":\"\"}", "empty subject"},
        {"{\"subject\":\"a\",\"issuer\":\"\"}", "empty issuer"},
        {"{\"subject\":\"a\",\"issuer\":1}", "issuer must be a string"},
        {"{\"subject\":\"a\",\"role\":\"admin\"}", "only have the members"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *o = parse_json(oidc);
        json_t *pv = parse_json(bad[i].value);
        json_object_set_new(o, "principal", pv);
        tg_err_t rc = tg_receipt_verify(&ring, o, TS_MS, &d);
        if (rc != TG_ERR_RECEIPT_SHAPE || strstr(d.msg, bad[i].needle) == NULL) {
            fail_msg("principal %s: %s \"%s\"", bad[i].value, tg_err_name(rc), d.msg);
        }
        json_decref(o);
    }
    /* Bounded lengths, on both paths. */
    char big[TG_RECEIPT_PRINCIPAL_MAX + 2];
    memset(big, 's', sizeof big);
    big[TG_RECEIPT_PRINCIPAL_MAX + 1] = '\0';
    json_t *o = parse_json(oidc);
    json_object_set_new(o, "principal", json_pack("{s:s}", "subject", big));
    assert_int_equal(tg_receipt_verify(&ring, o, TS_MS, &d), TG_ERR_RECEIPT_SHAPE);
    json_decref(o);
    tg_receipt_fields_t bf = golden_fields();
    bf.principal_subject = TG_RSTR(big);
    expect_build_error(bf, "principal");
    bf.principal_subject = TG_RSTR("a");
    bf.principal_issuer = TG_RSTR(big);
    expect_build_error(bf, "issuer longer");
    bf.principal_subject.ptr = NULL;
    bf.principal_issuer = TG_RSTR("https://idp");
    expect_build_error(bf, "issuer but no subject");
    bf.principal_subject = TG_RSTR("a");
    bf.principal_issuer = TG_RSTR("https://idp/\xff");
    expect_build_error(bf, "principal is not valid UTF-8");
    bf.principal_subject = TG_RSTR("\xc3");
    bf.principal_issuer.ptr = NULL;
    expect_build_error(bf, "principal is not valid UTF-8");
    big[TG_RECEIPT_PRINCIPAL_MAX] = '\0'; /* the limit itself is fine */
    bf.principal_subject = TG_RSTR(big);
    bf.principal_issuer = TG_RSTR(big);
    char *maxed = sign_to_text(&bf);
    assert_int_equal(verify_str(maxed, TS_MS, &d), TG_OK);
    free(maxed);
    free(g);
    free(v1);
    free(tok);
    free(oidc);
}

static void test_verify_keys_and_text(void **state) {
    (void)state;
    size_t glen;
    char *g = golden("vectors/receipt/golden.json", &glen);
    tg_diag_t d;
    tg_keyring_t other;
    tg_key_t k;

    /* unknown key id: an empty ring, and a ring with a different key under another id */
    tg_keyring_init(&other);
    assert_int_equal(tg_receipt_verify_text(&other, g, glen, TS_MS, NULL, &d), TG_ERR_KEY_UNKNOWN);
    assert_non_null(strstr(d.msg, "trigguard-key-1"));
    assert_string_equal(tg_receipt_reason_code(TG_ERR_KEY_UNKNOWN), "unknown_key");
    uint8_t seed[32];
    memset(seed, 7, sizeof seed);
    assert_int_equal(tg_key_from_seed(&k, seed, "trigguard-key-2"), TG_OK);
    assert_int_equal(tg_keyring_add(&other, &k, TG_KEY_ACTIVE), TG_OK);
    assert_int_equal(tg_receipt_verify_text(&other, g, glen, TS_MS, NULL, &d), TG_ERR_KEY_UNKNOWN);
    /* the right id bound to the wrong public key: bad signature */
    tg_keyring_init(&other);
    assert_int_equal(tg_key_from_seed(&k, seed, "trigguard-key-1"), TG_OK);
    assert_int_equal(tg_keyring_add(&other, &k, TG_KEY_VERIFY_ONLY), TG_OK);
    assert_int_equal(tg_receipt_verify_text(&other, g, glen, TS_MS, NULL, &d),
                     TG_ERR_RECEIPT_SIGNATURE);
    assert_string_equal(tg_receipt_reason_code(TG_ERR_RECEIPT_SIGNATURE), "bad_signature");
    /* a rotated ring: active new key + the old key verify-only still verifies old receipts */
    tg_keyring_init(&other);
    assert_int_equal(tg_key_from_seed(&k, seed, "trigguard-key-2"), TG_OK);
    assert_int_equal(tg_keyring_add(&other, &k, TG_KEY_ACTIVE), TG_OK);
    assert_int_equal(tg_keyring_add(&other, &signer, TG_KEY_VERIFY_ONLY), TG_OK);
    assert_int_equal(tg_receipt_verify_text(&other, g, glen, TS_MS, NULL, &d), TG_OK);
    tg_keyring_wipe(&other);
    tg_key_wipe(&k);

    /* expiry is reported last and separately */
    assert_int_equal(tg_receipt_verify_text(&ring, g, glen, EXP_MS + 1000, NULL, &d),
                     TG_ERR_RECEIPT_EXPIRED);
    assert_non_null(strstr(d.msg, "authentic"));
    assert_string_equal(tg_receipt_reason_code(TG_ERR_RECEIPT_EXPIRED), "expired");
    /* an expired AND tampered receipt reports the tampering */
    char *t = tamper(g, "surface", 0, 'q');
    assert_int_equal(verify_str(t, EXP_MS + 1000, &d), TG_ERR_RECEIPT_HASH);
    assert_string_equal(tg_receipt_reason_code(TG_ERR_RECEIPT_HASH), "hash_mismatch");
    free(t);

    /* text-level failures come from the strict parser */
    assert_int_equal(verify_str("not json", TS_MS, &d), TG_ERR_JSON_SYNTAX);
    assert_int_equal(verify_str("{\"a\":\"1\",\"a\":\"2\"}", TS_MS, &d), TG_ERR_JSON_DUPLICATE_KEY);
    assert_int_equal(verify_str("{\"action\":\"\xff\"}", TS_MS, &d), TG_ERR_JSON_UTF8);
    /* a duplicate of a real member is refused, not silently resolved */
    char *dup = malloc(glen + 32);
    (void)snprintf(dup, glen + 32, "{\"surface\":\"x\",%s", g + 1);
    assert_int_equal(verify_str(dup, TS_MS, &d), TG_ERR_JSON_DUPLICATE_KEY);
    free(dup);
    size_t big_n = TG_RECEIPT_MAX_BYTES + 1;
    char *big = malloc(big_n + 1);
    memset(big, ' ', big_n);
    big[0] = '{';
    big[big_n - 1] = '}';
    big[big_n] = '\0';
    assert_int_equal(tg_receipt_verify_text(&ring, big, big_n, TS_MS, NULL, &d),
                     TG_ERR_JSON_TOO_LARGE);
    assert_string_equal(tg_receipt_reason_code(TG_ERR_JSON_TOO_LARGE), "malformed");
    assert_string_equal(tg_receipt_reason_code(TG_ERR_JSON_STRING_LONG), "malformed");
    assert_string_equal(tg_receipt_reason_code(TG_ERR_JSON_NAME_LONG), "malformed");
    assert_string_equal(tg_receipt_reason_code(TG_ERR_JSON_MEMBERS), "malformed");
    assert_string_equal(tg_receipt_reason_code(TG_ERR_LIMIT), "malformed");
    free(big);
    free(g);
}

/* Verifies `doc` with the golden receipt's text in place of every %s. */
static tg_err_t verify_wrapped(const char *doc, const char *g, tg_receipt_verdict_t *vd,
                               tg_diag_t *d) {
    tg_buf_t b;
    tg_buf_init(&b, 0);
    for (const char *p = doc; *p != '\0'; p++) {
        if (p[0] == '%' && p[1] == 's') {
            assert_int_equal(tg_buf_puts(&b, g), TG_OK);
            p++;
        } else {
            assert_int_equal(tg_buf_putc(&b, *p), TG_OK);
        }
    }
    tg_err_t rc = tg_receipt_verify_text(&ring, b.data, b.len, TS_MS, vd, d);
    tg_buf_free(&b);
    return rc;
}

/* The members of the golden receipt's evaluate response, before "receipt". */
#define RESP_HEAD(decision, reason, exec, req, pver)                                               \
    "{\"decision\":\"" decision "\",\"enforcement\":\"EXECUTED\",\"reason_code\":\"" reason        \
    "\",\"execution_id\":\"" exec "\",\"request_hash\":\"" req "\",\"policy_version\":\"" pver     \
    "\""
#define GOOD_HEAD RESP_HEAD("PERMIT", "NO_POLICY_VIOLATION", EXEC, REQ, "2026-11-30.1")

/* Issue 18: a whole /v1/evaluate or /execute response verifies as its receipt; anything
 * else beside "receipt" is refused with a message that says what. */
static void test_verify_documents(void **state) {
    (void)state;
    size_t glen;
    char *g = golden("vectors/receipt/golden.json", &glen);
    tg_diag_t d;
    tg_receipt_verdict_t vd;

    assert_int_equal(verify_wrapped("%s", g, &vd, &d), TG_OK);
    assert_ptr_equal(vd.key, tg_keyring_find(&ring, "trigguard-key-1", 15));
    assert_false(vd.by_anchor);
    assert_string_equal(vd.key_id, "trigguard-key-1");
    assert_string_equal(vd.expires_at, "2026-11-30T05:50:10.123Z");
    assert_int_equal(verify_wrapped("{\"receipt\":%s}", g, NULL, &d), TG_OK);
    assert_int_equal(verify_wrapped(GOOD_HEAD ",\"receipt\":%s}", g, &vd, &d), TG_OK);
    assert_non_null(vd.key);
    /* member order is free; ?explain=1 adds a trace; SPEC §11 members may come along */
    assert_int_equal(verify_wrapped("{\"receipt\":%s,\"trace\":{\"states\":[]},"
                                    "\"decision\":\"PERMIT\",\"enforcement\":\"EXECUTED\","
                                    "\"reason_code\":\"NO_POLICY_VIOLATION\",\"execution_id\":"
                                    "\"" EXEC "\",\"request_hash\":\"" REQ "\","
                                    "\"policy_version\":\"2026-11-30.1\"}",
                                    g, NULL, &d),
                     TG_OK);
    /* observe mode reports the effective decision beside the receipt's (SPEC §11.1) */
    assert_int_equal(
        verify_wrapped(
            RESP_HEAD("DENY", "OTHER_REASON", EXEC, REQ,
                      "2026-11-30.1") ",\"execution_mode\":\"observe\",\"would_decision\":"
                                      "\"PERMIT\",\"would_reason_code\":\"NO_POLICY_VIOLATION\","
                                      "\"receipt\":%s}",
            g, NULL, &d),
        TG_OK);
    /* ...and its would_* must be the receipt's decision and reason */
    assert_int_equal(
        verify_wrapped(
            RESP_HEAD("PERMIT", "OBSERVE_MODE", EXEC, REQ,
                      "2026-11-30.1") ",\"execution_mode\":\"observe\",\"would_decision\":"
                                      "\"DENY\",\"would_reason_code\":\"NO_POLICY_VIOLATION\","
                                      "\"receipt\":%s}",
            g, NULL, &d),
        TG_ERR_RECEIPT_SHAPE);
    assert_int_equal(
        verify_wrapped(
            RESP_HEAD("PERMIT", "OBSERVE_MODE", EXEC, REQ,
                      "2026-11-30.1") ",\"execution_mode\":\"observe\",\"would_decision\":"
                                      "\"PERMIT\",\"receipt\":%s}",
            g, NULL, &d),
        TG_ERR_RECEIPT_SHAPE);
    /* the parts still fail as they do alone */
    assert_int_equal(verify_wrapped(GOOD_HEAD ",\"receipt\":%s}", g, NULL, &d), TG_OK);
    char *t = tamper(g, "surface", 0, 'q');
    assert_int_equal(verify_wrapped(GOOD_HEAD ",\"receipt\":%s}", t, &vd, &d), TG_ERR_RECEIPT_HASH);
    assert_non_null(vd.key);
    free(t);
    tg_keyring_t empty;
    tg_keyring_init(&empty);
    char text[4096];
    (void)snprintf(text, sizeof text, GOOD_HEAD ",\"receipt\":%s}", g);
    assert_int_equal(tg_receipt_verify_text(&empty, text, strlen(text), TS_MS, &vd, &d),
                     TG_ERR_KEY_UNKNOWN);
    assert_null(vd.key);
    assert_int_equal(tg_receipt_verify_text(&ring, text, strlen(text), EXP_MS, &vd, &d),
                     TG_ERR_RECEIPT_EXPIRED);
    assert_string_equal(vd.expires_at, "2026-11-30T05:50:10.123Z");

    static const struct {
        const char *doc, *msg;
    } refused[] = {
        {GOOD_HEAD ",\"foo\":1,\"receipt\":%s}",
         "unknown member \"foo\" beside \"receipt\"; a verifier takes a receipt, {\"receipt\": "
         "{...}}, or a whole /v1/evaluate or /execute response"},
        {"{\"receipt\":%s,\"receipt2\":%s}", "unknown member \"receipt2\" beside \"receipt\""},
        {"{\"decision\":\"PERMIT\",\"receipt\":%s}",
         "\"receipt\" comes with evaluate-response members, but enforcement is missing"},
        {"{\"receipt\":\"x\"}", "member \"receipt\" is not an object"},
        {"{\"receipt\":[]}", "member \"receipt\" is not an object"},
        {GOOD_HEAD ",\"trace\":\"x\",\"receipt\":%s}", "response member trace must be an object"},
        {"{\"decision\":1,\"enforcement\":\"EXECUTED\",\"receipt\":%s}",
         "response member decision must be a string"},
        {RESP_HEAD("DENY", "NO_POLICY_VIOLATION", EXEC, REQ, "2026-11-30.1") ",\"receipt\":%s}",
         "the response's decision is not its receipt's decision: the receipt is not this "
         "response's"},
        {RESP_HEAD("PERMIT", "OTHER", EXEC, REQ, "2026-11-30.1") ",\"receipt\":%s}",
         "the response's reason_code is not its receipt's reasonCode"},
        {RESP_HEAD("PERMIT", "NO_POLICY_VIOLATION", EXEC2, REQ, "2026-11-30.1") ",\"receipt\":%s}",
         "the response's execution_id is not its receipt's executionId"},
        {RESP_HEAD("PERMIT", "NO_POLICY_VIOLATION", EXEC, POL, "2026-11-30.1") ",\"receipt\":%s}",
         "the response's request_hash is not its receipt's requestHash"},
        {RESP_HEAD("PERMIT", "NO_POLICY_VIOLATION", EXEC, REQ, "2026-11-30.2") ",\"receipt\":%s}",
         "the response's policy_version is not its receipt's policyVersion"},
        /* a SILENCE (or /decide) answer has no receipt at all */
        {"{\"decision\":\"SILENCE\",\"enforcement\":\"BLOCKED\",\"reason_code\":\"X\"}",
         "an evaluate response without a receipt (a SILENCE, or /decide): nothing to verify"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        d.msg[0] = '\0';
        tg_err_t rc = verify_wrapped(refused[i].doc, g, &vd, &d);
        if (rc != TG_ERR_RECEIPT_SHAPE || strstr(d.msg, refused[i].msg) == NULL) {
            fail_msg("%s: got %s \"%s\"", refused[i].doc, tg_err_name(rc), d.msg);
        }
        assert_null(vd.key);
    }
    /* the wrapper's own shape is checked before the receipt's signature */
    t = tamper(g, "authoritySignature", 0, 'A');
    (void)snprintf(text, sizeof text, RESP_HEAD("DENY", "X", EXEC, REQ, "v") ",\"receipt\":%s}", t);
    assert_int_equal(tg_receipt_verify_text(&ring, text, strlen(text), TS_MS, NULL, &d),
                     TG_ERR_RECEIPT_SHAPE);
    free(t);
    free(g);
}

/* `verify --key FILE`: a key named explicitly verifies by its signature whatever id the
 * receipt states; a keys.json entry still has to match by id. */
/* SPEC §11.2: approvalId and approvals, signed and verified on both paths; their absence
 * keeps v1 receipts byte for byte (test_principal's golden check). */
#define APPR_ID "appr_0123456789abcdef0123456789abcdef"
#define APPROVALS                                                                                  \
    "[{\"at\":\"2026-11-30T05:41:00.000Z\",\"decision\":\"approve\",\"subject\":\"alice\"},"       \
    "{\"at\":\"2026-11-30T05:42:00.000Z\",\"decision\":\"approve\",\"subject\":\"bob\"}]"

static void test_approvals(void **state) {
    (void)state;
    tg_diag_t d;
    tg_receipt_verdict_t vd;
    /* an enforce-mode ESCALATE: valid, pending_approval, never authorizes */
    tg_receipt_fields_t f = golden_fields();
    f.decision = TG_RSTR("ESCALATE");
    f.reason_code = TG_RSTR("APPROVAL_REQUIRED");
    expect_build_error(f, "decision ESCALATE needs approvalId");
    f.approval_id = TG_RSTR(APPR_ID);
    char *esc = sign_to_text(&f);
    assert_non_null(strstr(esc, "\"actorId\":\"agent.billing\",\"approvalId\":\"" APPR_ID
                                "\",\"authorityId\""));
    tg_err_t rc = tg_receipt_verify_text(&ring, esc, strlen(esc), TS_MS, &vd, &d);
    assert_int_equal(rc, TG_OK);
    assert_true(vd.escalate);
    assert_false(vd.permit);
    assert_false(tg_receipt_authorizes(rc, &vd));
    assert_string_equal(tg_receipt_verdict_reason(rc, &vd), "pending_approval");

    /* the consuming PERMIT: approvalId and approvals, embedded canonically */
    f = golden_fields();
    f.approval_id = TG_RSTR(APPR_ID);
    f.approvals = TG_RSTR(APPROVALS);
    char *pe = sign_to_text(&f);
    assert_non_null(
        strstr(pe, "\"approvalId\":\"" APPR_ID "\",\"approvals\":" APPROVALS ",\"authorityId\""));
    rc = tg_receipt_verify_text(&ring, pe, strlen(pe), TS_MS, &vd, &d);
    assert_int_equal(rc, TG_OK);
    assert_true(tg_receipt_authorizes(rc, &vd));
    assert_false(vd.escalate);
    assert_string_equal(tg_receipt_verdict_reason(rc, &vd), "valid");
    /* the generic signer gives the same bytes */
    const char *texts[] = {esc, pe};
    for (size_t i = 0; i < 2; i++) {
        json_t *body = parse_json(texts[i]);
        json_object_del(body, "receiptHash");
        json_object_del(body, "authoritySignature");
        json_object_del(body, "authorityKeyId");
        tg_buf_t generic;
        tg_buf_init(&generic, 0);
        assert_int_equal(tg_receipt_sign_json(&generic, NULL, &signer, body, &d), TG_OK);
        assert_string_equal(generic.data, texts[i]);
        tg_buf_free(&generic);
        json_decref(body);
    }
    /* the approvals are signed: changing a subject breaks the hash */
    char *t = strdup(pe);
    char *at = strstr(t, "alice");
    at[0] = 'A';
    assert_int_equal(verify_str(t, TS_MS, &d), TG_ERR_RECEIPT_HASH);
    free(t);

    /* builder: combinations and the approvals text */
    tg_receipt_fields_t b = golden_fields();
    b.approvals = TG_RSTR(APPROVALS);
    expect_build_error(b, "approvals is allowed only with approvalId on a PERMIT");
    b.approval_id = TG_RSTR(APPR_ID);
    b.decision = TG_RSTR("DENY");
    expect_build_error(b, "approvals is allowed only with approvalId on a PERMIT");
    b.decision = TG_RSTR("PERMIT");
    b.execution_mode = TG_RSTR("observe");
    expect_build_error(b, "not allowed with executionMode observe");
    b.execution_mode.ptr = NULL;
    b.approval_id = TG_RSTR("appr_0123");
    expect_build_error(b, "approvalId is not \"appr_\"");
    b.approval_id = TG_RSTR("appr_0123456789ABCDEF0123456789abcdef");
    expect_build_error(b, "approvalId is not \"appr_\"");
    b.approval_id = TG_RSTR(APPR_ID);
    static const struct {
        const char *text, *needle;
    } bad[] = {
        {"[]", "1..16 entries"},
        {"{}", "must be an array"},
        {"[1]", "exactly at, decision and subject"},
        {"[{\"at\":\"2026-11-30T05:41:00.000Z\",\"decision\":\"approve\"}]",
         "exactly at, decision and subject"},
        {"[{\"at\":\"2026-11-30T05:41:00Z\",\"decision\":\"approve\",\"subject\":\"a\"}]",
         "at of the form"},
        {"[{\"at\":\"2026-11-30T05:41:00.000Z\",\"decision\":\"deny\",\"subject\":\"a\"}]",
         "decision \"approve\""},
        {"[{\"at\":\"2026-11-30T05:41:00.000Z\",\"decision\":\"approve\",\"subject\":\"a b\"}]",
         "subject of 1..128"},
        {"[{\"at\":\"2026-11-30T05:41:00.000Z\",\"decision\":\"approve\",\"subject\":\"\"}]",
         "subject of 1..128"},
        {"[{\"at\":\"2026-11-30T05:42:00.000Z\",\"decision\":\"approve\",\"subject\":\"a\"},"
         "{\"at\":\"2026-11-30T05:41:00.000Z\",\"decision\":\"approve\",\"subject\":\"b\"}]",
         "review order"},
        {"[{\"at\":\"2026-11-30T05:41:00.000Z\",\"decision\":\"approve\",\"subject\":\"a\"},"
         "{\"at\":\"2026-11-30T05:41:00.000Z\",\"decision\":\"approve\",\"subject\":\"a\"}]",
         "distinct subjects"},
        {"[{\"subject\":\"a\",\"at\":\"2026-11-30T05:41:00.000Z\",\"decision\":\"approve\"}]",
         "canonical form"},
        {"[{\"at\":\"2026-11-30T05:41:00.000Z\", \"decision\":\"approve\",\"subject\":\"a\"}]",
         "canonical form"},
        {"[{\"at\":", "is not JSON"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        b.approvals = TG_RSTR(bad[i].text);
        expect_build_error(b, bad[i].needle);
    }
    /* 16 entries are fine, 17 are not */
    tg_buf_t many;
    tg_buf_init(&many, 0);
    for (int i = 0; i < 17; i++) {
        assert_int_equal(tg_buf_printf(&many,
                                       "%s{\"at\":\"2026-11-30T05:41:00.000Z\",\"decision\":"
                                       "\"approve\",\"subject\":\"s%02d\"}",
                                       i ? "," : "[", i),
                         TG_OK);
        if (i == 15) {
            assert_int_equal(tg_buf_putc(&many, ']'), TG_OK);
            b.approvals = (tg_receipt_str_t){many.data, many.len};
            char *sixteen = sign_to_text(&b);
            assert_int_equal(verify_str(sixteen, TS_MS, &d), TG_OK);
            free(sixteen);
            many.len--;
        }
    }
    assert_int_equal(tg_buf_putc(&many, ']'), TG_OK);
    b.approvals = (tg_receipt_str_t){many.data, many.len};
    expect_build_error(b, "1..16 entries");
    tg_buf_free(&many);

    /* verifier: the same rules over a parsed receipt */
    json_t *o = parse_json(esc);
    json_object_del(o, "approvalId");
    expect_shape(o, "decision ESCALATE needs approvalId");
    json_decref(o);
    o = parse_json(esc);
    json_object_set_new(o, "approvalId", json_string("appr_xyz"));
    expect_shape(o, "member approvalId is not");
    json_decref(o);
    o = parse_json(esc);
    json_object_set_new(o, "approvals", parse_json(APPROVALS));
    expect_shape(o, "approvals is allowed only with approvalId on a PERMIT");
    json_decref(o);
    o = parse_json(esc);
    json_object_set_new(o, "executionMode", json_string("observe"));
    expect_shape(o, "not allowed with executionMode observe");
    json_decref(o);
    o = parse_json(pe);
    json_object_set_new(o, "approvals", json_string(APPROVALS));
    expect_shape(o, "member approvals must be an array");
    json_decref(o);
    o = parse_json(pe);
    json_object_set_new(o, "approvals",
                        parse_json("[{\"at\":\"2026-11-30T05:41:00.000Z\","
                                   "\"decision\":\"approve\",\"subject\":\"a\","
                                   "\"x\":1}]"));
    expect_shape(o, "exactly at, decision and subject");
    json_decref(o);
    o = parse_json(pe);
    json_object_del(o, "approvalId");
    expect_shape(o, "approvals is allowed only with approvalId on a PERMIT");
    json_decref(o);
    /* an observe-mode ESCALATE needs no approval (it opens none) */
    f = golden_fields();
    f.decision = TG_RSTR("ESCALATE");
    f.reason_code = TG_RSTR("APPROVAL_REQUIRED");
    f.execution_mode = TG_RSTR("observe");
    char *obs = sign_to_text(&f);
    rc = tg_receipt_verify_text(&ring, obs, strlen(obs), TS_MS, &vd, &d);
    assert_int_equal(rc, TG_OK);
    assert_string_equal(tg_receipt_verdict_reason(rc, &vd), "observe_mode");
    assert_false(tg_receipt_authorizes(rc, &vd));

    /* a response's approval_id must be its receipt's approvalId */
    assert_int_equal(
        verify_wrapped("{\"decision\":\"ESCALATE\",\"enforcement\":"
                       "\"PENDING_APPROVAL\",\"reason_code\":\"APPROVAL_REQUIRED\","
                       "\"execution_id\":\"" EXEC "\",\"request_hash\":\"" REQ
                       "\",\"policy_version\":\"2026-11-30.1\",\"approval_id\":\"" APPR_ID
                       "\",\"approval\":{\"status\":\"pending\"},\"receipt\":%s}",
                       esc, &vd, &d),
        TG_OK);
    assert_true(vd.escalate);
    assert_int_equal(verify_wrapped("{\"decision\":\"ESCALATE\",\"enforcement\":"
                                    "\"PENDING_APPROVAL\",\"reason_code\":\"APPROVAL_REQUIRED\","
                                    "\"execution_id\":\"" EXEC "\",\"request_hash\":\"" REQ
                                    "\",\"policy_version\":\"2026-11-30.1\",\"approval_id\":"
                                    "\"appr_ffffffffffffffffffffffffffffffff\",\"receipt\":%s}",
                                    esc, &vd, &d),
                     TG_ERR_RECEIPT_SHAPE);
    assert_non_null(strstr(d.msg, "approval_id is not its receipt's approvalId"));
    size_t glen;
    char *g = golden("vectors/receipt/golden.json", &glen);
    assert_int_equal(
        verify_wrapped(GOOD_HEAD ",\"approval_id\":\"" APPR_ID "\",\"receipt\":%s}", g, &vd, &d),
        TG_ERR_RECEIPT_SHAPE);
    free(g);
    free(obs);
    free(esc);
    free(pe);
}

static void test_verify_trust_anchor(void **state) {
    (void)state;
    size_t glen;
    char *g = golden("vectors/receipt/golden.json", &glen);
    tg_diag_t d;
    tg_receipt_verdict_t vd;
    tg_keyring_t r;
    tg_key_t pub, wrong;
    uint8_t seed[32];
    memset(seed, 7, sizeof seed);

    /* the signer's public key under its derived id, as `openssl pkey -pubout` leaves it */
    assert_int_equal(tg_key_from_public(&pub, signer.pk, NULL), TG_OK);
    assert_string_not_equal(pub.key_id, "trigguard-key-1");
    tg_keyring_init(&r);
    assert_int_equal(tg_keyring_add(&r, &pub, TG_KEY_VERIFY_ONLY), TG_OK);
    assert_int_equal(tg_receipt_verify_text(&r, g, glen, TS_MS, &vd, &d), TG_ERR_KEY_UNKNOWN);
    assert_null(strstr(d.msg, "trust-anchor"));
    tg_keyring_init(&r);
    assert_int_equal(tg_keyring_add_anchor(&r, &pub), TG_OK);
    assert_true(r.entries[0].anchor);
    assert_int_equal(r.entries[0].status, TG_KEY_VERIFY_ONLY);
    assert_int_equal(tg_receipt_verify_text(&r, g, glen, TS_MS, &vd, &d), TG_OK);
    assert_ptr_equal(vd.key, &r.entries[0].key);
    assert_true(vd.by_anchor);
    assert_string_equal(vd.key_id, "trigguard-key-1");
    /* an anchor whose id is the receipt's is just the named key */
    tg_keyring_t named;
    tg_keyring_init(&named);
    assert_int_equal(tg_keyring_add_anchor(&named, &signer), TG_OK);
    assert_false(named.entries[0].key.has_secret);
    assert_int_equal(tg_receipt_verify_text(&named, g, glen, TS_MS, &vd, &d), TG_OK);
    assert_false(vd.by_anchor);
    tg_keyring_wipe(&named);
    /* the later checks still apply to a receipt an anchor signed */
    char *t = tamper(g, "surface", 0, 'q');
    assert_int_equal(tg_receipt_verify_text(&r, t, strlen(t), TS_MS, &vd, &d), TG_ERR_RECEIPT_HASH);
    assert_true(vd.by_anchor);
    free(t);
    assert_int_equal(tg_receipt_verify_text(&r, g, glen, EXP_MS, &vd, &d), TG_ERR_RECEIPT_EXPIRED);
    assert_true(vd.by_anchor);
    /* the receipt's id names a key that did not sign it, and the anchor did: the anchor */
    assert_int_equal(tg_key_from_seed(&wrong, seed, "trigguard-key-1"), TG_OK);
    tg_keyring_init(&r);
    assert_int_equal(tg_keyring_add(&r, &wrong, TG_KEY_ACTIVE), TG_OK);
    assert_int_equal(tg_keyring_add_anchor(&r, &pub), TG_OK);
    assert_true(r.entries[1].anchor && !r.entries[0].anchor);
    assert_int_equal(tg_receipt_verify_text(&r, g, glen, TS_MS, &vd, &d), TG_OK);
    assert_true(vd.by_anchor);
    assert_ptr_equal(vd.key, &r.entries[1].key);
    /* an anchor that did not sign it: unknown key (no such id) or bad signature (the id's
     * key did not sign it either) */
    tg_keyring_init(&r);
    tg_key_t other;
    memset(seed, 9, sizeof seed);
    assert_int_equal(tg_key_from_seed(&other, seed, NULL), TG_OK);
    assert_int_equal(tg_keyring_add_anchor(&r, &other), TG_OK);
    assert_int_equal(tg_receipt_verify_text(&r, g, glen, TS_MS, &vd, &d), TG_ERR_KEY_UNKNOWN);
    assert_non_null(strstr(d.msg, "no trust-anchor key"));
    assert_null(vd.key);
    assert_int_equal(tg_keyring_add(&r, &wrong, TG_KEY_VERIFY_ONLY), TG_OK);
    assert_int_equal(tg_receipt_verify_text(&r, g, glen, TS_MS, &vd, &d), TG_ERR_RECEIPT_SIGNATURE);
    assert_non_null(strstr(d.msg, "nor by any trust-anchor key"));
    /* the ring's duplicate rules hold for anchors too */
    assert_int_equal(tg_keyring_add_anchor(&r, &other), TG_ERR_EXISTS);
    tg_keyring_wipe(&r);
    tg_key_wipe(&pub);
    tg_key_wipe(&wrong);
    tg_key_wipe(&other);
    free(g);
}

static void test_reason_codes(void **state) {
    (void)state;
    assert_string_equal(tg_receipt_reason_code(TG_OK), "valid");
    assert_string_equal(tg_receipt_reason_code(TG_ERR_RECEIPT_SHAPE), "malformed");
    assert_string_equal(tg_receipt_reason_code(TG_ERR_JSON_SYNTAX), "malformed");
    assert_string_equal(tg_receipt_reason_code(TG_ERR_JSON_DUPLICATE_KEY), "malformed");
    assert_string_equal(tg_receipt_reason_code(TG_ERR_KEY_UNKNOWN), "unknown_key");
    assert_string_equal(tg_receipt_reason_code(TG_ERR_RECEIPT_SIGNATURE), "bad_signature");
    assert_string_equal(tg_receipt_reason_code(TG_ERR_RECEIPT_HASH), "hash_mismatch");
    assert_string_equal(tg_receipt_reason_code(TG_ERR_RECEIPT_EXPIRED), "expired");
    assert_string_equal(tg_receipt_reason_code(TG_ERR_NOMEM), "error");
    assert_string_equal(tg_receipt_reason_code((tg_err_t)999), "error");
}

/* ---- identifiers ------------------------------------------------------------------------ */

/* SPEC §5's formula written out, for a key: exec_ + 32 hex of SHA-256(t 0 s 0 rh 0 key). */
static void spec_execution_id(char out[TG_RECEIPT_EXEC_ID_LEN + 1], const char *t, const char *sf,
                              const char *rh, const char *key, size_t key_len) {
    unsigned char in[512];
    size_t n = 0;
    size_t tl = strlen(t), sl = strlen(sf), rl = strlen(rh);
    assert_true(tl + sl + rl + key_len + 3 <= sizeof in);
    memcpy(in + n, t, tl);
    n += tl;
    in[n++] = 0;
    memcpy(in + n, sf, sl);
    n += sl;
    in[n++] = 0;
    memcpy(in + n, rh, rl);
    n += rl;
    in[n++] = 0;
    memcpy(in + n, key, key_len);
    n += key_len;
    uint8_t h[32];
    crypto_hash_sha256(h, in, n);
    memcpy(out, "exec_", 5);
    tg_hex(out + 5, h, 16);
}

static void test_execution_id(void **state) {
    (void)state;
    char id[TG_RECEIPT_EXEC_ID_LEN + 1], id2[TG_RECEIPT_EXEC_ID_LEN + 1];
    char want[TG_RECEIPT_EXEC_ID_LEN + 1];
    /* with an idempotency key: SPEC §5 byte for byte (the vectors' ids were made so; EXEC2's
     * key happens to be spelled "nonce-1") */
    assert_int_equal(
        tg_receipt_execution_id(id, "acme", 4, "payments.charge", 15, REQ, 64, "tx_9921", 7),
        TG_OK);
    assert_string_equal(id, EXEC);
    spec_execution_id(want, "acme", "payments.charge", REQ, "tx_9921", 7);
    assert_string_equal(id, want);
    assert_int_equal(
        tg_receipt_execution_id(id, "acme", 4, "deploy.release", 14, REQ, 64, "nonce-1", 7), TG_OK);
    assert_string_equal(id, EXEC2);
    /* keys are bytes: one of 255 bytes, with control characters, non-ASCII */
    char key[255];
    for (size_t i = 0; i < sizeof key; i++) {
        key[i] = (char)(1 + i % 255);
    }
    assert_int_equal(
        tg_receipt_execution_id(id, "acme", 4, "payments.charge", 15, REQ, 64, key, sizeof key),
        TG_OK);
    spec_execution_id(want, "acme", "payments.charge", REQ, key, sizeof key);
    assert_string_equal(id, want);
    /* the separators matter: "acm" + "e..." is another id */
    assert_int_equal(
        tg_receipt_execution_id(id2, "acm", 3, "epayments.charge", 16, REQ, 64, "tx_9921", 7),
        TG_OK);
    assert_string_not_equal(id2, EXEC);
    /* no key (a nonce, or nothing): 0x00 then 128 random bits, so two calls differ */
    assert_int_equal(
        tg_receipt_execution_id(id, "acme", 4, "payments.charge", 15, REQ, 64, NULL, 0), TG_OK);
    assert_int_equal(
        tg_receipt_execution_id(id2, "acme", 4, "payments.charge", 15, REQ, 64, NULL, 0), TG_OK);
    assert_int_equal(strlen(id), TG_RECEIPT_EXEC_ID_LEN);
    assert_memory_equal(id, "exec_", 5);
    assert_string_not_equal(id, id2);
    /* What keeps the two cases apart: no part may be empty or hold the 0x00 that starts the
     * random case's suffix or separates the parts. */
    assert_int_equal(
        tg_receipt_execution_id(id, "acme", 4, "payments.charge", 15, REQ, 64, "k\0x", 3),
        TG_ERR_INVALID_ARG);
    assert_string_equal(id, "");
    assert_int_equal(
        tg_receipt_execution_id(id, "acme", 4, "payments.charge", 15, REQ, 64, "\0", 1),
        TG_ERR_INVALID_ARG);
    assert_int_equal(tg_receipt_execution_id(id, "acme", 4, "payments.charge", 15, REQ, 64, "", 0),
                     TG_ERR_INVALID_ARG);
    assert_int_equal(
        tg_receipt_execution_id(id, "ac\0e", 4, "payments.charge", 15, REQ, 64, "k", 1),
        TG_ERR_INVALID_ARG);
    assert_int_equal(tg_receipt_execution_id(id, "", 0, "payments.charge", 15, REQ, 64, "k", 1),
                     TG_ERR_INVALID_ARG);
    assert_int_equal(tg_receipt_execution_id(id, "acme", 4, "pay\0", 4, REQ, 64, NULL, 0),
                     TG_ERR_INVALID_ARG);
    assert_int_equal(tg_receipt_execution_id(id, "acme", 4, "p", 1, REQ, 63, NULL, 0),
                     TG_ERR_INVALID_ARG);
    assert_int_equal(tg_receipt_execution_id(id, "acme", 4, "p", 1,
                                             "3F3DDACE61D643B2F4306F20AB43E2467E0511DC1DC04268D35D"
                                             "053C625F4B85",
                                             64, NULL, 0),
                     TG_ERR_INVALID_ARG);
}

static void test_protocol_fingerprint(void **state) {
    (void)state;
    char fp[65];
    char canon[256];
    uint8_t h[32];
    char hex[65];
    assert_int_equal(tg_receipt_protocol_fingerprint(fp, POL), TG_OK);
    /* independent of the jansson/canon path: the literal canonical text */
    (void)snprintf(canon, sizeof canon,
                   "{\"engineVersion\":\"%s\",\"policyHash\":\"%s\",\"protocolVersion\":\"%s\"}",
                   TG_ENGINE_VERSION, POL, TG_PROTOCOL_VERSION);
    tg_sha256(h, canon, strlen(canon));
    tg_hex(hex, h, 32);
    assert_string_equal(fp, hex);
    if (strcmp(TG_ENGINE_VERSION, "trigguard/0.1.0") == 0) {
        assert_string_equal(fp, FP); /* python3 hashlib known answer */
    }
    assert_int_equal(tg_receipt_protocol_fingerprint(fp, "abc"), TG_ERR_INVALID_ARG);
    assert_string_equal(fp, "");
    assert_int_equal(tg_receipt_protocol_fingerprint(fp, NULL), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_receipt_protocol_fingerprint(
                         fp, "7DA50284AFECD9E8D50DA934D3EFA11B7B63727F9D4779E3BDF812B2F377E2F1"),
                     TG_ERR_INVALID_ARG);
}

/* ---- allocation failures (jansson's allocator hook) ----------------------------------- */

static int allocs_left;

static void *failing_malloc(size_t n) {
    if (allocs_left <= 0) {
        return NULL;
    }
    allocs_left--;
    return malloc(n);
}

static void test_out_of_memory(void **state) {
    (void)state;
    size_t glen, blen;
    char *g = golden("vectors/receipt/golden.json", &glen);
    char *body_text = slurp("vectors/receipt/golden-body.json", &blen);
    json_t *receipt = parse_json(g);
    json_t *body = parse_json(body_text);
    tg_buf_t out;
    tg_diag_t d;
    char fp[65];
    tg_buf_init(&out, 0);
    json_set_alloc_funcs(failing_malloc, free);
    for (int budget = 0; budget < 4; budget++) {
        allocs_left = budget;
        assert_int_equal(tg_receipt_verify(&ring, receipt, TS_MS, &d), TG_ERR_NOMEM);
        allocs_left = budget;
        assert_int_equal(tg_receipt_sign_json(&out, NULL, &signer, body, &d), TG_ERR_NOMEM);
        assert_int_equal(out.len, 0);
        allocs_left = budget;
        assert_int_equal(tg_receipt_protocol_fingerprint(fp, POL), TG_ERR_NOMEM);
    }
    /* the parser reports some allocation failures as syntax errors (see canon.h/parse.c):
     * a rejection either way */
    allocs_left = 0;
    tg_err_t rc = tg_receipt_verify_text(&ring, g, glen, TS_MS, NULL, &d);
    assert_true(rc == TG_ERR_NOMEM || rc == TG_ERR_JSON_SYNTAX);
    /* with enough memory everything works again */
    allocs_left = 1 << 20;
    assert_int_equal(tg_receipt_verify(&ring, receipt, TS_MS, &d), TG_OK);
    assert_int_equal(tg_receipt_protocol_fingerprint(fp, POL), TG_OK);
    json_set_alloc_funcs(malloc, free);
    json_decref(receipt);
    json_decref(body);
    tg_buf_free(&out);
    free(g);
    free(body_text);
}

/* ---- clock -------------------------------------------------------------------------------- */

static void test_time_format_parse(void **state) {
    (void)state;
    char s[TG_TIME_ISO_LEN + 1];
    int64_t ms;
    assert_int_equal(tg_time_format_ms(s, TS_MS), TG_OK);
    assert_string_equal(s, "2026-11-30T05:40:10.123Z");
    assert_int_equal(tg_time_format_ms(s, 0), TG_OK);
    assert_string_equal(s, "1970-01-01T00:00:00.000Z");
    assert_int_equal(tg_time_format_ms(s, TG_TIME_MAX_MS), TG_OK);
    assert_string_equal(s, "9999-12-31T23:59:59.999Z");
    assert_int_equal(tg_time_format_ms(s, 951782400000), TG_OK); /* leap day of 2000 */
    assert_string_equal(s, "2000-02-29T00:00:00.000Z");
    assert_int_equal(tg_time_format_ms(s, 4107542399999), TG_OK);
    assert_string_equal(s, "2100-02-28T23:59:59.999Z");
    assert_int_equal(tg_time_format_ms(s, -1), TG_ERR_INVALID_ARG);
    assert_string_equal(s, "");
    assert_int_equal(tg_time_format_ms(s, TG_TIME_MAX_MS + 1), TG_ERR_INVALID_ARG);

    assert_int_equal(tg_time_parse_ms(&ms, "2026-11-30T05:40:10.123Z", 24), TG_OK);
    assert_int_equal(ms, TS_MS);
    assert_int_equal(tg_time_parse_ms(&ms, "9999-12-31T23:59:59.999Z", 24), TG_OK);
    assert_int_equal(ms, TG_TIME_MAX_MS);
    assert_int_equal(tg_time_parse_ms(&ms, "2000-02-29T00:00:00.000Z", 24), TG_OK);
    assert_int_equal(ms, 951782400000);
    /* round trip over a spread of instants */
    for (int64_t t = 0; t < TG_TIME_MAX_MS; t += 12345678901LL) {
        assert_int_equal(tg_time_format_ms(s, t), TG_OK);
        assert_int_equal(tg_time_parse_ms(&ms, s, 24), TG_OK);
        assert_int_equal(ms, t);
    }
    static const char *const bad[] = {
        "2026-11-30T05:40:10.123",  "2026-11-30T05:40:10.123z", "2026-11-30t05:40:10.123Z",
        "2026-13-30T05:40:10.123Z", "2026-00-30T05:40:10.123Z", "2026-11-31T05:40:10.123Z",
        "2026-02-29T05:40:10.123Z", "2100-02-29T05:40:10.123Z", "2026-11-00T05:40:10.123Z",
        "2026-11-30T24:00:00.000Z", "2026-11-30T05:60:10.123Z", "2026-11-30T05:40:60.123Z",
        "1969-12-31T23:59:59.999Z", "2026-11-30T05:40:10.12aZ", "+026-11-30T05:40:10.123Z",
        "2026-11-30T05:40:10,123Z", "2026-1-30T05:40:10.1234Z", "2026-11-30 05:40:10.123Z",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ms = 42;
        if (tg_time_parse_ms(&ms, bad[i], strlen(bad[i])) != TG_ERR_INVALID_ARG) {
            fail_msg("accepted %s", bad[i]);
        }
        assert_int_equal(ms, 42);
    }
    assert_int_equal(tg_time_parse_ms(&ms, "2026-11-30T05:40:10.123Z", 23), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_time_parse_ms(&ms, NULL, 24), TG_ERR_INVALID_ARG);

    int64_t now = tg_clock_now_ms();
    assert_true(now > TS_MS - INT64_C(86400000) * 365 * 2); /* sane wall clock */
    int64_t a = tg_clock_mono_ns(), b = tg_clock_mono_ns();
    assert_true(b >= a && a > 0);
}

/* `verify --now` takes any RFC 3339 section 5.6 date-time; receipts keep their one form. */
static void test_time_parse_rfc3339(void **state) {
    (void)state;
    static const struct {
        const char *text;
        int64_t ms;
    } good[] = {
        {"2026-11-30T05:40:10.123Z", TS_MS},
        {"2026-11-30t05:40:10.123z", TS_MS},
        {"2026-11-30T05:40:10.123+00:00", TS_MS},
        {"2026-11-30T05:40:10.123-00:00", TS_MS},
        {"2026-11-30T07:40:10.123+02:00", TS_MS},
        {"2026-11-30T00:10:10.123-05:30", TS_MS},
        {"2026-11-30T05:40:10Z", TS_MS - 123},
        {"2026-11-30T05:40:10.1Z", TS_MS - 23},
        {"2026-11-30T05:40:10.12Z", TS_MS - 3},
        {"2026-11-30T05:40:10.1239Z", TS_MS},            /* truncated, not rounded */
        {"2026-11-30T05:40:10.123999999999999Z", TS_MS}, /* any number of digits */
        {"2026-12-01T05:39:10.123+23:59", TS_MS},        /* the largest offset */
        {"2026-11-29T05:41:10.123-23:59", TS_MS},
        {"1970-01-01T00:00:00Z", 0},
        {"1970-01-01T01:00:00+01:00", 0},
        {"1969-12-31T23:00:00-01:00", 0}, /* UTC is 1970 */
        {"9999-12-31T23:59:59.999Z", TG_TIME_MAX_MS},
        {"2000-02-29T00:00:00Z", 951782400000},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        int64_t ms = -7;
        if (tg_time_parse_rfc3339_ms(&ms, good[i].text, strlen(good[i].text)) != TG_OK) {
            fail_msg("refused %s", good[i].text);
        }
        if (ms != good[i].ms) {
            fail_msg("%s: got %lld, want %lld", good[i].text, (long long)ms, (long long)good[i].ms);
        }
    }
    static const char *const bad[] = {
        "",
        "2026-11-30",                 /* a date alone */
        "2026-11-30T05:40:10",        /* no offset */
        "2026-11-30T05:40:10.123",    /* no offset */
        "2026-11-30 05:40:10Z",       /* space for T: only a note in RFC 3339 */
        "2026-11-30T05:40Z",          /* no seconds */
        "2026-11-30T05:40:10.Z",      /* a dot without digits */
        "2026-11-30T05:40:10,123Z",   /* comma fraction (ISO 8601, not RFC 3339) */
        "2026-11-30T05:40:10.123ZZ",  /* trailing text */
        "2026-11-30T05:40:10.123Z ",  /* trailing space */
        "2026-11-30T05:40:10+0200",   /* offset without colon */
        "2026-11-30T05:40:10+02",     /* offset without minutes */
        "2026-11-30T05:40:10+24:00",  /* offset hour out of range */
        "2026-11-30T05:40:10+02:60",  /* offset minute out of range */
        "2026-11-30T05:40:10 +02:00", /* space before the offset */
        "2026-11-30T05:40:10UTC",     /* a zone name */
        "2026-11-30T05:40:60Z",       /* leap second: no Unix time */
        "2026-11-30T24:00:00Z",       /* 24:00 */
        "2026-11-30T05:60:00Z",
        "2026-02-29T05:40:10Z", /* not a leap year */
        "2026-13-01T05:40:10Z",
        "2026-00-01T05:40:10Z",
        "2026-11-31T05:40:10Z",
        "2026-11-00T05:40:10Z",
        "26-11-30T05:40:10Z",            /* two-digit year */
        "+2026-11-30T05:40:10Z",         /* signed year */
        "2026-1-30T05:40:10.000Z",       /* one-digit month */
        "2026-11-30T5:40:10.000Z",       /* one-digit hour */
        "1969-12-31T23:59:59.999Z",      /* before the Unix epoch */
        "1970-01-01T00:30:00+01:00",     /* before the epoch once in UTC */
        "9999-12-31T23:59:59.999-00:01", /* after 9999 once in UTC */
        "2026-11-30T05:40:10.12a3Z",
        "２026-11-30T05:40:10Z", /* not ASCII digits */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t ms = 42;
        if (tg_time_parse_rfc3339_ms(&ms, bad[i], strlen(bad[i])) != TG_ERR_INVALID_ARG) {
            fail_msg("accepted \"%s\"", bad[i]);
        }
        assert_int_equal(ms, 42);
    }
    int64_t ms = 42;
    /* the length is the caller's: a prefix of a good time is not read past n */
    assert_int_equal(tg_time_parse_rfc3339_ms(&ms, "2026-11-30T05:40:10Z", 19), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_time_parse_rfc3339_ms(&ms, "2026-11-30T05:40:10.5Z", 21),
                     TG_ERR_INVALID_ARG);
    assert_int_equal(tg_time_parse_rfc3339_ms(&ms, NULL, 20), TG_ERR_INVALID_ARG);
    assert_int_equal(ms, 42);
    /* the strict receipt parser still refuses what --now takes */
    assert_int_equal(tg_time_parse_ms(&ms, "2026-11-30T07:40:10.123+02:00", 29),
                     TG_ERR_INVALID_ARG);
}

int main(void) {
    /* clang-format off */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rfc8032_vectors),
        cmocka_unit_test(test_golden_fast_builder),
        cmocka_unit_test(test_golden_generic_path),
        cmocka_unit_test(test_golden_minimal_fast),
        cmocka_unit_test(test_fast_equals_generic),
        cmocka_unit_test(test_builder_rejects),
        cmocka_unit_test(test_sign_json_rejects),
        cmocka_unit_test(test_verify_tampering),
        cmocka_unit_test(test_verify_shape),
        cmocka_unit_test(test_verify_keys_and_text),
        cmocka_unit_test(test_principal),
        cmocka_unit_test(test_reason_codes),
        cmocka_unit_test(test_execution_id),
        cmocka_unit_test(test_protocol_fingerprint),
        cmocka_unit_test(test_out_of_memory),
        cmocka_unit_test(test_time_format_parse),
        cmocka_unit_test(test_time_parse_rfc3339),
        cmocka_unit_test(test_verify_documents),
        cmocka_unit_test(test_verify_trust_anchor),
        cmocka_unit_test(test_approvals),
    };
    /* clang-format on */
    return cmocka_run_group_tests(tests, setup, teardown);
}
