/* fuzz_pem.c — tg_key_parse_pem on arbitrary text; accepted keys must round-trip exactly. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "trigguard/buf.h"
#include "trigguard/keys.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tg_key_t key, again;
    tg_diag_t diag;
    tg_buf_t pem;
    tg_err_t rc = tg_key_parse_pem(&key, (const char *)data, size, NULL, &diag);
    if (rc != TG_OK) {
        /* failures leave no key material behind */
        for (size_t i = 0; i < sizeof key; i++) {
            if (((const unsigned char *)&key)[i] != 0) {
                abort();
            }
        }
        return 0;
    }
    if (!tg_key_id_valid(key.key_id, strlen(key.key_id))) {
        abort();
    }
    /* re-encode (the way openssl writes it) and parse again: same key */
    tg_buf_init(&pem, 4096);
    rc = key.has_secret ? tg_key_private_pem(&pem, &key) : tg_key_public_pem(&pem, &key);
    if (rc != TG_OK || tg_key_parse_pem(&again, pem.data, pem.len, key.key_id, NULL) != TG_OK ||
        again.has_secret != key.has_secret || memcmp(again.pk, key.pk, sizeof key.pk) != 0 ||
        memcmp(again.sk, key.sk, sizeof key.sk) != 0 || strcmp(again.key_id, key.key_id) != 0) {
        abort();
    }
    tg_key_wipe(&key);
    tg_key_wipe(&again);
    if (pem.data != NULL) {
        memset(pem.data, 0, pem.len);
    }
    tg_buf_free(&pem);
    return 0;
}
