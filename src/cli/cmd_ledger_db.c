/* cmd_ledger_db.c — `trigguard ledger verify --database-url URL`: the checks of the directory
 * verify, on the records stored in PostgreSQL schema v1 (docs/POSTGRES.md).
 *
 * Every instance's chain is read in (instance_id, chain_seq) order by keyset pagination, a
 * page of TG_VERIFY_PAGE rows at a time, so memory does not grow with the table. Each row
 * must take the next place of its chain (chain_seq 1, 2, 3 ... without a gap), carry the
 * previous row's record_hash as its prev_hash (32 zero bytes at chain_seq 1, the file
 * ledger's start value), and have the record_hash the file ledger would compute for its
 * fields; then the directory form's per-record check runs (signatures with --keys). A
 * deleted row leaves a gap, an altered one a hash that no longer matches, and reordered
 * rows a prev_hash that points elsewhere. Deleting a chain's tail is not detectable from
 * the table alone (docs/POSTGRES.md). Then every idempotency claim and receipt index row
 * must point at a record of its own tenant, and every chain end at its head. Last, the
 * transparency log (schema v5) is recomputed from the records: leaves 0..size-1 in
 * log_index order without a gap, each its record's entry, every stored hash the tree
 * completes equal to its row (no row beyond), the root the checkpoint's. */
#include <inttypes.h>
#include <libpq-fe.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "trigguard/ledger.h"
#include "trigguard/note.h"
#include "trigguard/pg_schema.h"
#include "trigguard/record.h"
#include "trigguard/tlog.h"

/* Rows per page: large enough that round trips do not dominate, small enough that one page
 * (at most 64 KiB + 1 KiB per row) stays a few tens of MiB. */
#define TG_VERIFY_PAGE "256"

typedef struct {
    char instance[256]; /* the chain being read ("" before the first row) */
    uint64_t chain_seq; /* its last place seen */
    uint8_t head[TG_LEDGER_HASH_SIZE];
    uint64_t chains, records, receipts, silences, redemptions;
    /* the first fault */
    bool fault;
    char fault_instance[256];
    uint64_t fault_seq;
    char what[TG_DIAG_MAX];
} tg_dbv_t;

static uint64_t be_u64(const char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) {
        v = (v << 8) | (uint8_t)p[i];
    }
    return v;
}

/* Records the first fault at (instance, seq). */
static void dbv_fault(tg_dbv_t *v, const char *instance, uint64_t seq, const char *what) {
    v->fault = true;
    snprintf(v->fault_instance, sizeof v->fault_instance, "%s", instance);
    v->fault_seq = seq;
    snprintf(v->what, sizeof v->what, "%s", what);
}

/* A query with text parameters and binary results (bytea and bigint arrive as their bytes,
 * nothing to unescape); NULL on failure, with the reason in diag. */
static PGresult *dbv_query(PGconn *conn, const char *sql, int n, const char *const *vals,
                           tg_diag_t *diag) {
    tg_pg_param_t p[TG_PG_MAX_PARAMS];
    for (int i = 0; i < n && i < TG_PG_MAX_PARAMS; i++) {
        p[i] = (tg_pg_param_t){vals[i], TG_PG_TEXT};
    }
    PGresult *res = NULL;
    return tg_pg_exec(conn, sql, p, n, true, &res, diag) == TG_OK ? res : NULL;
}

/* Checks one row (columns as in dbv_chains' query); false when it is the first fault. */
static bool dbv_row(tg_dbv_t *v, PGresult *res, int r, tg_ledger_check_fn check, void *ud) {
    int ilen = PQgetlength(res, r, 0);
    const char *inst = PQgetvalue(res, r, 0);
    char name[256];
    snprintf(name, sizeof name, "%.*s", ilen, inst);
    uint64_t seq = PQgetlength(res, r, 1) == 8 ? be_u64(PQgetvalue(res, r, 1)) : 0;
    char what[TG_DIAG_MAX];
    if (strcmp(name, v->instance) != 0) {
        snprintf(v->instance, sizeof v->instance, "%s", name);
        v->chain_seq = 0;
        memset(v->head, 0, sizeof v->head);
        v->chains++;
    }
    if (seq != v->chain_seq + 1) {
        snprintf(what, sizeof what,
                 "chain_seq %" PRIu64 " follows %" PRIu64 ": record %" PRIu64
                 " is missing (deleted?)",
                 seq, v->chain_seq, v->chain_seq + 1);
        dbv_fault(v, name, v->chain_seq + 1, what);
        return false;
    }
    tg_ledger_record_t rec;
    memset(&rec, 0, sizeof rec);
    rec.seq = seq;
    /* smallint arrives big-endian; a high byte other than 0 is no type (0 is rejected below),
     * never the low byte alone, which the hash would cover as a valid type */
    const char *ty = PQgetvalue(res, r, 2);
    rec.type = PQgetlength(res, r, 2) == 2 && ty[0] == 0 ? (uint8_t)ty[1] : 0;
    rec.meta = (const uint8_t *)PQgetvalue(res, r, 3);
    rec.meta_len = (size_t)PQgetlength(res, r, 3);
    rec.payload = (const uint8_t *)PQgetvalue(res, r, 4);
    rec.payload_len = (size_t)PQgetlength(res, r, 4);
    if (PQgetlength(res, r, 5) != TG_LEDGER_HASH_SIZE ||
        PQgetlength(res, r, 6) != TG_LEDGER_HASH_SIZE) {
        dbv_fault(v, name, seq, "prev_hash or record_hash is not 32 bytes");
        return false;
    }
    memcpy(rec.prev_hash, PQgetvalue(res, r, 5), TG_LEDGER_HASH_SIZE);
    memcpy(rec.hash, PQgetvalue(res, r, 6), TG_LEDGER_HASH_SIZE);
    if (rec.type != TG_LEDGER_TYPE_RECEIPT && rec.type != TG_LEDGER_TYPE_SILENCE &&
        rec.type != TG_LEDGER_TYPE_REDEMPTION && rec.type != TG_LEDGER_TYPE_APPROVAL) {
        dbv_fault(v, name, seq, "unknown record type");
        return false;
    }
    if (memcmp(rec.prev_hash, v->head, sizeof v->head) != 0) {
        dbv_fault(v, name, seq,
                  seq == 1 ? "prev_hash of the chain's first record is not the start value"
                           : "prev_hash differs from the previous record's record_hash "
                             "(altered or reordered)");
        return false;
    }
    if (!tg_ledger_hash_matches(rec.type, seq, rec.prev_hash, rec.meta, rec.meta_len, rec.payload,
                                rec.payload_len, rec.hash)) {
        dbv_fault(v, name, seq, "record hash mismatch (record altered)");
        return false;
    }
    /* the tenant column is outside the hash: it must be the one the hashed meta names, or
     * an edit of it would move a record to another tenant unseen */
    tg_record_view_t rv;
    if (tg_record_view(&rv, rec.meta, rec.meta_len, rec.payload, rec.payload_len) != TG_OK) {
        dbv_fault(v, name, seq, "not a record this server writes (meta or payload)");
        return false;
    }
    bool same_tenant = rv.meta.tenant.ptr != NULL &&
                       rv.meta.tenant.len == (size_t)PQgetlength(res, r, 7) &&
                       memcmp(rv.meta.tenant.ptr, PQgetvalue(res, r, 7), rv.meta.tenant.len) == 0;
    tg_record_view_free(&rv);
    if (!same_tenant) {
        dbv_fault(v, name, seq, "tenant column differs from the record's own tenant (altered)");
        return false;
    }
    tg_diag_t d = {{0}};
    if (check != NULL && check(ud, &rec, &d) != TG_OK) {
        dbv_fault(v, name, seq, d.msg);
        return false;
    }
    memcpy(v->head, rec.hash, sizeof v->head);
    v->chain_seq = seq;
    v->records++;
    if (rec.type == TG_LEDGER_TYPE_RECEIPT) {
        v->receipts++;
    } else if (rec.type == TG_LEDGER_TYPE_REDEMPTION) {
        v->redemptions++;
    } else if (rec.type == TG_LEDGER_TYPE_SILENCE) {
        v->silences++;
    } /* approval records: counted by the approval audit (cmd_ledger.c) */
    return true;
}

/* Reads every chain page by page; TG_OK also when a fault was found (v->fault). */
static tg_err_t dbv_chains(tg_dbv_t *v, PGconn *conn, tg_ledger_check_fn check, void *ud,
                           tg_diag_t *diag) {
    char after[24];
    for (;;) {
        snprintf(after, sizeof after, "%" PRIu64, v->chain_seq);
        const char *vals[] = {v->instance, after};
        PGresult *res = dbv_query(
            conn,
            "SELECT instance_id, chain_seq, type, meta, payload, prev_hash, record_hash, tenant"
            " FROM tg_records WHERE (instance_id, chain_seq) > ($1, $2::bigint)"
            " ORDER BY instance_id, chain_seq LIMIT " TG_VERIFY_PAGE,
            2, vals, diag);
        if (res == NULL) {
            return TG_ERR_IO;
        }
        int n = PQntuples(res);
        for (int r = 0; r < n && !v->fault; r++) {
            (void)dbv_row(v, res, r, check, ud);
        }
        PQclear(res);
        if (v->fault || n == 0) {
            return TG_OK;
        }
    }
}

/* The first claim or receipt index row whose record is missing or another tenant's. */
static tg_err_t dbv_refs(tg_dbv_t *v, PGconn *conn, tg_diag_t *diag) {
    static const char *const sql[] = {
        "SELECT c.tenant, c.idem_key, c.record_seq::text, r.seq IS NULL FROM tg_idem_claims c"
        " LEFT JOIN tg_records r ON r.seq = c.record_seq WHERE c.record_seq IS NOT NULL"
        " AND (r.seq IS NULL OR r.tenant <> c.tenant) LIMIT 1",
        "SELECT x.tenant, x.execution_id, x.record_seq::text, r.seq IS NULL FROM tg_receipts x"
        " LEFT JOIN tg_records r ON r.seq = x.record_seq WHERE r.seq IS NULL"
        " OR r.tenant <> x.tenant LIMIT 1",
    };
    static const char *const what[] = {"tg_idem_claims", "tg_receipts"};
    /* A record holds at most one receipt: two index rows on one record (no unique index
     * keeps them apart since schema v2) are a fault. */
    PGresult *dup = dbv_query(conn,
                              "SELECT record_seq::text FROM tg_receipts GROUP BY record_seq"
                              " HAVING count(*) > 1 LIMIT 1",
                              0, NULL, diag);
    if (dup == NULL) {
        return TG_ERR_IO;
    }
    if (PQntuples(dup) == 1) {
        char msg[TG_DIAG_MAX];
        snprintf(msg, sizeof msg, "two tg_receipts rows point at record seq %.20s",
                 PQgetvalue(dup, 0, 0));
        dbv_fault(v, "tg_receipts", 0, msg);
    }
    PQclear(dup);
    for (size_t i = 0; i < 2 && !v->fault; i++) {
        PGresult *res = dbv_query(conn, sql[i], 0, NULL, diag);
        if (res == NULL) {
            return TG_ERR_IO;
        }
        if (PQntuples(res) == 1) {
            char msg[TG_DIAG_MAX];
            snprintf(msg, sizeof msg, "%s row (tenant %.64s, %.64s) points at record seq %.20s: %s",
                     what[i], PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 1), PQgetvalue(res, 0, 2),
                     PQgetvalue(res, 0, 3)[0] ? "no such record" : "another tenant's record");
            dbv_fault(v, what[i], 0, msg);
        }
        PQclear(res);
        if (v->fault) {
            break;
        }
    }
    return TG_OK;
}

/* Each chain's end against its head in tg_chains (written with its records, by serve and
 * by db import): a deleted tail leaves a head past the last record, a replaced last record
 * a head hash that differs, and a chain without a head row is one nobody wrote. */
static tg_err_t dbv_heads(tg_dbv_t *v, PGconn *conn, tg_diag_t *diag) {
    PGresult *res = dbv_query(
        conn,
        "SELECT h.instance_id, h.head_seq::text, coalesce(m.last, 0)::text FROM tg_chains h"
        " LEFT JOIN (SELECT instance_id, max(chain_seq) AS last FROM tg_records"
        "  GROUP BY instance_id) m USING (instance_id)"
        " LEFT JOIN tg_records r ON r.instance_id = h.instance_id AND r.chain_seq = h.head_seq"
        " WHERE coalesce(m.last, 0) <> h.head_seq"
        "  OR (h.head_seq > 0 AND r.record_hash IS DISTINCT FROM h.head_hash)"
        " ORDER BY h.instance_id LIMIT 1",
        0, NULL, diag);
    if (res == NULL) {
        return TG_ERR_IO;
    }
    if (PQntuples(res) == 1) {
        char msg[TG_DIAG_MAX];
        unsigned long long head = strtoull(PQgetvalue(res, 0, 1), NULL, 10);
        unsigned long long last = strtoull(PQgetvalue(res, 0, 2), NULL, 10);
        snprintf(msg, sizeof msg,
                 head > last   ? "the chain's head in tg_chains is chain_seq %llu but its records "
                                 "end at %llu: records were deleted from its end"
                 : head < last ? "the chain's head in tg_chains is chain_seq %llu but its records "
                                 "go on to %llu: records were added behind its writer's back"
                               : "the chain's head hash in tg_chains (chain_seq %llu of %llu) is "
                                 "not its last record's: that record was replaced",
                 head, last);
        char inst[256];
        snprintf(inst, sizeof inst, "%.200s", PQgetvalue(res, 0, 0));
        dbv_fault(v, inst, head > last ? last + 1 : head, msg);
    }
    PQclear(res);
    if (v->fault) {
        return TG_OK;
    }
    res = dbv_query(conn,
                    "SELECT DISTINCT r.instance_id FROM tg_records r"
                    " LEFT JOIN tg_chains h USING (instance_id) WHERE h.instance_id IS NULL"
                    " ORDER BY 1 LIMIT 1",
                    0, NULL, diag);
    if (res == NULL) {
        return TG_ERR_IO;
    }
    if (PQntuples(res) == 1) {
        char inst[256];
        snprintf(inst, sizeof inst, "%.200s", PQgetvalue(res, 0, 0));
        dbv_fault(v, inst, 1,
                  "records of a chain without a head row in tg_chains (deleted, or written by "
                  "something other than trigguard)");
    }
    PQclear(res);
    return TG_OK;
}

/* ---- the transparency log (schema v5, SPEC §12) ------------------------------------------ */

/* What the log check found, for the summary. */
typedef struct {
    bool signed_cp; /* tg_log_state holds a checkpoint */
    uint64_t size;  /* its size (0 without one) */
    char origin[TG_CHECKPOINT_ORIGIN_MAX + 1];
    uint64_t hashes; /* stored hashes checked */
} tg_dbv_log_t;

/* One page of a level's stored hashes, read as the recomputed tree reaches them. */
typedef struct {
    PGresult *page;
    int row;
} tg_dbv_level_t;

typedef struct {
    tg_dbv_t *v;
    tg_dbv_log_t *log;
    PGconn *conn;
    tg_diag_t *diag;
    tg_err_t io; /* a query failed (not a fault) */
    tg_dbv_level_t levels[64];
} tg_dbv_tree_t;

/* tg_tlog_range_append's store callback: every hash the recomputation completes must be the
 * one stored at (level, index); the rows of a level are read 256 at a time, in index order,
 * as the appends complete them. */
static tg_err_t dbv_stored(void *ctx, unsigned level, uint64_t index, const tg_tlog_hash_t *hash) {
    tg_dbv_tree_t *t = ctx;
    tg_dbv_level_t *l = &t->levels[level];
    if (l->page == NULL || l->row >= PQntuples(l->page)) {
        PQclear(l->page);
        char lv[8], from[24];
        snprintf(lv, sizeof lv, "%u", level);
        snprintf(from, sizeof from, "%" PRIu64, index);
        const char *vals[] = {lv, from};
        l->page = dbv_query(t->conn,
                            "SELECT idx, hash FROM tg_log_hashes WHERE level = $1::smallint"
                            " AND idx >= $2::bigint ORDER BY idx LIMIT " TG_VERIFY_PAGE,
                            2, vals, t->diag);
        l->row = 0;
        if (l->page == NULL) {
            t->io = TG_ERR_IO;
            return TG_ERR_IO;
        }
    }
    int r = l->row;
    bool found = r < PQntuples(l->page) && PQgetlength(l->page, r, 0) == 8 &&
                 be_u64(PQgetvalue(l->page, r, 0)) == index;
    if (!found || PQgetlength(l->page, r, 1) != 32 ||
        memcmp(PQgetvalue(l->page, r, 1), hash->h, 32) != 0) {
        char msg[TG_DIAG_MAX];
        snprintf(msg, sizeof msg,
                 "the stored hash at level %u, index %" PRIu64 " is %s (tg_log_hashes)", level,
                 index, found ? "not the hash of its subtree" : "missing");
        dbv_fault(t->v, "transparency log", index << level, msg);
        return TG_ERR_LEDGER_CORRUPT;
    }
    if (found) {
        l->row++;
    }
    t->log->hashes++;
    return TG_OK;
}

/* Leaves 0, 1, 2, ... in log_index order without a gap, each holding its record's entry
 * (stored, or derived for rows older than v5), recomputed into the tree, every stored hash
 * compared on the way; then the root and size against the checkpoint, and no stored hash
 * beyond the tree. */
static tg_err_t dbv_log(tg_dbv_t *v, tg_dbv_log_t *log, PGconn *conn, tg_diag_t *diag) {
    PGresult *st =
        dbv_query(conn, "SELECT size, root, note, origin FROM tg_log_state", 0, NULL, diag);
    if (st == NULL) {
        return TG_ERR_IO;
    }
    if (PQntuples(st) != 1) {
        PQclear(st);
        dbv_fault(v, "transparency log", 0, "tg_log_state does not have exactly one row");
        return TG_OK;
    }
    uint64_t size = PQgetlength(st, 0, 0) == 8 ? be_u64(PQgetvalue(st, 0, 0)) : 0;
    log->signed_cp = !PQgetisnull(st, 0, 2);
    log->size = size;
    tg_checkpoint_t cp;
    bool cp_ok = !log->signed_cp;
    if (log->signed_cp) {
        /* the note's text ends at its last blank line (note.h): the checkpoint body */
        const char *note = PQgetvalue(st, 0, 2);
        size_t len = (size_t)PQgetlength(st, 0, 2);
        size_t text_len = 0;
        for (size_t i = 0; i + 1 < len; i++) {
            if (note[i] == '\n' && note[i + 1] == '\n') {
                text_len = i + 1;
            }
        }
        cp_ok = text_len > 0 && tg_checkpoint_parse(&cp, note, text_len) == TG_OK &&
                cp.size == size && PQgetlength(st, 0, 1) == 32 &&
                memcmp(cp.root, PQgetvalue(st, 0, 1), 32) == 0 &&
                (size_t)PQgetlength(st, 0, 3) == cp.origin_len &&
                memcmp(PQgetvalue(st, 0, 3), cp.origin, cp.origin_len) == 0;
        if (cp_ok) {
            snprintf(log->origin, sizeof log->origin, "%s", cp.origin);
        }
    }
    PQclear(st);
    if (!cp_ok) {
        dbv_fault(v, "transparency log", size,
                  "tg_log_state's note is not a checkpoint of its size, root and origin");
        return TG_OK;
    }
    tg_dbv_tree_t t = {.v = v, .log = log, .conn = conn, .diag = diag};
    tg_tlog_range_t range;
    tg_tlog_range_init(&range);
    uint64_t next = 0;
    bool more = true;
    while (more && !v->fault && t.io == TG_OK) {
        char from[24];
        snprintf(from, sizeof from, "%" PRIu64, next);
        const char *vals[] = {from};
        PGresult *res = dbv_query(conn,
                                  "SELECT log_index, log_entry, type, payload, seq FROM tg_records"
                                  " WHERE log_index >= $1::bigint ORDER BY log_index"
                                  " LIMIT " TG_VERIFY_PAGE,
                                  1, vals, diag);
        if (res == NULL) {
            t.io = TG_ERR_IO;
            break;
        }
        int n = PQntuples(res);
        more = n > 0;
        for (int r = 0; r < n && !v->fault && t.io == TG_OK; r++) {
            uint64_t idx = be_u64(PQgetvalue(res, r, 0));
            uint64_t seq = be_u64(PQgetvalue(res, r, 4));
            char msg[TG_DIAG_MAX];
            if (idx != next) {
                snprintf(msg, sizeof msg,
                         "no record has log_index %" PRIu64 " (the next assigned is %" PRIu64 ")",
                         next, idx);
                dbv_fault(v, "transparency log", next, msg);
                break;
            }
            const char *ty = PQgetvalue(res, r, 2);
            uint8_t type = PQgetlength(res, r, 2) == 2 && ty[0] == 0 ? (uint8_t)ty[1] : 0;
            uint8_t entry[32];
            bool derived = tg_record_log_entry(entry, type, PQgetvalue(res, r, 3),
                                               (size_t)PQgetlength(res, r, 3), NULL) == TG_OK;
            bool stored = !PQgetisnull(res, r, 1);
            if (!derived || (stored && (PQgetlength(res, r, 1) != 32 ||
                                        memcmp(PQgetvalue(res, r, 1), entry, 32) != 0))) {
                snprintf(msg, sizeof msg, "record seq %" PRIu64 ": %s", seq,
                         derived ? "its log_entry is not the record's entry (receiptHash, or "
                                   "the payload's SHA-256)"
                                 : "no log entry can be derived from it");
                dbv_fault(v, "transparency log", idx, msg);
                break;
            }
            tg_tlog_hash_t leaf;
            tg_tlog_leaf_hash(&leaf, entry, sizeof entry);
            if (tg_tlog_range_append(&range, &leaf, dbv_stored, &t) != TG_OK) {
                break; /* dbv_stored recorded why */
            }
            next++;
        }
        PQclear(res);
    }
    for (size_t i = 0; i < 64; i++) {
        PQclear(t.levels[i].page);
    }
    if (t.io != TG_OK) {
        return t.io;
    }
    if (v->fault) {
        return TG_OK;
    }
    tg_tlog_hash_t root;
    tg_tlog_range_root(&range, &root);
    char msg[TG_DIAG_MAX];
    if (next != size) {
        snprintf(msg, sizeof msg,
                 "records have leaves 0..%" PRIu64 " but the checkpoint covers %" PRIu64, next,
                 size);
        dbv_fault(v, "transparency log", next < size ? next : size, msg);
        return TG_OK;
    }
    if (log->signed_cp && memcmp(root.h, cp.root, 32) != 0) {
        dbv_fault(v, "transparency log", size,
                  "the checkpoint's root is not the root of the records' entries");
        return TG_OK;
    }
    /* every stored hash of the tree was found and matched; more rows are hashes of no tree */
    PGresult *cnt = dbv_query(conn, "SELECT count(*)::text FROM tg_log_hashes", 0, NULL, diag);
    if (cnt == NULL) {
        return TG_ERR_IO;
    }
    unsigned long long rows = strtoull(PQgetvalue(cnt, 0, 0), NULL, 10);
    PQclear(cnt);
    if (rows != log->hashes) {
        snprintf(msg, sizeof msg,
                 "tg_log_hashes holds %llu rows, the tree of %" PRIu64 " leaves %" PRIu64, rows,
                 size, log->hashes);
        dbv_fault(v, "transparency log", size, msg);
    }
    return TG_OK;
}

int tg_ledger_verify_db(const char *url, tg_ledger_check_fn check, void *ud,
                        const uint64_t *signatures) {
    tg_dbv_t v;
    memset(&v, 0, sizeof v);
    tg_dbv_log_t log;
    memset(&log, 0, sizeof log);
    tg_diag_t diag = {{0}};
    PGconn *conn = NULL;
    int version = 0;
    tg_err_t rc = tg_pg_connect(url, &conn, &diag);
    if (rc == TG_OK) {
        rc = tg_pg_conn_version(conn, &version, &diag);
    }
    if (rc == TG_OK && version != TG_PG_SCHEMA_VERSION) {
        rc = tg_diag_set(&diag, TG_ERR_SCHEMA_VERSION,
                         "the database has schema version %d; this binary verifies %d", version,
                         TG_PG_SCHEMA_VERSION);
    }
    /* one snapshot for all the reads: rows committed meanwhile do not look like faults */
    PGresult *begin =
        rc == TG_OK ? PQexec(conn, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY") : NULL;
    if (rc == TG_OK && PQresultStatus(begin) != PGRES_COMMAND_OK) {
        rc = tg_diag_set(&diag, TG_ERR_IO, "%.200s", PQerrorMessage(conn));
    }
    PQclear(begin);
    if (rc == TG_OK) {
        rc = dbv_chains(&v, conn, check, ud, &diag);
    }
    if (rc == TG_OK && !v.fault) {
        rc = dbv_refs(&v, conn, &diag);
    }
    if (rc == TG_OK && !v.fault) {
        rc = dbv_heads(&v, conn, &diag);
    }
    if (rc == TG_OK && !v.fault) {
        rc = dbv_log(&v, &log, conn, &diag);
    }
    PQfinish(conn);
    if (rc) {
        /* nothing was checked: the database itself is unusable */
        fprintf(stderr, "trigguard ledger verify: %s\n", diag.msg[0] ? diag.msg : tg_strerror(rc));
        return TG_EXIT_USAGE;
    }
    if (v.fault) {
        printf("ledger FAULT: %s\n", tg_strerror(TG_ERR_LEDGER_CORRUPT));
        printf("  instance:  %s\n", v.fault_instance);
        printf("  chain_seq: %" PRIu64 "\n", v.fault_seq);
        printf("  what:      %s\n", v.what);
        printf("valid before the fault: %" PRIu64 " records in %" PRIu64 " chains\n", v.records,
               v.chains);
        return TG_EXIT_FAIL;
    }
    printf("ledger OK: database\n");
    printf("  chains:     %" PRIu64 "\n", v.chains);
    printf("  records:    %" PRIu64 " (%" PRIu64 " receipts, %" PRIu64 " silence", v.records,
           v.receipts, v.silences);
    if (v.redemptions > 0) {
        printf(", %" PRIu64 " redemptions", v.redemptions);
    }
    printf(")\n");
    if (signatures != NULL) {
        printf("  signatures: %" PRIu64 " verified\n", *signatures);
    } else {
        printf("  signatures: not checked (give --keys keys.json)\n");
    }
    printf("  references: every claim and receipt index row points at its tenant's record\n");
    if (log.signed_cp) {
        printf("  log:        checkpoint of %" PRIu64 " leaves (origin %s): leaves 0..%" PRIu64
               " hold their records' entries, %" PRIu64
               " stored hashes and the root recomputed (its signature is not checked here)\n",
               log.size, log.origin, log.size > 0 ? log.size - 1 : 0, log.hashes);
    } else {
        printf("  log:        no checkpoint signed yet, no leaf assigned\n");
    }
    return TG_EXIT_OK;
}
