/* keys.c — Ed25519 keys: strict PEM/DER codec, key files, key ring, keys.json. */
#include "trigguard/keys.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trigguard/canon.h"
#include "trigguard/config.h"
#include "trigguard/io.h"
#include "trigguard/sha256.h"
#include "trigguard/version.h"

/* The only DER shapes accepted: what openssl 3 writes for Ed25519 (RFC 8410). */
static const uint8_t PKCS8_PREFIX[16] = {0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06,
                                         0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20};
static const uint8_t SPKI_PREFIX[12] = {0x30, 0x2a, 0x30, 0x05, 0x06, 0x03,
                                        0x2b, 0x65, 0x70, 0x03, 0x21, 0x00};
#define PKCS8_LEN 48
#define SPKI_LEN 44
/* Offset of the 3 OID content bytes (2b 65 70 = 1.3.101.112) in both shapes. */
#define PKCS8_OID_OFF 9
#define SPKI_OID_OFF 6

static const char PEM_DASHES[] = "-----";
static const char LABEL_PRIVATE[] = "PRIVATE KEY";
static const char LABEL_PUBLIC[] = "PUBLIC KEY";

static tg_err_t sodium_ready(void) { return sodium_init() < 0 ? TG_ERR_CRYPTO : TG_OK; }

bool tg_key_id_valid(const char *s, size_t n) {
    if (s == NULL || n == 0 || n > TG_KEY_ID_MAX) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == ':' || c == '-';
        if (!ok) {
            return false;
        }
    }
    return true;
}

void tg_key_default_id(char out[TG_KEY_ID_MAX + 1], const uint8_t pk[TG_KEY_PK_LEN]) {
    uint8_t h[TG_SHA256_LEN];
    tg_sha256(h, pk, TG_KEY_PK_LEN);
    memcpy(out, "tg-", 3);
    (void)sodium_bin2hex(out + 3, 17, h, 8);
}

/* Sets key->key_id from an explicit id (validated) or the default. */
static tg_err_t set_key_id(tg_key_t *key, const char *key_id) {
    if (key_id == NULL) {
        tg_key_default_id(key->key_id, key->pk);
        return TG_OK;
    }
    size_t n = strlen(key_id);
    if (!tg_key_id_valid(key_id, n)) {
        return TG_ERR_INVALID_ARG;
    }
    memcpy(key->key_id, key_id, n + 1);
    return TG_OK;
}

tg_err_t tg_key_from_seed(tg_key_t *out, const uint8_t seed[TG_KEY_SEED_LEN], const char *key_id) {
    memset(out, 0, sizeof *out);
    if (sodium_ready() != TG_OK) {
        return TG_ERR_CRYPTO;
    }
    if (crypto_sign_seed_keypair(out->pk, out->sk, seed) != 0) {
        tg_key_wipe(out);
        return TG_ERR_CRYPTO;
    }
    out->has_secret = true;
    tg_err_t rc = set_key_id(out, key_id);
    if (rc) {
        tg_key_wipe(out);
    }
    return rc;
}

tg_err_t tg_key_generate(tg_key_t *out, const char *key_id) {
    uint8_t seed[TG_KEY_SEED_LEN];
    if (sodium_ready() != TG_OK) {
        memset(out, 0, sizeof *out);
        return TG_ERR_CRYPTO;
    }
    randombytes_buf(seed, sizeof seed);
    tg_err_t rc = tg_key_from_seed(out, seed, key_id);
    sodium_memzero(seed, sizeof seed);
    return rc;
}

tg_err_t tg_key_from_public(tg_key_t *out, const uint8_t pk[TG_KEY_PK_LEN], const char *key_id) {
    memset(out, 0, sizeof *out);
    memcpy(out->pk, pk, TG_KEY_PK_LEN);
    tg_err_t rc = set_key_id(out, key_id);
    if (rc) {
        memset(out, 0, sizeof *out);
    }
    return rc;
}

void tg_key_drop_secret(tg_key_t *key) {
    if (key != NULL) {
        sodium_memzero(key->sk, sizeof key->sk);
        key->has_secret = false;
    }
}

void tg_key_wipe(tg_key_t *key) {
    if (key != NULL) {
        sodium_memzero(key, sizeof *key);
    }
}

/* ---- PEM parsing ------------------------------------------------------------------- */

typedef struct {
    const char *p; /* start of the line */
    size_t n;      /* length without the line break */
    size_t next;   /* offset of the following line */
} pem_line_t;

/* Next line starting at off; a line ends at "\n" (a preceding "\r" is dropped). */
static bool next_line(pem_line_t *ln, const char *s, size_t len, size_t off) {
    if (off >= len) {
        return false;
    }
    const char *nl = memchr(s + off, '\n', len - off);
    size_t end = nl != NULL ? (size_t)(nl - s) : len;
    ln->p = s + off;
    ln->n = end - off;
    ln->next = nl != NULL ? end + 1 : len;
    if (ln->n > 0 && ln->p[ln->n - 1] == '\r') {
        ln->n--;
    }
    return true;
}

static bool starts_with(const char *p, size_t n, const char *prefix) {
    size_t k = strlen(prefix);
    return n >= k && memcmp(p, prefix, k) == 0;
}

/* Matches "-----<word> <label>-----" exactly, e.g. word "BEGIN". */
static bool is_boundary(const pem_line_t *ln, const char *word, const char *label) {
    size_t w = strlen(word), l = strlen(label);
    if (ln->n != 5 + w + 1 + l + 5) {
        return false;
    }
    const char *p = ln->p;
    return memcmp(p, PEM_DASHES, 5) == 0 && memcmp(p + 5, word, w) == 0 && p[5 + w] == ' ' &&
           memcmp(p + 6 + w, label, l) == 0 && memcmp(p + 6 + w + l, PEM_DASHES, 5) == 0;
}

/* Reads the "trigguard-key-id: ID" explanatory line into id_out. */
static tg_err_t parse_key_id_line(char id_out[TG_KEY_ID_MAX + 1], bool *seen, const pem_line_t *ln,
                                  tg_diag_t *diag) {
    size_t k = strlen(TG_KEY_ID_LINE);
    const char *p = ln->p + k;
    size_t n = ln->n - k;
    while (n > 0 && (*p == ' ' || *p == '\t')) {
        p++;
        n--;
    }
    while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t')) {
        n--;
    }
    if (*seen) {
        return tg_diag_set(diag, TG_ERR_KEY_FORMAT, "PEM text has more than one %s line",
                           TG_KEY_ID_LINE);
    }
    if (!tg_key_id_valid(p, n)) {
        return tg_diag_set(diag, TG_ERR_KEY_FORMAT,
                           "invalid key id in the %s line (want 1..%d chars of [A-Za-z0-9._:-])",
                           TG_KEY_ID_LINE, TG_KEY_ID_MAX);
    }
    memcpy(id_out, p, n);
    id_out[n] = '\0';
    *seen = true;
    return TG_OK;
}

/* Checks decoded DER against the expected shape and says precisely what differs. */
static tg_err_t check_der(const uint8_t *der, size_t n, bool private_key, tg_diag_t *diag) {
    const uint8_t *prefix = private_key ? PKCS8_PREFIX : SPKI_PREFIX;
    size_t plen = private_key ? sizeof PKCS8_PREFIX : sizeof SPKI_PREFIX;
    size_t want = private_key ? PKCS8_LEN : SPKI_LEN;
    size_t oid = private_key ? PKCS8_OID_OFF : SPKI_OID_OFF;
    const char *what = private_key ? "PKCS#8 private key" : "SPKI public key";
    if (n >= oid + 3 && memcmp(der + oid, prefix + oid, 3) != 0) {
        return tg_diag_set(diag, TG_ERR_KEY_FORMAT,
                           "%s is not Ed25519: algorithm OID differs from 1.3.101.112", what);
    }
    if (n != want) {
        return tg_diag_set(diag, TG_ERR_KEY_FORMAT,
                           "%s DER is %zu bytes; an Ed25519 key as openssl writes it is %zu", what,
                           n, want);
    }
    if (memcmp(der, prefix, plen) != 0) {
        return tg_diag_set(diag, TG_ERR_KEY_FORMAT,
                           "%s DER structure is not the Ed25519 form openssl writes "
                           "(RFC 8410; encrypted or v2 keys are not supported)",
                           what);
    }
    return TG_OK;
}

tg_err_t tg_key_parse_pem(tg_key_t *out, const char *pem, size_t len, const char *key_id_or_NULL,
                          tg_diag_t *diag) {
    uint8_t der[96];
    size_t der_len = 0;
    char file_id[TG_KEY_ID_MAX + 1] = {0};
    bool id_seen = false;
    tg_err_t rc = TG_OK;
    pem_line_t ln;
    size_t off = 0;
    const char *label = NULL;

    memset(out, 0, sizeof *out);
    if (pem == NULL) {
        return tg_diag_set(diag, TG_ERR_KEY_FORMAT, "no PEM text");
    }
    if (len > TG_KEY_FILE_MAX) {
        return tg_diag_set(diag, TG_ERR_LIMIT, "PEM text is %zu bytes, more than the %zu allowed",
                           len, TG_KEY_FILE_MAX);
    }
    if (key_id_or_NULL != NULL && !tg_key_id_valid(key_id_or_NULL, strlen(key_id_or_NULL))) {
        return tg_diag_set(diag, TG_ERR_INVALID_ARG,
                           "invalid key id (want 1..%d chars of [A-Za-z0-9._:-])", TG_KEY_ID_MAX);
    }
    if (memchr(pem, '\0', len) != NULL) {
        return tg_diag_set(diag, TG_ERR_KEY_FORMAT, "PEM text contains a NUL byte");
    }

    /* Explanatory text (RFC 7468 §2) up to the BEGIN line. */
    for (;;) {
        if (!next_line(&ln, pem, len, off)) {
            return tg_diag_set(diag, TG_ERR_KEY_FORMAT, "no -----BEGIN line found");
        }
        off = ln.next;
        if (starts_with(ln.p, ln.n, "-----BEGIN ")) {
            break;
        }
        if (starts_with(ln.p, ln.n, TG_KEY_ID_LINE)) {
            rc = parse_key_id_line(file_id, &id_seen, &ln, diag);
            if (rc) {
                return rc;
            }
        }
    }
    if (is_boundary(&ln, "BEGIN", LABEL_PRIVATE)) {
        label = LABEL_PRIVATE;
    } else if (is_boundary(&ln, "BEGIN", LABEL_PUBLIC)) {
        label = LABEL_PUBLIC;
    } else {
        return tg_diag_set(diag, TG_ERR_KEY_FORMAT,
                           "unsupported PEM block (want -----BEGIN PRIVATE KEY----- or "
                           "-----BEGIN PUBLIC KEY-----)");
    }
    bool private_key = label == LABEL_PRIVATE;

    /* Base64 body up to the first line that starts with dashes. */
    size_t body = off;
    size_t body_end;
    for (;;) {
        if (!next_line(&ln, pem, len, off)) {
            return tg_diag_set(diag, TG_ERR_KEY_FORMAT, "missing -----END %s----- line", label);
        }
        if (starts_with(ln.p, ln.n, PEM_DASHES)) {
            body_end = (size_t)(ln.p - pem);
            off = ln.next;
            break;
        }
        off = ln.next;
    }
    if (!is_boundary(&ln, "END", label)) {
        return tg_diag_set(diag, TG_ERR_KEY_FORMAT, "expected -----END %s----- line", label);
    }
    for (size_t i = off; i < len; i++) {
        if (pem[i] != '\n' && pem[i] != '\r') {
            return tg_diag_set(diag, TG_ERR_KEY_FORMAT,
                               "unexpected data after the -----END %s----- line", label);
        }
    }
    if (body_end == body) {
        return tg_diag_set(diag, TG_ERR_KEY_FORMAT, "empty PEM body");
    }
    if (sodium_base642bin(der, sizeof der, pem + body, body_end - body, "\r\n", &der_len, NULL,
                          sodium_base64_VARIANT_ORIGINAL) != 0) {
        rc = tg_diag_set(diag, TG_ERR_KEY_FORMAT,
                         "PEM body is not valid padded base64 (or decodes to more than %zu bytes)",
                         sizeof der);
        goto done;
    }
    rc = check_der(der, der_len, private_key, diag);
    if (rc) {
        goto done;
    }
    if (private_key) {
        rc = tg_key_from_seed(out, der + sizeof PKCS8_PREFIX, NULL);
        if (rc) {
            rc = tg_diag_set(diag, rc, "cannot derive the Ed25519 key pair from the seed");
            goto done;
        }
    } else {
        memcpy(out->pk, der + sizeof SPKI_PREFIX, TG_KEY_PK_LEN);
    }
    if (key_id_or_NULL != NULL) {
        memcpy(out->key_id, key_id_or_NULL, strlen(key_id_or_NULL) + 1);
    } else if (id_seen) {
        memcpy(out->key_id, file_id, sizeof file_id);
    } else {
        tg_key_default_id(out->key_id, out->pk);
    }
done:
    sodium_memzero(der, sizeof der);
    if (rc) {
        tg_key_wipe(out);
    }
    return rc;
}

/* ---- key files ---------------------------------------------------------------------- */

tg_err_t tg_key_load_file(tg_key_t *out, const char *path, const char *key_id_or_NULL,
                          tg_diag_t *diag) {
    char label[160];
    tg_file_t f;

    memset(out, 0, sizeof *out);
    if (tg_config_path_showable(path)) {
        snprintf(label, sizeof label, "key file %s", path);
    } else {
        /* It may be key text rather than a path: never echo it. */
        snprintf(label, sizeof label,
                 "key file (the %zu-byte value given is not shown: it looks like key text, "
                 "not a path)",
                 strlen(path));
    }
    tg_err_t rc = tg_read_file(&f, path, TG_KEY_FILE_MAX, label, TG_READ_SECRET, diag);
    if (rc) {
        return rc;
    }
    rc = tg_key_parse_pem(out, f.data, f.len, key_id_or_NULL, diag);
    if (rc) {
        if (diag != NULL) { /* say which file: --verify-keys may list several */
            char why[sizeof diag->msg];
            memcpy(why, diag->msg, sizeof why);
            tg_diag_set(diag, rc, "%s: %s", label, why);
        }
    } else if (out->has_secret && (f.mode & 077) != 0) {
        /* the mode of the file that was read, not of whatever the path names by now */
        tg_key_wipe(out);
        rc = tg_diag_set(diag, TG_ERR_KEY_PERMISSIONS,
                         "refusing private key file %s: mode %04o lets group or others access "
                         "it; run: chmod 600 %s",
                         path, f.mode & 07777, path);
    }
    tg_file_free(&f);
    return rc;
}

/* Appends one PEM block: BEGIN line, base64 in 64-char lines, END line. */
static tg_err_t put_pem(tg_buf_t *out, const char *label, const uint8_t *der, size_t n) {
    char b64[128]; /* enough for the 48-byte DER: 65 chars incl. NUL */
    tg_err_t rc = TG_OK;
    size_t start = out->len;
    if (sodium_base64_ENCODED_LEN(n, sodium_base64_VARIANT_ORIGINAL) > sizeof b64) {
        return TG_ERR_INTERNAL;
    }
    (void)sodium_bin2base64(b64, sizeof b64, der, n, sodium_base64_VARIANT_ORIGINAL);
    size_t blen = strlen(b64);
    rc = tg_buf_printf(out, "-----BEGIN %s-----\n", label);
    for (size_t i = 0; rc == TG_OK && i < blen; i += 64) {
        size_t k = blen - i < 64 ? blen - i : 64;
        rc = tg_buf_append(out, b64 + i, k);
        if (rc == TG_OK) {
            rc = tg_buf_putc(out, '\n');
        }
    }
    if (rc == TG_OK) {
        rc = tg_buf_printf(out, "-----END %s-----\n", label);
    }
    sodium_memzero(b64, sizeof b64);
    if (rc && out->data != NULL) {
        sodium_memzero(out->data + start, out->len - start);
        out->len = start;
        out->data[start] = '\0';
    }
    return rc;
}

tg_err_t tg_key_private_pem(tg_buf_t *out, const tg_key_t *key) {
    uint8_t der[PKCS8_LEN];
    if (!key->has_secret) {
        return TG_ERR_NO_KEY;
    }
    memcpy(der, PKCS8_PREFIX, sizeof PKCS8_PREFIX);
    memcpy(der + sizeof PKCS8_PREFIX, key->sk, TG_KEY_SEED_LEN);
    tg_err_t rc = put_pem(out, LABEL_PRIVATE, der, sizeof der);
    sodium_memzero(der, sizeof der);
    return rc;
}

tg_err_t tg_key_public_pem(tg_buf_t *out, const tg_key_t *key) {
    uint8_t der[SPKI_LEN];
    memcpy(der, SPKI_PREFIX, sizeof SPKI_PREFIX);
    memcpy(der + sizeof SPKI_PREFIX, key->pk, TG_KEY_PK_LEN);
    return put_pem(out, LABEL_PUBLIC, der, sizeof der);
}

/* fsync the directory holding path so the new name itself is durable. */
static void fsync_parent_dir(const char *path) {
    char dir[PATH_MAX];
    size_t n = strlen(path);
    if (n >= sizeof dir) {
        return;
    }
    memcpy(dir, path, n + 1);
    char *slash = strrchr(dir, '/');
    if (slash == NULL) {
        memcpy(dir, ".", 2);
    } else if (slash == dir) {
        dir[1] = '\0';
    } else {
        *slash = '\0';
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        (void)close(fd);
    }
}

tg_err_t tg_key_save_private(const char *path, const tg_key_t *key, bool write_key_id_line,
                             tg_diag_t *diag) {
    tg_buf_t pem;
    tg_err_t rc = TG_OK;
    int fd = -1;
    bool created = false;

    tg_buf_init(&pem, 4096);
    if (!key->has_secret) {
        return tg_diag_set(diag, TG_ERR_NO_KEY, "key %s has no private half to save", key->key_id);
    }
    if (write_key_id_line) {
        rc = tg_buf_printf(&pem, "%s %s\n", TG_KEY_ID_LINE, key->key_id);
    }
    if (rc == TG_OK) {
        rc = tg_key_private_pem(&pem, key);
    }
    if (rc) {
        rc = tg_diag_set(diag, rc, "cannot encode the private key");
        goto done;
    }
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600);
    if (fd < 0) {
        int e = errno;
        rc = tg_diag_set(diag, e == EEXIST ? TG_ERR_EXISTS : TG_ERR_IO,
                         e == EEXIST ? "%s already exists; refusing to overwrite a key file"
                                     : "cannot create %s: %s",
                         path, strerror(e));
        goto done;
    }
    created = true;
    if (fchmod(fd, 0600) != 0 || tg_write_all(fd, pem.data, pem.len) != TG_OK || fsync(fd) != 0) {
        rc = tg_diag_set(diag, TG_ERR_IO, "cannot write %s: %s", path, strerror(errno));
        goto done;
    }
    if (close(fd) != 0) {
        fd = -1;
        rc = tg_diag_set(diag, TG_ERR_IO, "cannot close %s: %s", path, strerror(errno));
        goto done;
    }
    fd = -1;
    fsync_parent_dir(path);
done:
    if (fd >= 0) {
        (void)close(fd);
    }
    if (rc && created) {
        (void)unlink(path);
    }
    if (pem.data != NULL) {
        sodium_memzero(pem.data, pem.cap);
    }
    tg_buf_free(&pem);
    return rc;
}

/* ---- signing ------------------------------------------------------------------------ */

tg_err_t tg_key_sign(uint8_t sig[TG_KEY_SIG_LEN], const tg_key_t *key, const uint8_t *msg,
                     size_t n) {
    if (!key->has_secret) {
        memset(sig, 0, TG_KEY_SIG_LEN);
        return TG_ERR_NO_KEY;
    }
    if (crypto_sign_detached(sig, NULL, msg, n, key->sk) != 0) {
        memset(sig, 0, TG_KEY_SIG_LEN);
        return TG_ERR_CRYPTO;
    }
    return TG_OK;
}

tg_err_t tg_key_verify(const tg_key_t *key, const uint8_t sig[TG_KEY_SIG_LEN], const uint8_t *msg,
                       size_t n) {
    return crypto_sign_verify_detached(sig, msg, n, key->pk) == 0 ? TG_OK : TG_ERR_CRYPTO;
}

/* ---- key ring ----------------------------------------------------------------------- */

void tg_keyring_init(tg_keyring_t *ring) {
    memset(ring, 0, sizeof *ring);
    (void)sodium_ready();
}

tg_err_t tg_keyring_add(tg_keyring_t *ring, const tg_key_t *key, tg_key_status_t status) {
    if (status != TG_KEY_ACTIVE && status != TG_KEY_VERIFY_ONLY) {
        return TG_ERR_INVALID_ARG;
    }
    if (!tg_key_id_valid(key->key_id, strnlen(key->key_id, sizeof key->key_id))) {
        return TG_ERR_INVALID_ARG;
    }
    for (size_t i = 0; i < ring->count; i++) {
        const tg_keyring_entry_t *e = &ring->entries[i];
        if (strcmp(e->key.key_id, key->key_id) == 0 ||
            memcmp(e->key.pk, key->pk, TG_KEY_PK_LEN) == 0) {
            return TG_ERR_EXISTS;
        }
    }
    if (status == TG_KEY_ACTIVE && tg_keyring_active(ring) != NULL) {
        return TG_ERR_INVALID_ARG;
    }
    if (ring->count >= TG_KEYRING_MAX) {
        return TG_ERR_LIMIT;
    }
    size_t at = ring->count;
    if (status == TG_KEY_ACTIVE) {
        memmove(&ring->entries[1], &ring->entries[0], ring->count * sizeof ring->entries[0]);
        at = 0;
    }
    ring->entries[at].key = *key;
    ring->entries[at].status = status;
    ring->entries[at].anchor = false;
    if (status == TG_KEY_VERIFY_ONLY) {
        tg_key_drop_secret(&ring->entries[at].key);
    }
    ring->count++;
    return TG_OK;
}

tg_err_t tg_keyring_add_anchor(tg_keyring_t *ring, const tg_key_t *key) {
    tg_err_t rc = tg_keyring_add(ring, key, TG_KEY_VERIFY_ONLY);
    if (rc == TG_OK) {
        ring->entries[ring->count - 1].anchor = true; /* verify-only entries are appended */
    }
    return rc;
}

tg_err_t tg_keyring_add_log(tg_keyring_t *ring, const tg_note_verifier_t *v) {
    if (v == NULL || v->name_len == 0 || v->name_len > TG_NOTE_NAME_MAX ||
        strnlen(v->name, sizeof v->name) != v->name_len ||
        tg_note_name_check(v->name, v->name_len) != TG_OK ||
        tg_note_key_id(v->name, v->name_len, v->pk) != v->key_id) {
        return TG_ERR_INVALID_ARG;
    }
    for (size_t i = 0; i < ring->log_count; i++) {
        const tg_note_verifier_t *h = &ring->logs[i];
        if (h->name_len == v->name_len && memcmp(h->name, v->name, v->name_len) == 0 &&
            (h->key_id == v->key_id || memcmp(h->pk, v->pk, sizeof h->pk) == 0)) {
            return TG_ERR_EXISTS;
        }
    }
    if (ring->log_count >= TG_KEYRING_LOG_MAX) {
        return TG_ERR_LIMIT;
    }
    ring->logs[ring->log_count++] = *v;
    return TG_OK;
}

const tg_note_verifier_t *tg_keyring_find_log(const tg_keyring_t *ring, const char *name, size_t n,
                                              uint32_t key_id) {
    for (size_t i = 0; name != NULL && i < ring->log_count; i++) {
        const tg_note_verifier_t *h = &ring->logs[i];
        if (h->key_id == key_id && h->name_len == n && memcmp(h->name, name, n) == 0) {
            return h;
        }
    }
    return NULL;
}

const tg_key_t *tg_keyring_find(const tg_keyring_t *ring, const char *key_id, size_t n) {
    if (key_id == NULL || n == 0 || n > TG_KEY_ID_MAX) {
        return NULL;
    }
    for (size_t i = 0; i < ring->count; i++) {
        const tg_key_t *k = &ring->entries[i].key;
        if (strnlen(k->key_id, sizeof k->key_id) == n && memcmp(k->key_id, key_id, n) == 0) {
            return k;
        }
    }
    return NULL;
}

const tg_key_t *tg_keyring_active(const tg_keyring_t *ring) {
    if (ring->count > 0 && ring->entries[0].status == TG_KEY_ACTIVE) {
        return &ring->entries[0].key;
    }
    return NULL;
}

const tg_key_t *tg_keyring_signer(const tg_keyring_t *ring) {
    const tg_key_t *k = tg_keyring_active(ring);
    return k != NULL && k->has_secret ? k : NULL;
}

/* A JSON string of text that must be UTF-8: TG_ERR_INVALID_ARG otherwise. */
static tg_err_t put_text(tg_buf_t *out, const char *s) {
    tg_err_t rc = tg_canon_string(out, s, strlen(s));
    return rc == TG_ERR_JSON_UTF8 || rc == TG_ERR_JSON_SURROGATE ? TG_ERR_INVALID_ARG : rc;
}

/* The log's entry of the keys array (SPEC §12's member order), first or not. */
static tg_err_t put_log_key(tg_buf_t *out, const tg_keys_json_log_t *log, bool first,
                            tg_buf_t *pem) {
    if (log->key_id == NULL || !tg_key_id_valid(log->key_id, strlen(log->key_id)) ||
        log->origin == NULL || log->vkey == NULL || log->key == NULL) {
        return TG_ERR_INVALID_ARG;
    }
    tg_err_t rc;
    tg_buf_reset(pem);
    TG_TRY(tg_key_public_pem(pem, log->key));
    TG_TRY(tg_buf_puts(out, first ? "{\"keyId\":" : ",{\"keyId\":"));
    TG_TRY(put_text(out, log->key_id));
    TG_TRY(tg_buf_puts(out, ",\"algorithm\":\"Ed25519\",\"use\":\"checkpoint\",\"origin\":"));
    TG_TRY(put_text(out, log->origin));
    TG_TRY(tg_buf_puts(out, ",\"vkey\":"));
    TG_TRY(put_text(out, log->vkey));
    TG_TRY(tg_buf_puts(out, ",\"publicKeyPem\":"));
    TG_TRY(tg_canon_string(out, pem->data, pem->len));
    TG_TRY(tg_buf_puts(out, ",\"status\":\"active\"}"));
done:
    return rc;
}

tg_err_t tg_keyring_keys_json(tg_buf_t *out, const tg_keyring_t *ring, const char *authority) {
    return tg_keyring_keys_json_log(out, ring, authority, NULL);
}

tg_err_t tg_keyring_keys_json_log(tg_buf_t *out, const tg_keyring_t *ring, const char *authority,
                                  const tg_keys_json_log_t *log) {
    tg_buf_t pem;
    size_t start = out->len;
    tg_err_t rc = TG_OK;

    if (ring->count == 0 && log == NULL) {
        return TG_ERR_NO_KEY;
    }
    if (authority == NULL) {
        return TG_ERR_INVALID_ARG;
    }
    tg_buf_init(&pem, 1024);
    TG_TRY(tg_buf_puts(out, "{\"protocol\":\"" TG_PROTOCOL_VERSION "\",\"authority\":"));
    rc = tg_canon_string(out, authority, strlen(authority));
    if (rc == TG_ERR_JSON_UTF8 || rc == TG_ERR_JSON_SURROGATE) {
        rc = TG_ERR_INVALID_ARG;
    }
    if (rc) {
        goto done;
    }
    TG_TRY(tg_buf_puts(out, ",\"keys\":["));
    for (size_t i = 0; i < ring->count; i++) {
        const tg_keyring_entry_t *e = &ring->entries[i];
        tg_buf_reset(&pem);
        TG_TRY(tg_key_public_pem(&pem, &e->key));
        TG_TRY(tg_buf_puts(out, i == 0 ? "{\"keyId\":" : ",{\"keyId\":"));
        TG_TRY(tg_canon_string(out, e->key.key_id, strlen(e->key.key_id)));
        TG_TRY(tg_buf_puts(out, ",\"algorithm\":\"Ed25519\",\"use\":\"receipt\",\"status\":"));
        TG_TRY(tg_buf_puts(out, e->status == TG_KEY_ACTIVE ? "\"active\"" : "\"verify-only\""));
        TG_TRY(tg_buf_puts(out, ",\"publicKeyPem\":"));
        TG_TRY(tg_canon_string(out, pem.data, pem.len));
        TG_TRY(tg_buf_putc(out, '}'));
    }
    if (log != NULL) {
        TG_TRY(put_log_key(out, log, ring->count == 0, &pem));
    }
    TG_TRY(tg_buf_puts(out, "]}"));
done:
    tg_buf_free(&pem);
    if (rc && out->data != NULL) {
        out->len = start;
        out->data[start] = '\0';
    }
    return rc;
}

/* Member `name` of obj as a string, or NULL with diag set. */
static const char *get_string(const json_t *obj, const char *name, size_t *len, const char *where,
                              tg_diag_t *diag) {
    const json_t *v = json_object_get(obj, name);
    if (!json_is_string(v)) {
        (void)tg_diag_set(diag, TG_ERR_KEY_FORMAT, "keys.json: %s.%s must be a string", where,
                          name);
        return NULL;
    }
    *len = json_string_length(v);
    return json_string_value(v);
}

/* Member `name` of obj is the string want (its length n), else diag says so. */
static tg_err_t expect_string(const json_t *obj, const char *name, const char *want,
                              const char *where, tg_diag_t *diag) {
    size_t n = 0;
    const char *s = get_string(obj, name, &n, where, diag);
    if (s == NULL) {
        return TG_ERR_KEY_FORMAT;
    }
    if (n != strlen(want) || memcmp(s, want, n) != 0) {
        return tg_diag_set(diag, TG_ERR_KEY_FORMAT, "keys.json: %s.%s must be \"%s\"", where, name,
                           want);
    }
    return TG_OK;
}

/* A "use": "checkpoint" entry (SPEC §12): the transparency log's key, added to the ring's
 * log keys. Its vkey must name the origin and hold the publicKeyPem's key, so the three ways
 * the entry states the key cannot disagree. */
static tg_err_t load_log_key(tg_keyring_t *ring, const json_t *k, const char *where,
                             tg_diag_t *diag) {
    tg_note_verifier_t v;
    tg_key_t key;
    size_t n = 0, on = 0, vn = 0;
    tg_err_t rc = TG_OK;
    memset(&key, 0, sizeof key);
    const char *kid = get_string(k, "keyId", &n, where, diag);
    if (kid == NULL) {
        return TG_ERR_KEY_FORMAT;
    }
    if (!tg_key_id_valid(kid, n)) {
        return tg_diag_set(diag, TG_ERR_KEY_FORMAT, "keys.json: %s.keyId is not a valid key id",
                           where);
    }
    TG_TRY(expect_string(k, "algorithm", "Ed25519", where, diag));
    const char *st = get_string(k, "status", &n, where, diag);
    if (st == NULL) {
        return TG_ERR_KEY_FORMAT;
    }
    if (!(n == 6 && memcmp(st, "active", 6) == 0) &&
        !(n == 11 && memcmp(st, "verify-only", 11) == 0)) {
        return tg_diag_set(diag, TG_ERR_KEY_FORMAT,
                           "keys.json: %s.status must be \"active\" or \"verify-only\"", where);
    }
    const char *origin = get_string(k, "origin", &on, where, diag);
    const char *vkey = origin != NULL ? get_string(k, "vkey", &vn, where, diag) : NULL;
    const char *pem = vkey != NULL ? get_string(k, "publicKeyPem", &n, where, diag) : NULL;
    if (pem == NULL) {
        return TG_ERR_KEY_FORMAT;
    }
    if (tg_note_vkey_parse(&v, vkey, vn) != TG_OK) {
        return tg_diag_set(diag, TG_ERR_KEY_FORMAT,
                           "keys.json: %s.vkey is not a verifier key (name+id+key)", where);
    }
    if (v.name_len != on || memcmp(v.name, origin, on) != 0) {
        return tg_diag_set(diag, TG_ERR_KEY_FORMAT, "keys.json: %s.vkey is not named by %s.origin",
                           where, where);
    }
    tg_diag_t sub;
    sub.msg[0] = '\0';
    rc = tg_key_parse_pem(&key, pem, n, NULL, &sub);
    if (rc == TG_OK && (key.has_secret || memcmp(key.pk, v.pk, sizeof v.pk) != 0)) {
        rc = TG_ERR_KEY_FORMAT;
        (void)snprintf(sub.msg, sizeof sub.msg, "%s",
                       key.has_secret ? "a private key does not belong here"
                                      : "not the public key of vkey");
    }
    if (rc) {
        rc = tg_diag_set(diag, TG_ERR_KEY_FORMAT, "keys.json: %s.publicKeyPem: %s", where, sub.msg);
        goto done;
    }
    rc = tg_keyring_add_log(ring, &v);
    if (rc) {
        rc = tg_diag_set(diag, rc, "keys.json: %s (log key %s): %s", where, v.name,
                         rc == TG_ERR_EXISTS ? "duplicate log key" : "too many log keys");
    }
done:
    tg_key_wipe(&key);
    return rc;
}

tg_err_t tg_keyring_load_keys_json(tg_keyring_t *ring, const char *text, size_t len,
                                   tg_diag_t *diag) {
    json_t *root = NULL;
    tg_key_t key;
    tg_err_t rc = tg_json_parse(&root, text, len, NULL, diag);
    const char *s;
    size_t n = 0;
    char where[32];

    memset(&key, 0, sizeof key);
    if (rc) {
        return rc;
    }
    if (!json_is_object(root)) {
        rc = tg_diag_set(diag, TG_ERR_KEY_FORMAT, "keys.json: the document must be an object");
        goto done;
    }
    s = get_string(root, "protocol", &n, "$", diag);
    if (s == NULL) {
        rc = TG_ERR_KEY_FORMAT;
        goto done;
    }
    if (n != strlen(TG_PROTOCOL_VERSION) || memcmp(s, TG_PROTOCOL_VERSION, n) != 0) {
        rc = tg_diag_set(diag, TG_ERR_KEY_FORMAT, "keys.json: protocol must be \"%s\"",
                         TG_PROTOCOL_VERSION);
        goto done;
    }
    const json_t *keys = json_object_get(root, "keys");
    if (!json_is_array(keys) || json_array_size(keys) == 0) {
        rc = tg_diag_set(diag, TG_ERR_KEY_FORMAT, "keys.json: keys must be a non-empty array");
        goto done;
    }
    for (size_t i = 0; i < json_array_size(keys); i++) {
        const json_t *k = json_array_get(keys, i);
        (void)snprintf(where, sizeof where, "$.keys[%zu]", i);
        if (!json_is_object(k)) {
            rc = tg_diag_set(diag, TG_ERR_KEY_FORMAT, "keys.json: %s must be an object", where);
            goto done;
        }
        const json_t *use = json_object_get(k, "use");
        if (use != NULL && !json_is_string(use)) {
            rc = tg_diag_set(diag, TG_ERR_KEY_FORMAT, "keys.json: %s.use must be a string", where);
            goto done;
        }
        if (use != NULL && strcmp(json_string_value(use), "checkpoint") == 0) {
            rc = load_log_key(ring, k, where, diag);
            if (rc) {
                goto done;
            }
            continue;
        }
        if (use != NULL && strcmp(json_string_value(use), "receipt") != 0) {
            continue; /* trusted for nothing this verifier knows (keys.h) */
        }
        const char *kid = get_string(k, "keyId", &n, where, diag);
        if (kid == NULL) {
            rc = TG_ERR_KEY_FORMAT;
            goto done;
        }
        if (!tg_key_id_valid(kid, n)) {
            rc = tg_diag_set(diag, TG_ERR_KEY_FORMAT, "keys.json: %s.keyId is not a valid key id",
                             where);
            goto done;
        }
        s = get_string(k, "algorithm", &n, where, diag);
        if (s == NULL) {
            rc = TG_ERR_KEY_FORMAT;
            goto done;
        }
        if (n != 7 || memcmp(s, "Ed25519", 7) != 0) {
            rc = tg_diag_set(diag, TG_ERR_KEY_FORMAT, "keys.json: %s.algorithm must be Ed25519",
                             where);
            goto done;
        }
        s = get_string(k, "status", &n, where, diag);
        if (s == NULL) {
            rc = TG_ERR_KEY_FORMAT;
            goto done;
        }
        tg_key_status_t status;
        if (n == 6 && memcmp(s, "active", 6) == 0) {
            status = TG_KEY_ACTIVE;
        } else if (n == 11 && memcmp(s, "verify-only", 11) == 0) {
            status = TG_KEY_VERIFY_ONLY;
        } else {
            rc = tg_diag_set(diag, TG_ERR_KEY_FORMAT,
                             "keys.json: %s.status must be \"active\" or \"verify-only\"", where);
            goto done;
        }
        s = get_string(k, "publicKeyPem", &n, where, diag);
        if (s == NULL) {
            rc = TG_ERR_KEY_FORMAT;
            goto done;
        }
        tg_diag_t sub;
        sub.msg[0] = '\0';
        rc = tg_key_parse_pem(&key, s, n, kid, &sub);
        if (rc == TG_OK && key.has_secret) {
            rc = TG_ERR_KEY_FORMAT;
            (void)snprintf(sub.msg, sizeof sub.msg, "a private key does not belong here");
        }
        if (rc) {
            rc = tg_diag_set(diag, TG_ERR_KEY_FORMAT, "keys.json: %s.publicKeyPem: %s", where,
                             sub.msg);
            goto done;
        }
        rc = tg_keyring_add(ring, &key, status);
        if (rc) {
            rc = tg_diag_set(diag, rc, "keys.json: %s (%s): %s", where, key.key_id,
                             rc == TG_ERR_EXISTS  ? "duplicate key id or public key"
                             : rc == TG_ERR_LIMIT ? "too many keys"
                                                  : "more than one active key");
            goto done;
        }
        tg_key_wipe(&key);
    }
done:
    tg_key_wipe(&key);
    json_decref(root);
    return rc;
}

void tg_keyring_wipe(tg_keyring_t *ring) {
    if (ring != NULL) {
        sodium_memzero(ring, sizeof *ring);
    }
}
