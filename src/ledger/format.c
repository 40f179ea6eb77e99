/* format.c — ledger record encoding, the segment scanner shared by open and verify. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ledger_int.h"
#include "trigguard/anchor.h"
#include "trigguard/clock.h"
#include "trigguard/sha256.h"

#define HDR TG_LEDGER_HEADER_SIZE
#define HSZ TG_LEDGER_HASH_SIZE
#define READ_BUF_SIZE ((size_t)256 * 1024) /* > 2 * TG_LEDGER_RECORD_MAX */

/* ---- byte order ---- */

static void put_u16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

void tg_lg_put_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

static uint16_t get_u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

static uint32_t get_u32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

uint64_t tg_lg_get_u64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) {
        v = (v << 8) | p[i];
    }
    return v;
}

/* ---- records ---- */

size_t tg_lg_record_len(uint32_t meta_len, uint32_t payload_len) {
    return (size_t)TG_LEDGER_RECORD_OVERHEAD + meta_len + payload_len;
}

void tg_lg_body_digest(uint8_t out[HSZ], const uint8_t *meta, uint32_t meta_len,
                       const uint8_t *payload, uint32_t payload_len) {
    tg_sha256_ctx_t st;
    tg_sha256_init(&st);
    if (meta_len) {
        tg_sha256_update(&st, meta, meta_len);
    }
    if (payload_len) {
        tg_sha256_update(&st, payload, payload_len);
    }
    tg_sha256_final(&st, out);
}

/* Version 2: record_hash = SHA-256(header ‖ body digest). The header (60 bytes, which
 * carry seq, prev_hash and both lengths) plus the 32-byte digest is two compressions, so
 * the part that must run in chain order stays small whatever the payload's size. */
static void record_hash_v2(uint8_t out[HSZ], const uint8_t *hdr, const uint8_t body[HSZ]) {
    tg_sha256_ctx_t st;
    tg_sha256_init(&st);
    tg_sha256_update(&st, hdr, HDR);
    tg_sha256_update(&st, body, HSZ);
    tg_sha256_final(&st, out);
}

/* The 60-byte header of a record in format version `version`, its check included. */
static void fill_header(uint8_t *h, uint8_t version, uint8_t type, uint64_t seq,
                        const uint8_t prev[HSZ], uint32_t meta_len, uint32_t payload_len) {
    uint8_t hc[HSZ];
    memcpy(h, TG_LEDGER_MAGIC, 4);
    h[4] = version;
    h[5] = type;
    put_u16(h + 6, 0);
    tg_lg_put_u64(h + 8, seq);
    memcpy(h + 16, prev, HSZ);
    put_u32(h + 48, meta_len);
    put_u32(h + 52, payload_len);
    tg_sha256(hc, h, 56);
    memcpy(h + 56, hc, 4);
}

void tg_lg_encode(uint8_t *dst, uint8_t hash[HSZ], uint8_t type, uint64_t seq,
                  const uint8_t prev[HSZ], const uint8_t *meta, uint32_t meta_len,
                  const uint8_t *payload, uint32_t payload_len, const uint8_t body[HSZ]) {
    fill_header(dst, TG_LEDGER_FORMAT_VERSION, type, seq, prev, meta_len, payload_len);
    if (meta_len) {
        memcpy(dst + HDR, meta, meta_len);
    }
    if (payload_len) {
        memcpy(dst + HDR + meta_len, payload, payload_len);
    }
    record_hash_v2(hash, dst, body);
    memcpy(dst + HDR + meta_len + payload_len, hash, HSZ);
}

bool tg_ledger_hash_matches(uint8_t type, uint64_t seq, const uint8_t prev[HSZ],
                            const uint8_t *meta, size_t meta_len, const uint8_t *payload,
                            size_t payload_len, const uint8_t want[HSZ]) {
    if (meta_len > TG_LEDGER_META_MAX || payload_len > TG_LEDGER_PAYLOAD_MAX) {
        return false;
    }
    /* The header as tg_lg_encode writes it, once per version byte: the version is part of
     * the hashed header and the store does not keep it. */
    uint8_t hdr[HDR], body[HSZ], got[HSZ];
    for (uint8_t version = TG_LEDGER_FORMAT_VERSION_MIN; version <= TG_LEDGER_FORMAT_VERSION;
         version++) {
        fill_header(hdr, version, type, seq, prev, (uint32_t)meta_len, (uint32_t)payload_len);
        if (version == 1) {
            /* version 1: one SHA-256 over the header, meta and payload */
            tg_sha256_ctx_t st;
            tg_sha256_init(&st);
            tg_sha256_update(&st, hdr, HDR);
            if (meta_len) {
                tg_sha256_update(&st, meta, meta_len);
            }
            if (payload_len) {
                tg_sha256_update(&st, payload, payload_len);
            }
            tg_sha256_final(&st, got);
        } else {
            tg_lg_body_digest(body, meta, (uint32_t)meta_len, payload, (uint32_t)payload_len);
            record_hash_v2(got, hdr, body);
        }
        if (sodium_memcmp(got, want, HSZ) == 0) {
            return true;
        }
    }
    return false;
}

tg_err_t tg_ledger_record_hash(uint8_t out[HSZ], uint8_t type, uint64_t seq,
                               const uint8_t prev[HSZ], const uint8_t *meta, size_t meta_len,
                               const uint8_t *payload, size_t payload_len) {
    if (meta_len > TG_LEDGER_META_MAX || payload_len > TG_LEDGER_PAYLOAD_MAX) {
        return TG_ERR_LIMIT;
    }
    uint8_t hdr[HDR], body[HSZ];
    fill_header(hdr, TG_LEDGER_FORMAT_VERSION, type, seq, prev, (uint32_t)meta_len,
                (uint32_t)payload_len);
    tg_lg_body_digest(body, meta, (uint32_t)meta_len, payload, (uint32_t)payload_len);
    record_hash_v2(out, hdr, body);
    return TG_OK;
}

tg_err_t tg_lg_hdr_parse(tg_lg_hdr_t *h, const uint8_t *p, char *what, size_t what_len) {
    uint8_t hc[HSZ];
    if (memcmp(p, TG_LEDGER_MAGIC, 4) != 0) {
        snprintf(what, what_len, "bad magic (not a record boundary)");
        return TG_ERR_LEDGER_CORRUPT;
    }
    if (p[4] < TG_LEDGER_FORMAT_VERSION_MIN || p[4] > TG_LEDGER_FORMAT_VERSION) {
        snprintf(what, what_len, "unsupported record format version %u", (unsigned)p[4]);
        return TG_ERR_LEDGER_CORRUPT;
    }
    tg_sha256(hc, p, 56);
    if (memcmp(hc, p + 56, 4) != 0) {
        snprintf(what, what_len, "header check mismatch (damaged record header)");
        return TG_ERR_LEDGER_CORRUPT;
    }
    h->type = p[5];
    if (h->type != TG_LEDGER_TYPE_RECEIPT && h->type != TG_LEDGER_TYPE_SILENCE &&
        h->type != TG_LEDGER_TYPE_REDEMPTION && h->type != TG_LEDGER_TYPE_APPROVAL) {
        snprintf(what, what_len, "unknown record type %u", (unsigned)h->type);
        return TG_ERR_LEDGER_CORRUPT;
    }
    if (get_u16(p + 6) != 0) {
        snprintf(what, what_len, "reserved flags are not zero");
        return TG_ERR_LEDGER_CORRUPT;
    }
    h->seq = tg_lg_get_u64(p + 8);
    memcpy(h->prev, p + 16, HSZ);
    h->meta_len = get_u32(p + 48);
    h->payload_len = get_u32(p + 52);
    if (h->meta_len > TG_LEDGER_META_MAX) {
        snprintf(what, what_len, "meta length %u exceeds %d", h->meta_len, TG_LEDGER_META_MAX);
        return TG_ERR_LEDGER_CORRUPT;
    }
    if (h->payload_len > TG_LEDGER_PAYLOAD_MAX) {
        snprintf(what, what_len, "payload length %u exceeds %d", h->payload_len,
                 TG_LEDGER_PAYLOAD_MAX);
        return TG_ERR_LEDGER_CORRUPT;
    }
    if (h->seq == 0) {
        snprintf(what, what_len, "sequence number 0");
        return TG_ERR_LEDGER_CORRUPT;
    }
    return TG_OK;
}

bool tg_lg_hash_check(const uint8_t *rec, size_t len, uint8_t hash[HSZ]) {
    if (rec[4] == 1) {
        /* version 1: one SHA-256 over magic through payload */
        tg_sha256(hash, rec, len - HSZ);
    } else {
        uint8_t body[HSZ];
        tg_sha256(body, rec + HDR, len - HDR - HSZ);
        record_hash_v2(hash, rec, body);
    }
    return sodium_memcmp(hash, rec + len - HSZ, HSZ) == 0;
}

/* ---- buffered pread reader ---- */

typedef struct reader {
    int fd;
    uint64_t size; /* bytes of the file we consider (fixed at scan start) */
    uint8_t *buf;
    size_t cap;
    uint64_t base; /* file offset of buf[0] */
    size_t len;    /* valid bytes in buf */
} reader_t;

/* Makes [off, off+n) addressable; *avail = how many of those n bytes exist before EOF. */
static tg_err_t rd_view(reader_t *r, uint64_t off, size_t n, const uint8_t **p, size_t *avail) {
    if (off >= r->size) {
        *p = r->buf;
        *avail = 0;
        return TG_OK;
    }
    uint64_t left = r->size - off;
    size_t want = left < n ? (size_t)left : n;
    if (!(off >= r->base && off - r->base <= r->len && r->len - (off - r->base) >= want)) {
        size_t fill = left < r->cap ? (size_t)left : r->cap;
        size_t got = 0;
        while (got < fill) {
            ssize_t k = pread(r->fd, r->buf + got, fill - got, (off_t)(off + got));
            if (k < 0) {
                if (errno == EINTR) {
                    continue;
                }
                return TG_ERR_IO;
            }
            if (k == 0) {
                break; /* shrank under us: treat what we have as the end */
            }
            got += (size_t)k;
        }
        r->base = off;
        r->len = got;
        if (want > got) {
            want = got;
        }
    }
    *p = r->buf + (off - r->base);
    *avail = want;
    return TG_OK;
}

/* true if every byte from off to the end of the file is zero. */
static tg_err_t rd_zero_tail(reader_t *r, uint64_t off, bool *zero) {
    *zero = true;
    while (off < r->size) {
        const uint8_t *p;
        size_t n;
        tg_err_t rc = rd_view(r, off, 65536, &p, &n);
        if (rc) {
            return rc;
        }
        if (n == 0) {
            break;
        }
        for (size_t i = 0; i < n; i++) {
            if (p[i] != 0) {
                *zero = false;
                return TG_OK;
            }
        }
        off += n;
    }
    return TG_OK;
}

static tg_err_t fault_set(tg_lg_fault_t *f, tg_err_t e, uint64_t seq, uint64_t off,
                          const char *what) {
    f->err = e;
    f->seq = seq;
    f->offset = off;
    snprintf(f->what, sizeof f->what, "%s", what);
    return e;
}

tg_err_t tg_lg_scan_fd(tg_lg_scan_result_t *res, tg_lg_fault_t *fault, tg_lg_chain_t *chain, int fd,
                       uint64_t size, uint32_t segment, bool last, tg_lg_rec_fn cb, void *ud) {
    return tg_lg_scan_fd_at(res, fault, chain, fd, size, 0, 0, segment, last, cb, ud);
}

tg_err_t tg_lg_scan_fd_at(tg_lg_scan_result_t *res, tg_lg_fault_t *fault, tg_lg_chain_t *chain,
                          int fd, uint64_t size, uint64_t start, uint64_t stop_seq,
                          uint32_t segment, bool last, tg_lg_rec_fn cb, void *ud) {
    memset(res, 0, sizeof *res);
    memset(fault, 0, sizeof *fault);
    /* Small files get a small buffer (fuzzing and tests scan many tiny segments). */
    size_t cap = size < READ_BUF_SIZE ? (size_t)size : READ_BUF_SIZE;
    reader_t r = {fd, size, malloc(cap ? cap : 1), cap, 0, 0};
    if (r.buf == NULL) {
        return TG_ERR_NOMEM;
    }
    tg_err_t rc = TG_OK;
    uint64_t off = start;
    res->good_end = start;
    char what[TG_DIAG_MAX];
    while (off < size && (stop_seq == 0 || chain->next_seq <= stop_seq)) {
        uint64_t rem = size - off;
        const uint8_t *p;
        size_t avail;
        tg_lg_hdr_t h;
        rc = rd_view(&r, off, HDR, &p, &avail);
        if (rc) {
            goto done;
        }
        uint64_t exp_seq = chain->next_seq;
        if (avail < HDR) {
            bool zero = false;
            size_t cmp = avail < 4 ? avail : 4;
            if (last && memcmp(p, TG_LEDGER_MAGIC, cmp) == 0) {
                goto torn;
            }
            if (last) {
                rc = rd_zero_tail(&r, off, &zero);
                if (rc) {
                    goto done;
                }
                if (zero) {
                    goto torn;
                }
            }
            snprintf(what, sizeof what, "incomplete record header (%zu bytes before end of file)",
                     avail);
            rc = fault_set(fault, TG_ERR_LEDGER_CORRUPT, exp_seq, off, what);
            goto done;
        }
        rc = tg_lg_hdr_parse(&h, p, what, sizeof what);
        if (rc) {
            bool zero = false;
            if (last) {
                rc = rd_zero_tail(&r, off, &zero);
                if (rc) {
                    goto done;
                }
                if (zero) {
                    goto torn;
                }
            }
            rc = fault_set(fault, TG_ERR_LEDGER_CORRUPT, exp_seq, off, what);
            goto done;
        }
        if (exp_seq == 0 && h.seq == 1) {
            exp_seq = 1; /* a single file that starts the ledger must start it properly */
            memset(chain->prev, 0, HSZ);
        }
        if (exp_seq != 0) {
            if (h.seq != exp_seq) {
                snprintf(what, sizeof what, "sequence number %llu where %llu was expected",
                         (unsigned long long)h.seq, (unsigned long long)exp_seq);
                rc = fault_set(fault, TG_ERR_LEDGER_CORRUPT, exp_seq, off, what);
                goto done;
            }
            if (sodium_memcmp(h.prev, chain->prev, HSZ) != 0) {
                snprintf(what, sizeof what,
                         exp_seq == 1 ? "first record's prev_hash is not zero"
                                      : "prev_hash does not match the previous record's hash "
                                        "(chain broken)");
                rc = fault_set(fault, TG_ERR_LEDGER_CORRUPT, exp_seq, off, what);
                goto done;
            }
        }
        size_t total = tg_lg_record_len(h.meta_len, h.payload_len);
        if ((uint64_t)total > rem) {
            if (last) {
                goto torn;
            }
            snprintf(what, sizeof what,
                     "record of %zu bytes extends past the end of the segment (%llu bytes left)",
                     total, (unsigned long long)rem);
            rc = fault_set(fault, TG_ERR_LEDGER_CORRUPT, h.seq, off, what);
            goto done;
        }
        rc = rd_view(&r, off, total, &p, &avail);
        if (rc) {
            goto done;
        }
        if (avail < total) {
            rc = TG_ERR_IO; /* the file shrank while we read it */
            goto done;
        }
        tg_ledger_record_t rec;
        if (!tg_lg_hash_check(p, total, rec.hash)) {
            rc = fault_set(fault, TG_ERR_LEDGER_CORRUPT, h.seq, off,
                           "record hash mismatch (record damaged)");
            goto done;
        }
        rec.type = h.type;
        rec.seq = h.seq;
        rec.meta = p + HDR;
        rec.meta_len = h.meta_len;
        rec.payload = p + HDR + h.meta_len;
        rec.payload_len = h.payload_len;
        rec.pos.seq = h.seq;
        rec.pos.offset = off;
        rec.pos.segment = segment;
        rec.pos.length = (uint32_t)total;
        memcpy(rec.prev_hash, h.prev, HSZ);
        if (cb != NULL) {
            tg_diag_t d = {{0}};
            rc = cb(ud, &rec, &d);
            if (rc) {
                fault_set(fault, rc, h.seq, off, d.msg[0] ? d.msg : tg_strerror(rc));
                goto done;
            }
        }
        if (res->records == 0) {
            res->first_seq = h.seq;
        }
        res->records++;
        chain->next_seq = h.seq + 1;
        memcpy(chain->prev, rec.hash, HSZ);
        off += total;
        res->good_end = off;
    }
    goto done;
torn:
    res->torn = true;
    res->torn_bytes = size - off;
    res->good_end = off;
    rc = TG_OK;
done:
    free(r.buf);
    return rc;
}

tg_err_t tg_lg_check_at(int fd, const tg_ledger_pos_t *pos, uint8_t hash[TG_LEDGER_HASH_SIZE],
                        char *what, size_t what_len) {
    if (pos->length < TG_LEDGER_RECORD_OVERHEAD || pos->length > TG_LEDGER_RECORD_MAX) {
        snprintf(what, what_len, "record length %u out of range", (unsigned)pos->length);
        return TG_ERR_LEDGER_CORRUPT;
    }
    uint8_t *rec = malloc(pos->length);
    if (rec == NULL) {
        return TG_ERR_NOMEM;
    }
    tg_err_t rc = TG_OK;
    size_t got = 0;
    while (got < pos->length) {
        ssize_t k = pread(fd, rec + got, pos->length - got, (off_t)(pos->offset + got));
        if (k < 0 && errno == EINTR) {
            continue;
        }
        if (k <= 0) {
            snprintf(what, what_len, "%s at offset %llu", k < 0 ? strerror(errno) : "past the end",
                     (unsigned long long)pos->offset);
            rc = k < 0 ? TG_ERR_IO : TG_ERR_NOT_FOUND;
            goto done;
        }
        got += (size_t)k;
    }
    tg_lg_hdr_t h;
    if (tg_lg_hdr_parse(&h, rec, what, what_len) != TG_OK || h.seq != pos->seq ||
        tg_lg_record_len(h.meta_len, h.payload_len) != pos->length ||
        !tg_lg_hash_check(rec, pos->length, hash)) {
        snprintf(what, what_len, "no valid record seq %llu of %u bytes at offset %llu",
                 (unsigned long long)pos->seq, (unsigned)pos->length,
                 (unsigned long long)pos->offset);
        rc = TG_ERR_LEDGER_CORRUPT;
    }
done:
    free(rec);
    return rc;
}

/* ---- directory ---- */

tg_err_t tg_ledger_segment_name(char *out, size_t out_len, uint32_t segment) {
    if (out == NULL) {
        return TG_ERR_INVALID_ARG;
    }
    int n = snprintf(out, out_len, "ledger-%06lu.tgl", (unsigned long)segment);
    if (n < 0 || (size_t)n >= out_len) {
        if (out_len) {
            out[0] = '\0';
        }
        return TG_ERR_BUFFER_TOO_SMALL;
    }
    return TG_OK;
}

void tg_lg_seg_name(char out[TG_LG_NAME_MAX], uint32_t segment) {
    snprintf(out, TG_LG_NAME_MAX, "ledger-%06lu.tgl", (unsigned long)segment);
}

/* Parses a canonical segment name; false for anything else. */
static bool parse_segment_name(const char *name, uint32_t *seg) {
    size_t n = strlen(name);
    if (n < 7 + 6 + 4 || strncmp(name, "ledger-", 7) != 0 || strcmp(name + n - 4, ".tgl") != 0) {
        return false;
    }
    uint64_t v = 0;
    for (size_t i = 7; i < n - 4; i++) {
        if (name[i] < '0' || name[i] > '9' || i - 7 >= 10) {
            return false;
        }
        v = v * 10 + (uint64_t)(name[i] - '0');
    }
    if (v == 0 || v > UINT32_MAX) {
        return false;
    }
    char canon[32];
    if (tg_ledger_segment_name(canon, sizeof canon, (uint32_t)v) || strcmp(canon, name) != 0) {
        return false;
    }
    *seg = (uint32_t)v;
    return true;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

tg_err_t tg_lg_list_segments(uint32_t **out, size_t *n_out, int dirfd, const char *dir,
                             uint32_t first, size_t *below, tg_diag_t *diag) {
    *out = NULL;
    *n_out = 0;
    size_t n_below = 0;
    int fd = dup(dirfd);
    if (fd < 0) {
        return tg_diag_set(diag, TG_ERR_IO, "%s: cannot read directory: %s", dir, strerror(errno));
    }
    DIR *d = fdopendir(fd);
    if (d == NULL) {
        close(fd);
        return tg_diag_set(diag, TG_ERR_IO, "%s: cannot read directory: %s", dir, strerror(errno));
    }
    rewinddir(d);
    tg_err_t rc = TG_OK;
    uint32_t *v = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    for (;;) {
        errno = 0;
        e = readdir(d);
        if (e == NULL) {
            if (errno != 0) {
                rc = tg_diag_set(diag, TG_ERR_IO, "%s: cannot read directory: %s", dir,
                                 strerror(errno));
                goto done;
            }
            break;
        }
        size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, "ledger-", 7) != 0 || len < 4 ||
            strcmp(e->d_name + len - 4, ".tgl") != 0) {
            continue;
        }
        uint32_t seg;
        if (!parse_segment_name(e->d_name, &seg)) {
            rc = tg_diag_set(diag, TG_ERR_LEDGER_CORRUPT,
                             "%s/%s: not a valid segment file name (expected ledger-NNNNNN.tgl)",
                             dir, e->d_name);
            goto done;
        }
        if (seg < first) {
            n_below++;
            continue;
        }
        if (n == cap) {
            if (cap >= TG_LG_SEGMENTS_MAX) {
                rc = tg_diag_set(diag, TG_ERR_LIMIT, "%s: more than %u segment files", dir,
                                 TG_LG_SEGMENTS_MAX);
                goto done;
            }
            size_t ncap = cap ? cap * 2 : 16;
            uint32_t *nv = realloc(v, ncap * sizeof *v);
            if (nv == NULL) {
                rc = TG_ERR_NOMEM;
                goto done;
            }
            v = nv;
            cap = ncap;
        }
        v[n++] = seg;
    }
    if (n > 1) {
        qsort(v, n, sizeof *v, cmp_u32);
    }
    for (size_t i = 0; i < n; i++) {
        if ((uint64_t)v[i] != (uint64_t)first + i) {
            char name[TG_LG_NAME_MAX];
            tg_lg_seg_name(name, (uint32_t)(first + i));
            if (first == 1) {
                rc = tg_diag_set(diag, TG_ERR_LEDGER_CORRUPT,
                                 "%s/%s: segment file missing (segments must be numbered from 1 "
                                 "without gaps, unless %s says where they start)",
                                 dir, name, TG_ANCHOR_NAME);
            } else {
                rc = tg_diag_set(diag, TG_ERR_LEDGER_CORRUPT,
                                 "%s/%s: segment file missing (segments must be numbered from "
                                 "the anchor's segment %u without gaps)",
                                 dir, name, first);
            }
            goto done;
        }
    }
    if (below != NULL) {
        *below = n_below;
    }
done:
    closedir(d);
    if (rc) {
        free(v);
        return rc;
    }
    *out = v;
    *n_out = n;
    return TG_OK;
}

/* ---- durability names ---- */

const char *tg_durability_name(tg_durability_t d) {
    switch (d) {
    case TG_DURABILITY_FSYNC:
        return "fsync";
    case TG_DURABILITY_BATCH:
        return "batch";
    case TG_DURABILITY_NONE:
        return "none";
    }
    return "unknown";
}

tg_err_t tg_durability_parse(tg_durability_t *out, const char *s) {
    if (out == NULL || s == NULL) {
        return TG_ERR_INVALID_ARG;
    }
    static const tg_durability_t all[] = {TG_DURABILITY_FSYNC, TG_DURABILITY_BATCH,
                                          TG_DURABILITY_NONE};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (strcmp(s, tg_durability_name(all[i])) == 0) {
            *out = all[i];
            return TG_OK;
        }
    }
    return TG_ERR_INVALID_ARG;
}

/* ---- offline verify ---- */

typedef struct verify_ctx {
    const tg_ledger_verify_opts_t *opts;
    tg_ledger_verify_report_t *rep;
    tg_lg_head_probe_t probe; /* ledger.head's record */
    bool start_known;         /* the chain's first seq and prev_hash are checked */
} verify_ctx_t;

static tg_err_t verify_rec(void *ud, const tg_ledger_record_t *rec, tg_diag_t *diag) {
    verify_ctx_t *v = ud;
    tg_lg_head_probe_see(&v->probe, rec);
    if (v->opts != NULL && v->opts->check != NULL) {
        tg_err_t rc = v->opts->check(v->opts->check_ud, rec, diag);
        if (rc) {
            return rc;
        }
    }
    tg_ledger_verify_report_t *rep = v->rep;
    if (rep->records == 0) {
        rep->first_seq = rec->seq;
        rep->anchored = v->start_known;
    }
    rep->records++;
    if (rec->type == TG_LEDGER_TYPE_RECEIPT) {
        rep->receipts++;
    } else if (rec->type == TG_LEDGER_TYPE_REDEMPTION) {
        rep->redemptions++;
    } else if (rec->type == TG_LEDGER_TYPE_SILENCE) {
        rep->silences++;
    } /* approval records (type 4) are counted by the approval audit (cmd_ledger.c) */
    rep->last_seq = rec->seq;
    memcpy(rep->head_hash, rec->hash, HSZ);
    rep->bytes += rec->pos.length;
    return TG_OK;
}

/* Scans one file into the report; name is the path used in messages. */
static tg_err_t verify_file(tg_ledger_verify_report_t *rep, verify_ctx_t *ctx, tg_lg_chain_t *chain,
                            int fd, const char *name, uint32_t segment, bool last,
                            tg_diag_t *diag) {
    struct stat st;
    if (fstat(fd, &st) != 0) {
        return tg_diag_set(diag, TG_ERR_IO, "%s: %s", name, strerror(errno));
    }
    if (!S_ISREG(st.st_mode)) {
        return tg_diag_set(diag, TG_ERR_IO, "%s: not a regular file", name);
    }
    tg_lg_scan_result_t res;
    tg_lg_fault_t f;
    tg_err_t rc =
        tg_lg_scan_fd(&res, &f, chain, fd, (uint64_t)st.st_size, segment, last, verify_rec, ctx);
    rep->segments++;
    if (rep->first_segment == 0) {
        rep->first_segment = segment;
    }
    rep->last_segment = segment;
    if (rc == TG_OK && res.torn) {
        f.err = TG_ERR_LEDGER_TORN;
        f.seq = chain->next_seq;
        f.offset = res.good_end;
        snprintf(f.what, sizeof f.what,
                 "torn final record: %llu bytes after the last complete record (a restart "
                 "would truncate them)",
                 (unsigned long long)res.torn_bytes);
        rep->torn_bytes = res.torn_bytes;
        rc = TG_ERR_LEDGER_TORN;
    } else if (rc == TG_OK && res.records == 0 && !last) {
        f.err = TG_ERR_LEDGER_CORRUPT;
        f.seq = chain->next_seq;
        f.offset = 0;
        snprintf(f.what, sizeof f.what, "empty segment that is not the last one");
        rc = TG_ERR_LEDGER_CORRUPT;
    } else if (rc == TG_ERR_IO || rc == TG_ERR_NOMEM) {
        return tg_diag_set(diag, rc, "%s: %s", name, tg_strerror(rc));
    }
    if (rc) {
        rep->fault = rc;
        snprintf(rep->fault_file, sizeof rep->fault_file, "%s", name);
        rep->fault_seq = f.seq;
        rep->fault_offset = f.offset;
        snprintf(rep->fault_what, sizeof rep->fault_what, "%s", f.what);
        return tg_diag_set(diag, rc, "%s: seq %llu at offset %llu: %s", name,
                           (unsigned long long)f.seq, (unsigned long long)f.offset, f.what);
    }
    return TG_OK;
}

void tg_lg_head_probe_see(tg_lg_head_probe_t *p, const tg_ledger_record_t *rec) {
    if (rec->seq == p->want_seq) {
        p->got = true;
        memcpy(p->hash, rec->hash, HSZ);
    }
}

tg_err_t tg_lg_head_check(const tg_lg_head_t *h, uint64_t last_seq, const tg_lg_head_probe_t *p,
                          uint64_t *fault_seq, char *what, size_t what_len) {
    bool lost = last_seq < h->seq;
    if (h->seq == 0 || (!lost && p->got && sodium_memcmp(p->hash, h->hash, HSZ) == 0)) {
        return TG_OK;
    }
    char when[TG_TIME_ISO_LEN + 1];
    if (tg_time_format_ms(when, h->at_ms) != TG_OK) {
        snprintf(when, sizeof when, "an unknown time");
    }
    if (lost) {
        *fault_seq = last_seq + 1;
        snprintf(what, what_len,
                 "seq %llu was on disk at %s, but the ledger ends at seq %llu: %llu durable "
                 "records lost",
                 (unsigned long long)h->seq, when, (unsigned long long)last_seq,
                 (unsigned long long)(h->seq - last_seq));
    } else {
        *fault_seq = h->seq;
        snprintf(what, what_len,
                 "seq %llu is not the record %s recorded at %s (its hash differs): the ledger "
                 "was rewritten or replaced",
                 (unsigned long long)h->seq, TG_LG_HEAD_NAME, when);
    }
    return TG_ERR_LEDGER_CORRUPT;
}

tg_err_t tg_lg_orphan_check(int dirfd, const tg_lg_head_t *h, const char **file, char *what,
                            size_t what_len) {
    char found[TG_DIAG_MAX];
    struct stat st;
    if (h != NULL) {
        *file = TG_LG_HEAD_NAME;
        /* The same words as a start that finds fewer records than ledger.head recorded. */
        tg_lg_head_probe_t none = {.want_seq = h->seq};
        uint64_t seq = 0;
        if (tg_lg_head_check(h, 0, &none, &seq, found, sizeof found) == TG_OK) {
            /* seq 0: written at open before any record was durable; records acknowledged
             * since may still have existed (the file is rewritten once a second) */
            char when[TG_TIME_ISO_LEN + 1];
            if (tg_time_format_ms(when, h->at_ms) != TG_OK) {
                snprintf(when, sizeof when, "an unknown time");
            }
            snprintf(found, sizeof found, "%s, written at %s, shows a ledger was here",
                     TG_LG_HEAD_NAME, when);
        }
    } else if (fstatat(dirfd, TG_LG_PROBE_NAME, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        *file = TG_LG_PROBE_NAME;
        snprintf(found, sizeof found,
                 "%s is left from a write probe, which only runs beside a segment",
                 TG_LG_PROBE_NAME);
    } else {
        return TG_OK;
    }
    /* Short: open adds the directory and the way out, and a diag holds 255 bytes. */
    snprintf(what, what_len, "%s; no segment file is left", found);
    return TG_ERR_LEDGER_CORRUPT;
}

/* Records a fault found in a file that is not a segment (ledger.head, an anchor, a
 * directory). */
static tg_err_t fault_at(tg_ledger_verify_report_t *rep, tg_err_t rc, const char *file,
                         uint64_t seq, const char *what, tg_diag_t *diag) {
    rep->fault = rc;
    rep->torn_bytes = 0;
    snprintf(rep->fault_file, sizeof rep->fault_file, "%s", file);
    rep->fault_seq = seq;
    rep->fault_offset = 0;
    snprintf(rep->fault_what, sizeof rep->fault_what, "%s", what);
    return tg_diag_set(diag, rc, "%s: %s", file, what);
}

/* The durable-head check of tg_ledger_open, for verify: after the scan (TG_OK or torn). */
static tg_err_t verify_head(tg_ledger_verify_report_t *rep, const verify_ctx_t *ctx,
                            const tg_lg_head_t *head, const char *hpath, tg_diag_t *diag) {
    uint64_t seq = 0;
    char what[sizeof rep->fault_what];
    if (tg_lg_head_check(head, rep->last_seq, &ctx->probe, &seq, what, sizeof what) == TG_OK) {
        return rep->fault; /* TG_OK, or the torn tail past the head */
    }
    return fault_at(rep, TG_ERR_LEDGER_CORRUPT, hpath, seq, what, diag);
}

/* Reads anchor `name` of the directory and hands it to the caller's check. */
static tg_err_t verify_anchor_file(tg_ledger_verify_report_t *rep, const verify_ctx_t *ctx, int dfd,
                                   const char *path, const char *name, tg_anchor_t *a, bool *found,
                                   tg_diag_t *diag) {
    char file[sizeof rep->fault_file];
    snprintf(file, sizeof file, "%s/%s", path, name);
    tg_err_t rc = tg_anchor_read(a, found, dfd, path, name, diag);
    if (rc == TG_ERR_LEDGER_CORRUPT) {
        char what[TG_DIAG_MAX];
        snprintf(what, sizeof what, "%s", diag != NULL ? diag->msg : "damaged anchor");
        return fault_at(rep, rc, file, 0, what, diag);
    }
    if (rc || !*found) {
        return rc;
    }
    rep->anchors++;
    if (ctx->opts != NULL && ctx->opts->anchor_check != NULL) {
        tg_diag_t why = {{0}};
        rc = ctx->opts->anchor_check(ctx->opts->anchor_ud, a, file, &why);
        if (rc) {
            return fault_at(rep, rc, file, a->first_seq, why.msg[0] ? why.msg : tg_strerror(rc),
                            diag);
        }
    }
    return TG_OK;
}

/* One ledger directory into the report. continues: it must go on from the chain of the
 * directory before it (tg_ledger_verify_dirs). */
static tg_err_t verify_dir(tg_ledger_verify_report_t *rep, verify_ctx_t *ctx, tg_lg_chain_t *chain,
                           const char *path, bool continues, tg_diag_t *diag) {
    tg_lg_head_t head;
    bool head_found = false;
    char hpath[sizeof rep->fault_file];
    uint32_t *segs = NULL;
    size_t nseg = 0, below = 0;
    tg_err_t rc = TG_OK;
    int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        return tg_diag_set(diag, errno == ENOENT ? TG_ERR_NOT_FOUND : TG_ERR_IO, "%s: %s", path,
                           strerror(errno));
    }
    snprintf(hpath, sizeof hpath, "%s/%s", path, TG_LG_HEAD_NAME);
    rc = tg_lg_head_read(&head, &head_found, dfd, path, diag);
    if (rc) {
        if (rc == TG_ERR_LEDGER_CORRUPT) {
            snprintf(rep->fault_file, sizeof rep->fault_file, "%s", hpath);
            snprintf(rep->fault_what, sizeof rep->fault_what, "%s", diag ? diag->msg : "");
        }
        goto done;
    }
    memset(&ctx->probe, 0, sizeof ctx->probe);
    if (head_found) {
        rep->head_found = true;
        rep->head_seq = head.seq;
        rep->head_at_ms = head.at_ms;
        ctx->probe.want_seq = head.seq;
    }
    tg_anchor_t a, end;
    bool anchored = false, ended = false;
    rc = verify_anchor_file(rep, ctx, dfd, path, TG_ANCHOR_NAME, &a, &anchored, diag);
    if (rc) {
        goto done;
    }
    char afile[sizeof rep->fault_file];
    snprintf(afile, sizeof afile, "%s/%s", path, TG_ANCHOR_NAME);
    uint32_t first = anchored ? a.first_segment : 1;
    if (continues) {
        char what[TG_DIAG_MAX];
        if (!anchored) {
            snprintf(what, sizeof what,
                     "missing: a directory that continues an archive must start at an anchor");
        } else if (a.first_seq != chain->next_seq || a.first_segment != rep->last_segment + 1 ||
                   sodium_memcmp(a.prev_hash, chain->prev, HSZ) != 0) {
            snprintf(what, sizeof what,
                     "does not continue the directory before it (anchor: segment %u, seq %llu; "
                     "that directory ends at segment %u, seq %llu, or its last hash differs)",
                     a.first_segment, (unsigned long long)a.first_seq, rep->last_segment,
                     (unsigned long long)(chain->next_seq - 1));
        } else {
            what[0] = '\0';
        }
        if (what[0] != '\0') {
            rc = fault_at(rep, TG_ERR_LEDGER_CORRUPT, afile, chain->next_seq, what, diag);
            goto done;
        }
    } else {
        chain->next_seq = 1; /* a whole ledger starts at seq 1 with a zero prev_hash */
        memset(chain->prev, 0, HSZ);
        if (anchored) {
            chain->next_seq = a.first_seq;
            memcpy(chain->prev, a.prev_hash, HSZ);
            rep->anchor_found = true;
            rep->anchor_seq = a.first_seq;
        }
    }
    ctx->start_known = true;
    rc = tg_lg_list_segments(&segs, &nseg, dfd, path, first, &below, diag);
    if (rc) {
        if (rc == TG_ERR_LEDGER_CORRUPT) {
            snprintf(rep->fault_file, sizeof rep->fault_file, "%s", path);
            snprintf(rep->fault_what, sizeof rep->fault_what, "%s", diag ? diag->msg : "");
            rep->fault_seq = chain->next_seq;
        }
        goto done;
    }
    rep->leftover_segments += (uint32_t)below;
    if (nseg == 0) {
        if (anchored) {
            char what[TG_DIAG_MAX], name[TG_LG_NAME_MAX];
            tg_lg_seg_name(name, first);
            snprintf(what, sizeof what,
                     "its first segment %s is missing: the anchored ledger has no segment", name);
            rc = fault_at(rep, TG_ERR_LEDGER_CORRUPT, afile, chain->next_seq, what, diag);
            goto done;
        }
        /* As open: a head or probe without segments is a ledger that lost its files (exit
         * 1, damage), not merely a directory that holds no ledger (exit 2). */
        const char *file = NULL;
        char what[sizeof rep->fault_what];
        if (tg_lg_orphan_check(dfd, head_found ? &head : NULL, &file, what, sizeof what) != TG_OK) {
            char full[sizeof rep->fault_file];
            snprintf(full, sizeof full, "%s/%s", path, file);
            rc = fault_at(rep, TG_ERR_LEDGER_CORRUPT, full, 1, what, diag);
            goto done;
        }
        rc =
            tg_diag_set(diag, TG_ERR_NOT_FOUND, "%s: no ledger segment files (ledger-*.tgl)", path);
        goto done;
    }
    for (size_t i = 0; i < nseg; i++) {
        char name[TG_LG_NAME_MAX], full[512];
        tg_lg_seg_name(name, segs[i]);
        snprintf(full, sizeof full, "%s/%s", path, name);
        /* As the daemon opens them: no symlinks, and a FIFO fails the regular-file check
         * in verify_file instead of blocking the open. */
        int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        if (fd < 0) {
            rc = tg_diag_set(diag, TG_ERR_IO, "%s: %s", full, strerror(errno));
            goto done;
        }
        rc = verify_file(rep, ctx, chain, fd, full, segs[i], i + 1 == nseg, diag);
        close(fd);
        if (rc) {
            break;
        }
    }
    if ((rc == TG_OK || rc == TG_ERR_LEDGER_TORN) && head_found && head.seq > 0) {
        rc = verify_head(rep, ctx, &head, hpath, diag);
    }
    if (rc) {
        goto done;
    }
    /* An archive says where it ends: a missing last segment, or records cut from its end,
     * would otherwise leave a valid, shorter chain. */
    rc = verify_anchor_file(rep, ctx, dfd, path, TG_ANCHOR_END_NAME, &end, &ended, diag);
    if (rc || !ended) {
        goto done;
    }
    rep->end_found = true;
    rep->end_seq = end.first_seq;
    if (end.first_seq != chain->next_seq || end.first_segment != rep->last_segment + 1 ||
        sodium_memcmp(end.prev_hash, chain->prev, HSZ) != 0) {
        char what[TG_DIAG_MAX], efile[sizeof rep->fault_file];
        snprintf(efile, sizeof efile, "%s/%s", path, TG_ANCHOR_END_NAME);
        snprintf(what, sizeof what,
                 "the archive should end at segment %u, seq %llu with the anchor's hash, but "
                 "it ends at segment %u, seq %llu (records missing or altered at its end)",
                 end.first_segment - 1, (unsigned long long)(end.first_seq - 1), rep->last_segment,
                 (unsigned long long)(chain->next_seq - 1));
        rc = fault_at(rep, TG_ERR_LEDGER_CORRUPT, efile, chain->next_seq, what, diag);
    }
done:
    close(dfd);
    free(segs);
    return rc;
}

tg_err_t tg_ledger_verify_dirs(tg_ledger_verify_report_t *rep, const char *const *paths, size_t n,
                               const tg_ledger_verify_opts_t *opts, tg_diag_t *diag) {
    if (rep == NULL) {
        return tg_diag_set(diag, TG_ERR_INVALID_ARG, "verify: no report");
    }
    memset(rep, 0, sizeof *rep);
    if (paths == NULL || n == 0) {
        return rep->fault = tg_diag_set(diag, TG_ERR_INVALID_ARG, "verify: no path");
    }
    if (sodium_init() < 0) {
        return rep->fault = tg_diag_set(diag, TG_ERR_INTERNAL, "libsodium failed to start");
    }
    verify_ctx_t ctx = {.opts = opts, .rep = rep};
    tg_lg_chain_t chain;
    memset(&chain, 0, sizeof chain);
    tg_err_t rc = TG_OK;
    /* Unusable input (exit 2 for the CLI) before any verdict on the ledger (exit 1). */
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        if (paths[i] == NULL || stat(paths[i], &st) != 0 || !S_ISDIR(st.st_mode)) {
            return rep->fault = tg_diag_set(diag, TG_ERR_NOT_FOUND, "%s: not a ledger directory",
                                            paths[i] != NULL ? paths[i] : "(null)");
        }
    }
    for (size_t i = 0; i < n && rc == TG_OK; i++) {
        rc = verify_dir(rep, &ctx, &chain, paths[i], i > 0, diag);
        if (rc == TG_OK && i + 1 < n && !rep->end_found) {
            char file[sizeof rep->fault_file];
            snprintf(file, sizeof file, "%s/%s", paths[i], TG_ANCHOR_END_NAME);
            rc = fault_at(rep, TG_ERR_LEDGER_CORRUPT, file, chain.next_seq,
                          "missing: an archive followed by another directory must say where it "
                          "ends",
                          diag);
        }
        if (rc == TG_ERR_LEDGER_TORN && i + 1 < n) {
            rep->fault = rc = TG_ERR_LEDGER_CORRUPT; /* a sealed archive has no torn tail */
        }
        if (i + 1 < n) {
            rep->end_found = false;
        }
    }
    rep->fault = rc;
    return rc;
}

tg_err_t tg_ledger_verify_path(tg_ledger_verify_report_t *rep, const char *path,
                               const tg_ledger_verify_opts_t *opts, tg_diag_t *diag) {
    if (rep == NULL) {
        return tg_diag_set(diag, TG_ERR_INVALID_ARG, "verify: no report");
    }
    memset(rep, 0, sizeof *rep);
    if (path == NULL) {
        return rep->fault = tg_diag_set(diag, TG_ERR_INVALID_ARG, "verify: no path");
    }
    if (sodium_init() < 0) {
        return rep->fault = tg_diag_set(diag, TG_ERR_INTERNAL, "libsodium failed to start");
    }
    struct stat st;
    if (stat(path, &st) != 0) {
        return rep->fault = tg_diag_set(diag, errno == ENOENT ? TG_ERR_NOT_FOUND : TG_ERR_IO,
                                        "%s: %s", path, strerror(errno));
    }
    if (S_ISDIR(st.st_mode)) {
        return tg_ledger_verify_dirs(rep, &path, 1, opts, diag);
    }
    if (!S_ISREG(st.st_mode)) {
        return rep->fault =
                   tg_diag_set(diag, TG_ERR_IO, "%s: neither a directory nor a regular file", path);
    }
    verify_ctx_t ctx = {.opts = opts, .rep = rep};
    tg_lg_chain_t chain;
    memset(&chain, 0, sizeof chain);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        return rep->fault = tg_diag_set(diag, TG_ERR_IO, "%s: %s", path, strerror(errno));
    }
    const char *base = strrchr(path, '/');
    uint32_t seg = 0;
    if (!parse_segment_name(base ? base + 1 : path, &seg)) {
        seg = 0;
    }
    if (seg == 1) {
        chain.next_seq = 1; /* the first segment must start the ledger */
        ctx.start_known = true;
    }
    tg_err_t rc = verify_file(rep, &ctx, &chain, fd, path, seg, true, diag);
    close(fd);
    rep->fault = rc;
    return rc;
}

/* ---- ledger.head --------------------------------------------------------------------- */

#define HEAD_MAGIC "TGLHEAD1"
#define HEAD_BODY 64 /* bytes covered by the slot's SHA-256 */

void tg_lg_head_encode(uint8_t slot[TG_LG_HEAD_SLOT], const tg_lg_head_t *h) {
    memset(slot, 0, TG_LG_HEAD_SLOT);
    memcpy(slot, HEAD_MAGIC, 8);
    tg_lg_put_u64(slot + 8, h->gen);
    tg_lg_put_u64(slot + 16, h->seq);
    memcpy(slot + 24, h->hash, TG_LEDGER_HASH_SIZE);
    tg_lg_put_u64(slot + 56, (uint64_t)h->at_ms);
    tg_sha256(slot + HEAD_BODY, slot, HEAD_BODY);
}

static bool head_decode(tg_lg_head_t *h, const uint8_t *slot) {
    uint8_t check[TG_LEDGER_HASH_SIZE];
    tg_sha256(check, slot, HEAD_BODY);
    if (memcmp(slot, HEAD_MAGIC, 8) != 0 ||
        sodium_memcmp(check, slot + HEAD_BODY, sizeof check) != 0) {
        return false;
    }
    h->gen = tg_lg_get_u64(slot + 8);
    h->seq = tg_lg_get_u64(slot + 16);
    memcpy(h->hash, slot + 24, TG_LEDGER_HASH_SIZE);
    h->at_ms = (int64_t)tg_lg_get_u64(slot + 56);
    return true;
}

tg_err_t tg_lg_read_exact(int dirfd, const char *dir, const char *name, uint8_t *buf, size_t size,
                          bool *found, tg_diag_t *diag) {
    *found = false;
    int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) {
        if (errno == ENOENT) {
            return TG_OK;
        }
        if (errno == ELOOP) {
            return tg_diag_set(diag, TG_ERR_LEDGER_CORRUPT, "%s/%s: a symbolic link", dir, name);
        }
        return tg_diag_set(diag, TG_ERR_IO, "%s/%s: %s", dir, name, strerror(errno));
    }
    struct stat st;
    tg_err_t rc = TG_OK;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != (uint64_t)size) {
        rc = tg_diag_set(diag, TG_ERR_LEDGER_CORRUPT, "%s/%s: not a regular file of %zu bytes", dir,
                         name, size);
    } else if (pread(fd, buf, size, 0) != (ssize_t)size) {
        rc = tg_diag_set(diag, TG_ERR_IO, "%s/%s: cannot read it", dir, name);
    }
    close(fd);
    *found = rc == TG_OK;
    return rc;
}

tg_err_t tg_lg_head_read(tg_lg_head_t *out, bool *found, int dirfd, const char *dir,
                         tg_diag_t *diag) {
    memset(out, 0, sizeof *out);
    uint8_t buf[TG_LG_HEAD_SIZE] = {0};
    bool present = false;
    tg_err_t rc = tg_lg_read_exact(dirfd, dir, TG_LG_HEAD_NAME, buf, sizeof buf, &present, diag);
    *found = false;
    if (rc != TG_OK || !present) {
        return rc;
    }
    tg_lg_head_t a, b;
    bool va = head_decode(&a, buf), vb = head_decode(&b, buf + TG_LG_HEAD_SLOT);
    if (!va && !vb) {
        return tg_diag_set(diag, TG_ERR_LEDGER_CORRUPT, "%s/%s: neither slot is valid (damaged)",
                           dir, TG_LG_HEAD_NAME);
    }
    *out = va && (!vb || a.gen >= b.gen) ? a : b;
    *found = true;
    return TG_OK;
}
