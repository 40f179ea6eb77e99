/* fuzz_anchor.c — tg_anchor_parse on arbitrary bytes: never a crash; what parses is the one
 * spelling of its fields (encoding it gives back the input byte for byte), and a signature
 * check on it only ever answers TG_OK or TG_ERR_CRYPTO. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "trigguard/anchor.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tg_anchor_t a;
    char what[128];
    /* Both the input as it is and, padded or cut to the anchor's size, the same bytes: most
     * inputs would otherwise stop at the size check. */
    uint8_t fixed[TG_ANCHOR_SIZE] = {0};
    memcpy(fixed, data, size < sizeof fixed ? size : sizeof fixed);
    const uint8_t *ins[2] = {data, fixed};
    size_t lens[2] = {size, sizeof fixed};
    for (int i = 0; i < 2; i++) {
        if (tg_anchor_parse(&a, ins[i], lens[i], what, sizeof what) != TG_OK) {
            continue;
        }
        uint8_t out[TG_ANCHOR_SIZE];
        if (tg_anchor_encode(out, &a) != TG_OK || lens[i] != sizeof out ||
            memcmp(out, ins[i], sizeof out) != 0) {
            abort();
        }
        static const uint8_t pk[32] = {1};
        tg_err_t rc = tg_anchor_verify(&a, pk);
        if (rc != TG_OK && rc != TG_ERR_CRYPTO) {
            abort();
        }
    }
    return 0;
}
