/* cmd_receipt.c — `trigguard receipt sign`: sign receipt fields read from stdin. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "trigguard/canon.h"
#include "trigguard/keys.h"
#include "trigguard/receipt.h"

static void receipt_usage(FILE *out) {
    fprintf(out,
            "usage: trigguard receipt sign --key KEY.pem [--key-id ID] < BODY.json\n"
            "\n"
            "Reads a JSON object with the receipt fields of SPEC section 5 except\n"
            "receiptHash, authoritySignature and authorityKeyId, checks their formats,\n"
            "computes receiptHash = SHA-256 of its RFC 8785 canonical form, signs the 32 hash\n"
            "bytes with the Ed25519 private key KEY.pem (mode 0600) and prints the complete\n"
            "signed receipt in canonical form. --key-id overrides the key's id.\n"
            "\n"
            "exit status: 0 printed, 2 usage error, unusable key or malformed fields\n");
}

static int receipt_sign(int argc, char **argv) {
    const char *key_path = NULL, *key_id = NULL;
    tg_key_t key;
    tg_buf_t out;
    tg_diag_t diag = {{0}};
    json_t *body = NULL;
    char *text = NULL;
    size_t len = 0;
    int status = TG_EXIT_USAGE;

    memset(&key, 0, sizeof key);
    tg_buf_init(&out, 0);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            receipt_usage(stdout);
            return TG_EXIT_OK;
        }
        if (strcmp(argv[i], "--key") == 0 && i + 1 < argc) {
            key_path = argv[++i];
        } else if (strcmp(argv[i], "--key-id") == 0 && i + 1 < argc) {
            key_id = argv[++i];
        } else {
            fprintf(stderr, "trigguard receipt sign: unexpected argument '%s'\n\n", argv[i]);
            receipt_usage(stderr);
            return TG_EXIT_USAGE;
        }
    }
    if (key_path == NULL) {
        fprintf(stderr, "trigguard receipt sign: --key KEY.pem is required\n");
        return TG_EXIT_USAGE;
    }
    tg_err_t rc = tg_key_load_file(&key, key_path, key_id, &diag);
    if (rc) {
        fprintf(stderr, "trigguard receipt sign: %s: %s\n", tg_strerror(rc), diag.msg);
        goto done;
    }
    if (!key.has_secret) {
        fprintf(stderr,
                "trigguard receipt sign: %s holds a public key; signing needs the "
                "private key\n",
                key_path);
        goto done;
    }
    text = tg_cli_read_file("-", TG_RECEIPT_MAX_BYTES, &len);
    if (text == NULL) {
        goto done;
    }
    rc = tg_json_parse(&body, text, len, NULL, &diag);
    if (rc) {
        fprintf(stderr, "trigguard receipt sign: input is not valid JSON: %s\n", diag.msg);
        goto done;
    }
    rc = tg_receipt_sign_json(&out, NULL, &key, body, &diag);
    if (rc) {
        fprintf(stderr, "trigguard receipt sign: %s: %s\n", tg_strerror(rc), diag.msg);
        goto done;
    }
    printf("%s\n", out.data);
    status = TG_EXIT_OK; /* a failed write is main's to report (finish) */
done:
    tg_key_wipe(&key);
    json_decref(body);
    free(text);
    tg_buf_free(&out);
    return status;
}

int tg_cmd_receipt(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "sign") == 0) {
        return receipt_sign(argc - 1, argv + 1);
    }
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
                      strcmp(argv[1], "help") == 0)) {
        receipt_usage(stdout);
        return TG_EXIT_OK;
    }
    if (argc >= 2) {
        fprintf(stderr, "trigguard receipt: unknown subcommand '%s'\n\n", argv[1]);
    }
    receipt_usage(stderr);
    return TG_EXIT_USAGE;
}
