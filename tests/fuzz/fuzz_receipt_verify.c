/* fuzz_receipt_verify.c — receipt text -> tg_receipt_verify_text against a fixed key ring.
 * The ring holds the public key of seed 00..1f as trigguard-key-1 (the golden receipts'
 * key) and the log key of seed a0..bf named fuzz.trigguard/log (the batch-signed seeds'
 * checkpoints, SPEC §12), so corpus mutations reach every verification step of both kinds. Must
 * never crash or leak; verification is deterministic, valid receipts expire, and the canonical form
 * of a receipt verifies exactly as the receipt does. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "trigguard/canon.h"
#include "trigguard/keys.h"
#include "trigguard/note.h"
#include "trigguard/receipt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static tg_keyring_t ring;
static int ready;

static void setup(void) {
    uint8_t seed[32];
    tg_key_t key;
    for (int i = 0; i < 32; i++) {
        seed[i] = (uint8_t)i;
    }
    tg_keyring_init(&ring);
    if (tg_key_from_seed(&key, seed, "trigguard-key-1") != TG_OK ||
        tg_keyring_add(&ring, &key, TG_KEY_VERIFY_ONLY) != TG_OK) {
        abort();
    }
    tg_key_wipe(&key);
    tg_note_signer_t log;
    for (int i = 0; i < 32; i++) {
        seed[i] = (uint8_t)(0xa0 + i);
    }
    if (tg_note_signer_from_seed(&log, "fuzz.trigguard/log", 18, seed) != TG_OK ||
        tg_keyring_add_log(&ring, &log.pub) != TG_OK) {
        abort();
    }
    tg_note_signer_wipe(&log);
    ready = 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tg_diag_t diag;
    if (!ready) {
        setup();
    }
    /* 2026-11-30T05:45:00.000Z: inside the golden receipts' lifetime */
    tg_err_t rc = tg_receipt_verify_text(&ring, (const char *)data, size, INT64_C(1796017500000),
                                         NULL, &diag);
    const char *reason = tg_receipt_reason_code(rc);
    if (reason == NULL || (rc == TG_OK) != (strcmp(reason, "valid") == 0)) {
        abort();
    }
    /* verification is a pure function of its inputs */
    if (tg_receipt_verify_text(&ring, (const char *)data, size, INT64_C(1796017500000), NULL,
                               NULL) != rc) {
        abort();
    }
    /* A valid receipt expires: at the end of time it is EXPIRED, nothing else. */
    if (rc == TG_OK && tg_receipt_verify_text(&ring, (const char *)data, size, INT64_MAX, NULL,
                                              NULL) != TG_ERR_RECEIPT_EXPIRED) {
        abort();
    }
    /* Text and tree agree, and the verdict depends on the receipt's content, not on its
     * spelling: the canonical form (other member order, whitespace, escapes) verifies the
     * same way, since receiptHash covers the canonical form. */
    json_t *tree = NULL;
    tg_json_limits_t lim = TG_JSON_LIMITS_DEFAULT;
    lim.max_bytes = TG_RECEIPT_MAX_BYTES;
    if (tg_json_parse(&tree, (const char *)data, size, &lim, NULL) == TG_OK) {
        tg_buf_t c;
        tg_buf_init(&c, 0);
        /* the text form takes {"receipt": {...}} and responses (SPEC §3), so the tree must */
        if (tg_receipt_verify_doc(&ring, tree, INT64_C(1796017500000), NULL, NULL) != rc ||
            tg_canon_write(&c, tree, NULL) != TG_OK) {
            abort();
        }
        tg_err_t crc =
            tg_receipt_verify_text(&ring, c.data, c.len, INT64_C(1796017500000), NULL, NULL);
        /* numbers may grow when written canonically ("1e3" -> "1000"), past the size limit */
        if (crc != rc && !(crc == TG_ERR_JSON_TOO_LARGE && c.len > TG_RECEIPT_MAX_BYTES)) {
            abort();
        }
        tg_buf_free(&c);
        json_decref(tree);
    }
    return 0;
}
