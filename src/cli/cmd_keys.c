/* cmd_keys.c — `trigguard keys`: the keys.json key discovery document for key files. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "trigguard/keys.h"

static void keys_usage(FILE *out) {
    fprintf(out,
            "usage: trigguard keys [--authority NAME] KEY.pem...\n"
            "\n"
            "Prints the keys.json document (SPEC section 6) for the given PEM key files,\n"
            "private (PKCS#8) or public (SPKI). The first private key is the active signer;\n"
            "every other key is listed as verify-only. Only public keys are printed.\n"
            "Private key files must not be accessible by group or others (chmod 600).\n"
            "Key ids come from a \"" TG_KEY_ID_LINE " ID\" line in the file, else\n"
            "\"tg-\" + 16 hex of SHA-256(public key). --authority defaults to trigguard-local.\n"
            "\n"
            "exit status: 0 printed, 2 usage error or a key file cannot be used\n");
}

int tg_cmd_keys(int argc, char **argv) {
    const char *authority = "trigguard-local";
    tg_keyring_t ring;
    tg_key_t key;
    tg_buf_t out;
    tg_diag_t diag = {{0}};
    int status = TG_EXIT_USAGE, nfiles = 0;
    bool have_active = false;

    tg_keyring_init(&ring);
    tg_buf_init(&out, 0);
    memset(&key, 0, sizeof key);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            keys_usage(stdout);
            return TG_EXIT_OK;
        }
        if (strcmp(argv[i], "--authority") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "trigguard keys: --authority needs a value\n");
                goto done;
            }
            authority = argv[++i];
            if (authority[0] == '\0') {
                /* every receipt carries a non-empty authorityId; so must its key document */
                fprintf(stderr, "trigguard keys: --authority must not be empty\n");
                goto done;
            }
            continue;
        }
        if (argv[i][0] == '-') {
            fprintf(stderr, "trigguard keys: unknown option '%s'\n\n", argv[i]);
            keys_usage(stderr);
            goto done;
        }
        nfiles++;
        tg_err_t rc = tg_key_load_file(&key, argv[i], NULL, &diag);
        if (rc) {
            fprintf(stderr, "trigguard keys: %s: %s\n", tg_strerror(rc), diag.msg);
            goto done;
        }
        tg_key_status_t st = key.has_secret && !have_active ? TG_KEY_ACTIVE : TG_KEY_VERIFY_ONLY;
        rc = tg_keyring_add(&ring, &key, st);
        if (rc) {
            fprintf(stderr, "trigguard keys: %s (key id %s): %s\n", argv[i], key.key_id,
                    rc == TG_ERR_EXISTS ? "the same key id or public key was given twice"
                                        : tg_strerror(rc));
            goto done;
        }
        have_active = have_active || st == TG_KEY_ACTIVE;
        tg_key_wipe(&key);
    }
    if (nfiles == 0) {
        fprintf(stderr, "trigguard keys: no key files given\n\n");
        keys_usage(stderr);
        goto done;
    }
    tg_err_t rc = tg_keyring_keys_json(&out, &ring, authority);
    if (rc) {
        fprintf(stderr, "trigguard keys: cannot render keys.json: %s\n", tg_strerror(rc));
        goto done;
    }
    printf("%s\n", out.data);
    status = TG_EXIT_OK; /* a failed write is main's to report (finish) */
done:
    tg_key_wipe(&key);
    tg_keyring_wipe(&ring);
    tg_buf_free(&out);
    return status;
}
