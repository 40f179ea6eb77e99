/* cmd_verify.c — `trigguard verify`: offline receipt verification (SPEC §5). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "trigguard/clock.h"
#include "trigguard/keys.h"
#include "trigguard/receipt.h"

static void verify_usage(FILE *out) {
    fprintf(out,
            "usage: trigguard verify (--keys keys.json | --key KEY.pem)... [--now TIME] "
            "RECEIPT.json|-\n"
            "\n"
            "Verifies a signed receipt offline, in the order of SPEC section 5: shape, known\n"
            "key id, Ed25519 signature over receiptHash, receiptHash recomputed from the\n"
            "fields, expiry. Keys come from a keys.json document (--keys, as served at\n"
            "/.well-known/trigguard/keys.json or printed by `trigguard keys`) and/or PEM key\n"
            "files (--key); both may be repeated. --now (e.g. 2026-11-30T05:40:10.123Z)\n"
            "replaces the current time for the expiry check. '-' reads the receipt from stdin.\n"
            "The document is the receipt itself or {\"receipt\": {...}}, as POST /v1/verify\n"
            "takes it.\n"
            "\n"
            "Prints VALID, or INVALID: <reason> (<details>) with reason one of malformed,\n"
            "unknown_key, bad_signature, hash_mismatch, expired. An expired receipt\n"
            "(INVALID: expired) is authentic -- signature and hash are correct -- but no\n"
            "longer authorizes anything.\n"
            "\n"
            "exit status: 0 VALID, 1 INVALID, 2 unusable input (unreadable file, not JSON,\n"
            "bad keys.json or key file, usage error)\n");
}

int tg_cmd_verify(int argc, char **argv) {
    const char *receipt_path = NULL;
    tg_keyring_t ring;
    tg_diag_t diag = {{0}};
    int64_t now_ms = tg_clock_now_ms();
    char *text = NULL;
    size_t len = 0;
    int status = TG_EXIT_USAGE;

    tg_keyring_init(&ring);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            verify_usage(stdout);
            status = TG_EXIT_OK;
            goto done;
        } else if ((strcmp(a, "--keys") == 0 || strcmp(a, "--key") == 0) && i + 1 < argc) {
            if (!tg_cli_add_keys(&ring, argv[++i], strcmp(a, "--keys") == 0, "verify")) {
                goto done;
            }
        } else if (strcmp(a, "--now") == 0 && i + 1 < argc) {
            i++;
            if (tg_time_parse_ms(&now_ms, argv[i], strlen(argv[i])) != TG_OK) {
                fprintf(stderr, "trigguard verify: --now wants a time like "
                                "2026-11-30T05:40:10.123Z\n");
                goto done;
            }
        } else if ((a[0] != '-' || strcmp(a, "-") == 0) && receipt_path == NULL) {
            receipt_path = a;
        } else {
            fprintf(stderr, "trigguard verify: unexpected argument '%s'\n\n", a);
            verify_usage(stderr);
            goto done;
        }
    }
    if (receipt_path == NULL || ring.count == 0) {
        fprintf(stderr, "trigguard verify: need --keys keys.json (or --key KEY.pem) and a "
                        "receipt file\n\n");
        verify_usage(stderr);
        goto done;
    }
    text = tg_cli_read_file(receipt_path, TG_RECEIPT_MAX_BYTES, &len);
    if (text == NULL) {
        goto done;
    }
    tg_err_t rc = tg_receipt_verify_text(&ring, text, len, now_ms, &diag);
    if (rc == TG_OK) {
        printf("VALID\n");
        status = TG_EXIT_OK;
    } else if (rc == TG_ERR_RECEIPT_SHAPE || rc == TG_ERR_KEY_UNKNOWN ||
               rc == TG_ERR_RECEIPT_SIGNATURE || rc == TG_ERR_RECEIPT_HASH ||
               rc == TG_ERR_RECEIPT_EXPIRED) {
        printf("INVALID: %s (%s)\n", tg_receipt_reason_code(rc), diag.msg);
        status = TG_EXIT_FAIL;
    } else {
        fprintf(stderr, "trigguard verify: %s is not a usable receipt document: %s\n", receipt_path,
                diag.msg[0] ? diag.msg : tg_strerror(rc));
        status = TG_EXIT_USAGE;
    }
done:
    free(text);
    tg_keyring_wipe(&ring);
    return status;
}
