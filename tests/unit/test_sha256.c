/* test_sha256.c — tg_sha256 (nettle) against the FIPS 180-2 vectors, against itself
 * (incremental vs one-shot at every split), and against libsodium's crypto_hash_sha256, the
 * implementation it replaced, kept here as an independent oracle: every stored or signed
 * digest must stay byte-identical. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <sodium.h>

#include "trigguard/sha256.h"

/* hex (64 digits) to 32 bytes. */
static void unhex(uint8_t out[TG_SHA256_LEN], const char *hex) {
    size_t n = 0;
    assert_int_equal(strlen(hex), 2 * TG_SHA256_LEN);
    assert_int_equal(sodium_hex2bin(out, TG_SHA256_LEN, hex, strlen(hex), NULL, &n, NULL), 0);
    assert_int_equal(n, TG_SHA256_LEN);
}

/* The one-shot and a one-update context both give `want` for msg. */
static void check_vector(const char *msg, const char *want_hex) {
    uint8_t want[TG_SHA256_LEN], got[TG_SHA256_LEN];
    unhex(want, want_hex);
    tg_sha256(got, msg, strlen(msg));
    assert_memory_equal(got, want, sizeof want);
    tg_sha256_ctx_t c;
    tg_sha256_init(&c);
    tg_sha256_update(&c, msg, strlen(msg));
    tg_sha256_final(&c, got);
    assert_memory_equal(got, want, sizeof want);
}

/* FIPS 180-2 appendix B.1 and B.2, and the empty message. */
static void test_fips_vectors(void **state) {
    (void)state;
    check_vector("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    check_vector("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
                 "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    check_vector("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    /* NULL with length 0 is the empty message too (the header allows it). */
    uint8_t want[TG_SHA256_LEN], got[TG_SHA256_LEN];
    unhex(want, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    tg_sha256(got, NULL, 0);
    assert_memory_equal(got, want, sizeof want);
}

/* FIPS 180-2 appendix B.3: one million 'a', fed incrementally in uneven pieces (so updates
 * straddle block boundaries), and in one piece. */
static void test_million_a(void **state) {
    (void)state;
    enum { TOTAL = 1000000 };
    uint8_t want[TG_SHA256_LEN], got[TG_SHA256_LEN];
    unhex(want, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    static char a[TOTAL];
    memset(a, 'a', sizeof a);
    tg_sha256_ctx_t c;
    tg_sha256_init(&c);
    size_t done = 0, step = 1;
    while (done < TOTAL) {
        size_t n = step < TOTAL - done ? step : TOTAL - done;
        tg_sha256_update(&c, a + done, n);
        done += n;
        step = step * 7 % 997 + 1;
    }
    tg_sha256_final(&c, got);
    assert_memory_equal(got, want, sizeof want);
    tg_sha256(got, a, sizeof a);
    assert_memory_equal(got, want, sizeof want);
}

/* A message split in two (or three) at every offset hashes as the whole; final leaves the
 * context empty for the next message; a copied context forks the hash. */
static void test_splits(void **state) {
    (void)state;
    uint8_t msg[300];
    for (size_t i = 0; i < sizeof msg; i++) {
        msg[i] = (uint8_t)(i * 31 + 7);
    }
    uint8_t whole[TG_SHA256_LEN], got[TG_SHA256_LEN];
    tg_sha256(whole, msg, sizeof msg);
    for (size_t cut = 0; cut <= sizeof msg; cut++) {
        tg_sha256_ctx_t c;
        tg_sha256_init(&c);
        tg_sha256_update(&c, msg, cut);
        tg_sha256_update(&c, NULL, 0);
        tg_sha256_update(&c, msg + cut, sizeof msg - cut);
        tg_sha256_final(&c, got);
        assert_memory_equal(got, whole, sizeof whole);
        /* the context is empty again: the same message gives the same digest */
        tg_sha256_update(&c, msg, sizeof msg);
        tg_sha256_final(&c, got);
        assert_memory_equal(got, whole, sizeof whole);
        /* three pieces */
        size_t cut2 = cut + (sizeof msg - cut) / 2;
        tg_sha256_update(&c, msg, cut);
        tg_sha256_update(&c, msg + cut, cut2 - cut);
        tg_sha256_update(&c, msg + cut2, sizeof msg - cut2);
        tg_sha256_final(&c, got);
        assert_memory_equal(got, whole, sizeof whole);
        /* a copy taken at the cut finishes the prefix while the original goes on */
        tg_sha256_init(&c);
        tg_sha256_update(&c, msg, cut);
        tg_sha256_ctx_t fork = c;
        uint8_t prefix[TG_SHA256_LEN], want_prefix[TG_SHA256_LEN];
        tg_sha256_final(&fork, prefix);
        tg_sha256(want_prefix, msg, cut);
        assert_memory_equal(prefix, want_prefix, sizeof prefix);
        tg_sha256_update(&c, msg + cut, sizeof msg - cut);
        tg_sha256_final(&c, got);
        assert_memory_equal(got, whole, sizeof whole);
    }
}

/* libsodium as the oracle: random contents, every length around the block boundaries and
 * random lengths up to 5000, one-shot and in random pieces. */
static void check_against_sodium(const uint8_t *msg, size_t len) {
    uint8_t want[crypto_hash_sha256_BYTES], got[TG_SHA256_LEN];
    crypto_hash_sha256(want, msg, len);
    tg_sha256(got, msg, len);
    assert_memory_equal(got, want, sizeof want);
    tg_sha256_ctx_t c;
    tg_sha256_init(&c);
    size_t done = 0;
    while (done < len) {
        size_t n = (size_t)randombytes_uniform(200) + 1;
        if (n > len - done) {
            n = len - done;
        }
        tg_sha256_update(&c, msg + done, n);
        done += n;
    }
    tg_sha256_final(&c, got);
    assert_memory_equal(got, want, sizeof want);
}

static void test_matches_libsodium(void **state) {
    (void)state;
    assert_true(sodium_init() >= 0);
    enum { MAX = 5000 };
    static uint8_t msg[MAX];
    randombytes_buf(msg, sizeof msg);
    for (size_t len = 0; len <= 260; len++) {
        check_against_sodium(msg, len);
    }
    for (int i = 0; i < 500; i++) {
        size_t len = (size_t)randombytes_uniform(MAX + 1);
        randombytes_buf(msg, len);
        check_against_sodium(msg, len);
    }
    check_against_sodium(msg, MAX);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fips_vectors),
        cmocka_unit_test(test_million_a),
        cmocka_unit_test(test_splits),
        cmocka_unit_test(test_matches_libsodium),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
