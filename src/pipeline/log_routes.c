/* log_routes.c — the transparency log between HTTP and the db (SPEC §12): the log key, the
 * leaves of replayed records, and the public endpoints (checkpoint, tiles, proofs) plus a
 * receipt's own inclusion proof. The tree, its stored hashes and the checkpoints are the
 * db's (db.h "the transparency log"); the formats are tlog.h's and note.h's. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <sodium.h>

#include "internal.h"
#include "trigguard/log.h"
#include "trigguard/receipt.h"
#include "trigguard/tlog.h"

/* ---- the log key ----------------------------------------------------------------------- */

/* --log-origin, or the default: the authority id when it is a valid key name (it names this
 * authority's log), else "trigguard". */
static tg_err_t log_origin(const tg_config_t *c, const char **origin, tg_diag_t *diag) {
    if (c->log_origin[0] != '\0') {
        if (tg_note_name_check(c->log_origin, strlen(c->log_origin)) != TG_OK) {
            return tg_diag_set(diag, TG_ERR_CONFIG,
                               "--log-origin \"%.300s\" is not a C2SP key name (1 to %d bytes of "
                               "UTF-8 without '+', whitespace or control characters)",
                               c->log_origin, TG_NOTE_NAME_MAX);
        }
        *origin = c->log_origin;
        return TG_OK;
    }
    const char *a = c->authority_id;
    *origin = tg_note_name_check(a, strlen(a)) == TG_OK ? a : "trigguard";
    return TG_OK;
}

tg_err_t tg_pipeline_log_load(tg_pipeline_t *p, tg_diag_t *diag) {
    const tg_config_t *c = &p->cfg;
    tg_pipeline_log_t *lg = &p->log;
    if (c->log_key[0] == '\0') {
        if (c->log_origin[0] != '\0') {
            TG_LOG(TG_LOG_WARN, "log_disabled",
                   "--log-origin is set but --log-key is not: no transparency log");
        }
        return TG_OK;
    }
    if (strstr(c->log_key, "-----BEGIN") != NULL || strchr(c->log_key, '\n') != NULL) {
        /* key text where a file name belongs: never echoed (it is a secret) */
        return tg_diag_set(diag, TG_ERR_CONFIG,
                           "--log-key takes the path of a PEM file, not the key text");
    }
    const char *origin = NULL;
    tg_err_t rc = log_origin(c, &origin, diag);
    if (rc != TG_OK) {
        return rc;
    }
    tg_key_t k;
    memset(&k, 0, sizeof k);
    rc = tg_key_load_file(&k, c->log_key, NULL, diag);
    if (rc == TG_OK && !k.has_secret) {
        rc = tg_diag_set(diag, TG_ERR_KEY_FORMAT,
                         "--log-key %s is a public key: the log needs its private key",
                         tg_config_path_showable(c->log_key) ? c->log_key : "(value)");
    } else if (rc != TG_OK) {
        char why[TG_DIAG_MAX];
        (void)snprintf(why, sizeof why, "%s", diag != NULL ? diag->msg : tg_strerror(rc));
        rc = tg_diag_set(diag, rc, "--log-key: %s", why);
    }
    tg_note_signer_t *s = rc == TG_OK ? calloc(1, sizeof *s) : NULL;
    if (rc == TG_OK && s == NULL) {
        rc = TG_ERR_NOMEM;
    }
    if (rc == TG_OK && origin == NULL) {
        rc = TG_ERR_INTERNAL; /* log_origin sets it on TG_OK; the analyzer cannot see that */
    }
    if (rc == TG_OK) {
        /* libsodium's secret key is seed ‖ public key: the signer takes the seed */
        rc = tg_note_signer_from_seed(s, origin, strlen(origin), k.sk);
        if (rc != TG_OK) {
            rc = tg_diag_set(diag, TG_ERR_CONFIG, "--log-origin: not a valid key name");
        }
    }
    if (rc == TG_OK) {
        lg->pub = s->pub;
        (void)snprintf(lg->key_id, sizeof lg->key_id, "%08" PRIx32, s->pub.key_id);
        rc = tg_note_vkey_format(lg->vkey, sizeof lg->vkey, NULL, &s->pub);
    }
    if (rc == TG_OK) {
        rc = tg_key_from_public(&lg->key, s->pub.pk, lg->key_id);
    }
    tg_key_wipe(&k);
    if (rc != TG_OK) {
        if (s != NULL) {
            tg_note_signer_wipe(s);
            free(s);
        }
        return rc;
    }
    lg->signer = s;
    lg->enabled = true;
    return TG_OK;
}

void tg_pipeline_log_free(tg_pipeline_t *p) {
    if (p->log.signer != NULL) {
        tg_note_signer_wipe(p->log.signer);
        free(p->log.signer);
        p->log.signer = NULL;
    }
}

/* ---- answers shared by the routes ---------------------------------------------------------- */

/* The log's own errors, as every log route answers them. Pending is transient
 * (the integrator signs within --checkpoint-interval), so 503 with Retry-After; inconsistent
 * is not: the stored log is not the one this server's key signed, and serving any of it
 * could hand out proofs against a root nobody can check, so the routes fail closed until an
 * operator repairs it (docs/TLOG.md). */
static const struct {
    tg_err_t err;
    tg_answer_t answer;
    const char *message;
} log_errors[] = {
    {TG_ERR_LOG_DISABLED, TG_ANSWER_LOG_DISABLED,
     "this server keeps no transparency log (it was started without --log-key)"},
    {TG_ERR_LOG_PENDING, TG_ANSWER_LOG_TIMEOUT,
     "the log has not signed a checkpoint yet; retry after Retry-After seconds"},
    {TG_ERR_LOG_INCONSISTENT, TG_ANSWER_LOG_INCONSISTENT,
     "the stored log is not the one this server's log key signed: it serves no checkpoint, "
     "tile or proof until an operator repairs it"},
};

/* The one answer of every log route below for an error of the db's log functions: the table,
 * the unavailability error as itself, anything else 500 internal_error (logged). */
static void reply_log_error(tg_pipeline_t *p, tg_exchange_t *ex, tg_err_t rc, const char *what) {
    for (size_t i = 0; i < sizeof log_errors / sizeof log_errors[0]; i++) {
        if (log_errors[i].err == rc) {
            tg_reply_fail(ex, log_errors[i].answer, log_errors[i].message);
            return;
        }
    }
    if (rc == tg_db_unavailable(p->db)) {
        tg_reply_error(ex, rc, "the log cannot be read now; retry shortly");
    } else {
        TG_LOG(TG_LOG_ERROR, "log_read", "request %s: %s: %s", ex->request_id, what,
               tg_strerror(rc));
        tg_reply_error(ex, TG_ERR_INTERNAL, NULL);
    }
}

/* A query number: decimal digits only, no sign, no leading zero (but "0"), within uint64_t.
 * One spelling per value, like the tile paths'. */
static bool parse_u64(const char *s, uint64_t *out) {
    if (s == NULL || s[0] == '\0' || (s[0] == '0' && s[1] != '\0')) {
        return false;
    }
    uint64_t v = 0;
    for (const char *c = s; *c != '\0'; c++) {
        if (*c < '0' || *c > '9') {
            return false;
        }
        unsigned d = (unsigned)(*c - '0');
        if (v > (UINT64_MAX - d) / 10) {
            return false;
        }
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

/* The parameter `name` as a number: false with the 400 given (absent or malformed). */
static bool query_u64(tg_exchange_t *ex, const char *name, uint64_t *out) {
    if (parse_u64(tg_exchange_query(ex, name), out)) {
        return true;
    }
    char msg[160];
    (void)snprintf(msg, sizeof msg,
                   "query parameter %s is required: a decimal number without sign or leading "
                   "zeros, at most 2^64 - 1",
                   name);
    tg_reply_fail(ex, TG_ANSWER_INVALID_REQUEST, msg);
    return false;
}

/* The published checkpoint (note text appended to note when not NULL), or the error given. */
static bool published(tg_pipeline_t *p, tg_exchange_t *ex, tg_buf_t *note, tg_checkpoint_t *cp) {
    tg_err_t rc = tg_db_log_checkpoint(p->db, note, cp);
    if (rc != TG_OK) {
        reply_log_error(p, ex, rc, "reading the checkpoint");
        return false;
    }
    return true;
}

/* 404 for a tree larger than the published one: the log never signed it (yet). */
static bool within(tg_exchange_t *ex, const char *name, uint64_t size, const tg_checkpoint_t *cp) {
    if (size <= cp->size) {
        return true;
    }
    char msg[160];
    (void)snprintf(msg, sizeof msg,
                   "%s %" PRIu64 " is beyond the published tree (the newest checkpoint has size "
                   "%" PRIu64 ")",
                   name, size, cp->size);
    tg_reply_fail(ex, TG_ANSWER_NOT_FOUND, msg);
    return false;
}

/* ,"<name>":["<base64>",...] */
static tg_err_t put_proof(tg_buf_t *o, const char *name, const tg_tlog_hash_t *proof, size_t n) {
    tg_err_t rc = tg_buf_printf(o, ",\"%s\":[", name);
    for (size_t i = 0; i < n && rc == TG_OK; i++) {
        char b64[sodium_base64_ENCODED_LEN(32, sodium_base64_VARIANT_ORIGINAL)];
        (void)sodium_bin2base64(b64, sizeof b64, proof[i].h, 32, sodium_base64_VARIANT_ORIGINAL);
        rc = tg_buf_printf(o, "%s\"%s\"", i > 0 ? "," : "", b64);
    }
    return rc == TG_OK ? tg_buf_putc(o, ']') : rc;
}

/* ---- GET /v1/log/checkpoint -------------------------------------------------------------- */

void tg_route_log_checkpoint(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest) {
    (void)rest;
    tg_buf_reset(&ex->out);
    if (!published(p, ex, &ex->out, NULL)) {
        return;
    }
    tg_reply_ok(ex, TG_ANSWER_OK);
    ex->content_type_out = "text/plain; charset=utf-8";
    /* tlog-tiles: the checkpoint is mutable, so no caching beyond a few seconds; none at all
     * here, it changes every --checkpoint-interval under load */
    ex->cache_control = "no-store";
}

/* ---- GET /v1/log/tile/<L>/<N>[.p/<W>], /v1/log/tile/entries/<N>[.p/<W>] ------------------- */

void tg_route_log_tile(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest) {
    char path[TG_TLOG_TILE_PATH_MAX + 8];
    size_t n = strlen(rest);
    tg_tlog_tile_t t;
    if (n >= TG_TLOG_TILE_PATH_MAX ||
        snprintf(path, sizeof path, "tile/%s", rest) != (int)(n + 5) ||
        tg_tlog_tile_parse(&t, path, n + 5) != TG_OK) {
        tg_reply_fail(ex, TG_ANSWER_NOT_FOUND,
                      "not a tile path: /v1/log/tile/<L>/<N>[.p/<W>] or "
                      "/v1/log/tile/entries/<N>[.p/<W>] as C2SP tlog-tiles writes them");
        return;
    }
    tg_checkpoint_t cp;
    if (!published(p, ex, NULL, &cp)) {
        return;
    }
    /* A tile exists once the published tree holds it: full, or the level's last, partial one
     * (whose first W hashes any partial tile of width W is, so every narrower one exists) */
    tg_tlog_tile_t have;
    tg_err_t rc = tg_tlog_tile_for_size(&have, t.entries, t.level, t.index, cp.size);
    if (rc != TG_OK || have.width < t.width) {
        char msg[160];
        (void)snprintf(msg, sizeof msg,
                       "no such tile in the published tree (the newest checkpoint has size "
                       "%" PRIu64 ")",
                       cp.size);
        tg_reply_fail(ex, TG_ANSWER_NOT_FOUND, msg);
        return;
    }
    uint8_t(*h)[32] = malloc((size_t)TG_TLOG_TILE_WIDTH * 32);
    if (h == NULL) {
        tg_reply_error(ex, TG_ERR_INTERNAL, NULL);
        return;
    }
    /* the tile's hashes are tree level 8·L, from index N·256 on (tlog.h); tile_for_size
     * found them in the tree, so these products do not overflow */
    uint64_t first = t.index * TG_TLOG_TILE_WIDTH;
    rc = t.entries ? tg_db_log_entries(p->db, first, t.width, h)
                   : tg_db_log_hashes(p->db, t.level * TG_TLOG_TILE_HEIGHT, first, t.width, h);
    tg_buf_reset(&ex->out);
    if (rc == TG_OK) {
        rc = tg_buf_reserve(&ex->out, (size_t)t.width * 34);
    }
    for (unsigned i = 0; rc == TG_OK && i < t.width; i++) {
        /* an entry bundle: each entry a big-endian uint16 length, then its 32 bytes */
        static const uint8_t len32[2] = {0x00, 0x20};
        rc = t.entries ? tg_buf_append(&ex->out, len32, 2) : TG_OK;
        rc = rc ? rc : tg_buf_append(&ex->out, h[i], 32);
    }
    free(h);
    if (rc != TG_OK) {
        reply_log_error(p, ex, rc, "reading a tile");
        return;
    }
    tg_reply_ok(ex, TG_ANSWER_OK);
    ex->content_type_out = "application/octet-stream";
    /* a full tile never changes; a partial one does not either, but it is a transient
     * resource (tlog-tiles lets a log drop it once the full tile exists) */
    ex->cache_control = t.width == TG_TLOG_TILE_WIDTH ? "public, max-age=31536000, immutable"
                                                      : "public, max-age=60";
}

/* ---- GET /v1/log/proof/inclusion?index=I&size=S -------------------------------------------- */

void tg_route_log_inclusion(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest) {
    (void)rest;
    uint64_t index, size;
    tg_checkpoint_t cp;
    if (!query_u64(ex, "index", &index) || !query_u64(ex, "size", &size) ||
        !published(p, ex, NULL, &cp) || !within(ex, "size", size, &cp)) {
        return;
    }
    if (index >= size) {
        tg_reply_fail(ex, TG_ANSWER_INVALID_REQUEST, "index must be less than size");
        return;
    }
    tg_tlog_hash_t proof[TG_TLOG_MAX_PROOF];
    size_t n = 0;
    tg_err_t rc = tg_db_log_inclusion_proof(p->db, index, size, proof, &n);
    if (rc != TG_OK) {
        reply_log_error(p, ex, rc, "an inclusion proof");
        return;
    }
    tg_buf_reset(&ex->out);
    rc = tg_buf_printf(&ex->out, "{\"leafIndex\":%" PRIu64 ",\"treeSize\":%" PRIu64, index, size);
    rc = rc ? rc : put_proof(&ex->out, "inclusionProof", proof, n);
    rc = rc ? rc : tg_buf_putc(&ex->out, '}');
    tg_reply_built(ex, rc, TG_ANSWER_OK);
}

/* ---- GET /v1/log/proof/consistency?old=M&new=N --------------------------------------------- */

void tg_route_log_consistency(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest) {
    (void)rest;
    uint64_t old, size;
    tg_checkpoint_t cp;
    if (!query_u64(ex, "old", &old) || !query_u64(ex, "new", &size) ||
        !published(p, ex, NULL, &cp) || !within(ex, "new", size, &cp)) {
        return;
    }
    if (old == 0 || old > size) {
        /* RFC 9162 §2.1.4: there is no proof from the empty tree */
        tg_reply_fail(ex, TG_ANSWER_INVALID_REQUEST, "old must be at least 1 and at most new");
        return;
    }
    tg_tlog_hash_t proof[TG_TLOG_MAX_PROOF];
    size_t n = 0;
    tg_err_t rc = tg_db_log_consistency_proof(p->db, old, size, proof, &n);
    if (rc != TG_OK) {
        reply_log_error(p, ex, rc, "a consistency proof");
        return;
    }
    tg_buf_reset(&ex->out);
    rc = tg_buf_printf(&ex->out, "{\"oldSize\":%" PRIu64 ",\"newSize\":%" PRIu64, old, size);
    rc = rc ? rc : put_proof(&ex->out, "consistencyProof", proof, n);
    rc = rc ? rc : tg_buf_putc(&ex->out, '}');
    tg_reply_built(ex, rc, TG_ANSWER_OK);
}

/* ---- GET /v1/receipts/{executionId}/proof[?size=S] ------------------------------------------ */

/* 202: the receipt is durable but no published checkpoint covers it yet. */
static void reply_pending(tg_exchange_t *ex, const char *exec_id, size_t len) {
    tg_buf_reset(&ex->out);
    tg_err_t rc = tg_buf_printf(&ex->out,
                                "{\"status\":\"pending\",\"executionId\":\"%.*s\",\"message\":"
                                "\"no signed checkpoint covers this receipt yet; retry after "
                                "Retry-After seconds\"}",
                                (int)len, exec_id);
    tg_reply_built(ex, rc, TG_ANSWER_LOG_PENDING);
    if (rc == TG_OK) {
        ex->retry_after_s = 1;
    }
}

void tg_route_receipt_proof(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest) {
    const char *slash = strchr(rest, '/');
    size_t id_len = slash != NULL ? (size_t)(slash - rest) : strlen(rest);
    tg_ledger_pos_t pos;
    if (!tg_pipeline_find_receipt(p, ex, rest, id_len, &pos)) {
        return; /* 401, 403, 404 (another tenant's receipt too), 503 */
    }
    /* the id is ours now: "exec_" + 32 hex (find_receipt checked it) */
    uint64_t want = 0;
    bool sized = tg_exchange_query(ex, "size") != NULL;
    if (sized && !query_u64(ex, "size", &want)) {
        return;
    }
    uint64_t leaf;
    tg_err_t rc = tg_db_log_leaf(p->db, &pos, &leaf);
    if (rc == TG_ERR_LOG_PENDING) {
        reply_pending(ex, rest, id_len);
        return;
    }
    if (rc != TG_OK) {
        reply_log_error(p, ex, rc, "a receipt's leaf index");
        return;
    }
    tg_buf_t note;
    tg_buf_init(&note, TG_NOTE_MAX_BYTES);
    tg_checkpoint_t cp;
    rc = tg_db_log_checkpoint(p->db, &note, &cp);
    if (rc != TG_OK && rc != TG_ERR_LOG_PENDING) {
        tg_buf_free(&note);
        reply_log_error(p, ex, rc, "reading the checkpoint");
        return;
    }
    /* no checkpoint at all, or one without the leaf: this receipt's answer is the 202 */
    if (rc == TG_ERR_LOG_PENDING || leaf >= cp.size) {
        tg_buf_free(&note);
        reply_pending(ex, rest, id_len);
        return;
    }
    uint64_t size = sized ? want : cp.size;
    if (!within(ex, "size", size, &cp)) {
        tg_buf_free(&note);
        return;
    }
    if (size <= leaf) {
        char msg[128];
        (void)snprintf(msg, sizeof msg,
                       "the receipt is leaf %" PRIu64 ": size must be greater than that", leaf);
        tg_buf_free(&note);
        tg_reply_fail(ex, TG_ANSWER_INVALID_REQUEST, msg);
        return;
    }
    tg_tlog_hash_t proof[TG_TLOG_MAX_PROOF];
    size_t n = 0;
    rc = tg_db_log_inclusion_proof(p->db, leaf, size, proof, &n);
    if (rc != TG_OK) {
        tg_buf_free(&note);
        reply_log_error(p, ex, rc, "a receipt's inclusion proof");
        return;
    }
    tg_buf_reset(&ex->out);
    rc = tg_buf_puts(&ex->out, "{\"logOrigin\":");
    rc = rc ? rc : tg_canon_string(&ex->out, cp.origin, cp.origin_len);
    rc = rc ? rc
            : tg_buf_printf(&ex->out, ",\"leafIndex\":%" PRIu64 ",\"treeSize\":%" PRIu64, leaf,
                            size);
    rc = rc ? rc : put_proof(&ex->out, "inclusionProof", proof, n);
    /* the signed checkpoint of that size: the newest one; for an older size the caller
     * holds its own (the log keeps only the newest note) */
    if (rc == TG_OK && size == cp.size) {
        rc = tg_buf_puts(&ex->out, ",\"checkpoint\":");
        rc = rc ? rc : tg_canon_string(&ex->out, note.data, note.len);
    }
    rc = rc ? rc : tg_buf_putc(&ex->out, '}');
    tg_buf_free(&note);
    tg_reply_built(ex, rc, TG_ANSWER_OK);
}
