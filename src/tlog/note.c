/* note.c — C2SP signed notes with Ed25519 keys: key names, key ids, vkeys, signing and
 * verifying. */
#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "tlog_int.h"
#include "trigguard/note.h"

/* "— ": U+2014 EM DASH and a space, the start of every signature line. */
static const char sig_prefix[] = "\xE2\x80\x94 ";
#define SIG_PREFIX_LEN 4
/* Signature blobs (key id ‖ signature) are decoded up to this size; Ed25519's is 68 and a
 * C2SP cosignature's 76. A longer blob makes the note malformed (documented in note.h). */
#define SIG_BLOB_MAX 96

static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static void put_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* Unicode White_Space characters beyond ASCII, as UTF-8 (a name may not hold them). */
static int unicode_space_at(const unsigned char *u, size_t left) {
    if (left >= 2 && u[0] == 0xC2 && (u[1] == 0x85 || u[1] == 0xA0)) {
        return 1; /* U+0085, U+00A0 */
    }
    if (left < 3) {
        return 0;
    }
    if (u[0] == 0xE1 && u[1] == 0x9A && u[2] == 0x80) {
        return 1; /* U+1680 */
    }
    if (u[0] == 0xE2 && u[1] == 0x80 &&
        (u[2] <= 0x8A || u[2] == 0xA8 || u[2] == 0xA9 || u[2] == 0xAF)) {
        return 1; /* U+2000..U+200A, U+2028, U+2029, U+202F */
    }
    if (u[0] == 0xE2 && u[1] == 0x81 && u[2] == 0x9F) {
        return 1; /* U+205F */
    }
    return u[0] == 0xE3 && u[1] == 0x80 && u[2] == 0x80; /* U+3000 */
}

tg_err_t tg_note_name_check(const char *name, size_t n) {
    if (name == NULL || n == 0 || n > TG_NOTE_NAME_MAX || !tlog_text_ok(name, n, 0)) {
        return TG_ERR_KEY_FORMAT;
    }
    const unsigned char *u = (const unsigned char *)name;
    for (size_t i = 0; i < n; i++) {
        if (u[i] == ' ' || u[i] == '+' || unicode_space_at(u + i, n - i)) {
            return TG_ERR_KEY_FORMAT;
        }
    }
    return TG_OK;
}

uint32_t tg_note_key_id(const char *name, size_t n, const uint8_t pk[32]) {
    static const uint8_t sep[2] = {'\n', TG_NOTE_ED25519};
    uint8_t h[32];
    tlog_part_t parts[3] = {{name, n}, {sep, 2}, {pk, 32}};
    tlog_sha256(h, parts, 3);
    return be32(h);
}

/* 8 lowercase hex digits. */
static int parse_hex32(const char *s, size_t n, uint32_t *out) {
    uint32_t v = 0;
    if (n != 8) {
        return 0;
    }
    for (size_t i = 0; i < 8; i++) {
        char c = s[i];
        unsigned d;
        if (c >= '0' && c <= '9') {
            d = (unsigned)(c - '0');
        } else if (c >= 'a' && c <= 'f') {
            d = (unsigned)(c - 'a' + 10);
        } else {
            return 0;
        }
        v = v << 4 | d;
    }
    *out = v;
    return 1;
}

/* Splits `<name>+<hex>+<base64>` and checks name and hex; the key bytes (0x01 ‖ 32 bytes)
 * go to key33. The name cannot hold '+', so the first two '+' are the separators. */
static tg_err_t parse_key_text(const char *s, size_t n, const char **name, size_t *name_len,
                               uint32_t *id, uint8_t key33[33]) {
    const char *p1 = memchr(s, '+', n);
    if (p1 == NULL) {
        return TG_ERR_KEY_FORMAT;
    }
    const char *rest = p1 + 1;
    size_t rest_n = n - (size_t)(rest - s);
    const char *p2 = memchr(rest, '+', rest_n);
    if (p2 == NULL) {
        return TG_ERR_KEY_FORMAT;
    }
    const char *b64 = p2 + 1;
    size_t b64_n = n - (size_t)(b64 - s);
    size_t got = 0;
    *name = s;
    *name_len = (size_t)(p1 - s);
    if (tg_note_name_check(s, *name_len) != TG_OK || !parse_hex32(rest, (size_t)(p2 - rest), id) ||
        tlog_b64_decode(key33, 33, &got, b64, b64_n) != TG_OK || got != 33 ||
        key33[0] != TG_NOTE_ED25519) {
        sodium_memzero(key33, 33);
        return TG_ERR_KEY_FORMAT;
    }
    return TG_OK;
}

tg_err_t tg_note_vkey_parse(tg_note_verifier_t *v, const char *vkey, size_t n) {
    const char *name;
    size_t name_len;
    uint32_t id;
    uint8_t key33[33];
    memset(v, 0, sizeof *v);
    if (vkey == NULL || n >= TG_NOTE_VKEY_MAX) {
        return TG_ERR_KEY_FORMAT;
    }
    tg_err_t rc = parse_key_text(vkey, n, &name, &name_len, &id, key33);
    if (rc != TG_OK) {
        return rc;
    }
    if (tg_note_key_id(name, name_len, key33 + 1) != id) {
        return TG_ERR_KEY_FORMAT;
    }
    memcpy(v->name, name, name_len);
    v->name[name_len] = '\0';
    v->name_len = name_len;
    v->key_id = id;
    memcpy(v->pk, key33 + 1, 32);
    return TG_OK;
}

tg_err_t tg_note_vkey_format(char *out, size_t cap, size_t *len, const tg_note_verifier_t *v) {
    uint8_t key33[33];
    char b64[44];
    if (tg_note_name_check(v->name, v->name_len) != TG_OK) {
        return TG_ERR_KEY_FORMAT;
    }
    key33[0] = TG_NOTE_ED25519;
    memcpy(key33 + 1, v->pk, 32);
    tlog_b64_encode(b64, key33, 33);
    int w =
        snprintf(out, cap, "%.*s+%08x+%.44s", (int)v->name_len, v->name, (unsigned)v->key_id, b64);
    if (w < 0 || (size_t)w >= cap) {
        return TG_ERR_BUFFER_TOO_SMALL;
    }
    if (len != NULL) {
        *len = (size_t)w;
    }
    return TG_OK;
}

tg_err_t tg_note_signer_from_seed(tg_note_signer_t *s, const char *name, size_t n,
                                  const uint8_t seed[32]) {
    memset(s, 0, sizeof *s);
    if (tg_note_name_check(name, n) != TG_OK) {
        return TG_ERR_KEY_FORMAT;
    }
    if (sodium_init() < 0 || crypto_sign_seed_keypair(s->pub.pk, s->sk, seed) != 0) {
        tg_note_signer_wipe(s);
        return TG_ERR_CRYPTO;
    }
    memcpy(s->pub.name, name, n);
    s->pub.name[n] = '\0';
    s->pub.name_len = n;
    s->pub.key_id = tg_note_key_id(name, n, s->pub.pk);
    return TG_OK;
}

tg_err_t tg_note_signer_parse(tg_note_signer_t *s, const char *text, size_t n) {
    static const char prefix[] = "PRIVATE+KEY+";
    const size_t plen = sizeof prefix - 1;
    const char *name;
    size_t name_len;
    uint32_t id;
    uint8_t key33[33];
    memset(s, 0, sizeof *s);
    if (text == NULL || n <= plen || n >= plen + TG_NOTE_VKEY_MAX ||
        memcmp(text, prefix, plen) != 0) {
        return TG_ERR_KEY_FORMAT;
    }
    tg_err_t rc = parse_key_text(text + plen, n - plen, &name, &name_len, &id, key33);
    if (rc == TG_OK) {
        rc = tg_note_signer_from_seed(s, name, name_len, key33 + 1);
    }
    sodium_memzero(key33, sizeof key33);
    if (rc == TG_OK && s->pub.key_id != id) {
        rc = TG_ERR_KEY_FORMAT;
    }
    if (rc != TG_OK) {
        tg_note_signer_wipe(s);
    }
    return rc;
}

void tg_note_signer_wipe(tg_note_signer_t *s) {
    if (s != NULL) {
        sodium_memzero(s, sizeof *s);
    }
}

/* Note text: non-empty, ends in \n, valid UTF-8 without controls other than \n. */
static int note_text_ok(const char *text, size_t n) {
    return text != NULL && n > 0 && text[n - 1] == '\n' && tlog_text_ok(text, n, 1);
}

tg_err_t tg_note_sign(char *out, size_t cap, size_t *len, const char *text, size_t text_len,
                      const tg_note_signer_t *s) {
    uint8_t blob[4 + 64];
    char b64[92];
    if (!note_text_ok(text, text_len)) {
        return TG_ERR_NOTE_MALFORMED;
    }
    if (tg_note_name_check(s->pub.name, s->pub.name_len) != TG_OK) {
        return TG_ERR_KEY_FORMAT;
    }
    size_t total = text_len + 1 + SIG_PREFIX_LEN + s->pub.name_len + 1 + sizeof b64 + 1;
    if (text_len > TG_NOTE_MAX_BYTES || total > TG_NOTE_MAX_BYTES) {
        return TG_ERR_LIMIT;
    }
    if (total + 1 > cap) {
        return TG_ERR_BUFFER_TOO_SMALL;
    }
    put_be32(blob, s->pub.key_id);
    if (sodium_init() < 0 || crypto_sign_detached(blob + 4, NULL, (const unsigned char *)text,
                                                  (unsigned long long)text_len, s->sk) != 0) {
        return TG_ERR_CRYPTO;
    }
    tlog_b64_encode(b64, blob, sizeof blob);
    size_t at = 0;
    memmove(out, text, text_len); /* memmove: out may be where the caller built text */
    at += text_len;
    out[at++] = '\n';
    memcpy(out + at, sig_prefix, SIG_PREFIX_LEN);
    at += SIG_PREFIX_LEN;
    memcpy(out + at, s->pub.name, s->pub.name_len);
    at += s->pub.name_len;
    out[at++] = ' ';
    memcpy(out + at, b64, sizeof b64);
    at += sizeof b64;
    out[at++] = '\n';
    out[at] = '\0';
    if (len != NULL) {
        *len = at;
    }
    return TG_OK;
}

tg_err_t tg_note_verify(const char *msg, size_t n, const tg_note_verifier_t *keys, size_t nkeys,
                        size_t *text_len, uint64_t *verified) {
    uint64_t ok = 0;
    *text_len = 0;
    if (verified != NULL) {
        *verified = 0;
    }
    if (nkeys > TG_NOTE_MAX_VERIFIERS || (nkeys > 0 && keys == NULL)) {
        return TG_ERR_INVALID_ARG;
    }
    if (msg == NULL) {
        return TG_ERR_NOTE_MALFORMED;
    }
    if (n > TG_NOTE_MAX_BYTES) {
        return TG_ERR_LIMIT;
    }
    /* The text ends at the last blank line; what follows is only signature lines. */
    size_t split = n;
    for (size_t i = n; i >= 2; i--) {
        if (msg[i - 2] == '\n' && msg[i - 1] == '\n') {
            split = i - 2;
            break;
        }
    }
    if (split == n) {
        return TG_ERR_NOTE_MALFORMED;
    }
    size_t tlen = split + 1;
    if (!note_text_ok(msg, tlen)) {
        return TG_ERR_NOTE_MALFORMED;
    }
    const char *sigs = msg + split + 2;
    size_t sn = n - (split + 2);
    if (sn == 0 || sigs[sn - 1] != '\n') {
        return TG_ERR_NOTE_MALFORMED;
    }
    if (sodium_init() < 0) {
        return TG_ERR_CRYPTO;
    }
    unsigned lines = 0;
    size_t at = 0;
    while (at < sn) {
        const char *line = sigs + at;
        const char *nl = memchr(line, '\n', sn - at);
        size_t ln = (size_t)(nl - line); /* nl exists: the block ends in \n */
        at += ln + 1;
        if (++lines > TG_NOTE_MAX_SIGS) {
            return TG_ERR_LIMIT;
        }
        if (ln < SIG_PREFIX_LEN || memcmp(line, sig_prefix, SIG_PREFIX_LEN) != 0) {
            return TG_ERR_NOTE_MALFORMED;
        }
        const char *name = line + SIG_PREFIX_LEN;
        const char *sp = memchr(name, ' ', ln - SIG_PREFIX_LEN);
        if (sp == NULL) {
            return TG_ERR_NOTE_MALFORMED;
        }
        size_t name_len = (size_t)(sp - name);
        const char *b64 = sp + 1;
        size_t b64_n = ln - SIG_PREFIX_LEN - name_len - 1;
        uint8_t blob[SIG_BLOB_MAX];
        size_t blob_n = 0;
        if (tg_note_name_check(name, name_len) != TG_OK ||
            tlog_b64_decode(blob, sizeof blob, &blob_n, b64, b64_n) != TG_OK || blob_n < 5) {
            return TG_ERR_NOTE_MALFORMED;
        }
        uint32_t id = be32(blob);
        for (size_t k = 0; k < nkeys; k++) {
            const tg_note_verifier_t *v = &keys[k];
            if (v->key_id != id || v->name_len != name_len ||
                memcmp(v->name, name, name_len) != 0) {
                continue;
            }
            if (ok & (UINT64_C(1) << k)) {
                return TG_ERR_NOTE_MALFORMED; /* the same key twice */
            }
            if (blob_n != 4 + 64 ||
                crypto_sign_verify_detached(blob + 4, (const unsigned char *)msg,
                                            (unsigned long long)tlen, v->pk) != 0) {
                return TG_ERR_NOTE_SIGNATURE;
            }
            ok |= UINT64_C(1) << k;
            break;
        }
    }
    if (ok == 0) {
        return TG_ERR_NOTE_UNVERIFIED;
    }
    *text_len = tlen;
    if (verified != NULL) {
        *verified = ok;
    }
    return TG_OK;
}
