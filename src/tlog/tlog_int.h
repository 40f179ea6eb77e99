/* tlog_int.h — helpers shared by the files of src/tlog (not a public contract).
 *
 * Every SHA-256 of the module goes through tlog_sha256: one place to switch the hashing
 * implementation (SHA-NI is planned) without touching the formats. Base64 here is the
 * standard alphabet with padding, and decoding is canonical: the text must be exactly what
 * encoding the decoded bytes gives back, so one value has one spelling (a note or a
 * checkpoint cannot be re-spelled while its signature still verifies).
 */
#ifndef TG_TLOG_INT_H
#define TG_TLOG_INT_H

#include <stddef.h>
#include <stdint.h>

#include "trigguard/err.h"

/* One input part of a hash: SHA-256(part[0] ‖ part[1] ‖ ...). */
typedef struct tlog_part {
    const void *p;
    size_t n;
} tlog_part_t;

void tlog_sha256(uint8_t out[32], const tlog_part_t *parts, size_t nparts);

/* Length of the padded base64 of n bytes. */
static inline size_t tlog_b64_len(size_t n) { return (n + 2) / 3 * 4; }

/* Encodes in[0..n) into out (tlog_b64_len(n) bytes, no NUL written). */
void tlog_b64_encode(char *out, const uint8_t *in, size_t n);

/* Decodes canonical padded base64 text[0..tn) into out[0..cap); *outn = the byte count.
 * TG_ERR_INVALID_ARG for non-canonical or invalid text, or more than cap bytes. */
tg_err_t tlog_b64_decode(uint8_t *out, size_t cap, size_t *outn, const char *text, size_t tn);

/* Valid UTF-8 without control characters (C0, DEL) except, when allow_nl, '\n'. */
int tlog_text_ok(const char *s, size_t n, int allow_nl);

#endif /* TG_TLOG_INT_H */
