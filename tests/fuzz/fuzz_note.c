/* fuzz_note.c — signed-note verification (tg_note_verify) and key-text parsing on arbitrary
 * bytes, and signing arbitrary text: never a crash or an out-of-bounds read; a note that
 * verifies has a text that is a proper prefix ending in \n; whatever the signer accepts
 * verifies with its key and gives back the same text. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "trigguard/note.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The keys of the vector set (tests/vectors/tlog/signed-notes.json), so the corpus's real
 * notes reach the signature check, and a fixed-seed signer. */
static const char *const vkeys[] = {
    "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k",
    "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
    "example.trigguard.test/log+403d78f8+AQ/5XbTLeb+8LLqoQAXR4ry8ZnDbcLzK5n1UikiHx0Ip",
};
#define NKEYS (sizeof vkeys / sizeof vkeys[0])
static tg_note_verifier_t keys[NKEYS];
static tg_note_signer_t signer;
static int ready;

static void init(void) {
    uint8_t seed[32];
    for (size_t i = 0; i < NKEYS; i++) {
        if (tg_note_vkey_parse(&keys[i], vkeys[i], strlen(vkeys[i])) != TG_OK) {
            abort();
        }
    }
    memset(seed, 0x5A, sizeof seed);
    if (tg_note_signer_from_seed(&signer, "fuzz.example/log", 16, seed) != TG_OK) {
        abort();
    }
    ready = 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *msg = (const char *)data;
    size_t text_len = 0;
    uint64_t verified = 0;
    if (!ready) {
        init();
    }
    tg_err_t rc = tg_note_verify(msg, size, keys, NKEYS, &text_len, &verified);
    if (rc == TG_OK) {
        if (verified == 0 || verified >= (UINT64_C(1) << NKEYS) || text_len == 0 ||
            text_len + 2 > size || msg[text_len - 1] != '\n' || msg[text_len] != '\n') {
            abort();
        }
    } else if (text_len != 0 || verified != 0) {
        abort();
    }

    /* the same bytes as key texts: whatever parses formats back to exactly the input */
    tg_note_verifier_t v;
    if (tg_note_vkey_parse(&v, msg, size) == TG_OK) {
        char out[TG_NOTE_VKEY_MAX];
        size_t len = 0;
        if (tg_note_vkey_format(out, sizeof out, &len, &v) != TG_OK || len != size ||
            memcmp(out, msg, size) != 0) {
            abort();
        }
    }
    tg_note_signer_t s;
    if (tg_note_signer_parse(&s, msg, size) == TG_OK &&
        tg_note_key_id(s.pub.name, s.pub.name_len, s.pub.pk) != s.pub.key_id) {
        abort();
    }
    tg_note_signer_wipe(&s);

    /* the same bytes as a note text to sign: a signed note verifies, text unchanged */
    if (size <= 4096) {
        static char note[4096 + TG_NOTE_SIG_LINE_MAX + 2];
        size_t len = 0;
        if (tg_note_sign(note, sizeof note, &len, msg, size, &signer) == TG_OK) {
            if (memcmp(note, msg, size) != 0 ||
                tg_note_verify(note, len, &signer.pub, 1, &text_len, &verified) != TG_OK ||
                text_len != size || verified != 1) {
                abort();
            }
        }
    }
    return 0;
}
