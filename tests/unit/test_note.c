/* test_note.c — C2SP signed notes and checkpoints (note.h): the C2SP and Go examples, the
 * fixed-seed checkpoints of signed-notes.json reproduced byte for byte, and what a verifier
 * and the parsers must refuse. Vectors: tests/vectors/tlog (TG_TLOG_VECTORS). */
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

#include "support/read.h"
#include "trigguard/canon.h"
#include "trigguard/note.h"
#include "trigguard/tlog.h"

#ifndef TG_TLOG_VECTORS
#error "TG_TLOG_VECTORS must name tests/vectors/tlog"
#endif

static json_t *notes; /* signed-notes.json */
static json_t *rfc;   /* rfc6962-roots.json */

static json_t *load_json(const char *path) {
    size_t len = 0;
    json_error_t err;
    char *text = tg_test_read(path, &len);
    json_t *v = json_loadb(text, len, 0, &err);
    free(text);
    return v;
}

static int setup(void **state) {
    (void)state;
    if (sodium_init() < 0) {
        return -1;
    }
    notes = load_json(TG_TLOG_VECTORS "/signed-notes.json");
    rfc = load_json(TG_TLOG_VECTORS "/rfc6962-roots.json");
    return notes != NULL && rfc != NULL ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    json_decref(notes);
    json_decref(rfc);
    return 0;
}

static const char *str_at(const char *obj, const char *member) {
    const char *s = json_string_value(json_object_get(json_object_get(notes, obj), member));
    assert_non_null(s);
    return s;
}

/* text ‖ "\n" ‖ signature line, in a buffer the caller frees */
static char *join_note(const char *text, const char *sig_line) {
    size_t n = strlen(text) + 1 + strlen(sig_line) + 1;
    char *out = malloc(n);
    assert_non_null(out);
    snprintf(out, n, "%s\n%s", text, sig_line);
    return out;
}

static void verify_ok(const char *msg, const tg_note_verifier_t *keys, size_t nkeys,
                      size_t want_text_len, uint64_t want_mask) {
    size_t tl = 0;
    uint64_t mask = 0;
    tg_err_t rc = tg_note_verify(msg, strlen(msg), keys, nkeys, &tl, &mask);
    if (rc != TG_OK) {
        fail_msg("verify: %s", tg_err_name(rc));
    }
    assert_int_equal(tl, want_text_len);
    assert_int_equal(mask, want_mask);
}

static void verify_fails(const char *msg, size_t n, const tg_note_verifier_t *keys, size_t nkeys,
                         tg_err_t want) {
    size_t tl = 99;
    uint64_t mask = 99;
    tg_err_t rc = tg_note_verify(msg, n, keys, nkeys, &tl, &mask);
    if (rc != want) {
        fail_msg("verify gave %s, want %s, for: %.*s", tg_err_name(rc), tg_err_name(want), (int)n,
                 msg);
    }
    assert_int_equal(tl, 0);
    assert_int_equal(mask, 0);
}

/* ---- the published examples ----------------------------------------------------------- */

static void test_c2sp_example(void **state) {
    (void)state;
    tg_note_verifier_t v;
    const char *vkey = str_at("c2sp_example", "vkey");
    const char *text = str_at("c2sp_example", "text");
    assert_int_equal(tg_note_vkey_parse(&v, vkey, strlen(vkey)), TG_OK);
    assert_string_equal(v.name, "example.com/foo");
    assert_int_equal(v.key_id, 0x530d903au);
    char out[TG_NOTE_VKEY_MAX];
    size_t len = 0;
    assert_int_equal(tg_note_vkey_format(out, sizeof out, &len, &v), TG_OK);
    assert_string_equal(out, vkey);
    assert_int_equal(len, strlen(vkey));

    char *msg = join_note(text, str_at("c2sp_example", "signature_line"));
    verify_ok(msg, &v, 1, strlen(text), 1);
    /* a changed text, a changed signature byte */
    msg[0] ^= 0x20;
    verify_fails(msg, strlen(msg), &v, 1, TG_ERR_NOTE_SIGNATURE);
    msg[0] ^= 0x20;
    char *b64 = strrchr(msg, ' ') + 1;
    b64[10] = b64[10] == 'A' ? 'B' : 'A';
    verify_fails(msg, strlen(msg), &v, 1, TG_ERR_NOTE_SIGNATURE);
    free(msg);
}

static void test_go_example_signs_byte_for_byte(void **state) {
    (void)state;
    tg_note_signer_t s;
    tg_note_verifier_t v;
    const char *sk = str_at("go_sumdb_example", "signer_key");
    const char *vkey = str_at("go_sumdb_example", "vkey");
    const char *text = str_at("go_sumdb_example", "text");
    const char *line = str_at("go_sumdb_example", "signature_line");
    assert_int_equal(tg_note_signer_parse(&s, sk, strlen(sk)), TG_OK);
    char out[TG_NOTE_VKEY_MAX];
    assert_int_equal(tg_note_vkey_format(out, sizeof out, NULL, &s.pub), TG_OK);
    assert_string_equal(out, vkey);
    assert_int_equal(tg_note_vkey_parse(&v, vkey, strlen(vkey)), TG_OK);

    char note[1024];
    size_t len = 0;
    char *want = join_note(text, line);
    assert_int_equal(tg_note_sign(note, sizeof note, &len, text, strlen(text), &s), TG_OK);
    assert_string_equal(note, want);
    assert_int_equal(len, strlen(want));
    verify_ok(note, &v, 1, strlen(text), 1);
    /* too small an output buffer */
    assert_int_equal(tg_note_sign(note, len, NULL, text, strlen(text), &s),
                     TG_ERR_BUFFER_TOO_SMALL);
    free(want);

    /* the signer key text is checked: a wrong id, a wrong type byte, a bad name */
    char bad[256];
    snprintf(bad, sizeof bad, "%s", sk);
    char *id = strstr(bad, "c74f20a3");
    id[7] = '4';
    assert_int_equal(tg_note_signer_parse(&s, bad, strlen(bad)), TG_ERR_KEY_FORMAT);
    assert_int_equal(tg_note_signer_parse(&s, vkey, strlen(vkey)), TG_ERR_KEY_FORMAT);
    tg_note_signer_wipe(&s);
}

/* ---- the fixed-seed checkpoints ------------------------------------------------------- */

static void test_checkpoints_reproduced(void **state) {
    (void)state;
    json_t *cps = json_object_get(notes, "trigguard_checkpoints");
    const char *origin = json_string_value(json_object_get(cps, "origin"));
    const char *vkey = json_string_value(json_object_get(cps, "vkey"));
    const char *seed_hex = json_string_value(json_object_get(cps, "seed_hex"));
    json_t *list = json_object_get(cps, "checkpoints");
    json_t *roots = json_object_get(rfc, "roots_hex_by_size");
    uint8_t seed[32];
    tg_note_signer_t s;
    tg_note_verifier_t v;
    assert_non_null(origin);
    assert_non_null(vkey);
    assert_int_equal(tg_unhex(seed, 32, seed_hex, 64), TG_OK);
    /* the seed is SHA-256("trigguard-tlog-vector-seed"), as the file says */
    uint8_t want_seed[32];
    tg_sha256(want_seed, "trigguard-tlog-vector-seed", 26);
    assert_memory_equal(seed, want_seed, 32);

    assert_int_equal(tg_note_signer_from_seed(&s, origin, strlen(origin), seed), TG_OK);
    char vk[TG_NOTE_VKEY_MAX];
    assert_int_equal(tg_note_vkey_format(vk, sizeof vk, NULL, &s.pub), TG_OK);
    assert_string_equal(vk, vkey);
    assert_int_equal(tg_note_vkey_parse(&v, vkey, strlen(vkey)), TG_OK);

    assert_int_equal(json_array_size(list), 4);
    size_t i;
    json_t *cp;
    json_array_foreach(list, i, cp) {
        uint64_t size = (uint64_t)json_integer_value(json_object_get(cp, "size"));
        const char *want = json_string_value(json_object_get(cp, "note"));
        uint8_t root[32];
        assert_int_equal(tg_unhex(root, 32, json_string_value(json_array_get(roots, size)), 64),
                         TG_OK);
        char body[TG_CHECKPOINT_BODY_MAX];
        size_t blen = 0;
        assert_int_equal(
            tg_checkpoint_format(body, sizeof body, &blen, origin, strlen(origin), size, root),
            TG_OK);
        char note[1024];
        size_t nlen = 0;
        assert_int_equal(tg_note_sign(note, sizeof note, &nlen, body, blen, &s), TG_OK);
        assert_string_equal(note, want);

        size_t tl = 0;
        assert_int_equal(tg_note_verify(want, strlen(want), &v, 1, &tl, NULL), TG_OK);
        assert_int_equal(tl, blen);
        tg_checkpoint_t c;
        assert_int_equal(tg_checkpoint_parse(&c, want, tl), TG_OK);
        assert_string_equal(c.origin, origin);
        assert_int_equal(c.origin_len, strlen(origin));
        assert_int_equal(c.size, size);
        assert_memory_equal(c.root, root, 32);
        assert_null(c.ext);
        assert_int_equal(c.ext_len, 0);
    }
    tg_note_signer_wipe(&s);
    for (i = 0; i < sizeof s; i++) {
        assert_int_equal(((const uint8_t *)&s)[i], 0);
    }
}

/* ---- what the verifier refuses -------------------------------------------------------- */

static tg_note_signer_t alice, bob;

static void make_signers(void) {
    uint8_t seed[32];
    memset(seed, 0xA1, sizeof seed);
    assert_int_equal(tg_note_signer_from_seed(&alice, "alice.example/log", 17, seed), TG_OK);
    memset(seed, 0xB0, sizeof seed);
    assert_int_equal(tg_note_signer_from_seed(&bob, "bob.example", 11, seed), TG_OK);
}

/* The signature line alice (or bob) puts on text, without the note around it. */
static void sig_line(char *out, size_t cap, const tg_note_signer_t *s, const char *text) {
    char note[4096];
    size_t len = 0;
    assert_int_equal(tg_note_sign(note, sizeof note, &len, text, strlen(text), s), TG_OK);
    int n = snprintf(out, cap, "%s", note + strlen(text) + 1);
    assert_true(n >= 0 && (size_t)n < cap); /* a signature line is short: never truncated */
}

static void test_verify_rules(void **state) {
    (void)state;
    make_signers();
    const char *text = "example.log\n5\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n";
    char la[512], lb[512], msg[8192];
    sig_line(la, sizeof la, &alice, text);
    sig_line(lb, sizeof lb, &bob, text);
    const tg_note_verifier_t both[2] = {alice.pub, bob.pub};

    /* two signers, either order; only known keys count */
    snprintf(msg, sizeof msg, "%s\n%s%s", text, la, lb);
    verify_ok(msg, both, 2, strlen(text), 3);
    verify_ok(msg, &bob.pub, 1, strlen(text), 1);
    snprintf(msg, sizeof msg, "%s\n%s%s", text, lb, la);
    verify_ok(msg, both, 2, strlen(text), 3);
    /* no known key: unverified */
    verify_fails(msg, strlen(msg), &alice.pub, 0, TG_ERR_NOTE_UNVERIFIED);
    tg_note_verifier_t stranger = alice.pub;
    stranger.key_id ^= 1u;
    verify_fails(msg, strlen(msg), &stranger, 1, TG_ERR_NOTE_UNVERIFIED);
    /* a known name with another key id is someone else: ignored, bob still verifies */
    const tg_note_verifier_t pair[2] = {stranger, bob.pub};
    verify_ok(msg, pair, 2, strlen(text), 2);
    /* the same key twice */
    snprintf(msg, sizeof msg, "%s\n%s%s", text, la, la);
    verify_fails(msg, strlen(msg), both, 2, TG_ERR_NOTE_MALFORMED);
    /* alice's signature under bob's name and id is checked with bob's key: a bad signature */
    {
        /* alice's signature under bob's name and key id: checked with bob's key, it fails */
        uint8_t blob[68];
        size_t bn = 0;
        const char *b64 = strchr(la + 4, ' ') + 1;
        assert_int_equal(sodium_base642bin(blob, sizeof blob, b64, strlen(b64) - 1, NULL, &bn, NULL,
                                           sodium_base64_VARIANT_ORIGINAL),
                         0);
        assert_int_equal(bn, 68);
        blob[0] = (uint8_t)(bob.pub.key_id >> 24);
        blob[1] = (uint8_t)(bob.pub.key_id >> 16);
        blob[2] = (uint8_t)(bob.pub.key_id >> 8);
        blob[3] = (uint8_t)bob.pub.key_id;
        char enc[100];
        sodium_bin2base64(enc, sizeof enc, blob, sizeof blob, sodium_base64_VARIANT_ORIGINAL);
        snprintf(msg, sizeof msg, "%s\n— bob.example %s\n", text, enc);
        verify_fails(msg, strlen(msg), both, 2, TG_ERR_NOTE_SIGNATURE);
        /* and a blob of the wrong length for a known key */
        sodium_bin2base64(enc, sizeof enc, blob, 67, sodium_base64_VARIANT_ORIGINAL);
        snprintf(msg, sizeof msg, "%s\n— bob.example %s\n", text, enc);
        verify_fails(msg, strlen(msg), both, 2, TG_ERR_NOTE_SIGNATURE);
    }

    /* 16 unknown signature lines and a known one verify; TG_NOTE_MAX_SIGS + 1 lines do not */
    size_t at = (size_t)snprintf(msg, sizeof msg, "%s\n", text);
    for (int i = 0; i < 16; i++) {
        at += (size_t)snprintf(msg + at, sizeof msg - at, "— other%d AAAAAAAAAAAAAAA%c\n", i,
                               'A' + i % 26);
    }
    snprintf(msg + at, sizeof msg - at, "%s", la);
    verify_ok(msg, &alice.pub, 1, strlen(text), 1);
    {
        size_t cap = 32 * 1024;
        char *big = malloc(cap);
        assert_non_null(big);
        at = (size_t)snprintf(big, cap, "%s\n%s", text, la);
        for (int i = 0; i < TG_NOTE_MAX_SIGS; i++) {
            at += (size_t)snprintf(big + at, cap - at, "— o%d AAAAAAAA\n", i);
        }
        verify_fails(big, at, &alice.pub, 1, TG_ERR_LIMIT);
        free(big);
    }

    /* malformed notes: each one changes one thing about a good note */
    char good[1024];
    snprintf(good, sizeof good, "%s\n%s", text, la);
    verify_ok(good, &alice.pub, 1, strlen(text), 1);
    /* text ‖ mid ‖ (alice's line, or only its "<name> <b64>\n" tail) ‖ extra */
    static const struct {
        const char *what, *mid;
        int tail;
        const char *extra;
    } bad[] = {
        {"no blank line", "", 0, ""},
        {"two blank lines", "\n\n", 0, ""},
        {"a hyphen for the em dash", "\n- ", 1, ""},
        {"no space after the dash", "\n\xE2\x80\x94", 1, ""},
        {"a trailing line without newline", "\n", 0, "— x AAAAAAAA"},
        {"an empty signature line", "\n", 0, "\n"},
        {"a line without a signature", "\n", 0, "— x\n"},
        {"a line with an empty name", "\n", 0, "—  AAAAAAAA\n"},
        {"two spaces", "\n", 0, "— x  AAAAAAAA\n"},
        {"a short blob (4 bytes)", "\n", 0, "— x AAAAAA==\n"},
        {"a non-canonical blob", "\n", 0, "— x AAAAAAB=\n"},
        {"unpadded base64", "\n", 0, "— x AAAAAAA\n"},
        {"a name with a plus", "\n", 0, "— x+y AAAAAAAA\n"},
        {"a control character in a line", "\n", 0, "— x\tAAAAAAAA\n"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char m[2048];
        snprintf(m, sizeof m, "%s%s%s%s", text, bad[i].mid, bad[i].tail ? la + 4 : la,
                 bad[i].extra);
        size_t tl = 0;
        tg_err_t rc = tg_note_verify(m, strlen(m), &alice.pub, 1, &tl, NULL);
        if (rc == TG_OK) {
            fail_msg("accepted a note with %s", bad[i].what);
        }
    }
    /* the text itself: a control character, invalid UTF-8, no final newline */
    char m[2048];
    snprintf(m, sizeof m, "exa\x01mple\n\n%s", la);
    verify_fails(m, strlen(m), &alice.pub, 1, TG_ERR_NOTE_MALFORMED);
    snprintf(m, sizeof m, "exa\xC0\xAFmple\n\n%s", la);
    verify_fails(m, strlen(m), &alice.pub, 1, TG_ERR_NOTE_MALFORMED);
    verify_fails(good, strlen(good) - 1, &alice.pub, 1, TG_ERR_NOTE_MALFORMED);
    verify_fails("\n\n", 2, &alice.pub, 1, TG_ERR_NOTE_MALFORMED);
    verify_fails("", 0, &alice.pub, 1, TG_ERR_NOTE_MALFORMED);
    {
        char *huge = calloc(1, TG_NOTE_MAX_BYTES + 1);
        assert_non_null(huge);
        memcpy(huge, good, strlen(good));
        verify_fails(huge, TG_NOTE_MAX_BYTES + 1, &alice.pub, 1, TG_ERR_LIMIT);
        free(huge);
    }
    verify_fails(good, strlen(good), both, TG_NOTE_MAX_VERIFIERS + 1, TG_ERR_INVALID_ARG);

    /* the signer refuses what the verifier would */
    char out[1024];
    assert_int_equal(tg_note_sign(out, sizeof out, NULL, "no newline", 10, &alice),
                     TG_ERR_NOTE_MALFORMED);
    assert_int_equal(tg_note_sign(out, sizeof out, NULL, "a\rb\n", 4, &alice),
                     TG_ERR_NOTE_MALFORMED);
    assert_int_equal(tg_note_sign(out, sizeof out, NULL, "", 0, &alice), TG_ERR_NOTE_MALFORMED);
    tg_note_signer_wipe(&alice);
    tg_note_signer_wipe(&bob);
}

static void test_key_names_and_vkeys(void **state) {
    (void)state;
    static const char *const good[] = {"a", "example.com/log", "sum.golang.org", "caf\xC3\xA9",
                                       "x-y_z:1"};
    static const char *const bad[] = {"",
                                      "a b",
                                      "a+b",
                                      "a\tb",
                                      "a\nb",
                                      "a\x7F",
                                      "a\xC2\xA0z",     /* U+00A0 */
                                      "a\xE2\x80\x83z", /* U+2003 */
                                      "a\xE3\x80\x80z", /* U+3000 */
                                      "a\xC3",          /* truncated UTF-8 */
                                      "a\xED\xA0\x80"}; /* a surrogate */
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        assert_int_equal(tg_note_name_check(good[i], strlen(good[i])), TG_OK);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (tg_note_name_check(bad[i], strlen(bad[i])) != TG_ERR_KEY_FORMAT) {
            fail_msg("accepted name #%zu", i);
        }
    }
    char longname[TG_NOTE_NAME_MAX + 2];
    memset(longname, 'n', sizeof longname);
    assert_int_equal(tg_note_name_check(longname, TG_NOTE_NAME_MAX), TG_OK);
    assert_int_equal(tg_note_name_check(longname, TG_NOTE_NAME_MAX + 1), TG_ERR_KEY_FORMAT);

    const char *vkey = str_at("c2sp_example", "vkey");
    tg_note_verifier_t v;
    char k[256];
    /* uppercase hex, a wrong id, a short id, a wrong type byte, a truncated key, extra '+' */
    static const struct {
        const char *from, *to;
    } edits[] = {
        {"530d903a", "530D903A"},
        {"530d903a", "530d903b"},
        {"530d903a", "530d903"},
        {"+Aeky", "+Ajky"},
        {"U2k", "U2"},
        {"foo+", "foo++"},
        {"example.com/foo", ""},
        {"+Aeky", "+Aeky="},
    };
    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        const char *at = strstr(vkey, edits[i].from);
        assert_non_null(at);
        snprintf(k, sizeof k, "%.*s%s%s", (int)(at - vkey), vkey, edits[i].to,
                 at + strlen(edits[i].from));
        if (tg_note_vkey_parse(&v, k, strlen(k)) != TG_ERR_KEY_FORMAT) {
            fail_msg("accepted vkey %s", k);
        }
    }
    assert_int_equal(tg_note_vkey_parse(&v, vkey, strlen(vkey) - 1), TG_ERR_KEY_FORMAT);
    assert_int_equal(tg_note_vkey_parse(&v, "", 0), TG_ERR_KEY_FORMAT);
    /* the key id rule itself: SHA-256(name ‖ \n ‖ 0x01 ‖ key), first 4 bytes */
    assert_int_equal(tg_note_vkey_parse(&v, vkey, strlen(vkey)), TG_OK);
    uint8_t buf[15 + 2 + 32], h[32];
    memcpy(buf, "example.com/foo", 15);
    buf[15] = '\n';
    buf[16] = 0x01;
    memcpy(buf + 17, v.pk, 32);
    tg_sha256(h, buf, sizeof buf);
    assert_int_equal(tg_note_key_id(v.name, v.name_len, v.pk),
                     (uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 | (uint32_t)h[2] << 8 | h[3]);
    uint8_t seed[32] = {0};
    tg_note_signer_t s;
    assert_int_equal(tg_note_signer_from_seed(&s, "a b", 3, seed), TG_ERR_KEY_FORMAT);
}

/* ---- checkpoints ---------------------------------------------------------------------- */

static void test_checkpoint_parse(void **state) {
    (void)state;
    const char *root = "XcnaeacGWamtVZy3Ad7ZoqudgjqtL0lgz+Nw7/RgQyg=";
    char t[1024];
    tg_checkpoint_t c;
    snprintf(t, sizeof t, "example.com/log\n18446744073709551615\n%s\next one\n— ext two\n", root);
    assert_int_equal(tg_checkpoint_parse(&c, t, strlen(t)), TG_OK);
    assert_int_equal(c.size, UINT64_MAX);
    assert_int_equal(c.ext_len, strlen("ext one\n— ext two\n"));
    assert_memory_equal(c.ext, "ext one\n", 8);
    static const char *const bad[] = {
        "example.com/log\n18446744073709551616\n@\n", /* 2^64 */
        "example.com/log\n01\n@\n",
        "example.com/log\n-1\n@\n",
        "example.com/log\n+1\n@\n",
        "example.com/log\n 1\n@\n",
        "example.com/log\n\n@\n",
        "\n1\n@\n",
        "example.com/log\n1\n@",
        "example.com/log\n1\n@\n\n",
        "example.com/log\n1\n@\next\n\n",
        "example.com/log\n1\n@\nbad\x01\n",
        "example.com/log\n1\n@ \n",
        "exa\tmple\n1\n@\n",
        "example.com/log\n1\nAAAA\n",
        "example.com/log\n1\n\n",
        "example.com/log\n1\n",
        "example.com/log\n",
        "example.com/log",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        /* @ stands for the root */
        const char *at = strchr(bad[i], '@');
        if (at != NULL) {
            snprintf(t, sizeof t, "%.*s%s%s", (int)(at - bad[i]), bad[i], root, at + 1);
        } else {
            snprintf(t, sizeof t, "%s", bad[i]);
        }
        if (tg_checkpoint_parse(&c, t, strlen(t)) != TG_ERR_CHECKPOINT_MALFORMED) {
            fail_msg("accepted checkpoint #%zu: %s", i, t);
        }
    }
    /* a non-canonical root (last char's unused bits set) and a 31-byte root */
    snprintf(t, sizeof t, "o\n1\n%.42sh=\n", root);
    assert_int_equal(tg_checkpoint_parse(&c, t, strlen(t)), TG_ERR_CHECKPOINT_MALFORMED);
    snprintf(t, sizeof t, "o\n1\n%.41sA==\n", root);
    assert_int_equal(tg_checkpoint_parse(&c, t, strlen(t)), TG_ERR_CHECKPOINT_MALFORMED);
    /* an origin at the limit and one past it */
    char origin[TG_CHECKPOINT_ORIGIN_MAX + 2];
    memset(origin, 'o', sizeof origin);
    snprintf(t, sizeof t, "%.*s\n1\n%s\n", TG_CHECKPOINT_ORIGIN_MAX, origin, root);
    assert_int_equal(tg_checkpoint_parse(&c, t, strlen(t)), TG_OK);
    snprintf(t, sizeof t, "%.*s\n1\n%s\n", TG_CHECKPOINT_ORIGIN_MAX + 1, origin, root);
    assert_int_equal(tg_checkpoint_parse(&c, t, strlen(t)), TG_ERR_CHECKPOINT_MALFORMED);
    /* format refuses a bad origin and a small buffer; what it writes parses back */
    uint8_t r[32] = {1, 2, 3};
    char out[TG_CHECKPOINT_BODY_MAX];
    size_t len = 0;
    assert_int_equal(tg_checkpoint_format(out, sizeof out, &len, "a\nb", 3, 1, r),
                     TG_ERR_CHECKPOINT_MALFORMED);
    assert_int_equal(tg_checkpoint_format(out, sizeof out, &len, "", 0, 1, r),
                     TG_ERR_CHECKPOINT_MALFORMED);
    assert_int_equal(tg_checkpoint_format(out, 10, &len, "log", 3, 1, r), TG_ERR_BUFFER_TOO_SMALL);
    assert_int_equal(tg_checkpoint_format(out, sizeof out, &len, origin, TG_CHECKPOINT_ORIGIN_MAX,
                                          UINT64_MAX, r),
                     TG_OK);
    assert_int_equal(tg_checkpoint_parse(&c, out, len), TG_OK);
    assert_int_equal(c.size, UINT64_MAX);
    assert_memory_equal(c.root, r, 32);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_c2sp_example),
        cmocka_unit_test(test_go_example_signs_byte_for_byte),
        cmocka_unit_test(test_checkpoints_reproduced),
        cmocka_unit_test(test_verify_rules),
        cmocka_unit_test(test_key_names_and_vkeys),
        cmocka_unit_test(test_checkpoint_parse),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
