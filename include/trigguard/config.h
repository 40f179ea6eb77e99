/* config.h — the daemon's configuration: one table, one parser, one immutable result.
 *
 * Every option is described once in src/core/config.c as
 * {flag, env, type, default, min, max, help}; `serve --help`, `--print-config`
 * and validation all come from that table (redis standardConfig). Precedence:
 * command-line flag > environment variable > default. The parsed tg_config_t is
 * owned by the caller, filled once at startup and never modified afterwards, so
 * any thread may read it without locks.
 */
#ifndef TRIGGUARD_CONFIG_H
#define TRIGGUARD_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "trigguard/err.h"

#define TG_CONFIG_STR_MAX 1024
#define TG_CONFIG_FILE_MAX (64 * 1024) /* bytes of a --config file */

/* Bounds of the option table that another module enforces as well; pipeline.c asserts at
 * compile time that they agree, so that the table (and `serve --help`, which prints it) is
 * the one truth about what starts. */
#define TG_CONFIG_RATE_MAX INT64_C(60000000000)        /* = TG_RATE_MAX_PER_MIN (guard.h) */
#define TG_CONFIG_BURST_MAX INT64_C(19215358)          /* = TG_RATE_BURST_ANY_RATE (guard.h) */
#define TG_CONFIG_STORE_ENTRIES_MAX INT64_C(100000000) /* tg_store_create: up to 2^32 */
#define TG_CONFIG_KEY_MAX INT64_C(255) /* idempotency keys, nonces: SPEC §3.1; the store: 1024 */

/* A repeatable option (--oidc NAME=ISSUER ...): its values in the order given, each
 * NUL-terminated, one after the other in buf. Bounded: at most TG_CONFIG_LIST_MAX values of
 * which all together fit buf (a longer list is a TG_ERR_CONFIG naming the option). A list
 * option has no environment fallback and no default; each flag appends one value. */
#define TG_CONFIG_LIST_MAX 32
#define TG_CONFIG_LIST_BYTES 8192
typedef struct tg_config_list {
    uint32_t n;
    uint32_t used; /* bytes of buf in use */
    char buf[TG_CONFIG_LIST_BYTES];
} tg_config_list_t;

/* Value i (0..n-1) of a list, or NULL out of range. Pure. */
const char *tg_config_list_get(const tg_config_list_t *l, uint32_t i);

/* Mirrors the ledger's modes without depending on the ledger module. */
typedef enum tg_config_durability {
    TG_CONFIG_DURABILITY_FSYNC = 0,
    TG_CONFIG_DURABILITY_BATCH = 1,
    TG_CONFIG_DURABILITY_NONE = 2
} tg_config_durability_t;

typedef struct tg_config {
    /* listeners */
    char listen[TG_CONFIG_STR_MAX];
    int64_t port;
    int64_t decide_port; /* 0 = no /decide-only listener */
    char port_file[TG_CONFIG_STR_MAX];
    /* keys, policy, tenants */
    char signing_key[TG_CONFIG_STR_MAX]; /* path, or the PEM text itself */
    char key_id[TG_CONFIG_STR_MAX];
    char verify_keys[TG_CONFIG_STR_MAX]; /* comma-separated verify-only key files */
    char authority_id[TG_CONFIG_STR_MAX];
    /* the transparency log (SPEC §12): off while log_key is "" */
    char log_key[TG_CONFIG_STR_MAX];    /* PKCS#8 PEM file of the log key */
    char log_origin[TG_CONFIG_STR_MAX]; /* "" = derived (pipeline.c) */
    int64_t checkpoint_min_interval_ms;
    int64_t checkpoint_interval_ms;
    char receipt_signing[16];   /* "receipt" | "batch" (SPEC §12; needs --log-key) */
    bool receipt_signing_batch; /* derived: --receipt-signing batch */
    char policy[TG_CONFIG_STR_MAX];
    bool policy_strict; /* lint errors refuse a bundle (tg_policy_load_file_checked) */
    char shadow_policy[TG_CONFIG_STR_MAX]; /* --shadow-policy: "" = none */
    char admin_listen[TG_CONFIG_STR_MAX];  /* --admin-listen ADDR:PORT; "" = none */
    char admin_host[64];                   /* derived: its address (no brackets) */
    int64_t admin_port;                    /* derived: its port */
    char tokens[TG_CONFIG_STR_MAX];
    char api_keys[TG_CONFIG_STR_MAX]; /* secret: redacted by --print-config */
    bool auth_bypass;
    int64_t receipt_ttl_s;
    /* state */
    char store_name[16];                  /* "file" | "postgres" */
    bool store_postgres;                  /* derived: --store postgres */
    char database_url[TG_CONFIG_STR_MAX]; /* secret: may hold a password */
    int64_t claim_timeout_ms;
    int64_t db_pool;
    int64_t db_timeout_ms;
    char ledger[TG_CONFIG_STR_MAX];
    char ledger_create[16]; /* "auto" | "never" */
    bool ledger_no_create;  /* derived: --ledger-create never */
    char durability_name[16];
    tg_config_durability_t durability; /* derived from durability_name */
    int64_t batch_ms;
    int64_t commit_delay_us;
    int64_t ledger_stall_timeout_ms;
    int64_t drain_timeout_s;
    int64_t segment_bytes;
    int64_t retention_s;
    int64_t store_max_entries;
    int64_t store_max_bytes;
    int64_t limit_entries;    /* file backend: stateful-limit totals held (db.h) */
    int64_t snapshot_every;   /* file backend: records between state snapshots; 0 = off */
    int64_t approval_entries; /* file backend: approvals held in memory (db.h) */
    /* guard */
    int64_t rate_per_tenant; /* requests per minute, 0 = unlimited */
    int64_t rate_global;
    int64_t rate_verify; /* the unauthenticated verify routes, all callers together */
    int64_t rate_burst;
    int64_t bulkhead_tenant; /* max in flight, 0 = unlimited */
    int64_t bulkhead_global;
    /* http */
    int64_t threads; /* 0 = one per core */
    int64_t max_connections;
    int64_t per_ip_connections; /* 0 = no per-address limit */
    int64_t connection_timeout_s;
    int64_t connection_memory;
    int64_t max_body;
    int64_t max_url;             /* path + query bytes */
    int64_t max_header_bytes;    /* request header bytes */
    int64_t max_idempotency_key; /* bytes, 1..255 (SPEC §3.1) */
    int64_t max_nonce;           /* bytes, 1..255 */
    int64_t max_depth;
    int64_t max_string;
    int64_t max_keys;
    char tls_cert[TG_CONFIG_STR_MAX];
    char tls_key[TG_CONFIG_STR_MAX];
    /* OIDC callers (oidc.h, docs/OPERATIONS.md "OIDC callers"): NAME=VALUE lists */
    tg_config_list_t oidc;              /* NAME=ISSUER */
    tg_config_list_t oidc_jwks;         /* NAME=FILE|URL */
    tg_config_list_t oidc_audience;     /* NAME=AUD */
    tg_config_list_t oidc_tenant_claim; /* NAME=CLAIM */
    tg_config_list_t oidc_actor;        /* NAME=TEMPLATE */
    char oidc_config[TG_CONFIG_STR_MAX];
    char oidc_ca_file[TG_CONFIG_STR_MAX];
    int64_t oidc_refresh_s;
    int64_t oidc_connect_timeout_ms;
    int64_t oidc_timeout_ms;
    /* logging */
    char log_level[16];
    char log_format[16];
    /* --config FILE as given ("" = none): shown by --print-config, reported at start */
    char config_file[TG_CONFIG_STR_MAX];
    /* which options a flag, the environment or the config file set (bit i % 64 of word
       i / 64: the table's option i), so that a default the daemon must adjust can be told
       from a value the operator asked for */
    uint64_t given[2];
} tg_config_t;

/* What the parser found besides options. */
typedef enum tg_config_action {
    TG_CONFIG_RUN = 0,
    TG_CONFIG_HELP,
    TG_CONFIG_PRINT,
    TG_CONFIG_CHECK
} tg_config_action_t;

/* Fills *cfg from argv (argv[0] is the subcommand name and is skipped), the environment,
 * an optional config file and the defaults, in that precedence: a flag beats the
 * environment, which beats `--config FILE`, which beats the default. A source is read only
 * for the options every source above it left unset, so a flag makes a malformed environment
 * value or file line for the same option irrelevant rather than fatal.
 *   environment: TRIGGUARD_<FLAG> (upper case, '-' as '_'), and the option's older name
 *     where it differs (PORT, RATE_LIMIT_PER_TENANT, ...), both set and different = error;
 *     the repeatable list options have no environment name;
 *   --config FILE (at most TG_CONFIG_FILE_MAX bytes): `name = value` lines with the flag
 *     names, `#` comments, blank lines; a value may be in double quotes; a name twice is an
 *     error except for list options, which take each line; unknown names are errors naming
 *     FILE:LINE, also for options set above.
 * Validates types and ranges and cross-field rules (TLS cert and key together, durability
 * names, log names). TG_ERR_CONFIG with diag naming the option (and its source) on any
 * problem; TG_ERR_NOMEM. */
tg_err_t tg_config_parse(tg_config_t *cfg, tg_config_action_t *action, int argc, char **argv,
                         tg_diag_t *diag) TG_MUST_USE;

/* Whether `flag` (its name without "--", e.g. "max-connections") was set by a flag, the
 * environment or the config file rather than left at its default. false for an unknown flag. Pure.
 */
bool tg_config_given(const tg_config_t *cfg, const char *flag);

/* Writes `serve --help`: every option, its env name, default and range. */
void tg_config_usage(FILE *out);

/* Writes the effective configuration as `name = value` lines, secrets redacted. */
void tg_config_print(FILE *out, const tg_config_t *cfg);

/* Whether a value given for a key file may be shown in a message. A signing-key setting is
 * "path or PEM", so a value that is not an openable file may be key text an operator pasted
 * (the base64 body of a PEM, or a PEM with a damaged BEGIN line). Such text is only base64
 * characters, or contains "BEGIN" or a line break; a path is shown only when it has some
 * other character (a '.', '-', '_', ...). Thread-safe, pure. */
bool tg_config_path_showable(const char *value);

/* "fsync" | "batch" | "none". */
const char *tg_config_durability_name(tg_config_durability_t d);

#endif /* TRIGGUARD_CONFIG_H */
