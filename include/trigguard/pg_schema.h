/* pg_schema.h — the PostgreSQL schema of trigguard (SPEC §13, docs/POSTGRES.md): create and
 * upgrade it, and read which version a database has.
 *
 * The schema is versioned: the table trigguard_schema holds one row per applied migration
 * (version, applied_at). Migrations run in order, each in its own transaction that also
 * records its version, so a database is always at exactly one version, never between two.
 * All of them run under one session advisory lock (TG_PG_SCHEMA_LOCK), so any number of
 * processes may migrate the same database at once: one applies, the others wait and then
 * find nothing to do. A database at a version newer than TG_PG_SCHEMA_VERSION is never
 * touched: an old binary must not write to a schema it does not understand.
 *
 * url: a libpq connection string, either a URI (postgresql://...) or key=value conninfo;
 * the functions never build SQL from it or from anything else a user gives (parameters go
 * through PQexecParams).
 *
 * Errors: TG_ERR_CONFIG the url does not parse (nothing is contacted); TG_ERR_IO the server
 * cannot be reached, refuses the login, or a statement fails (diag has libpq's reason);
 * TG_ERR_SCHEMA_VERSION the database is newer than this binary; TG_ERR_NOMEM.
 * Thread safety: each call opens and closes its own connection; calls are independent.
 */
#ifndef TRIGGUARD_PG_SCHEMA_H
#define TRIGGUARD_PG_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trigguard/err.h"

/* The newest schema version this binary knows (the number of its migrations). */
#define TG_PG_SCHEMA_VERSION 5

/* The advisory lock key every migrating process takes (pg_advisory_lock(bigint)). A fixed
 * constant: "tgschema" in ASCII, so it will not collide with another application's key by
 * accident. */
#define TG_PG_SCHEMA_LOCK 0x7467736368656d61LL

/* The advisory lock of the transparency log's integrator (db.h "the transparency log"): the
 * instance whose integrator connection holds it (pg_try_advisory_lock, a session lock, so
 * the server releases it with the connection) is the one that assigns leaves and signs
 * checkpoints. "tglogint" in ASCII. */
#define TG_PG_LOG_LOCK 0x74676c6f67696e74LL

/* What tg_pg_migrate did: the version before and after. from == to: nothing to do. */
typedef struct tg_pg_migration_result {
    int from;
    int to;
} tg_pg_migration_result_t;

/* Checks that url parses as a libpq conninfo or URI, without contacting anything.
 * TG_ERR_CONFIG with libpq's reason in diag when it does not. */
TG_MUST_USE tg_err_t tg_pg_check_url(const char *url, tg_diag_t *diag);

/* Brings the database at url to TG_PG_SCHEMA_VERSION; *out (may be NULL) says from which
 * version. Waits for another migrating process (at most the lock timeout, 60 s). */
TG_MUST_USE tg_err_t tg_pg_migrate(const char *url, tg_pg_migration_result_t *out, tg_diag_t *diag);

/* As tg_pg_migrate, but stops at version target (1..TG_PG_SCHEMA_VERSION): for staged
 * upgrades and for testing an upgrade from an older version. A database already past
 * target is left alone (from == to). TG_ERR_INVALID_ARG for a target out of range. */
TG_MUST_USE tg_err_t tg_pg_migrate_to(const char *url, int target, tg_pg_migration_result_t *out,
                                      tg_diag_t *diag);

/* *version = the database's schema version: 0 when it has none yet (an empty database).
 * A version newer than TG_PG_SCHEMA_VERSION is reported, not refused (TG_OK). */
TG_MUST_USE tg_err_t tg_pg_schema_version(const char *url, int *version, tg_diag_t *diag);

/* libpq's connection (libpq-fe.h's PGconn), named here so this header needs no libpq. */
struct pg_conn;

/* Opens a connection to url with the defaults every trigguard tool uses (a bounded connect,
 * the application name), notices silenced; *out is closed by the caller (PQfinish). For
 * tools that run their own statements on the schema (db import). */
TG_MUST_USE tg_err_t tg_pg_connect(const char *url, struct pg_conn **out, tg_diag_t *diag);

/* libpq's result (libpq-fe.h's PGresult). */
struct pg_result;

/* One statement parameter: NUL-terminated text when len is TG_PG_TEXT, else len bytes sent
 * in binary (bytea, or a text value that need not be NUL-terminated). */
#define TG_PG_TEXT SIZE_MAX
#define TG_PG_MAX_PARAMS 16
typedef struct tg_pg_param {
    const char *ptr;
    size_t len;
} tg_pg_param_t;

/* Runs sql with n parameters (PQexecParams: values are never spliced into sql), results in
 * binary when binary_result. On success *res_out (may be NULL) gets the result, for the
 * caller to PQclear. Errors: TG_ERR_IO (the statement failed; the first line of libpq's
 * reason in diag), TG_ERR_LIMIT (more than TG_PG_MAX_PARAMS, or a value over 2^31 - 1
 * bytes). The one way every trigguard tool talks to the server. */
TG_MUST_USE tg_err_t tg_pg_exec(struct pg_conn *conn, const char *sql, const tg_pg_param_t *p,
                                int n, bool binary_result, struct pg_result **res_out,
                                tg_diag_t *diag);

/* *version = the schema version of the database conn is connected to (as
 * tg_pg_schema_version). */
TG_MUST_USE tg_err_t tg_pg_conn_version(struct pg_conn *conn, int *version, tg_diag_t *diag);

#endif /* TRIGGUARD_PG_SCHEMA_H */
