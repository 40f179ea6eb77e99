/* receipt.c — receipts (SPEC §5): fast builder, generic signer, verifier. */
#include "trigguard/receipt.h"

#include <sodium.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "trigguard/approval.h"
#include "trigguard/canon.h"
#include "trigguard/clock.h"
#include "trigguard/guard.h"
#include "trigguard/kernel.h"
#include "trigguard/note.h"
#include "trigguard/sha256.h"
#include "trigguard/tlog.h"
#include "trigguard/version.h"

typedef enum {
    K_TEXT,        /* UTF-8, may be empty */
    K_TEXT_NE,     /* UTF-8, non-empty */
    K_HEX64,       /* 64 lowercase hex */
    K_EXEC_ID,     /* "exec_" + 32 lowercase hex */
    K_TIME,        /* YYYY-MM-DDTHH:MM:SS.mmmZ */
    K_DECISION,    /* PERMIT | DENY | ESCALATE | SILENCE (observe) */
    K_REASON,      /* tg_reason_code_valid */
    K_PROTOCOL,    /* TG_PROTOCOL_VERSION */
    K_KEY_ID,      /* tg_key_id_valid */
    K_SIG,         /* 88 chars of canonical padded base64 decoding to 64 bytes */
    K_PRINCIPAL,   /* {"issuer"?: text, "subject": text}, both non-empty, bounded (v1.1) */
    K_MODE,        /* "observe" (SPEC §11.1; absent = enforce) */
    K_APPR_ID,     /* "appr_" + 32 lowercase hex (SPEC §11.2) */
    K_APPROVALS,   /* [{"at","decision":"approve","subject"}], canonical, embedded (§11.2) */
    K_TRANSPARENCY /* the batch kind's log proof (SPEC §12): transparency_shape */
} kind_t;

/* F_SIGNATURE: not hashed; which of them a receipt carries depends on its kind and form
 * (receipt.h "Two kinds"; check_shape). */
enum { F_REQUIRED = 0, F_OPTIONAL = 1, F_SIGNATURE = 2 };

typedef struct {
    const char *name;
    const char *key; /* "\"name\":" as written into the canonical form */
    size_t key_len;
    kind_t kind;
    int flags;
    size_t field_off; /* offsetof in tg_receipt_fields_t; unused for K_TIME and signature */
} member_t;

#define MEMBER(n, k, fl, off)                                                                      \
    { n, "\"" n "\":", sizeof("\"" n "\":") - 1, k, fl, off }
#define FOFF(f) offsetof(tg_receipt_fields_t, f)

/* All members in canonical (RFC 8785) order; ASCII names sort bytewise. A unit test checks
 * that this order is strictly increasing and agrees with tg_canon_write. */
static const member_t MEMBERS[] = {
    MEMBER("action", K_TEXT, F_REQUIRED, FOFF(action)),
    MEMBER("actorId", K_TEXT, F_REQUIRED, FOFF(actor_id)),
    MEMBER("approvalId", K_APPR_ID, F_OPTIONAL, FOFF(approval_id)),
    MEMBER("approvals", K_APPROVALS, F_OPTIONAL, FOFF(approvals)),
    MEMBER("authorityId", K_TEXT_NE, F_REQUIRED, FOFF(authority_id)),
    MEMBER("authorityKeyId", K_KEY_ID, F_SIGNATURE, 0),
    MEMBER("authoritySignature", K_SIG, F_SIGNATURE, 0),
    MEMBER("decision", K_DECISION, F_REQUIRED, FOFF(decision)),
    MEMBER("engineVersion", K_TEXT_NE, F_REQUIRED, FOFF(engine_version)),
    MEMBER("executionContextHash", K_HEX64, F_OPTIONAL, FOFF(execution_context_hash)),
    MEMBER("executionId", K_EXEC_ID, F_REQUIRED, FOFF(execution_id)),
    MEMBER("executionMode", K_MODE, F_OPTIONAL, FOFF(execution_mode)),
    MEMBER("expiresAt", K_TIME, F_REQUIRED, 0),
    MEMBER("policyHash", K_HEX64, F_REQUIRED, FOFF(policy_hash)),
    MEMBER("policyVersion", K_TEXT_NE, F_REQUIRED, FOFF(policy_version)),
    MEMBER("prevReceiptHash", K_TEXT_NE, F_OPTIONAL, FOFF(prev_receipt_hash)),
    MEMBER("principal", K_PRINCIPAL, F_OPTIONAL, FOFF(principal_subject)),
    MEMBER("protocolFingerprint", K_HEX64, F_REQUIRED, FOFF(protocol_fingerprint)),
    MEMBER("protocolVersion", K_PROTOCOL, F_REQUIRED, FOFF(protocol_version)),
    MEMBER("reasonCode", K_REASON, F_REQUIRED, FOFF(reason_code)),
    MEMBER("receiptHash", K_HEX64, F_SIGNATURE, 0),
    MEMBER("requestHash", K_HEX64, F_REQUIRED, FOFF(request_hash)),
    MEMBER("subjectDigest", K_TEXT_NE, F_OPTIONAL, FOFF(subject_digest)),
    MEMBER("surface", K_TEXT_NE, F_REQUIRED, FOFF(surface)),
    MEMBER("tenantId", K_TEXT_NE, F_REQUIRED, FOFF(tenant_id)),
    MEMBER("timestamp", K_TIME, F_REQUIRED, 0),
    MEMBER("transparency", K_TRANSPARENCY, F_SIGNATURE, 0),
};
#define N_MEMBERS (sizeof MEMBERS / sizeof MEMBERS[0])

enum {
    M_APPROVAL_ID = 2,
    M_APPROVALS = 3,
    M_AUTHORITY_KEY_ID = 5,
    M_AUTHORITY_SIGNATURE = 6,
    M_DECISION = 7,
    M_ENGINE_VERSION = 8,
    M_EXECUTION_ID = 10,
    M_EXECUTION_MODE = 11,
    M_EXPIRES_AT = 12,
    M_POLICY_VERSION = 14,
    M_PRINCIPAL = 16,
    M_REASON_CODE = 19,
    M_RECEIPT_HASH = 20,
    M_REQUEST_HASH = 21,
    M_TIMESTAMP = 25,
    M_TRANSPARENCY = 26
};

static bool is_lower_hex(const char *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
            return false;
        }
    }
    return true;
}

/* Decodes padded base64 of exactly `want` bytes (≤ 64); only the one canonical encoding is
 * accepted, so a receipt has exactly one valid text for each value. */
static bool decode_b64(uint8_t *out, size_t want, const char *p, size_t n) {
    char again[TG_RECEIPT_SIG_B64_LEN + 1];
    size_t got = 0;
    if (want > 64 || n != 4 * ((want + 2) / 3) ||
        sodium_base642bin(out, want, p, n, NULL, &got, NULL, sodium_base64_VARIANT_ORIGINAL) != 0 ||
        got != want) {
        return false;
    }
    (void)sodium_bin2base64(again, sizeof again, out, want, sodium_base64_VARIANT_ORIGINAL);
    return memcmp(again, p, n) == 0;
}

/* A K_SIG value: the padded base64 of a 64-byte signature. */
static bool decode_sig(uint8_t sig[64], const char *p, size_t n) {
    return decode_b64(sig, 64, p, n);
}

/* NULL when the value fits the member's format, else what is wrong (for diag). UTF-8 of
 * text members is checked by the parser or by tg_canon_string. */
static const char *check_value(const member_t *m, const char *p, size_t n, int64_t *time_out) {
    uint8_t sig[64];
    switch (m->kind) {
    case K_TEXT:
        return n <= TG_RECEIPT_TEXT_MAX ? NULL : "is longer than 4096 bytes";
    case K_TEXT_NE:
        if (n == 0) {
            return "is empty";
        }
        return n <= TG_RECEIPT_TEXT_MAX ? NULL : "is longer than 4096 bytes";
    case K_HEX64:
        return n == 64 && is_lower_hex(p, n) ? NULL : "is not 64 lowercase hex characters";
    case K_EXEC_ID:
        return n == TG_RECEIPT_EXEC_ID_LEN && memcmp(p, "exec_", 5) == 0 &&
                       is_lower_hex(p + 5, n - 5)
                   ? NULL
                   : "is not \"exec_\" followed by 32 lowercase hex characters";
    case K_TIME:
        return tg_time_parse_ms(time_out, p, n) == TG_OK
                   ? NULL
                   : "is not a UTC timestamp of the form 2026-11-30T05:40:10.123Z";
    case K_REASON:
        return tg_reason_code_valid(p, n) ? NULL : "is not an UPPER_SNAKE reason code";
    case K_DECISION: /* SILENCE only with executionMode (mode_decision_ok) */
        return (n == 6 && memcmp(p, "PERMIT", 6) == 0) || (n == 4 && memcmp(p, "DENY", 4) == 0) ||
                       (n == 8 && memcmp(p, "ESCALATE", 8) == 0) ||
                       (n == 7 && memcmp(p, "SILENCE", 7) == 0)
                   ? NULL
                   : "is not PERMIT, DENY, ESCALATE or SILENCE";
    case K_APPR_ID:
        /* approval.h's id shape, checked here so that verifying needs no approval code */
        return n == TG_APPROVAL_ID_LEN && memcmp(p, TG_APPROVAL_ID_PREFIX, 5) == 0 &&
                       is_lower_hex(p + 5, n - 5)
                   ? NULL
                   : "is not \"appr_\" followed by 32 lowercase hex characters";
    case K_APPROVALS:    /* a tree: approvals_shape */
    case K_TRANSPARENCY: /* a tree: transparency_shape */
        return NULL;
    case K_MODE:
        return n == 7 && memcmp(p, "observe", 7) == 0 ? NULL : "is not \"observe\"";
    case K_PROTOCOL:
        return n == strlen(TG_PROTOCOL_VERSION) && memcmp(p, TG_PROTOCOL_VERSION, n) == 0
                   ? NULL
                   : "is not \"" TG_PROTOCOL_VERSION "\"";
    case K_KEY_ID:
        return tg_key_id_valid(p, n) ? NULL : "is not a valid key id";
    case K_SIG: {
        bool ok = decode_sig(sig, p, n);
        sodium_memzero(sig, sizeof sig);
        return ok ? NULL : "is not the padded base64 of a 64-byte signature";
    }
    case K_PRINCIPAL: /* its subject; the issuer is checked by check_issuer */
        if (n == 0) {
            return "has an empty subject";
        }
        return n <= TG_RECEIPT_PRINCIPAL_MAX ? NULL : "has a subject longer than 1024 bytes";
    }
    return "has an unknown format";
}

/* A SILENCE is signed only in observe mode (SPEC §11.1): an enforce-mode SILENCE has no
 * receipt, so one claiming to be that is malformed. */
static bool mode_decision_ok(const char *decision, size_t n, bool observe) {
    return observe || n != 7 || memcmp(decision, "SILENCE", 7) != 0;
}

static bool decision_is(const char *decision, size_t n, const char *want) {
    return decision != NULL && n == strlen(want) && memcmp(decision, want, n) == 0;
}

/* SPEC §11.2, what the approval members may go with: NULL when the combination is right,
 * else what is wrong. An enforce-mode ESCALATE names the approval it opened; approvals come
 * only with approvalId on a PERMIT; observe mode opens and consumes nothing, so carries
 * neither. */
static const char *approval_combination(const char *decision, size_t n, bool observe, bool has_id,
                                        bool has_approvals) {
    if (observe && (has_id || has_approvals)) {
        return "approvalId and approvals are not allowed with executionMode observe";
    }
    if (!observe && decision_is(decision, n, "ESCALATE") && !has_id) {
        return "decision ESCALATE needs approvalId";
    }
    if (has_approvals && !(has_id && decision_is(decision, n, "PERMIT"))) {
        return "approvals is allowed only with approvalId on a PERMIT";
    }
    return NULL;
}

/* The "approvals" array (SPEC §11.2): 1..TG_APPROVAL_MAX_REQUIRED entries, each exactly
 * {"at": receipt time, "decision": "approve", "subject": a subject's shape}, distinct
 * subjects, in review order (times never decreasing). NULL when it fits, else what is
 * wrong. */
static const char *approvals_shape(const json_t *v) {
    if (!json_is_array(v)) {
        return "must be an array";
    }
    size_t n = json_array_size(v);
    if (n == 0 || n > TG_APPROVAL_MAX_REQUIRED) {
        return "must have 1..16 entries";
    }
    int64_t prev = 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(v, i);
        if (!json_is_object(e) || json_object_size(e) != 3) {
            return "entries must be objects of exactly at, decision and subject";
        }
        const json_t *at = json_object_get(e, "at"), *dec = json_object_get(e, "decision");
        const json_t *sub = json_object_get(e, "subject");
        int64_t t = 0;
        if (!json_is_string(at) ||
            tg_time_parse_ms(&t, json_string_value(at), json_string_length(at)) != TG_OK) {
            return "entries need an at of the form 2026-11-30T05:40:10.123Z";
        }
        if (!json_is_string(dec) || strcmp(json_string_value(dec), "approve") != 0 ||
            json_string_length(dec) != 7) {
            return "entries need decision \"approve\"";
        }
        if (!json_is_string(sub) ||
            !tg_guard_subject_valid(json_string_value(sub), json_string_length(sub))) {
            return "entries need a subject of 1..128 of [A-Za-z0-9._:@/+-]";
        }
        if (i > 0 && t < prev) {
            return "entries must be in review order (at never decreasing)";
        }
        for (size_t j = 0; j < i; j++) {
            const json_t *o = json_object_get(json_array_get(v, j), "subject");
            if (json_string_length(o) == json_string_length(sub) &&
                memcmp(json_string_value(o), json_string_value(sub), json_string_length(sub)) ==
                    0) {
                return "entries must name distinct subjects";
            }
        }
        prev = t;
    }
    return NULL;
}

/* The builder's approvals text: strict JSON of approvals_shape's form, in its canonical
 * form already (it is embedded byte for byte and must hash as a verifier will). */
static tg_err_t check_approvals_text(const tg_receipt_str_t *v, tg_diag_t *diag) {
    json_t *root = NULL;
    tg_buf_t canon;
    tg_json_limits_t lim = TG_JSON_LIMITS_DEFAULT;
    tg_diag_t inner = {0};
    tg_buf_init(&canon, 0);
    tg_err_t rc = tg_json_parse(&root, v->ptr, v->len, &lim, &inner);
    const char *why = rc ? "is not JSON" : approvals_shape(root);
    if (why == NULL) {
        rc = tg_canon_write(&canon, root, &inner);
        why = rc ? "cannot be canonicalized"
              : canon.len != v->len || memcmp(canon.data, v->ptr, v->len) != 0
                  ? "is not in its canonical form"
                  : NULL;
    }
    json_decref(root);
    tg_buf_free(&canon);
    return why == NULL ? TG_OK
                       : tg_diag_set(diag, TG_ERR_INVALID_ARG, "receipt field approvals %s", why);
}

/* The principal's optional issuer: NULL when it fits, else what is wrong. */
static const char *check_issuer(size_t n) {
    if (n == 0) {
        return "has an empty issuer";
    }
    return n <= TG_RECEIPT_PRINCIPAL_MAX ? NULL : "has an issuer longer than 1024 bytes";
}

/* ---- fast builder -------------------------------------------------------------------- */

/* Collects and validates the hashed values of f in canonical order; times are formatted
 * into ts/exp. vals[i].ptr NULL = absent (or a signature member). */
static tg_err_t gather(tg_receipt_str_t vals[N_MEMBERS], char ts[TG_TIME_ISO_LEN + 1],
                       char exp[TG_TIME_ISO_LEN + 1], const tg_receipt_fields_t *f,
                       tg_diag_t *diag) {
    int64_t t;
    if (tg_time_format_ms(ts, f->timestamp_ms) != TG_OK ||
        tg_time_format_ms(exp, f->expires_at_ms) != TG_OK) {
        return tg_diag_set(diag, TG_ERR_INVALID_ARG,
                           "receipt field timestamp/expiresAt is outside 1970..9999");
    }
    if (f->expires_at_ms < f->timestamp_ms) {
        return tg_diag_set(diag, TG_ERR_INVALID_ARG, "receipt field expiresAt is before timestamp");
    }
    if (f->principal_issuer.ptr != NULL) {
        const char *why = f->principal_subject.ptr == NULL ? "has an issuer but no subject"
                                                           : check_issuer(f->principal_issuer.len);
        if (why != NULL) {
            return tg_diag_set(diag, TG_ERR_INVALID_ARG, "receipt field principal %s", why);
        }
    }
    for (size_t i = 0; i < N_MEMBERS; i++) {
        const member_t *m = &MEMBERS[i];
        vals[i].ptr = NULL;
        vals[i].len = 0;
        if (m->flags == F_SIGNATURE) {
            continue;
        }
        if (m->kind == K_TIME) {
            vals[i].ptr = i == M_TIMESTAMP ? ts : exp;
            vals[i].len = TG_TIME_ISO_LEN;
            continue;
        }
        tg_receipt_str_t v = *(const tg_receipt_str_t *)((const char *)f + m->field_off);
        if (v.ptr == NULL && m->kind == K_PROTOCOL) {
            v = (tg_receipt_str_t){TG_PROTOCOL_VERSION, strlen(TG_PROTOCOL_VERSION)};
        } else if (v.ptr == NULL && i == M_ENGINE_VERSION) {
            v = (tg_receipt_str_t){TG_ENGINE_VERSION, strlen(TG_ENGINE_VERSION)};
        }
        if (v.ptr == NULL) {
            if (m->flags == F_OPTIONAL) {
                continue;
            }
            return tg_diag_set(diag, TG_ERR_INVALID_ARG, "receipt field %s is missing", m->name);
        }
        const char *why = check_value(m, v.ptr, v.len, &t);
        if (why != NULL) {
            return tg_diag_set(diag, TG_ERR_INVALID_ARG, "receipt field %s %s", m->name, why);
        }
        vals[i] = v;
    }
    if (!mode_decision_ok(vals[M_DECISION].ptr, vals[M_DECISION].len,
                          vals[M_EXECUTION_MODE].ptr != NULL)) {
        return tg_diag_set(diag, TG_ERR_INVALID_ARG,
                           "receipt field decision SILENCE needs executionMode observe");
    }
    const char *why = approval_combination(
        vals[M_DECISION].ptr, vals[M_DECISION].len, vals[M_EXECUTION_MODE].ptr != NULL,
        vals[M_APPROVAL_ID].ptr != NULL, vals[M_APPROVALS].ptr != NULL);
    if (why != NULL) {
        return tg_diag_set(diag, TG_ERR_INVALID_ARG, "receipt fields: %s", why);
    }
    if (vals[M_APPROVALS].ptr != NULL) {
        return check_approvals_text(&vals[M_APPROVALS], diag);
    }
    return TG_OK;
}

/* Writes the canonical unsigned object; pos[i] records, for the signature members, the
 * offset where `,"name":value` belongs in the signed form. */
static tg_err_t write_unsigned(tg_buf_t *out, size_t pos[N_MEMBERS],
                               const tg_receipt_str_t vals[N_MEMBERS], tg_receipt_str_t issuer,
                               tg_diag_t *diag) {
    tg_err_t rc = TG_OK;
    bool first = true;
    for (size_t i = 0; i < N_MEMBERS; i++) {
        if (MEMBERS[i].flags == F_SIGNATURE) {
            pos[i] = out->len;
            continue;
        }
        if (vals[i].ptr == NULL) {
            continue;
        }
        rc = tg_buf_putc(out, first ? '{' : ',');
        if (!rc) {
            rc = tg_buf_append(out, MEMBERS[i].key, MEMBERS[i].key_len);
        }
        if (!rc && MEMBERS[i].kind == K_PRINCIPAL) {
            /* {"issuer":…,"subject":…}: canonical member order, issuer only when known */
            if (issuer.ptr != NULL) {
                rc = tg_buf_puts(out, "{\"issuer\":");
                if (!rc) {
                    rc = tg_canon_string(out, issuer.ptr, issuer.len);
                }
                if (!rc) {
                    rc = tg_buf_puts(out, ",\"subject\":");
                }
            } else {
                rc = tg_buf_puts(out, "{\"subject\":");
            }
        }
        if (!rc && MEMBERS[i].kind == K_APPROVALS) {
            rc = tg_buf_append(out, vals[i].ptr, vals[i].len); /* canonical, checked by gather */
        } else if (!rc) {
            rc = tg_canon_string(out, vals[i].ptr, vals[i].len);
            if (!rc && MEMBERS[i].kind == K_PRINCIPAL) {
                rc = tg_buf_putc(out, '}');
            }
        }
        /* the principal's issuer is written before its subject: either may be the one */
        if (rc == TG_ERR_JSON_UTF8 || rc == TG_ERR_JSON_SURROGATE) {
            return tg_diag_set(diag, TG_ERR_INVALID_ARG, "receipt field %s is not valid UTF-8",
                               MEMBERS[i].name);
        }
        if (rc) {
            return rc;
        }
        first = false;
    }
    return tg_buf_putc(out, '}');
}

tg_err_t tg_receipt_write_unsigned(tg_buf_t *out, const tg_receipt_fields_t *fields,
                                   tg_diag_t *diag) {
    tg_receipt_str_t vals[N_MEMBERS] = {{NULL, 0}};
    size_t pos[N_MEMBERS] = {0};
    char ts[TG_TIME_ISO_LEN + 1], exp[TG_TIME_ISO_LEN + 1];
    size_t start = out->len;
    tg_err_t rc = gather(vals, ts, exp, fields, diag);
    if (rc == TG_OK) {
        rc = write_unsigned(out, pos, vals, fields->principal_issuer, diag);
    }
    if (rc && out->data != NULL) {
        out->len = start;
        out->data[start] = '\0';
    }
    return rc;
}

/* Inserts `ins` (n bytes) at offset `at` of out (capacity already reserved). */
static void insert_at(tg_buf_t *out, size_t at, const char *ins, size_t n) {
    memmove(out->data + at + n, out->data + at, out->len - at);
    memcpy(out->data + at, ins, n);
    out->len += n;
    out->data[out->len] = '\0';
}

/* The two insertions that turn the unsigned canonical form into the signed one. */
static tg_err_t sign_and_insert(tg_buf_t *out, tg_receipt_signed_t *info, const tg_key_t *key,
                                size_t start, const size_t pos[N_MEMBERS]) {
    uint8_t hash[32], sig[64];
    char hex[65], b64[TG_RECEIPT_SIG_B64_LEN + 1];
    char ins_key[160], ins_hash[96];
    tg_err_t rc;

    tg_sha256(hash, out->data + start, out->len - start);
    rc = tg_key_sign(sig, key, hash, sizeof hash);
    if (rc) {
        return rc;
    }
    (void)sodium_bin2base64(b64, sizeof b64, sig, sizeof sig, sodium_base64_VARIANT_ORIGINAL);
    tg_hex(hex, hash, sizeof hash);
    int n1 = snprintf(ins_key, sizeof ins_key,
                      ",\"authorityKeyId\":\"%s\",\"authoritySignature\":\"%s\"", key->key_id, b64);
    int n2 = snprintf(ins_hash, sizeof ins_hash, ",\"receiptHash\":\"%s\"", hex);
    if (n1 < 0 || (size_t)n1 >= sizeof ins_key || n2 < 0 || (size_t)n2 >= sizeof ins_hash) {
        return TG_ERR_INTERNAL;
    }
    rc = tg_buf_reserve(out, (size_t)n1 + (size_t)n2);
    if (rc) {
        return rc;
    }
    /* Later offset first so the earlier one stays valid. */
    insert_at(out, pos[M_RECEIPT_HASH], ins_hash, (size_t)n2);
    insert_at(out, pos[M_AUTHORITY_KEY_ID], ins_key, (size_t)n1);
    if (info != NULL) {
        memcpy(info->hash, hash, sizeof hash);
        memcpy(info->hash_hex, hex, sizeof hex);
        info->offset = start;
        info->length = out->len - start;
    }
    return TG_OK;
}

tg_err_t tg_receipt_sign_fields(tg_buf_t *out, tg_receipt_signed_t *info, const tg_key_t *key,
                                const tg_receipt_fields_t *fields, tg_diag_t *diag) {
    tg_receipt_str_t vals[N_MEMBERS] = {{NULL, 0}};
    size_t pos[N_MEMBERS] = {0};
    char ts[TG_TIME_ISO_LEN + 1], exp[TG_TIME_ISO_LEN + 1];
    size_t start = out->len;
    tg_err_t rc = TG_OK;

    if (key == NULL || !key->has_secret) {
        return tg_diag_set(diag, TG_ERR_NO_KEY, "no signing key: cannot sign a receipt");
    }
    TG_TRY(gather(vals, ts, exp, fields, diag));
    TG_TRY(write_unsigned(out, pos, vals, fields->principal_issuer, diag));
    rc = sign_and_insert(out, info, key, start, pos);
    if (rc) {
        rc = tg_diag_set(diag, rc, "cannot sign the receipt: %s", tg_strerror(rc));
    }
done:
    if (rc && out->data != NULL) {
        out->len = start;
        out->data[start] = '\0';
    }
    return rc;
}

/* ---- the batch-signed kind (SPEC §12): hashed form and transparency ------------------- */

tg_err_t tg_receipt_write_hashed(tg_buf_t *out, tg_receipt_signed_t *info,
                                 const tg_receipt_fields_t *fields, tg_diag_t *diag) {
    tg_receipt_str_t vals[N_MEMBERS] = {{NULL, 0}};
    size_t pos[N_MEMBERS] = {0};
    char ts[TG_TIME_ISO_LEN + 1], exp[TG_TIME_ISO_LEN + 1];
    char ins[96];
    uint8_t hash[32];
    char hex[65];
    size_t start = out->len;
    tg_err_t rc = TG_OK;

    TG_TRY(gather(vals, ts, exp, fields, diag));
    TG_TRY(write_unsigned(out, pos, vals, fields->principal_issuer, diag));
    /* the same hash as the signed kind's: over the hashed members only */
    tg_sha256(hash, out->data + start, out->len - start);
    tg_hex(hex, hash, sizeof hash);
    int n = snprintf(ins, sizeof ins, ",\"receiptHash\":\"%s\"", hex);
    if (n < 0 || (size_t)n >= sizeof ins) {
        rc = TG_ERR_INTERNAL;
        goto done;
    }
    TG_TRY(tg_buf_reserve(out, (size_t)n));
    insert_at(out, pos[M_RECEIPT_HASH], ins, (size_t)n);
    if (info != NULL) {
        memcpy(info->hash, hash, sizeof hash);
        memcpy(info->hash_hex, hex, sizeof hex);
        info->offset = start;
        info->length = out->len - start;
    }
done:
    if (rc && out->data != NULL) {
        out->len = start;
        out->data[start] = '\0';
    }
    return rc;
}

/* The first occurrence of needle (nl bytes) in hay[0..n), or NULL. */
static const char *find_text(const char *hay, size_t n, const char *needle, size_t nl) {
    for (size_t i = 0; nl <= n && i <= n - nl; i++) {
        if (hay[i] == needle[0] && memcmp(hay + i, needle, nl) == 0) {
            return hay + i;
        }
    }
    return NULL;
}

/* name must be a string literal: it is pasted between quotes. */
#define HAS_MEMBER(text, len, name)                                                                \
    (find_text((text), (len), "\"" name "\":", sizeof(name) + 2) != NULL)

bool tg_receipt_text_is_hashed(const char *text, size_t len) {
    return text != NULL && HAS_MEMBER(text, len, "receiptHash") &&
           !HAS_MEMBER(text, len, "authoritySignature");
}

/* A transparency integer: JSON-safe (receipt.h). */
static bool log_int_ok(uint64_t v) { return v <= TG_RECEIPT_MAX_LOG_INT; }

tg_err_t tg_receipt_transparency_member(tg_buf_t *out, const tg_receipt_transparency_t *t) {
    char b64[64], num[48];
    size_t start = out->len;
    tg_err_t rc = TG_OK;
    if (t == NULL || t->checkpoint == NULL || t->checkpoint_len == 0 ||
        t->checkpoint_len > TG_NOTE_MAX_BYTES || t->proof_len > TG_TLOG_MAX_PROOF ||
        (t->proof == NULL && t->proof_len > 0) || t->leaf_index >= t->tree_size ||
        !log_int_ok(t->tree_size) || t->log_origin == NULL ||
        tg_note_name_check(t->log_origin, t->log_origin_len) != TG_OK) {
        return TG_ERR_INVALID_ARG;
    }
    TG_TRY(tg_buf_puts(out, ",\"transparency\":{\"checkpoint\":"));
    rc = tg_canon_string(out, t->checkpoint, t->checkpoint_len);
    if (rc == TG_ERR_JSON_UTF8 || rc == TG_ERR_JSON_SURROGATE) {
        rc = TG_ERR_INVALID_ARG;
    }
    if (rc) {
        goto done;
    }
    TG_TRY(tg_buf_puts(out, ",\"inclusionProof\":["));
    for (size_t i = 0; i < t->proof_len; i++) {
        (void)sodium_bin2base64(b64, sizeof b64, t->proof[i].h, sizeof t->proof[i].h,
                                sodium_base64_VARIANT_ORIGINAL);
        TG_TRY(tg_buf_printf(out, i == 0 ? "\"%s\"" : ",\"%s\"", b64));
    }
    (void)snprintf(num, sizeof num, "%llu", (unsigned long long)t->leaf_index);
    TG_TRY(tg_buf_printf(out, "],\"leafIndex\":%s,\"logKeyId\":\"%08lx\",\"logOrigin\":", num,
                         (unsigned long)t->log_key_id));
    TG_TRY(tg_canon_string(out, t->log_origin, t->log_origin_len));
    TG_TRY(tg_buf_printf(out, ",\"treeSize\":%llu}", (unsigned long long)t->tree_size));
done:
    if (rc && out->data != NULL) {
        out->len = start;
        out->data[start] = '\0';
    }
    return rc;
}

tg_err_t tg_receipt_add_transparency(tg_buf_t *out, const char *hashed, size_t len,
                                     const tg_receipt_transparency_t *t) {
    size_t start = out->len;
    tg_err_t rc = TG_OK;
    if (hashed == NULL || len < 2 || hashed[0] != '{' || hashed[len - 1] != '}' ||
        !tg_receipt_text_is_hashed(hashed, len) || HAS_MEMBER(hashed, len, "authorityKeyId") ||
        HAS_MEMBER(hashed, len, "transparency")) {
        return TG_ERR_INVALID_ARG;
    }
    TG_TRY(tg_buf_append(out, hashed, len - 1));
    TG_TRY(tg_receipt_transparency_member(out, t));
    TG_TRY(tg_buf_putc(out, '}'));
done:
    if (rc && out->data != NULL) {
        out->len = start;
        out->data[start] = '\0';
    }
    return rc;
}

/* ---- shape check over a parsed object ------------------------------------------------ */

typedef struct {
    const char *val[N_MEMBERS]; /* NULL = absent */
    size_t len[N_MEMBERS];
    int64_t ts_ms, exp_ms;
    uint8_t sig[64];
    uint8_t hash[32];
    /* the batch kind (transparency present; transparency_shape fills the rest) */
    bool batch;
    const char *checkpoint, *origin; /* views into the parsed object */
    size_t checkpoint_len, origin_len;
    uint64_t leaf_index, tree_size;
    uint32_t log_key_id;
    size_t proof_len;
    tg_tlog_hash_t proof[TG_TLOG_MAX_PROOF];
} shape_t;

/* Which members beside the hashed ones a receipt given to check_shape must have
 * (receipt.h "Two kinds"). */
typedef enum {
    FORM_BODY,   /* the generic signer's input: none of them */
    FORM_HASHED, /* a batch receipt as the ledger stores it: receiptHash only */
    FORM_FINAL   /* what a verifier takes: the signed kind's three, or receiptHash and
                    transparency */
} form_t;

/* Copies a member name into dst for a diag, replacing anything but printable ASCII. */
static const char *printable(char *dst, size_t cap, const char *s) {
    size_t i = 0;
    for (; s[i] != '\0' && i + 4 < cap; i++) {
        char c = s[i];
        if (c < 0x20 || c >= 0x7f || c == '"') {
            c = '?';
        }
        dst[i] = c;
    }
    if (s[i] != '\0') {
        memcpy(dst + i, "...", 3);
        i += 3;
    }
    dst[i] = '\0';
    return dst;
}

static int member_index(const char *name) {
    size_t lo = 0, hi = N_MEMBERS;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(name, MEMBERS[mid].name);
        if (c == 0) {
            return (int)mid;
        }
        if (c < 0) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    return -1;
}

/* The principal member (SPEC 1.1): an object with exactly a string "subject" and, optionally,
 * a string "issuer". The subject's value is checked with the other members'. */
static tg_err_t principal_shape(const json_t *v, tg_diag_t *diag) {
    if (!json_is_object(v)) {
        return tg_diag_set(diag, TG_ERR_RECEIPT_SHAPE, "member principal must be an object");
    }
    const json_t *sub = json_object_get(v, "subject");
    const json_t *iss = json_object_get(v, "issuer");
    if (!json_is_string(sub)) {
        return tg_diag_set(diag, TG_ERR_RECEIPT_SHAPE,
                           "member principal must have a string subject");
    }
    if (iss != NULL && !json_is_string(iss)) {
        return tg_diag_set(diag, TG_ERR_RECEIPT_SHAPE,
                           "member principal's issuer must be a string");
    }
    if (json_object_size(v) != (iss != NULL ? 2u : 1u)) {
        return tg_diag_set(diag, TG_ERR_RECEIPT_SHAPE,
                           "member principal may only have the members issuer and subject");
    }
    const char *why = iss != NULL ? check_issuer(json_string_length(iss)) : NULL;
    if (why != NULL) {
        return tg_diag_set(diag, TG_ERR_RECEIPT_SHAPE, "member principal %s", why);
    }
    return TG_OK;
}

/* A transparency integer (leafIndex, treeSize): a JSON number that is a whole number within
 * TG_RECEIPT_MAX_LOG_INT (parsed numbers are doubles, canon.h; built trees may hold
 * integers). */
static bool log_int(uint64_t *out, const json_t *v) {
    if (json_is_integer(v)) {
        json_int_t i = json_integer_value(v);
        if (i < 0 || (uint64_t)i > TG_RECEIPT_MAX_LOG_INT) {
            return false;
        }
        *out = (uint64_t)i;
        return true;
    }
    if (!json_is_real(v)) {
        return false;
    }
    double d = json_real_value(v);
    if (!(d >= 0.0 && d <= (double)TG_RECEIPT_MAX_LOG_INT) || (double)(uint64_t)d != d) {
        return false;
    }
    *out = (uint64_t)d;
    return true;
}

/* The transparency member (receipt.h): exactly its six members with their formats, read
 * into sh. Whether the values agree with the checkpoint is the verifier's (TLOG_PROOF). */
static tg_err_t transparency_shape(shape_t *sh, const json_t *v, tg_diag_t *diag) {
    static const char *const names[] = {"checkpoint", "inclusionProof", "leafIndex",
                                        "logKeyId",   "logOrigin",      "treeSize"};
    if (!json_is_object(v)) {
        return tg_diag_set(diag, TG_ERR_RECEIPT_SHAPE, "member transparency must be an object");
    }
    size_t found = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        found += json_object_get(v, names[i]) != NULL;
    }
    if (found != sizeof names / sizeof names[0] || json_object_size(v) != found) {
        return tg_diag_set(diag, TG_ERR_RECEIPT_SHAPE,
                           "member transparency must have exactly checkpoint, inclusionProof, "
                           "leafIndex, logKeyId, logOrigin and treeSize");
    }
    const json_t *cp = json_object_get(v, "checkpoint");
    const json_t *proof = json_object_get(v, "inclusionProof");
    const json_t *kid = json_object_get(v, "logKeyId");
    const json_t *origin = json_object_get(v, "logOrigin");
    if (!json_is_string(cp) || json_string_length(cp) == 0 ||
        json_string_length(cp) > TG_NOTE_MAX_BYTES) {
        return tg_diag_set(diag, TG_ERR_RECEIPT_SHAPE,
                           "member transparency.checkpoint must be a signed note of 1..65536 "
                           "bytes");
    }
    if (!json_is_array(proof) || json_array_size(proof) > TG_TLOG_MAX_PROOF) {
        return tg_diag_set(diag, TG_ERR_RECEIPT_SHAPE,
                           "member transparency.inclusionProof must be an array of at most 63 "
                           "hashes");
    }
    for (size_t i = 0; i < json_array_size(proof); i++) {
        const json_t *h = json_array_get(proof, i);
        if (!json_is_string(h) ||
            !decode_b64(sh->proof[i].h, 32, json_string_value(h), json_string_length(h))) {
            return tg_diag_set(diag, TG_ERR_RECEIPT_SHAPE,
                               "member transparency.inclusionProof[%zu] is not the padded base64 "
                               "of 32 bytes",
                               i);
        }
    }
    if (!log_int(&sh->leaf_index, json_object_get(v, "leafIndex")) ||
        !log_int(&sh->tree_size, json_object_get(v, "treeSize"))) {
        return tg_diag_set(diag, TG_ERR_RECEIPT_SHAPE,
                           "members transparency.leafIndex and treeSize must be whole numbers "
                           "from 0 to 2^53-1");
    }
    uint8_t id[4];
    if (!json_is_string(kid) || json_string_length(kid) != 8 ||
        !is_lower_hex(json_string_value(kid), 8) ||
        tg_unhex(id, sizeof id, json_string_value(kid), 8) != TG_OK) {
        return tg_diag_set(diag, TG_ERR_RECEIPT_SHAPE,
                           "member transparency.logKeyId is not 8 lowercase hex characters");
    }
    if (!json_is_string(origin) ||
        tg_note_name_check(json_string_value(origin), json_string_length(origin)) != TG_OK) {
        return tg_diag_set(diag, TG_ERR_RECEIPT_SHAPE,
                           "member transparency.logOrigin is not a log key name");
    }
    sh->batch = true;
    sh->proof_len = json_array_size(proof);
    sh->log_key_id = (uint32_t)id[0] << 24 | (uint32_t)id[1] << 16 | (uint32_t)id[2] << 8 | id[3];
    sh->checkpoint = json_string_value(cp);
    sh->checkpoint_len = json_string_length(cp);
    sh->origin = json_string_value(origin);
    sh->origin_len = json_string_length(origin);
    return TG_OK;
}

/* Whether the non-hashed member i must be present (1), absent (0) in a receipt of this form
 * and kind (receipt.h "Two kinds"). */
static bool sig_member_wanted(size_t i, form_t form, bool batch) {
    switch (form) {
    case FORM_BODY:
        return false;
    case FORM_HASHED:
        return i == M_RECEIPT_HASH;
    case FORM_FINAL:
        return i == M_RECEIPT_HASH || (batch ? i == M_TRANSPARENCY : i != M_TRANSPARENCY);
    }
    return false;
}

static tg_err_t check_shape(shape_t *sh, const json_t *obj, form_t form, tg_diag_t *diag) {
    const char *name;
    json_t *v;
    char tmp[48];

    memset(sh, 0, sizeof *sh);
    if (!json_is_object(obj)) {
        return tg_diag_set(diag, TG_ERR_RECEIPT_SHAPE, "a receipt must be a JSON object");
    }
    json_object_foreach((json_t *)obj, name, v) {
        int i = member_index(name);
        if (i < 0) {
            return tg_diag_set(diag, TG_ERR_RECEIPT_SHAPE, "unknown member \"%s\"",
                               printable(tmp, sizeof tmp, name));
        }
        const member_t *m = &MEMBERS[i];
        if (form == FORM_BODY && m->flags == F_SIGNATURE) {
            return tg_diag_set(diag, TG_ERR_RECEIPT_SHAPE,
                               "member %s must not be present before signing", m->name);
        }
        if (json_is_null(v)) {
            return tg_diag_set(diag, TG_ERR_RECEIPT_SHAPE,
                               "member %s is null (absent fields are omitted, never null)",
                               m->name);
        }
        if (m->kind == K_APPROVALS) {
            const char *why = approvals_shape(v);
            if (why != NULL) {
                return tg_diag_set(diag, TG_ERR_RECEIPT_SHAPE, "member approvals %s", why);
            }
            sh->val[i] = ""; /* present; its value is the tree just checked */
            continue;
        }
        if (m->kind == K_TRANSPARENCY) {
            tg_err_t trc = transparency_shape(sh, v, diag);
            if (trc != TG_OK) {
                return trc;
            }
            sh->val[i] = ""; /* present; read into sh */
            continue;
        }
        if (m->kind == K_PRINCIPAL) {
            tg_err_t prc = principal_shape(v, diag);
            if (prc != TG_OK) {
                return prc;
            }
            v = json_object_get(v, "subject"); /* checked below like every value */
        }
        if (!json_is_string(v)) {
            return tg_diag_set(diag, TG_ERR_RECEIPT_SHAPE, "member %s must be a string", m->name);
        }
        sh->val[i] = json_string_value(v);
        sh->len[i] = json_string_length(v);
    }
    for (size_t i = 0; i < N_MEMBERS; i++) {
        const member_t *m = &MEMBERS[i];
        bool wanted = m->flags == F_SIGNATURE && sig_member_wanted(i, form, sh->batch);
        if (sh->val[i] == NULL) {
            if (m->flags == F_REQUIRED || wanted) {
                return tg_diag_set(diag, TG_ERR_RECEIPT_SHAPE, "required member %s is missing",
                                   m->name);
            }
            continue;
        }
        if (m->flags == F_SIGNATURE && !wanted) {
            return tg_diag_set(diag, TG_ERR_RECEIPT_SHAPE, "%s",
                               form == FORM_HASHED
                                   ? "a stored batch receipt has receiptHash and no other "
                                     "unhashed member"
                                   : "a receipt has either authorityKeyId and authoritySignature "
                                     "(signed) or transparency (batch-signed), not both");
        }
        int64_t t = 0;
        const char *why = check_value(m, sh->val[i], sh->len[i], &t);
        if (why != NULL) {
            return tg_diag_set(diag, TG_ERR_RECEIPT_SHAPE, "member %s %s", m->name, why);
        }
        if (i == M_TIMESTAMP) {
            sh->ts_ms = t;
        } else if (i == M_EXPIRES_AT) {
            sh->exp_ms = t;
        }
    }
    if (sh->exp_ms < sh->ts_ms) {
        return tg_diag_set(diag, TG_ERR_RECEIPT_SHAPE, "expiresAt is before timestamp");
    }
    if (!mode_decision_ok(sh->val[M_DECISION], sh->len[M_DECISION],
                          sh->val[M_EXECUTION_MODE] != NULL)) {
        return tg_diag_set(diag, TG_ERR_RECEIPT_SHAPE,
                           "member decision is SILENCE without executionMode observe");
    }
    const char *why = approval_combination(
        sh->val[M_DECISION], sh->len[M_DECISION], sh->val[M_EXECUTION_MODE] != NULL,
        sh->val[M_APPROVAL_ID] != NULL, sh->val[M_APPROVALS] != NULL);
    if (why != NULL) {
        return tg_diag_set(diag, TG_ERR_RECEIPT_SHAPE, "%s", why);
    }
    if (sh->val[M_AUTHORITY_SIGNATURE] != NULL) {
        (void)decode_sig(sh->sig, sh->val[M_AUTHORITY_SIGNATURE], sh->len[M_AUTHORITY_SIGNATURE]);
    }
    if (sh->val[M_RECEIPT_HASH] != NULL &&
        tg_unhex(sh->hash, 32, sh->val[M_RECEIPT_HASH], sh->len[M_RECEIPT_HASH]) != TG_OK) {
        return tg_diag_set(diag, TG_ERR_RECEIPT_SHAPE, "member receiptHash is not hex");
    }
    return TG_OK;
}

/* ---- generic signer ------------------------------------------------------------------ */

tg_err_t tg_receipt_sign_json(tg_buf_t *out, tg_receipt_signed_t *info, const tg_key_t *key,
                              const json_t *body, tg_diag_t *diag) {
    shape_t sh;
    uint8_t hash[32], sig[64];
    char hex[65], b64[TG_RECEIPT_SIG_B64_LEN + 1];
    json_t *copy = NULL;
    size_t start = out->len;
    tg_err_t rc = TG_OK;

    if (key == NULL || !key->has_secret) {
        return tg_diag_set(diag, TG_ERR_NO_KEY, "no signing key: cannot sign a receipt");
    }
    TG_TRY(check_shape(&sh, body, FORM_BODY, diag));
    TG_TRY(tg_canon_sha256(hash, body, diag));
    rc = tg_key_sign(sig, key, hash, sizeof hash);
    if (rc) {
        rc = tg_diag_set(diag, rc, "cannot sign the receipt: %s", tg_strerror(rc));
        goto done;
    }
    tg_hex(hex, hash, sizeof hash);
    (void)sodium_bin2base64(b64, sizeof b64, sig, sizeof sig, sodium_base64_VARIANT_ORIGINAL);
    copy = json_deep_copy(body);
    if (copy == NULL || json_object_set_new(copy, "receiptHash", json_string(hex)) != 0 ||
        json_object_set_new(copy, "authoritySignature", json_string(b64)) != 0 ||
        json_object_set_new(copy, "authorityKeyId", json_string(key->key_id)) != 0) {
        rc = tg_diag_set(diag, TG_ERR_NOMEM, "out of memory building the signed receipt");
        goto done;
    }
    TG_TRY(tg_canon_write(out, copy, diag));
    if (info != NULL) {
        memcpy(info->hash, hash, sizeof hash);
        memcpy(info->hash_hex, hex, sizeof hex);
        info->offset = start;
        info->length = out->len - start;
    }
done:
    json_decref(copy);
    if (rc && out->data != NULL) {
        out->len = start;
        out->data[start] = '\0';
    }
    return rc;
}

/* ---- verifier ------------------------------------------------------------------------ */

/* The key whose signature over sh->hash holds: the one authorityKeyId names, else a trust
 * anchor (tried by signature, since the id is an unsigned hint). */
static tg_err_t find_signer(const tg_key_t **out, bool *by_anchor, const tg_keyring_t *ring,
                            const shape_t *sh, tg_diag_t *diag) {
    const char *kid = sh->val[M_AUTHORITY_KEY_ID];
    const tg_key_t *named = tg_keyring_find(ring, kid, sh->len[M_AUTHORITY_KEY_ID]);
    bool anchors = false;
    *out = NULL;
    *by_anchor = false;
    if (named != NULL && tg_key_verify(named, sh->sig, sh->hash, sizeof sh->hash) == TG_OK) {
        *out = named;
        return TG_OK;
    }
    for (size_t i = 0; i < ring->count; i++) {
        const tg_keyring_entry_t *e = &ring->entries[i];
        if (!e->anchor || &e->key == named) {
            continue;
        }
        anchors = true;
        if (tg_key_verify(&e->key, sh->sig, sh->hash, sizeof sh->hash) == TG_OK) {
            *out = &e->key;
            *by_anchor = true;
            return TG_OK;
        }
    }
    if (named == NULL) {
        return tg_diag_set(diag, TG_ERR_KEY_UNKNOWN, "authorityKeyId \"%s\" is not a known key%s",
                           kid,
                           anchors ? ", and no trust-anchor key (--key) made the signature" : "");
    }
    return tg_diag_set(diag, TG_ERR_RECEIPT_SIGNATURE,
                       "authoritySignature is not a valid Ed25519 signature of receiptHash by key "
                       "%s%s",
                       named->key_id, anchors ? " nor by any trust-anchor key (--key)" : "");
}

/* The batch kind's authentication (receipt.h, SPEC §12): the log key named by logOrigin and
 * logKeyId signed the checkpoint, the checkpoint is the one transparency names, and the
 * proof leads from the stated receiptHash's leaf to its root. vd (may be NULL) gets the
 * log key once its signature holds, and the checkpoint once it parsed. */
static tg_err_t verify_log(const tg_keyring_t *ring, const shape_t *sh, tg_receipt_verdict_t *vd,
                           tg_diag_t *diag) {
    char origin[TG_NOTE_NAME_MAX + 1];
    (void)snprintf(origin, sizeof origin, "%.*s", (int)sh->origin_len, sh->origin);
    const tg_note_verifier_t *lk =
        tg_keyring_find_log(ring, sh->origin, sh->origin_len, sh->log_key_id);
    if (lk == NULL) {
        return tg_diag_set(diag, TG_ERR_KEY_UNKNOWN,
                           "transparency names log key %s+%08lx, which is not a known log key "
                           "(keys.json \"use\": \"checkpoint\", or --log-key)",
                           origin, (unsigned long)sh->log_key_id);
    }
    size_t text_len = 0;
    tg_err_t rc = tg_note_verify(sh->checkpoint, sh->checkpoint_len, lk, 1, &text_len, NULL);
    if (rc == TG_ERR_NOTE_UNVERIFIED) {
        return tg_diag_set(diag, rc, "transparency.checkpoint carries no signature by log key %s",
                           origin);
    }
    if (rc == TG_ERR_NOTE_SIGNATURE) {
        return tg_diag_set(
            diag, rc, "transparency.checkpoint's signature by log key %s does not verify", origin);
    }
    if (rc != TG_OK) {
        /* over the note's limits (size, signature lines) is a malformed note too */
        return tg_diag_set(diag, rc == TG_ERR_LIMIT ? TG_ERR_NOTE_MALFORMED : rc,
                           "transparency.checkpoint is not a signed note (%s)", tg_strerror(rc));
    }
    if (vd != NULL) {
        vd->log_key = lk;
    }
    tg_checkpoint_t cp;
    rc = tg_checkpoint_parse(&cp, sh->checkpoint, text_len);
    if (rc != TG_OK) {
        return tg_diag_set(diag, rc, "transparency.checkpoint's text is not a checkpoint");
    }
    if (cp.origin_len != sh->origin_len || memcmp(cp.origin, sh->origin, sh->origin_len) != 0) {
        return tg_diag_set(diag, TG_ERR_TLOG_PROOF,
                           "the checkpoint is of another log than logOrigin %s", origin);
    }
    if (vd != NULL) {
        vd->tree_size = cp.size;
        memcpy(vd->root, cp.root, sizeof vd->root);
        vd->leaf_index = sh->leaf_index;
    }
    if (cp.size != sh->tree_size) {
        return tg_diag_set(diag, TG_ERR_TLOG_PROOF,
                           "treeSize %llu is not the checkpoint's tree size %llu",
                           (unsigned long long)sh->tree_size, (unsigned long long)cp.size);
    }
    tg_tlog_hash_t leaf, root;
    tg_tlog_leaf_hash(&leaf, sh->hash, sizeof sh->hash);
    memcpy(root.h, cp.root, sizeof root.h);
    rc = tg_tlog_verify_inclusion(&leaf, sh->leaf_index, sh->tree_size, sh->proof, sh->proof_len,
                                  &root);
    if (rc != TG_OK) {
        return tg_diag_set(diag, TG_ERR_TLOG_PROOF,
                           "inclusionProof does not prove receiptHash as leaf %llu of the "
                           "checkpoint's tree of %llu",
                           (unsigned long long)sh->leaf_index, (unsigned long long)sh->tree_size);
    }
    return TG_OK;
}

/* Response members beside "receipt" (SPEC §3.2, §11): name, JSON type, required. */
typedef struct {
    const char *name;
    json_type type;
    bool required;
    int receipt_member; /* the MEMBERS index it must equal, or -1 */
    bool enforce_only;  /* compared only without execution_mode (observe reports otherwise) */
} resp_member_t;

static const resp_member_t RESPONSE_MEMBERS[] = {
    {"decision", JSON_STRING, true, M_DECISION, true},
    {"enforcement", JSON_STRING, true, -1, false},
    {"reason_code", JSON_STRING, true, M_REASON_CODE, true},
    {"execution_id", JSON_STRING, true, M_EXECUTION_ID, false},
    {"request_hash", JSON_STRING, true, M_REQUEST_HASH, false},
    {"policy_version", JSON_STRING, true, M_POLICY_VERSION, false},
    {"trace", JSON_OBJECT, false, -1, false},
    {"explain", JSON_OBJECT, false, -1,
     false}, /* ?explain=1 (issue 21): unsigned, never compared */
    {"execution_mode", JSON_STRING, false, -1, false},
    {"would_decision", JSON_STRING, false, M_DECISION, false},
    {"would_reason_code", JSON_STRING, false, M_REASON_CODE, false},
    {"approval_id", JSON_STRING, false, -1, false},
    {"approval", JSON_OBJECT, false, -1, false},
};
#define N_RESPONSE_MEMBERS (sizeof RESPONSE_MEMBERS / sizeof RESPONSE_MEMBERS[0])

#define DOC_FORMS                                                                                  \
    "a verifier takes a receipt, {\"receipt\": {...}}, or a whole /v1/evaluate or /execute "       \
    "response"

/* Picks the receipt out of doc (see tg_receipt_verify_doc); *wrapper = the response whose
 * members the receipt must agree with, or NULL. */
static tg_err_t unwrap(const json_t **receipt, const json_t **wrapper, const json_t *doc,
                       tg_diag_t *diag) {
    const char *name;
    json_t *v;
    char tmp[48];
    json_t *inner = json_object_get(doc, "receipt");
    *receipt = doc;
    *wrapper = NULL;
    if (inner == NULL) {
        if (json_is_string(json_object_get(doc, "enforcement")) &&
            json_is_string(json_object_get(doc, "decision"))) {
            return tg_diag_set(diag, TG_ERR_RECEIPT_SHAPE,
                               "an evaluate response without a receipt (a SILENCE, or /decide): "
                               "nothing to verify");
        }
        return TG_OK; /* a receipt, or not: check_shape says */
    }
    if (!json_is_object(inner)) {
        return tg_diag_set(diag, TG_ERR_RECEIPT_SHAPE, "member \"receipt\" is not an object");
    }
    *receipt = inner;
    if (json_object_size(doc) == 1) {
        return TG_OK;
    }
    json_object_foreach((json_t *)doc, name, v) {
        size_t i = 0;
        while (i < N_RESPONSE_MEMBERS && strcmp(name, RESPONSE_MEMBERS[i].name) != 0) {
            i++;
        }
        if (strcmp(name, "receipt") == 0) {
            continue;
        }
        if (i == N_RESPONSE_MEMBERS) {
            return tg_diag_set(diag, TG_ERR_RECEIPT_SHAPE,
                               "unknown member \"%s\" beside \"receipt\"; " DOC_FORMS,
                               printable(tmp, sizeof tmp, name));
        }
        if (json_typeof(v) != RESPONSE_MEMBERS[i].type) {
            return tg_diag_set(diag, TG_ERR_RECEIPT_SHAPE, "response member %s must be %s", name,
                               RESPONSE_MEMBERS[i].type == JSON_STRING ? "a string" : "an object");
        }
    }
    for (size_t i = 0; i < N_RESPONSE_MEMBERS; i++) {
        if (RESPONSE_MEMBERS[i].required &&
            json_object_get(doc, RESPONSE_MEMBERS[i].name) == NULL) {
            return tg_diag_set(diag, TG_ERR_RECEIPT_SHAPE,
                               "\"receipt\" comes with evaluate-response members, but %s is "
                               "missing; " DOC_FORMS,
                               RESPONSE_MEMBERS[i].name);
        }
    }
    *wrapper = doc;
    return TG_OK;
}

/* A response must say what its (well-shaped) receipt says. */
static tg_err_t check_wrapper(const json_t *wrapper, const shape_t *sh, tg_diag_t *diag) {
    bool observe = json_object_get(wrapper, "execution_mode") != NULL;
    for (size_t i = 0; i < N_RESPONSE_MEMBERS; i++) {
        const resp_member_t *m = &RESPONSE_MEMBERS[i];
        /* observe: the receipt states the would-decision (SPEC §11.1), so the response's
         * would_* must be it, and its decision/reason_code (the effective outcome) are not
         * the receipt's; otherwise the would_* members are not compared (absent). */
        bool would = m->receipt_member >= 0 && !m->required && !m->enforce_only;
        if (m->receipt_member < 0 || (m->enforce_only && observe) || (would && !observe)) {
            continue;
        }
        const json_t *v = json_object_get(wrapper, m->name);
        size_t r = (size_t)m->receipt_member;
        if (v == NULL) {
            /* an optional member that must agree when present, required in observe mode */
            return tg_diag_set(diag, TG_ERR_RECEIPT_SHAPE,
                               "an observe response must carry %s (its receipt's %s)", m->name,
                               MEMBERS[r].name);
        }
        if (json_string_length(v) != sh->len[r] ||
            memcmp(json_string_value(v), sh->val[r], sh->len[r]) != 0) {
            return tg_diag_set(diag, TG_ERR_RECEIPT_SHAPE,
                               "the response's %s is not its receipt's %s: the receipt is not "
                               "this response's",
                               m->name, MEMBERS[r].name);
        }
    }
    /* SPEC §11.2: a response that names an approval names its receipt's */
    const json_t *aid = json_object_get(wrapper, "approval_id");
    if (aid != NULL &&
        (sh->val[M_APPROVAL_ID] == NULL || json_string_length(aid) != sh->len[M_APPROVAL_ID] ||
         memcmp(json_string_value(aid), sh->val[M_APPROVAL_ID], sh->len[M_APPROVAL_ID]) != 0)) {
        return tg_diag_set(diag, TG_ERR_RECEIPT_SHAPE,
                           "the response's approval_id is not its receipt's approvalId: the "
                           "receipt is not this response's");
    }
    return TG_OK;
}

static tg_err_t verify_receipt(const tg_keyring_t *ring, const json_t *receipt,
                               const json_t *wrapper, int64_t now_ms, tg_receipt_verdict_t *vd,
                               tg_diag_t *diag) {
    shape_t sh;
    uint8_t recomputed[32];
    char tmp[TG_TIME_ISO_LEN + 1];
    json_t *copy = NULL;
    const tg_key_t *key = NULL;
    bool by_anchor = false;
    tg_err_t rc = TG_OK;

    TG_TRY(check_shape(&sh, receipt, FORM_FINAL, diag));
    if (wrapper != NULL) {
        TG_TRY(check_wrapper(wrapper, &sh, diag));
    }
    if (vd != NULL) {
        /* both fit: the shape check bounded the id to 64 and the time to 24 characters, and
         * both are required members, so present */
        const char *kid = sh.val[M_AUTHORITY_KEY_ID], *exp = sh.val[M_EXPIRES_AT];
        (void)snprintf(vd->key_id, sizeof vd->key_id, "%.*s", (int)sh.len[M_AUTHORITY_KEY_ID],
                       kid != NULL ? kid : "");
        (void)snprintf(vd->expires_at, sizeof vd->expires_at, "%.*s", (int)sh.len[M_EXPIRES_AT],
                       exp != NULL ? exp : "");
        vd->observe = sh.val[M_EXECUTION_MODE] != NULL;
        vd->permit = decision_is(sh.val[M_DECISION], sh.len[M_DECISION], "PERMIT");
        vd->escalate = decision_is(sh.val[M_DECISION], sh.len[M_DECISION], "ESCALATE");
        vd->batch = sh.batch;
    }
    if (sh.batch) {
        TG_TRY(verify_log(ring, &sh, vd, diag));
    } else {
        TG_TRY(find_signer(&key, &by_anchor, ring, &sh, diag));
    }
    if (vd != NULL) {
        vd->key = key;
        vd->by_anchor = by_anchor;
    }
    copy = json_deep_copy(receipt);
    if (copy == NULL) {
        rc = tg_diag_set(diag, TG_ERR_NOMEM, "out of memory while verifying a receipt");
        goto done;
    }
    (void)json_object_del(copy, "receiptHash");
    (void)json_object_del(copy, "authoritySignature");
    (void)json_object_del(copy, "authorityKeyId");
    (void)json_object_del(copy, "transparency");
    TG_TRY(tg_canon_sha256(recomputed, copy, diag));
    if (sodium_memcmp(recomputed, sh.hash, sizeof recomputed) != 0) {
        rc = tg_diag_set(diag, TG_ERR_RECEIPT_HASH,
                         sh.batch ? "receiptHash does not match the receipt's contents (the "
                                    "logged hash is authentic, the fields were changed)"
                                  : "receiptHash does not match the receipt's contents (signed "
                                    "hash is authentic, the fields were changed)");
        goto done;
    }
    if (now_ms >= sh.exp_ms) {
        if (tg_time_format_ms(tmp, now_ms) != TG_OK) {
            memcpy(tmp, "(out of range)", 15);
        }
        rc = tg_diag_set(diag, TG_ERR_RECEIPT_EXPIRED,
                         "expired at %s (now %s); authentic but no longer authorizes",
                         sh.val[M_EXPIRES_AT], tmp);
        goto done;
    }
done:
    json_decref(copy);
    sodium_memzero(&sh, sizeof sh);
    return rc;
}

tg_err_t tg_receipt_check_hashed(const json_t *receipt, uint8_t hash[32], tg_diag_t *diag) {
    shape_t sh;
    uint8_t recomputed[32];
    json_t *copy = NULL;
    tg_err_t rc = TG_OK;
    TG_TRY(check_shape(&sh, receipt, FORM_HASHED, diag));
    copy = json_deep_copy(receipt);
    if (copy == NULL) {
        rc = tg_diag_set(diag, TG_ERR_NOMEM, "out of memory while checking a receipt");
        goto done;
    }
    (void)json_object_del(copy, "receiptHash");
    TG_TRY(tg_canon_sha256(recomputed, copy, diag));
    if (sodium_memcmp(recomputed, sh.hash, sizeof recomputed) != 0) {
        rc = tg_diag_set(diag, TG_ERR_RECEIPT_HASH,
                         "receiptHash does not match the receipt's contents");
        goto done;
    }
    if (hash != NULL) {
        memcpy(hash, sh.hash, sizeof sh.hash);
    }
done:
    json_decref(copy);
    return rc;
}

tg_err_t tg_receipt_verify(const tg_keyring_t *ring, const json_t *receipt, int64_t now_ms,
                           tg_diag_t *diag) {
    return verify_receipt(ring, receipt, NULL, now_ms, NULL, diag);
}

tg_err_t tg_receipt_verify_doc(const tg_keyring_t *ring, const json_t *doc, int64_t now_ms,
                               tg_receipt_verdict_t *verdict, tg_diag_t *diag) {
    const json_t *receipt, *wrapper;
    if (verdict != NULL) {
        memset(verdict, 0, sizeof *verdict);
    }
    tg_err_t rc = unwrap(&receipt, &wrapper, doc, diag);
    return rc ? rc : verify_receipt(ring, receipt, wrapper, now_ms, verdict, diag);
}

tg_err_t tg_receipt_verify_text(const tg_keyring_t *ring, const char *text, size_t len,
                                int64_t now_ms, tg_receipt_verdict_t *verdict, tg_diag_t *diag) {
    json_t *root = NULL;
    tg_json_limits_t lim = TG_JSON_LIMITS_DEFAULT;
    lim.max_bytes = TG_RECEIPT_MAX_BYTES;
    if (verdict != NULL) {
        memset(verdict, 0, sizeof *verdict);
    }
    tg_err_t rc = tg_json_parse(&root, text, len, &lim, diag);
    if (rc) {
        return rc;
    }
    rc = tg_receipt_verify_doc(ring, root, now_ms, verdict, diag);
    json_decref(root);
    return rc;
}

bool tg_receipt_authorizes(tg_err_t rc, const tg_receipt_verdict_t *v) {
    return rc == TG_OK && v != NULL && v->permit && !v->observe;
}

const char *tg_receipt_verdict_reason(tg_err_t rc, const tg_receipt_verdict_t *v) {
    if (rc == TG_OK && v != NULL && v->observe) {
        return "observe_mode";
    }
    if (rc == TG_OK && v != NULL && v->escalate) {
        return "pending_approval"; /* authentic evidence of an escalation, authorizes nothing */
    }
    return tg_receipt_reason_code(rc);
}

const char *tg_receipt_reason_code(tg_err_t e) {
    switch (e) {
    case TG_OK:
        return "valid";
    case TG_ERR_RECEIPT_SHAPE:
    case TG_ERR_JSON_SYNTAX:
    case TG_ERR_JSON_DUPLICATE_KEY:
    case TG_ERR_JSON_UTF8:
    case TG_ERR_JSON_SURROGATE:
    case TG_ERR_JSON_NONFINITE:
    case TG_ERR_JSON_DEPTH:
    case TG_ERR_JSON_TYPE:
    case TG_ERR_JSON_TOO_LARGE:
    case TG_ERR_JSON_STRING_LONG:
    case TG_ERR_JSON_NAME_LONG:
    case TG_ERR_JSON_MEMBERS:
    case TG_ERR_LIMIT:
    case TG_ERR_NOTE_MALFORMED:
    case TG_ERR_CHECKPOINT_MALFORMED:
        return "malformed";
    case TG_ERR_KEY_UNKNOWN:
        return "unknown_key";
    case TG_ERR_RECEIPT_SIGNATURE:
    case TG_ERR_NOTE_SIGNATURE:
    case TG_ERR_NOTE_UNVERIFIED:
        return "bad_signature";
    case TG_ERR_TLOG_PROOF:
        return "bad_proof";
    case TG_ERR_RECEIPT_HASH:
        return "hash_mismatch";
    case TG_ERR_RECEIPT_EXPIRED:
        return "expired";
    default:
        return "error";
    }
}

/* ---- identifiers ---------------------------------------------------------------------- */

/* Non-empty and free of 0x00: what makes the fields of the execution id's hash input
 * unambiguous (see receipt.h). */
static bool id_part_ok(const char *p, size_t n) {
    return p != NULL && n > 0 && memchr(p, '\0', n) == NULL;
}

tg_err_t tg_receipt_execution_id(char out[TG_RECEIPT_EXEC_ID_LEN + 1], const char *tenant,
                                 size_t tenant_len, const char *surface, size_t surface_len,
                                 const char *request_hash_hex, size_t request_hash_len,
                                 const char *idempotency_key, size_t key_len) {
    static const unsigned char zero = 0;
    tg_sha256_ctx_t st;
    uint8_t h[32], rnd[16];
    out[0] = '\0';
    if (!id_part_ok(tenant, tenant_len) || !id_part_ok(surface, surface_len) ||
        request_hash_hex == NULL || request_hash_len != 64 || !is_lower_hex(request_hash_hex, 64) ||
        (idempotency_key != NULL && !id_part_ok(idempotency_key, key_len))) {
        return TG_ERR_INVALID_ARG;
    }
    tg_sha256_init(&st);
    tg_sha256_update(&st, tenant, tenant_len);
    tg_sha256_update(&st, &zero, 1);
    tg_sha256_update(&st, surface, surface_len);
    tg_sha256_update(&st, &zero, 1);
    tg_sha256_update(&st, request_hash_hex, request_hash_len);
    tg_sha256_update(&st, &zero, 1);
    if (idempotency_key != NULL) {
        tg_sha256_update(&st, idempotency_key, key_len);
    } else {
        /* the 0x00 no key can begin with: this input is no key's */
        tg_sha256_update(&st, &zero, 1);
        randombytes_buf(rnd, sizeof rnd);
        tg_sha256_update(&st, rnd, sizeof rnd);
    }
    tg_sha256_final(&st, h);
    memcpy(out, "exec_", 5);
    tg_hex(out + 5, h, 16);
    return TG_OK;
}

tg_err_t tg_receipt_protocol_fingerprint(char out_hex[65], const char *policy_hash_hex) {
    uint8_t h[32];
    tg_err_t rc = TG_ERR_INVALID_ARG;
    out_hex[0] = '\0';
    if (policy_hash_hex == NULL || strlen(policy_hash_hex) != 64 ||
        !is_lower_hex(policy_hash_hex, 64)) {
        return TG_ERR_INVALID_ARG;
    }
    json_t *obj = json_object();
    if (obj == NULL ||
        json_object_set_new(obj, "protocolVersion", json_string(TG_PROTOCOL_VERSION)) != 0 ||
        json_object_set_new(obj, "engineVersion", json_string(TG_ENGINE_VERSION)) != 0 ||
        json_object_set_new(obj, "policyHash", json_string(policy_hash_hex)) != 0) {
        rc = TG_ERR_NOMEM;
        goto done;
    }
    rc = tg_canon_sha256(h, obj, NULL);
    if (rc == TG_OK) {
        tg_hex(out_hex, h, sizeof h);
    }
done:
    json_decref(obj);
    return rc;
}
