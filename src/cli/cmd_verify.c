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
            "DOCUMENT.json|-\n"
            "\n"
            "Verifies a signed receipt offline, in the order of SPEC section 5: shape, key,\n"
            "Ed25519 signature over receiptHash, receiptHash recomputed from the fields,\n"
            "expiry. '-' reads the document from stdin. The document is the receipt, or\n"
            "{\"receipt\": {...}} as POST /v1/verify takes it, or the whole response of\n"
            "/v1/evaluate or /execute (its receipt is verified, and must carry the response's\n"
            "execution_id, request_hash and decision).\n"
            "\n"
            "Keys, both repeatable:\n"
            "  --keys keys.json  a key discovery document (/.well-known/trigguard/keys.json,\n"
            "                    `trigguard keys`): the receipt's authorityKeyId picks the key.\n"
            "  --key KEY.pem     a PEM key file (private or public), trusted as given: a\n"
            "                    receipt its key signed verifies whatever its authorityKeyId\n"
            "                    says (a key exported with `openssl pkey -pubout` has lost its\n"
            "                    trigguard-key-id line and so its id); the output then names\n"
            "                    the file.\n"
            "--now TIME replaces the current time for the expiry check: any RFC 3339 time,\n"
            "e.g. 2026-11-30T05:40:10.123Z, 2026-11-30T07:40:10+02:00, 2026-11-30t05:40:10z.\n"
            "\n"
            "Prints one line:\n"
            "  VALID                      authentic and unexpired\n"
            "  EXPIRED: since <expiresAt> (now <TIME>) ...\n"
            "                             authentic (signature and hash hold) but no longer\n"
            "                             authorizing anything\n"
            "  INVALID: <reason> (<details>)\n"
            "                             reason one of malformed, unknown_key, bad_signature,\n"
            "                             hash_mismatch\n"
            "followed by \"(signed by --key FILE ...)\" when a --key file verified a receipt\n"
            "that names another key id.\n"
            "\n"
            "exit status: 0 VALID, 1 INVALID, 6 EXPIRED, 2 unusable input (unreadable file,\n"
            "not JSON, bad keys.json or key file, bad --now, usage error)\n");
}

/* The --key files given, by the key id each got, to name the one that verified. */
typedef struct {
    const char *path[TG_KEYRING_MAX];
    char key_id[TG_KEYRING_MAX][TG_KEY_ID_MAX + 1];
    size_t n;
} key_files_t;

static const char *key_file_of(const key_files_t *kf, const tg_key_t *key) {
    for (size_t i = 0; i < kf->n; i++) {
        if (strcmp(kf->key_id[i], key->key_id) == 0) {
            return kf->path[i];
        }
    }
    return "?";
}

/* " (signed by --key FILE, key id K; the receipt names key id N)" when an anchor whose id
 * differs verified the signature, else "": who vouches for the receipt is then not what
 * the receipt says. */
static void print_signer(const key_files_t *kf, const tg_receipt_verdict_t *vd) {
    if (vd->key != NULL && vd->by_anchor) {
        printf(" (signed by --key %s, key id %s; the receipt names key id %s)",
               key_file_of(kf, vd->key), vd->key->key_id, vd->key_id);
    }
}

int tg_cmd_verify(int argc, char **argv) {
    const char *receipt_path = NULL;
    tg_keyring_t ring;
    key_files_t kf;
    tg_diag_t diag = {{0}};
    tg_receipt_verdict_t vd;
    int64_t now_ms = tg_clock_now_ms();
    char *text = NULL;
    size_t len = 0;
    int status = TG_EXIT_USAGE;

    memset(&kf, 0, sizeof kf);
    tg_keyring_init(&ring);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            verify_usage(stdout);
            status = TG_EXIT_OK;
            goto done;
        } else if ((strcmp(a, "--keys") == 0 || strcmp(a, "--key") == 0) && i + 1 < argc) {
            bool is_json = strcmp(a, "--keys") == 0;
            if (!tg_cli_add_keys(&ring, argv[++i], is_json, "verify")) {
                goto done;
            }
            if (!is_json && kf.n < TG_KEYRING_MAX) {
                kf.path[kf.n] = argv[i];
                memcpy(kf.key_id[kf.n], ring.entries[ring.count - 1].key.key_id,
                       sizeof kf.key_id[kf.n]);
                kf.n++;
            }
        } else if (strcmp(a, "--now") == 0 && i + 1 < argc) {
            i++;
            if (tg_time_parse_rfc3339_ms(&now_ms, argv[i], strlen(argv[i])) != TG_OK) {
                fprintf(stderr,
                        "trigguard verify: --now '%s' is not an RFC 3339 time between 1970 and "
                        "9999, like 2026-11-30T05:40:10.123Z or 2026-11-30T07:40:10+02:00\n",
                        argv[i]);
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
    tg_err_t rc = tg_receipt_verify_text(&ring, text, len, now_ms, &vd, &diag);
    if (rc == TG_OK) {
        printf("VALID");
        print_signer(&kf, &vd);
        /* SPEC §11.1 "authorizes": said for an observe receipt, valid yet authorizing
         * nothing; a v1 receipt's line stays what v1 scripts read (its decision says it) */
        if (vd.observe) {
            printf("; authorizes: false (observe_mode)");
        } else if (vd.escalate) {
            /* SPEC §11.2: evidence of an escalation, never an authorization */
            printf("; authorizes: false (pending_approval)");
        }
        printf("\n");
        status = TG_EXIT_OK;
    } else if (rc == TG_ERR_RECEIPT_EXPIRED) {
        char now_text[TG_TIME_ISO_LEN + 1];
        if (tg_time_format_ms(now_text, now_ms) != TG_OK) {
            memcpy(now_text, "(out of range)", 15);
        }
        printf("EXPIRED: since %s (now %s); the signature and hash hold, but the receipt no "
               "longer authorizes anything",
               vd.expires_at, now_text);
        print_signer(&kf, &vd);
        printf("\n");
        status = TG_EXIT_EXPIRED;
    } else if (rc == TG_ERR_RECEIPT_SHAPE || rc == TG_ERR_KEY_UNKNOWN ||
               rc == TG_ERR_RECEIPT_SIGNATURE || rc == TG_ERR_RECEIPT_HASH) {
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
