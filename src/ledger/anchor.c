/* anchor.c — the signed ledger anchor (anchor.h owns the format). */
#include "trigguard/anchor.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ledger_int.h"

#define ANCHOR_MAGIC "TGANCHR1"
#define OFF_KEY_LEN 72
#define OFF_KEY_ID 73
#define OFF_PAD (OFF_KEY_ID + TG_ANCHOR_KEY_ID_MAX) /* 137 */

static void put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

static uint32_t get_u32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/* keys.h's key id charset; repeated here because the ledger library does not link tg_keys
 * (an anchor names the key, the caller finds it). */
static bool key_id_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == ':' || c == '-';
}

static tg_err_t bad(char *what, size_t what_len, const char *why) {
    if (what != NULL && what_len > 0) {
        snprintf(what, what_len, "%s", why);
    }
    return TG_ERR_LEDGER_CORRUPT;
}

tg_err_t tg_anchor_check_fields(const tg_anchor_t *a, char *what, size_t what_len) {
    if (a->first_segment < 2 || a->archived_first_segment < 1 ||
        a->archived_first_segment >= a->first_segment) {
        return bad(what, what_len, "segment range out of bounds");
    }
    if (a->first_seq < 2 || a->archived_first_seq < 1 || a->archived_first_seq >= a->first_seq) {
        return bad(what, what_len, "sequence range out of bounds");
    }
    /* Every archived segment holds at least one record (an empty one is only ever the last). */
    if (a->first_seq - a->archived_first_seq < a->first_segment - a->archived_first_segment) {
        return bad(what, what_len, "fewer archived records than archived segments");
    }
    size_t n = strnlen(a->key_id, sizeof a->key_id);
    if (n == 0 || n > TG_ANCHOR_KEY_ID_MAX) {
        return bad(what, what_len, "key id missing or too long");
    }
    for (size_t i = 0; i < n; i++) {
        if (!key_id_char(a->key_id[i])) {
            return bad(what, what_len, "key id has a character outside [A-Za-z0-9._:-]");
        }
    }
    return TG_OK;
}

static void encode_signed(uint8_t out[TG_ANCHOR_SIZE], const tg_anchor_t *a) {
    memset(out, 0, TG_ANCHOR_SIZE);
    memcpy(out, ANCHOR_MAGIC, 8);
    put_u32(out + 8, a->first_segment);
    put_u32(out + 12, a->archived_first_segment);
    tg_lg_put_u64(out + 16, a->first_seq);
    memcpy(out + 24, a->prev_hash, TG_ANCHOR_HASH_SIZE);
    tg_lg_put_u64(out + 56, a->archived_first_seq);
    tg_lg_put_u64(out + 64, (uint64_t)a->created_ms);
    size_t n = strnlen(a->key_id, sizeof a->key_id);
    out[OFF_KEY_LEN] = (uint8_t)n;
    memcpy(out + OFF_KEY_ID, a->key_id, n);
}

tg_err_t tg_anchor_encode(uint8_t out[TG_ANCHOR_SIZE], const tg_anchor_t *a) {
    if (out == NULL || a == NULL || tg_anchor_check_fields(a, NULL, 0) != TG_OK) {
        return TG_ERR_INVALID_ARG;
    }
    encode_signed(out, a);
    memcpy(out + TG_ANCHOR_SIGNED, a->sig, TG_ANCHOR_SIG_SIZE);
    return TG_OK;
}

tg_err_t tg_anchor_parse(tg_anchor_t *a, const uint8_t *buf, size_t len, char *what,
                         size_t what_len) {
    memset(a, 0, sizeof *a);
    if (buf == NULL || len != TG_ANCHOR_SIZE) {
        return bad(what, what_len, "not the size of an anchor");
    }
    if (memcmp(buf, ANCHOR_MAGIC, 8) != 0) {
        return bad(what, what_len, "bad magic (not an anchor, or another version)");
    }
    size_t n = buf[OFF_KEY_LEN];
    if (n == 0 || n > TG_ANCHOR_KEY_ID_MAX) {
        return bad(what, what_len, "key id length out of bounds");
    }
    /* One spelling per anchor: the key id's padding and the reserved bytes are zero. */
    for (size_t i = OFF_KEY_ID + n; i < TG_ANCHOR_SIGNED; i++) {
        if (buf[i] != 0) {
            return bad(what, what_len, "non-zero padding");
        }
    }
    a->first_segment = get_u32(buf + 8);
    a->archived_first_segment = get_u32(buf + 12);
    a->first_seq = tg_lg_get_u64(buf + 16);
    memcpy(a->prev_hash, buf + 24, TG_ANCHOR_HASH_SIZE);
    a->archived_first_seq = tg_lg_get_u64(buf + 56);
    a->created_ms = (int64_t)tg_lg_get_u64(buf + 64);
    memcpy(a->key_id, buf + OFF_KEY_ID, n);
    a->key_id[n] = '\0';
    if (strlen(a->key_id) != n) {
        return bad(what, what_len, "key id holds a NUL byte");
    }
    memcpy(a->sig, buf + TG_ANCHOR_SIGNED, TG_ANCHOR_SIG_SIZE);
    return tg_anchor_check_fields(a, what, what_len);
}

tg_err_t tg_anchor_sign(tg_anchor_t *a, const uint8_t sk[64]) {
    if (a == NULL || sk == NULL || tg_anchor_check_fields(a, NULL, 0) != TG_OK) {
        return TG_ERR_INVALID_ARG;
    }
    if (sodium_init() < 0) {
        return TG_ERR_CRYPTO;
    }
    uint8_t buf[TG_ANCHOR_SIZE];
    encode_signed(buf, a);
    if (crypto_sign_detached(a->sig, NULL, buf, TG_ANCHOR_SIGNED, sk) != 0) {
        return TG_ERR_CRYPTO;
    }
    return TG_OK;
}

tg_err_t tg_anchor_verify(const tg_anchor_t *a, const uint8_t pk[32]) {
    if (a == NULL || pk == NULL || tg_anchor_check_fields(a, NULL, 0) != TG_OK) {
        return TG_ERR_INVALID_ARG;
    }
    if (sodium_init() < 0) {
        return TG_ERR_CRYPTO;
    }
    uint8_t buf[TG_ANCHOR_SIZE];
    encode_signed(buf, a);
    return crypto_sign_verify_detached(a->sig, buf, TG_ANCHOR_SIGNED, pk) == 0 ? TG_OK
                                                                               : TG_ERR_CRYPTO;
}

tg_err_t tg_anchor_read(tg_anchor_t *a, bool *found, int dirfd, const char *dir, const char *name,
                        tg_diag_t *diag) {
    memset(a, 0, sizeof *a);
    uint8_t buf[TG_ANCHOR_SIZE] = {0};
    bool present = false;
    tg_err_t rc = tg_lg_read_exact(dirfd, dir, name, buf, sizeof buf, &present, diag);
    *found = false;
    if (rc != TG_OK || !present) {
        return rc;
    }
    char what[128];
    if (tg_anchor_parse(a, buf, sizeof buf, what, sizeof what) != TG_OK) {
        return tg_diag_set(diag, TG_ERR_LEDGER_CORRUPT, "%s/%s: damaged anchor: %s", dir, name,
                           what);
    }
    *found = true;
    return TG_OK;
}

tg_err_t tg_anchor_write(int dirfd, const char *dir, const char *name, const tg_anchor_t *a,
                         tg_diag_t *diag) {
    uint8_t buf[TG_ANCHOR_SIZE];
    if (tg_anchor_encode(buf, a) != TG_OK) {
        return tg_diag_set(diag, TG_ERR_INVALID_ARG, "%s/%s: anchor fields out of range", dir,
                           name);
    }
    char tmp[TG_LG_NAME_MAX + 32];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", name) >= (int)sizeof tmp) {
        return tg_diag_set(diag, TG_ERR_INVALID_ARG, "%s: anchor name too long", name);
    }
    (void)unlinkat(dirfd, tmp, 0); /* left by an interrupted run */
    int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        return tg_diag_set(diag, TG_ERR_IO, "%s/%s: %s", dir, tmp, strerror(errno));
    }
    bool ok = write(fd, buf, sizeof buf) == (ssize_t)sizeof buf && fsync(fd) == 0;
    int saved = errno;
    close(fd);
    if (!ok) {
        (void)unlinkat(dirfd, tmp, 0);
        return tg_diag_set(diag, TG_ERR_IO, "%s/%s: cannot write it: %s", dir, tmp,
                           strerror(saved));
    }
    if (renameat(dirfd, tmp, dirfd, name) != 0 || fsync(dirfd) != 0) {
        return tg_diag_set(diag, TG_ERR_IO, "%s/%s: cannot put it in place: %s", dir, name,
                           strerror(errno));
    }
    return TG_OK;
}
