/* config.c — the option table and its single parser (see config.h). */
#include "trigguard/config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { OPT_INT, OPT_STR, OPT_BOOL, OPT_LIST } opt_type_t;

typedef struct {
    const char *flag; /* --flag */
    const char *env;  /* environment fallback, NULL if none */
    opt_type_t type;
    size_t offset;       /* into tg_config_t */
    size_t size;         /* OPT_STR: capacity of the char array */
    const char *def;     /* default, as text */
    int64_t min, max;    /* OPT_INT range */
    const char *choices; /* OPT_STR: "a|b|c" or NULL */
    int secret;          /* redacted by --print-config */
    const char *help;
} opt_t;

#define F(field) offsetof(tg_config_t, field), sizeof(((tg_config_t *)0)->field)
#define I64MAX INT64_MAX

/* The one description of every option. Keep it in the order of `serve --help`. Its min and
 * max are the whole truth about what starts: a value inside them passes every later check
 * (the guard, the store, the ledger, libmicrohttpd), and the bounds those modules enforce too
 * are the TG_CONFIG_*_MAX of config.h, held equal to theirs at compile time (pipeline.c).
 * The one exception is the connection limit, which `serve` also fits under the open-files
 * limit at start (docs/OPERATIONS.md, Descriptors); its help says so. */
static const opt_t options[] = {
    {"listen", "TRIGGUARD_LISTEN", OPT_STR, F(listen), "127.0.0.1", 0, 0, NULL, 0,
     "address to listen on (IPv4 or IPv6 literal)"},
    {"port", "PORT", OPT_INT, F(port), "8080", 0, 65535, NULL, 0,
     "TCP port; 0 picks a free port (see --port-file)"},
    {"decide-port", "TG_DECIDE_PORT", OPT_INT, F(decide_port), "0", 0, 65535, NULL, 0,
     "optional second listener serving only POST /decide; 0 = off"},
    {"admin-listen", "TRIGGUARD_ADMIN_LISTEN", OPT_STR, F(admin_listen), "", 0, 0, NULL, 0,
     "ADDR:PORT ([v6]:PORT) of a listener for /metrics, /v1/admin/reload and the health "
     "routes, which the API port then no longer serves; empty = off"},
    {"port-file", "TRIGGUARD_PORT_FILE", OPT_STR, F(port_file), "", 0, 0, NULL, 0,
     "write the bound port number to this file once listening"},
    {"key", "TRIGGUARD_SIGNING_KEY", OPT_STR, F(signing_key), "", 0, 0, NULL, 1,
     "Ed25519 signing key: PKCS#8 PEM file path, or the PEM text itself"},
    {"key-id", "TRIGGUARD_SIGNING_KEY_ID", OPT_STR, F(key_id), "", 0, 0, NULL, 0,
     "key id of the signing key (default: from the key file, else derived)"},
    {"verify-keys", "TRIGGUARD_VERIFY_KEYS", OPT_STR, F(verify_keys), "", 0, 0, NULL, 0,
     "comma-separated PEM files of verify-only keys (rotation)"},
    {"authority-id", "TRIGGUARD_AUTHORITY_ID", OPT_STR, F(authority_id), "", 0, 0, NULL, 0,
     "authorityId written into receipts; empty = the policy's authority (docs/POLICY.md)"},
    {"log-key", "TRIGGUARD_LOG_KEY", OPT_STR, F(log_key), "", 0, 0, NULL, 1,
     "Ed25519 private key (PKCS#8 PEM file, mode 0600, not the --key) that signs the "
     "transparency log's checkpoints (SPEC §12); empty = no log (docs/OPERATIONS.md, "
     "Transparency log)"},
    {"log-origin", "TRIGGUARD_LOG_ORIGIN", OPT_STR, F(log_origin), "", 0, 0, NULL, 0,
     "the log's checkpoint origin and key name (C2SP); empty = the authority id when it is a "
     "valid key name, else \"trigguard\"; part of the log's identity: never change it"},
    {"checkpoint-min-interval", "TRIGGUARD_CHECKPOINT_MIN_INTERVAL", OPT_INT,
     F(checkpoint_min_interval_ms), "5", 1, 60000, NULL, 0,
     "--log-key: least ms between two signed checkpoints"},
    {"checkpoint-interval", "TRIGGUARD_CHECKPOINT_INTERVAL", OPT_INT, F(checkpoint_interval_ms),
     "100", 1, 600000, NULL, 0,
     "--log-key: most ms from a record's durability to a checkpoint covering it (also how "
     "often --durability none syncs); at least --checkpoint-min-interval"},
    {"receipt-signing", "TRIGGUARD_RECEIPT_SIGNING", OPT_STR, F(receipt_signing), "receipt", 0, 0,
     "receipt|batch", 0,
     "receipt: every receipt carries its own Ed25519 signature (v1); batch: receipts carry a "
     "transparency-log inclusion proof and signed checkpoint instead, answered once a checkpoint "
     "covers them (needs --log-key; a request's receiptSigning overrides)"},
    {"policy", "TRIGGUARD_POLICY", OPT_STR, F(policy), "", 0, 0, NULL, 0,
     "policy bundle JSON file (required)"},
    {"policy-strict", "TRIGGUARD_POLICY_STRICT", OPT_BOOL, F(policy_strict), "true", 0, 1, NULL, 0,
     "refuse a policy bundle with lint errors (trigguard policy lint) at start and on reload; "
     "false = compile errors only"},
    {"shadow-policy", "TRIGGUARD_SHADOW_POLICY", OPT_STR, F(shadow_policy), "", 0, 0, NULL, 0,
     "candidate policy bundle decided beside the live one; disagreements counted and logged, "
     "never enforced (docs/OPERATIONS.md, Shadow policy)"},
    {"tokens", "TRIGGUARD_TOKENS", OPT_STR, F(tokens), "", 0, 0, NULL, 0,
     "tokens file: JSON list of {tenant, token_sha256[, subject, actors, surfaces, role]}"},
    {"api-keys", "TRIGGUARD_API_KEYS", OPT_STR, F(api_keys), "", 0, 0, NULL, 1,
     "tenant tokens from the environment (see docs/OPERATIONS.md)"},
    {"unsafe-local-auth-bypass", "TRIGGUARD_UNSAFE_LOCAL_AUTH_BYPASS", OPT_BOOL, F(auth_bypass),
     "false", 0, 1, NULL, 0, "map every request to tenant 'local' (loopback listeners only)"},
    {"receipt-ttl", "TRIGGUARD_RECEIPT_TTL", OPT_INT, F(receipt_ttl_s), "600", 1, 31536000, NULL, 0,
     "receipt lifetime in seconds (expiresAt - timestamp)"},
    {"store", "TRIGGUARD_STORE", OPT_STR, F(store_name), "file", 0, 0, "file|postgres", 0,
     "where records, idempotency keys and nonces live: file = --ledger on this machine; "
     "postgres = --database-url, shared by every instance (docs/POSTGRES.md)"},
    {"database-url", "TRIGGUARD_DATABASE_URL", OPT_STR, F(database_url), "", 0, 0, NULL, 1,
     "--store postgres: libpq connection string or URI (multi-host with "
     "target_session_attrs=read-write follows a failover)"},
    {"claim-timeout", "TRIGGUARD_CLAIM_TIMEOUT", OPT_INT, F(claim_timeout_ms), "30000", 1000,
     86400000, NULL, 0,
     "--store postgres: ms an in-flight idempotency key or nonce stays claimed by an instance "
     "that stopped answering, before another may take it over (its late commit is fenced out)"},
    {"db-pool", "TRIGGUARD_DB_POOL", OPT_INT, F(db_pool), "8", 1, 256, NULL, 0,
     "--store postgres: connections for claims and lookups (the writer and the upkeep have "
     "one each besides)"},
    {"db-timeout", "TRIGGUARD_DB_TIMEOUT", OPT_INT, F(db_timeout_ms), "2000", 50, 600000, NULL, 0,
     "--store postgres: ms one claim or lookup may take (waiting for a connection included) "
     "before the request gets 503 store_unavailable"},
    {"ledger", "TRIGGUARD_LEDGER", OPT_STR, F(ledger), "state/ledger", 0, 0, NULL, 0,
     "directory of ledger segments"},
    {"ledger-create", "TRIGGUARD_LEDGER_CREATE", OPT_STR, F(ledger_create), "auto", 0, 0,
     "auto|never", 0,
     "auto: a missing or empty --ledger starts a new, empty ledger (logged); never: refuse to "
     "start without an existing one"},
    {"durability", "TRIGGUARD_DURABILITY", OPT_STR, F(durability_name), "fsync", 0, 0,
     "fsync|batch|none", 0, "when a response may leave: after fdatasync, batched, or unsynced"},
    {"batch-ms", "TRIGGUARD_BATCH_MS", OPT_INT, F(batch_ms), "5", 1, 10000, NULL, 0,
     "--durability=batch: longest time between fsyncs, in ms"},
    {"commit-delay-us", "TRIGGUARD_COMMIT_DELAY_US", OPT_INT, F(commit_delay_us), "200", 0, 100000,
     NULL, 0,
     "--durability=fsync: longest wait for requests being signed before a fdatasync (0 = none)"},
    {"ledger-stall-timeout", "TRIGGUARD_LEDGER_STALL_TIMEOUT", OPT_INT, F(ledger_stall_timeout_ms),
     "5000", 100, 3600000, NULL, 0,
     "ms a decision may wait for its ledger write or sync before it gets 503 and the ledger "
     "counts as stalled (/readyz 503) until the write returns"},
    {"segment-bytes", "TRIGGUARD_SEGMENT_BYTES", OPT_INT, F(segment_bytes), "268435456", 65536,
     I64MAX, NULL, 0, "start a new ledger segment past this size"},
    {"retention", "TRIGGUARD_RETENTION", OPT_INT, F(retention_s), "86400", 1, 31536000, NULL, 0,
     "seconds idempotency keys and nonces are remembered"},
    {"store-max-entries", "TRIGGUARD_STORE_MAX_ENTRIES", OPT_INT, F(store_max_entries), "0", 0,
     TG_CONFIG_STORE_ENTRIES_MAX, NULL, 0,
     "cap on idempotency + nonce entries held in memory (and on the receipt index); 0 = "
     "sized from the machine's memory: --store-max-bytes / 160 (docs/OPERATIONS.md)"},
    {"snapshot-every", "TRIGGUARD_SNAPSHOT_EVERY", OPT_INT, F(snapshot_every), "100000", 0, I64MAX,
     NULL, 0,
     "file backend: write a snapshot of the tables every this many durable records, and start "
     "from the newest valid one (docs/LEDGER.md \"Snapshots\"); 0 = off: every start replays "
     "the whole ledger"},
    {"limit-entries", "TRIGGUARD_LIMIT_ENTRIES", OPT_INT, F(limit_entries), "1000000", 16,
     TG_CONFIG_STORE_ENTRIES_MAX, NULL, 0,
     "cap on the stateful-limit running totals held in memory, one per (limit, key, window) "
     "(file backend); full = 503 for a PERMIT that would add one"},
    {"approval-entries", "TRIGGUARD_APPROVAL_ENTRIES", OPT_INT, F(approval_entries), "100000", 16,
     TG_CONFIG_STORE_ENTRIES_MAX, NULL, 0,
     "cap on the ESCALATE approvals held in memory (file backend; about 5.5 KiB each); full = "
     "503 for a decision that would escalate"},
    {"store-max-bytes", "TRIGGUARD_STORE_MAX_BYTES", OPT_INT, F(store_max_bytes), "0", 0, I64MAX,
     NULL, 0,
     "cap on the bytes those entries hold, per table (what malloc takes for each: about 160 "
     "per idempotency key); 0 = an eighth of the memory (MemTotal or the cgroup's limit), at "
     "least 64 MiB (docs/OPERATIONS.md)"},
    {"rate-limit-per-tenant", "RATE_LIMIT_PER_TENANT", OPT_INT, F(rate_per_tenant), "0", 0,
     TG_CONFIG_RATE_MAX, NULL, 0, "requests per minute per tenant; 0 = unlimited"},
    {"rate-limit-global", "RATE_LIMIT_GLOBAL", OPT_INT, F(rate_global), "0", 0, TG_CONFIG_RATE_MAX,
     NULL, 0, "requests per minute for the whole server; 0 = unlimited"},
    {"rate-limit-verify", "RATE_LIMIT_VERIFY", OPT_INT, F(rate_verify), "0", 0, TG_CONFIG_RATE_MAX,
     NULL, 0,
     "POST /v1/verify and its aliases (no token: one limit for all callers), per minute; "
     "0 = unlimited"},
    {"rate-limit-burst", "RATE_LIMIT_BURST", OPT_INT, F(rate_burst), "0", 0, TG_CONFIG_BURST_MAX,
     NULL, 0, "extra requests allowed at once above the steady rate; 0 = rate/10"},
    {"bulkhead-tenant", "BULKHEAD_TENANT_MAX_IN_FLIGHT", OPT_INT, F(bulkhead_tenant), "0", 0,
     I64MAX, NULL, 0, "max requests in flight per tenant; 0 = unlimited"},
    {"bulkhead-global", "BULKHEAD_GLOBAL_MAX_IN_FLIGHT", OPT_INT, F(bulkhead_global), "0", 0,
     I64MAX, NULL, 0, "max requests in flight in total; 0 = unlimited"},
    {"threads", "TRIGGUARD_THREADS", OPT_INT, F(threads), "0", 0, 256, NULL, 0,
     "HTTP event threads (epoll thread pool); 0 = one per core (16 with --store postgres, "
     "whose claims wait on the network)"},
    {"max-connections", "TRIGGUARD_MAX_CONNECTIONS", OPT_INT, F(max_connections), "4096", 1, 65536,
     NULL, 0,
     "simultaneous connections accepted, per listener; at start also kept under the open-files "
     "limit (lowered if not given, else refused: docs/OPERATIONS.md, Descriptors)"},
    {"per-ip-connections", "TRIGGUARD_PER_IP_CONNECTIONS", OPT_INT, F(per_ip_connections), "1024",
     0, 65536, NULL, 0, "simultaneous connections from one IP address; 0 = no per-address limit"},
    {"connection-timeout", "TRIGGUARD_CONNECTION_TIMEOUT", OPT_INT, F(connection_timeout_s), "30",
     1, 3600, NULL, 0, "idle connection timeout in seconds; also the most a request body may take"},
    {"drain-timeout", "TRIGGUARD_DRAIN_TIMEOUT", OPT_INT, F(drain_timeout_s), "10", 1, 3600, NULL,
     0,
     "seconds a stop waits for requests in flight (then 503 to those still waiting for the "
     "ledger); the ledger's close gets as long again before the stop gives up (exit 1)"},
    {"connection-memory", "TRIGGUARD_CONNECTION_MEMORY", OPT_INT, F(connection_memory), "32768",
     4096, 1048576, NULL, 0, "libmicrohttpd per-connection memory (headers) in bytes"},
    {"max-body", "TRIGGUARD_MAX_BODY", OPT_INT, F(max_body), "65536", 256, 16777216, NULL, 0,
     "largest request body in bytes (413 beyond)"},
    {"max-url", "TRIGGUARD_MAX_URL", OPT_INT, F(max_url), "8192", 256, 1048576, NULL, 0,
     "longest request path + query in bytes (414 beyond)"},
    {"max-header-bytes", "TRIGGUARD_MAX_HEADER_BYTES", OPT_INT, F(max_header_bytes), "16384", 1024,
     1048576, NULL, 0, "most request header bytes (431 beyond)"},
    {"max-depth", "TRIGGUARD_MAX_DEPTH", OPT_INT, F(max_depth), "32", 2, 1024, NULL, 0,
     "deepest JSON nesting accepted"},
    {"max-string", "TRIGGUARD_MAX_STRING", OPT_INT, F(max_string), "4096", 16, 1048576, NULL, 0,
     "longest JSON string in bytes"},
    {"max-keys", "TRIGGUARD_MAX_KEYS", OPT_INT, F(max_keys), "256", 1, 65536, NULL, 0,
     "most members in one JSON object"},
    {"max-idempotency-key", "TRIGGUARD_MAX_IDEMPOTENCY_KEY", OPT_INT, F(max_idempotency_key), "255",
     1, TG_CONFIG_KEY_MAX, NULL, 0, "longest idempotency key (idempotency_key, intent_id, header)"},
    {"max-nonce", "TRIGGUARD_MAX_NONCE", OPT_INT, F(max_nonce), "255", 1, TG_CONFIG_KEY_MAX, NULL,
     0, "longest nonce in bytes"},
    {"tls-cert", "TRIGGUARD_TLS_CERT", OPT_STR, F(tls_cert), "", 0, 0, NULL, 0,
     "PEM certificate: serve HTTPS (needs --tls-key)"},
    {"tls-key", "TRIGGUARD_TLS_KEY", OPT_STR, F(tls_key), "", 0, 0, NULL, 0,
     "PEM private key for --tls-cert"},
    {"oidc", NULL, OPT_LIST, F(oidc), "", 0, 0, NULL, 0,
     "repeatable NAME=ISSUER: accept JWTs of this OIDC issuer (exact iss) as Bearer tokens; "
     "needs --oidc-jwks and --oidc-audience for NAME (docs/OPERATIONS.md, OIDC callers)"},
    {"oidc-jwks", NULL, OPT_LIST, F(oidc_jwks), "", 0, 0, NULL, 0,
     "repeatable NAME=FILE|URL: the issuer's key set (JWKS): a file, an https:// URL, or an "
     "http:// URL on a loopback host"},
    {"oidc-audience", NULL, OPT_LIST, F(oidc_audience), "", 0, 0, NULL, 0,
     "repeatable NAME=AUD: an audience the issuer's tokens must name (at least one)"},
    {"oidc-tenant-claim", NULL, OPT_LIST, F(oidc_tenant_claim), "", 0, 0, NULL, 0,
     "repeatable NAME=CLAIM: the claim naming the caller's tenant (required for a flag issuer)"},
    {"oidc-actor", NULL, OPT_LIST, F(oidc_actor), "", 0, 0, NULL, 0,
     "repeatable NAME=TEMPLATE: an actor the token may act as, e.g. {repository}:{workflow}; "
     "none = unbound"},
    {"oidc-config", "TRIGGUARD_OIDC_CONFIG", OPT_STR, F(oidc_config), "", 0, 0, NULL, 0,
     "JSON file of OIDC issuers and their claim mappings (re-read on reload)"},
    {"oidc-ca-file", "TRIGGUARD_OIDC_CA_FILE", OPT_STR, F(oidc_ca_file), "", 0, 0, NULL, 0,
     "PEM CA bundle for fetching JWKS URLs (default: the system's CAs)"},
    {"oidc-refresh", "TRIGGUARD_OIDC_REFRESH", OPT_INT, F(oidc_refresh_s), "300", 10, 86400, NULL,
     0, "seconds between fetches of a JWKS URL (also fetched on an unknown kid)"},
    {"oidc-connect-timeout", "TRIGGUARD_OIDC_CONNECT_TIMEOUT", OPT_INT, F(oidc_connect_timeout_ms),
     "2000", 100, 60000, NULL, 0, "ms a JWKS fetch may take to connect"},
    {"oidc-timeout", "TRIGGUARD_OIDC_TIMEOUT", OPT_INT, F(oidc_timeout_ms), "5000", 100, 120000,
     NULL, 0, "ms a whole JWKS fetch may take"},
    {"log-level", "TRIGGUARD_LOG_LEVEL", OPT_STR, F(log_level), "info", 0, 0,
     "error|warn|info|debug", 0, "least severe level written"},
    {"log-format", "TRIGGUARD_LOG_FORMAT", OPT_STR, F(log_format), "json", 0, 0, "json|text", 0,
     "log line format"},
};

#define N_OPTIONS (sizeof options / sizeof options[0])
_Static_assert(N_OPTIONS <= 128, "tg_config_t.given has one bit per option");

/* "a|b|c" contains exactly `v`? */
static int choice_ok(const char *choices, const char *v) {
    size_t vl = strlen(v);
    const char *p = choices;
    while (*p) {
        const char *bar = strchr(p, '|');
        size_t n = bar ? (size_t)(bar - p) : strlen(p);
        if (n == vl && strncmp(p, v, n) == 0) {
            return 1;
        }
        p += n + (bar ? 1 : 0);
    }
    return 0;
}

static tg_err_t set_option(tg_config_t *cfg, const opt_t *o, const char *val, const char *origin,
                           tg_diag_t *diag) {
    char *field = (char *)cfg + o->offset;
    switch (o->type) {
    case OPT_STR:
        if (strlen(val) >= o->size) {
            return tg_diag_set(diag, TG_ERR_CONFIG, "%s %s: value longer than %zu bytes", origin,
                               o->flag, o->size - 1);
        }
        if (o->choices && !choice_ok(o->choices, val)) {
            return tg_diag_set(diag, TG_ERR_CONFIG, "%s %s: \"%s\" is not one of %s", origin,
                               o->flag, val, o->choices);
        }
        memcpy(field, val, strlen(val) + 1);
        return TG_OK;
    case OPT_BOOL: {
        bool b;
        /* Exactly the two words SPEC §10 uses: the one boolean is an UNSAFE switch, and a
         * spelling that some tools read as false (yes, 1, on) must not turn it on here. An
         * empty value is the same as an unset variable: the default, so that an empty
         * TRIGGUARD_POLICY_STRICT leaves the check on. */
        if (strcmp(val, "true") == 0 || (val[0] == '\0' && strcmp(o->def, "true") == 0)) {
            b = true;
        } else if (strcmp(val, "false") == 0 || val[0] == '\0') {
            b = false;
        } else {
            return tg_diag_set(diag, TG_ERR_CONFIG, "%s %s: \"%s\" is not true or false", origin,
                               o->flag, val);
        }
        memcpy(field, &b, sizeof b);
        return TG_OK;
    }
    case OPT_LIST: {
        tg_config_list_t *l = (tg_config_list_t *)(void *)field;
        size_t n = strlen(val);
        if (n == 0) {
            return TG_OK; /* the (empty) default: a list starts empty */
        }
        if (l->n >= TG_CONFIG_LIST_MAX || n + 1 > sizeof l->buf - l->used) {
            return tg_diag_set(diag, TG_ERR_CONFIG, "%s %s: more than %d values or %d bytes in all",
                               origin, o->flag, TG_CONFIG_LIST_MAX, TG_CONFIG_LIST_BYTES);
        }
        memcpy(l->buf + l->used, val, n + 1);
        l->used += (uint32_t)(n + 1);
        l->n++;
        return TG_OK;
    }
    case OPT_INT: {
        errno = 0;
        long long v = strtoll(val, NULL, 10);
        /* Digits only (strtoll alone would also take leading blanks and a sign); ERANGE is a
         * number too long for 64 bits. */
        if (val[0] == '\0' || val[strspn(val, "0123456789")] != '\0' || errno != 0) {
            return tg_diag_set(diag, TG_ERR_CONFIG, "%s %s: \"%s\" is not an integer", origin,
                               o->flag, val);
        }
        if (v < o->min || v > o->max) {
            return tg_diag_set(diag, TG_ERR_CONFIG,
                               "%s %s: %lld is outside [%" PRId64 ", %" PRId64 "]", origin, o->flag,
                               v, o->min, o->max);
        }
        int64_t iv = (int64_t)v;
        memcpy(field, &iv, sizeof iv);
        return TG_OK;
    }
    }
    return TG_ERR_INTERNAL;
}

const char *tg_config_list_get(const tg_config_list_t *l, uint32_t i) {
    if (l == NULL || i >= l->n) {
        return NULL;
    }
    const char *v = l->buf;
    for (uint32_t k = 0; k < i; k++) {
        v += strlen(v) + 1;
    }
    return v;
}

static const opt_t *find_flag(const char *name, size_t n) {
    for (size_t i = 0; i < N_OPTIONS; i++) {
        if (strlen(options[i].flag) == n && strncmp(options[i].flag, name, n) == 0) {
            return &options[i];
        }
    }
    return NULL;
}

const char *tg_config_durability_name(tg_config_durability_t d) {
    switch (d) {
    case TG_CONFIG_DURABILITY_FSYNC:
        return "fsync";
    case TG_CONFIG_DURABILITY_BATCH:
        return "batch";
    case TG_CONFIG_DURABILITY_NONE:
        return "none";
    }
    return "unknown";
}

/* --admin-listen ADDR:PORT or [V6]:PORT into admin_host / admin_port (port 0: ephemeral,
 * for tests; it must differ from --port and --decide-port on the same address family). */
static tg_err_t parse_admin_listen(tg_config_t *cfg, tg_diag_t *diag) {
    const char *v = cfg->admin_listen;
    const char *colon = strrchr(v, ':');
    size_t hl = colon != NULL ? (size_t)(colon - v) : 0;
    const char *host = v;
    bool bracketed = hl >= 2 && v[0] == '[' && v[hl - 1] == ']';
    if (bracketed) {
        host = v + 1;
        hl -= 2;
    } else if (memchr(v, ':', hl) != NULL) {
        hl = 0; /* an IPv6 address without brackets: "::1:9090" is itself an address */
    }
    if (colon == NULL || hl == 0 || hl >= sizeof cfg->admin_host || colon[1] == '\0' ||
        colon[1 + strspn(colon + 1, "0123456789")] != '\0' || strlen(colon + 1) > 5) {
        return tg_diag_set(diag, TG_ERR_CONFIG,
                           "--admin-listen \"%s\" is not ADDR:PORT (an IPv6 address in brackets)",
                           v);
    }
    memcpy(cfg->admin_host, host, hl);
    cfg->admin_host[hl] = '\0';
    long port = strtol(colon + 1, NULL, 10);
    unsigned char addr[sizeof(struct in6_addr)];
    if (port > 65535 || (inet_pton(AF_INET, cfg->admin_host, addr) != 1 &&
                         inet_pton(AF_INET6, cfg->admin_host, addr) != 1)) {
        return tg_diag_set(diag, TG_ERR_CONFIG,
                           "--admin-listen \"%s\": not an IPv4 or IPv6 address with a port "
                           "0..65535",
                           v);
    }
    cfg->admin_port = (int64_t)port;
    if (port != 0 && (port == cfg->port || port == cfg->decide_port) &&
        strcmp(cfg->admin_host, cfg->listen) == 0) {
        return tg_diag_set(diag, TG_ERR_CONFIG,
                           "--admin-listen must not be the API's address and port");
    }
    return TG_OK;
}

/* Rules that involve more than one option. */
static tg_err_t check_cross(tg_config_t *cfg, tg_diag_t *diag) {
    unsigned char addr[sizeof(struct in6_addr)];
    /* Checked here, not only when binding, so --check-config refuses what serve refuses. */
    if (inet_pton(AF_INET, cfg->listen, addr) != 1 && inet_pton(AF_INET6, cfg->listen, addr) != 1) {
        return tg_diag_set(diag, TG_ERR_CONFIG,
                           "--listen \"%s\" is not an IPv4 or IPv6 address (no host names, no "
                           "port)",
                           cfg->listen);
    }
    if ((cfg->tls_cert[0] != '\0') != (cfg->tls_key[0] != '\0')) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "--tls-cert and --tls-key go together");
    }
    if (cfg->decide_port != 0 && cfg->decide_port == cfg->port) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "--decide-port must differ from --port");
    }
    if (cfg->admin_listen[0] != '\0') {
        tg_err_t rc = parse_admin_listen(cfg, diag);
        if (rc != TG_OK) {
            return rc;
        }
    }
    cfg->ledger_no_create = strcmp(cfg->ledger_create, "never") == 0;
    cfg->store_postgres = strcmp(cfg->store_name, "postgres") == 0;
    if (cfg->store_postgres && cfg->database_url[0] == '\0') {
        return tg_diag_set(diag, TG_ERR_CONFIG,
                           "--store postgres needs --database-url (or TRIGGUARD_DATABASE_URL)");
    }
    if (cfg->store_postgres && strcmp(cfg->durability_name, "fsync") != 0) {
        /* PostgreSQL's own commit is the durability: a response leaves after COMMIT with
         * synchronous_commit on, never earlier; there is no weaker mode to choose. */
        return tg_diag_set(diag, TG_ERR_CONFIG,
                           "--durability %s applies to the file ledger only: with --store "
                           "postgres a response always waits for its transaction's commit",
                           cfg->durability_name);
    }
    if (cfg->checkpoint_min_interval_ms > cfg->checkpoint_interval_ms) {
        return tg_diag_set(diag, TG_ERR_CONFIG,
                           "--checkpoint-min-interval %lld is more than --checkpoint-interval "
                           "%lld",
                           (long long)cfg->checkpoint_min_interval_ms,
                           (long long)cfg->checkpoint_interval_ms);
    }
    cfg->receipt_signing_batch = strcmp(cfg->receipt_signing, "batch") == 0;
    if (cfg->receipt_signing_batch && cfg->log_key[0] == '\0') {
        /* a batch receipt is authentic only through the log's signed checkpoint */
        return tg_diag_set(diag, TG_ERR_CONFIG,
                           "--receipt-signing batch needs the transparency log (--log-key)");
    }
    if (strcmp(cfg->durability_name, "batch") == 0) {
        cfg->durability = TG_CONFIG_DURABILITY_BATCH;
    } else if (strcmp(cfg->durability_name, "none") == 0) {
        cfg->durability = TG_CONFIG_DURABILITY_NONE;
    } else {
        cfg->durability = TG_CONFIG_DURABILITY_FSYNC;
    }
    return TG_OK;
}

/* ---- where values come from: flags, the environment, the config file --------------------
 *
 * Precedence: a flag, then the environment, then --config FILE, then the default. A source is
 * only read for the options the sources above it left unset, so a flag makes a bad
 * environment value (PORT=8080x) or file line irrelevant instead of fatal. */

/* TRIGGUARD_ + the flag in upper case, '-' as '_' (TRIGGUARD_RATE_LIMIT_PER_TENANT). Every
 * option but the repeatable lists has this name; the table's env column is today's name,
 * kept as an alias where it differs. */
static void canonical_env(char out[64], const opt_t *o) {
    size_t n = 0;
    const char *pre = "TRIGGUARD_";
    while (*pre && n < 63) {
        out[n++] = *pre++;
    }
    for (const char *c = o->flag; *c && n < 63; c++) {
        out[n++] = *c == '-' ? '_' : (char)(*c >= 'a' && *c <= 'z' ? *c - 'a' + 'A' : *c);
    }
    out[n] = '\0';
}

/* The option's environment value (NULL when unset) and the name it came from. Both names
 * set to different values is an error: which one the operator meant cannot be guessed. */
static tg_err_t env_value(const opt_t *o, const char **val, char name[64], tg_diag_t *diag) {
    *val = NULL;
    if (o->type == OPT_LIST) {
        return TG_OK; /* repeatable: flags or the config file only */
    }
    canonical_env(name, o);
    const char *canon = getenv(name);
    const char *alias = o->env != NULL && strcmp(o->env, name) != 0 ? getenv(o->env) : NULL;
    if (canon != NULL && alias != NULL && strcmp(canon, alias) != 0) {
        return tg_diag_set(diag, TG_ERR_CONFIG,
                           "environment %s and %s are both set, to different values: unset one",
                           name, o->env);
    }
    if (canon == NULL && alias != NULL) {
        (void)snprintf(name, 64, "%s", o->env);
    }
    *val = canon != NULL ? canon : alias;
    return TG_OK;
}

static void mark(uint64_t set[2], const opt_t *o) {
    size_t i = (size_t)(o - options);
    set[i / 64] |= UINT64_C(1) << (i % 64);
}

static bool marked(const uint64_t set[2], const opt_t *o) {
    size_t i = (size_t)(o - options);
    return (set[i / 64] >> (i % 64)) & 1u;
}

/* Reads --config FILE into buf (NUL-terminated): a regular file of at most
 * TG_CONFIG_FILE_MAX bytes. */
static tg_err_t read_config_file(const char *path, char *buf, size_t cap, tg_diag_t *diag) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "--config %s: cannot open: %s", path,
                           strerror(errno));
    }
    size_t n = fread(buf, 1, cap, f);
    bool err = ferror(f) != 0;
    (void)fclose(f);
    if (err) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "--config %s: cannot read (not a file?)", path);
    }
    if (n >= cap) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "--config %s: larger than %d bytes", path,
                           TG_CONFIG_FILE_MAX);
    }
    buf[n] = '\0';
    if (strlen(buf) != n) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "--config %s: contains a NUL byte", path);
    }
    return TG_OK;
}

static bool blank(char c) { return c == ' ' || c == '\t'; }

/* One `name = value` line of the config file (comments and blank lines already skipped):
 * trimmed, the value optionally in double quotes (no escapes: a value never needs one). */
static tg_err_t file_line(tg_config_t *cfg, const uint64_t skip[2], uint64_t seen[2], char *line,
                          const char *where, tg_diag_t *diag) {
    char *eq = strchr(line, '=');
    if (eq == NULL) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "%s: expected \"name = value\"", where);
    }
    char *ne = eq;
    while (ne > line && blank(ne[-1])) {
        ne--;
    }
    const opt_t *o = find_flag(line, (size_t)(ne - line));
    if (o == NULL) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "%s: unknown option \"%.*s\" (see serve --help)",
                           where, (int)(ne - line), line);
    }
    char *v = eq + 1;
    while (blank(*v)) {
        v++;
    }
    size_t vl = strlen(v);
    while (vl > 0 && blank(v[vl - 1])) {
        vl--;
    }
    v[vl] = '\0';
    if (vl >= 2 && v[0] == '"' && v[vl - 1] == '"') {
        v[vl - 1] = '\0';
        v++;
    }
    if (o->type != OPT_LIST && marked(seen, o)) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "%s: %s is given twice", where, o->flag);
    }
    mark(seen, o);
    if (marked(skip, o)) {
        return TG_OK; /* a flag or the environment set it: this line is not read */
    }
    char origin[TG_CONFIG_STR_MAX + 32];
    (void)snprintf(origin, sizeof origin, "%s:", where);
    return set_option(cfg, o, v, origin, diag);
}

/* --config FILE: every line a `name = value` of the option table, `#` comments. */
static tg_err_t apply_file(tg_config_t *cfg, const char *path, const uint64_t skip[2],
                           uint64_t applied[2], tg_diag_t *diag) {
    char *buf = malloc(TG_CONFIG_FILE_MAX + 1);
    if (buf == NULL) {
        return TG_ERR_NOMEM;
    }
    buf[0] = '\0'; /* what the loop below reads if the file cannot be */
    tg_err_t rc = read_config_file(path, buf, TG_CONFIG_FILE_MAX + 1, diag);
    uint64_t seen[2] = {0, 0};
    char *line = buf;
    for (unsigned no = 1; rc == TG_OK && line != NULL && *line != '\0'; no++) {
        char *nl = strchr(line, '\n');
        if (nl != NULL) {
            *nl = '\0';
        }
        char where[TG_CONFIG_STR_MAX + 16];
        (void)snprintf(where, sizeof where, "%s:%u", path, no);
        for (const char *c = line; *c; c++) {
            if ((unsigned char)*c < 0x20 && *c != '\t') {
                rc = tg_diag_set(diag, TG_ERR_CONFIG, "%s: control character in the line", where);
                break;
            }
        }
        while (rc == TG_OK && blank(*line)) {
            line++;
        }
        if (rc == TG_OK && *line != '\0' && *line != '#') {
            rc = file_line(cfg, skip, seen, line, where, diag);
        }
        line = nl != NULL ? nl + 1 : NULL;
    }
    for (size_t i = 0; rc == TG_OK && i < N_OPTIONS; i++) {
        if (marked(seen, &options[i]) && !marked(skip, &options[i])) {
            mark(applied, &options[i]);
        }
    }
    free(buf);
    return rc;
}

/* The meta flags of argv (help, print, check, --config) and which options flags set. */
static tg_err_t scan_flags(int argc, char **argv, tg_config_action_t *action, const char **file,
                           uint64_t flagged[2], tg_diag_t *diag) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            *action = TG_CONFIG_HELP;
            return TG_OK;
        }
        if (strcmp(a, "--print-config") == 0) {
            *action = TG_CONFIG_PRINT;
            continue;
        }
        if (strcmp(a, "--check-config") == 0) {
            *action = TG_CONFIG_CHECK;
            continue;
        }
        if (strncmp(a, "--", 2) != 0) {
            return tg_diag_set(diag, TG_ERR_CONFIG, "unexpected argument \"%s\"", a);
        }
        const char *name = a + 2;
        const char *eq = strchr(name, '=');
        size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
        if (nlen == 6 && strncmp(name, "config", 6) == 0) {
            if (*file != NULL) {
                return tg_diag_set(diag, TG_ERR_CONFIG, "--config is given twice");
            }
            if (eq == NULL && i + 1 >= argc) {
                return tg_diag_set(diag, TG_ERR_CONFIG, "option --config needs a value");
            }
            *file = eq ? eq + 1 : argv[++i];
            continue;
        }
        const opt_t *o = find_flag(name, nlen);
        if (o == NULL) {
            return tg_diag_set(diag, TG_ERR_CONFIG, "unknown option \"--%.*s\" (see --help)",
                               (int)nlen, name);
        }
        if (eq == NULL && o->type != OPT_BOOL) {
            if (i + 1 >= argc) {
                return tg_diag_set(diag, TG_ERR_CONFIG, "option --%s needs a value", o->flag);
            }
            i++;
        }
        mark(flagged, o);
    }
    return TG_OK;
}

/* The flags themselves, in order (a repeated flag: the last wins; a list: each adds). */
static tg_err_t apply_flags(tg_config_t *cfg, int argc, char **argv, tg_diag_t *diag) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--print-config") == 0 || strcmp(a, "--check-config") == 0) {
            continue;
        }
        const char *name = a + 2;
        const char *eq = strchr(name, '=');
        size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
        if (nlen == 6 && strncmp(name, "config", 6) == 0) {
            i += eq == NULL;
            continue;
        }
        const opt_t *o = find_flag(name, nlen); /* scan_flags checked every name */
        const char *val = eq ? eq + 1 : o->type == OPT_BOOL ? "true" : argv[++i];
        tg_err_t rc = set_option(cfg, o, val, "option", diag);
        if (rc) {
            return rc;
        }
    }
    return TG_OK;
}

tg_err_t tg_config_parse(tg_config_t *cfg, tg_config_action_t *action, int argc, char **argv,
                         tg_diag_t *diag) {
    tg_err_t rc;
    memset(cfg, 0, sizeof *cfg);
    *action = TG_CONFIG_RUN;
    for (size_t i = 0; i < N_OPTIONS; i++) {
        rc = set_option(cfg, &options[i], options[i].def, "default", diag);
        if (rc) {
            return rc;
        }
    }
    const char *file = NULL;
    uint64_t flagged[2] = {0, 0}, from_env[2] = {0, 0}, from_file[2] = {0, 0};
    rc = scan_flags(argc, argv, action, &file, flagged, diag);
    if (rc || *action == TG_CONFIG_HELP) {
        return rc;
    }
    /* Which options the environment sets, among those no flag set (never read otherwise). */
    const char *env_vals[N_OPTIONS];
    char env_names[N_OPTIONS][64];
    for (size_t i = 0; i < N_OPTIONS; i++) {
        env_vals[i] = NULL;
        if (!marked(flagged, &options[i])) {
            rc = env_value(&options[i], &env_vals[i], env_names[i], diag);
            if (rc) {
                return rc;
            }
            if (env_vals[i] != NULL) {
                mark(from_env, &options[i]);
            }
        }
    }
    if (file != NULL) {
        uint64_t skip[2] = {flagged[0] | from_env[0], flagged[1] | from_env[1]};
        rc = apply_file(cfg, file, skip, from_file, diag);
        if (rc) {
            return rc;
        }
        (void)snprintf(cfg->config_file, sizeof cfg->config_file, "%s", file);
    }
    for (size_t i = 0; i < N_OPTIONS; i++) {
        if (env_vals[i] != NULL) {
            char origin[96];
            (void)snprintf(origin, sizeof origin, "environment %.63s for", env_names[i]);
            rc = set_option(cfg, &options[i], env_vals[i], origin, diag);
            if (rc) {
                return rc;
            }
        }
    }
    rc = apply_flags(cfg, argc, argv, diag);
    if (rc) {
        return rc;
    }
    for (size_t i = 0; i < 2; i++) {
        cfg->given[i] = flagged[i] | from_env[i] | from_file[i];
    }
    return check_cross(cfg, diag);
}

bool tg_config_given(const tg_config_t *cfg, const char *flag) {
    const opt_t *o = find_flag(flag, strlen(flag));
    return o != NULL && marked(cfg->given, o);
}

void tg_config_usage(FILE *out) {
    fprintf(out, "usage: trigguard serve [--config FILE] [options]\n\n"
                 "Options (flag, environment name, default). A flag wins over the environment,\n"
                 "which wins over the --config file (`name = value` lines with the flag names,\n"
                 "# comments), which wins over the default.\n\n");
    for (size_t i = 0; i < N_OPTIONS; i++) {
        const opt_t *o = &options[i];
        char left[64];
        if (o->type == OPT_BOOL) {
            (void)snprintf(left, sizeof left, "--%s", o->flag);
        } else if (o->type == OPT_LIST) {
            (void)snprintf(left, sizeof left, "--%s NAME=VALUE", o->flag);
        } else {
            (void)snprintf(left, sizeof left, "--%s %s", o->flag,
                           o->type == OPT_INT ? "N" : (o->choices ? "MODE" : "VALUE"));
        }
        fprintf(out, "  %-36s %s\n", left, o->help);
        char env[64];
        canonical_env(env, o);
        if (o->type == OPT_LIST) {
            fprintf(out, "  %-36s repeatable, no env; default none", "");
        } else if (o->env != NULL && strcmp(o->env, env) != 0) {
            fprintf(out, "  %-36s env %s (or %s); default \"%s\"", "", env, o->env, o->def);
        } else {
            fprintf(out, "  %-36s env %s; default \"%s\"", "", env, o->def);
        }
        if (o->type == OPT_INT) {
            fprintf(out, "; range %" PRId64 "..%" PRId64, o->min, o->max);
        }
        if (o->choices) {
            fprintf(out, "; one of %s", o->choices);
        }
        fputc('\n', out);
    }
    fprintf(out, "\n  %-36s %s\n  %-36s %s\n  %-36s %s\n  %-36s %s\n", "--config FILE",
            "read options from FILE (the format --print-config writes)", "--print-config",
            "print the effective configuration (secrets redacted) and exit", "--check-config",
            "validate the configuration, policy and keys, then exit", "--help", "this text");
}

bool tg_config_path_showable(const char *v) {
    if (strstr(v, "BEGIN") != NULL || strchr(v, '\n') != NULL || strchr(v, '\r') != NULL) {
        return false;
    }
    for (const char *c = v; *c != '\0'; c++) {
        bool b64 = (*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') ||
                   (*c >= '0' && *c <= '9') || *c == '+' || *c == '/' || *c == '=';
        if (!b64) {
            return true;
        }
    }
    return false;
}

void tg_config_print(FILE *out, const tg_config_t *cfg) {
    if (cfg->config_file[0] != '\0') {
        fprintf(out, "# with --config %s\n", cfg->config_file);
    }
    for (size_t i = 0; i < N_OPTIONS; i++) {
        const opt_t *o = &options[i];
        const char *field = (const char *)cfg + o->offset;
        if (o->type == OPT_LIST) { /* one line per value: the --config format */
            const tg_config_list_t *l = (const tg_config_list_t *)(const void *)field;
            if (l->n == 0) {
                fprintf(out, "# %s: none\n", o->flag);
            }
            for (uint32_t k = 0; k < l->n; k++) {
                fprintf(out, "%s = %s\n", o->flag, tg_config_list_get(l, k));
            }
            continue;
        }
        fprintf(out, "%s = ", o->flag);
        switch (o->type) {
        case OPT_STR:
            if (o->secret && field[0] != '\0' && strstr(field, "-----BEGIN") != NULL) {
                fputs("(PEM text, redacted)", out);
            } else if (o->secret && field[0] != '\0' &&
                       ((strcmp(o->flag, "key") != 0 && strcmp(o->flag, "log-key") != 0) ||
                        !tg_config_path_showable(field))) {
                fputs("(redacted)", out);
            } else {
                fputs(field, out);
            }
            break;
        case OPT_BOOL: {
            bool b;
            memcpy(&b, field, sizeof b);
            fputs(b ? "true" : "false", out);
            break;
        }
        case OPT_LIST:
            break; /* above */
        case OPT_INT: {
            int64_t v;
            memcpy(&v, field, sizeof v);
            fprintf(out, "%" PRId64, v);
            break;
        }
        }
        fputc('\n', out);
    }
}
