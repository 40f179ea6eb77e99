/* audit.c — the offline audit of a ledger's approvals (approval.h, SPEC §11.2): every step
 * replayed from the records alone through the same pure transitions the daemon used, and
 * every difference reported with the record's seq.
 *
 * Memory: one slot per approval seen. An open approval (pending or approved) keeps its whole
 * state on the heap, since its next step is checked against it; a closed one (denied,
 * expired, consumed) keeps only its version and status, because any later step is a problem
 * whatever the state was. */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trigguard/approval.h"
#include "trigguard/canon.h"
#include "trigguard/clock.h"
#include "trigguard/ledger.h"

#define AUDIT_DEFAULT_MAX 1000000

typedef struct slot {
    char id[TG_APPROVAL_ID_LEN + 1]; /* "" = free */
    uint32_t version;
    tg_approval_status_t status;
    tg_approval_t *st; /* open approvals only */
} slot_t;

struct tg_approval_audit {
    slot_t *slots;
    size_t cap, used, max;
    tg_approval_audit_fn report;
    void *ud;
    tg_approval_audit_stats_t stats;
    bool told_full;
};

tg_err_t tg_approval_audit_new(tg_approval_audit_t **out, size_t max_approvals,
                               tg_approval_audit_fn report, void *ud) {
    if (out == NULL || report == NULL) {
        return TG_ERR_INVALID_ARG;
    }
    *out = NULL;
    tg_approval_audit_t *au = calloc(1, sizeof *au);
    if (au == NULL) {
        return TG_ERR_NOMEM;
    }
    au->cap = 64;
    au->slots = calloc(au->cap, sizeof *au->slots);
    if (au->slots == NULL) {
        free(au);
        return TG_ERR_NOMEM;
    }
    au->max = max_approvals ? max_approvals : AUDIT_DEFAULT_MAX;
    au->report = report;
    au->ud = ud;
    *out = au;
    return TG_OK;
}

void tg_approval_audit_free(tg_approval_audit_t *au) {
    if (au == NULL) {
        return;
    }
    for (size_t i = 0; i < au->cap; i++) {
        free(au->slots[i].st);
    }
    free(au->slots);
    free(au);
}

void tg_approval_audit_stats(const tg_approval_audit_t *au, tg_approval_audit_stats_t *out) {
    if (out == NULL) {
        return;
    }
    memset(out, 0, sizeof *out);
    if (au != NULL) {
        *out = au->stats;
    }
}

/* FNV-1a over the id's hex (already random: any mixing will do). */
static size_t hash_id(const char *id) {
    uint64_t h = 1469598103934665603ULL;
    for (; *id; id++) {
        h = (h ^ (uint8_t)*id) * 1099511628211ULL;
    }
    return (size_t)h;
}

static slot_t *find(const tg_approval_audit_t *au, const char *id) {
    for (size_t i = hash_id(id) & (au->cap - 1);; i = (i + 1) & (au->cap - 1)) {
        if (au->slots[i].id[0] == '\0') {
            return NULL;
        }
        if (strcmp(au->slots[i].id, id) == 0) {
            return &au->slots[i];
        }
    }
}

/* A new slot for id (not present); NULL on allocation failure. Grows at half load. */
static slot_t *insert(tg_approval_audit_t *au, const char *id) {
    if ((au->used + 1) * 2 > au->cap) {
        size_t ncap = au->cap * 2;
        slot_t *ns = calloc(ncap, sizeof *ns);
        if (ns == NULL) {
            return NULL;
        }
        for (size_t i = 0; i < au->cap; i++) {
            if (au->slots[i].id[0] == '\0') {
                continue;
            }
            size_t j = hash_id(au->slots[i].id) & (ncap - 1);
            while (ns[j].id[0] != '\0') {
                j = (j + 1) & (ncap - 1);
            }
            ns[j] = au->slots[i];
        }
        free(au->slots);
        au->slots = ns;
        au->cap = ncap;
    }
    size_t i = hash_id(id) & (au->cap - 1);
    while (au->slots[i].id[0] != '\0') {
        i = (i + 1) & (au->cap - 1);
    }
    memcpy(au->slots[i].id, id, TG_APPROVAL_ID_LEN + 1);
    au->used++;
    return &au->slots[i];
}

/* Reports one problem: the sentence is formatted into a bounded buffer (ids and subjects in
 * it are bounded by their shapes). */
TG_PRINTF(4, 5)
static void problem(tg_approval_audit_t *au, uint64_t seq, const char *id, const char *fmt, ...) {
    char what[512] = "";
    va_list ap;
    va_start(ap, fmt);
    if (vsnprintf(what, sizeof what, fmt, ap) < 0) {
        what[0] = '\0';
    }
    va_end(ap);
    au->stats.problems++;
    au->report(au->ud, seq, id != NULL ? id : "", what);
}

/* The string member k of o, or NULL. */
static const char *str(const json_t *o, const char *k) {
    return json_string_value(json_object_get(o, k));
}

/* Meta "a" parsed through its canonical text (as the record view does). */
static bool parse_state(tg_approval_t *a, const json_t *v) {
    if (!json_is_object(v)) {
        return false;
    }
    tg_buf_t b;
    tg_buf_init(&b, TG_APPROVAL_DOC_MAX);
    bool ok = tg_canon_write(&b, v, NULL) == TG_OK && tg_approval_parse(a, b.data, b.len) == TG_OK;
    tg_buf_free(&b);
    return ok;
}

static bool hash_of(uint8_t out[32], const char *hex) {
    return hex != NULL && strlen(hex) == 64 && tg_unhex(out, 32, hex, 64) == TG_OK;
}

/* Keeps the ledger's word for the approval after a step (checked or not), so one problem is
 * reported once and not again at every later step. */
static tg_err_t adopt(tg_approval_audit_t *au, slot_t *s, const tg_approval_t *a) {
    s->version = a->version;
    s->status = a->status;
    bool open = a->status == TG_APPROVAL_PENDING || a->status == TG_APPROVAL_APPROVED;
    if (!open) {
        free(s->st);
        s->st = NULL;
        return TG_OK;
    }
    if (s->st == NULL && (s->st = malloc(sizeof *s->st)) == NULL) {
        return TG_ERR_NOMEM;
    }
    *s->st = *a;
    (void)au;
    return TG_OK;
}

/* Whether two states are the same: compared through their one spelling (a struct's padding
 * is no part of a state). */
static bool same_state(const tg_approval_t *x, const tg_approval_t *y) {
    tg_buf_t a, b;
    tg_buf_init(&a, TG_APPROVAL_DOC_MAX);
    tg_buf_init(&b, TG_APPROVAL_DOC_MAX);
    bool same = tg_approval_write(&a, x) == TG_OK && tg_approval_write(&b, y) == TG_OK &&
                a.len == b.len && memcmp(a.data, b.data, a.len) == 0;
    tg_buf_free(&a);
    tg_buf_free(&b);
    return same;
}

/* The step's common ending: the version follows the previous one, and the state the record
 * carries is exactly the one the transition made (when it made one). */
static tg_err_t finish_step(tg_approval_audit_t *au, uint64_t seq, slot_t *s,
                            const tg_approval_t *want, const tg_approval_t *got) {
    if (want != NULL && !same_state(want, got)) {
        problem(au, seq, got->id,
                "the approval's state after the step (v%u, %s) is not the one the transition "
                "makes (v%u, %s)",
                got->version, tg_approval_status_name(got->status), want->version,
                tg_approval_status_name(want->status));
    }
    return adopt(au, s, got);
}

/* Version and state checks shared by every step after the escalation; false when the step
 * cannot be checked any further (reported). */
static bool step_version_ok(tg_approval_audit_t *au, uint64_t seq, const slot_t *s,
                            const tg_approval_t *got) {
    if (got->version != s->version + 1) {
        problem(au, seq, got->id, "version gap: v%u follows v%u (a step is missing or repeated)",
                got->version, s->version);
        return false;
    }
    return true;
}

static void closed_problem(tg_approval_audit_t *au, uint64_t seq, const char *id, const slot_t *s,
                           int64_t at_ms, const char *what) {
    tg_approval_status_t now = s->st != NULL ? tg_approval_status_at(s->st, at_ms) : s->status;
    if (now == TG_APPROVAL_EXPIRED) {
        problem(au, seq, id, "%s after the approval expired", what);
    } else {
        problem(au, seq, id, "%s of an approval that is %s", what, tg_approval_status_name(now));
    }
}

static tg_err_t audit_review(tg_approval_audit_t *au, uint64_t seq, const json_t *p, slot_t *s,
                             const tg_approval_t *got) {
    const char *subject = str(p, "subject"), *decision = str(p, "decision");
    const char *at = str(p, "at");
    const json_t *entry = json_object_get(p, "entry");
    uint8_t rh[32];
    int64_t at_ms = 0;
    double en = json_number_value(entry);
    if (subject == NULL || decision == NULL || at == NULL || !json_is_number(entry) || en < 0 ||
        en >= TG_APPROVAL_MAX_APPROVERS || en != (double)(uint32_t)en ||
        (strcmp(decision, "approve") != 0 && strcmp(decision, "deny") != 0) ||
        !hash_of(rh, str(p, "requestHash")) || tg_time_parse_ms(&at_ms, at, strlen(at)) != TG_OK) {
        problem(au, seq, got->id,
                "review record lacks a readable subject, entry, decision, "
                "requestHash or time");
        return adopt(au, s, got);
    }
    au->stats.reviews++;
    if (s->st == NULL) {
        closed_problem(au, seq, got->id, s, at_ms, "review");
        return adopt(au, s, got);
    }
    const tg_approval_t *prev = s->st;
    uint32_t e = (uint32_t)en;
    tg_approval_t want;
    tg_err_t rc =
        tg_approval_review(&want, prev, subject, e, strcmp(decision, "approve") == 0, rh, at_ms);
    switch (rc) {
    case TG_OK:
        break;
    case TG_ERR_REQUEST_HASH_MISMATCH:
        problem(au, seq, got->id, "review by %s is for another request hash", subject);
        return adopt(au, s, got);
    case TG_ERR_ALREADY_REVIEWED:
        problem(au, seq, got->id, "duplicated approver: %s has already reviewed this approval",
                subject);
        return adopt(au, s, got);
    case TG_ERR_APPROVAL_CLOSED:
        closed_problem(au, seq, got->id, s, at_ms, "review");
        return adopt(au, s, got);
    default:
        if (e >= prev->n_approvers) {
            problem(au, seq, got->id, "review by %s cites approvers entry %u, which does not exist",
                    subject, e);
        } else {
            problem(au, seq, got->id, "review by %s is not admitted by approvers entry %u (%s)",
                    subject, e, prev->approvers[e]);
        }
        return adopt(au, s, got);
    }
    if (!step_version_ok(au, seq, s, got)) {
        return adopt(au, s, got);
    }
    return finish_step(au, seq, s, &want, got);
}

static tg_err_t audit_expire(tg_approval_audit_t *au, uint64_t seq, const json_t *p, slot_t *s,
                             const tg_approval_t *got) {
    const char *at = str(p, "at");
    int64_t at_ms = 0;
    if (at == NULL || tg_time_parse_ms(&at_ms, at, strlen(at)) != TG_OK) {
        problem(au, seq, got->id, "expiry record lacks a readable time");
        return adopt(au, s, got);
    }
    au->stats.expired++;
    tg_approval_t want;
    if (s->st == NULL || tg_approval_expire(&want, s->st, at_ms) != TG_OK) {
        if (s->st != NULL) {
            problem(au, seq, got->id, "expiry of an approval that is %s at that time",
                    tg_approval_status_name(tg_approval_status_at(s->st, at_ms)));
        } else {
            problem(au, seq, got->id, "expiry of an approval that is %s",
                    tg_approval_status_name(s->status));
        }
        return adopt(au, s, got);
    }
    if (!step_version_ok(au, seq, s, got)) {
        return adopt(au, s, got);
    }
    return finish_step(au, seq, s, &want, got);
}

/* A type-4 record. */
static tg_err_t audit_event(tg_approval_audit_t *au, uint64_t seq, const json_t *meta,
                            const json_t *p) {
    const char *id = str(p, "approvalId"), *event = str(p, "event");
    const char *tenant = str(p, "tenantId"), *status = str(p, "status");
    const char *shown = id != NULL && tg_approval_id_valid(id, strlen(id)) ? id : "";
    tg_approval_t got;
    if (!parse_state(&got, json_object_get(meta, "a"))) {
        problem(au, seq, shown, "approval record without a valid approval state (meta \"a\")");
        return TG_OK;
    }
    if (strcmp(shown, got.id) != 0 || tenant == NULL || strcmp(tenant, got.tenant) != 0 ||
        status == NULL || strcmp(status, tg_approval_status_name(got.status)) != 0) {
        problem(au, seq, got.id,
                "approval record's approvalId, tenantId or status differ from its state");
    }
    slot_t *s = find(au, got.id);
    if (s == NULL) {
        problem(au, seq, got.id, "step of an approval that was never escalated");
        return TG_OK;
    }
    if (event != NULL && strcmp(event, "review") == 0) {
        return audit_review(au, seq, p, s, &got);
    }
    if (event != NULL && strcmp(event, "expire") == 0) {
        return audit_expire(au, seq, p, s, &got);
    }
    problem(au, seq, got.id, "approval record with an unknown event");
    return adopt(au, s, &got);
}

static tg_err_t audit_escalation(tg_approval_audit_t *au, uint64_t seq, const json_t *meta,
                                 const json_t *p, const char *id) {
    const json_t *a = json_object_get(meta, "a");
    uint8_t rh[32];
    bool rh_ok = hash_of(rh, str(p, "requestHash"));
    slot_t *s = find(au, id);
    if (a == NULL) {
        /* A resume of a pending approval answers ESCALATE again: no step, same approval. */
        if (s == NULL) {
            problem(au, seq, id, "ESCALATE receipt names an approval that was never escalated");
        } else if (s->st != NULL && (!rh_ok || memcmp(rh, s->st->request_hash, 32) != 0)) {
            problem(au, seq, id, "ESCALATE receipt for another request hash than the approval's");
        }
        return TG_OK;
    }
    tg_approval_t got;
    if (!parse_state(&got, a)) {
        problem(au, seq, id, "ESCALATE receipt without a valid approval state (meta \"a\")");
        return TG_OK;
    }
    au->stats.approvals++;
    const char *exec = str(p, "executionId");
    if (strcmp(got.id, id) != 0 || got.version != 1 || !rh_ok ||
        memcmp(rh, got.request_hash, 32) != 0 || exec == NULL ||
        strcmp(exec, got.escalation_id) != 0) {
        problem(au, seq, id,
                "escalation's state is not version 1 of this receipt's approvalId, requestHash "
                "and executionId");
    }
    if (s != NULL) {
        problem(au, seq, got.id, "approval escalated a second time");
        return adopt(au, s, &got);
    }
    if (au->used >= au->max) {
        if (!au->told_full) {
            au->told_full = true;
            problem(au, seq, got.id,
                    "more approvals than the audit can hold (%zu): this and later new approvals "
                    "are not checked",
                    au->max);
        }
        return TG_OK;
    }
    s = insert(au, got.id);
    if (s == NULL) {
        return TG_ERR_NOMEM;
    }
    s->version = 0;
    return adopt(au, s, &got);
}

/* The canonical text of a receipt's "approvals" (NULL member: empty text). */
static bool canon_member(tg_buf_t *b, const json_t *v) {
    return v != NULL && tg_canon_write(b, v, NULL) == TG_OK;
}

static tg_err_t audit_consumption(tg_approval_audit_t *au, uint64_t seq, const json_t *meta,
                                  const json_t *p, const char *id) {
    tg_approval_t got;
    if (!parse_state(&got, json_object_get(meta, "a"))) {
        problem(au, seq, id, "PERMIT with approvalId without a valid approval state (meta \"a\")");
        return TG_OK;
    }
    slot_t *s = find(au, got.id);
    if (strcmp(got.id, id) != 0) {
        problem(au, seq, id, "PERMIT's approval state is another approval's (%s)", got.id);
    }
    if (s == NULL) {
        problem(au, seq, id, "PERMIT consumes an approval that was never escalated");
        return TG_OK;
    }
    au->stats.consumed++;
    const json_t *at = json_object_get(meta, "at");
    const char *exec = str(p, "executionId");
    int64_t at_ms = json_is_number(at) ? (int64_t)json_number_value(at) : 0;
    uint8_t rh[32];
    if (s->status == TG_APPROVAL_CONSUMED) {
        problem(au, seq, id, "approval consumed a second time");
        return adopt(au, s, &got);
    }
    if (s->st == NULL || tg_approval_status_at(s->st, at_ms) != TG_APPROVAL_APPROVED) {
        tg_approval_status_t now = s->st != NULL ? tg_approval_status_at(s->st, at_ms) : s->status;
        if (now == TG_APPROVAL_PENDING && s->st != NULL) {
            uint32_t n = 0;
            for (uint32_t i = 0; i < s->st->n_reviews; i++) {
                n += s->st->reviews[i].approve;
            }
            problem(au, seq, id, "PERMIT without quorum: %u of %u required approvals", n,
                    s->st->required);
        } else {
            problem(au, seq, id, "PERMIT of an approval that is %s", tg_approval_status_name(now));
        }
        return adopt(au, s, &got);
    }
    const tg_approval_t *prev = s->st;
    if (!hash_of(rh, str(p, "requestHash")) || memcmp(rh, prev->request_hash, 32) != 0) {
        problem(au, seq, id, "PERMIT is for another request hash than the approval's");
    }
    /* The receipt's list must be the approving reviews, byte for byte in canonical form. */
    tg_buf_t want_list, got_list;
    tg_buf_init(&want_list, TG_APPROVAL_DOC_MAX);
    tg_buf_init(&got_list, TG_APPROVAL_DOC_MAX);
    bool same = tg_approval_receipt_approvals(&want_list, prev) == TG_OK &&
                canon_member(&got_list, json_object_get(p, "approvals")) &&
                want_list.len == got_list.len &&
                memcmp(want_list.data, got_list.data, got_list.len) == 0;
    tg_buf_free(&want_list);
    tg_buf_free(&got_list);
    if (!same) {
        problem(au, seq, id,
                "PERMIT's approvals list differs from the approval's approving reviews");
    }
    tg_approval_t want;
    if (exec == NULL || tg_approval_consume(&want, prev, exec, at_ms) != TG_OK) {
        problem(au, seq, id, "PERMIT's executionId cannot consume the approval");
        return adopt(au, s, &got);
    }
    if (!step_version_ok(au, seq, s, &got)) {
        return adopt(au, s, &got);
    }
    return finish_step(au, seq, s, &want, &got);
}

tg_err_t tg_approval_audit_record(tg_approval_audit_t *au, uint64_t seq, uint8_t type,
                                  const void *meta, size_t meta_len, const void *payload,
                                  size_t payload_len) {
    if (au == NULL || (meta == NULL && meta_len > 0) || (payload == NULL && payload_len > 0)) {
        return TG_ERR_INVALID_ARG;
    }
    if (type != TG_LEDGER_TYPE_RECEIPT && type != TG_LEDGER_TYPE_APPROVAL &&
        type != TG_LEDGER_TYPE_SILENCE && type != TG_LEDGER_TYPE_REDEMPTION) {
        return TG_OK;
    }
    json_t *m = NULL, *p = NULL;
    tg_err_t rc = TG_OK;
    tg_json_limits_t lim = TG_JSON_LIMITS_DEFAULT;
    lim.max_bytes =
        TG_LEDGER_PAYLOAD_MAX > TG_LEDGER_META_MAX ? TG_LEDGER_PAYLOAD_MAX : TG_LEDGER_META_MAX;
    if (tg_json_parse(&m, meta, meta_len, &lim, NULL) != TG_OK ||
        tg_json_parse(&p, payload, payload_len, &lim, NULL) != TG_OK || !json_is_object(m) ||
        !json_is_object(p)) {
        /* The other checks of verify report an unreadable record; here only what claims to
         * be an approval step matters. */
        if (type == TG_LEDGER_TYPE_APPROVAL) {
            problem(au, seq, "", "approval record is not readable JSON");
        }
        goto done;
    }
    const char *id = str(p, "approvalId");
    const char *decision = str(p, "decision");
    const bool has_a = json_object_get(m, "a") != NULL;
    if (type == TG_LEDGER_TYPE_APPROVAL) {
        rc = audit_event(au, seq, m, p);
    } else if (id != NULL && !tg_approval_id_valid(id, strlen(id))) {
        problem(au, seq, "", "receipt's approvalId is not an approval id");
    } else if (type == TG_LEDGER_TYPE_RECEIPT && id != NULL && decision != NULL &&
               strcmp(decision, "ESCALATE") == 0) {
        rc = audit_escalation(au, seq, m, p, id);
    } else if (type == TG_LEDGER_TYPE_RECEIPT && id != NULL && decision != NULL &&
               strcmp(decision, "PERMIT") == 0 && json_object_get(p, "executionMode") == NULL) {
        rc = audit_consumption(au, seq, m, p, id);
    } else if (has_a) {
        problem(au, seq, id != NULL ? id : "",
                "approval state (meta \"a\") on a record that is no approval step");
    } else if (json_object_get(p, "approvals") != NULL) {
        problem(au, seq, id != NULL ? id : "",
                "approvals list on a receipt that consumed no approval");
    }
done:
    json_decref(m);
    json_decref(p);
    return rc;
}
