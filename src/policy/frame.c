/* frame.c — a parsed request (SPEC §3.1 or the tool-call shape) → a kernel frame. */
#include <stddef.h>
#include <string.h>

#include "policy_internal.h"
#include "trigguard/canon.h"
#include "trigguard/policy.h"

typedef enum {
    M_SURFACE,
    M_TOOL,
    M_ACTION,
    M_ACTOR,
    M_ACTOR_ID,
    M_CONTEXT,
    M_ARGS,
    M_SIGNALS,
    M_IDEMPOTENCY_KEY,
    M_INTENT_ID,
    M_NONCE,
    M_SUBJECT_DIGEST,
    M_PREV_RECEIPT_HASH,
    M_EXECUTION_MODE,
    M_EXECUTION_MODE_ALIAS,
    M_APPROVAL_ID,
    M_APPROVAL_ID_ALIAS,
    M_RECEIPT_SIGNING,
    M_RECEIPT_SIGNING_ALIAS,
    M__COUNT
} member_id_t;

static const char *const MEMBER_NAMES[M__COUNT] = {
    "surface",     "tool",          "action",          "actor",           "actorId",
    "context",     "args",          "signals",         "idempotency_key", "intent_id",
    "nonce",       "subjectDigest", "prevReceiptHash", "executionMode",   "execution_mode",
    "approval_id", "approvalId",    "receiptSigning",  "receipt_signing"};

/* Up to 64 bytes of s with control characters as '?', for messages. */
static const char *printable(char out[80], const char *s, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n && k < 64; i++) {
        unsigned char ch = (unsigned char)s[i];
        out[k++] = (ch < 0x20 || ch == 0x7f) ? '?' : (char)ch;
    }
    if (n > 64) {
        memcpy(out + k, "...", 3);
        k += 3;
    }
    out[k] = '\0';
    return out;
}

static void value_of(tg_value_t *v, const json_t *j) {
    v->num = 0;
    v->str = NULL;
    v->len = 0;
    v->boolean = 0;
    switch (json_typeof(j)) {
    case JSON_STRING:
        v->type = TG_VT_STRING;
        v->str = json_string_value(j);
        v->len = (uint32_t)json_string_length(j);
        break;
    case JSON_INTEGER:
        v->type = TG_VT_NUMBER;
        v->num = (double)json_integer_value(j);
        break;
    case JSON_REAL:
        v->type = TG_VT_NUMBER;
        v->num = json_real_value(j);
        break;
    case JSON_TRUE:
    case JSON_FALSE:
        v->type = TG_VT_BOOL;
        v->boolean = json_is_true(j) ? 1 : 0;
        break;
    case JSON_OBJECT:
        v->type = TG_VT_OBJECT;
        break;
    case JSON_ARRAY:
        v->type = TG_VT_ARRAY;
        break;
    default:
        v->type = TG_VT_NULL;
        break;
    }
}

/* Inserts keeping slots sorted by id (ids are unique: object member names are). */
static void slot_insert(tg_frame_slot_t *slots, uint32_t *n, uint32_t id, const json_t *j) {
    uint32_t i = *n;
    while (i > 0 && slots[i - 1].id > id) {
        slots[i] = slots[i - 1];
        i--;
    }
    slots[i].id = id;
    value_of(&slots[i].v, j);
    (*n)++;
}

static tg_sv_t sv_none(void) {
    tg_sv_t s = {NULL, 0};
    return s;
}

tg_err_t tg_frame_from_request(tg_frame_t *out, tg_request_meta_t *meta, const tg_policy_t *p,
                               const json_t *request, tg_diag_t *diag) {
    char pk[80];
    if (out == NULL || p == NULL || request == NULL) {
        return tg_diag_set(diag, TG_ERR_INVALID_ARG, "tg_frame_from_request: NULL argument");
    }
    if (!json_is_object(request)) {
        return tg_diag_set(diag, TG_ERR_REQUEST_INVALID, "request: must be a JSON object, not %s",
                           tg_policy_json_type_(request));
    }
    const json_t *m[M__COUNT] = {NULL};
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)(uintptr_t)request, key, v) {
        int id = -1;
        for (int i = 0; i < M__COUNT && id < 0; i++) {
            if (strcmp(key, MEMBER_NAMES[i]) == 0) {
                id = i;
            }
        }
        if (id < 0) {
            return tg_diag_set(diag, TG_ERR_REQUEST_INVALID, "request.%s: unknown member",
                               printable(pk, key, strlen(key)));
        }
        int want_object = id == M_CONTEXT || id == M_ARGS || id == M_SIGNALS;
        if (want_object ? !json_is_object(v) : !json_is_string(v)) {
            return tg_diag_set(diag, TG_ERR_REQUEST_INVALID, "request.%s: must be %s, not %s", key,
                               want_object ? "an object" : "a string", tg_policy_json_type_(v));
        }
        m[id] = v;
    }
    static const int aliases[][2] = {{M_SURFACE, M_TOOL},
                                     {M_ACTOR, M_ACTOR_ID},
                                     {M_CONTEXT, M_ARGS},
                                     {M_IDEMPOTENCY_KEY, M_INTENT_ID},
                                     {M_EXECUTION_MODE, M_EXECUTION_MODE_ALIAS},
                                     {M_APPROVAL_ID, M_APPROVAL_ID_ALIAS},
                                     {M_RECEIPT_SIGNING, M_RECEIPT_SIGNING_ALIAS}};
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++) {
        if (m[aliases[i][0]] != NULL && m[aliases[i][1]] != NULL) {
            return tg_diag_set(diag, TG_ERR_REQUEST_INVALID,
                               "request: %s and %s cannot both be given",
                               MEMBER_NAMES[aliases[i][0]], MEMBER_NAMES[aliases[i][1]]);
        }
    }
    if (m[M_SURFACE] == NULL && m[M_TOOL] == NULL) {
        return tg_diag_set(diag, TG_ERR_REQUEST_INVALID,
                           "request: surface is required (or tool, for a tool call)");
    }

    memcpy(out->policy_hash, p->tables.policy_hash, sizeof out->policy_hash);
    out->n_context = 0;
    out->n_signals = 0;
    out->n_unknown_signals = 0;
    out->unknown_signal = sv_none();
    out->action = sv_none();
    out->actor = sv_none();
    /* The caller's verified facts are not the request's to give: bound later, if at all. */
    out->tenant = sv_none();
    out->principal_subject = sv_none();
    out->principal_issuer = sv_none();
    out->n_claims = 0;
    out->n_limits = 0; /* bound by whoever holds the totals (kernel.h) */
    out->now_ms = 0;   /* bound by whoever read the clock (kernel.h) */
    out->has_now = 0;
    if (meta != NULL) {
        memset(meta, 0, sizeof *meta);
    }
    if (m[M_ACTION] != NULL) {
        out->action.ptr = json_string_value(m[M_ACTION]);
        out->action.len = (uint32_t)json_string_length(m[M_ACTION]);
    }
    const json_t *actor = m[M_ACTOR] != NULL ? m[M_ACTOR] : m[M_ACTOR_ID];
    if (actor != NULL) {
        out->actor.ptr = json_string_value(actor);
        out->actor.len = (uint32_t)json_string_length(actor);
    }

    /* Surface: by name, or through the tools table. */
    if (m[M_SURFACE] != NULL) {
        const char *s = json_string_value(m[M_SURFACE]);
        size_t n = json_string_length(m[M_SURFACE]);
        if (tg_policy_surface_find(&out->surface, p, s, n) != TG_OK) {
            return tg_diag_set(diag, TG_ERR_UNKNOWN_SURFACE,
                               "request.surface: unknown surface \"%s\"", printable(pk, s, n));
        }
    } else {
        const char *s = json_string_value(m[M_TOOL]);
        size_t n = json_string_length(m[M_TOOL]);
        uint32_t tid;
        if (!tg_policy_find_tool_(p, s, n, &tid)) {
            return tg_diag_set(diag, TG_ERR_UNKNOWN_SURFACE,
                               "request.tool: tool \"%s\" is not mapped to a surface by the "
                               "policy's tools table",
                               printable(pk, s, n));
        }
        const tg_tool_t *t = &p->tools[tid];
        out->surface = t->surface;
        if (t->action.ptr != NULL) {
            /* The policy's action is authoritative; a caller may only repeat it. */
            if (out->action.ptr != NULL &&
                tg_sv_cmp(out->action.ptr, out->action.len, t->action.ptr, t->action.len) != 0) {
                return tg_diag_set(diag, TG_ERR_REQUEST_INVALID,
                                   "request.action: tool \"%s\" maps to action \"%s\"",
                                   printable(pk, s, n), t->action.ptr);
            }
            out->action = t->action;
        } else if (out->action.ptr == NULL) {
            out->action.ptr = json_string_value(m[M_TOOL]);
            out->action.len = (uint32_t)n;
        }
        if (meta != NULL) {
            meta->tool.ptr = s;
            meta->tool.len = (uint32_t)n;
        }
    }
    out->surface_name = p->tables.surfaces[out->surface].name;

    /* Context: only the fields the policy mentions. */
    const json_t *ctx = m[M_CONTEXT] != NULL ? m[M_CONTEXT] : m[M_ARGS];
    if (ctx != NULL) {
        json_object_foreach((json_t *)(uintptr_t)ctx, key, v) {
            uint32_t fid;
            if (!tg_policy_find_field_(p, key, strlen(key), &fid)) {
                continue;
            }
            if (out->n_context >= TG_FRAME_MAX_CONTEXT) {
                return tg_diag_set(diag, TG_ERR_REQUEST_INVALID,
                                   "request.%s: more than %d fields the policy uses",
                                   m[M_CONTEXT] != NULL ? "context" : "args", TG_FRAME_MAX_CONTEXT);
            }
            slot_insert(out->context, &out->n_context, fid, v);
        }
    }

    /* Signals: declared ones by id; undeclared ones counted for the kernel. */
    if (m[M_SIGNALS] != NULL) {
        json_object_foreach((json_t *)(uintptr_t)m[M_SIGNALS], key, v) {
            uint32_t sid;
            size_t n = strlen(key);
            if (tg_policy_find_signal_(p, key, n, &sid)) {
                slot_insert(out->signals, &out->n_signals, sid, v);
            } else {
                if (out->n_unknown_signals == 0 ||
                    tg_sv_lexcmp(key, (uint32_t)n, out->unknown_signal.ptr,
                                 out->unknown_signal.len) < 0) {
                    out->unknown_signal.ptr = key;
                    out->unknown_signal.len = (uint32_t)n;
                }
                out->n_unknown_signals++;
            }
        }
    }

    if (meta != NULL) {
        static const struct {
            int member;
            size_t offset;
        } views[] = {{M_IDEMPOTENCY_KEY, offsetof(tg_request_meta_t, idempotency_key)},
                     {M_INTENT_ID, offsetof(tg_request_meta_t, idempotency_key)},
                     {M_NONCE, offsetof(tg_request_meta_t, nonce)},
                     {M_SUBJECT_DIGEST, offsetof(tg_request_meta_t, subject_digest)},
                     {M_PREV_RECEIPT_HASH, offsetof(tg_request_meta_t, prev_receipt_hash)},
                     /* a transport field (SPEC §11.2): never part of the request hash */
                     {M_APPROVAL_ID, offsetof(tg_request_meta_t, approval_id)},
                     {M_APPROVAL_ID_ALIAS, offsetof(tg_request_meta_t, approval_id)},
                     /* a transport field too (SPEC §12): how the receipt is signed */
                     {M_RECEIPT_SIGNING, offsetof(tg_request_meta_t, receipt_signing)},
                     {M_RECEIPT_SIGNING_ALIAS, offsetof(tg_request_meta_t, receipt_signing)}};
        for (size_t i = 0; i < sizeof views / sizeof views[0]; i++) {
            const json_t *j = m[views[i].member];
            if (j != NULL) {
                tg_sv_t *dst = (tg_sv_t *)(void *)((char *)meta + views[i].offset);
                dst->ptr = json_string_value(j);
                dst->len = (uint32_t)json_string_length(j);
            }
        }
        meta->context = ctx;
        meta->signals = m[M_SIGNALS];
    }
    /* SPEC §11.1: the mode, normalized ("report" is observe), so that the aliases hash
     * alike; absent stays absent, which keeps v1 request hashes as they were. */
    const json_t *mode =
        m[M_EXECUTION_MODE] != NULL ? m[M_EXECUTION_MODE] : m[M_EXECUTION_MODE_ALIAS];
    if (mode != NULL) {
        const char *mv = json_string_value(mode);
        const char *norm = strcmp(mv, "enforce") == 0                                ? "enforce"
                           : strcmp(mv, "observe") == 0 || strcmp(mv, "report") == 0 ? "observe"
                                                                                     : NULL;
        if (norm == NULL || json_string_length(mode) != strlen(mv)) {
            return tg_diag_set(diag, TG_ERR_REQUEST_INVALID,
                               "request.%s: must be \"enforce\", \"observe\" or \"report\"",
                               m[M_EXECUTION_MODE] != NULL ? "executionMode" : "execution_mode");
        }
        if (meta != NULL) {
            meta->execution_mode.ptr = norm;
            meta->execution_mode.len = (uint32_t)strlen(norm);
        }
    }
    return TG_OK;
}

/* "name":"value" with a leading comma when needed. */
static tg_err_t put_string_member(tg_buf_t *b, int *first, const char *name, tg_sv_t v) {
    if (v.ptr == NULL) {
        return TG_OK;
    }
    tg_err_t rc = tg_buf_puts(b, *first ? "\"" : ",\"");
    if (!rc) {
        rc = tg_buf_puts(b, name);
    }
    if (!rc) {
        rc = tg_buf_puts(b, "\":");
    }
    if (!rc) {
        rc = tg_canon_string(b, v.ptr, v.len);
    }
    *first = 0;
    return rc;
}

static tg_err_t put_json_member(tg_buf_t *b, int *first, const char *name, const json_t *v,
                                tg_diag_t *diag) {
    if (v == NULL) {
        return TG_OK;
    }
    tg_err_t rc = tg_buf_puts(b, *first ? "\"" : ",\"");
    if (!rc) {
        rc = tg_buf_puts(b, name);
    }
    if (!rc) {
        rc = tg_buf_puts(b, "\":");
    }
    if (!rc) {
        rc = tg_canon_write(b, v, diag);
    }
    *first = 0;
    return rc;
}

tg_err_t tg_request_hash(uint8_t out[32], const tg_frame_t *f, const tg_request_meta_t *meta,
                         tg_diag_t *diag) {
    if (out == NULL || f == NULL || meta == NULL) {
        return tg_diag_set(diag, TG_ERR_INVALID_ARG, "tg_request_hash: NULL argument");
    }
    memset(out, 0, 32);
    tg_buf_t b;
    tg_buf_init(&b, 0);
    int first = 1;
    /* Member names in RFC 8785 order (all ASCII, so UTF-16 order = byte order). */
    tg_err_t rc = tg_buf_putc(&b, '{');
    if (!rc) {
        rc = put_string_member(&b, &first, "action", f->action);
    }
    if (!rc) {
        rc = put_string_member(&b, &first, "actor", f->actor);
    }
    if (!rc) {
        rc = put_json_member(&b, &first, "context", meta->context, diag);
    }
    if (!rc) {
        rc = put_string_member(&b, &first, "executionMode", meta->execution_mode);
    }
    if (!rc) {
        rc = put_string_member(&b, &first, "prevReceiptHash", meta->prev_receipt_hash);
    }
    if (!rc) {
        rc = put_json_member(&b, &first, "signals", meta->signals, diag);
    }
    if (!rc) {
        rc = put_string_member(&b, &first, "subjectDigest", meta->subject_digest);
    }
    if (!rc) {
        rc = put_string_member(&b, &first, "surface", f->surface_name);
    }
    if (!rc) {
        rc = tg_buf_putc(&b, '}');
    }
    if (!rc) {
        tg_sha256(out, b.data, b.len);
    } else if (rc == TG_ERR_NOMEM || rc == TG_ERR_LIMIT) {
        tg_diag_set(diag, rc, "cannot canonicalize the request: %s", tg_strerror(rc));
    }
    tg_buf_free(&b);
    return rc;
}
