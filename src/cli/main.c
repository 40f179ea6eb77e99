/* main.c — the trigguard binary: dispatch argv[1] to its subcommand. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "trigguard/io.h"
#include "trigguard/version.h"

typedef struct {
    const char *name;
    tg_cmd_fn fn;
    const char *summary;
} tg_cmd_entry_t;

/* Subcommands in the order `trigguard --help` lists them. */
static const tg_cmd_entry_t tg_commands[] = {
    {"canon", tg_cmd_canon, "RFC 8785 canonical JSON (or its SHA-256) of stdin"},
    {"keygen", tg_cmd_keygen, "generate an Ed25519 signing key (PKCS#8 PEM, mode 0600)"},
    {"keys", tg_cmd_keys, "print keys.json (key discovery) for PEM key files"},
    {"receipt", tg_cmd_receipt, "receipt sign: sign receipt fields with a private key"},
    {"verify", tg_cmd_verify, "verify a signed receipt offline (VALID / INVALID: reason)"},
    {"check", tg_cmd_check, "decide a request file in-process (PERMIT 0, DENY 3, SILENCE 4)"},
    {"policy", tg_cmd_policy, "policy check|test: validate a bundle; run its tests"},
    {"serve", tg_cmd_serve, "run the authorization daemon (HTTP API, signed receipts)"},
    {"ledger", tg_cmd_ledger, "ledger verify|dump|append: check the receipt ledger offline"},
    {"log", tg_cmd_log, "log audit URL|DIR: check a transparency log's roots and checkpoints"},
    {"token", tg_cmd_token, "token create|list|revoke: bearer tokens in a tokens file"},
    {"db", tg_cmd_db, "db migrate|status: the PostgreSQL schema (docs/POSTGRES.md)"},
    {NULL, NULL, NULL},
};

static void usage(FILE *out) {
    fprintf(out, "usage: trigguard <command> [options]\n\ncommands:\n");
    for (size_t i = 0; tg_commands[i].name != NULL; i++) {
        fprintf(out, "  %-10s %s\n", tg_commands[i].name, tg_commands[i].summary);
    }
    fprintf(out, "  %-10s %s\n", "version", "print the version (also --version)");
    fprintf(out, "\n`trigguard <command> --help` describes each command.\n");
    fprintf(out, "The HTTP API of `serve`: docs/API.md and docs/openapi.yaml in the sources.\n");
}

/* Every file a command reads goes through tg_read_file (or tg_read_fd for "-"), so the
 * caps, the FIFO refusal and the messages are those of the daemon's own files. */
static char *read_input(const char *path, size_t max, size_t *len_out, unsigned flags) {
    tg_diag_t diag = {{0}};
    tg_file_t f;
    tg_err_t rc = strcmp(path, "-") == 0
                      ? tg_read_fd(&f, STDIN_FILENO, max, "standard input", flags, &diag)
                      : tg_read_file(&f, path, max, path, flags, &diag);
    if (rc) {
        fprintf(stderr, "trigguard: %s\n", diag.msg);
        return NULL;
    }
    if (len_out != NULL) {
        *len_out = f.len;
    }
    return f.data;
}

char *tg_cli_read_file(const char *path, size_t max, size_t *len_out) {
    return read_input(path, max, len_out, 0);
}

char *tg_cli_read_secret_file(const char *path, size_t max, size_t *len_out) {
    return read_input(path, max, len_out, TG_READ_SECRET);
}

bool tg_cli_add_keys(tg_keyring_t *ring, const char *path, bool is_json, const char *cmd) {
    tg_diag_t diag = {{0}};
    tg_err_t rc;
    if (is_json) {
        size_t len = 0;
        char *text = tg_cli_read_file(path, (size_t)1024 * 1024, &len);
        if (text == NULL) {
            return false;
        }
        rc = tg_keyring_load_keys_json(ring, text, len, &diag);
        free(text);
    } else {
        tg_key_t key;
        rc = tg_key_load_file(&key, path, NULL, &diag);
        if (rc == TG_OK) {
            /* a key file named on the command line is trusted by its signature, whatever
             * id a receipt states (an openssl export has lost the id line) */
            rc = tg_keyring_add_anchor(ring, &key);
            if (rc) {
                (void)snprintf(diag.msg, sizeof diag.msg, "key %s: %s", key.key_id,
                               tg_strerror(rc));
            }
        }
        tg_key_wipe(&key);
    }
    if (rc) {
        fprintf(stderr, "trigguard %s: %s: %s\n", cmd, path,
                diag.msg[0] ? diag.msg : tg_strerror(rc));
        return false;
    }
    return true;
}

/* Every command's answer ends here. One that did not reach stdout (a full disk, a closed
 * file) is a failure with a message, never a silent exit 0: for `check`, 0 means PERMIT. */
static int finish(const char *cmd, int status) {
    errno = 0;
    int flush_err = fflush(stdout) != 0 ? errno : 0;
    if (!ferror(stdout)) {
        return status;
    }
    fprintf(stderr, "trigguard%s%s: error writing standard output%s%s\n", cmd ? " " : "",
            cmd ? cmd : "", flush_err ? ": " : "", flush_err ? strerror(flush_err) : "");
    return TG_EXIT_USAGE;
}

static int run(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return TG_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        if (argc > 2) {
            fprintf(stderr, "trigguard: %s takes no arguments\n", cmd);
            return TG_EXIT_USAGE;
        }
        printf("trigguard %s (protocol %s, commit %s)\n", TG_VERSION, TG_PROTOCOL_VERSION,
               TG_GIT_COMMIT);
        return TG_EXIT_OK;
    }
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return TG_EXIT_OK;
    }
    for (size_t i = 0; tg_commands[i].name != NULL; i++) {
        if (strcmp(cmd, tg_commands[i].name) == 0) {
            return tg_commands[i].fn(argc - 1, argv + 1);
        }
    }
    fprintf(stderr, "trigguard: unknown command '%s'\n\n", cmd);
    usage(stderr);
    return TG_EXIT_USAGE;
}

int main(int argc, char **argv) {
    int status = run(argc, argv);
    return finish(argc >= 2 ? argv[1] : NULL, status);
}
