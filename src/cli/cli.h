/* cli.h — one entry point per subcommand; main.c dispatches on argv[1].
 *
 * Each tg_cmd_<name>(argc, argv) receives argv with argv[0] = the subcommand name
 * and returns the process exit status. Shared exit codes below; a subcommand may
 * define more (check: 3 DENY, 4 SILENCE; verify: 6 EXPIRED) and documents them in its
 * usage text.
 */
#ifndef TRIGGUARD_CLI_H
#define TRIGGUARD_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include <jansson.h>

#include "trigguard/keys.h"
#include "trigguard/ledger.h"
#include "trigguard/note.h"
#include "trigguard/tlog.h"

enum {
    TG_EXIT_OK = 0,
    TG_EXIT_FAIL = 1,     /* a definite "no": INVALID receipt, failed check */
    TG_EXIT_USAGE = 2,    /* bad input or usage: nothing usable was produced */
    TG_EXIT_DENY = 3,     /* check: DENY */
    TG_EXIT_SILENCE = 4,  /* check: SILENCE */
    TG_EXIT_ESCALATE = 5, /* check: ESCALATE (SPEC §11.2) */
    TG_EXIT_EXPIRED = 6   /* verify: authentic but expired, not to be confused with a forgery */
};

typedef int (*tg_cmd_fn)(int argc, char **argv);

/* `db import` (cmd_db_import.c): argv[0] = "import"; url = the default database URL (the
 * environment's, may be NULL), overridden by --database-url. */
int tg_cmd_db_import(int argc, char **argv, const char *url);

/* Reads the file at path ("-": standard input), at most `max` bytes, into a new
 * NUL-terminated heap buffer the caller frees; *len_out (may be NULL) gets its length.
 * Returns NULL, after printing why on stderr (tg_read_file's message, naming the path), on
 * any error: missing, not a regular file, unreadable, over `max`, out of memory. */
char *tg_cli_read_file(const char *path, size_t max, size_t *len_out);

/* The same for key material (a TLS private key): nothing read is left in memory on an
 * error path. On success the caller wipes the buffer before freeing it. */
char *tg_cli_read_secret_file(const char *path, size_t max, size_t *len_out);

/* Adds the keys of one keys.json file (is_json: matched by key id) or one PEM key file
 * (verify-only, a trust anchor: matched by its signature whatever the receipt's key id;
 * it is then the ring's last entry) to ring; on failure prints "trigguard CMD: PATH: why"
 * and returns false. */
bool tg_cli_add_keys(tg_keyring_t *ring, const char *path, bool is_json, const char *cmd);

/* The transparency log (SPEC §12), shared by verify, ledger verify and log audit
 * (cmd_log.c). */

/* Adds a log verifier key to the ring's log keys: arg is a vkey (note.h) or a file holding
 * one; on failure prints "trigguard CMD: --log-key ARG: why" and returns false. */
bool tg_cli_add_log_key(tg_keyring_t *ring, const char *arg, const char *cmd);

/* Verifies a signed checkpoint note[0..n) with the ring's log keys and parses it into *cp
 * (ext cleared): a log key named as the checkpoint's origin must have signed it. *key (may
 * be NULL) gets that key. Errors: TG_ERR_KEY_UNKNOWN (no log key in the ring),
 * TG_ERR_NOTE_*, TG_ERR_CHECKPOINT_MALFORMED, TG_ERR_LIMIT; diag says which. */
tg_err_t tg_cli_checkpoint(const tg_keyring_t *ring, const char *note, size_t n,
                           tg_checkpoint_t *cp, const tg_note_verifier_t **key, tg_diag_t *diag);

/* Decodes a JSON array of padded base64 hashes (at most TG_TLOG_MAX_PROOF, each the one
 * canonical spelling of 32 bytes) into proof[0..*n). TG_ERR_TLOG_PROOF otherwise. */
tg_err_t tg_cli_proof_hashes(const json_t *arr, tg_tlog_hash_t proof[TG_TLOG_MAX_PROOF], size_t *n);

/* Parses GET /v1/log/proof/consistency's answer {"oldSize","newSize","consistencyProof"}.
 * Errors: the JSON parser's, TG_ERR_TLOG_PROOF (another shape); diag says which. */
tg_err_t tg_cli_consistency(const char *text, size_t len, uint64_t *old_size, uint64_t *new_size,
                            tg_tlog_hash_t proof[TG_TLOG_MAX_PROOF], size_t *n, tg_diag_t *diag);

/* The log of a ledger directory recomputed from its records (SPEC §12: every record a leaf,
 * in order; entry = a receipt's receiptHash recomputed from its fields, else the SHA-256 of
 * the payload), keeping the roots of the sizes asked for beforehand. Heap (about 48 KiB). */
#define TG_CLI_LOG_KEEP_MAX 1024                      /* checkpoints a state file keeps */
#define TG_CLI_LOG_WANT_MAX (TG_CLI_LOG_KEEP_MAX + 2) /* those, the current one, spare */
typedef struct tg_cli_logwalk {
    tg_tlog_range_t range;
    size_t n_want, next;
    bool sorted;
    uint64_t want[TG_CLI_LOG_WANT_MAX];
    tg_tlog_hash_t root[TG_CLI_LOG_WANT_MAX];
    bool have[TG_CLI_LOG_WANT_MAX];
} tg_cli_logwalk_t;

tg_cli_logwalk_t *tg_cli_logwalk_new(void); /* NULL: out of memory; free() it */
/* Asks for the root at size (before the first leaf); false when full or too late. */
bool tg_cli_logwalk_want(tg_cli_logwalk_t *w, uint64_t size);
/* Appends one leaf hash (store: as tg_tlog_range_append's, may be NULL). */
tg_err_t tg_cli_logwalk_leaf(tg_cli_logwalk_t *w, const tg_tlog_hash_t *leaf,
                             tg_tlog_store_fn store, void *ctx) TG_MUST_USE;
/* A record's entry and leaf, appended. TG_ERR_LEDGER_CORRUPT (diag) for a receipt whose
 * receiptHash cannot be recomputed. */
tg_err_t tg_cli_logwalk_record(tg_cli_logwalk_t *w, const tg_ledger_record_t *rec,
                               tg_diag_t *diag) TG_MUST_USE;
tg_err_t tg_cli_record_entry(uint8_t entry[32], const tg_ledger_record_t *rec,
                             tg_diag_t *diag) TG_MUST_USE;
/* The root at a wanted size the walk reached; false otherwise. */
bool tg_cli_logwalk_root(tg_cli_logwalk_t *w, uint64_t size, tg_tlog_hash_t *out);

int tg_cmd_log(int argc, char **argv);

int tg_cmd_canon(int argc, char **argv);
int tg_cmd_keygen(int argc, char **argv);
int tg_cmd_keys(int argc, char **argv);
int tg_cmd_receipt(int argc, char **argv);
int tg_cmd_verify(int argc, char **argv);
int tg_cmd_check(int argc, char **argv);
int tg_cmd_policy(int argc, char **argv);
/* `policy test` (cmd_policy_test.c): argv[0] = "test". */
int tg_cmd_policy_test(int argc, char **argv);
int tg_cmd_db(int argc, char **argv);
int tg_cmd_serve(int argc, char **argv);
int tg_cmd_ledger(int argc, char **argv);
/* `ledger archive` (cmd_ledger_archive.c); argv[0] is "archive". */
int tg_cmd_ledger_archive(int argc, char **argv);
int tg_cmd_token(int argc, char **argv);

/* `ledger verify --database-url URL` (cmd_ledger_db.c): every chain in the PostgreSQL schema,
 * each record also through check(ud, ...) (the directory form's per-record check);
 * signatures: that check's count of verified signatures, NULL when keys were not given.
 * Prints the summary or the first fault; returns the exit status. */
int tg_ledger_verify_db(const char *url, tg_ledger_check_fn check, void *ud,
                        const uint64_t *signatures);

#endif /* TRIGGUARD_CLI_H */
