/* fuzz_receipt_verify.c — receipt text -> tg_receipt_verify_text against a fixed key ring.
 * The ring holds the public key of seed 00..1f as trigguard-key-1 (the golden receipts'
 * key), so corpus mutations reach every verification step. Must never crash or leak. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "trigguard/keys.h"
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
    ready = 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tg_diag_t diag;
    if (!ready) {
        setup();
    }
    /* 2026-11-30T05:45:00.000Z: inside the golden receipts' lifetime */
    tg_err_t rc =
        tg_receipt_verify_text(&ring, (const char *)data, size, INT64_C(1796017500000), &diag);
    const char *reason = tg_receipt_reason_code(rc);
    if (reason == NULL || (rc == TG_OK) != (strcmp(reason, "valid") == 0)) {
        abort();
    }
    /* verification is a pure function of its inputs */
    if (tg_receipt_verify_text(&ring, (const char *)data, size, INT64_C(1796017500000), NULL) !=
        rc) {
        abort();
    }
    return 0;
}
