/* fuzz_keys_json.c — keys.json text → tg_keyring_load_keys_json: a loaded ring is well formed
 * (public keys only, valid unique ids and keys, at most one active) and rendering it and
 * loading the rendering gives the same ring, whose rendering is a fixed point. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "trigguard/buf.h"
#include "trigguard/keys.h"
#include "trigguard/note.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The log keys (SPEC §12, "use": "checkpoint"): valid names, ids that are their names' and
 * keys', each found by its name and id, no name and id twice. */
static void check_logs(const tg_keyring_t *ring) {
    if (ring->log_count > TG_KEYRING_LOG_MAX) {
        abort();
    }
    for (size_t i = 0; i < ring->log_count; i++) {
        const tg_note_verifier_t *v = &ring->logs[i];
        if (tg_note_name_check(v->name, v->name_len) != TG_OK ||
            tg_note_key_id(v->name, v->name_len, v->pk) != v->key_id ||
            tg_keyring_find_log(ring, v->name, v->name_len, v->key_id) != v) {
            abort();
        }
    }
}

static void check_ring(const tg_keyring_t *ring) {
    size_t active = 0;
    if (ring->count > TG_KEYRING_MAX) {
        abort();
    }
    for (size_t i = 0; i < ring->count; i++) {
        const tg_keyring_entry_t *e = &ring->entries[i];
        size_t n = strlen(e->key.key_id);
        /* keys.json only carries public keys: nothing secret may appear in the ring */
        if (e->key.has_secret || !tg_key_id_valid(e->key.key_id, n) ||
            tg_keyring_find(ring, e->key.key_id, n) != &e->key) {
            abort();
        }
        for (size_t j = 0; j < sizeof e->key.sk; j++) {
            if (e->key.sk[j] != 0) {
                abort();
            }
        }
        for (size_t j = 0; j < i; j++) {
            if (memcmp(ring->entries[j].key.pk, e->key.pk, sizeof e->key.pk) == 0) {
                abort(); /* the same public key twice under two ids */
            }
        }
        if (e->status == TG_KEY_ACTIVE) {
            active++;
            if (i != 0) {
                abort(); /* the active entry comes first */
            }
        } else if (e->status != TG_KEY_VERIFY_ONLY) {
            abort();
        }
    }
    if (active > 1 || tg_keyring_signer(ring) != NULL ||
        (active == 1) != (tg_keyring_active(ring) != NULL)) {
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tg_keyring_t ring, back;
    tg_diag_t diag;
    tg_buf_t out, again;
    memset(&diag, 0, sizeof diag);
    tg_keyring_init(&ring);
    tg_err_t rc = tg_keyring_load_keys_json(&ring, (const char *)data, size, &diag);
    if (rc != TG_OK) {
        /* a rejection names what was wrong */
        if (diag.msg[0] == '\0' || memchr(diag.msg, '\0', sizeof diag.msg) == NULL) {
            abort();
        }
        tg_keyring_wipe(&ring);
        return 0;
    }
    check_ring(&ring);
    check_logs(&ring);
    if (ring.count == 0) {
        /* only log keys, or keys of uses a verifier does not know: nothing to render */
        tg_keyring_wipe(&ring);
        return 0;
    }

    /* render → load → render: same ring, byte-identical document */
    tg_buf_init(&out, 0);
    tg_buf_init(&again, 0);
    tg_keyring_init(&back);
    if (tg_keyring_keys_json(&out, &ring, "fuzz") != TG_OK ||
        tg_keyring_load_keys_json(&back, out.data, out.len, NULL) != TG_OK ||
        back.count != ring.count || tg_keyring_keys_json(&again, &back, "fuzz") != TG_OK ||
        out.len != again.len || memcmp(out.data, again.data, out.len) != 0) {
        abort();
    }
    for (size_t i = 0; i < ring.count; i++) {
        const tg_keyring_entry_t *a = &ring.entries[i], *b = &back.entries[i];
        if (a->status != b->status || strcmp(a->key.key_id, b->key.key_id) != 0 ||
            memcmp(a->key.pk, b->key.pk, sizeof a->key.pk) != 0) {
            abort();
        }
    }
    tg_buf_free(&out);
    tg_buf_free(&again);
    tg_keyring_wipe(&ring);
    tg_keyring_wipe(&back);
    return 0;
}
