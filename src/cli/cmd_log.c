/* cmd_log.c — the transparency log (SPEC §12) from the command line: the helpers verify,
 * ledger verify and log audit share (log keys, signed checkpoints, consistency proofs). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "cli.h"
#include "trigguard/canon.h"
#include "trigguard/note.h"
#include "trigguard/receipt.h"
#include "trigguard/tlog.h"

/* A vkey argument: the text itself, or a file holding it (one line). */
bool tg_cli_add_log_key(tg_keyring_t *ring, const char *arg, const char *cmd) {
    tg_note_verifier_t v;
    const char *text = arg;
    size_t n = strlen(arg);
    char *file = NULL;
    tg_err_t rc = tg_note_vkey_parse(&v, text, n);
    if (rc != TG_OK && access(arg, F_OK) == 0) {
        file = tg_cli_read_file(arg, TG_NOTE_VKEY_MAX + 2, &n);
        if (file == NULL) {
            return false;
        }
        while (n > 0 && (file[n - 1] == '\n' || file[n - 1] == '\r')) {
            n--;
        }
        rc = tg_note_vkey_parse(&v, file, n);
    }
    if (rc == TG_OK) {
        rc = tg_keyring_add_log(ring, &v);
    }
    free(file);
    if (rc != TG_OK) {
        fprintf(stderr, "trigguard %s: --log-key %s: %s\n", cmd, arg,
                rc == TG_ERR_KEY_FORMAT ? "not a verifier key <name>+<8 hex id>+<base64 key> "
                                          "(or a file holding one)"
                                        : tg_strerror(rc));
        return false;
    }
    return true;
}

tg_err_t tg_cli_checkpoint(const tg_keyring_t *ring, const char *note, size_t n,
                           tg_checkpoint_t *cp, const tg_note_verifier_t **key, tg_diag_t *diag) {
    size_t text_len = 0;
    uint64_t verified = 0;
    if (ring->log_count == 0) {
        return tg_diag_set(diag, TG_ERR_KEY_UNKNOWN,
                           "no log key to verify a checkpoint with (keys.json with \"use\": "
                           "\"checkpoint\", or --log-key)");
    }
    tg_err_t rc = tg_note_verify(note, n, ring->logs, ring->log_count, &text_len, &verified);
    if (rc != TG_OK) {
        return tg_diag_set(diag, rc, "the checkpoint %s",
                           rc == TG_ERR_NOTE_UNVERIFIED  ? "is signed by no known log key"
                           : rc == TG_ERR_NOTE_SIGNATURE ? "has a log key's signature that does "
                                                           "not verify"
                                                         : "is not a signed note");
    }
    rc = tg_checkpoint_parse(cp, note, text_len);
    if (rc != TG_OK) {
        return tg_diag_set(diag, rc, "the signed note is not a checkpoint");
    }
    cp->ext = NULL; /* a view into note: not kept */
    cp->ext_len = 0;
    for (size_t i = 0; i < ring->log_count; i++) {
        const tg_note_verifier_t *v = &ring->logs[i];
        if ((verified >> i & 1) && v->name_len == cp->origin_len &&
            memcmp(v->name, cp->origin, cp->origin_len) == 0) {
            if (key != NULL) {
                *key = v;
            }
            return TG_OK;
        }
    }
    return tg_diag_set(diag, TG_ERR_NOTE_UNVERIFIED,
                       "the checkpoint of origin %s is signed by no log key of that name",
                       cp->origin);
}

/* Reads a JSON-safe non-negative integer member. */
static bool json_u64(const json_t *obj, const char *name, uint64_t *out) {
    const json_t *v = json_object_get(obj, name);
    double d = json_is_number(v) ? json_number_value(v) : -1.0;
    if (!(d >= 0.0 && d <= 9007199254740991.0) || (double)(uint64_t)d != d) {
        return false;
    }
    *out = (uint64_t)d;
    return true;
}

tg_err_t tg_cli_proof_hashes(const json_t *arr, tg_tlog_hash_t proof[TG_TLOG_MAX_PROOF],
                             size_t *n) {
    if (!json_is_array(arr) || json_array_size(arr) > TG_TLOG_MAX_PROOF) {
        return TG_ERR_TLOG_PROOF;
    }
    for (size_t i = 0; i < json_array_size(arr); i++) {
        const json_t *h = json_array_get(arr, i);
        const char *s = json_string_value(h);
        size_t got = 0;
        char again[64];
        if (s == NULL || json_string_length(h) != 44 ||
            sodium_base642bin(proof[i].h, 32, s, 44, NULL, &got, NULL,
                              sodium_base64_VARIANT_ORIGINAL) != 0 ||
            got != 32) {
            return TG_ERR_TLOG_PROOF;
        }
        (void)sodium_bin2base64(again, sizeof again, proof[i].h, 32,
                                sodium_base64_VARIANT_ORIGINAL);
        if (memcmp(again, s, 44) != 0) {
            return TG_ERR_TLOG_PROOF; /* one spelling per hash */
        }
    }
    *n = json_array_size(arr);
    return TG_OK;
}

tg_err_t tg_cli_consistency(const char *text, size_t len, uint64_t *old_size, uint64_t *new_size,
                            tg_tlog_hash_t proof[TG_TLOG_MAX_PROOF], size_t *n, tg_diag_t *diag) {
    json_t *doc = NULL;
    tg_diag_t d = {{0}};
    tg_err_t rc = tg_json_parse(&doc, text, len, NULL, &d);
    if (rc != TG_OK) {
        return tg_diag_set(diag, rc, "the consistency proof is not JSON: %s", d.msg);
    }
    if (!json_is_object(doc) || !json_u64(doc, "oldSize", old_size) ||
        !json_u64(doc, "newSize", new_size) ||
        tg_cli_proof_hashes(json_object_get(doc, "consistencyProof"), proof, n) != TG_OK) {
        rc = tg_diag_set(diag, TG_ERR_TLOG_PROOF,
                         "the consistency proof is not {\"oldSize\", \"newSize\", "
                         "\"consistencyProof\": [base64 of 32 bytes...]} (GET "
                         "/v1/log/proof/consistency)");
    }
    json_decref(doc);
    return rc;
}

/* ---- the log recomputed from records (log audit DIR, ledger verify) ---------------------- */

tg_cli_logwalk_t *tg_cli_logwalk_new(void) {
    tg_cli_logwalk_t *w = calloc(1, sizeof *w);
    if (w != NULL) {
        tg_tlog_range_init(&w->range);
    }
    return w;
}

bool tg_cli_logwalk_want(tg_cli_logwalk_t *w, uint64_t size) {
    for (size_t i = 0; i < w->n_want; i++) {
        if (w->want[i] == size) {
            return true;
        }
    }
    if (w->n_want >= TG_CLI_LOG_WANT_MAX || w->range.size > 0) {
        return false; /* all wants come before the first leaf */
    }
    w->want[w->n_want++] = size;
    return true;
}

/* Notes the root of the range's size when a want names it (wants sorted: one cursor). */
static void note_roots(tg_cli_logwalk_t *w) {
    while (w->next < w->n_want && w->want[w->next] <= w->range.size) {
        if (w->want[w->next] == w->range.size) {
            tg_tlog_range_root(&w->range, &w->root[w->next]);
            w->have[w->next] = true;
        }
        w->next++;
    }
}

static int u64_cmp(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

tg_err_t tg_cli_logwalk_leaf(tg_cli_logwalk_t *w, const tg_tlog_hash_t *leaf,
                             tg_tlog_store_fn store, void *ctx) {
    if (!w->sorted) {
        qsort(w->want, w->n_want, sizeof w->want[0], u64_cmp);
        w->sorted = true;
        note_roots(w); /* size 0: the empty root */
    }
    tg_err_t rc = tg_tlog_range_append(&w->range, leaf, store, ctx);
    if (rc == TG_OK) {
        note_roots(w);
    }
    return rc;
}

bool tg_cli_logwalk_root(tg_cli_logwalk_t *w, uint64_t size, tg_tlog_hash_t *out) {
    if (!w->sorted) {
        qsort(w->want, w->n_want, sizeof w->want[0], u64_cmp);
        w->sorted = true;
        note_roots(w);
    }
    for (size_t i = 0; i < w->n_want; i++) {
        if (w->want[i] == size && w->have[i]) {
            *out = w->root[i];
            return true;
        }
    }
    return false;
}

tg_err_t tg_cli_record_entry(uint8_t entry[32], const tg_ledger_record_t *rec, tg_diag_t *diag) {
    if (rec->type != TG_LEDGER_TYPE_RECEIPT) {
        /* SPEC §12: the SHA-256 of the record's payload (its canonical JSON) */
        tg_sha256(entry, rec->payload, rec->payload_len);
        return TG_OK;
    }
    /* a receipt's entry is its receiptHash, recomputed here from its fields (either kind)
     * rather than taken as stated */
    json_t *doc = NULL;
    tg_diag_t d = {{0}};
    tg_err_t rc = tg_json_parse(&doc, (const char *)rec->payload, rec->payload_len, NULL, &d);
    if (rc == TG_OK && json_is_object(doc)) {
        (void)json_object_del(doc, "authorityKeyId");
        (void)json_object_del(doc, "authoritySignature");
        rc = tg_receipt_check_hashed(doc, entry, &d);
    } else if (rc == TG_OK) {
        rc = TG_ERR_RECEIPT_SHAPE;
    }
    json_decref(doc);
    if (rc != TG_OK) {
        return tg_diag_set(diag, TG_ERR_LEDGER_CORRUPT,
                           "record seq %llu: no log entry: the receipt's receiptHash cannot be "
                           "recomputed (%s)",
                           (unsigned long long)rec->seq, d.msg[0] ? d.msg : tg_strerror(rc));
    }
    return TG_OK;
}

tg_err_t tg_cli_logwalk_record(tg_cli_logwalk_t *w, const tg_ledger_record_t *rec,
                               tg_diag_t *diag) {
    uint8_t entry[32];
    tg_tlog_hash_t leaf;
    tg_err_t rc = tg_cli_record_entry(entry, rec, diag);
    if (rc != TG_OK) {
        return rc;
    }
    tg_tlog_leaf_hash(&leaf, entry, sizeof entry);
    rc = tg_cli_logwalk_leaf(w, &leaf, NULL, NULL);
    return rc ? tg_diag_set(diag, rc, "record seq %llu: %s", (unsigned long long)rec->seq,
                            tg_strerror(rc))
              : TG_OK;
}
