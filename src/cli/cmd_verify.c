/* cmd_verify.c — `trigguard verify`: offline receipt verification (SPEC §5). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "cli.h"
#include "trigguard/clock.h"
#include "trigguard/keys.h"
#include "trigguard/receipt.h"

static void verify_usage(FILE *out) {
    fprintf(out,
            "usage: trigguard verify (--keys keys.json | --key KEY.pem | --log-key VKEY)...\n"
            "                        [--now TIME] [--checkpoint FILE [--consistency FILE]]\n"
            "                        DOCUMENT.json|-\n"
            "\n"
            "Verifies a receipt offline, in the order of SPEC section 5: shape, key,\n"
            "Ed25519 signature over receiptHash, receiptHash recomputed from the fields,\n"
            "expiry. A batch-signed receipt (SPEC section 12: \"transparency\" instead of\n"
            "authoritySignature) takes the same steps with the log in place of the signature:\n"
            "the log key its logOrigin and logKeyId name, the checkpoint note's signature by\n"
            "it, the checkpoint's size against treeSize, the inclusion proof of receiptHash's\n"
            "leaf under the checkpoint's root, then the hash and expiry.\n"
            "'-' reads the document from stdin. The document is the receipt, or\n"
            "{\"receipt\": {...}} as POST /v1/verify takes it, or the whole response of\n"
            "/v1/evaluate or /execute (its receipt is verified, and must carry the response's\n"
            "execution_id, request_hash and decision).\n"
            "\n"
            "Keys, all repeatable:\n"
            "  --keys keys.json  a key discovery document (/.well-known/trigguard/keys.json,\n"
            "                    `trigguard keys`): the receipt's authorityKeyId picks the key.\n"
            "  --key KEY.pem     a PEM key file (private or public), trusted as given: a\n"
            "                    receipt its key signed verifies whatever its authorityKeyId\n"
            "                    says (a key exported with `openssl pkey -pubout` has lost its\n"
            "                    trigguard-key-id line and so its id); the output then names\n"
            "                    the file.\n"
            "  --log-key VKEY    a transparency log's verifier key <origin>+<8 hex>+<base64>\n"
            "                    (or a file holding it), as keys.json lists it with \"use\":\n"
            "                    \"checkpoint\" (--keys reads that entry too).\n"
            "--checkpoint FILE pins a signed checkpoint of the same log (GET\n"
            "/v1/log/checkpoint), e.g. a newer one seen since: the receipt's checkpoint must\n"
            "be consistent with it. Of another size, --consistency FILE gives the proof (the\n"
            "answer of GET /v1/log/proof/consistency?old=M&new=N, M and N the two sizes in\n"
            "either order); of the same size, the roots must be equal.\n"
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
            "                             bad_proof, hash_mismatch\n"
            "  INCONSISTENT: <details>    (--checkpoint) the receipt is authentic, but its\n"
            "                             checkpoint and the pinned one are not one log's:\n"
            "                             the log forked or rewrote history\n"
            "followed by \"(signed by --key FILE ...)\" when a --key file verified a receipt\n"
            "that names another key id. A valid batch-signed receipt's line goes on with\n"
            "\"; batch-signed: leaf I of <origin> at tree size N\" and, with --checkpoint,\n"
            "\"; consistent with checkpoint size M\".\n"
            "\n"
            "exit status: 0 VALID, 1 INVALID or INCONSISTENT, 6 EXPIRED (also after a\n"
            "consistent --checkpoint), 2 unusable input (unreadable file, not JSON, bad\n"
            "keys.json, key file or --log-key, bad --now, a --checkpoint not signed by the\n"
            "receipt's log key or of another log, a missing or malformed --consistency,\n"
            "--checkpoint with a per-receipt signed receipt, usage error)\n");
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

/* The pinned checkpoint's verdict (--checkpoint): TG_EXIT_OK when the receipt's checkpoint
 * and the pinned one are one log's, TG_EXIT_FAIL (INCONSISTENT printed) when not,
 * TG_EXIT_USAGE (stderr) when the files cannot be used. *pinned_size gets its size. */
static int check_pinned(const tg_receipt_verdict_t *vd, const char *cp_path, const char *cons_path,
                        uint64_t *pinned_size) {
    size_t n = 0;
    char *note = NULL, *cons = NULL;
    tg_checkpoint_t cp;
    tg_diag_t diag = {{0}};
    const tg_note_verifier_t *key = NULL;
    int status = TG_EXIT_USAGE;
    note = tg_cli_read_file(cp_path, TG_NOTE_MAX_BYTES, &n);
    if (note == NULL) {
        goto done;
    }
    /* only the receipt's own log key: a checkpoint of another log pins nothing here */
    tg_keyring_t one;
    tg_keyring_init(&one);
    if (tg_keyring_add_log(&one, vd->log_key) != TG_OK ||
        tg_cli_checkpoint(&one, note, n, &cp, &key, &diag) != TG_OK) {
        fprintf(stderr,
                "trigguard verify: --checkpoint %s: not a checkpoint of the receipt's log "
                "signed by its key %s: %s\n",
                cp_path, vd->log_key->name, diag.msg);
        goto done;
    }
    *pinned_size = cp.size;
    tg_tlog_hash_t mine, pinned, proof[TG_TLOG_MAX_PROOF];
    memcpy(mine.h, vd->root, 32);
    memcpy(pinned.h, cp.root, 32);
    if (cp.size == vd->tree_size && cons_path == NULL) {
        status = sodium_memcmp(mine.h, pinned.h, 32) == 0 ? TG_EXIT_OK : TG_EXIT_FAIL;
        if (status == TG_EXIT_FAIL) {
            printf("INCONSISTENT: the pinned checkpoint and the receipt's have one size (%llu) "
                   "and two roots\n",
                   (unsigned long long)cp.size);
        }
        goto done;
    }
    if (cons_path == NULL) {
        fprintf(stderr,
                "trigguard verify: the pinned checkpoint has size %llu, the receipt's %llu: "
                "give --consistency FILE (GET /v1/log/proof/consistency?old=%llu&new=%llu)\n",
                (unsigned long long)cp.size, (unsigned long long)vd->tree_size,
                (unsigned long long)(cp.size < vd->tree_size ? cp.size : vd->tree_size),
                (unsigned long long)(cp.size < vd->tree_size ? vd->tree_size : cp.size));
        goto done;
    }
    cons = tg_cli_read_file(cons_path, (size_t)64 * 1024, &n);
    uint64_t old_size = 0, new_size = 0;
    size_t plen = 0;
    if (cons == NULL) {
        goto done;
    }
    if (tg_cli_consistency(cons, n, &old_size, &new_size, proof, &plen, &diag) != TG_OK) {
        fprintf(stderr, "trigguard verify: --consistency %s: %s\n", cons_path, diag.msg);
        goto done;
    }
    bool pinned_newer = cp.size >= vd->tree_size;
    uint64_t lo = pinned_newer ? vd->tree_size : cp.size;
    uint64_t hi = pinned_newer ? cp.size : vd->tree_size;
    if (old_size != lo || new_size != hi) {
        fprintf(stderr,
                "trigguard verify: --consistency %s is a proof from size %llu to %llu; the two "
                "checkpoints need one from %llu to %llu\n",
                cons_path, (unsigned long long)old_size, (unsigned long long)new_size,
                (unsigned long long)lo, (unsigned long long)hi);
        goto done;
    }
    if (tg_tlog_verify_consistency(lo, hi, proof, plen, pinned_newer ? &mine : &pinned,
                                   pinned_newer ? &pinned : &mine) != TG_OK) {
        printf("INCONSISTENT: the receipt's checkpoint (size %llu) is not a prefix-consistent "
               "view of the pinned one (size %llu): the consistency proof does not hold\n",
               (unsigned long long)vd->tree_size, (unsigned long long)cp.size);
        status = TG_EXIT_FAIL;
        goto done;
    }
    status = TG_EXIT_OK;
done:
    free(note);
    free(cons);
    return status;
}

/* A batch-signed receipt's line says which log vouches for it, and the pin it passed. */
static void print_batch(const tg_receipt_verdict_t *vd, bool pinned, uint64_t pinned_size) {
    if (!vd->batch || vd->log_key == NULL) {
        return;
    }
    printf("; batch-signed: leaf %llu of %s at tree size %llu", (unsigned long long)vd->leaf_index,
           vd->log_key->name, (unsigned long long)vd->tree_size);
    if (pinned) {
        printf("; consistent with checkpoint size %llu", (unsigned long long)pinned_size);
    }
}

int tg_cmd_verify(int argc, char **argv) {
    const char *receipt_path = NULL, *cp_path = NULL, *cons_path = NULL;
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
        } else if (strcmp(a, "--log-key") == 0 && i + 1 < argc) {
            if (!tg_cli_add_log_key(&ring, argv[++i], "verify")) {
                goto done;
            }
        } else if (strcmp(a, "--checkpoint") == 0 && i + 1 < argc) {
            cp_path = argv[++i];
        } else if (strcmp(a, "--consistency") == 0 && i + 1 < argc) {
            cons_path = argv[++i];
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
    if (receipt_path == NULL || (ring.count == 0 && ring.log_count == 0)) {
        fprintf(stderr, "trigguard verify: need --keys keys.json (or --key KEY.pem, --log-key "
                        "VKEY) and a receipt file\n\n");
        verify_usage(stderr);
        goto done;
    }
    if (cons_path != NULL && cp_path == NULL) {
        fprintf(stderr, "trigguard verify: --consistency goes with --checkpoint\n");
        goto done;
    }
    text = tg_cli_read_file(receipt_path, TG_RECEIPT_MAX_BYTES, &len);
    if (text == NULL) {
        goto done;
    }
    tg_err_t rc = tg_receipt_verify_text(&ring, text, len, now_ms, &vd, &diag);
    uint64_t pinned_size = 0;
    if (cp_path != NULL && (rc == TG_OK || rc == TG_ERR_RECEIPT_EXPIRED)) {
        if (!vd.batch) {
            fprintf(stderr,
                    "trigguard verify: --checkpoint: %s is a per-receipt signed receipt "
                    "(authoritySignature); a checkpoint pins batch-signed ones\n",
                    receipt_path);
            goto done;
        }
        status = check_pinned(&vd, cp_path, cons_path, &pinned_size);
        if (status != TG_EXIT_OK) {
            goto done;
        }
    }
    if (rc == TG_OK) {
        printf("VALID");
        print_signer(&kf, &vd);
        print_batch(&vd, cp_path != NULL, pinned_size);
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
        print_batch(&vd, cp_path != NULL, pinned_size);
        printf("\n");
        status = TG_EXIT_EXPIRED;
    } else if (rc == TG_ERR_RECEIPT_SHAPE || rc == TG_ERR_KEY_UNKNOWN ||
               rc == TG_ERR_RECEIPT_SIGNATURE || rc == TG_ERR_RECEIPT_HASH ||
               rc == TG_ERR_TLOG_PROOF || rc == TG_ERR_NOTE_MALFORMED ||
               rc == TG_ERR_NOTE_SIGNATURE || rc == TG_ERR_NOTE_UNVERIFIED ||
               rc == TG_ERR_CHECKPOINT_MALFORMED) {
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
