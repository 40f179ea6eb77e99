/* keys.h — Ed25519 keys: PKCS#8/SPKI PEM <-> raw bytes, key files, key ring, keys.json.
 *
 * Formats (SPEC §6). Only the exact DER that `openssl genpkey -algorithm ed25519` and
 * `openssl pkey -pubout` write is accepted (strict, byte for byte apart from the key):
 *
 *   PRIVATE KEY (PKCS#8 v1, 48 bytes)        PUBLIC KEY (SPKI, 44 bytes)
 *   off len  bytes                           off len  bytes
 *     0  16  30 2e 02 01 00 30 05 06           0  12  30 2a 30 05 06 03 2b 65 70
 *            03 2b 65 70 04 22 04 20                  03 21 00
 *    16  32  seed                             12  32  public key
 *
 * PEM text: optional RFC 7468 explanatory text, then "-----BEGIN <label>-----", base64
 * lines (ORIGINAL alphabet, padded; only CR/LF between them), "-----END <label>-----",
 * then nothing but line breaks. In the explanatory text trigguard reads (and keygen
 * writes) one line "trigguard-key-id: <id>"; openssl ignores it.
 *
 * Key ids: 1..TG_KEY_ID_MAX characters of [A-Za-z0-9._:-]. Precedence: an explicit id
 * argument, else the key-id line of the PEM, else "tg-" + first 16 hex of
 * SHA-256(raw 32-byte public key). openssl keeps no id line (`openssl pkey -pubout` of a
 * keygen file drops it), so such a file gets the derived id: the same for the private and
 * the public half, but not the id a daemon was given with --key-id.
 *
 * Secrets: tg_key_t holds the private key in libsodium form (seed || pk). Every
 * temporary that held secret bytes is wiped with sodium_memzero; call tg_key_wipe (or
 * tg_keyring_wipe) when done. Nothing here logs or prints key material; diag messages
 * never contain it.
 *
 * Thread safety: all functions are reentrant on distinct objects. A tg_key_t or a
 * tg_keyring_t that is no longer modified may be read (find, sign, verify, render) from
 * any number of threads at once: set up the ring first, then share it read-only.
 */
#ifndef TRIGGUARD_KEYS_H
#define TRIGGUARD_KEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trigguard/buf.h"
#include "trigguard/err.h"

#define TG_KEY_ID_MAX 64
#define TG_KEY_PK_LEN 32
#define TG_KEY_SK_LEN 64
#define TG_KEY_SEED_LEN 32
#define TG_KEY_SIG_LEN 64
/* Upper bound for a key file (and for PEM text given to tg_key_parse_pem). */
#define TG_KEY_FILE_MAX ((size_t)16 * 1024)
/* Prefix of the explanatory line carrying the key id. */
#define TG_KEY_ID_LINE "trigguard-key-id:"

typedef struct tg_key {
    char key_id[TG_KEY_ID_MAX + 1]; /* NUL-terminated, always valid once loaded */
    uint8_t pk[TG_KEY_PK_LEN];
    uint8_t sk[TG_KEY_SK_LEN]; /* seed || pk; all zero when !has_secret */
    bool has_secret;
} tg_key_t;

/* True when s[0..n) is a valid key id (1..64 chars of [A-Za-z0-9._:-]). Thread-safe. */
bool tg_key_id_valid(const char *s, size_t n);

/* Writes the default key id "tg-" + 16 hex of SHA-256(pk) (19 chars + NUL) into out. */
void tg_key_default_id(char out[TG_KEY_ID_MAX + 1], const uint8_t pk[TG_KEY_PK_LEN]);

/* New random key pair (libsodium CSPRNG). key_id NULL = default id.
 * Errors: TG_ERR_INVALID_ARG (bad key id), TG_ERR_CRYPTO (libsodium init failed). */
tg_err_t tg_key_generate(tg_key_t *out, const char *key_id) TG_MUST_USE;

/* Key pair from a 32-byte seed (RFC 8032 secret key). key_id NULL = default id.
 * The caller keeps ownership of seed (and should wipe it). Errors as tg_key_generate. */
tg_err_t tg_key_from_seed(tg_key_t *out, const uint8_t seed[TG_KEY_SEED_LEN],
                          const char *key_id) TG_MUST_USE;

/* Public-only key from 32 raw bytes. Errors: TG_ERR_INVALID_ARG (bad key id). */
tg_err_t tg_key_from_public(tg_key_t *out, const uint8_t pk[TG_KEY_PK_LEN],
                            const char *key_id) TG_MUST_USE;

/* Parses PEM text (len bytes, need not be NUL-terminated, at most TG_KEY_FILE_MAX) holding
 * one PRIVATE KEY or PUBLIC KEY in the formats above. key_id_or_NULL overrides any id.
 * pem stays the caller's (wipe it if it held a private key). On error *out is zeroed. Errors:
 * TG_ERR_KEY_FORMAT (diag says what is wrong), TG_ERR_LIMIT (text too long), TG_ERR_INVALID_ARG
 * (bad explicit key id). */
tg_err_t tg_key_parse_pem(tg_key_t *out, const char *pem, size_t len, const char *key_id_or_NULL,
                          tg_diag_t *diag) TG_MUST_USE;

/* Reads and parses a key file (at most TG_KEY_FILE_MAX bytes; symlinks are followed).
 * A PRIVATE KEY file whose mode grants any group/other permission (st_mode & 077) is
 * refused. Errors: TG_ERR_NOT_FOUND (no such file), TG_ERR_IO (cannot open/read, not a
 * regular file), TG_ERR_LIMIT (too large), TG_ERR_KEY_PERMISSIONS, and those of
 * tg_key_parse_pem. diag names the path. */
tg_err_t tg_key_load_file(tg_key_t *out, const char *path, const char *key_id_or_NULL,
                          tg_diag_t *diag) TG_MUST_USE;

/* Appends the PKCS#8 PEM of the private key, byte-identical to openssl's output.
 * Errors: TG_ERR_NO_KEY (no secret), tg_buf errors. The caller should wipe the buffer
 * (sodium_memzero(out->data, out->len)) before freeing it. */
tg_err_t tg_key_private_pem(tg_buf_t *out, const tg_key_t *key) TG_MUST_USE;

/* Appends the SPKI PEM of the public key (as `openssl pkey -pubout` writes it). */
tg_err_t tg_key_public_pem(tg_buf_t *out, const tg_key_t *key) TG_MUST_USE;

/* Creates `path` (mode 0600 whatever the umask; never overwrites), writes the private key
 * PEM (preceded by the key-id line when write_key_id_line), fsyncs file and directory.
 * Errors: TG_ERR_EXISTS (path exists), TG_ERR_NO_KEY, TG_ERR_IO (partial file removed). */
tg_err_t tg_key_save_private(const char *path, const tg_key_t *key, bool write_key_id_line,
                             tg_diag_t *diag) TG_MUST_USE;

/* Ed25519 signature of msg[0..n). Errors: TG_ERR_NO_KEY (public-only key),
 * TG_ERR_CRYPTO. Thread-safe on a shared const key. */
tg_err_t tg_key_sign(uint8_t sig[TG_KEY_SIG_LEN], const tg_key_t *key, const uint8_t *msg,
                     size_t n) TG_MUST_USE;

/* TG_OK when sig is a valid signature of msg by key, else TG_ERR_CRYPTO. Thread-safe. */
tg_err_t tg_key_verify(const tg_key_t *key, const uint8_t sig[TG_KEY_SIG_LEN], const uint8_t *msg,
                       size_t n) TG_MUST_USE;

/* Removes the secret half (wiped) and keeps the public key and id. NULL-safe. */
void tg_key_drop_secret(tg_key_t *key);

/* Wipes the whole key (sodium_memzero). NULL-safe. */
void tg_key_wipe(tg_key_t *key);

/* ---- key ring ---------------------------------------------------------------------- */

#define TG_KEYRING_MAX 16

typedef enum tg_key_status {
    TG_KEY_VERIFY_ONLY = 0, /* verifies receipts, never signs (rotation) */
    TG_KEY_ACTIVE = 1       /* the one signer (its secret may be absent in a verify ring) */
} tg_key_status_t;

typedef struct tg_keyring_entry {
    tg_key_t key;
    tg_key_status_t status;
    /* A trust anchor: a key the user named explicitly (`verify --key FILE`). Verifiers
     * accept a signature by it whatever key id the receipt states, since that id is a hint
     * (not signed) and a PEM exported without its id line gets a derived one. */
    bool anchor;
} tg_keyring_entry_t;

/* Caller-allocated (a few KiB; fine on the stack or inside a config object). */
typedef struct tg_keyring {
    tg_keyring_entry_t entries[TG_KEYRING_MAX]; /* active entry first, then add order */
    size_t count;
} tg_keyring_t;

/* Empty ring. */
void tg_keyring_init(tg_keyring_t *ring);

/* Copies `key` into the ring. A verify-only entry never keeps a secret (the copy's secret
 * is wiped); an active entry keeps it when present. The caller still owns (and should
 * wipe) `key`. Errors: TG_ERR_LIMIT (ring full), TG_ERR_EXISTS (same key id or same
 * public key already present), TG_ERR_INVALID_ARG (a second active key, bad status). */
tg_err_t tg_keyring_add(tg_keyring_t *ring, const tg_key_t *key,
                        tg_key_status_t status) TG_MUST_USE;

/* Adds `key` verify-only (as tg_keyring_add) and marks it a trust anchor (see above).
 * Same errors as tg_keyring_add. */
tg_err_t tg_keyring_add_anchor(tg_keyring_t *ring, const tg_key_t *key) TG_MUST_USE;

/* The key with this id (n bytes), or NULL. Constant per ring; thread-safe read. */
const tg_key_t *tg_keyring_find(const tg_keyring_t *ring, const char *key_id, size_t n);

/* The active key, or NULL when there is none. */
const tg_key_t *tg_keyring_active(const tg_keyring_t *ring);

/* The active key when it can sign (has its secret), else NULL: what a server needs. */
const tg_key_t *tg_keyring_signer(const tg_keyring_t *ring);

/* Appends the key discovery document of SPEC §6 and §12, compact, members in the spec's
 * order: {"protocol":"trigguard/v1","authority":A,"keys":[{"keyId","algorithm":"Ed25519",
 *  "use":"receipt","status":"active"|"verify-only","publicKeyPem"}...]} (active key first).
 * Errors: TG_ERR_NO_KEY (empty ring), TG_ERR_INVALID_ARG (authority not UTF-8),
 * tg_buf errors. */
tg_err_t tg_keyring_keys_json(tg_buf_t *out, const tg_keyring_t *ring,
                              const char *authority) TG_MUST_USE;

/* The transparency log's checkpoint key as keys.json lists it (SPEC §12), after the receipt
 * keys: {"keyId","algorithm":"Ed25519","use":"checkpoint","origin","vkey","publicKeyPem",
 * "status":"active"}. The strings are the caller's (origin and vkey: note.h's formats, checked
 * there; key_id a valid key id); key is its public half. */
typedef struct tg_keys_json_log {
    const char *key_id;
    const char *origin;
    const char *vkey;
    const tg_key_t *key;
} tg_keys_json_log_t;

/* tg_keyring_keys_json with the log's key listed too (log NULL: the same document). With a
 * log key the ring may be empty (the document then lists that key alone). Errors: those of
 * tg_keyring_keys_json; TG_ERR_INVALID_ARG for an invalid log key id or a string that is not
 * UTF-8. */
tg_err_t tg_keyring_keys_json_log(tg_buf_t *out, const tg_keyring_t *ring, const char *authority,
                                  const tg_keys_json_log_t *log) TG_MUST_USE;

/* Adds every receipt key of a keys.json document (text, len bytes) to the ring, public keys
 * only, with their status. Unknown members are ignored; "protocol" must be "trigguard/v1";
 * "keys" must be a non-empty array of objects; an entry whose "use" is present and not
 * "receipt" (the log's "checkpoint" key, SPEC §12) is skipped, since it never signs a
 * receipt; every other needs a valid keyId, algorithm "Ed25519", status "active" or
 * "verify-only" and a PUBLIC KEY publicKeyPem ("use", when present, must be a string).
 * Errors: TG_ERR_JSON_* (not JSON), TG_ERR_KEY_FORMAT (wrong document shape or key; diag
 * names the member), and those of tg_keyring_add. On error the ring may hold the keys
 * added before the bad one: discard it. */
tg_err_t tg_keyring_load_keys_json(tg_keyring_t *ring, const char *text, size_t len,
                                   tg_diag_t *diag) TG_MUST_USE;

/* Wipes every key and empties the ring. NULL-safe. */
void tg_keyring_wipe(tg_keyring_t *ring);

#endif /* TRIGGUARD_KEYS_H */
