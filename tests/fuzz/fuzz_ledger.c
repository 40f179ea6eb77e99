/* fuzz_ledger.c — ledger segment files, raw or built and then tampered with: verify and open
 * never crash, agree with each other, and tampering is never accepted as anything but a
 * shorter ledger.
 *
 * Raw mode (byte 0 not 0xB?): byte 0 bit 0 set = split the rest into two segments at the
 * offset in bytes 1..2 (so chaining across segments is exercised), else one segment.
 *
 * Built mode (byte 0 = 0xB?): a real ledger is written through the public API (record count,
 * types, meta and payload sizes and bytes, segment size from the input), then the input's
 * remaining bytes edit it at record granularity: delete, duplicate, swap or move records
 * between segments, flip a bit, cut a record short (torn write), append zeros or garbage,
 * remove a segment file. Since every record is hash-chained to the one before, whatever
 * open accepts afterwards must be exactly the first k original records (k may be < n: a
 * chain cannot tell a ledger cut at a record boundary from a shorter one).
 *
 * In both modes each ledger is verified as a directory (and, for one segment, as a file),
 * then opened (replay, torn-tail truncation), given one more record when the open succeeds,
 * closed, and verified again: whatever open accepted must verify afterwards.
 *
 * ledger.head (the durable head): raw mode with byte 0 bit 1 set also writes the next 1024
 * input bytes as ledger.head (its parser; such a file is damaged unless the input carries
 * a valid slot), and built mode with byte 0 bit 0 set keeps the head the writer left, so
 * open must then refuse every edit that loses one of the records it recorded.
 */
#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trigguard/canon.h"
#include "trigguard/ledger.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_RECORDS 12  /* built mode: records written */
#define MAX_SEGMENTS 16 /* built mode: segment files handled */
#define MAX_ITEMS 64    /* built mode: pieces in one segment after edits */
#define MAX_SEEN 256    /* records a replay may report before open decides */
#define MAX_BLOB 512    /* built mode: bytes of one edited piece */

static char g_dir[64];

static void put_file(const char *name, const uint8_t *p, size_t n) {
    char path[128];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    FILE *f = fopen(path, "wb");
    if (f == NULL) {
        abort();
    }
    if (n && fwrite(p, 1, n, f) != n) {
        abort();
    }
    fclose(f);
}

/* Reads a whole segment file into a malloc'ed buffer; NULL when it does not exist. */
static uint8_t *get_file(const char *name, size_t *n) {
    char path[128];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        return NULL;
    }
    uint8_t *buf = malloc(64 * 1024);
    if (buf == NULL) {
        abort();
    }
    *n = fread(buf, 1, 64 * 1024, f);
    fclose(f);
    return buf;
}

static void clear_dir(void) {
    DIR *d = opendir(g_dir);
    if (d == NULL) {
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') {
            continue;
        }
        char path[384];
        snprintf(path, sizeof path, "%s/%s", g_dir, e->d_name);
        unlink(path);
    }
    closedir(d);
}

/* The temporary directory goes away with the process (libFuzzer exits through exit()). */
static void remove_dir(void) {
    clear_dir();
    rmdir(g_dir);
}

/* What a replay saw, in order. */
typedef struct seen {
    size_t n;
    bool overflow;
    uint64_t seq[MAX_SEEN];
    uint8_t hash[MAX_SEEN][TG_LEDGER_HASH_SIZE];
    tg_ledger_pos_t pos[MAX_SEEN];
    uint64_t sum;
} seen_t;

static seen_t g_seen, g_orig;

static tg_err_t replay(void *ud, const tg_ledger_record_t *rec) {
    seen_t *s = ud;
    /* touch every byte the callback is given, so ASan sees out-of-bounds pointers */
    for (size_t i = 0; i < rec->meta_len; i++) {
        s->sum += rec->meta[i];
    }
    for (size_t i = 0; i < rec->payload_len; i++) {
        s->sum += rec->payload[i];
    }
    if (s->n == MAX_SEEN) {
        s->overflow = true;
        return TG_OK;
    }
    s->seq[s->n] = rec->seq;
    memcpy(s->hash[s->n], rec->hash, TG_LEDGER_HASH_SIZE);
    s->pos[s->n] = rec->pos;
    s->n++;
    return TG_OK;
}

/* The same, as a verify check callback. */
static tg_err_t collect(void *ud, const tg_ledger_record_t *rec, tg_diag_t *diag) {
    (void)diag;
    return replay(ud, rec);
}

static seen_t g_verified;

/* Verifies and opens what is in g_dir (see the file comment); the open's replay lands in
 * g_seen. Returns the open's result. */
static tg_err_t check_dir(bool single_segment) {
    tg_ledger_verify_report_t rep;
    tg_ledger_verify_opts_t vo = {.check = collect, .check_ud = &g_verified};
    memset(&g_verified, 0, sizeof g_verified);
    tg_err_t vrc = tg_ledger_verify_path(&rep, g_dir, &vo, NULL);
    uint64_t verified = rep.records;
    /* the head check is the directory's: the segment file alone knows nothing of it */
    bool head_verdict = rep.head_found || strstr(rep.fault_file, "ledger.head") != NULL;
    if (single_segment && !head_verdict) {
        char file[128];
        snprintf(file, sizeof file, "%s/ledger-000001.tgl", g_dir);
        if (tg_ledger_verify_path(&rep, file, NULL, NULL) != vrc) {
            abort(); /* segment 1 alone is the whole ledger: same verdict either way */
        }
    }

    tg_ledger_opts_t o = TG_LEDGER_OPTS_INIT;
    o.dir = g_dir;
    o.durability = TG_DURABILITY_NONE;
    o.retry_ms = TG_LEDGER_RETRY_NEVER;
    tg_ledger_t *l = NULL;
    tg_ledger_recovery_t rec;
    memset(&g_seen, 0, sizeof g_seen);
    tg_err_t orc = tg_ledger_open(&l, &o, replay, &g_seen, &rec, NULL);
    /* verify and open agree: clean or torn verifies means open succeeds, and vice versa */
    if ((vrc == TG_OK || vrc == TG_ERR_LEDGER_TORN || vrc == TG_ERR_NOT_FOUND) != (orc == TG_OK)) {
        abort();
    }
    if (orc == TG_OK) {
        /* open replays exactly the records verify counted, numbered from 1 */
        if (g_seen.overflow || g_seen.n != rec.records || rec.last_seq != g_seen.n ||
            (vrc == TG_OK && verified != g_seen.n)) {
            abort();
        }
        for (size_t i = 0; i < g_seen.n; i++) {
            if (g_seen.seq[i] != i + 1) {
                abort();
            }
            /* verify and open saw the same records */
            if (vrc == TG_OK && memcmp(g_seen.hash[i], g_verified.hash[i], 32) != 0) {
                abort();
            }
        }
        tg_ledger_pos_t pos;
        if (tg_ledger_append_sync(l, TG_LEDGER_TYPE_SILENCE, "m", 1, "{}", 2, &pos) != TG_OK ||
            pos.seq != rec.last_seq + 1) {
            abort();
        }
        tg_ledger_close(l);
        if (tg_ledger_verify_path(&rep, g_dir, NULL, NULL) != TG_OK || rep.last_seq != pos.seq) {
            abort();
        }
    }
    return orc;
}

/* ---- built mode ----------------------------------------------------------------------- */

/* A piece of a segment: an original record (index) or edited bytes. */
typedef struct item {
    int record; /* >= 0: original record; -1: blob */
    uint16_t len;
    uint8_t blob[MAX_BLOB];
} item_t;

typedef struct segment {
    bool present;
    size_t n;
    item_t items[MAX_ITEMS];
} segment_t;

static segment_t g_segs[MAX_SEGMENTS];
static uint8_t *g_rec_bytes[MAX_RECORDS];
static size_t g_rec_len[MAX_RECORDS];

/* Bytes of an item. */
static const uint8_t *item_bytes(const item_t *it, size_t *n) {
    if (it->record >= 0) {
        *n = g_rec_len[it->record];
        return g_rec_bytes[it->record];
    }
    *n = it->len;
    return it->blob;
}

/* Turns an item into an editable blob copy (records are at most MAX_BLOB bytes here). */
static void to_blob(item_t *it) {
    if (it->record >= 0) {
        size_t n;
        const uint8_t *p = item_bytes(it, &n);
        memcpy(it->blob, p, n);
        it->len = (uint16_t)n;
        it->record = -1;
    }
}

/* Applies one 4-byte edit. */
static void edit(const uint8_t e[4]) {
    segment_t *s = &g_segs[e[1] % MAX_SEGMENTS];
    size_t k = s->n ? e[2] % s->n : 0;
    switch (e[0] % 9) {
    case 0: /* delete a record */
        if (s->n) {
            memmove(&s->items[k], &s->items[k + 1], (s->n - k - 1) * sizeof s->items[0]);
            s->n--;
        }
        break;
    case 1: /* duplicate a record (a replayed write) */
        if (s->n && s->n < MAX_ITEMS) {
            memmove(&s->items[k + 1], &s->items[k], (s->n - k) * sizeof s->items[0]);
            s->n++;
        }
        break;
    case 2: /* swap two neighbours (reordering) */
        if (k + 1 < s->n) {
            item_t t = s->items[k];
            s->items[k] = s->items[k + 1];
            s->items[k + 1] = t;
        }
        break;
    case 3: { /* move a record to the end of another segment */
        segment_t *d = &g_segs[e[3] % MAX_SEGMENTS];
        if (s->n && d != s && d->present && d->n < MAX_ITEMS) {
            d->items[d->n++] = s->items[k];
            memmove(&s->items[k], &s->items[k + 1], (s->n - k - 1) * sizeof s->items[0]);
            s->n--;
        }
        break;
    }
    case 4: /* flip one bit */
        if (s->n) {
            item_t *it = &s->items[k];
            to_blob(it);
            if (it->len) {
                it->blob[e[3] % it->len] ^= (uint8_t)(1u << (e[3] % 8));
            }
        }
        break;
    case 5: /* cut a record short and drop what follows it (a torn write) */
        if (s->n) {
            item_t *it = &s->items[k];
            to_blob(it);
            it->len = (uint16_t)(it->len ? e[3] % it->len : 0);
            s->n = k + 1;
        }
        break;
    case 6: /* zeros at the end (a file extended without its data) */
    case 7: /* garbage at the end */
        if (s->present && s->n < MAX_ITEMS) {
            item_t *it = &s->items[s->n++];
            it->record = -1;
            it->len = (uint16_t)(e[3] % 128 + 1);
            memset(it->blob, e[0] % 9 == 6 ? 0 : e[2], it->len);
        }
        break;
    default: /* remove a segment file, or bring back an empty one */
        s->present = !s->present;
        s->n = 0;
        break;
    }
}

static void built_mode(const uint8_t *data, size_t size) {
    if (size < 3) {
        return;
    }
    /* 1. write a real ledger */
    tg_ledger_opts_t o = TG_LEDGER_OPTS_INIT;
    o.dir = g_dir;
    o.durability = TG_DURABILITY_NONE;
    o.retry_ms = TG_LEDGER_RETRY_NEVER;
    o.segment_max_bytes = data[1] ? 200 + (uint64_t)data[1] * 8 : 0; /* 0: one segment */
    size_t n = 1 + data[2] % MAX_RECORDS;
    const uint8_t *p = data + 3, *end = data + size;
    tg_ledger_t *l = NULL;
    if (tg_ledger_open(&l, &o, NULL, NULL, NULL, NULL) != TG_OK) {
        abort();
    }
    for (size_t i = 0; i < n; i++) {
        uint8_t spec = p < end ? *p++ : (uint8_t)i;
        size_t meta_len = spec % 32, payload_len = (size_t)(spec >> 5) * 13 + i;
        uint8_t buf[32 + 7 * 13 + MAX_RECORDS];
        for (size_t j = 0; j < meta_len + payload_len; j++) {
            buf[j] = p < end ? *p++ : (uint8_t)j;
        }
        tg_ledger_pos_t pos;
        uint8_t type = (spec & 16) ? TG_LEDGER_TYPE_RECEIPT : TG_LEDGER_TYPE_SILENCE;
        if (tg_ledger_append_sync(l, type, buf, meta_len, buf + meta_len, payload_len, &pos) !=
                TG_OK ||
            pos.seq != i + 1 || pos.length > MAX_BLOB) {
            abort();
        }
    }
    tg_ledger_close(l);

    /* 2. the untouched ledger verifies with every record (a ledger is opened once per
     * phase only: each open starts a writer thread, the bulk of the time per input) */
    tg_ledger_verify_report_t rep;
    tg_ledger_verify_opts_t vo = {.check = collect, .check_ud = &g_orig};
    memset(&g_orig, 0, sizeof g_orig);
    if (tg_ledger_verify_path(&rep, g_dir, &vo, NULL) != TG_OK || g_orig.n != n ||
        rep.records != n) {
        abort();
    }

    /* 3. load it as segments of records */
    memset(g_segs, 0, sizeof g_segs);
    uint8_t *files[MAX_SEGMENTS] = {0};
    size_t file_len[MAX_SEGMENTS] = {0};
    for (uint32_t s = 0; s < MAX_SEGMENTS; s++) {
        char name[32];
        if (tg_ledger_segment_name(name, sizeof name, s + 1) != TG_OK) {
            abort();
        }
        files[s] = get_file(name, &file_len[s]);
        g_segs[s].present = files[s] != NULL;
    }
    for (size_t i = 0; i < n; i++) {
        const tg_ledger_pos_t *ps = &g_orig.pos[i];
        if (ps->segment < 1 || ps->segment > MAX_SEGMENTS || files[ps->segment - 1] == NULL ||
            ps->offset + ps->length > file_len[ps->segment - 1]) {
            abort(); /* the ledger put a record where it says it did not */
        }
        g_rec_bytes[i] = files[ps->segment - 1] + ps->offset;
        g_rec_len[i] = ps->length;
        segment_t *s = &g_segs[ps->segment - 1];
        s->items[s->n].record = (int)i;
        s->n++;
    }

    /* 4. tamper, write back, check */
    size_t edits = 0;
    for (; p + 4 <= end && edits < 8; p += 4, edits++) {
        edit(p);
    }
    bool keep_head = data[0] & 1;
    size_t head_len = 0;
    uint8_t *head = keep_head ? get_file("ledger.head", &head_len) : NULL;
    if (keep_head && (head == NULL || head_len != 1024)) {
        abort(); /* close leaves a two-slot ledger.head */
    }
    clear_dir();
    if (keep_head) {
        put_file("ledger.head", head, head_len);
        free(head);
    }
    for (uint32_t s = 0; s < MAX_SEGMENTS; s++) {
        if (!g_segs[s].present) {
            continue;
        }
        uint8_t out[MAX_ITEMS * MAX_BLOB];
        size_t len = 0;
        for (size_t i = 0; i < g_segs[s].n; i++) {
            size_t m;
            const uint8_t *b = item_bytes(&g_segs[s].items[i], &m);
            memcpy(out + len, b, m);
            len += m;
        }
        char name[32];
        if (tg_ledger_segment_name(name, sizeof name, s + 1) != TG_OK) {
            abort();
        }
        put_file(name, out, len);
    }
    tg_err_t orc = check_dir(false);
    if (edits == 0 && (orc != TG_OK || g_seen.n != n)) {
        abort(); /* the untouched ledger opens and replays every record */
    }
    if (orc == TG_OK) {
        /* accepted: exactly a prefix of the original records */
        size_t k = g_seen.n;
        if (k > n || (keep_head && k != n)) {
            abort(); /* with the head kept, a lost record is never accepted */
        }
        for (size_t i = 0; i < k; i++) {
            if (memcmp(g_seen.hash[i], g_orig.hash[i], TG_LEDGER_HASH_SIZE) != 0) {
                abort();
            }
        }
    }
    for (uint32_t s = 0; s < MAX_SEGMENTS; s++) {
        free(files[s]);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (g_dir[0] == '\0') {
        /* tmpfs when there is one: fsync is free there */
        snprintf(g_dir, sizeof g_dir, "%s/tg_fuzz_ledger_XXXXXX",
                 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
        if (mkdtemp(g_dir) == NULL) {
            abort();
        }
        atexit(remove_dir);
    }
    clear_dir();
    if (size >= 1 && (data[0] & 0xf0) == 0xb0) {
        built_mode(data, size);
        return 0;
    }
    if (size >= 1 && (data[0] & 2)) {
        size_t hl = size - 1 < 1024 ? size - 1 : 1024;
        uint8_t head[1024] = {0};
        memcpy(head, data + 1, hl);
        put_file("ledger.head", head, sizeof head);
    }
    bool split = size >= 3 && (data[0] & 1);
    if (split) {
        size_t cut = ((size_t)data[1] | ((size_t)data[2] << 8));
        const uint8_t *rest = data + 3;
        size_t n = size - 3;
        if (cut > n) {
            cut = n;
        }
        put_file("ledger-000001.tgl", rest, cut);
        put_file("ledger-000002.tgl", rest + cut, n - cut);
    } else {
        put_file("ledger-000001.tgl", size ? data + 1 : data, size ? size - 1 : 0);
    }
    (void)check_dir(!split);
    return 0;
}
