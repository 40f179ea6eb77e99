/* test_receipt_batch.c — batch-signed receipts (SPEC §12, receipt.h "Two kinds"): the hashed
 * form, the transparency member, verification against a log key, and the five mutation
 * classes of issue 23 (proof hash, index, tree size, checkpoint re-signed, receipt field). */
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
#include "trigguard/keys.h"
#include "trigguard/note.h"
#include "trigguard/receipt.h"
#include "trigguard/tlog.h"

#define REQ "3f3ddace61d643b2f4306f20ab43e2467e0511dc1dc04268d35d053c625f4b85"
#define POL "7da50284afecd9e8d50da934d3efa11b7b63727f9d4779e3bdf812b2f377e2f1"
#define FP "51bb6cf740039831a5fba37d7fbdc5074d9de5775883c8d6076bb6babf98cdcf"
#define TS_MS INT64_C(1796017210123) /* 2026-11-30T05:40:10.123Z */
#define EXP_MS (TS_MS + 600000)
#define ORIGIN "trigguard.test/log"
#define NLEAVES 13 /* not a power of two: proofs of several shapes */

static tg_key_t signer;            /* a receipt key (the signed kind, for comparison) */
static tg_note_signer_t log_key;   /* the log's key */
static tg_note_signer_t other_key; /* another key of the same name */
static tg_keyring_t ring;          /* the receipt key and the log key, public */

/* The log of the test: NLEAVES batch receipts, every stored hash kept in memory. */
static struct {
    char *hashed[NLEAVES]; /* each receipt's hashed form (NUL-terminated) */
    uint8_t entry[NLEAVES][32];
    tg_tlog_hash_t stored[2 * NLEAVES][NLEAVES]; /* [level][index], a generous square */
    bool have[2 * NLEAVES][NLEAVES];
    tg_tlog_hash_t root;
    char note[1024];
    size_t note_len;
} lg;

static tg_err_t store_hash(void *ctx, unsigned level, uint64_t index, const tg_tlog_hash_t *h) {
    (void)ctx;
    assert_true(level < 2 * NLEAVES && index < NLEAVES);
    lg.stored[level][index] = *h;
    lg.have[level][index] = true;
    return TG_OK;
}

static tg_err_t read_hash(void *ctx, unsigned level, uint64_t index, tg_tlog_hash_t *out) {
    (void)ctx;
    if (level >= 2 * NLEAVES || index >= NLEAVES || !lg.have[level][index]) {
        return TG_ERR_NOT_FOUND;
    }
    *out = lg.stored[level][index];
    return TG_OK;
}

static tg_receipt_fields_t fields_for(int i, char exec_id[TG_RECEIPT_EXEC_ID_LEN + 1]) {
    tg_receipt_fields_t f;
    memset(&f, 0, sizeof f);
    (void)snprintf(exec_id, TG_RECEIPT_EXEC_ID_LEN + 1, "exec_%032x", (unsigned)i + 1);
    f.execution_id = (tg_receipt_str_t){exec_id, TG_RECEIPT_EXEC_ID_LEN};
    f.authority_id = TG_RSTR("trigguard-local");
    f.tenant_id = TG_RSTR("acme");
    f.surface = TG_RSTR("payments.charge");
    f.action = TG_RSTR("transfer_funds");
    f.actor_id = TG_RSTR("agent.billing");
    f.decision = TG_RSTR(i % 3 == 1 ? "DENY" : "PERMIT");
    f.reason_code = TG_RSTR("NO_POLICY_VIOLATION");
    f.request_hash = TG_RSTR(REQ);
    f.policy_version = TG_RSTR("2026-11-30.1");
    f.policy_hash = TG_RSTR(POL);
    f.protocol_fingerprint = TG_RSTR(FP);
    f.engine_version = TG_RSTR("trigguard/0.1.0");
    f.timestamp_ms = TS_MS;
    f.expires_at_ms = EXP_MS;
    return f;
}

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
    seed[0] = 0xaa;
    if (tg_note_signer_from_seed(&log_key, ORIGIN, strlen(ORIGIN), seed) != TG_OK) {
        return -1;
    }
    seed[0] = 0xbb;
    if (tg_note_signer_from_seed(&other_key, ORIGIN, strlen(ORIGIN), seed) != TG_OK) {
        return -1;
    }
    tg_keyring_init(&ring);
    if (tg_keyring_add(&ring, &pub, TG_KEY_VERIFY_ONLY) != TG_OK ||
        tg_keyring_add_log(&ring, &log_key.pub) != TG_OK) {
        return -1;
    }
    /* the log: every receipt's hashed form, its entry = receiptHash, the tree, a checkpoint */
    tg_tlog_range_t range;
    tg_tlog_range_init(&range);
    memset(&lg, 0, sizeof lg);
    for (int i = 0; i < NLEAVES; i++) {
        char id[TG_RECEIPT_EXEC_ID_LEN + 1];
        tg_receipt_fields_t f = fields_for(i, id);
        tg_receipt_signed_t info;
        tg_buf_t out;
        tg_buf_init(&out, 0);
        if (tg_receipt_write_hashed(&out, &info, &f, NULL) != TG_OK) {
            return -1;
        }
        lg.hashed[i] = strdup((const char *)out.data);
        memcpy(lg.entry[i], info.hash, 32);
        tg_buf_free(&out);
        tg_tlog_hash_t leaf;
        tg_tlog_leaf_hash(&leaf, info.hash, 32);
        if (tg_tlog_range_append(&range, &leaf, store_hash, NULL) != TG_OK) {
            return -1;
        }
    }
    tg_tlog_range_root(&range, &lg.root);
    char body[TG_CHECKPOINT_BODY_MAX];
    size_t blen = 0;
    if (tg_checkpoint_format(body, sizeof body, &blen, ORIGIN, strlen(ORIGIN), NLEAVES,
                             lg.root.h) != TG_OK ||
        tg_note_sign(lg.note, sizeof lg.note, &lg.note_len, body, blen, &log_key) != TG_OK) {
        return -1;
    }
    tg_key_wipe(&pub);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    for (int i = 0; i < NLEAVES; i++) {
        free(lg.hashed[i]);
    }
    tg_key_wipe(&signer);
    tg_note_signer_wipe(&log_key);
    tg_note_signer_wipe(&other_key);
    tg_keyring_wipe(&ring);
    return 0;
}

/* Receipt i with its transparency member, against the test log's checkpoint. */
static void batch_receipt(tg_buf_t *out, int i) {
    tg_tlog_hash_t proof[TG_TLOG_MAX_PROOF];
    size_t n = 0;
    tg_tlog_reader_t rd = {read_hash, NULL};
    assert_int_equal(tg_tlog_inclusion_proof(proof, &n, &rd, (uint64_t)i, NLEAVES), TG_OK);
    tg_receipt_transparency_t t = {
        .checkpoint = lg.note,
        .checkpoint_len = lg.note_len,
        .proof = proof,
        .proof_len = n,
        .leaf_index = (uint64_t)i,
        .tree_size = NLEAVES,
        .log_key_id = log_key.pub.key_id,
        .log_origin = ORIGIN,
        .log_origin_len = strlen(ORIGIN),
    };
    tg_buf_reset(out);
    assert_int_equal(tg_receipt_add_transparency(out, lg.hashed[i], strlen(lg.hashed[i]), &t),
                     TG_OK);
}

static tg_err_t verify_json(const json_t *doc, int64_t now, tg_receipt_verdict_t *vd,
                            tg_diag_t *d) {
    return tg_receipt_verify_doc(&ring, doc, now, vd, d);
}

static json_t *parse(const char *text) {
    json_t *v = NULL;
    assert_int_equal(tg_json_parse(&v, text, strlen(text), NULL, NULL), TG_OK);
    return v;
}

static json_t *tr(json_t *receipt) { return json_object_get(receipt, "transparency"); }

/* ---- the hashed form ------------------------------------------------------------------- */

static void test_hashed_form(void **state) {
    (void)state;
    char id[TG_RECEIPT_EXEC_ID_LEN + 1];
    tg_receipt_fields_t f = fields_for(0, id);
    tg_receipt_signed_t hinfo, sinfo;
    tg_buf_t h, sg, u;
    tg_diag_t d;
    tg_buf_init(&h, 0);
    tg_buf_init(&sg, 0);
    tg_buf_init(&u, 0);
    /* appends, like the other builders */
    assert_int_equal(tg_buf_puts(&h, "xy"), TG_OK);
    assert_int_equal(tg_receipt_write_hashed(&h, &hinfo, &f, &d), TG_OK);
    assert_int_equal(hinfo.offset, 2);
    assert_int_equal(hinfo.length, h.len - 2);
    /* the same fields hash the same in both kinds */
    assert_int_equal(tg_receipt_sign_fields(&sg, &sinfo, &signer, &f, &d), TG_OK);
    assert_memory_equal(hinfo.hash, sinfo.hash, 32);
    assert_int_equal(tg_receipt_write_unsigned(&u, &f, &d), TG_OK);
    uint8_t hh[32];
    tg_sha256(hh, u.data, u.len);
    assert_memory_equal(hh, hinfo.hash, 32);
    /* the hashed form is the signed one without the authority members */
    json_t *hj = parse((const char *)h.data + 2);
    json_t *sj = parse((const char *)sg.data);
    assert_int_equal(json_object_del(sj, "authorityKeyId"), 0);
    assert_int_equal(json_object_del(sj, "authoritySignature"), 0);
    assert_true(json_equal(hj, sj));
    /* canonical: it is its own canonical form */
    tg_buf_t c;
    tg_buf_init(&c, 0);
    assert_int_equal(tg_canon_write(&c, hj, NULL), TG_OK);
    assert_int_equal(c.len, hinfo.length);
    assert_memory_equal(c.data, h.data + 2, c.len);
    tg_buf_free(&c);
    /* the ledger's check of the stored form */
    uint8_t got[32];
    assert_int_equal(tg_receipt_check_hashed(hj, got, &d), TG_OK);
    assert_memory_equal(got, hinfo.hash, 32);
    assert_true(tg_receipt_text_is_hashed((const char *)h.data + 2, hinfo.length));
    assert_false(tg_receipt_text_is_hashed((const char *)sg.data, sg.len));
    assert_false(tg_receipt_text_is_hashed((const char *)u.data, u.len));
    json_object_set_new(hj, "action", json_string("transfer_all_funds"));
    assert_int_equal(tg_receipt_check_hashed(hj, NULL, &d), TG_ERR_RECEIPT_HASH);
    assert_int_equal(tg_receipt_check_hashed(sj, NULL, &d), TG_OK); /* the same form */
    json_t *signed_full = parse((const char *)sg.data);
    assert_int_equal(tg_receipt_check_hashed(signed_full, NULL, &d), TG_ERR_RECEIPT_SHAPE);
    /* nothing hashed is authentic: a verifier refuses the stored form */
    assert_int_equal(tg_receipt_verify(&ring, sj, TS_MS, &d), TG_ERR_RECEIPT_SHAPE);
    /* invalid fields are refused as by the other builders; out restored */
    f.request_hash = TG_RSTR("xyz");
    size_t before = h.len;
    assert_int_equal(tg_receipt_write_hashed(&h, NULL, &f, &d), TG_ERR_INVALID_ARG);
    assert_int_equal(h.len, before);
    json_decref(hj);
    json_decref(sj);
    json_decref(signed_full);
    tg_buf_free(&h);
    tg_buf_free(&sg);
    tg_buf_free(&u);
}

/* ---- the transparency member ----------------------------------------------------------- */

static void test_transparency_member(void **state) {
    (void)state;
    tg_buf_t out;
    tg_buf_init(&out, 0);
    batch_receipt(&out, 5);
    json_t *r = parse((const char *)out.data);
    /* canonical: transparency is the last member, its members in order */
    tg_buf_t c;
    tg_buf_init(&c, 0);
    assert_int_equal(tg_canon_write(&c, r, NULL), TG_OK);
    assert_int_equal(c.len, out.len);
    assert_memory_equal(c.data, out.data, c.len);
    const json_t *t = tr(r);
    assert_int_equal(json_object_size(t), 6);
    assert_string_equal(json_string_value(json_object_get(t, "logOrigin")), ORIGIN);
    char kid[9];
    (void)snprintf(kid, sizeof kid, "%08x", (unsigned)log_key.pub.key_id);
    assert_string_equal(json_string_value(json_object_get(t, "logKeyId")), kid);
    assert_int_equal((int)json_number_value(json_object_get(t, "leafIndex")), 5);
    assert_int_equal((int)json_number_value(json_object_get(t, "treeSize")), NLEAVES);
    assert_string_equal(json_string_value(json_object_get(t, "checkpoint")), lg.note);
    assert_null(json_object_get(r, "authoritySignature"));
    assert_null(json_object_get(r, "authorityKeyId"));

    /* refusals: not a hashed form, a second transparency, bad members */
    tg_receipt_transparency_t ok = {.checkpoint = lg.note,
                                    .checkpoint_len = lg.note_len,
                                    .leaf_index = 0,
                                    .tree_size = 1,
                                    .log_key_id = 1,
                                    .log_origin = ORIGIN,
                                    .log_origin_len = strlen(ORIGIN)};
    tg_buf_t x;
    tg_buf_init(&x, 0);
    assert_int_equal(tg_buf_puts(&x, "ab"), TG_OK);
    assert_int_equal(tg_receipt_add_transparency(&x, (const char *)out.data, out.len, &ok),
                     TG_ERR_INVALID_ARG);
    assert_int_equal(x.len, 2);
    tg_buf_t sg;
    tg_buf_init(&sg, 0);
    char id[TG_RECEIPT_EXEC_ID_LEN + 1];
    tg_receipt_fields_t f = fields_for(0, id);
    assert_int_equal(tg_receipt_sign_fields(&sg, NULL, &signer, &f, NULL), TG_OK);
    assert_int_equal(tg_receipt_add_transparency(&x, (const char *)sg.data, sg.len, &ok),
                     TG_ERR_INVALID_ARG);
    const char *h0 = lg.hashed[0];
    assert_int_equal(tg_receipt_add_transparency(&x, h0, strlen(h0) - 1, &ok), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_receipt_add_transparency(&x, h0, strlen(h0), &ok), TG_OK);
    tg_receipt_transparency_t bad = ok;
    bad.leaf_index = 1; /* not below the size */
    assert_int_equal(tg_receipt_transparency_member(&x, &bad), TG_ERR_INVALID_ARG);
    bad = ok;
    bad.tree_size = TG_RECEIPT_MAX_LOG_INT + 1;
    assert_int_equal(tg_receipt_transparency_member(&x, &bad), TG_ERR_INVALID_ARG);
    bad = ok;
    bad.proof_len = 1; /* NULL proof */
    assert_int_equal(tg_receipt_transparency_member(&x, &bad), TG_ERR_INVALID_ARG);
    bad = ok;
    bad.proof_len = TG_TLOG_MAX_PROOF + 1;
    bad.proof = &lg.root;
    assert_int_equal(tg_receipt_transparency_member(&x, &bad), TG_ERR_INVALID_ARG);
    bad = ok;
    bad.log_origin = "has space";
    bad.log_origin_len = 9;
    assert_int_equal(tg_receipt_transparency_member(&x, &bad), TG_ERR_INVALID_ARG);
    bad = ok;
    bad.checkpoint_len = 0;
    assert_int_equal(tg_receipt_transparency_member(&x, &bad), TG_ERR_INVALID_ARG);
    bad = ok;
    bad.checkpoint = "\xff\xfe";
    bad.checkpoint_len = 2;
    size_t before = x.len;
    assert_int_equal(tg_receipt_transparency_member(&x, &bad), TG_ERR_INVALID_ARG);
    assert_int_equal(x.len, before);
    json_decref(r);
    tg_buf_free(&c);
    tg_buf_free(&x);
    tg_buf_free(&sg);
    tg_buf_free(&out);
}

/* ---- verification ---------------------------------------------------------------------- */

static void test_verify_every_leaf(void **state) {
    (void)state;
    tg_buf_t out;
    tg_buf_init(&out, 0);
    for (int i = 0; i < NLEAVES; i++) {
        tg_receipt_verdict_t vd;
        tg_diag_t d = {{0}};
        batch_receipt(&out, i);
        tg_err_t rc =
            tg_receipt_verify_text(&ring, (const char *)out.data, out.len, TS_MS, &vd, &d);
        if (rc != TG_OK) {
            fail_msg("leaf %d: %s %s", i, tg_err_name(rc), d.msg);
        }
        assert_true(vd.batch);
        assert_null(vd.key);
        assert_string_equal(vd.key_id, "");
        assert_ptr_equal(vd.log_key,
                         tg_keyring_find_log(&ring, ORIGIN, strlen(ORIGIN), log_key.pub.key_id));
        assert_int_equal(vd.leaf_index, (uint64_t)i);
        assert_int_equal(vd.tree_size, NLEAVES);
        assert_memory_equal(vd.root, lg.root.h, 32);
        assert_string_equal(tg_receipt_verdict_reason(rc, &vd), "valid");
        /* a valid enforce PERMIT authorizes, whichever kind */
        assert_int_equal(tg_receipt_authorizes(rc, &vd), i % 3 != 1);
        /* expiry as for the signed kind: authentic, no longer authorizing */
        rc = tg_receipt_verify_text(&ring, (const char *)out.data, out.len, EXP_MS, &vd, &d);
        assert_int_equal(rc, TG_ERR_RECEIPT_EXPIRED);
        assert_true(vd.batch);
        assert_false(tg_receipt_authorizes(rc, &vd));
    }
    /* inside an evaluate response, as /v1/verify and `trigguard verify` take it */
    batch_receipt(&out, 0);
    json_t *r = parse((const char *)out.data);
    json_t *resp = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:O}", "decision", "PERMIT", "enforcement",
                             "EXECUTED", "reason_code", "NO_POLICY_VIOLATION", "execution_id",
                             json_string_value(json_object_get(r, "executionId")), "request_hash",
                             REQ, "policy_version", "2026-11-30.1", "receipt", r);
    assert_non_null(resp);
    tg_receipt_verdict_t vd;
    tg_diag_t d;
    assert_int_equal(verify_json(resp, TS_MS, &vd, &d), TG_OK);
    assert_true(vd.batch);
    /* a ring without the log key knows no such key */
    tg_keyring_t plain = ring;
    plain.log_count = 0;
    assert_int_equal(tg_receipt_verify(&plain, r, TS_MS, &d), TG_ERR_KEY_UNKNOWN);
    assert_non_null(strstr(d.msg, ORIGIN));
    assert_string_equal(tg_receipt_reason_code(TG_ERR_KEY_UNKNOWN), "unknown_key");
    json_decref(resp);
    json_decref(r);
    tg_buf_free(&out);
}

/* A copy of receipt 3 (of the test log) to mutate. */
static json_t *fresh(tg_buf_t *out) {
    batch_receipt(out, 3);
    return parse((const char *)out->data);
}

static void expect(json_t *r, tg_err_t want, const char *reason, const char *what) {
    tg_receipt_verdict_t vd;
    tg_diag_t d = {{0}};
    tg_err_t rc = verify_json(r, TS_MS, &vd, &d);
    if (rc != want) {
        fail_msg("%s: %s (%s), wanted %s", what, tg_err_name(rc), d.msg, tg_err_name(want));
    }
    assert_string_equal(tg_receipt_reason_code(rc), reason);
    assert_false(tg_receipt_authorizes(rc, &vd));
    json_decref(r);
}

/* Replaces inclusionProof[k] with a hash that differs in one bit. */
static void flip_proof(json_t *r, size_t k, unsigned bit) {
    json_t *p = json_object_get(tr(r), "inclusionProof");
    uint8_t h[32];
    size_t got = 0;
    const char *s = json_string_value(json_array_get(p, k));
    assert_int_equal(
        sodium_base642bin(h, 32, s, strlen(s), NULL, &got, NULL, sodium_base64_VARIANT_ORIGINAL),
        0);
    h[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    char b64[64];
    (void)sodium_bin2base64(b64, sizeof b64, h, 32, sodium_base64_VARIANT_ORIGINAL);
    assert_int_equal(json_array_set_new(p, k, json_string(b64)), 0);
}

/* The checkpoint text of the test log signed by key s instead (same name). */
static void resign(json_t *r, const tg_note_signer_t *s) {
    char body[TG_CHECKPOINT_BODY_MAX], note[1024];
    size_t blen = 0, nlen = 0;
    assert_int_equal(
        tg_checkpoint_format(body, sizeof body, &blen, ORIGIN, strlen(ORIGIN), NLEAVES, lg.root.h),
        TG_OK);
    assert_int_equal(tg_note_sign(note, sizeof note, &nlen, body, blen, s), TG_OK);
    assert_int_equal(json_object_set_new(tr(r), "checkpoint", json_string(note)), 0);
}

static void test_five_mutations(void **state) {
    (void)state;
    tg_buf_t out;
    tg_buf_init(&out, 0);
    json_t *r = fresh(&out);
    size_t plen = json_array_size(json_object_get(tr(r), "inclusionProof"));
    json_decref(r);
    assert_true(plen >= 3);

    /* 1. a proof hash changed: every hash, several bits */
    for (size_t k = 0; k < plen; k++) {
        for (unsigned bit = 0; bit < 256; bit += 37) {
            r = fresh(&out);
            flip_proof(r, k, bit);
            expect(r, TG_ERR_TLOG_PROOF, "bad_proof", "proof hash changed");
        }
    }
    /* a hash dropped, a hash added */
    r = fresh(&out);
    assert_int_equal(json_array_remove(json_object_get(tr(r), "inclusionProof"), plen - 1), 0);
    expect(r, TG_ERR_TLOG_PROOF, "bad_proof", "proof one hash short");
    r = fresh(&out);
    assert_int_equal(
        json_array_append_new(json_object_get(tr(r), "inclusionProof"),
                              json_string("47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=")),
        0);
    expect(r, TG_ERR_TLOG_PROOF, "bad_proof", "proof one hash long");

    /* 2. the index changed: every other index of the tree, and past it */
    for (int idx = 0; idx <= NLEAVES + 1; idx++) {
        if (idx == 3) {
            continue;
        }
        r = fresh(&out);
        assert_int_equal(json_object_set_new(tr(r), "leafIndex", json_integer(idx)), 0);
        expect(r, TG_ERR_TLOG_PROOF, "bad_proof", "index changed");
    }

    /* 3. the tree size changed (the checkpoint says otherwise) */
    static const int sizes[] = {1, 4, NLEAVES - 1, NLEAVES + 1, 64};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        r = fresh(&out);
        assert_int_equal(json_object_set_new(tr(r), "treeSize", json_integer(sizes[i])), 0);
        expect(r, TG_ERR_TLOG_PROOF, "bad_proof", "tree size changed");
    }

    /* 4. the checkpoint re-signed by another key of the same name: no signature by the log
     * key (that key's line is an unknown key's) ... */
    r = fresh(&out);
    resign(r, &other_key);
    expect(r, TG_ERR_NOTE_UNVERIFIED, "bad_signature", "checkpoint re-signed");
    /* ... also when logKeyId names the other key (not a log key of the ring) ... */
    r = fresh(&out);
    resign(r, &other_key);
    char kid[9];
    (void)snprintf(kid, sizeof kid, "%08x", (unsigned)other_key.pub.key_id);
    assert_int_equal(json_object_set_new(tr(r), "logKeyId", json_string(kid)), 0);
    expect(r, TG_ERR_KEY_UNKNOWN, "unknown_key", "checkpoint re-signed, key id too");
    /* ... and a signature line that claims the log key's id but is the other key's */
    tg_note_signer_t forger = other_key;
    forger.pub.key_id = log_key.pub.key_id;
    r = fresh(&out);
    resign(r, &forger);
    expect(r, TG_ERR_NOTE_SIGNATURE, "bad_signature", "checkpoint forged under the log key id");
    sodium_memzero(&forger, sizeof forger);
    /* a checkpoint of another root, correctly signed: the proof no longer leads to it */
    r = fresh(&out);
    {
        char body[TG_CHECKPOINT_BODY_MAX], note[1024];
        size_t blen = 0, nlen = 0;
        tg_tlog_hash_t other = lg.root;
        other.h[0] ^= 1;
        assert_int_equal(tg_checkpoint_format(body, sizeof body, &blen, ORIGIN, strlen(ORIGIN),
                                              NLEAVES, other.h),
                         TG_OK);
        assert_int_equal(tg_note_sign(note, sizeof note, &nlen, body, blen, &log_key), TG_OK);
        assert_int_equal(json_object_set_new(tr(r), "checkpoint", json_string(note)), 0);
    }
    expect(r, TG_ERR_TLOG_PROOF, "bad_proof", "checkpoint of another root");
    /* the checkpoint's text changed under its signature */
    r = fresh(&out);
    {
        char note[1024];
        (void)snprintf(note, sizeof note, "%s", lg.note);
        char *nl = strchr(note, '\n');
        assert_non_null(nl);
        nl[1] = nl[1] == '1' ? '2' : '1'; /* the size line's first digit */
        assert_int_equal(json_object_set_new(tr(r), "checkpoint", json_string(note)), 0);
    }
    expect(r, TG_ERR_NOTE_SIGNATURE, "bad_signature", "checkpoint text changed");

    /* 5. a receipt field changed: the stated hash is authentic, the fields are not its */
    static const char *const members[] = {"action", "decision", "tenantId", "expiresAt",
                                          "executionId"};
    static const char *const values[] = {"transfer_all", "DENY", "other",
                                         "2099-01-01T00:00:00.000Z",
                                         "exec_ffffffffffffffffffffffffffffffff"};
    for (size_t i = 0; i < sizeof members / sizeof members[0]; i++) {
        r = fresh(&out);
        assert_int_equal(json_object_set_new(r, members[i], json_string(values[i])), 0);
        expect(r, TG_ERR_RECEIPT_HASH, "hash_mismatch", "receipt field changed");
    }
    /* ... and with receiptHash recomputed to match: that hash is not in the log */
    r = fresh(&out);
    assert_int_equal(json_object_set_new(r, "action", json_string("transfer_all")), 0);
    {
        json_t *c = json_deep_copy(r);
        json_object_del(c, "receiptHash");
        json_object_del(c, "transparency");
        uint8_t h[32];
        char hex[65];
        assert_int_equal(tg_canon_sha256(h, c, NULL), TG_OK);
        tg_hex(hex, h, 32);
        json_decref(c);
        assert_int_equal(json_object_set_new(r, "receiptHash", json_string(hex)), 0);
    }
    expect(r, TG_ERR_TLOG_PROOF, "bad_proof", "receipt field changed, hash recomputed");
    /* another receipt's transparency on this one */
    {
        tg_buf_t o2;
        tg_buf_init(&o2, 0);
        batch_receipt(&o2, 4);
        json_t *r4 = parse((const char *)o2.data);
        r = fresh(&out);
        assert_int_equal(json_object_set(r, "transparency", tr(r4)), 0);
        expect(r, TG_ERR_TLOG_PROOF, "bad_proof", "another receipt's proof");
        json_decref(r4);
        tg_buf_free(&o2);
    }
    /* unchanged, it still verifies (the mutations above were the only difference) */
    r = fresh(&out);
    tg_receipt_verdict_t vd;
    tg_diag_t d;
    assert_int_equal(verify_json(r, TS_MS, &vd, &d), TG_OK);
    json_decref(r);
    tg_buf_free(&out);
}

static void test_batch_shape(void **state) {
    (void)state;
    tg_buf_t out;
    tg_buf_init(&out, 0);
    json_t *r;
    /* both kinds at once */
    r = fresh(&out);
    json_object_set_new(
        r, "authoritySignature",
        json_string("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
                    "AAAAAAAAAAAAAAAAAAAA=="));
    json_object_set_new(r, "authorityKeyId", json_string("trigguard-key-1"));
    expect(r, TG_ERR_RECEIPT_SHAPE, "malformed", "signature and transparency");
    r = fresh(&out);
    json_object_set_new(r, "authorityKeyId", json_string("trigguard-key-1"));
    expect(r, TG_ERR_RECEIPT_SHAPE, "malformed", "authorityKeyId on a batch receipt");
    /* no receiptHash */
    r = fresh(&out);
    json_object_del(r, "receiptHash");
    expect(r, TG_ERR_RECEIPT_SHAPE, "malformed", "no receiptHash");
    /* transparency: not an object, a member missing, one more, wrong types and formats */
    r = fresh(&out);
    json_object_set_new(r, "transparency", json_array());
    expect(r, TG_ERR_RECEIPT_SHAPE, "malformed", "transparency an array");
    static const char *const six[] = {"checkpoint", "inclusionProof", "leafIndex",
                                      "logKeyId",   "logOrigin",      "treeSize"};
    for (size_t i = 0; i < 6; i++) {
        r = fresh(&out);
        json_object_del(tr(r), six[i]);
        expect(r, TG_ERR_RECEIPT_SHAPE, "malformed", "transparency member missing");
        r = fresh(&out);
        json_object_set_new(tr(r), six[i], json_null());
        expect(r, TG_ERR_RECEIPT_SHAPE, "malformed", "transparency member null");
    }
    r = fresh(&out);
    json_object_set_new(tr(r), "extra", json_string("x"));
    expect(r, TG_ERR_RECEIPT_SHAPE, "malformed", "transparency member extra");
    static const char *const bad_json[][2] = {
        {"leafIndex", "-1"},
        {"leafIndex", "1.5"},
        {"leafIndex", "\"3\""},
        {"leafIndex", "9007199254740992"},
        {"treeSize", "1e300"},
        {"logKeyId", "\"ABCDEF01\""},
        {"logKeyId", "\"abcdef0\""},
        {"logKeyId", "\"abcdef012\""},
        {"logKeyId", "\"abcdefgh\""},
        {"logOrigin", "\"has space\""},
        {"logOrigin", "\"a+b\""},
        {"logOrigin", "\"\""},
        {"checkpoint", "\"\""},
        {"checkpoint", "7"},
        {"inclusionProof", "[\"AAAA\"]"},
        {"inclusionProof", "[\"47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU\"]"},
        {"inclusionProof", "[\"47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU=\"]"},
        {"inclusionProof",
         "[\"47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFV=\"]"}, /* not canonical */
        {"inclusionProof", "[1]"},
        {"inclusionProof", "{}"},
    };
    for (size_t i = 0; i < sizeof bad_json / sizeof bad_json[0]; i++) {
        r = fresh(&out);
        json_t *v = parse(bad_json[i][1]);
        json_object_set_new(tr(r), bad_json[i][0], v);
        expect(r, TG_ERR_RECEIPT_SHAPE, "malformed", bad_json[i][1]);
    }
    /* 64 proof hashes are more than any tree below 2^63 needs */
    r = fresh(&out);
    {
        json_t *p = json_array();
        for (int i = 0; i < TG_TLOG_MAX_PROOF + 1; i++) {
            json_array_append_new(p, json_string("47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="));
        }
        json_object_set_new(tr(r), "inclusionProof", p);
    }
    expect(r, TG_ERR_RECEIPT_SHAPE, "malformed", "64 proof hashes");
    /* a checkpoint that is no signed note, or whose text is no checkpoint */
    r = fresh(&out);
    json_object_set_new(tr(r), "checkpoint", json_string("not a note"));
    expect(r, TG_ERR_NOTE_MALFORMED, "malformed", "checkpoint not a note");
    r = fresh(&out);
    {
        char note[512];
        size_t n = 0;
        assert_int_equal(tg_note_sign(note, sizeof note, &n, "hello\n", 6, &log_key), TG_OK);
        json_object_set_new(tr(r), "checkpoint", json_string(note));
    }
    expect(r, TG_ERR_CHECKPOINT_MALFORMED, "malformed", "note text not a checkpoint");
    /* over the note's limit of signature lines: malformed too (not an internal error) */
    r = fresh(&out);
    {
        tg_buf_t n;
        tg_buf_init(&n, 0);
        const char *cut = strstr(lg.note, "\n\n");
        assert_non_null(cut);
        assert_int_equal(tg_buf_append(&n, lg.note, (size_t)(cut - lg.note) + 2), TG_OK);
        uint8_t blob[68] = {0};
        char b64[128];
        (void)sodium_bin2base64(b64, sizeof b64, blob, sizeof blob, sodium_base64_VARIANT_ORIGINAL);
        for (int i = 0; i < TG_NOTE_MAX_SIGS + 1; i++) {
            assert_int_equal(tg_buf_printf(&n, "\xe2\x80\x94 other%d %s\n", i, b64), TG_OK);
        }
        json_object_set_new(tr(r), "checkpoint", json_string((const char *)n.data));
        tg_buf_free(&n);
    }
    expect(r, TG_ERR_NOTE_MALFORMED, "malformed", "101 signature lines");
    /* a checkpoint of another origin signed by the log key */
    r = fresh(&out);
    {
        char body[TG_CHECKPOINT_BODY_MAX], note[1024];
        size_t blen = 0, nlen = 0;
        assert_int_equal(
            tg_checkpoint_format(body, sizeof body, &blen, "other.log", 9, NLEAVES, lg.root.h),
            TG_OK);
        assert_int_equal(tg_note_sign(note, sizeof note, &nlen, body, blen, &log_key), TG_OK);
        json_object_set_new(tr(r), "checkpoint", json_string(note));
    }
    expect(r, TG_ERR_TLOG_PROOF, "bad_proof", "checkpoint of another origin");
    /* leafIndex as a jansson integer (a tree built by code) verifies like the double */
    r = fresh(&out);
    json_object_set_new(tr(r), "leafIndex", json_integer(3));
    json_object_set_new(tr(r), "treeSize", json_integer(NLEAVES));
    tg_receipt_verdict_t vd;
    tg_diag_t d;
    assert_int_equal(verify_json(r, TS_MS, &vd, &d), TG_OK);
    json_decref(r);
    /* the generic signer refuses a body with transparency */
    r = fresh(&out);
    json_object_del(r, "receiptHash");
    tg_buf_t sg;
    tg_buf_init(&sg, 0);
    assert_int_equal(tg_receipt_sign_json(&sg, NULL, &signer, r, &d), TG_ERR_RECEIPT_SHAPE);
    json_decref(r);
    tg_buf_free(&sg);
    tg_buf_free(&out);
}

static void test_reason_codes(void **state) {
    (void)state;
    assert_string_equal(tg_receipt_reason_code(TG_ERR_TLOG_PROOF), "bad_proof");
    assert_string_equal(tg_receipt_reason_code(TG_ERR_NOTE_SIGNATURE), "bad_signature");
    assert_string_equal(tg_receipt_reason_code(TG_ERR_NOTE_UNVERIFIED), "bad_signature");
    assert_string_equal(tg_receipt_reason_code(TG_ERR_NOTE_MALFORMED), "malformed");
    assert_string_equal(tg_receipt_reason_code(TG_ERR_CHECKPOINT_MALFORMED), "malformed");
}

/* The ring's log keys (keys.h). */
static void test_keyring_log_keys(void **state) {
    (void)state;
    tg_keyring_t r;
    tg_keyring_init(&r);
    assert_int_equal(tg_keyring_add_log(&r, &log_key.pub), TG_OK);
    assert_int_equal(tg_keyring_add_log(&r, &log_key.pub), TG_ERR_EXISTS);
    tg_note_verifier_t v = other_key.pub;
    assert_int_equal(tg_keyring_add_log(&r, &v), TG_OK); /* same name, another key */
    v.key_id ^= 1; /* an id that is not the name's and key's */
    assert_int_equal(tg_keyring_add_log(&r, &v), TG_ERR_INVALID_ARG);
    assert_null(tg_keyring_find_log(&r, ORIGIN, strlen(ORIGIN), v.key_id));
    assert_non_null(tg_keyring_find_log(&r, ORIGIN, strlen(ORIGIN), log_key.pub.key_id));
    assert_null(tg_keyring_find_log(&r, "x", 1, log_key.pub.key_id));
    assert_null(tg_keyring_find_log(&r, ORIGIN, strlen(ORIGIN) - 1, log_key.pub.key_id));
    for (int i = 2; i < TG_KEYRING_LOG_MAX; i++) {
        uint8_t seed[32] = {(uint8_t)i, 7};
        tg_note_signer_t s;
        assert_int_equal(tg_note_signer_from_seed(&s, "n", 1, seed), TG_OK);
        assert_int_equal(tg_keyring_add_log(&r, &s.pub), TG_OK);
        tg_note_signer_wipe(&s);
    }
    uint8_t seed[32] = {99};
    tg_note_signer_t s;
    assert_int_equal(tg_note_signer_from_seed(&s, "n", 1, seed), TG_OK);
    assert_int_equal(tg_keyring_add_log(&r, &s.pub), TG_ERR_LIMIT);
    tg_note_signer_wipe(&s);
    tg_keyring_wipe(&r);
    assert_int_equal(r.log_count, 0);
}

/* keys.json with the log's key (SPEC §12: "use": "checkpoint"). */
static char *keys_doc(const char *origin, const tg_note_verifier_t *vk, const uint8_t pem_pk[32],
                      const char *use) {
    tg_key_t rk, lk;
    tg_buf_t rpem, lpem;
    char vkey[TG_NOTE_VKEY_MAX];
    tg_buf_init(&rpem, 0);
    tg_buf_init(&lpem, 0);
    assert_int_equal(tg_key_from_public(&rk, signer.pk, "trigguard-key-1"), TG_OK);
    assert_int_equal(tg_key_from_public(&lk, pem_pk, "log"), TG_OK);
    assert_int_equal(tg_key_public_pem(&rpem, &rk), TG_OK);
    assert_int_equal(tg_key_public_pem(&lpem, &lk), TG_OK);
    assert_int_equal(tg_note_vkey_format(vkey, sizeof vkey, NULL, vk), TG_OK);
    json_t *doc = json_pack("{s:s,s:s,s:[{s:s,s:s,s:s,s:s,s:s},{s:s,s:s,s:s,s:s,s:s,s:s,s:s}]}",
                            "protocol", "trigguard/v1", "authority", "t", "keys", "keyId",
                            "trigguard-key-1", "algorithm", "Ed25519", "use", "receipt", "status",
                            "active", "publicKeyPem", (const char *)rpem.data, "keyId", "log-1",
                            "algorithm", "Ed25519", "use", use, "origin", origin, "vkey", vkey,
                            "publicKeyPem", (const char *)lpem.data, "status", "active");
    assert_non_null(doc);
    char *text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    tg_buf_free(&rpem);
    tg_buf_free(&lpem);
    return text;
}

static tg_err_t load(const char *text, tg_keyring_t *r) {
    tg_diag_t d = {{0}};
    tg_keyring_init(r);
    return tg_keyring_load_keys_json(r, text, strlen(text), &d);
}

static void test_keys_json_log_key(void **state) {
    (void)state;
    tg_keyring_t r;
    char *t = keys_doc(ORIGIN, &log_key.pub, log_key.pub.pk, "checkpoint");
    assert_int_equal(load(t, &r), TG_OK);
    assert_int_equal(r.count, 1);
    assert_int_equal(r.log_count, 1);
    assert_non_null(tg_keyring_find_log(&r, ORIGIN, strlen(ORIGIN), log_key.pub.key_id));
    assert_null(tg_keyring_find(&r, "log-1", 5)); /* never a receipt key */
    /* a batch receipt verifies with the ring read from keys.json alone */
    tg_buf_t out;
    tg_buf_init(&out, 0);
    batch_receipt(&out, 7);
    tg_diag_t d;
    assert_int_equal(tg_receipt_verify_text(&r, (const char *)out.data, out.len, TS_MS, NULL, &d),
                     TG_OK);
    tg_buf_free(&out);
    free(t);
    /* a use this verifier does not know: skipped, trusted for nothing */
    t = keys_doc(ORIGIN, &log_key.pub, log_key.pub.pk, "cosignature");
    assert_int_equal(load(t, &r), TG_OK);
    assert_int_equal(r.count, 1);
    assert_int_equal(r.log_count, 0);
    free(t);
    /* the vkey named otherwise than origin, or holding another key than publicKeyPem */
    t = keys_doc("other.origin", &log_key.pub, log_key.pub.pk, "checkpoint");
    assert_int_equal(load(t, &r), TG_ERR_KEY_FORMAT);
    free(t);
    t = keys_doc(ORIGIN, &log_key.pub, other_key.pub.pk, "checkpoint");
    assert_int_equal(load(t, &r), TG_ERR_KEY_FORMAT);
    free(t);
    /* "use" must be a string; a checkpoint entry needs origin and vkey */
    static const char *const bad[] = {
        "{\"protocol\":\"trigguard/v1\",\"keys\":[{\"use\":7}]}",
        "{\"protocol\":\"trigguard/v1\",\"keys\":[{\"use\":\"checkpoint\",\"keyId\":\"l\","
        "\"algorithm\":\"Ed25519\",\"status\":\"active\"}]}",
        "{\"protocol\":\"trigguard/v1\",\"keys\":[{\"use\":\"checkpoint\",\"keyId\":\"l\","
        "\"algorithm\":\"RSA\",\"status\":\"active\"}]}",
        "{\"protocol\":\"trigguard/v1\",\"keys\":[{\"use\":\"checkpoint\",\"keyId\":\"l\","
        "\"algorithm\":\"Ed25519\",\"status\":\"retired\"}]}",
        "{\"protocol\":\"trigguard/v1\",\"keys\":[{\"use\":\"checkpoint\",\"keyId\":\"l\","
        "\"algorithm\":\"Ed25519\",\"status\":\"active\",\"origin\":\"o\",\"vkey\":\"o+00+x\","
        "\"publicKeyPem\":\"x\"}]}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(load(bad[i], &r), TG_ERR_KEY_FORMAT);
    }
    tg_keyring_wipe(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hashed_form),       cmocka_unit_test(test_transparency_member),
        cmocka_unit_test(test_verify_every_leaf), cmocka_unit_test(test_five_mutations),
        cmocka_unit_test(test_batch_shape),       cmocka_unit_test(test_reason_codes),
        cmocka_unit_test(test_keyring_log_keys),  cmocka_unit_test(test_keys_json_log_key),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
