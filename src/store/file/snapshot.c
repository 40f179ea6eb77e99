/* snapshot.c — the snapshot file format of snapshot.h: writer, checked reader, listing. */
#include "trigguard/snapshot.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trigguard/buf.h"
#include "trigguard/io.h"

#define HDR TG_SNAP_HEADER_SIZE
#define CHK TG_SNAP_CHECK_SIZE
#define WBUF ((size_t)1 << 20)
#define ITEM_MAX                                                                                   \
    (1 + 1 + 2 + 8 + 2 + 32 + 8 + 16 + TG_STORE_TENANT_MAX + TG_STORE_MAX_KEY_LEN_LIMIT)

enum { TAG_KEY = 1, TAG_NONCE = 2, TAG_RECEIPT = 3, TAG_LIMIT = 4, TAG_APPROVAL = 5 };

static void put16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}
static void put64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}
static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t get32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static uint64_t get64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) {
        v = (v << 8) | p[i];
    }
    return v;
}

/* ---- writer ---- */

struct tg_snap_writer {
    char *dir;
    int dfd;
    int fd;
    uint8_t *buf;
    size_t len;
    uint64_t body_len;
    uint64_t counts[TG_SNAP_N];
    crypto_generichash_state body; /* BLAKE2b-256 of the items */
    tg_err_t failed;               /* sticky */
};

tg_err_t tg_snap_writer_open(tg_snap_writer_t **out, const char *dir, tg_diag_t *diag) {
    if (out == NULL || dir == NULL) {
        return tg_diag_set(diag, TG_ERR_INVALID_ARG, "snapshot: no directory");
    }
    *out = NULL;
    tg_snap_writer_t *w = calloc(1, sizeof *w);
    if (w == NULL || (w->dir = strdup(dir)) == NULL || (w->buf = malloc(WBUF)) == NULL) {
        if (w != NULL) {
            free(w->dir);
        }
        free(w);
        return tg_diag_set(diag, TG_ERR_NOMEM, "snapshot: out of memory");
    }
    w->fd = -1;
    w->dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (w->dfd >= 0) {
        w->fd = openat(w->dfd, TG_SNAP_TMP_NAME,
                       O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    }
    if (w->fd < 0) {
        int err = errno;
        tg_snap_writer_abort(w);
        return tg_diag_set(diag, TG_ERR_IO, "%s/%s: %s", dir, TG_SNAP_TMP_NAME, strerror(err));
    }
    crypto_generichash_init(&w->body, NULL, 0, CHK);
    memset(w->buf, 0, HDR); /* the header's place; written at commit */
    w->len = HDR;
    *out = w;
    return TG_OK;
}

static tg_err_t flush(tg_snap_writer_t *w) {
    if (w->len > 0 && tg_write_all(w->fd, w->buf, w->len) != TG_OK) {
        return w->failed = TG_ERR_IO;
    }
    w->len = 0;
    return TG_OK;
}

/* Room for n more bytes in the buffer. */
static tg_err_t reserve(tg_snap_writer_t *w, size_t n) {
    if (w->failed) {
        return w->failed;
    }
    return WBUF - w->len < n ? flush(w) : TG_OK;
}

/* The item at p[0..n) is complete: hashed and counted. */
static void took(tg_snap_writer_t *w, const uint8_t *p, size_t n, int section) {
    crypto_generichash_update(&w->body, p, n);
    w->body_len += n;
    w->len += n;
    w->counts[section]++;
}

static void put_pos(uint8_t *p, const tg_ledger_pos_t *pos) {
    put64(p, pos->seq);
    put64(p + 8, pos->offset);
    put32(p + 16, pos->segment);
    put32(p + 20, pos->length);
}

tg_err_t tg_snap_put_item(tg_snap_writer_t *w, const tg_store_item_t *it) {
    if (w == NULL || it == NULL || it->tenant_len == 0 || it->tenant_len > TG_STORE_TENANT_MAX ||
        it->key_len == 0 || it->key_len > TG_STORE_MAX_KEY_LEN_LIMIT ||
        (it->kind == TG_STORE_ITEM_KEY && it->request_hash == NULL) ||
        (it->kind == TG_STORE_ITEM_KEY && (it->status < 100 || it->status > 599))) {
        return TG_ERR_INVALID_ARG;
    }
    int section = it->kind == TG_STORE_ITEM_KEY       ? TG_SNAP_KEYS
                  : it->kind == TG_STORE_ITEM_NONCE   ? TG_SNAP_NONCES
                  : it->kind == TG_STORE_ITEM_RECEIPT ? TG_SNAP_RECEIPTS
                                                      : -1;
    if (section < 0) {
        return TG_ERR_INVALID_ARG;
    }
    tg_err_t rc = reserve(w, ITEM_MAX);
    if (rc) {
        return rc;
    }
    uint8_t *p = w->buf + w->len, *q = p;
    *q++ = (uint8_t)(section + 1); /* tags are the sections' order plus one */
    *q++ = (uint8_t)it->tenant_len;
    put16(q, (uint16_t)it->key_len);
    q += 2;
    put64(q, (uint64_t)it->stamp_ms);
    q += 8;
    if (it->kind == TG_STORE_ITEM_KEY) {
        put16(q, (uint16_t)it->status);
        memcpy(q + 2, it->request_hash, 32);
        q += 34;
    }
    if (it->kind != TG_STORE_ITEM_NONCE) {
        put_pos(q, &it->pos);
        q += 24;
    }
    memcpy(q, it->tenant, it->tenant_len);
    q += it->tenant_len;
    memcpy(q, it->key, it->key_len);
    q += it->key_len;
    took(w, p, (size_t)(q - p), section);
    return TG_OK;
}

tg_err_t tg_snap_put_limit(tg_snap_writer_t *w, const tg_db_limit_ref_t *ref, double total) {
    if (w == NULL || ref == NULL || ref->limit == NULL || ref->limit_len == 0 ||
        ref->limit_len > TG_DB_LIMIT_NAME_MAX) {
        return TG_ERR_INVALID_ARG;
    }
    tg_err_t rc = reserve(w, 1 + 2 + 32 + 24 + TG_DB_LIMIT_NAME_MAX);
    if (rc) {
        return rc;
    }
    uint8_t *p = w->buf + w->len, *q = p;
    *q++ = TAG_LIMIT;
    put16(q, (uint16_t)ref->limit_len);
    memcpy(q + 2, ref->key, 32);
    put64(q + 34, (uint64_t)ref->window_start_s);
    put64(q + 42, (uint64_t)ref->window_s);
    uint64_t bits;
    memcpy(&bits, &total, sizeof bits);
    put64(q + 50, bits);
    memcpy(q + 58, ref->limit, ref->limit_len);
    q += 58 + ref->limit_len;
    took(w, p, (size_t)(q - p), TG_SNAP_LIMITS);
    return TG_OK;
}

tg_err_t tg_snap_put_approval(tg_snap_writer_t *w, const tg_approval_t *a) {
    if (w == NULL || a == NULL) {
        return TG_ERR_INVALID_ARG;
    }
    tg_buf_t b;
    tg_buf_init(&b, TG_SNAP_APPROVAL_MAX);
    tg_err_t rc = tg_approval_write(&b, a);
    if (rc == TG_OK && (b.len == 0 || b.len > TG_SNAP_APPROVAL_MAX)) {
        rc = TG_ERR_INVALID_ARG;
    }
    if (rc == TG_OK) {
        rc = reserve(w, 5 + b.len);
    }
    if (rc == TG_OK) {
        uint8_t *p = w->buf + w->len;
        p[0] = TAG_APPROVAL;
        put32(p + 1, (uint32_t)b.len);
        memcpy(p + 5, b.data, b.len);
        took(w, p, 5 + b.len, TG_SNAP_APPROVALS);
    }
    tg_buf_free(&b);
    return rc;
}

static void header_encode(uint8_t h[HDR], const tg_snap_info_t *info, const uint64_t *counts,
                          uint64_t body_len) {
    memset(h, 0, HDR);
    memcpy(h, TG_SNAP_MAGIC, 4);
    put32(h + 4, TG_SNAP_VERSION);
    put64(h + 8, info->at.seq);
    put64(h + 16, info->at.pos.offset);
    put32(h + 24, info->at.pos.segment);
    put32(h + 28, info->at.pos.length);
    memcpy(h + 32, info->at.hash, 32);
    put64(h + 64, (uint64_t)info->created_ms);
    put64(h + 72, (uint64_t)info->retention_ms);
    for (int i = 0; i < TG_SNAP_N; i++) {
        put64(h + 80 + (size_t)8 * (size_t)i, counts[i]);
    }
    put64(h + 120, body_len);
}

/* check = BLAKE2b-256(header ‖ BLAKE2b-256(items)): the header is only known at the end, the
 * items stream; both are covered. */
static void check_of(uint8_t out[CHK], const uint8_t h[HDR], const uint8_t body[CHK]) {
    crypto_generichash_state st;
    crypto_generichash_init(&st, NULL, 0, CHK);
    crypto_generichash_update(&st, h, HDR);
    crypto_generichash_update(&st, body, CHK);
    crypto_generichash_final(&st, out, CHK);
}

void tg_snap_seal(uint8_t *b, size_t len) {
    if (b == NULL || len < HDR + CHK) {
        return;
    }
    uint8_t body[CHK];
    crypto_generichash(body, CHK, b + HDR, (unsigned long long)(len - HDR - CHK), NULL, 0);
    check_of(b + len - CHK, b, body);
}

static void snap_name(char out[TG_SNAP_NAME_MAX], uint64_t seq) {
    (void)snprintf(out, TG_SNAP_NAME_MAX, "snapshot-%020llu.tgs", (unsigned long long)seq);
}

/* Older snapshot files beyond TG_SNAP_KEEP go; a failure only leaves one more file. */
static void prune(const char *dir, int dfd) {
    char names[16][TG_SNAP_NAME_MAX];
    size_t n = 0;
    if (tg_snap_list(dir, names, 16, &n) != TG_OK) {
        return;
    }
    for (size_t i = TG_SNAP_KEEP; i < n; i++) {
        (void)unlinkat(dfd, names[i], 0);
    }
}

tg_err_t tg_snap_writer_commit(tg_snap_writer_t *w, const tg_snap_info_t *info, char *name_out,
                               size_t name_cap, tg_diag_t *diag) {
    if (w == NULL || info == NULL || info->at.seq == 0) {
        tg_snap_writer_abort(w);
        return tg_diag_set(diag, TG_ERR_INVALID_ARG, "snapshot: no ledger position");
    }
    uint8_t h[HDR], body[CHK], check[CHK];
    crypto_generichash_final(&w->body, body, CHK);
    header_encode(h, info, w->counts, w->body_len);
    check_of(check, h, body);
    tg_err_t rc = reserve(w, CHK);
    if (rc == TG_OK) {
        memcpy(w->buf + w->len, check, CHK);
        w->len += CHK;
        rc = flush(w);
    }
    if (rc == TG_OK && tg_pwrite_all(w->fd, h, HDR, 0) != TG_OK) {
        rc = TG_ERR_IO;
    }
    char name[TG_SNAP_NAME_MAX];
    snap_name(name, info->at.seq);
    /* durable before its name: a crash never leaves a named file with holes */
    if (rc == TG_OK &&
        (fdatasync(w->fd) != 0 || renameat(w->dfd, TG_SNAP_TMP_NAME, w->dfd, name) != 0 ||
         fsync(w->dfd) != 0)) {
        rc = TG_ERR_IO;
    }
    if (rc) {
        int err = errno;
        tg_snap_writer_abort(w);
        return tg_diag_set(diag, rc, "snapshot %s: cannot write it: %s", name, strerror(err));
    }
    prune(w->dir, w->dfd);
    if (name_out != NULL && name_cap > 0) {
        (void)snprintf(name_out, name_cap, "%s", name);
    }
    close(w->fd);
    close(w->dfd);
    free(w->buf);
    free(w->dir);
    free(w);
    return TG_OK;
}

void tg_snap_writer_abort(tg_snap_writer_t *w) {
    if (w == NULL) {
        return;
    }
    if (w->fd >= 0) {
        close(w->fd);
        (void)unlinkat(w->dfd, TG_SNAP_TMP_NAME, 0);
    }
    if (w->dfd >= 0) {
        close(w->dfd);
    }
    free(w->buf);
    free(w->dir);
    free(w);
}

/* ---- reader ---- */

struct tg_snap {
    uint8_t *data; /* the whole file, mapped read-only (private) */
    size_t len;
};

void tg_snap_free(tg_snap_t *s) {
    if (s != NULL) {
        if (s->data != NULL) {
            munmap(s->data, s->len);
        }
        free(s);
    }
}

typedef struct cursor {
    const uint8_t *p;
    size_t left;
} cursor_t;

static const uint8_t *take(cursor_t *c, size_t n) {
    if (c->left < n) {
        return NULL;
    }
    const uint8_t *p = c->p;
    c->p += n;
    c->left -= n;
    return p;
}

static void get_pos(tg_ledger_pos_t *pos, const uint8_t *p) {
    pos->seq = get64(p);
    pos->offset = get64(p + 8);
    pos->segment = get32(p + 16);
    pos->length = get32(p + 20);
}

/* Decodes the next item; sink NULL = only check it. false: malformed (why set). */
static tg_err_t next_item(cursor_t *c, const tg_snap_sink_t *sink, uint64_t *counts, char *why,
                          size_t why_len) {
    const uint8_t *t = take(c, 1);
    if (t == NULL) {
        return TG_ERR_LEDGER_CORRUPT;
    }
    if (*t >= TAG_KEY && *t <= TAG_RECEIPT) {
        const uint8_t *h = take(c, 11);
        tg_store_item_t it = {.kind = *t == TAG_KEY     ? TG_STORE_ITEM_KEY
                                      : *t == TAG_NONCE ? TG_STORE_ITEM_NONCE
                                                        : TG_STORE_ITEM_RECEIPT};
        if (h == NULL) {
            goto bad;
        }
        it.tenant_len = h[0];
        it.key_len = get16(h + 1);
        it.stamp_ms = (int64_t)get64(h + 3);
        if (it.tenant_len == 0 || it.tenant_len > TG_STORE_TENANT_MAX || it.key_len == 0 ||
            it.key_len > TG_STORE_MAX_KEY_LEN_LIMIT) {
            goto bad;
        }
        if (*t == TAG_KEY) {
            const uint8_t *k = take(c, 34);
            if (k == NULL) {
                goto bad;
            }
            it.status = get16(k);
            it.request_hash = k + 2;
            if (it.status < 100 || it.status > 599) {
                goto bad;
            }
        }
        if (*t != TAG_NONCE) {
            const uint8_t *ps = take(c, 24);
            if (ps == NULL) {
                goto bad;
            }
            get_pos(&it.pos, ps);
        }
        it.tenant = (const char *)take(c, it.tenant_len);
        it.key = (const char *)take(c, it.key_len);
        if (it.tenant == NULL || it.key == NULL) {
            goto bad;
        }
        counts[*t - 1]++;
        return sink != NULL ? sink->item(sink->ud, &it) : TG_OK;
    }
    if (*t == TAG_LIMIT) {
        const uint8_t *h = take(c, 58);
        if (h == NULL) {
            goto bad;
        }
        tg_db_limit_ref_t ref = {.limit_len = get16(h),
                                 .window_start_s = (int64_t)get64(h + 34),
                                 .window_s = (int64_t)get64(h + 42)};
        memcpy(ref.key, h + 2, 32);
        uint64_t bits = get64(h + 50);
        double total;
        memcpy(&total, &bits, sizeof total);
        if (ref.limit_len == 0 || ref.limit_len > TG_DB_LIMIT_NAME_MAX ||
            (ref.limit = (const char *)take(c, ref.limit_len)) == NULL ||
            !(total >= 0.0 && total <= 1e308) || ref.window_s <= 0 ||
            ref.window_s > (int64_t)31 * 86400 || ref.window_start_s < 0) {
            goto bad;
        }
        counts[TG_SNAP_LIMITS]++;
        return sink != NULL ? sink->limit(sink->ud, &ref, total) : TG_OK;
    }
    if (*t == TAG_APPROVAL) {
        const uint8_t *h = take(c, 4);
        size_t n = h != NULL ? get32(h) : 0;
        const uint8_t *doc = n > 0 && n <= TG_SNAP_APPROVAL_MAX ? take(c, n) : NULL;
        if (doc == NULL) {
            goto bad;
        }
        tg_approval_t *a = malloc(sizeof *a);
        if (a == NULL) {
            return TG_ERR_NOMEM;
        }
        tg_err_t rc = tg_approval_parse(a, doc, n);
        if (rc == TG_OK) {
            counts[TG_SNAP_APPROVALS]++;
            rc = sink != NULL ? sink->approval(sink->ud, a) : TG_OK;
        } else if (rc != TG_ERR_NOMEM) {
            snprintf(why, why_len, "an approval item does not parse");
            rc = TG_ERR_LEDGER_CORRUPT;
        }
        free(a);
        return rc;
    }
bad:
    snprintf(why, why_len, "malformed item (tag %u)", (unsigned)*t);
    return TG_ERR_LEDGER_CORRUPT;
}

/* Every item in [HDR, HDR + body_len), to sink (NULL: checked only), counted. */
static tg_err_t walk(const tg_snap_t *s, const tg_snap_sink_t *sink, uint64_t *counts, char *why,
                     size_t why_len) {
    cursor_t c = {s->data + HDR, s->len - HDR - CHK};
    memset(counts, 0, sizeof(uint64_t) * TG_SNAP_N);
    while (c.left > 0) {
        tg_err_t rc = next_item(&c, sink, counts, why, why_len);
        if (rc) {
            return rc;
        }
    }
    return TG_OK;
}

static tg_err_t refuse(char *why, size_t why_len, tg_err_t rc, const char *what) {
    snprintf(why, why_len, "%s", what);
    return rc;
}

tg_err_t tg_snap_read(tg_snap_t **out, tg_snap_info_t *info, const char *path, char *why,
                      size_t why_len) {
    *out = NULL;
    memset(info, 0, sizeof *info);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        return refuse(why, why_len, errno == ENOENT ? TG_ERR_NOT_FOUND : TG_ERR_IO,
                      strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return refuse(why, why_len, TG_ERR_IO, "not a readable regular file");
    }
    if ((uint64_t)st.st_size < HDR + CHK || (uint64_t)st.st_size > TG_SNAP_FILE_MAX) {
        close(fd);
        return refuse(why, why_len, TG_ERR_LEDGER_CORRUPT, "size out of range (truncated?)");
    }
    tg_snap_t *s = calloc(1, sizeof *s);
    if (s == NULL) {
        close(fd);
        return refuse(why, why_len, TG_ERR_NOMEM, "out of memory");
    }
    /* Mapped, not read: the page cache's pages serve the checks and the load directly (a
     * read into a fresh buffer cost a copy and a zeroed page per 4 KiB, a tenth of the
     * start from a 200 MB snapshot). MAP_PRIVATE: nothing writes through it. A file cut
     * short under the mapping is SIGBUS; only the daemon writes these files, by rename. */
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        free(s);
        return refuse(why, why_len, errno == ENOMEM ? TG_ERR_NOMEM : TG_ERR_IO, strerror(errno));
    }
    s->data = m;
    s->len = (size_t)st.st_size;
    tg_err_t rc = TG_OK;
    const uint8_t *h = s->data;
    uint8_t body[CHK], check[CHK];
    if (memcmp(h, TG_SNAP_MAGIC, 4) != 0) {
        rc = refuse(why, why_len, TG_ERR_LEDGER_CORRUPT, "not a snapshot (magic)");
        goto done;
    }
    if (get32(h + 4) != TG_SNAP_VERSION) {
        snprintf(why, why_len, "unknown version %u", (unsigned)get32(h + 4));
        rc = TG_ERR_LEDGER_CORRUPT;
        goto done;
    }
    info->body_len = get64(h + 120);
    if (info->body_len != s->len - HDR - CHK) {
        rc = refuse(why, why_len, TG_ERR_LEDGER_CORRUPT, "length does not match (truncated?)");
        goto done;
    }
    crypto_generichash(body, CHK, s->data + HDR, (unsigned long long)info->body_len, NULL, 0);
    check_of(check, h, body);
    if (sodium_memcmp(check, s->data + s->len - CHK, CHK) != 0) {
        rc = refuse(why, why_len, TG_ERR_LEDGER_CORRUPT, "checksum mismatch (damaged)");
        goto done;
    }
    info->at.seq = get64(h + 8);
    info->at.pos.seq = info->at.seq;
    info->at.pos.offset = get64(h + 16);
    info->at.pos.segment = get32(h + 24);
    info->at.pos.length = get32(h + 28);
    memcpy(info->at.hash, h + 32, 32);
    info->created_ms = (int64_t)get64(h + 64);
    info->retention_ms = (int64_t)get64(h + 72);
    for (int i = 0; i < TG_SNAP_N; i++) {
        info->counts[i] = get64(h + 80 + (size_t)8 * (size_t)i);
    }
    if (info->at.seq == 0 || info->at.pos.segment == 0) {
        rc = refuse(why, why_len, TG_ERR_LEDGER_CORRUPT, "no ledger position");
        goto done;
    }
    uint64_t counted[TG_SNAP_N];
    rc = walk(s, NULL, counted, why, why_len);
    if (rc == TG_OK && memcmp(counted, info->counts, sizeof counted) != 0) {
        rc = refuse(why, why_len, TG_ERR_LEDGER_CORRUPT, "item counts do not match the header");
    }
done:
    if (rc) {
        tg_snap_free(s);
        return rc;
    }
    *out = s;
    return TG_OK;
}

tg_err_t tg_snap_apply(const tg_snap_t *s, const tg_snap_sink_t *sink) {
    if (s == NULL || sink == NULL || sink->item == NULL || sink->limit == NULL ||
        sink->approval == NULL) {
        return TG_ERR_INVALID_ARG;
    }
    uint64_t counts[TG_SNAP_N];
    char why[64];
    return walk(s, sink, counts, why, sizeof why);
}

/* "snapshot-" + exactly 20 digits + ".tgs" */
static bool parse_name(const char *name, uint64_t *seq) {
    if (strlen(name) != 33 || strncmp(name, "snapshot-", 9) != 0 ||
        strcmp(name + 29, ".tgs") != 0) {
        return false;
    }
    uint64_t v = 0;
    for (int i = 9; i < 29; i++) {
        if (name[i] < '0' || name[i] > '9' || v > (UINT64_MAX - 9) / 10) {
            return false;
        }
        v = v * 10 + (uint64_t)(name[i] - '0');
    }
    *seq = v;
    return true;
}

tg_err_t tg_snap_list(const char *dir, char (*names)[TG_SNAP_NAME_MAX], size_t max, size_t *n) {
    *n = 0;
    DIR *d = opendir(dir);
    if (d == NULL) {
        return errno == ENOENT ? TG_OK : TG_ERR_IO;
    }
    uint64_t seqs[64];
    size_t k = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        uint64_t seq;
        if (!parse_name(de->d_name, &seq)) {
            continue;
        }
        /* keep the 64 highest, sorted descending (a handful exist in practice) */
        size_t i = k < 64 ? k++ : 64;
        while (i > 0 && seqs[i - 1] < seq) {
            if (i < 64) {
                seqs[i] = seqs[i - 1];
            }
            i--;
        }
        if (i < 64) {
            seqs[i] = seq;
        }
    }
    closedir(d);
    for (size_t i = 0; i < k && i < max; i++) {
        snap_name(names[i], seqs[i]);
        (*n)++;
    }
    return TG_OK;
}
