/* schema.c — the PostgreSQL schema's migrations (pg_schema.h, docs/POSTGRES.md). */
#include <libpq-fe.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trigguard/pg_schema.h"

/* One migration: the statements that take the schema from version - 1 to version. Each list
 * runs in one transaction with the insert of its version row. Never edit a released one:
 * a database that applied it would not see the change; add the next version instead. */
typedef struct {
    int version;
    const char *const *sql;
} tg_pg_migration_t;

static const char *const tg_pg_v1[] = {
    /* Every ledger record. seq is the record's position (tg_db pos): the key readers and
     * the receipt index point at. Gaps are possible (a rolled back insert still takes an
     * identity value), so completeness is proven by the chains, not by seq: each writing
     * instance keeps its own hash chain (instance_id, chain_seq 1, 2, ... without gaps,
     * prev_hash = the record_hash before it in that chain). log_index is the record's leaf
     * in the one transparency log (SPEC §12, §13), assigned in commit order by the one
     * integrator afterwards: NULL until then, never two records at one leaf. */
    "CREATE TABLE tg_records ("
    " seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
    " instance_id text NOT NULL,"
    " chain_seq bigint NOT NULL CHECK (chain_seq >= 1),"
    " tenant text NOT NULL,"
    " type smallint NOT NULL,"
    " meta bytea NOT NULL,"
    " payload bytea NOT NULL,"
    " prev_hash bytea NOT NULL CHECK (octet_length(prev_hash) = 32),"
    " record_hash bytea NOT NULL CHECK (octet_length(record_hash) = 32),"
    " created_at timestamptz NOT NULL DEFAULT now(),"
    " log_index bigint CHECK (log_index >= 0),"
    " CONSTRAINT tg_records_chain UNIQUE (instance_id, chain_seq),"
    " CONSTRAINT tg_records_log_index UNIQUE (log_index))",
    /* Idempotency claims, one row per (tenant, key): the primary key is what makes a key
     * claimable once across all instances. in_flight rows carry the fencing token
     * (claim_id, from one sequence, so a takeover always gets a larger one) and a lease;
     * the commit that makes a row done names its claim_id, so a claim taken over after
     * its lease can no longer be completed by its old owner. */
    "CREATE SEQUENCE tg_claim_id_seq AS bigint",
    "CREATE TABLE tg_idem_claims ("
    " tenant text NOT NULL,"
    " idem_key text NOT NULL,"
    " request_hash bytea NOT NULL CHECK (octet_length(request_hash) = 32),"
    " state text NOT NULL CHECK (state IN ('in_flight', 'done')),"
    " claim_id bigint NOT NULL,"
    " owner text NOT NULL,"
    " claimed_at timestamptz NOT NULL DEFAULT now(),"
    " lease_until timestamptz,"
    " record_seq bigint,"
    " http_status smallint,"
    " completed_at timestamptz,"
    " expires_at timestamptz NOT NULL,"
    " PRIMARY KEY (tenant, idem_key),"
    " CONSTRAINT tg_idem_claims_state CHECK ("
    "  (state = 'in_flight' AND lease_until IS NOT NULL AND record_seq IS NULL)"
    "  OR (state = 'done' AND record_seq IS NOT NULL AND completed_at IS NOT NULL)))",
    /* The lease sweep: in-flight claims past their lease, oldest first. */
    "CREATE INDEX tg_idem_claims_lease ON tg_idem_claims (lease_until)"
    " WHERE state = 'in_flight'",
    /* The retention job: rows past expires_at, in order, without a full scan. */
    "CREATE INDEX tg_idem_claims_expires ON tg_idem_claims (expires_at)",
    /* Nonces: used once per tenant across all instances (the primary key). */
    "CREATE TABLE tg_nonces ("
    " tenant text NOT NULL,"
    " nonce text NOT NULL,"
    " used_at timestamptz NOT NULL DEFAULT now(),"
    " expires_at timestamptz NOT NULL,"
    " PRIMARY KEY (tenant, nonce))",
    "CREATE INDEX tg_nonces_expires ON tg_nonces (expires_at)",
    /* executionId -> record, per tenant; a record has at most one receipt, never repointed
     * (no UPDATE path exists, and the record it points at must exist). */
    "CREATE TABLE tg_receipts ("
    " tenant text NOT NULL,"
    " execution_id text NOT NULL,"
    " record_seq bigint NOT NULL REFERENCES tg_records (seq),"
    " PRIMARY KEY (tenant, execution_id),"
    " CONSTRAINT tg_receipts_record UNIQUE (record_seq))",
    NULL,
};

/* What serve needs beyond v1 (docs/POSTGRES.md, "Schema"). */
static const char *const tg_pg_v2[] = {
    /* Each hash chain's head, written in the same transaction as the chain's records, so
     * that a deleted tail of a chain is found (its records are gone, its head is not); and
     * rows that say which chains exist at all. */
    "CREATE TABLE tg_chains ("
    " instance_id text PRIMARY KEY,"
    " head_seq bigint NOT NULL CHECK (head_seq >= 0),"
    " head_hash bytea NOT NULL CHECK (octet_length(head_hash) = 32),"
    " started_at timestamptz NOT NULL DEFAULT now(),"
    " updated_at timestamptz NOT NULL DEFAULT now())",
    "INSERT INTO tg_chains (instance_id, head_seq, head_hash)"
    " SELECT DISTINCT ON (instance_id) instance_id, chain_seq, record_hash FROM tg_records"
    " ORDER BY instance_id, chain_seq DESC",
    /* A nonce held by a request in flight, like an idempotency claim: its token and lease
     * until the record that consumes it commits (lease_until NULL, record_seq set), so a
     * nonce whose request died is freed after the lease and a late commit is fenced. Rows
     * from v1 (imported) are consumed: lease_until NULL. */
    "ALTER TABLE tg_nonces ADD COLUMN claim_id bigint, ADD COLUMN lease_until timestamptz,"
    " ADD COLUMN record_seq bigint, ADD COLUMN owner text",
    /* Every request writes a claim row and then updates it: the fewer indexes an update
     * touches, and the more room a page keeps, the more of those updates are HOT (no index
     * entry at all). Nothing reads claims by lease (a takeover goes through the primary
     * key), and log_index stays NULL until the integrator assigns it, so neither needs an
     * entry for every row. */
    "DROP INDEX tg_idem_claims_lease",
    "ALTER TABLE tg_records DROP CONSTRAINT tg_records_log_index",
    "CREATE UNIQUE INDEX tg_records_log_index ON tg_records (log_index)"
    " WHERE log_index IS NOT NULL",
    "ALTER TABLE tg_idem_claims SET (fillfactor = 80)",
    "ALTER TABLE tg_nonces SET (fillfactor = 80)",
    /* The receipt's record is inserted by the same statement, so the foreign key's check
     * (a trigger and a row lock per receipt, measured at up to 2 ms a group) proves
     * nothing the writer does not already guarantee; ledger verify checks that every
     * index row names an existing record of its tenant. */
    "ALTER TABLE tg_receipts DROP CONSTRAINT tg_receipts_record_seq_fkey",
    /* Likewise the one-receipt-per-record index: the writer inserts one index row per
     * receipt record, in the record's own statement, and ledger verify checks that no
     * record has two. The retention job's indexes become BRIN: rows arrive in about
     * expires_at order, so a block range summary finds the expired ones, and an insert
     * costs no B-tree entry (every request inserts a claim). */
    "ALTER TABLE tg_receipts DROP CONSTRAINT tg_receipts_record",
    "DROP INDEX tg_idem_claims_expires",
    "CREATE INDEX tg_idem_claims_expires ON tg_idem_claims USING brin (expires_at)",
    "DROP INDEX tg_nonces_expires",
    "CREATE INDEX tg_nonces_expires ON tg_nonces USING brin (expires_at)",
    NULL,
};

/* Stateful limits (docs/POLICY.md "Limits", docs/DESIGN.md "Limit totals"): one running
 * total per (limit, key, window start), shared by every instance. A reservation is one
 * conditional upsert (total + amount <= max) on a pooled connection, not part of the group
 * commit; window_end (Unix seconds) is what the retention job deletes by. */
static const char *const tg_pg_v3[] = {
    "CREATE TABLE tg_limit_totals ("
    " limit_id text NOT NULL,"
    " key bytea NOT NULL CHECK (octet_length(key) = 32),"
    " window_start bigint NOT NULL CHECK (window_start >= 0),"
    " window_end bigint NOT NULL CHECK (window_end > window_start),"
    " total double precision NOT NULL CHECK (total >= 0),"
    " PRIMARY KEY (limit_id, key, window_start))",
    "CREATE INDEX tg_limit_totals_end ON tg_limit_totals (window_end)",
    NULL,
};

/* ESCALATE approvals (SPEC §11.2, db.h "approvals"): one row per approval, its newest
 * durable state. doc is tg_approval_write's document (what get parses back); the other
 * columns are copies of its fields for the statements that filter on them. A row is
 * written only inside the group commit of the record that carries its version: version 1
 * inserted, version n updated where version = n - 1 and hold_token is the writer's, so a
 * writer whose lease (hold_until) was taken over cannot commit. Times are Unix ms, as in
 * the document. */
static const char *const tg_pg_v4[] = {
    "CREATE TABLE tg_approvals ("
    " tenant text NOT NULL,"
    " id text NOT NULL CHECK (id ~ '^appr_[0-9a-f]{32}$'),"
    " version integer NOT NULL CHECK (version >= 1),"
    " status text NOT NULL CHECK (status IN"
    "  ('pending', 'approved', 'denied', 'expired', 'consumed')),"
    " created_at bigint NOT NULL,"
    " expires_at bigint NOT NULL,"
    " resolved_at bigint NOT NULL DEFAULT 0,"
    " consume_within_ms bigint NOT NULL CHECK (consume_within_ms > 0),"
    " doc text NOT NULL,"
    " hold_token bigint,"
    " hold_until timestamptz,"
    " PRIMARY KEY (tenant, id))",
    /* list: a tenant's newest first; due and retention: by stored status and time */
    "CREATE INDEX tg_approvals_list ON tg_approvals (tenant, created_at DESC)",
    "CREATE INDEX tg_approvals_due ON tg_approvals (status, expires_at)",
    NULL,
};

/* The transparency log (SPEC §12, db.h "the transparency log", docs/POSTGRES.md): one log
 * for the deployment. log_entry is the record's 32-byte entry, written by the record's own
 * insert (rows older than v5 keep NULL: the integrator computes theirs from the record).
 * The integrator (one instance at a time, under an advisory lock) assigns log_index to the
 * unassigned records in the order it finds them, and in the same transaction inserts the
 * tree's new stored hashes (tlog.h: every complete subtree's hash by level and index) and
 * replaces the one row of tg_log_state (the signed checkpoint over the new size), fenced
 * on the size it read: two integrators can never both move the log. */
static const char *const tg_pg_v5[] = {
    "ALTER TABLE tg_records ADD COLUMN log_entry bytea"
    " CHECK (octet_length(log_entry) = 32)",
    /* what the integrator asks for: the records without a leaf, oldest first; it shrinks
     * back to (almost) nothing as they are assigned */
    "CREATE INDEX tg_records_unlogged ON tg_records (seq) WHERE log_index IS NULL",
    "CREATE TABLE tg_log_hashes ("
    " level smallint NOT NULL CHECK (level BETWEEN 0 AND 63),"
    " idx bigint NOT NULL CHECK (idx >= 0),"
    " hash bytea NOT NULL CHECK (octet_length(hash) = 32),"
    " PRIMARY KEY (level, idx))",
    /* One row (id is always true). size 0 and no note until the first integrator signs
     * the empty tree; origin is the checkpoint's origin (the log key's name). */
    "CREATE TABLE tg_log_state ("
    " id boolean PRIMARY KEY DEFAULT true CHECK (id),"
    " size bigint NOT NULL CHECK (size >= 0),"
    " root bytea CHECK (octet_length(root) = 32),"
    " note text,"
    " origin text,"
    " updated_at timestamptz NOT NULL DEFAULT now(),"
    " CONSTRAINT tg_log_state_signed CHECK ((note IS NULL) = (root IS NULL)"
    "  AND (note IS NULL) = (origin IS NULL) AND (note IS NOT NULL OR size = 0)))",
    "INSERT INTO tg_log_state (size) VALUES (0)",
    NULL,
};

static const tg_pg_migration_t tg_pg_migrations[] = {
    {1, tg_pg_v1}, {2, tg_pg_v2}, {3, tg_pg_v3}, {4, tg_pg_v4}, {5, tg_pg_v5},
};

_Static_assert(sizeof tg_pg_migrations / sizeof tg_pg_migrations[0] == TG_PG_SCHEMA_VERSION,
               "one migration per schema version");

tg_err_t tg_pg_check_url(const char *url, tg_diag_t *diag) {
    char *why = NULL;
    if (url == NULL || url[0] == '\0') {
        return tg_diag_set(diag, TG_ERR_CONFIG, "no database URL given");
    }
    PQconninfoOption *opts = PQconninfoParse(url, &why);
    if (opts == NULL) {
        /* libpq's sentence ends in a newline; ours do not */
        size_t n = why != NULL ? strcspn(why, "\n") : 0;
        tg_err_t rc = tg_diag_set(diag, why != NULL ? TG_ERR_CONFIG : TG_ERR_NOMEM,
                                  "the database URL does not parse: %.*s", (int)n,
                                  why != NULL ? why : "out of memory");
        PQfreemem(why);
        return rc;
    }
    PQconninfoFree(opts);
    return TG_OK;
}

/* libpq's last error on conn, without its trailing newline, for a diag. */
static tg_err_t pg_fail(tg_diag_t *diag, PGconn *conn, const char *what) {
    const char *msg = conn != NULL ? PQerrorMessage(conn) : "out of memory";
    size_t n = strcspn(msg, "\n");
    return tg_diag_set(diag, TG_ERR_IO, "%s: %.*s", what, (int)n, msg);
}

/* Notices (a NOTICE from the server) would go to stderr by default; the commands say what
 * happened themselves. */
static void pg_quiet(void *arg, const char *message) {
    (void)arg;
    (void)message;
}

tg_err_t tg_pg_connect(const char *url, PGconn **out, tg_diag_t *diag) {
    *out = NULL;
    tg_err_t rc = tg_pg_check_url(url, diag);
    if (rc) {
        return rc;
    }
    /* dbname is expanded last, so anything the URL sets (connect_timeout too) wins over
     * these defaults: a bounded connect, and a name in pg_stat_activity. */
    const char *const keys[] = {"connect_timeout", "fallback_application_name", "dbname", NULL};
    const char *const vals[] = {"10", "trigguard", url, NULL};
    PGconn *conn = PQconnectdbParams(keys, vals, 1);
    if (conn == NULL || PQstatus(conn) != CONNECTION_OK) {
        rc = pg_fail(diag, conn, "cannot connect to the database");
        PQfinish(conn);
        return rc;
    }
    PQsetNoticeProcessor(conn, pg_quiet, NULL);
    *out = conn;
    return TG_OK;
}

tg_err_t tg_pg_exec(PGconn *conn, const char *sql, const tg_pg_param_t *p, int n,
                    bool binary_result, PGresult **res_out, tg_diag_t *diag) {
    const char *vals[TG_PG_MAX_PARAMS] = {0};
    int lens[TG_PG_MAX_PARAMS] = {0};
    int fmts[TG_PG_MAX_PARAMS] = {0};
    if (n < 0 || n > TG_PG_MAX_PARAMS || (n > 0 && p == NULL)) {
        return tg_diag_set(diag, TG_ERR_LIMIT, "%d statement parameters (at most %d)", n,
                           TG_PG_MAX_PARAMS);
    }
    for (int i = 0; i < n; i++) {
        bool text = p[i].len == TG_PG_TEXT;
        if (!text && p[i].len > (size_t)INT32_MAX) {
            return tg_diag_set(diag, TG_ERR_LIMIT, "a value too large for one parameter");
        }
        vals[i] = p[i].ptr;
        lens[i] = text ? 0 : (int)p[i].len;
        fmts[i] = text ? 0 : 1;
    }
    PGresult *res = PQexecParams(conn, sql, n, NULL, vals, lens, fmts, binary_result ? 1 : 0);
    ExecStatusType st = PQresultStatus(res);
    if (res == NULL || (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)) {
        const char *msg = res != NULL ? PQresultErrorMessage(res) : PQerrorMessage(conn);
        size_t len = strcspn(msg, "\n");
        tg_err_t rc = tg_diag_set(diag, TG_ERR_IO, "%.60s: %.*s", sql, (int)len, msg);
        PQclear(res);
        return rc;
    }
    if (res_out != NULL) {
        *res_out = res;
    } else {
        PQclear(res);
    }
    return TG_OK;
}

/* A statement without parameters or result. */
static tg_err_t pg_run(PGconn *conn, const char *sql, tg_diag_t *diag) {
    return tg_pg_exec(conn, sql, NULL, 0, false, NULL, diag);
}

/* The database's version: 0 without a trigguard_schema table. */
static tg_err_t pg_read_version(PGconn *conn, int *version, tg_diag_t *diag) {
    PGresult *res = NULL;
    tg_err_t rc = tg_pg_exec(conn,
                             "SELECT CASE WHEN to_regclass('trigguard_schema') IS NULL THEN -1"
                             " ELSE 0 END",
                             NULL, 0, false, &res, diag);
    if (rc) {
        return rc;
    }
    bool exists = strcmp(PQgetvalue(res, 0, 0), "0") == 0;
    PQclear(res);
    *version = 0;
    if (!exists) {
        return TG_OK;
    }
    rc = tg_pg_exec(conn, "SELECT coalesce(max(version), 0) FROM trigguard_schema", NULL, 0, false,
                    &res, diag);
    if (rc) {
        return rc;
    }
    char *end = NULL;
    long v = strtol(PQgetvalue(res, 0, 0), &end, 10);
    bool whole = end != NULL && *end == '\0';
    PQclear(res); /* end pointed into it: read before this */
    if (!whole || v < 0 || v > 1000000) {
        return tg_diag_set(diag, TG_ERR_IO, "trigguard_schema holds an unreadable version");
    }
    *version = (int)v;
    return TG_OK;
}

tg_err_t tg_pg_conn_version(PGconn *conn, int *version, tg_diag_t *diag) {
    return pg_read_version(conn, version, diag);
}

tg_err_t tg_pg_schema_version(const char *url, int *version, tg_diag_t *diag) {
    PGconn *conn = NULL;
    tg_err_t rc = tg_pg_connect(url, &conn, diag);
    if (rc == TG_OK) {
        rc = pg_read_version(conn, version, diag);
    }
    PQfinish(conn);
    return rc;
}

/* Applies migration m in one transaction with its version row. */
static tg_err_t pg_apply(PGconn *conn, const tg_pg_migration_t *m, tg_diag_t *diag) {
    char version[16];
    snprintf(version, sizeof version, "%d", m->version);
    const tg_pg_param_t params[] = {{version, TG_PG_TEXT}};
    tg_err_t rc = pg_run(conn, "BEGIN", diag);
    if (rc) {
        return rc;
    }
    for (const char *const *sql = m->sql; *sql != NULL && rc == TG_OK; sql++) {
        rc = pg_run(conn, *sql, diag);
    }
    if (rc == TG_OK) {
        rc = tg_pg_exec(conn, "INSERT INTO trigguard_schema (version) VALUES ($1::integer)", params,
                        1, false, NULL, diag);
    }
    if (rc == TG_OK) {
        return pg_run(conn, "COMMIT", diag);
    }
    /* the first error is the one to report; the rollback's own failure adds nothing */
    PQclear(PQexec(conn, "ROLLBACK"));
    return rc;
}

tg_err_t tg_pg_migrate(const char *url, tg_pg_migration_result_t *out, tg_diag_t *diag) {
    return tg_pg_migrate_to(url, TG_PG_SCHEMA_VERSION, out, diag);
}

tg_err_t tg_pg_migrate_to(const char *url, int target, tg_pg_migration_result_t *out,
                          tg_diag_t *diag) {
    if (target < 1 || target > TG_PG_SCHEMA_VERSION) {
        return tg_diag_set(diag, TG_ERR_INVALID_ARG, "target version %d is not 1..%d", target,
                           TG_PG_SCHEMA_VERSION);
    }
    PGconn *conn = NULL;
    int version = 0;
    char lock_key[24];
    snprintf(lock_key, sizeof lock_key, "%lld", (long long)TG_PG_SCHEMA_LOCK);
    const tg_pg_param_t lock_params[] = {{lock_key, TG_PG_TEXT}};
    tg_err_t rc = tg_pg_connect(url, &conn, diag);
    if (rc) {
        return rc;
    }
    /* Bounded waits: behind another migrator for the lock, and for any one statement. */
    TG_TRY(pg_run(conn, "SET lock_timeout = '60s'", diag));
    TG_TRY(pg_run(conn, "SET statement_timeout = '120s'", diag));
    /* A session lock: held across the migrations' transactions, released by the server
     * when the connection ends however this process ends. */
    TG_TRY(
        tg_pg_exec(conn, "SELECT pg_advisory_lock($1::bigint)", lock_params, 1, false, NULL, diag));
    /* Under the lock, so two first migrations never race on creating it. */
    TG_TRY(pg_run(conn,
                  "CREATE TABLE IF NOT EXISTS trigguard_schema ("
                  " version integer PRIMARY KEY CHECK (version >= 1),"
                  " applied_at timestamptz NOT NULL DEFAULT now())",
                  diag));
    TG_TRY(pg_read_version(conn, &version, diag));
    if (out != NULL) {
        out->from = version;
        out->to = version;
    }
    if (version > TG_PG_SCHEMA_VERSION) {
        rc = tg_diag_set(diag, TG_ERR_SCHEMA_VERSION,
                         "the database has schema version %d; this binary knows up to %d "
                         "(upgrade trigguard before migrating)",
                         version, TG_PG_SCHEMA_VERSION);
        goto done;
    }
    for (size_t i = 0; i < sizeof tg_pg_migrations / sizeof tg_pg_migrations[0]; i++) {
        if (tg_pg_migrations[i].version <= version || tg_pg_migrations[i].version > target) {
            continue;
        }
        rc = pg_apply(conn, &tg_pg_migrations[i], diag);
        if (rc) {
            goto done;
        }
        version = tg_pg_migrations[i].version;
        if (out != NULL) {
            out->to = version;
        }
    }
done:
    /* Closing the connection releases the session lock too; the explicit unlock only
     * saves a pooler from keeping it. */
    /* best effort: the server releases the lock with the connection anyway */
    TG_IGNORE(tg_pg_exec(conn, "SELECT pg_advisory_unlock($1::bigint)", lock_params, 1, false, NULL,
                         NULL));
    PQfinish(conn);
    return rc;
}
