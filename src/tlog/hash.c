/* hash.c — the module's one SHA-256 helper, canonical base64, and the note-text check. */
#include <sodium.h>
#include <string.h>

#include "tlog_int.h"
#include "trigguard/sha256.h"

/* Encoded values here are at most 68 bytes (key id ‖ signature); the bound keeps the
 * re-encoding buffer on the stack. */
#define B64_MAX_BYTES 96

void tlog_sha256(uint8_t out[32], const tlog_part_t *parts, size_t nparts) {
    tg_sha256_ctx_t st;
    tg_sha256_init(&st);
    for (size_t i = 0; i < nparts; i++) {
        if (parts[i].n > 0) {
            tg_sha256_update(&st, parts[i].p, parts[i].n);
        }
    }
    tg_sha256_final(&st, out);
}

void tlog_b64_encode(char *out, const uint8_t *in, size_t n) {
    char tmp[B64_MAX_BYTES / 3 * 4 + 8];
    if (n > B64_MAX_BYTES) {
        /* Callers encode fixed-size values; a larger one is a programming error, and the
         * output stays well-formed (empty) rather than overflowing. */
        return;
    }
    sodium_bin2base64(tmp, sizeof tmp, in, n, sodium_base64_VARIANT_ORIGINAL);
    memcpy(out, tmp, tlog_b64_len(n));
}

tg_err_t tlog_b64_decode(uint8_t *out, size_t cap, size_t *outn, const char *text, size_t tn) {
    char again[B64_MAX_BYTES / 3 * 4 + 8];
    const char *end = NULL;
    size_t n = 0;
    *outn = 0;
    if (cap > B64_MAX_BYTES || tn == 0 || tn % 4 != 0 || tn > tlog_b64_len(cap)) {
        return TG_ERR_INVALID_ARG;
    }
    if (sodium_base642bin(out, cap, text, tn, NULL, &n, &end, sodium_base64_VARIANT_ORIGINAL) !=
            0 ||
        end != text + tn) {
        return TG_ERR_INVALID_ARG;
    }
    /* Canonical: the unused low bits of the last character must be zero, padding exact. */
    sodium_bin2base64(again, sizeof again, out, n, sodium_base64_VARIANT_ORIGINAL);
    if (tlog_b64_len(n) != tn || memcmp(again, text, tn) != 0) {
        sodium_memzero(out, cap);
        return TG_ERR_INVALID_ARG;
    }
    *outn = n;
    return TG_OK;
}

int tlog_text_ok(const char *s, size_t n, int allow_nl) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        unsigned c = u[i];
        if (c < 0x80) {
            if ((c < 0x20 && !(allow_nl && c == '\n')) || c == 0x7F) {
                return 0;
            }
            i++;
            continue;
        }
        size_t len;
        uint32_t cp;
        uint32_t min;
        if (c >= 0xC2 && c <= 0xDF) {
            len = 2, cp = c & 0x1F, min = 0x80;
        } else if (c >= 0xE0 && c <= 0xEF) {
            len = 3, cp = c & 0x0F, min = 0x800;
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4, cp = c & 0x07, min = 0x10000;
        } else {
            return 0;
        }
        if (n - i < len) {
            return 0;
        }
        for (size_t k = 1; k < len; k++) {
            if ((u[i + k] & 0xC0) != 0x80) {
                return 0;
            }
            cp = (cp << 6) | (u[i + k] & 0x3Fu);
        }
        /* overlong forms, surrogates, beyond U+10FFFF (the spec bans ASCII controls only) */
        if (cp < min || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) {
            return 0;
        }
        i += len;
    }
    return 1;
}
