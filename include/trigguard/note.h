/* note.h — C2SP signed notes and tlog-checkpoint bodies (SPEC §12): the owner of both formats.
 *
 * Signed note (C2SP signed-note, Ed25519 keys only):
 *
 *   <text, valid UTF-8, no control characters but \n, ending in \n>
 *   \n
 *   — <key name> <base64(4-byte key id ‖ 64-byte Ed25519 signature)>\n     (1 or more)
 *
 * `—` is U+2014 (E2 80 94) followed by one space. The signature is over the text exactly,
 * final newline included. Key names are non-empty valid UTF-8 without '+', without
 * whitespace (ASCII or Unicode White_Space) and without control characters, at most
 * TG_NOTE_NAME_MAX bytes. Ed25519 key id = the first 4 bytes (big-endian) of
 * SHA-256(name ‖ 0x0A ‖ 0x01 ‖ public key). Verifier key text (vkey):
 * `<name>+<8 lowercase hex key id>+<base64(0x01 ‖ public key)>`; the Go signer key text
 * `PRIVATE+KEY+<name>+<hex id>+<base64(0x01 ‖ seed)>` is read too (for its published
 * example). Base64 is standard, padded and canonical (re-encoding gives the same text).
 *
 * Verification: the note is split at its last "\n\n"; each signature line is parsed
 * (a malformed one rejects the note); a line whose name and key id match no given
 * verifier is ignored; one that matches must verify (else TG_ERR_NOTE_SIGNATURE) and may
 * not appear twice; at least one must verify (else TG_ERR_NOTE_UNVERIFIED). Limits:
 * TG_NOTE_MAX_BYTES for the whole note, TG_NOTE_MAX_SIGS signature lines (the spec asks
 * verifiers to accept at least 16).
 *
 * Checkpoint (C2SP tlog-checkpoint), the text of a signed note:
 *
 *   <origin>\n<tree size, decimal, no leading zeros>\n<base64 of the 32-byte root>\n
 *   [<extension line>\n ...]
 *
 * origin: non-empty, at most TG_CHECKPOINT_ORIGIN_MAX bytes, note-text characters other
 * than \n; extension lines are non-empty and kept as a view.
 *
 * Errors: TG_ERR_NOTE_MALFORMED, TG_ERR_NOTE_SIGNATURE, TG_ERR_NOTE_UNVERIFIED,
 * TG_ERR_CHECKPOINT_MALFORMED, TG_ERR_KEY_FORMAT (vkey or signer key text, bad key name),
 * TG_ERR_LIMIT (a limit above), TG_ERR_BUFFER_TOO_SMALL (output), TG_ERR_CRYPTO
 * (libsodium could not start or sign).
 *
 * No I/O, no allocation (outputs go to caller buffers), no global state beyond
 * libsodium's one-time sodium_init (called here). Reentrant. A tg_note_signer_t holds a
 * secret key: wipe it with tg_note_signer_wipe; no function here logs or copies it
 * anywhere else.
 */
#ifndef TRIGGUARD_NOTE_H
#define TRIGGUARD_NOTE_H

#include <stddef.h>
#include <stdint.h>

#include "trigguard/err.h"

#define TG_NOTE_NAME_MAX 255
#define TG_NOTE_MAX_BYTES 65536
#define TG_NOTE_MAX_SIGS 100
#define TG_NOTE_MAX_VERIFIERS 64 /* one bit each in tg_note_verify's *verified */
#define TG_NOTE_ED25519 0x01     /* the signature type byte of Ed25519 keys */
/* name + '+' + 8 hex + '+' + base64 of 33 bytes (44) + NUL */
#define TG_NOTE_VKEY_MAX (TG_NOTE_NAME_MAX + 1 + 8 + 1 + 44 + 1)
/* "— " (4 bytes) + name + ' ' + base64 of 68 bytes (92) + '\n' */
#define TG_NOTE_SIG_LINE_MAX (4 + TG_NOTE_NAME_MAX + 1 + 92 + 1)

typedef struct tg_note_verifier {
    char name[TG_NOTE_NAME_MAX + 1]; /* NUL-terminated; name_len bytes */
    size_t name_len;
    uint32_t key_id;
    uint8_t pk[32];
} tg_note_verifier_t;

typedef struct tg_note_signer {
    tg_note_verifier_t pub;
    uint8_t sk[64]; /* libsodium's seed ‖ public key; secret */
} tg_note_signer_t;

/* TG_OK if name[0..n) is a valid key name (rules above), TG_ERR_KEY_FORMAT otherwise. */
tg_err_t tg_note_name_check(const char *name, size_t n) TG_MUST_USE;

/* The Ed25519 key id of (name, pk). The name is not checked. */
uint32_t tg_note_key_id(const char *name, size_t n, const uint8_t pk[32]);

/* Parses a vkey (n bytes, no NUL needed): checks the name, the hex id (8 lowercase hex
 * digits), the type byte 0x01, the 32-byte key, and that the id is the one the name and key
 * give. TG_ERR_KEY_FORMAT otherwise. */
tg_err_t tg_note_vkey_parse(tg_note_verifier_t *v, const char *vkey, size_t n) TG_MUST_USE;
/* Writes v's vkey text (NUL-terminated) into out; *len (may be NULL) gets its length. */
tg_err_t tg_note_vkey_format(char *out, size_t cap, size_t *len,
                             const tg_note_verifier_t *v) TG_MUST_USE;

/* A signer from a 32-byte Ed25519 seed and a key name (checked). */
tg_err_t tg_note_signer_from_seed(tg_note_signer_t *s, const char *name, size_t n,
                                  const uint8_t seed[32]) TG_MUST_USE;
/* A signer from Go's `PRIVATE+KEY+<name>+<hex id>+<base64(0x01 ‖ seed)>` text; the id
 * must match. TG_ERR_KEY_FORMAT otherwise (s is wiped). */
tg_err_t tg_note_signer_parse(tg_note_signer_t *s, const char *text, size_t n) TG_MUST_USE;
void tg_note_signer_wipe(tg_note_signer_t *s);

/* Writes the signed note text ‖ "\n" ‖ signature line into out[0..cap) (NUL-terminated);
 * *len (may be NULL) gets its length without the NUL. The text is checked (note-text rules,
 * ends in \n, and the result fits TG_NOTE_MAX_BYTES): TG_ERR_NOTE_MALFORMED /
 * TG_ERR_LIMIT. Ed25519 is deterministic, so the same key and text give the same bytes. */
tg_err_t tg_note_sign(char *out, size_t cap, size_t *len, const char *text, size_t text_len,
                      const tg_note_signer_t *s) TG_MUST_USE;

/* Verifies the signed note msg[0..n) against keys[0..nkeys) (nkeys ≤ TG_NOTE_MAX_VERIFIERS).
 * On TG_OK, *text_len = the length of the note text (a prefix of msg, final \n included),
 * and *verified (may be NULL) has bit i set for every keys[i] whose signature verified. */
tg_err_t tg_note_verify(const char *msg, size_t n, const tg_note_verifier_t *keys, size_t nkeys,
                        size_t *text_len, uint64_t *verified) TG_MUST_USE;

/* ---- checkpoints ---------------------------------------------------------------------- */

#define TG_CHECKPOINT_ORIGIN_MAX 255
/* origin + '\n' + 20 digits + '\n' + 44 base64 + '\n' + NUL */
#define TG_CHECKPOINT_BODY_MAX (TG_CHECKPOINT_ORIGIN_MAX + 1 + 20 + 1 + 44 + 1 + 1)

typedef struct tg_checkpoint {
    char origin[TG_CHECKPOINT_ORIGIN_MAX + 1]; /* NUL-terminated; origin_len bytes */
    size_t origin_len;
    uint64_t size;
    uint8_t root[32];
    const char *ext; /* the extension lines, each ending in \n: a view into the parsed text */
    size_t ext_len;  /* 0 when there are none */
} tg_checkpoint_t;

/* Parses a checkpoint body text[0..n) (the text of a verified note). TG_ERR_CHECKPOINT_MALFORMED
 * for anything but the form above. */
tg_err_t tg_checkpoint_parse(tg_checkpoint_t *c, const char *text, size_t n) TG_MUST_USE;

/* Writes `<origin>\n<size>\n<base64 root>\n` (no extensions) into out (NUL-terminated);
 * *len (may be NULL) its length. TG_ERR_CHECKPOINT_MALFORMED for a bad origin. */
tg_err_t tg_checkpoint_format(char *out, size_t cap, size_t *len, const char *origin,
                              size_t origin_len, uint64_t size, const uint8_t root[32]) TG_MUST_USE;

#endif /* TRIGGUARD_NOTE_H */
