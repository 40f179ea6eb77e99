/* cmd_db_import.c — `trigguard db import DIR`: a file ledger moved into the PostgreSQL
 * schema (docs/POSTGRES.md, "Importing a file ledger").
 *
 * One pass, one transaction: tg_ledger_verify_path reads the directory offline (no lock, so
 * it also works while no daemon runs, and never holds more than one record), and its
 * per-record check inserts that record. A fault anywhere in the ledger makes the verify fail
 * after some inserts, so the transaction is rolled back and nothing is written: all or
 * nothing without reading the ledger twice. Every statement takes its values as parameters;
 * every insert is ON CONFLICT DO NOTHING, so a second run writes nothing. */
#include <inttypes.h>
#include <libpq-fe.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "trigguard/clock.h"
#include "trigguard/ledger.h"
#include "trigguard/pg_schema.h"
#include "trigguard/record.h"

/* serve's --retention default (SPEC §9): keys and nonces older than this are not live. */
#define TG_IMPORT_RETENTION_DEFAULT 86400

typedef struct {
    PGconn *conn;
    char instance[64]; /* "import:" + 16 hex of the first record's hash */
    int64_t now_ms;
    int64_t retention_ms;
    uint64_t records, present, keys, nonces, receipts;
} tg_import_t;

static tg_pg_param_t p_text(tg_text_t t) { return (tg_pg_param_t){t.ptr, t.len}; }
static tg_pg_param_t p_bytes(const void *b, size_t n) {
    return (tg_pg_param_t){(const char *)b, n};
}
static tg_pg_param_t p_num(const char *s) { return (tg_pg_param_t){s, TG_PG_TEXT}; }

/* The record's seq in tg_records: its new row, or the row a previous run inserted (which
 * must be this very record: same hash, else the database holds another ledger under this
 * instance id and the import refuses to mix them). */
static tg_err_t imp_record(tg_import_t *im, const tg_ledger_record_t *rec,
                           const tg_record_view_t *v, char *seq_out, size_t seq_cap,
                           tg_diag_t *diag) {
    char chain_seq[24], type[8], at[24];
    snprintf(chain_seq, sizeof chain_seq, "%" PRIu64, rec->seq);
    snprintf(type, sizeof type, "%u", (unsigned)rec->type);
    snprintf(at, sizeof at, "%" PRId64, v->meta.at_ms);
    /* its transparency-log entry, by the one rule (record.h), as the daemon stores it with
     * the record: an integrator reads it, never the payload */
    uint8_t entry[32];
    tg_err_t rc =
        tg_record_log_entry(entry, rec->type, rec->payload, rec->payload_len, v->payload_doc);
    if (rc != TG_OK) {
        return tg_diag_set(diag, rc, "record %" PRIu64 ": no transparency-log entry", rec->seq);
    }
    const tg_pg_param_t ins[] = {
        p_bytes(im->instance, strlen(im->instance)),
        p_num(chain_seq),
        p_text(v->meta.tenant),
        p_num(type),
        p_bytes(rec->meta, rec->meta_len),
        p_bytes(rec->payload, rec->payload_len),
        p_bytes(rec->prev_hash, sizeof rec->prev_hash),
        p_bytes(rec->hash, sizeof rec->hash),
        p_num(at),
        p_bytes(entry, sizeof entry),
    };
    PGresult *res = NULL;
    rc = tg_pg_exec(im->conn,
                    "INSERT INTO tg_records (instance_id, chain_seq, tenant, type, meta, payload,"
                    " prev_hash, record_hash, created_at, log_entry) VALUES ($1, $2::bigint, $3,"
                    " $4::smallint, $5, $6, $7, $8, to_timestamp($9::bigint / 1000.0), $10)"
                    " ON CONFLICT ON CONSTRAINT tg_records_chain DO NOTHING RETURNING seq",
                    ins, 10, false, &res, diag);
    if (rc) {
        return rc;
    }
    if (PQntuples(res) == 1) {
        snprintf(seq_out, seq_cap, "%s", PQgetvalue(res, 0, 0));
        PQclear(res);
        return TG_OK;
    }
    PQclear(res);
    const tg_pg_param_t sel[] = {ins[0], ins[1], ins[7]};
    rc = tg_pg_exec(im->conn,
                    "SELECT seq, record_hash = $3 FROM tg_records"
                    " WHERE instance_id = $1 AND chain_seq = $2::bigint",
                    sel, 3, false, &res, diag);
    if (rc) {
        return rc;
    }
    bool same = PQntuples(res) == 1 && strcmp(PQgetvalue(res, 0, 1), "t") == 0;
    if (same) {
        snprintf(seq_out, seq_cap, "%s", PQgetvalue(res, 0, 0));
    }
    PQclear(res);
    if (!same) {
        return tg_diag_set(diag, TG_ERR_CONFLICT,
                           "record %" PRIu64 ": the database holds a different record at %s's"
                           " place %" PRIu64 " (another ledger with the same start?)",
                           rec->seq, im->instance, rec->seq);
    }
    im->present++;
    return TG_OK;
}

/* The verify's per-record check: parse, insert the record, then its live key and nonce as
 * a done claim and a used nonce, and its receipt's index row. */
static tg_err_t imp_check(void *ud, const tg_ledger_record_t *rec, tg_diag_t *diag) {
    tg_import_t *im = ud;
    tg_record_view_t v;
    if (tg_record_view(&v, rec->meta, rec->meta_len, rec->payload, rec->payload_len)) {
        return tg_diag_set(diag, TG_ERR_LEDGER_CORRUPT,
                           "record %" PRIu64 " is not a record this server writes", rec->seq);
    }
    if (im->instance[0] == '\0') {
        /* The first record names the ledger: its hash never changes as the ledger grows,
         * so a later import of the same (longer) ledger continues the same chain. */
        static const char hex[] = "0123456789abcdef";
        char *o = im->instance + snprintf(im->instance, sizeof im->instance, "import:");
        for (size_t i = 0; i < 8; i++) {
            *o++ = hex[rec->hash[i] >> 4];
            *o++ = hex[rec->hash[i] & 15];
        }
        *o = '\0';
    }
    char seq[24], at[24], status[8], retention[24];
    tg_err_t rc = imp_record(im, rec, &v, seq, sizeof seq, diag);
    snprintf(at, sizeof at, "%" PRId64, v.meta.at_ms);
    snprintf(status, sizeof status, "%d", v.meta.status);
    snprintf(retention, sizeof retention, "%" PRId64, im->retention_ms);
    bool live = v.meta.at_ms > im->now_ms - im->retention_ms;
    PGresult *res = NULL;
    if (rc == TG_OK && live && v.meta.key.ptr != NULL) {
        const tg_pg_param_t p[] = {
            p_text(v.meta.tenant),
            p_text(v.meta.key),
            p_bytes(v.claim_hash, sizeof v.claim_hash), /* what the key is bound to */
            p_bytes(im->instance, strlen(im->instance)),
            p_num(at),
            p_num(seq),
            p_num(status),
            p_num(retention),
        };
        rc = tg_pg_exec(im->conn,
                        "INSERT INTO tg_idem_claims (tenant, idem_key, request_hash, state,"
                        " claim_id, owner, claimed_at, record_seq, http_status, completed_at,"
                        " expires_at) VALUES ($1, $2, $3, 'done', nextval('tg_claim_id_seq'), $4,"
                        " to_timestamp($5::bigint / 1000.0), $6::bigint, $7::smallint,"
                        " to_timestamp($5::bigint / 1000.0),"
                        " to_timestamp(($5::bigint + $8::bigint) / 1000.0))"
                        " ON CONFLICT DO NOTHING",
                        p, 8, false, &res, diag);
        if (rc == TG_OK) {
            PQclear(res);
            im->keys++;
        }
    }
    if (rc == TG_OK && live && v.meta.nonce.ptr != NULL) {
        const tg_pg_param_t p[] = {p_text(v.meta.tenant), p_text(v.meta.nonce), p_num(at),
                                   p_num(retention)};
        rc = tg_pg_exec(im->conn,
                        "INSERT INTO tg_nonces (tenant, nonce, used_at, expires_at) VALUES ($1, $2,"
                        " to_timestamp($3::bigint / 1000.0),"
                        " to_timestamp(($3::bigint + $4::bigint) / 1000.0)) ON CONFLICT DO NOTHING",
                        p, 4, false, &res, diag);
        if (rc == TG_OK) {
            PQclear(res);
            im->nonces++;
        }
    }
    if (rc == TG_OK && v.receipt && v.execution_id.ptr != NULL) {
        const tg_pg_param_t p[] = {p_text(v.meta.tenant), p_text(v.execution_id), p_num(seq)};
        rc = tg_pg_exec(im->conn,
                        "INSERT INTO tg_receipts (tenant, execution_id, record_seq)"
                        " VALUES ($1, $2, $3::bigint) ON CONFLICT DO NOTHING",
                        p, 3, false, &res, diag);
        if (rc == TG_OK) {
            PQclear(res);
            im->receipts++;
        }
    }
    if (rc == TG_OK) {
        im->records++;
    }
    tg_record_view_free(&v);
    return rc;
}

static void import_usage(FILE *out) {
    fprintf(out,
            "usage: trigguard db import DIR [--database-url URL] [--retention SECONDS]\n"
            "\n"
            "Copies the file ledger in DIR (receipts, every other record, and the idempotency\n"
            "keys and nonces younger than --retention, default %d as serve's) into the\n"
            "PostgreSQL schema, in ledger order, in one transaction: all or nothing. The\n"
            "ledger is verified while it is read; a damaged ledger is refused and nothing is\n"
            "written. Running it again writes nothing and reports the records as already\n"
            "present. It reads DIR without its lock, so no daemon needs to run; stop the\n"
            "daemon first so that the copy is complete.\n"
            "\n"
            "URL: as for db migrate (default: TRIGGUARD_DATABASE_URL). The database must be\n"
            "at schema version %d (`trigguard db migrate`).\n"
            "\n"
            "exit status: 0 done, 1 the database cannot be reached or a statement failed,\n"
            "2 usage error, a bad URL, a damaged ledger, or a schema version other than %d\n",
            TG_IMPORT_RETENTION_DEFAULT, TG_PG_SCHEMA_VERSION, TG_PG_SCHEMA_VERSION);
}

/* Connects, checks the schema version, and runs the import in one transaction. */
static tg_err_t import_run(tg_import_t *im, const char *url, const char *dir, tg_diag_t *diag) {
    int version = 0;
    tg_err_t rc = tg_pg_connect(url, &im->conn, diag);
    if (rc == TG_OK) {
        rc = tg_pg_conn_version(im->conn, &version, diag);
    }
    if (rc) {
        return rc;
    }
    if (version != TG_PG_SCHEMA_VERSION) {
        return tg_diag_set(diag, TG_ERR_SCHEMA_VERSION,
                           "the database has schema version %d; this binary imports into %d%s",
                           version, TG_PG_SCHEMA_VERSION,
                           version < TG_PG_SCHEMA_VERSION ? " (run `trigguard db migrate`)" : "");
    }
    rc = tg_pg_exec(im->conn, "BEGIN", NULL, 0, false, NULL, diag);
    if (rc) {
        return rc;
    }
    tg_ledger_verify_report_t rep;
    const tg_ledger_verify_opts_t vopts = {.check = imp_check, .check_ud = im};
    rc = tg_ledger_verify_path(&rep, dir, &vopts, diag);
    if (rc == TG_OK && rep.anchor_found) {
        /* PostgreSQL's chains start at chain_seq 1; a pruned ledger (docs/LEDGER.md
         * "Archive and prune") starts later, and its rows would not verify there. */
        rc = tg_diag_set(diag, TG_ERR_LEDGER_CORRUPT,
                         "%s: a pruned ledger (ledger.anchor at seq %llu): import the unpruned "
                         "ledger instead",
                         dir, (unsigned long long)rep.anchor_seq);
    }
    if (rc == TG_OK && rep.records > 0) {
        /* The chain's head, as serve keeps it for its own chains: ledger verify then finds a
         * deleted tail. A longer import of the same ledger moves it on, never back. */
        char last[24];
        snprintf(last, sizeof last, "%" PRIu64, rep.last_seq);
        const tg_pg_param_t p[] = {
            p_bytes(im->instance, strlen(im->instance)),
            p_num(last),
            p_bytes(rep.head_hash, sizeof rep.head_hash),
        };
        rc = tg_pg_exec(im->conn,
                        "INSERT INTO tg_chains (instance_id, head_seq, head_hash)"
                        " VALUES ($1::text, $2::bigint, $3::bytea) ON CONFLICT (instance_id)"
                        " DO UPDATE SET head_seq = excluded.head_seq,"
                        " head_hash = excluded.head_hash, updated_at = now()"
                        " WHERE tg_chains.head_seq < excluded.head_seq",
                        p, 3, false, NULL, diag);
    }
    if (rc == TG_OK) {
        return tg_pg_exec(im->conn, "COMMIT", NULL, 0, false, NULL, diag);
    }
    /* the first error is the one to report; the rollback's own failure adds nothing */
    PQclear(PQexec(im->conn, "ROLLBACK"));
    return rc;
}

int tg_cmd_db_import(int argc, char **argv, const char *url) {
    const char *dir = NULL;
    long long retention = TG_IMPORT_RETENTION_DEFAULT;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            import_usage(stdout);
            return TG_EXIT_OK;
        }
        if (strcmp(argv[i], "--database-url") == 0 || strcmp(argv[i], "--retention") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "trigguard db import: %s needs a value\n", argv[i]);
                return TG_EXIT_USAGE;
            }
            if (strcmp(argv[i], "--database-url") == 0) {
                url = argv[++i];
                continue;
            }
            char *end = NULL;
            retention = strtoll(argv[++i], &end, 10);
            if (end == argv[i] || *end != '\0' || retention < 1 || retention > 31536000) {
                fprintf(stderr, "trigguard db import: --retention takes 1..31536000 seconds\n");
                return TG_EXIT_USAGE;
            }
            continue;
        }
        if (argv[i][0] == '-' || dir != NULL) {
            fprintf(stderr, "trigguard db import: unexpected argument '%s'\n\n", argv[i]);
            import_usage(stderr);
            return TG_EXIT_USAGE;
        }
        dir = argv[i];
    }
    if (dir == NULL) {
        fprintf(stderr, "trigguard db import: no ledger directory given\n\n");
        import_usage(stderr);
        return TG_EXIT_USAGE;
    }
    if (url == NULL || url[0] == '\0') {
        fprintf(stderr, "trigguard db import: no database: give --database-url URL or set "
                        "TRIGGUARD_DATABASE_URL\n");
        return TG_EXIT_USAGE;
    }
    tg_import_t im = {.now_ms = tg_clock_now_ms(), .retention_ms = retention * 1000};
    tg_diag_t diag = {{0}};
    tg_err_t rc = import_run(&im, url, dir, &diag);
    PQfinish(im.conn);
    if (rc) {
        fprintf(stderr, "trigguard db import: %s\n", diag.msg);
        return rc == TG_ERR_IO ? TG_EXIT_FAIL : TG_EXIT_USAGE;
    }
    printf("imported %" PRIu64 " records (%" PRIu64 " already present), %" PRIu64
           " idempotency keys, %" PRIu64 " nonces, %" PRIu64 " receipts as %s\n",
           im.records, im.present, im.keys, im.nonces, im.receipts,
           im.instance[0] != '\0' ? im.instance : "(empty ledger)");
    return TG_EXIT_OK;
}
