/* cmd_keygen.c — `trigguard keygen`: a new Ed25519 key as a 0600 PKCS#8 PEM file. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "trigguard/keys.h"

static void keygen_usage(FILE *out) {
    fprintf(out,
            "usage: trigguard keygen --out FILE [--key-id ID]\n"
            "\n"
            "Generates an Ed25519 signing key and writes it to FILE as a PKCS#8 PEM (the\n"
            "format of `openssl genpkey -algorithm ed25519`), mode 0600. An existing FILE is\n"
            "never overwritten. With --key-id (1..64 chars of [A-Za-z0-9._:-]) the id is\n"
            "written into FILE as a \"" TG_KEY_ID_LINE " ID\" line before the PEM block\n"
            "(openssl ignores it); without it the key id is \"tg-\" + 16 hex of SHA-256(public\n"
            "key). Prints the key id line and the public key PEM on stdout (never the private\n"
            "key); that output is itself a public key file trigguard can load.\n"
            "\n"
            "exit status: 0 written, 2 usage error or FILE exists or cannot be written\n");
}

int tg_cmd_keygen(int argc, char **argv) {
    const char *out_path = NULL, *key_id = NULL;
    tg_key_t key;
    tg_buf_t pub;
    tg_diag_t diag = {{0}};
    int status = TG_EXIT_USAGE;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            keygen_usage(stdout);
            return TG_EXIT_OK;
        }
        if (strcmp(argv[i], "--out") == 0 && i + 1 < argc && out_path == NULL) {
            out_path = argv[++i];
        } else if (strcmp(argv[i], "--key-id") == 0 && i + 1 < argc) {
            key_id = argv[++i];
        } else {
            fprintf(stderr, "trigguard keygen: unexpected argument '%s'\n\n", argv[i]);
            keygen_usage(stderr);
            return TG_EXIT_USAGE;
        }
    }
    if (out_path == NULL) {
        fprintf(stderr, "trigguard keygen: --out FILE is required\n\n");
        keygen_usage(stderr);
        return TG_EXIT_USAGE;
    }
    /* "-" is standard input or output in the other commands; a private key goes only to a
     * new file of mode 0600, never to a terminal or a pipe, so refuse it rather than
     * quietly create a file named "-". */
    if (strcmp(out_path, "-") == 0) {
        fprintf(stderr, "trigguard keygen: --out - is refused: the private key is written "
                        "only to a new file (mode 0600)\n");
        return TG_EXIT_USAGE;
    }
    if (key_id != NULL && !tg_key_id_valid(key_id, strlen(key_id))) {
        fprintf(stderr,
                "trigguard keygen: invalid --key-id (want 1..%d chars of "
                "[A-Za-z0-9._:-])\n",
                TG_KEY_ID_MAX);
        return TG_EXIT_USAGE;
    }
    tg_buf_init(&pub, 4096);
    tg_err_t rc = tg_key_generate(&key, key_id);
    if (rc) {
        fprintf(stderr, "trigguard keygen: cannot generate a key: %s\n", tg_strerror(rc));
        goto done;
    }
    rc = tg_key_save_private(out_path, &key, key_id != NULL, &diag);
    if (rc) {
        fprintf(stderr, "trigguard keygen: %s\n", diag.msg);
        goto done;
    }
    rc = tg_key_public_pem(&pub, &key);
    if (rc) {
        fprintf(stderr, "trigguard keygen: cannot encode the public key: %s\n", tg_strerror(rc));
        goto done;
    }
    printf("%s %s\n%s", TG_KEY_ID_LINE, key.key_id, pub.data);
    status = TG_EXIT_OK; /* a failed write is main's to report (finish) */
done:
    tg_key_wipe(&key);
    tg_buf_free(&pub);
    return status;
}
