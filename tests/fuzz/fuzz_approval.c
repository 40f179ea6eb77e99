/* fuzz_approval.c — the approval document (tg_approval_parse) and an approval record's
 * view and audit on arbitrary bytes: never a crash or an out-of-bounds read, and the
 * round-trip property the audit relies on: a document that parses is exactly what
 * tg_approval_write makes of the parsed state.
 * Input: the document, optionally followed by '\n' and a type-4 payload (a canonical
 * document holds no raw newline), which is viewed and audited with the document as its
 * meta "a". */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "trigguard/approval.h"
#include "trigguard/ledger.h"
#include "trigguard/record.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void no_report(void *ud, uint64_t seq, const char *id, const char *what) {
    (void)ud;
    (void)seq;
    if (id == NULL || what == NULL || what[0] == '\0') {
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nl = memchr(data, '\n', size);
    size_t doc_len = nl != NULL ? (size_t)(nl - data) : size;
    tg_approval_t a;
    tg_buf_t b;
    tg_buf_init(&b, TG_APPROVAL_DOC_MAX);
    if (tg_approval_parse(&a, data, doc_len) == TG_OK) {
        if (tg_approval_write(&b, &a) != TG_OK || b.len != doc_len ||
            memcmp(b.data, data, doc_len) != 0) {
            abort(); /* parse accepted what write does not write */
        }
        tg_buf_reset(&b);
        if (tg_approval_api_json(&b, &a, a.created_ms) != TG_OK ||
            tg_approval_receipt_approvals(&b, &a) != TG_OK) {
            abort(); /* a parsed state is always a writable one */
        }
    }
    tg_buf_free(&b);
    if (nl == NULL) {
        return 0;
    }
    /* The type-4 record: meta {"a":doc,"at":1,"rh":...,"s":200,"t":"acme"}. */
    const uint8_t *payload = nl + 1;
    size_t payload_len = size - doc_len - 1;
    static const char tail[] =
        ",\"at\":1,\"rh\":\"0101010101010101010101010101010101010101010101010101010101010101\","
        "\"s\":200,\"t\":\"acme\"}";
    size_t meta_len = 5 + doc_len + sizeof tail - 1;
    char *meta = malloc(meta_len);
    if (meta == NULL) {
        return 0;
    }
    memcpy(meta, "{\"a\":", 5);
    memcpy(meta + 5, data, doc_len);
    memcpy(meta + 5 + doc_len, tail, sizeof tail - 1);
    tg_record_view_t v;
    if (tg_record_view(&v, meta, meta_len, payload, payload_len) == TG_OK) {
        if (v.approval_record && (v.approval == NULL || v.decision != NULL)) {
            abort();
        }
        tg_record_view_free(&v);
    }
    tg_approval_audit_t *au = NULL;
    if (tg_approval_audit_new(&au, 4, no_report, NULL) == TG_OK) {
        TG_IGNORE(tg_approval_audit_record(au, 1, TG_LEDGER_TYPE_RECEIPT, meta, meta_len, payload,
                                           payload_len));
        TG_IGNORE(tg_approval_audit_record(au, 2, TG_LEDGER_TYPE_APPROVAL, meta, meta_len, payload,
                                           payload_len));
        tg_approval_audit_free(au);
    }
    free(meta);
    return 0;
}
