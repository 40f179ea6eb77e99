/* cmd_log_audit.c — `trigguard log audit URL|DIR`: an auditor of the transparency log (SPEC
 * §12). It recomputes every root from the log's own data (the tiles and entry bundles a
 * daemon serves, or the records of a ledger directory), checks the signed checkpoint against
 * it, and checks every checkpoint it saw before (a state file) against the same data: a log
 * that rewrote, forked or rolled back its history fails. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>
#include <sodium.h>

#include "cli.h"
#include "trigguard/canon.h"
#include "trigguard/db.h"
#include "trigguard/ledger.h"
#include "trigguard/note.h"
#include "trigguard/tlog.h"

#define DEFAULT_KEEP 64
#define STATE_MAX ((size_t)4 * 1024 * 1024)
#define HTTP_TIMEOUT_MS 30000L

static void log_usage(FILE *out) {
    fprintf(out,
            "usage: trigguard log audit URL|DIR [--state FILE] [--keep N]\n"
            "                           [--log-key VKEY | --keys keys.json]...\n"
            "\n"
            "Audits a transparency log (SPEC section 12) from its own data:\n"
            "  URL  a daemon's base URL (http://host:port): GET /v1/log/checkpoint, then every\n"
            "       entry bundle and hash tile of that tree (/v1/log/tile/...): each leaf hash is\n"
            "       SHA-256(0x00 || entry), each stored hash of every tile level is recomputed\n"
            "       from the leaves, and the root from them must be the checkpoint's.\n"
            "  DIR  a ledger directory: the records (checked as `ledger verify` checks their\n"
            "       structure and chain) give the entries (a receipt's receiptHash recomputed\n"
            "       from its fields, else the SHA-256 of the payload); the stored checkpoint\n"
            "       (DIR/tlog/checkpoint) must be signed by the log key, cover no more records\n"
            "       than there are, and have the root the records give at its size.\n"
            "The checkpoint's signature is checked with --log-key (a vkey, or a file holding\n"
            "one) or the \"use\": \"checkpoint\" entry of --keys; without either, the state\n"
            "file's key, else (URL) the daemon's keys.json (trusted on first use; the state\n"
            "file then pins it).\n"
            "--state FILE keeps every checkpoint seen (the newest --keep N by size, default %d,\n"
            "at most %d) and the log key; each run checks them all against the data: one of the\n"
            "same size must have the same root, an older one must be a prefix (its root the\n"
            "data's root at its size; for a URL the log's consistency proof must verify too),\n"
            "and none may be newer than the log now (a rollback). FILE is written (atomically)\n"
            "only after a run without a fault; a missing FILE starts one.\n"
            "\n"
            "Prints \"log audit OK: ...\" or one \"log FAULT: ...\" line per fault.\n"
            "exit status: 0 OK, 1 fault (a root, a checkpoint or an entry that does not hold),\n"
            "2 unusable input (unreachable URL, an HTTP error, no log key, a bad state file,\n"
            "usage error)\n",
            DEFAULT_KEEP, TG_CLI_LOG_KEEP_MAX);
}

/* ---- HTTP (libcurl) ---------------------------------------------------------------------- */

typedef struct http {
    CURL *h;
    const char *base; /* without a trailing '/' */
    size_t base_len;
    tg_buf_t body;
    size_t max;
    bool over;
} http_t;

static size_t on_body(char *p, size_t size, size_t n, void *ud) {
    http_t *c = ud;
    size_t len = size * n;
    if (c->body.len + len > c->max || tg_buf_append(&c->body, p, len) != TG_OK) {
        c->over = true;
        return 0; /* aborts the transfer */
    }
    return len;
}

/* GET base+path into c->body (at most max bytes): TG_OK on a 200; else TG_ERR_IO with why. */
static tg_err_t http_get(http_t *c, const char *path, size_t max, char *why, size_t cap) {
    char url[4096];
    long status = 0;
    int n = snprintf(url, sizeof url, "%.*s%s", (int)c->base_len, c->base, path);
    if (n < 0 || (size_t)n >= sizeof url) {
        (void)snprintf(why, cap, "URL too long");
        return TG_ERR_IO;
    }
    tg_buf_reset(&c->body);
    c->max = max;
    c->over = false;
    if (curl_easy_setopt(c->h, CURLOPT_URL, url) != CURLE_OK) {
        (void)snprintf(why, cap, "%.400s: not a usable URL", url);
        return TG_ERR_IO;
    }
    CURLcode cc = curl_easy_perform(c->h);
    (void)curl_easy_getinfo(c->h, CURLINFO_RESPONSE_CODE, &status);
    if (c->over) {
        (void)snprintf(why, cap, "%.400s: answer larger than %zu bytes", url, max);
        return TG_ERR_IO;
    }
    if (cc != CURLE_OK) {
        (void)snprintf(why, cap, "%.400s: %s", url, curl_easy_strerror(cc));
        return TG_ERR_IO;
    }
    if (status != 200) {
        (void)snprintf(why, cap, "%.400s: HTTP %ld", url, status);
        return TG_ERR_IO;
    }
    return TG_OK;
}

static bool http_init(http_t *c, const char *base) {
    memset(c, 0, sizeof *c);
    tg_buf_init(&c->body, 16384);
    c->base = base;
    c->base_len = strlen(base);
    while (c->base_len > 0 && base[c->base_len - 1] == '/') {
        c->base_len--;
    }
    c->h = curl_easy_init();
    return c->h != NULL &&
           curl_easy_setopt(c->h, CURLOPT_PROTOCOLS_STR, "https,http") == CURLE_OK &&
           curl_easy_setopt(c->h, CURLOPT_FOLLOWLOCATION, 0L) == CURLE_OK &&
           curl_easy_setopt(c->h, CURLOPT_NOSIGNAL, 1L) == CURLE_OK &&
           curl_easy_setopt(c->h, CURLOPT_TIMEOUT_MS, HTTP_TIMEOUT_MS) == CURLE_OK &&
           curl_easy_setopt(c->h, CURLOPT_USERAGENT, "trigguard-log-audit") == CURLE_OK &&
           curl_easy_setopt(c->h, CURLOPT_WRITEFUNCTION, on_body) == CURLE_OK &&
           curl_easy_setopt(c->h, CURLOPT_WRITEDATA, c) == CURLE_OK;
}

static void http_free(http_t *c) {
    if (c->h != NULL) {
        curl_easy_cleanup(c->h);
    }
    tg_buf_free(&c->body);
}

/* ---- the audit's state ------------------------------------------------------------------ */

typedef struct seen {
    char *note; /* the signed note, as served */
    tg_checkpoint_t cp;
} seen_t;

typedef struct audit {
    tg_keyring_t ring;
    char vkey[TG_NOTE_VKEY_MAX]; /* the key that verified, for the state file */
    seen_t *seen;
    size_t n_seen;
    size_t keep;
    char *cur_note; /* the log's checkpoint now */
    tg_checkpoint_t cur;
    uint64_t faults;
} audit_t;

static void fault(audit_t *a, const char *fmt, ...) TG_PRINTF(2, 3);
static void fault(audit_t *a, const char *fmt, ...) {
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    /* A fault line longer than the buffer is cut, never dropped. */
    printf("log FAULT: %s%s\n", n < 0 ? "(unprintable)" : line, n >= (int)sizeof line ? "..." : "");
    a->faults++;
}

/* Verifies a note with the ring's log keys (and, once one is chosen, that one's origin). */
static tg_err_t check_note(audit_t *a, const char *note, size_t n, tg_checkpoint_t *cp,
                           tg_diag_t *diag) {
    const tg_note_verifier_t *k = NULL;
    tg_err_t rc = tg_cli_checkpoint(&a->ring, note, n, cp, &k, diag);
    if (rc == TG_OK && a->vkey[0] == '\0') {
        rc = tg_note_vkey_format(a->vkey, sizeof a->vkey, NULL, k);
    }
    return rc;
}

/* Reads the state file (a missing one is an empty state): {"origin","vkey","checkpoints"}.
 * Its vkey pins the log key when no key was given. Returns TG_EXIT_OK or TG_EXIT_USAGE. */
static int load_state(audit_t *a, const char *path) {
    if (access(path, F_OK) != 0 && errno == ENOENT) {
        return TG_EXIT_OK;
    }
    size_t len = 0;
    char *text = tg_cli_read_file(path, STATE_MAX, &len);
    json_t *doc = NULL;
    tg_diag_t d = {{0}};
    int status = TG_EXIT_USAGE;
    if (text == NULL) {
        return TG_EXIT_USAGE;
    }
    tg_json_limits_t lim = {STATE_MAX, 4, TG_NOTE_MAX_BYTES, 16};
    if (tg_json_parse(&doc, text, len, &lim, &d) != TG_OK || !json_is_object(doc)) {
        fprintf(stderr, "trigguard log audit: --state %s: not a state file: %s\n", path, d.msg);
        goto done;
    }
    const json_t *vk = json_object_get(doc, "vkey");
    const json_t *cps = json_object_get(doc, "checkpoints");
    if (!json_is_string(vk) || !json_is_array(cps) || json_array_size(cps) > TG_CLI_LOG_KEEP_MAX) {
        fprintf(stderr,
                "trigguard log audit: --state %s: not a state file ({\"origin\", \"vkey\", "
                "\"checkpoints\": [at most %d notes]})\n",
                path, TG_CLI_LOG_KEEP_MAX);
        goto done;
    }
    if (a->ring.log_count == 0 &&
        !tg_cli_add_log_key(&a->ring, json_string_value(vk), "log audit")) {
        goto done;
    }
    a->seen = calloc(json_array_size(cps) + 1, sizeof *a->seen);
    if (a->seen == NULL) {
        fprintf(stderr, "trigguard log audit: out of memory\n");
        goto done;
    }
    for (size_t i = 0; i < json_array_size(cps); i++) {
        const json_t *s = json_array_get(cps, i);
        seen_t *e = &a->seen[a->n_seen];
        if (!json_is_string(s) ||
            check_note(a, json_string_value(s), json_string_length(s), &e->cp, &d) != TG_OK) {
            fprintf(stderr,
                    "trigguard log audit: --state %s: checkpoint %zu is not signed by the log "
                    "key: %s\n",
                    path, i, json_is_string(s) ? d.msg : "not a string");
            goto done;
        }
        e->note = strdup(json_string_value(s));
        if (e->note == NULL) {
            fprintf(stderr, "trigguard log audit: out of memory\n");
            goto done;
        }
        a->n_seen++;
    }
    status = TG_EXIT_OK;
done:
    json_decref(doc);
    free(text);
    return status;
}

static int seen_cmp(const void *x, const void *y) {
    const seen_t *a = x, *b = y;
    return a->cp.size < b->cp.size ? 1 : a->cp.size > b->cp.size ? -1 : 0; /* newest first */
}

/* Writes the state (the checkpoints seen and now, newest --keep by size) atomically. */
static int save_state(audit_t *a, const char *path) {
    json_t *doc = json_object(), *cps = json_array();
    char tmp[4096];
    int status = TG_EXIT_USAGE;
    bool dup = false;
    for (size_t i = 0; i < a->n_seen; i++) {
        dup = dup || a->seen[i].cp.size == a->cur.size;
    }
    if (!dup) {
        a->seen[a->n_seen].note = a->cur_note;
        a->seen[a->n_seen].cp = a->cur;
        a->n_seen++;
        a->cur_note = NULL; /* owned by seen now */
    }
    qsort(a->seen, a->n_seen, sizeof *a->seen, seen_cmp);
    for (size_t i = 0; cps != NULL && i < a->n_seen && i < a->keep; i++) {
        if (json_array_append_new(cps, json_string(a->seen[i].note)) != 0) {
            json_decref(cps);
            cps = NULL;
        }
    }
    if (doc == NULL || cps == NULL ||
        json_object_set_new(doc, "origin", json_string(a->cur.origin)) != 0 ||
        json_object_set_new(doc, "vkey", json_string(a->vkey)) != 0 ||
        json_object_set_new(doc, "checkpoints", cps) != 0) {
        fprintf(stderr, "trigguard log audit: out of memory\n");
        json_decref(doc);
        return TG_EXIT_USAGE;
    }
    char *text = json_dumps(doc, JSON_INDENT(1));
    int n = snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = text != NULL && n > 0 && (size_t)n < sizeof tmp
                 ? open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)
                 : -1;
    size_t len = text != NULL ? strlen(text) : 0;
    if (fd < 0 || write(fd, text, len) != (ssize_t)len || write(fd, "\n", 1) != 1 ||
        fsync(fd) != 0 || close(fd) != 0 || rename(tmp, path) != 0) {
        fprintf(stderr, "trigguard log audit: --state %s: cannot write: %s\n", path,
                strerror(errno));
        if (fd >= 0) {
            (void)unlink(tmp);
        }
    } else {
        status = TG_EXIT_OK;
    }
    free(text);
    json_decref(doc);
    return status;
}

/* Every checkpoint seen against the log now and the roots the data gave (walk). */
static void check_seen(audit_t *a, tg_cli_logwalk_t *w, http_t *c) {
    tg_tlog_hash_t now_root, root;
    memcpy(now_root.h, a->cur.root, 32);
    for (size_t i = 0; i < a->n_seen; i++) {
        const tg_checkpoint_t *s = &a->seen[i].cp;
        if (strcmp(s->origin, a->cur.origin) != 0) {
            fault(a, "a checkpoint seen before is of log %s, the log now is %s", s->origin,
                  a->cur.origin);
            continue;
        }
        if (s->size > a->cur.size) {
            fault(a,
                  "the log's checkpoint (size %llu) is older than one seen before (size %llu): "
                  "rolled back",
                  (unsigned long long)a->cur.size, (unsigned long long)s->size);
            continue;
        }
        if (s->size == a->cur.size) {
            if (memcmp(s->root, a->cur.root, 32) != 0) {
                fault(a, "two checkpoints of size %llu with different roots: the log forked",
                      (unsigned long long)s->size);
            }
            continue;
        }
        if (!tg_cli_logwalk_root(w, s->size, &root) || memcmp(root.h, s->root, 32) != 0) {
            fault(a,
                  "the checkpoint of size %llu seen before is not a prefix of the log now: its "
                  "data gives another root at that size",
                  (unsigned long long)s->size);
            continue;
        }
        if (c != NULL && s->size > 0) {
            /* the log's own consistency proof must hold too (what other auditors rely on) */
            char path[128], why[512];
            tg_tlog_hash_t proof[TG_TLOG_MAX_PROOF], old;
            uint64_t m = 0, n = 0;
            size_t plen = 0;
            tg_diag_t d = {{0}};
            (void)snprintf(path, sizeof path, "/v1/log/proof/consistency?old=%llu&new=%llu",
                           (unsigned long long)s->size, (unsigned long long)a->cur.size);
            memcpy(old.h, s->root, 32);
            if (http_get(c, path, 65536, why, sizeof why) != TG_OK) {
                fault(a, "no consistency proof from size %llu: %s", (unsigned long long)s->size,
                      why);
            } else if (tg_cli_consistency((const char *)c->body.data, c->body.len, &m, &n, proof,
                                          &plen, &d) != TG_OK ||
                       m != s->size || n != a->cur.size ||
                       tg_tlog_verify_consistency(m, n, proof, plen, &old, &now_root) != TG_OK) {
                fault(a, "the log's consistency proof from size %llu to %llu does not verify",
                      (unsigned long long)s->size, (unsigned long long)a->cur.size);
            }
        }
    }
}

/* ---- URL: tiles and entry bundles -------------------------------------------------------- */

/* The recomputed stored hashes of the tile levels above 0 (tree levels 8, 16, ...). */
typedef struct levels {
    tg_tlog_hash_t *h[TG_TLOG_TILE_MAX_LEVEL + 1];
    uint64_t n[TG_TLOG_TILE_MAX_LEVEL + 1], cap[TG_TLOG_TILE_MAX_LEVEL + 1];
} levels_t;

static tg_err_t keep_level(void *ctx, unsigned level, uint64_t index, const tg_tlog_hash_t *hash) {
    levels_t *lv = ctx;
    unsigned t = level / TG_TLOG_TILE_HEIGHT;
    if (level == 0 || level % TG_TLOG_TILE_HEIGHT != 0) {
        return TG_OK;
    }
    if (index != lv->n[t]) {
        return TG_ERR_INTERNAL; /* stored hashes of a level complete in order */
    }
    if (lv->n[t] == lv->cap[t]) {
        uint64_t nc = lv->cap[t] ? lv->cap[t] * 2 : 256;
        tg_tlog_hash_t *p = realloc(lv->h[t], (size_t)nc * sizeof *p);
        if (p == NULL) {
            return TG_ERR_NOMEM;
        }
        lv->h[t] = p;
        lv->cap[t] = nc;
    }
    lv->h[t][lv->n[t]++] = *hash;
    return TG_OK;
}

/* Fetches the tile t; its body must be exactly width entries of `each` bytes. */
static int fetch_tile(audit_t *a, http_t *c, const tg_tlog_tile_t *t, size_t each) {
    char path[TG_TLOG_TILE_PATH_MAX + 16], tp[TG_TLOG_TILE_PATH_MAX], why[512];
    if (tg_tlog_tile_path(tp, NULL, t) != TG_OK) {
        return TG_EXIT_USAGE;
    }
    (void)snprintf(path, sizeof path, "/v1/log/%s", tp);
    if (http_get(c, path, (size_t)TG_TLOG_TILE_WIDTH * 34, why, sizeof why) != TG_OK) {
        fprintf(stderr, "trigguard log audit: %s\n", why);
        return TG_EXIT_USAGE;
    }
    if (c->body.len != (size_t)t->width * each) {
        fault(a, "%s is %zu bytes, not %u entries of %zu", tp, c->body.len, t->width, each);
        return TG_EXIT_FAIL;
    }
    return TG_EXIT_OK;
}

static int audit_url(audit_t *a, const char *url, tg_cli_logwalk_t *w) {
    http_t c;
    levels_t lv;
    char why[512];
    tg_diag_t d = {{0}};
    int status = TG_EXIT_USAGE;
    memset(&lv, 0, sizeof lv);
    if (!http_init(&c, url)) {
        fprintf(stderr, "trigguard log audit: cannot start libcurl\n");
        goto done;
    }
    if (a->ring.log_count == 0) {
        /* trust on first use: the state file pins it from now on */
        if (http_get(&c, "/.well-known/trigguard/keys.json", (size_t)1024 * 1024, why,
                     sizeof why) != TG_OK) {
            fprintf(stderr, "trigguard log audit: %s\n", why);
            goto done;
        }
        if (tg_keyring_load_keys_json(&a->ring, (const char *)c.body.data, c.body.len, &d) !=
                TG_OK ||
            a->ring.log_count == 0) {
            fprintf(stderr, "trigguard log audit: %s/.well-known/trigguard/keys.json: %s\n", url,
                    d.msg[0] ? d.msg : "no \"use\": \"checkpoint\" key (is the log on?)");
            goto done;
        }
    }
    if (http_get(&c, "/v1/log/checkpoint", TG_NOTE_MAX_BYTES, why, sizeof why) != TG_OK) {
        fprintf(stderr, "trigguard log audit: %s\n", why);
        goto done;
    }
    a->cur_note = strndup((const char *)c.body.data, c.body.len);
    if (a->cur_note == NULL) {
        goto done;
    }
    if (check_note(a, a->cur_note, c.body.len, &a->cur, &d) != TG_OK) {
        fault(a, "the log's checkpoint: %s", d.msg);
        status = TG_EXIT_FAIL;
        goto done;
    }
    for (size_t i = 0; i < a->n_seen; i++) {
        (void)tg_cli_logwalk_want(w, a->seen[i].cp.size);
    }
    (void)tg_cli_logwalk_want(w, a->cur.size);
    uint64_t size = a->cur.size;
    /* level 0: entry bundles give the leaves; the hash tiles must hold their hashes */
    for (uint64_t idx = 0; idx * TG_TLOG_TILE_WIDTH < size; idx++) {
        tg_tlog_tile_t et, ht;
        tg_tlog_hash_t leaves[TG_TLOG_TILE_WIDTH];
        if (tg_tlog_tile_for_size(&et, true, 0, idx, size) != TG_OK ||
            tg_tlog_tile_for_size(&ht, false, 0, idx, size) != TG_OK) {
            goto done;
        }
        int st = fetch_tile(a, &c, &et, 34);
        if (st != TG_EXIT_OK) {
            status = st;
            goto done;
        }
        for (unsigned i = 0; i < et.width; i++) {
            const uint8_t *e = (const uint8_t *)c.body.data + (size_t)i * 34;
            const uint64_t k = idx * TG_TLOG_TILE_WIDTH + i;
            if (e[0] != 0 || e[1] != 32) {
                fault(a, "entry %llu is not 32 bytes long", (unsigned long long)k);
                status = TG_EXIT_FAIL;
                goto done;
            }
            tg_tlog_leaf_hash(&leaves[i], e + 2, 32);
        }
        st = fetch_tile(a, &c, &ht, 32);
        if (st != TG_EXIT_OK) {
            status = st;
            goto done;
        }
        for (unsigned i = 0; i < ht.width; i++) {
            const uint64_t k = idx * TG_TLOG_TILE_WIDTH + i;
            if (memcmp(c.body.data + (size_t)i * 32, leaves[i].h, 32) != 0) {
                fault(a, "leaf hash %llu in tile/0 is not SHA-256(0x00 || its entry)",
                      (unsigned long long)k);
            }
            if (tg_cli_logwalk_leaf(w, &leaves[i], keep_level, &lv) != TG_OK) {
                fprintf(stderr, "trigguard log audit: out of memory\n");
                goto done;
            }
        }
    }
    /* the higher tile levels: each stored hash recomputed from the leaves */
    for (unsigned L = 1; L <= TG_TLOG_TILE_MAX_LEVEL; L++) {
        tg_tlog_tile_t t;
        for (uint64_t idx = 0; tg_tlog_tile_for_size(&t, false, L, idx, size) == TG_OK; idx++) {
            int st = fetch_tile(a, &c, &t, 32);
            if (st != TG_EXIT_OK) {
                status = st;
                goto done;
            }
            for (unsigned i = 0; i < t.width; i++) {
                uint64_t k = idx * TG_TLOG_TILE_WIDTH + i;
                if (k >= lv.n[L] || memcmp(c.body.data + (size_t)i * 32, lv.h[L][k].h, 32) != 0) {
                    fault(a, "stored hash %llu of tile level %u is not the one its leaves give",
                          (unsigned long long)k, L);
                }
            }
        }
    }
    tg_tlog_hash_t root;
    if (!tg_cli_logwalk_root(w, size, &root) || memcmp(root.h, a->cur.root, 32) != 0) {
        fault(a, "the root of the %llu leaves the tiles hold is not the checkpoint's",
              (unsigned long long)size);
    }
    check_seen(a, w, &c);
    status = a->faults ? TG_EXIT_FAIL : TG_EXIT_OK;
done:
    for (unsigned L = 0; L <= TG_TLOG_TILE_MAX_LEVEL; L++) {
        free(lv.h[L]);
    }
    http_free(&c);
    return a->faults && status == TG_EXIT_USAGE ? TG_EXIT_FAIL : status;
}

/* ---- DIR: a ledger directory ------------------------------------------------------------- */

static tg_err_t walk_record(void *ud, const tg_ledger_record_t *rec, tg_diag_t *diag) {
    return tg_cli_logwalk_record(ud, rec, diag);
}

static int audit_dir(audit_t *a, const char *dir, tg_cli_logwalk_t *w, uint64_t *records) {
    char note[TG_NOTE_MAX_BYTES];
    size_t len = 0;
    bool found = false;
    tg_diag_t d = {{0}};
    tg_err_t rc = tg_db_log_stored_checkpoint(dir, note, sizeof note, &len, &found, &d);
    if (rc == TG_ERR_LOG_INCONSISTENT) {
        fault(a, "%s", d.msg);
        return TG_EXIT_FAIL;
    }
    if (rc != TG_OK) {
        fprintf(stderr, "trigguard log audit: %s\n", d.msg);
        return TG_EXIT_USAGE;
    }
    if (!found) {
        fprintf(stderr,
                "trigguard log audit: %s has no stored checkpoint (tlog/checkpoint): was the "
                "daemon run with --log-key?\n",
                dir);
        return TG_EXIT_USAGE;
    }
    if (a->ring.log_count == 0) {
        fprintf(stderr, "trigguard log audit: a ledger directory's checkpoint needs the log key "
                        "(--log-key VKEY, or --keys keys.json)\n");
        return TG_EXIT_USAGE;
    }
    a->cur_note = strndup(note, len);
    if (a->cur_note == NULL) {
        return TG_EXIT_USAGE;
    }
    if (check_note(a, a->cur_note, len, &a->cur, &d) != TG_OK) {
        fault(a, "the stored checkpoint: %s", d.msg);
        return TG_EXIT_FAIL;
    }
    for (size_t i = 0; i < a->n_seen; i++) {
        (void)tg_cli_logwalk_want(w, a->seen[i].cp.size);
    }
    (void)tg_cli_logwalk_want(w, a->cur.size);
    tg_ledger_verify_opts_t vo = {.check = walk_record, .check_ud = w};
    tg_ledger_verify_report_t rep;
    rc = tg_ledger_verify_path(&rep, dir, &vo, &d);
    *records = rep.records;
    if (rc == TG_ERR_LEDGER_TORN) {
        rc = TG_OK; /* a torn tail was never durable, so never in a checkpoint */
    }
    if (rc != TG_OK && rep.fault_file[0] == '\0') {
        fprintf(stderr, "trigguard log audit: %s\n", d.msg[0] ? d.msg : tg_strerror(rc));
        return TG_EXIT_USAGE;
    }
    if (rc != TG_OK) {
        fault(a, "the ledger: %s seq %llu: %s", rep.fault_file, (unsigned long long)rep.fault_seq,
              rep.fault_what);
        return TG_EXIT_FAIL;
    }
    tg_tlog_hash_t root;
    if (a->cur.size > rep.records) {
        fault(a,
              "the stored checkpoint covers %llu records, the ledger holds %llu: records signed "
              "into the log are gone",
              (unsigned long long)a->cur.size, (unsigned long long)rep.records);
    } else if (!tg_cli_logwalk_root(w, a->cur.size, &root) ||
               memcmp(root.h, a->cur.root, 32) != 0) {
        fault(a,
              "the records do not reproduce the stored checkpoint: their root at size %llu is "
              "another (records altered, reordered or replaced)",
              (unsigned long long)a->cur.size);
    }
    check_seen(a, w, NULL);
    return a->faults ? TG_EXIT_FAIL : TG_EXIT_OK;
}

static int log_audit(int argc, char **argv) {
    const char *target = NULL, *state = NULL;
    audit_t a;
    tg_cli_logwalk_t *w = tg_cli_logwalk_new();
    int status = TG_EXIT_USAGE;
    memset(&a, 0, sizeof a);
    tg_keyring_init(&a.ring);
    a.keep = DEFAULT_KEEP;
    if (w == NULL) {
        fprintf(stderr, "trigguard log audit: out of memory\n");
        return TG_EXIT_USAGE;
    }
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        if (strcmp(s, "--help") == 0 || strcmp(s, "-h") == 0) {
            log_usage(stdout);
            status = TG_EXIT_OK;
            goto done;
        } else if (strcmp(s, "--log-key") == 0 && i + 1 < argc) {
            if (!tg_cli_add_log_key(&a.ring, argv[++i], "log audit")) {
                goto done;
            }
        } else if (strcmp(s, "--keys") == 0 && i + 1 < argc) {
            if (!tg_cli_add_keys(&a.ring, argv[++i], true, "log audit")) {
                goto done;
            }
        } else if (strcmp(s, "--state") == 0 && i + 1 < argc) {
            state = argv[++i];
        } else if (strcmp(s, "--keep") == 0 && i + 1 < argc) {
            char *end = NULL;
            long v = strtol(argv[++i], &end, 10);
            if (end == argv[i] || *end != '\0' || v < 1 || v > TG_CLI_LOG_KEEP_MAX) {
                fprintf(stderr, "trigguard log audit: --keep wants 1..%d\n", TG_CLI_LOG_KEEP_MAX);
                goto done;
            }
            a.keep = (size_t)v;
        } else if (s[0] != '-' && target == NULL) {
            target = s;
        } else {
            fprintf(stderr, "trigguard log audit: unexpected argument '%s'\n\n", s);
            log_usage(stderr);
            goto done;
        }
    }
    if (target == NULL) {
        fprintf(stderr, "trigguard log audit: URL or DIR is required\n\n");
        log_usage(stderr);
        goto done;
    }
    if (state != NULL && load_state(&a, state) != TG_EXIT_OK) {
        goto done;
    }
    if (a.seen == NULL && (a.seen = calloc(1, sizeof *a.seen)) == NULL) {
        goto done;
    }
    bool url = strncmp(target, "http://", 7) == 0 || strncmp(target, "https://", 8) == 0;
    uint64_t records = 0;
    status = url ? audit_url(&a, target, w) : audit_dir(&a, target, w, &records);
    if (status == TG_EXIT_OK) {
        char root[64];
        tg_tlog_hash_t r;
        memcpy(r.h, a.cur.root, 32);
        (void)sodium_bin2base64(root, sizeof root, r.h, 32, sodium_base64_VARIANT_ORIGINAL);
        printf("log audit OK: %s size %llu root %s", a.cur.origin, (unsigned long long)a.cur.size,
               root);
        if (!url) {
            printf(" (%llu records in the ledger)", (unsigned long long)records);
        }
        printf("; %zu checkpoints seen before, all consistent\n", a.n_seen);
        if (state != NULL) {
            status = save_state(&a, state);
        }
    } else if (status == TG_EXIT_FAIL) {
        printf("log audit FAILED: %llu faults\n", (unsigned long long)a.faults);
    }
done:
    for (size_t i = 0; a.seen != NULL && i < a.n_seen; i++) {
        free(a.seen[i].note);
    }
    free(a.seen);
    free(a.cur_note);
    free(w);
    tg_keyring_wipe(&a.ring);
    return status;
}

int tg_cmd_log(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "audit") == 0) {
        return log_audit(argc - 1, argv + 1);
    }
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        log_usage(stdout);
        return TG_EXIT_OK;
    }
    fprintf(stderr, "trigguard log: unknown subcommand%s%s\n\n", argc >= 2 ? " " : "",
            argc >= 2 ? argv[1] : "");
    log_usage(stderr);
    return TG_EXIT_USAGE;
}
