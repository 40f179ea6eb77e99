/* cmd_ledger.c — `trigguard ledger verify|dump|append`: offline ledger tools (SPEC §9). */
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "trigguard/anchor.h"
#include "trigguard/approval.h"
#include <sys/stat.h>

#include "trigguard/canon.h"
#include "trigguard/clock.h"
#include "trigguard/db.h"
#include "trigguard/keys.h"
#include "trigguard/ledger.h"
#include "trigguard/receipt.h"
#include "trigguard/record.h"

static void ledger_usage(FILE *out) {
    fprintf(out,
            "usage: trigguard ledger verify PATH [ARCHIVE... DIR] [--keys keys.json]... "
            "[--key KEY.pem]...\n"
            "                              [--log-key VKEY]... [--head HASH] [--allow-torn] "
            "[--json]\n"
            "       trigguard ledger verify --database-url URL [--keys keys.json]... [--key "
            "KEY.pem]...\n"
            "       trigguard ledger dump PATH\n"
            "       trigguard ledger archive DIR --before TIME --to DEST --key KEY.pem\n"
            "       trigguard ledger append DIR [--silence|--redemption|--approval] [--meta TEXT]\n"
            "                              [--durability MODE] [--segment-bytes N] FILE...\n"
            "\n"
            "verify: PATH is a ledger directory (segments ledger-NNNNNN.tgl, checked as one\n"
            "chain from seq 1) or one segment file. Checks every record's structure, header\n"
            "check and record hash, the sequence numbers and the hash chain (docs/LEDGER.md).\n"
            "With --keys/--key (repeatable) every receipt's Ed25519 signature and receiptHash\n"
            "are verified too; expiry is not a fault (receipts expire, the ledger is history).\n"
            "A batch-signed receipt (SPEC 12) is stored without a signature: its receiptHash\n"
            "is recomputed, and it is authentic through the transparency log. When the\n"
            "directory holds the log's stored checkpoint (tlog/checkpoint), the log is\n"
            "recomputed from the records (as `trigguard log audit DIR` does) and must\n"
            "reproduce it: no more records covered than there are, the same root at its size;\n"
            "its signature is verified with the log key of --keys (\"use\": \"checkpoint\") or\n"
            "--log-key VKEY (which checks no receipt signature), else reported unchecked.\n"
            "Without keys, receipts are only checked to be JSON objects with decision\n"
            "PERMIT or DENY. SILENCE records must be JSON objects whose decision, if present,\n"
            "is SILENCE (receipts may also be ESCALATE). Every redemption record must name a\n"
            "PERMIT receipt of its tenant\n"
            "earlier in the ledger, and no receipt may be redeemed twice (with --database-url:\n"
            "never twice, as instances' chains have no common order). --head HASH also\n"
            "requires the last record's hash to be HASH (a head hash recorded elsewhere\n"
            "detects removal of whole records at the end).\n"
            "--allow-torn accepts a torn final record (a daemon restart would drop it).\n"
            "Approvals (SPEC 11.2) are audited from the records alone: every step (escalation,\n"
            "review, expiry, consumption by a PERMIT) must be the transition its record states;\n"
            "each problem is one line 'approval PROBLEM: seq N approval ID: what' (stderr with\n"
            "--json), then a count; any problem exits 1.\n"
            "A pruned directory starts at its ledger.anchor (`ledger archive`): the anchor's\n"
            "signature is verified with --keys/--key (its key id, or a --key PEM), else\n"
            "reported unchecked. Several directories (archives oldest first, then the live\n"
            "one) are verified as one chain: each must continue the one before it exactly.\n"
            "Prints a summary, or the first fault: file, sequence number, byte offset, what.\n"
            "--database-url URL (default: TRIGGUARD_DATABASE_URL when no PATH is given) checks\n"
            "the records in PostgreSQL instead (docs/POSTGRES.md): every instance's chain\n"
            "(chain_seq 1, 2, ... without gaps, prev_hash, record hash), each record as above,\n"
            "and that every idempotency claim and receipt index row points at a record of its\n"
            "tenant; a fault names the instance and chain_seq. A bad URL, an unreachable\n"
            "database or another schema version exit 2.\n"
            "\n"
            "dump: one JSON object per line per record (seq, type, segment, offset, length,\n"
            "hash, prev_hash, meta_hex, payload as canonical JSON or payload_hex), stopping at\n"
            "the first fault.\n"
            "\n"
            "append: appends each FILE (at most 64 KiB; a signed receipt, or a SILENCE record\n"
            "with --silence, a redemption with --redemption, an approval record with\n"
            "--approval) as one record to the ledger in\n"
            "DIR, which must not be in use by a running daemon; --segment-bytes sets the rotation "
            "size (default 64 MiB).\n"
            "For building fixtures and test ledgers.\n"
            "\n"
            "exit status: 0 valid / done, 1 fault found (corrupt, torn, bad signature, head\n"
            "mismatch), 2 unusable input (no such path, no segments, bad keys, usage)\n");
}

typedef struct check_ctx {
    const tg_keyring_t *ring; /* NULL: no signature checks */
    uint64_t signatures;      /* receipts whose signature verified */
    uint64_t batch;           /* batch receipts (hashed form) whose receiptHash was recomputed */
    /* The transparency log (SPEC §12) recomputed from the records, when the directory holds
     * a stored checkpoint (tlog/checkpoint): NULL otherwise. */
    tg_cli_logwalk_t *walk;
    /* Redemptions (record type 3): "tenant/executionId" -> "P" a PERMIT receipt, "D" a DENY
     * one, "R" redeemed. ordered: the records come in one order (a directory), so a
     * redemption must follow its receipt; false for PostgreSQL, whose instances' chains are
     * read one after the other, where only "never twice" is checked. */
    json_t *receipts;
    bool ordered;
    bool dump; /* print each record as a JSON line */
    tg_buf_t line;
    /* The approvals audit (approval.h): fed each record in ledger order (a directory); for
     * PostgreSQL the records that touch an approval are held and fed afterwards in the
     * order of their steps (held, below), since an approval's steps may be on several
     * instances' chains, which are read one after the other. */
    tg_approval_audit_t *audit;
    FILE *problems_to; /* where each problem line goes (stderr with --json) */
    struct held_rec *held;
    size_t n_held, cap_held;
} check_ctx_t;

/* A record held for the audit (PostgreSQL): its step's time and version order the steps. */
typedef struct held_rec {
    int64_t at_ms;
    uint32_t version; /* meta "a".v, 0 when absent */
    uint64_t seq, ord;
    uint8_t type;
    char *meta, *payload;
    size_t meta_len, payload_len;
} held_rec_t;

static void audit_problem(void *ud, uint64_t seq, const char *approval_id, const char *what) {
    check_ctx_t *c = ud;
    fprintf(c->problems_to, "approval PROBLEM: seq %llu approval %s: %s\n", (unsigned long long)seq,
            approval_id[0] ? approval_id : "(unknown)", what);
}

/* Whether needle (n bytes) occurs in hay (len bytes). */
static bool contains(const uint8_t *hay, size_t len, const char *needle, size_t n) {
    for (size_t i = 0; n <= len && i <= len - n; i++) {
        if (hay[i] == (uint8_t)needle[0] && memcmp(hay + i, needle, n) == 0) {
            return true;
        }
    }
    return false;
}

/* Whether a record touches an approval at all (the audit passes over the others). */
static bool touches_approval(const tg_ledger_record_t *rec) {
    return rec->type == TG_LEDGER_TYPE_APPROVAL ||
           (rec->meta_len >= 5 && memcmp(rec->meta, "{\"a\":", 5) == 0) ||
           contains(rec->payload, rec->payload_len, "\"approvalId\"", 12) ||
           contains(rec->payload, rec->payload_len, "\"approvals\"", 11);
}

static tg_err_t hold_record(check_ctx_t *c, const tg_ledger_record_t *rec) {
    if (c->n_held == c->cap_held) {
        size_t ncap = c->cap_held ? c->cap_held * 2 : 64;
        held_rec_t *n = realloc(c->held, ncap * sizeof *n);
        if (n == NULL) {
            return TG_ERR_NOMEM;
        }
        c->held = n;
        c->cap_held = ncap;
    }
    held_rec_t *h = &c->held[c->n_held];
    memset(h, 0, sizeof *h);
    json_t *m = NULL;
    if (tg_json_parse(&m, (const char *)rec->meta, rec->meta_len, NULL, NULL) == TG_OK) {
        const json_t *at = json_object_get(m, "at");
        const json_t *v = json_object_get(json_object_get(m, "a"), "v");
        h->at_ms = json_is_number(at) ? (int64_t)json_number_value(at) : 0;
        h->version = json_is_number(v) ? (uint32_t)json_number_value(v) : 0;
    }
    json_decref(m);
    h->seq = rec->seq;
    h->ord = c->n_held;
    h->type = rec->type;
    h->meta = malloc(rec->meta_len + 1);
    h->payload = malloc(rec->payload_len + 1);
    if (h->meta == NULL || h->payload == NULL) {
        free(h->meta);
        free(h->payload);
        return TG_ERR_NOMEM;
    }
    memcpy(h->meta, rec->meta, rec->meta_len);
    memcpy(h->payload, rec->payload, rec->payload_len);
    h->meta_len = rec->meta_len;
    h->payload_len = rec->payload_len;
    c->n_held++;
    return TG_OK;
}

static int held_cmp(const void *x, const void *y) {
    const held_rec_t *a = x, *b = y;
    if (a->at_ms != b->at_ms) {
        return a->at_ms < b->at_ms ? -1 : 1;
    }
    if (a->version != b->version) {
        return a->version < b->version ? -1 : 1;
    }
    return a->ord < b->ord ? -1 : a->ord > b->ord;
}

/* Feeds the held records to the audit in step order, releasing them. */
static tg_err_t audit_held(check_ctx_t *c) {
    tg_err_t rc = TG_OK;
    if (c->n_held > 1) {
        qsort(c->held, c->n_held, sizeof *c->held, held_cmp);
    }
    for (size_t i = 0; i < c->n_held; i++) {
        held_rec_t *h = &c->held[i];
        if (rc == TG_OK) {
            rc = tg_approval_audit_record(c->audit, h->seq, h->type, h->meta, h->meta_len,
                                          h->payload, h->payload_len);
        }
        free(h->meta);
        free(h->payload);
    }
    free(c->held);
    c->held = NULL;
    c->n_held = c->cap_held = 0;
    return rc;
}

/* The audit's summary line; true when it found no problem. */
static bool print_audit(const check_ctx_t *c, FILE *out) {
    tg_approval_audit_stats_t st;
    tg_approval_audit_stats(c->audit, &st);
    if (st.approvals || st.reviews || st.consumed || st.expired || st.problems) {
        fprintf(out,
                "  approvals:  %llu escalated, %llu reviews, %llu consumed, %llu expired, "
                "%llu problems\n",
                (unsigned long long)st.approvals, (unsigned long long)st.reviews,
                (unsigned long long)st.consumed, (unsigned long long)st.expired,
                (unsigned long long)st.problems);
    }
    if (st.problems) {
        fprintf(out, "approvals FAULT: %llu problems (the lines above)\n",
                (unsigned long long)st.problems);
    }
    return st.problems == 0;
}

/* The JSON object of a payload, or an error with diag set. */
static tg_err_t payload_object(json_t **out, const tg_ledger_record_t *rec, tg_diag_t *diag) {
    tg_diag_t d = {{0}};
    tg_err_t rc = tg_json_parse(out, (const char *)rec->payload, rec->payload_len, NULL, &d);
    if (rc) {
        return tg_diag_set(diag, rc, "payload is not valid JSON: %s", d.msg);
    }
    if (!json_is_object(*out)) {
        json_decref(*out);
        *out = NULL;
        return tg_diag_set(diag, TG_ERR_JSON_TYPE, "payload is not a JSON object");
    }
    return TG_OK;
}

/* "tenant/executionId": tenant names never hold a '/' (guard.h), so keys never collide. */
static bool receipt_key(char *out, size_t cap, const char *tenant, size_t tl, const char *id,
                        size_t il) {
    int n = snprintf(out, cap, "%.*s/%.*s", (int)tl, tenant, (int)il, id);
    return n > 0 && (size_t)n < cap && memchr(tenant, '/', tl) == NULL;
}

/* Notes a receipt's executionId, tenant and decision for the redemptions that follow. */
static tg_err_t note_receipt(check_ctx_t *c, const json_t *obj, tg_diag_t *diag) {
    const char *id = json_string_value(json_object_get(obj, "executionId"));
    const char *tn = json_string_value(json_object_get(obj, "tenantId"));
    const char *dec = json_string_value(json_object_get(obj, "decision"));
    char key[512];
    if (id == NULL || tn == NULL || dec == NULL ||
        !receipt_key(key, sizeof key, tn, strlen(tn), id, strlen(id))) {
        return tg_diag_set(diag, TG_ERR_RECEIPT_SHAPE,
                           "receipt record without executionId, tenantId or decision");
    }
    if (json_object_get(c->receipts, key) != NULL) {
        return TG_OK; /* an id seen again: the daemon's index keeps the first (records.c) */
    }
    const char *state = strcmp(dec, "PERMIT") == 0 ? "P" : "D";
    return json_object_set_new(c->receipts, key, json_string(state)) ? TG_ERR_NOMEM : TG_OK;
}

/* A redemption: what this server writes (record.h), naming a PERMIT receipt of its tenant
 * that precedes it (a directory), and the only redemption of that receipt. */
static tg_err_t check_redemption(check_ctx_t *c, const tg_ledger_record_t *rec, tg_diag_t *diag) {
    tg_record_view_t v;
    if (tg_record_view(&v, rec->meta, rec->meta_len, rec->payload, rec->payload_len) != TG_OK) {
        return tg_diag_set(diag, TG_ERR_LEDGER_CORRUPT,
                           "redemption record that is not what this server writes");
    }
    char key[512];
    tg_err_t rc = TG_OK;
    if (!v.redemption) {
        rc = tg_diag_set(diag, TG_ERR_LEDGER_CORRUPT, "redemption record without a redemption");
    } else if (!receipt_key(key, sizeof key, v.meta.tenant.ptr, v.meta.tenant.len,
                            v.execution_id.ptr, v.execution_id.len)) {
        rc = tg_diag_set(diag, TG_ERR_LEDGER_CORRUPT, "redemption with an unusable tenant");
    }
    const char *state = rc ? NULL : json_string_value(json_object_get(c->receipts, key));
    if (rc == TG_OK && state != NULL && state[0] == 'R') {
        rc = tg_diag_set(diag, TG_ERR_LEDGER_CORRUPT, "receipt %s redeemed a second time", key);
    } else if (rc == TG_OK && c->ordered && state == NULL) {
        rc = tg_diag_set(diag, TG_ERR_LEDGER_CORRUPT,
                         "redemption of %s, which no earlier receipt of that tenant names", key);
    } else if (rc == TG_OK && c->ordered && state[0] != 'P') {
        rc = tg_diag_set(diag, TG_ERR_LEDGER_CORRUPT,
                         "redemption of %s, which is not a PERMIT receipt", key);
    }
    if (rc == TG_OK && json_object_set_new(c->receipts, key, json_string("R")) != 0) {
        rc = TG_ERR_NOMEM;
    }
    tg_record_view_free(&v);
    return rc;
}

static tg_err_t check_content(check_ctx_t *c, const tg_ledger_record_t *rec, tg_diag_t *diag) {
    json_t *obj = NULL;
    tg_err_t rc;
    if (rec->type == TG_LEDGER_TYPE_REDEMPTION) {
        return check_redemption(c, rec, diag);
    }
    if (rec->type == TG_LEDGER_TYPE_RECEIPT && c->ring != NULL) {
        tg_diag_t d = {{0}};
        rc = payload_object(&obj, rec, diag);
        if (rc) {
            return rc;
        }
        if (tg_receipt_text_is_hashed((const char *)rec->payload, rec->payload_len)) {
            /* a batch receipt as stored (SPEC §12): its hash is checked here, its
             * authenticity is the log's checkpoint's (checked after the walk) */
            rc = tg_receipt_check_hashed(obj, NULL, &d);
            if (rc == TG_OK) {
                c->batch++;
                rc = note_receipt(c, obj, diag);
                json_decref(obj);
                return rc;
            }
            json_decref(obj);
            return tg_diag_set(diag, rc, "batch receipt does not check: %s (%s)",
                               tg_receipt_reason_code(rc), d.msg[0] ? d.msg : tg_strerror(rc));
        }
        /* The record is the receipt itself (LEDGER.md), so none of the wrappers a verifier
         * is given by people are taken here. now = 0: nothing has expired yet, so an
         * authentic receipt verifies; EXPIRED can only mean "authentic" and is accepted. */
        rc = tg_receipt_verify(c->ring, obj, 0, &d);
        if (rc == TG_OK || rc == TG_ERR_RECEIPT_EXPIRED) {
            c->signatures++;
            rc = note_receipt(c, obj, diag);
            json_decref(obj);
            return rc;
        }
        json_decref(obj);
        return tg_diag_set(diag, rc, "receipt does not verify: %s (%s)", tg_receipt_reason_code(rc),
                           d.msg[0] ? d.msg : tg_strerror(rc));
    }
    rc = payload_object(&obj, rec, diag);
    if (rc) {
        return rc;
    }
    const char *dec = json_string_value(json_object_get(obj, "decision"));
    if (rec->type == TG_LEDGER_TYPE_RECEIPT) {
        /* ESCALATE (SPEC §11.2) is a signed receipt like PERMIT and DENY */
        if (dec == NULL || (strcmp(dec, "PERMIT") != 0 && strcmp(dec, "DENY") != 0 &&
                            strcmp(dec, "ESCALATE") != 0)) {
            rc = tg_diag_set(diag, TG_ERR_RECEIPT_SHAPE,
                             "receipt record without decision PERMIT, DENY or ESCALATE");
        } else {
            rc = note_receipt(c, obj, diag);
        }
    } else if (rec->type == TG_LEDGER_TYPE_APPROVAL) {
        /* Its content is the approval audit's to check (approval.h), step by step. */
        const char *t = json_string_value(json_object_get(obj, "type"));
        if (t == NULL || strcmp(t, "approval") != 0) {
            rc = tg_diag_set(diag, TG_ERR_RECEIPT_SHAPE,
                             "approval record whose type is not \"approval\"");
        }
    } else if (json_object_get(obj, "decision") != NULL &&
               (dec == NULL || strcmp(dec, "SILENCE") != 0)) {
        rc =
            tg_diag_set(diag, TG_ERR_RECEIPT_SHAPE, "SILENCE record whose decision is not SILENCE");
    }
    json_decref(obj);
    return rc;
}

static tg_err_t dump_record(check_ctx_t *c, const tg_ledger_record_t *rec) {
    char h[2 * TG_LEDGER_HASH_SIZE + 1], p[2 * TG_LEDGER_HASH_SIZE + 1];
    tg_hex(h, rec->hash, TG_LEDGER_HASH_SIZE);
    tg_hex(p, rec->prev_hash, TG_LEDGER_HASH_SIZE);
    tg_buf_t *b = &c->line;
    tg_buf_reset(b);
    tg_err_t rc =
        tg_buf_printf(b,
                      "{\"seq\":%llu,\"type\":\"%s\",\"segment\":%u,\"offset\":%llu,\"length\":%u,"
                      "\"hash\":\"%s\",\"prev_hash\":\"%s\",\"meta_hex\":\"",
                      (unsigned long long)rec->seq,
                      rec->type == TG_LEDGER_TYPE_RECEIPT      ? "receipt"
                      : rec->type == TG_LEDGER_TYPE_REDEMPTION ? "redemption"
                      : rec->type == TG_LEDGER_TYPE_APPROVAL   ? "approval"
                                                               : "silence",
                      rec->pos.segment, (unsigned long long)rec->pos.offset, rec->pos.length, h, p);
    if (rc == TG_OK) {
        rc = tg_buf_hex(b, rec->meta, rec->meta_len);
    }
    json_t *obj = NULL;
    if (rc == TG_OK &&
        tg_json_parse(&obj, (const char *)rec->payload, rec->payload_len, NULL, NULL) == TG_OK) {
        rc = tg_buf_puts(b, "\",\"payload\":");
        if (rc == TG_OK) {
            rc = tg_canon_write(b, obj, NULL);
        }
        json_decref(obj);
    } else if (rc == TG_OK) {
        rc = tg_buf_puts(b, "\",\"payload_hex\":\"");
        if (rc == TG_OK) {
            rc = tg_buf_hex(b, rec->payload, rec->payload_len);
        }
        if (rc == TG_OK) {
            rc = tg_buf_putc(b, '"');
        }
    }
    if (rc == TG_OK) {
        rc = tg_buf_puts(b, "}\n");
    }
    if (rc == TG_OK && fwrite(b->data, 1, b->len, stdout) != b->len) {
        rc = TG_ERR_IO;
    }
    return rc;
}

static tg_err_t check_record(void *ud, const tg_ledger_record_t *rec, tg_diag_t *diag) {
    check_ctx_t *c = ud;
    if (c->dump) {
        tg_err_t rc = dump_record(c, rec);
        return rc ? tg_diag_set(diag, rc, "cannot print the record: %s", tg_strerror(rc)) : TG_OK;
    }
    tg_err_t rc = check_content(c, rec, diag);
    if (rc == TG_OK && c->walk != NULL) {
        rc = tg_cli_logwalk_record(c->walk, rec, diag);
    }
    if (rc == TG_OK && c->audit != NULL && touches_approval(rec)) {
        rc = c->ordered ? tg_approval_audit_record(c->audit, rec->seq, rec->type, rec->meta,
                                                   rec->meta_len, rec->payload, rec->payload_len)
                        : hold_record(c, rec);
        if (rc) {
            return tg_diag_set(diag, rc, "approval audit: %s", tg_strerror(rc));
        }
    }
    return rc;
}

static void print_fault(const tg_ledger_verify_report_t *rep) {
    printf("ledger FAULT: %s\n", tg_strerror(rep->fault));
    printf("  file:   %s\n", rep->fault_file);
    printf("  seq:    %llu\n", (unsigned long long)rep->fault_seq);
    printf("  offset: %llu\n", (unsigned long long)rep->fault_offset);
    printf("  what:   %s\n", rep->fault_what);
}

/* ledger.head's write time as UTC text, or "unknown". */
static void head_time(char out[TG_TIME_ISO_LEN + 1], const tg_ledger_verify_report_t *rep) {
    if (tg_time_format_ms(out, rep->head_at_ms) != TG_OK) {
        snprintf(out, TG_TIME_ISO_LEN + 1, "unknown");
    }
}

struct log_check;
static void print_json_log(tg_buf_t *b, const struct log_check *lc, const check_ctx_t *c);

static void print_json_summary(const tg_ledger_verify_report_t *rep, const char *path,
                               const check_ctx_t *c, bool ok, const char *head_hex,
                               const struct log_check *lc) {
    tg_buf_t b;
    tg_buf_init(&b, 0);
    tg_err_t rc = tg_buf_puts(&b, "{\"ok\":");
    rc = rc ? rc : tg_buf_puts(&b, ok ? "true" : "false");
    rc = rc ? rc : tg_buf_puts(&b, ",\"path\":");
    rc = rc ? rc : tg_canon_string(&b, path, strlen(path));
    rc = rc ? rc
            : tg_buf_printf(
                  &b,
                  ",\"records\":%llu,\"receipts\":%llu,\"silences\":%llu,"
                  "\"redemptions\":%llu,\"first_seq\":%llu,\"last_seq\":%llu,\"head_hash\":\"%s\","
                  "\"segments\":%u,\"bytes\":%llu,\"signatures_checked\":%s,"
                  "\"signatures_verified\":%llu",
                  (unsigned long long)rep->records, (unsigned long long)rep->receipts,
                  (unsigned long long)rep->silences, (unsigned long long)rep->redemptions,
                  (unsigned long long)rep->first_seq, (unsigned long long)rep->last_seq, head_hex,
                  rep->segments, (unsigned long long)rep->bytes, c->ring ? "true" : "false",
                  (unsigned long long)c->signatures);
    if (rep->head_found && rc == TG_OK) {
        char when[TG_TIME_ISO_LEN + 1];
        head_time(when, rep);
        rc = tg_buf_printf(&b, ",\"durable_head\":{\"seq\":%llu,\"written\":\"%s\"}",
                           (unsigned long long)rep->head_seq, when);
    } else if (rc == TG_OK) {
        rc = tg_buf_puts(&b, ",\"durable_head\":null");
    }
    if (rc == TG_OK) {
        /* anchors (docs/LEDGER.md "Archive and prune"): where the chain starts and goes on */
        rc = tg_buf_printf(&b, ",\"anchors\":%u,\"anchor_seq\":%llu,\"archive_end_seq\":%llu",
                           rep->anchors,
                           (unsigned long long)(rep->anchor_found ? rep->anchor_seq : 0),
                           (unsigned long long)(rep->end_found ? rep->end_seq : 0));
    }
    if (rc == TG_OK) {
        print_json_log(&b, lc, c);
    }
    if (!ok && rc == TG_OK) {
        rc = tg_buf_printf(&b, ",\"fault\":{\"error\":\"%s\",\"file\":", tg_err_name(rep->fault));
        rc = rc ? rc : tg_canon_string(&b, rep->fault_file, strlen(rep->fault_file));
        rc = rc ? rc
                : tg_buf_printf(&b, ",\"seq\":%llu,\"offset\":%llu,\"what\":",
                                (unsigned long long)rep->fault_seq,
                                (unsigned long long)rep->fault_offset);
        rc = rc ? rc : tg_canon_string(&b, rep->fault_what, strlen(rep->fault_what));
        rc = rc ? rc : tg_buf_putc(&b, '}');
    }
    rc = rc ? rc : tg_buf_puts(&b, "}\n");
    if (rc == TG_OK) {
        fputs(b.data, stdout);
    }
    tg_buf_free(&b);
}

/* The stored checkpoint of a ledger directory (SPEC §12; db.h tg_db_log_stored_checkpoint),
 * read before the walk so the walk keeps the root at its size. */
struct log_check {
    bool found;
    bool key_checked;      /* its signature verified with a log key of the ring */
    char why[TG_DIAG_MAX]; /* a fault found before the walk ("" = none) */
    tg_checkpoint_t cp;
    const tg_note_verifier_t *key;
};
typedef struct log_check log_check_t;

/* --json: "batch_receipts" and "log" (null without a stored checkpoint). Out of memory only
 * shortens the line, as the other members' errors do. */
static void print_json_log(tg_buf_t *b, const struct log_check *lc, const check_ctx_t *c) {
    tg_err_t rc =
        tg_buf_printf(b, ",\"batch_receipts\":%llu,\"log\":", (unsigned long long)c->batch);
    if (rc == TG_OK && !lc->found) {
        rc = tg_buf_puts(b, "null");
    } else if (rc == TG_OK) {
        rc = tg_buf_puts(b, "{\"origin\":");
        rc = rc ? rc : tg_canon_string(b, lc->cp.origin, lc->cp.origin_len);
        rc =
            rc ? rc
               : tg_buf_printf(b, ",\"size\":%llu,\"signature_checked\":%s}",
                               (unsigned long long)lc->cp.size, lc->key_checked ? "true" : "false");
    }
    (void)rc;
}

/* 0 when there is nothing to check or it is loaded, TG_EXIT_USAGE on unusable input. */
static int log_load(log_check_t *lc, check_ctx_t *c, const tg_keyring_t *ring, const char *dir) {
    size_t len = 0;
    tg_diag_t d = {{0}};
    struct stat st;
    memset(lc, 0, sizeof *lc);
    lc->why[0] = '\0';
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        return 0; /* one segment file: no log beside it */
    }
    char *note = malloc(TG_NOTE_MAX_BYTES);
    if (note == NULL) {
        return TG_EXIT_USAGE;
    }
    tg_err_t rc = tg_db_log_stored_checkpoint(dir, note, TG_NOTE_MAX_BYTES, &len, &lc->found, &d);
    if (rc == TG_ERR_LOG_INCONSISTENT) {
        lc->found = true;
        (void)snprintf(lc->why, sizeof lc->why, "%s", d.msg);
    } else if (rc != TG_OK) {
        fprintf(stderr, "trigguard ledger verify: %s\n", d.msg);
        free(note);
        return TG_EXIT_USAGE;
    } else if (lc->found && ring->log_count > 0) {
        rc = tg_cli_checkpoint(ring, note, len, &lc->cp, &lc->key, &d);
        lc->key_checked = rc == TG_OK;
        if (rc != TG_OK) {
            (void)snprintf(lc->why, sizeof lc->why, "the stored checkpoint: %.200s", d.msg);
        }
    } else if (lc->found) {
        /* no log key: the text only, from the note's last blank line (note.h) */
        size_t text_len = 0;
        for (size_t k = len; k >= 2 && text_len == 0; k--) {
            if (note[k - 1] == '\n' && note[k - 2] == '\n') {
                text_len = k - 1;
            }
        }
        if (text_len == 0 || tg_checkpoint_parse(&lc->cp, note, text_len) != TG_OK) {
            (void)snprintf(lc->why, sizeof lc->why, "the stored checkpoint is not a checkpoint");
        }
        lc->cp.ext = NULL;
    }
    free(note);
    if (lc->found && lc->why[0] == '\0') {
        c->walk = tg_cli_logwalk_new();
        if (c->walk == NULL || !tg_cli_logwalk_want(c->walk, lc->cp.size)) {
            return TG_EXIT_USAGE;
        }
    }
    return 0;
}

/* After a walk without a fault: the stored checkpoint against the records; a fault goes into
 * rep (file DIR/tlog/checkpoint). */
static tg_err_t log_check(log_check_t *lc, check_ctx_t *c, tg_ledger_verify_report_t *rep,
                          const char *dir) {
    tg_tlog_hash_t root;
    const char *why = lc->why[0] != '\0' ? lc->why : NULL;
    char buf[TG_DIAG_MAX];
    if (why == NULL && lc->cp.size > rep->records) {
        (void)snprintf(buf, sizeof buf,
                       "the stored checkpoint covers %llu records, the ledger holds %llu: "
                       "records signed into the log are gone",
                       (unsigned long long)lc->cp.size, (unsigned long long)rep->records);
        why = buf;
    } else if (why == NULL && (!tg_cli_logwalk_root(c->walk, lc->cp.size, &root) ||
                               memcmp(root.h, lc->cp.root, 32) != 0)) {
        (void)snprintf(buf, sizeof buf,
                       "the records do not reproduce the stored checkpoint (their root at size "
                       "%llu is another): records altered, reordered or replaced",
                       (unsigned long long)lc->cp.size);
        why = buf;
    }
    if (why == NULL) {
        return TG_OK;
    }
    rep->fault = TG_ERR_LOG_INCONSISTENT;
    (void)snprintf(rep->fault_file, sizeof rep->fault_file, "%s/tlog/checkpoint", dir);
    rep->fault_seq = lc->cp.size;
    rep->fault_offset = 0;
    (void)snprintf(rep->fault_what, sizeof rep->fault_what, "%s", why);
    return TG_ERR_LOG_INCONSISTENT;
}

/* Anchors (anchor.h): the signature by the key the anchor names (keys.json), or by a key
 * given as a PEM file (a trust anchor, matched whatever the id), as receipts are checked. */
typedef struct anchor_ctx {
    const tg_keyring_t *ring;
    unsigned verified;
} anchor_ctx_t;

static tg_err_t check_anchor(void *ud, const struct tg_anchor *a, const char *file,
                             tg_diag_t *diag) {
    anchor_ctx_t *ac = ud;
    const tg_key_t *k = tg_keyring_find(ac->ring, a->key_id, strlen(a->key_id));
    if (k != NULL && tg_anchor_verify(a, k->pk) == TG_OK) {
        ac->verified++;
        return TG_OK;
    }
    for (size_t i = 0; i < ac->ring->count; i++) {
        if (ac->ring->entries[i].anchor &&
            tg_anchor_verify(a, ac->ring->entries[i].key.pk) == TG_OK) {
            ac->verified++;
            return TG_OK;
        }
    }
    (void)file;
    if (k == NULL) {
        return tg_diag_set(diag, TG_ERR_CRYPTO,
                           "anchor signed by key %s, which is not among the keys given, and no "
                           "--key verifies it",
                           a->key_id);
    }
    return tg_diag_set(diag, TG_ERR_CRYPTO,
                       "anchor signature does not verify with key %s (anchor altered or forged)",
                       a->key_id);
}

#define VERIFY_DIRS_MAX 64

static int ledger_verify(int argc, char **argv, bool dump) {
    const char *path = NULL, *head = NULL, *url = NULL;
    const char *paths[VERIFY_DIRS_MAX];
    size_t npaths = 0;
    bool allow_torn = false, json = false;
    tg_keyring_t ring;
    check_ctx_t c;
    int status = TG_EXIT_USAGE;
    const char *cmd = dump ? "dump" : "verify";

    memset(&c, 0, sizeof c);
    tg_buf_init(&c.line, 0);
    c.receipts = json_object();
    c.ordered = true;
    c.problems_to = stdout;
    if (c.receipts == NULL ||
        (!dump && tg_approval_audit_new(&c.audit, 0, audit_problem, &c) != TG_OK)) {
        fprintf(stderr, "trigguard ledger %s: out of memory\n", cmd);
        goto done;
    }
    tg_keyring_init(&ring);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            ledger_usage(stdout);
            status = TG_EXIT_OK;
            goto done;
        } else if (!dump && (strcmp(a, "--keys") == 0 || strcmp(a, "--key") == 0) && i + 1 < argc) {
            if (!tg_cli_add_keys(&ring, argv[++i], strcmp(a, "--keys") == 0, "ledger")) {
                goto done;
            }
            c.ring = &ring;
        } else if (!dump && strcmp(a, "--log-key") == 0 && i + 1 < argc) {
            /* the transparency log's key only: receipts' signatures stay unchecked */
            if (!tg_cli_add_log_key(&ring, argv[++i], "ledger verify")) {
                goto done;
            }
        } else if (!dump && strcmp(a, "--head") == 0 && i + 1 < argc) {
            head = argv[++i];
        } else if (!dump && strcmp(a, "--database-url") == 0 && i + 1 < argc) {
            url = argv[++i];
        } else if (!dump && strcmp(a, "--allow-torn") == 0) {
            allow_torn = true;
        } else if (!dump && strcmp(a, "--json") == 0) {
            json = true;
        } else if (a[0] != '-' && npaths < VERIFY_DIRS_MAX && (npaths == 0 || !dump)) {
            path = paths[npaths++] = a;
        } else {
            fprintf(stderr, "trigguard ledger %s: unexpected argument '%s'\n\n", cmd, a);
            ledger_usage(stderr);
            goto done;
        }
    }
    const char *env_url = getenv("TRIGGUARD_DATABASE_URL");
    if (!dump && path == NULL && url == NULL && env_url != NULL && env_url[0] != '\0') {
        url = env_url;
    }
    if (url != NULL) {
        /* the database form: the directory-only options have no meaning there */
        if (path != NULL || head != NULL || allow_torn || json) {
            fprintf(stderr, "trigguard ledger verify: --database-url takes no PATH, --head, "
                            "--allow-torn or --json\n");
            goto done;
        }
        if (url[0] == '\0') {
            fprintf(stderr, "trigguard ledger verify: --database-url is empty\n");
            goto done;
        }
        c.ordered = false;
        status = tg_ledger_verify_db(url, check_record, &c, c.ring != NULL ? &c.signatures : NULL);
        if (status != TG_EXIT_USAGE) {
            if (audit_held(&c) != TG_OK) {
                fprintf(stderr, "trigguard ledger verify: out of memory in the approval audit\n");
                status = TG_EXIT_USAGE;
            } else if (!print_audit(&c, stdout) && status == TG_EXIT_OK) {
                status = TG_EXIT_FAIL;
            }
        }
        goto done;
    }
    if (path == NULL) {
        fprintf(stderr, "trigguard ledger %s: PATH is required\n\n", cmd);
        ledger_usage(stderr);
        goto done;
    }
    uint8_t want_head[TG_LEDGER_HASH_SIZE];
    if (head != NULL && tg_unhex(want_head, sizeof want_head, head, strlen(head)) != TG_OK) {
        fprintf(stderr, "trigguard ledger verify: --head wants 64 hex characters\n");
        goto done;
    }
    c.dump = dump;
    c.problems_to = json ? stderr : stdout;
    log_check_t lc;
    if (!dump && log_load(&lc, &c, &ring, path) != 0) {
        goto done;
    }
    anchor_ctx_t ac = {.ring = &ring, .verified = 0};
    tg_ledger_verify_opts_t vo = {.check = check_record,
                                  .check_ud = &c,
                                  .anchor_check = c.ring != NULL ? check_anchor : NULL,
                                  .anchor_ud = &ac};
    tg_ledger_verify_report_t rep;
    tg_diag_t diag = {{0}};
    tg_err_t rc = npaths > 1 ? tg_ledger_verify_dirs(&rep, paths, npaths, &vo, &diag)
                             : tg_ledger_verify_path(&rep, path, &vo, &diag);
    if (rc == TG_ERR_LEDGER_TORN && allow_torn) {
        rc = TG_OK;
    }
    if (rc == TG_OK && !dump && lc.found) {
        rc = log_check(&lc, &c, &rep, path);
    }
    if (rc == TG_OK && head != NULL && memcmp(want_head, rep.head_hash, sizeof want_head) != 0) {
        rc = rep.fault = TG_ERR_LEDGER_CORRUPT;
        snprintf(rep.fault_file, sizeof rep.fault_file, "%s", path);
        rep.fault_seq = rep.last_seq;
        rep.fault_offset = 0;
        snprintf(rep.fault_what, sizeof rep.fault_what,
                 "head hash differs from --head (records removed at the end, or another "
                 "ledger)");
    }
    if (rc != TG_OK && rep.fault_file[0] == '\0') {
        /* nothing was located inside the ledger: the input itself is unusable */
        fprintf(stderr, "trigguard ledger %s: %s\n", cmd, diag.msg[0] ? diag.msg : tg_strerror(rc));
        goto done;
    }
    char head_hex[2 * TG_LEDGER_HASH_SIZE + 1];
    tg_hex(head_hex, rep.head_hash, TG_LEDGER_HASH_SIZE);
    if (dump) {
        if (rc) {
            fprintf(stderr, "trigguard ledger dump: stopped at %s: seq %llu at offset %llu: %s\n",
                    rep.fault_file, (unsigned long long)rep.fault_seq,
                    (unsigned long long)rep.fault_offset, rep.fault_what);
        }
    } else if (json) {
        tg_approval_audit_stats_t ast;
        tg_approval_audit_stats(c.audit, &ast);
        if (rc == TG_OK && ast.problems) {
            rc = TG_ERR_LEDGER_CORRUPT; /* exit 1; the problems went to stderr */
        }
        print_json_summary(&rep, path, &c, rc == TG_OK, head_hex, &lc);
    } else {
        if (rc) {
            print_fault(&rep);
            printf("valid prefix: %llu records", (unsigned long long)rep.records);
            if (rep.records) {
                printf(" (seq %llu .. %llu), head hash %s", (unsigned long long)rep.first_seq,
                       (unsigned long long)rep.last_seq, head_hex);
            }
            printf("\n");
        } else {
            printf("ledger OK: %s", paths[0]);
            for (size_t i = 1; i < npaths; i++) {
                printf(" + %s", paths[i]);
            }
            printf("\n");
            printf("  segments:   %u (ledger-%06u.tgl .. ledger-%06u.tgl)\n", rep.segments,
                   rep.first_segment, rep.last_segment);
            printf("  records:    %llu (%llu receipts, %llu silence",
                   (unsigned long long)rep.records, (unsigned long long)rep.receipts,
                   (unsigned long long)rep.silences);
            if (rep.redemptions > 0) {
                printf(", %llu redemptions", (unsigned long long)rep.redemptions);
            }
            printf(")\n");
            printf("  sequence:   %llu .. %llu%s\n", (unsigned long long)rep.first_seq,
                   (unsigned long long)rep.last_seq,
                   rep.records && !rep.anchored ? " (single segment: chain start not checked)"
                                                : "");
            printf("  head hash:  %s\n", head_hex);
            if (rep.anchors > 0) {
                printf("  anchors:    %u checked", rep.anchors);
                if (rep.anchor_found) {
                    printf("; starts at seq %llu (ledger.anchor: earlier records archived)",
                           (unsigned long long)rep.anchor_seq);
                }
                if (rep.end_found) {
                    printf("; an archive: the chain goes on at seq %llu (archive.anchor)",
                           (unsigned long long)rep.end_seq);
                }
                printf("\n              anchor signatures %s\n",
                       c.ring != NULL ? "verified" : "not checked (give --keys or --key)");
            }
            if (rep.leftover_segments > 0) {
                printf("  leftover:   %u segment(s) below the anchor ignored (an interrupted "
                       "archive; the next `ledger archive` removes them)\n",
                       rep.leftover_segments);
            }
            printf("  bytes:      %llu\n", (unsigned long long)rep.bytes);
            if (rep.head_found) {
                char when[TG_TIME_ISO_LEN + 1];
                head_time(when, &rep);
                printf("  durable:    seq %llu recorded in ledger.head at %s (reached)\n",
                       (unsigned long long)rep.head_seq, when);
            }
            if (c.ring != NULL) {
                printf("  signatures: %llu verified\n", (unsigned long long)c.signatures);
            } else {
                printf("  signatures: not checked (give --keys keys.json)\n");
            }
            if (c.batch > 0) {
                printf("  batch:      %llu batch-signed receipts (receiptHash recomputed; "
                       "authentic through the log's checkpoint)\n",
                       (unsigned long long)c.batch);
            }
            if (lc.found) {
                printf("  log:        checkpoint %s size %llu reproduced by the records; "
                       "signature %s\n",
                       lc.cp.origin, (unsigned long long)lc.cp.size,
                       lc.key_checked ? "verified with the log key"
                                      : "not checked (give --keys keys.json with the log key, "
                                        "or --log-key)");
            }
            if (rep.torn_bytes) {
                printf("  torn tail:  %llu bytes (accepted with --allow-torn)\n",
                       (unsigned long long)rep.torn_bytes);
            }
            if (!print_audit(&c, stdout)) {
                rc = TG_ERR_LEDGER_CORRUPT; /* exit 1, as any failed check */
            }
        }
    }
    status = rc == TG_OK ? TG_EXIT_OK : TG_EXIT_FAIL;
done:
    for (size_t i = 0; i < c.n_held; i++) {
        free(c.held[i].meta);
        free(c.held[i].payload);
    }
    free(c.held);
    tg_approval_audit_free(c.audit);
    free(c.walk);
    json_decref(c.receipts);
    tg_buf_free(&c.line);
    tg_keyring_wipe(&ring);
    return status;
}

/* Files per `ledger append` call: each is read (up to 64 KiB) before anything is appended. */
#define APPEND_MAX_FILES 1024

static int append_texts(const char *dir, tg_ledger_opts_t *opts, uint8_t type, const char *meta,
                        char **names, char **texts, const size_t *lens, int n);

static int ledger_append(int argc, char **argv) {
    const char *dir = NULL;
    const char *meta = "";
    uint8_t type = TG_LEDGER_TYPE_RECEIPT;
    tg_ledger_opts_t opts = TG_LEDGER_OPTS_INIT;
    int first_file = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            ledger_usage(stdout);
            return TG_EXIT_OK;
        }
        if (strcmp(a, "--silence") == 0) {
            type = TG_LEDGER_TYPE_SILENCE;
        } else if (strcmp(a, "--redemption") == 0) {
            type = TG_LEDGER_TYPE_REDEMPTION;
        } else if (strcmp(a, "--approval") == 0) {
            type = TG_LEDGER_TYPE_APPROVAL;
        } else if (strcmp(a, "--meta") == 0 && i + 1 < argc) {
            meta = argv[++i];
        } else if (strcmp(a, "--segment-bytes") == 0 && i + 1 < argc) {
            char *end = NULL;
            const char *sv = argv[++i];
            /* digits only: strtoull alone takes "-1" as 2^64-1 and skips blanks */
            unsigned long long v = sv[0] >= '0' && sv[0] <= '9' ? strtoull(sv, &end, 10) : 0;
            if (end == NULL || *end != '\0' || v == 0) {
                fprintf(stderr, "trigguard ledger append: --segment-bytes wants a number\n");
                return TG_EXIT_USAGE;
            }
            opts.segment_max_bytes = (uint64_t)v;
        } else if (strcmp(a, "--durability") == 0 && i + 1 < argc) {
            if (tg_durability_parse(&opts.durability, argv[++i]) != TG_OK) {
                fprintf(stderr, "trigguard ledger append: --durability fsync|batch|none\n");
                return TG_EXIT_USAGE;
            }
        } else if (a[0] != '-' && dir == NULL) {
            dir = a;
        } else if (a[0] != '-' || strcmp(a, "-") == 0) {
            first_file = i;
            break;
        } else {
            fprintf(stderr, "trigguard ledger append: unexpected argument '%s'\n\n", a);
            ledger_usage(stderr);
            return TG_EXIT_USAGE;
        }
    }
    if (dir == NULL || first_file == 0) {
        fprintf(stderr, "trigguard ledger append: DIR and at least one FILE are required\n");
        return TG_EXIT_USAGE;
    }
    if (strlen(meta) > TG_LEDGER_META_MAX) {
        fprintf(stderr, "trigguard ledger append: --meta is longer than %d bytes\n",
                TG_LEDGER_META_MAX);
        return TG_EXIT_USAGE;
    }
    int nfiles = argc - first_file;
    if (nfiles > APPEND_MAX_FILES) {
        fprintf(stderr, "trigguard ledger append: more than %d files in one call\n",
                APPEND_MAX_FILES);
        return TG_EXIT_USAGE;
    }
    /* Every argument is checked and every file read before the ledger is opened: a usage
     * error (exit 2) must mean that nothing was appended. */
    for (int i = first_file; i < argc; i++) {
        if (argv[i][0] == '-' && argv[i][1] != '\0') {
            fprintf(stderr,
                    "trigguard ledger append: unexpected argument '%s' (options go before "
                    "the files)\n\n",
                    argv[i]);
            ledger_usage(stderr);
            return TG_EXIT_USAGE;
        }
    }
    char **texts = calloc((size_t)nfiles, sizeof *texts);
    size_t *lens = calloc((size_t)nfiles, sizeof *lens);
    int status = TG_EXIT_USAGE;
    if (texts == NULL || lens == NULL) {
        fprintf(stderr, "trigguard ledger append: out of memory\n");
        goto done;
    }
    for (int k = 0; k < nfiles; k++) {
        texts[k] = tg_cli_read_file(argv[first_file + k], TG_LEDGER_PAYLOAD_MAX, &lens[k]);
        if (texts[k] == NULL) {
            goto done;
        }
        /* one trailing newline (as `receipt sign` prints) is not part of the record */
        if (lens[k] > 0 && texts[k][lens[k] - 1] == '\n') {
            lens[k]--;
        }
    }
    status = append_texts(dir, &opts, type, meta, argv + first_file, texts, lens, nfiles);
done:
    for (int k = 0; texts != NULL && k < nfiles; k++) {
        free(texts[k]);
    }
    free(texts);
    free(lens);
    return status;
}

/* Opens the ledger in dir and appends texts[0..n) (read from names[0..n)) in order. */
static int append_texts(const char *dir, tg_ledger_opts_t *opts, uint8_t type, const char *meta,
                        char **names, char **texts, const size_t *lens, int n) {
    opts->dir = dir;
    tg_ledger_t *l = NULL;
    tg_ledger_recovery_t rep;
    tg_diag_t diag = {{0}};
    tg_err_t rc = tg_ledger_open(&l, opts, NULL, NULL, &rep, &diag);
    if (rc) {
        fprintf(stderr, "trigguard ledger append: %s: %s\n", tg_strerror(rc), diag.msg);
        return rc == TG_ERR_LEDGER_CORRUPT ? TG_EXIT_FAIL : TG_EXIT_USAGE;
    }
    if (rep.message[0]) {
        fprintf(stderr, "trigguard ledger append: %s\n", rep.message);
    }
    int status = TG_EXIT_OK;
    for (int i = 0; i < n; i++) {
        tg_ledger_pos_t pos;
        rc = tg_ledger_append_sync(l, type, meta, strlen(meta), texts[i], lens[i], &pos);
        if (rc) {
            fprintf(stderr, "trigguard ledger append: %s: %s\n", names[i], tg_strerror(rc));
            status = TG_EXIT_FAIL;
            break;
        }
        printf("seq %llu segment %u offset %llu length %u\n", (unsigned long long)pos.seq,
               pos.segment, (unsigned long long)pos.offset, pos.length);
    }
    tg_ledger_close(l);
    return status;
}

int tg_cmd_ledger(int argc, char **argv) {
    if (argc < 2) {
        ledger_usage(stderr);
        return TG_EXIT_USAGE;
    }
    const char *sub = argv[1];
    if (strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0 || strcmp(sub, "help") == 0) {
        ledger_usage(stdout);
        return TG_EXIT_OK;
    }
    if (strcmp(sub, "verify") == 0) {
        return ledger_verify(argc - 1, argv + 1, false);
    }
    if (strcmp(sub, "dump") == 0) {
        return ledger_verify(argc - 1, argv + 1, true);
    }
    if (strcmp(sub, "append") == 0) {
        return ledger_append(argc - 1, argv + 1);
    }
    if (strcmp(sub, "archive") == 0) {
        return tg_cmd_ledger_archive(argc - 1, argv + 1);
    }
    fprintf(stderr, "trigguard ledger: unknown subcommand '%s'\n\n", sub);
    ledger_usage(stderr);
    return TG_EXIT_USAGE;
}
