/* fuzz_checkpoint.c — tg_checkpoint_parse on arbitrary bytes (and on the text of a note
 * that verifies with the vector checkpoint key): never a crash; what parses is canonical,
 * so formatting its origin, size and root gives back the input up to its extension lines. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "trigguard/note.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char vkey[] =
    "example.trigguard.test/log+403d78f8+AQ/5XbTLeb+8LLqoQAXR4ry8ZnDbcLzK5n1UikiHx0Ip";
static tg_note_verifier_t key;
static int ready;

static void check(const char *text, size_t n) {
    tg_checkpoint_t c;
    if (tg_checkpoint_parse(&c, text, n) != TG_OK) {
        return;
    }
    char out[TG_CHECKPOINT_BODY_MAX];
    size_t len = 0;
    if (c.ext_len > n || (c.ext_len > 0 && c.ext != text + (n - c.ext_len)) ||
        tg_checkpoint_format(out, sizeof out, &len, c.origin, c.origin_len, c.size, c.root) !=
            TG_OK ||
        len != n - c.ext_len || memcmp(out, text, len) != 0) {
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *msg = (const char *)data;
    size_t text_len = 0;
    if (!ready) {
        if (tg_note_vkey_parse(&key, vkey, sizeof vkey - 1) != TG_OK) {
            abort();
        }
        ready = 1;
    }
    check(msg, size);
    if (tg_note_verify(msg, size, &key, 1, &text_len, NULL) == TG_OK) {
        check(msg, text_len);
    }
    return 0;
}
