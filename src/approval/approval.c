/* approval.c — an ESCALATE approval's state, its canonical document and its pure transitions
 * (approval.h). One validity rule (state_ok) guards init, every transition, the writer and
 * the parser, so a state that any of them accepts is one the others accept too. */
#include "trigguard/approval.h"

#include <jansson.h>
#include <sodium.h>
#include <string.h>

#include "trigguard/canon.h"
#include "trigguard/clock.h"
#include "trigguard/kernel.h"

#define EXEC_ID_LEN 37 /* "exec_" + 32 lowercase hex */
#define TTL_MAX_MS (TG_APPROVAL_TTL_MAX_S * 1000)

static const char *const status_names[TG_APPROVAL__COUNT] = {"pending", "approved", "denied",
                                                             "expired", "consumed"};

const char *tg_approval_status_name(tg_approval_status_t s) {
    return (unsigned)s < TG_APPROVAL__COUNT ? status_names[s] : "?";
}

bool tg_approval_status_parse(tg_approval_status_t *out, const char *s, size_t n) {
    if (out == NULL || s == NULL) {
        return false;
    }
    for (int i = 0; i < TG_APPROVAL__COUNT; i++) {
        if (strlen(status_names[i]) == n && memcmp(status_names[i], s, n) == 0) {
            *out = (tg_approval_status_t)i;
            return true;
        }
    }
    return false;
}

static bool lower_hex(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) {
            return false;
        }
    }
    return true;
}

/* prefix (5 bytes) + 32 lowercase hex. */
static bool prefixed_id(const char *s, size_t n, const char *prefix) {
    return s != NULL && n == 37 && memcmp(s, prefix, 5) == 0 && lower_hex(s + 5, 32);
}

tg_err_t tg_approval_new_id(char out[TG_APPROVAL_ID_LEN + 1]) {
    if (out == NULL) {
        return TG_ERR_INVALID_ARG;
    }
    out[0] = '\0';
    if (sodium_init() < 0) {
        return TG_ERR_CRYPTO;
    }
    uint8_t r[16];
    randombytes_buf(r, sizeof r);
    memcpy(out, TG_APPROVAL_ID_PREFIX, 5);
    tg_hex(out + 5, r, sizeof r);
    sodium_memzero(r, sizeof r);
    return TG_OK;
}

bool tg_approval_id_valid(const char *s, size_t n) {
    return prefixed_id(s, n, TG_APPROVAL_ID_PREFIX);
}

/* The length of a NUL-terminated string held in a char[cap], or cap when it has no NUL (a
 * state nobody may write or trust). */
static size_t field_len(const char *s, size_t cap) { return strnlen(s, cap); }

#define FIELD_OK(a, f)                                                                             \
    (field_len((a)->f, sizeof(a)->f) > 0 && field_len((a)->f, sizeof(a)->f) < sizeof(a)->f)

/* An approvers entry: "@group" (the group as the tokens file spells it) or a subject. */
static bool entry_ok(const char *e, size_t n) {
    if (n == 0 || n > TG_APPROVAL_ENTRY_MAX) {
        return false;
    }
    return e[0] == '@' ? tg_guard_binding_valid(e + 1, n - 1) : tg_guard_subject_valid(e, n);
}

/* Whether entry e admits subject: a subject entry names it; a group entry admits whoever the
 * pipeline found in the group (membership is not in the state). */
static bool entry_admits(const char *e, const char *subject) {
    return e[0] == '@' || strcmp(e, subject) == 0;
}

static bool time_ok(int64_t t) { return t >= 0 && t <= TG_TIME_MAX_MS; }

/* Every invariant of a state: the bounds of each field, and the reviews, counts, times and
 * version being exactly what init followed by the transitions can produce. */
static bool state_ok(const tg_approval_t *a) {
    if (!tg_approval_id_valid(a->id, field_len(a->id, sizeof a->id)) ||
        !prefixed_id(a->escalation_id, field_len(a->escalation_id, sizeof a->escalation_id),
                     "exec_") ||
        !FIELD_OK(a, tenant) || !FIELD_OK(a, surface) || !FIELD_OK(a, rule) ||
        !FIELD_OK(a, reason) || !tg_guard_binding_valid(a->surface, strlen(a->surface)) ||
        !tg_reason_code_valid(a->reason, strlen(a->reason))) {
        return false;
    }
    if ((unsigned)a->status >= TG_APPROVAL__COUNT || a->required < 1 ||
        a->required > TG_APPROVAL_MAX_REQUIRED || a->n_approvers < 1 ||
        a->n_approvers > TG_APPROVAL_MAX_APPROVERS || a->n_reviews > TG_APPROVAL_MAX_REVIEWS) {
        return false;
    }
    bool any_group = false;
    for (uint32_t i = 0; i < a->n_approvers; i++) {
        const char *e = a->approvers[i];
        size_t n = field_len(e, sizeof a->approvers[i]);
        if (n >= sizeof a->approvers[i] || !entry_ok(e, n)) {
            return false;
        }
        any_group = any_group || e[0] == '@';
    }
    /* Without a group, only the listed subjects can approve: more would never be reached. */
    if (!any_group && a->required > a->n_approvers) {
        return false;
    }
    if (!time_ok(a->created_ms) || !time_ok(a->expires_ms) || a->expires_ms <= a->created_ms ||
        a->expires_ms - a->created_ms > TTL_MAX_MS || a->consume_within_ms < 1 ||
        a->consume_within_ms > TTL_MAX_MS || !time_ok(a->resolved_ms) || !time_ok(a->consumed_ms)) {
        return false;
    }
    uint32_t approvals = 0, denies = 0;
    int64_t prev = a->created_ms;
    for (uint32_t i = 0; i < a->n_reviews; i++) {
        const tg_approval_review_t *r = &a->reviews[i];
        size_t n = field_len(r->subject, sizeof r->subject);
        if (n >= sizeof r->subject || !tg_guard_subject_valid(r->subject, n) ||
            r->entry >= a->n_approvers || !entry_admits(a->approvers[r->entry], r->subject) ||
            r->at_ms < prev || r->at_ms >= a->expires_ms) {
            return false;
        }
        prev = r->at_ms;
        for (uint32_t j = 0; j < i; j++) {
            if (strcmp(a->reviews[j].subject, r->subject) == 0) {
                return false;
            }
        }
        if (r->approve) {
            approvals++;
        } else {
            denies++;
        }
        /* The quorum or a deny resolves the approval: nothing is reviewed after it. */
        if ((approvals == a->required || !r->approve) && i + 1 != a->n_reviews) {
            return false;
        }
    }
    const int64_t last = a->n_reviews ? a->reviews[a->n_reviews - 1].at_ms : 0;
    const bool quorum = approvals == a->required;
    uint32_t steps = 1 + a->n_reviews;
    bool ok;
    switch (a->status) {
    case TG_APPROVAL_PENDING:
        ok = denies == 0 && !quorum && a->resolved_ms == 0;
        break;
    case TG_APPROVAL_APPROVED:
        ok = quorum && a->resolved_ms == last;
        break;
    case TG_APPROVAL_DENIED:
        ok = denies == 1 && a->resolved_ms == last;
        break;
    case TG_APPROVAL_EXPIRED:
        ok = denies == 0 && (quorum ? a->resolved_ms == last + a->consume_within_ms
                                    : a->resolved_ms == a->expires_ms);
        steps++;
        break;
    case TG_APPROVAL_CONSUMED:
        ok = quorum && a->resolved_ms == last && a->consumed_ms >= a->resolved_ms &&
             a->consumed_ms < a->resolved_ms + a->consume_within_ms &&
             prefixed_id(a->consumed_by, field_len(a->consumed_by, sizeof a->consumed_by), "exec_");
        steps++;
        break;
    default:
        ok = false;
    }
    if (a->status != TG_APPROVAL_CONSUMED && (a->consumed_ms != 0 || a->consumed_by[0] != '\0')) {
        ok = false;
    }
    return ok && a->version == steps;
}

/* Copies a NUL-terminated s into dst[cap]; false when NULL, empty or too long. */
static bool copy_str(char *dst, size_t cap, const char *s) {
    if (s == NULL) {
        return false;
    }
    size_t n = strnlen(s, cap);
    if (n == 0 || n >= cap) {
        return false;
    }
    memcpy(dst, s, n + 1);
    return true;
}

tg_err_t tg_approval_init(tg_approval_t *a, const char *id, const char *tenant,
                          const uint8_t request_hash[32], const char *escalation_id,
                          const char *surface, const char *rule, const char *reason,
                          const tg_approval_spec_t *spec, int64_t now_ms) {
    if (a == NULL) {
        return TG_ERR_INVALID_ARG;
    }
    memset(a, 0, sizeof *a);
    bool ok = request_hash != NULL && spec != NULL && copy_str(a->id, sizeof a->id, id) &&
              copy_str(a->tenant, sizeof a->tenant, tenant) &&
              copy_str(a->escalation_id, sizeof a->escalation_id, escalation_id) &&
              copy_str(a->surface, sizeof a->surface, surface) &&
              copy_str(a->rule, sizeof a->rule, rule) &&
              copy_str(a->reason, sizeof a->reason, reason) && spec->ttl_s >= 1 &&
              spec->ttl_s <= TG_APPROVAL_TTL_MAX_S && spec->consume_within_s >= 1 &&
              spec->consume_within_s <= TG_APPROVAL_TTL_MAX_S && time_ok(now_ms) &&
              spec->n_approvers >= 1 && spec->n_approvers <= TG_APPROVAL_MAX_APPROVERS;
    for (uint32_t i = 0; ok && i < spec->n_approvers; i++) {
        ok = copy_str(a->approvers[i], sizeof a->approvers[i], spec->approvers[i]);
    }
    if (ok) {
        memcpy(a->request_hash, request_hash, 32);
        a->version = 1;
        a->status = TG_APPROVAL_PENDING;
        a->required = spec->required;
        a->n_approvers = spec->n_approvers;
        a->created_ms = now_ms;
        a->expires_ms = now_ms + spec->ttl_s * 1000;
        a->consume_within_ms = spec->consume_within_s * 1000;
        ok = state_ok(a);
    }
    if (!ok) {
        memset(a, 0, sizeof *a);
        return TG_ERR_INVALID_ARG;
    }
    return TG_OK;
}

/* Expiry takes effect at the instant itself: expires_ms is the first millisecond at which the
 * approval is no longer pending (as a token's exp is the first instant it is refused). */
tg_approval_status_t tg_approval_status_at(const tg_approval_t *a, int64_t now_ms) {
    if (a->status == TG_APPROVAL_PENDING && now_ms >= a->expires_ms) {
        return TG_APPROVAL_EXPIRED;
    }
    if (a->status == TG_APPROVAL_APPROVED && now_ms >= a->resolved_ms + a->consume_within_ms) {
        return TG_APPROVAL_EXPIRED;
    }
    return a->status;
}

tg_err_t tg_approval_match(const tg_approval_t *a, const char *subject, const char *const *groups,
                           size_t n_groups, uint32_t *entry) {
    if (a == NULL || subject == NULL || entry == NULL || (groups == NULL && n_groups > 0) ||
        a->n_approvers > TG_APPROVAL_MAX_APPROVERS) {
        return TG_ERR_INVALID_ARG;
    }
    for (uint32_t i = 0; i < a->n_approvers; i++) {
        const char *e = a->approvers[i];
        if (e[0] != '@') {
            if (strcmp(e, subject) == 0) {
                *entry = i;
                return TG_OK;
            }
            continue;
        }
        for (size_t g = 0; g < n_groups; g++) {
            if (groups[g] != NULL && strcmp(e + 1, groups[g]) == 0) {
                *entry = i;
                return TG_OK;
            }
        }
    }
    return TG_ERR_NOT_APPROVER;
}

/* The first instant a new step may carry: steps are never earlier than the one before, so a
 * wall clock stepped back cannot write a history that goes backwards (the audit replays the
 * same clamp from the record's time). */
static int64_t step_floor(const tg_approval_t *a) {
    int64_t f = a->created_ms;
    if (a->n_reviews > 0 && a->reviews[a->n_reviews - 1].at_ms > f) {
        f = a->reviews[a->n_reviews - 1].at_ms;
    }
    if (a->resolved_ms > f) {
        f = a->resolved_ms;
    }
    return f;
}

tg_err_t tg_approval_review(tg_approval_t *next, const tg_approval_t *cur, const char *subject,
                            uint32_t entry, bool approve, const uint8_t request_hash[32],
                            int64_t now_ms) {
    if (next == NULL || cur == NULL || subject == NULL || request_hash == NULL ||
        cur->n_approvers > TG_APPROVAL_MAX_APPROVERS || cur->n_reviews > TG_APPROVAL_MAX_REVIEWS) {
        return TG_ERR_INVALID_ARG;
    }
    size_t n = strnlen(subject, TG_GUARD_SUBJECT_MAX + 1);
    if (n > TG_GUARD_SUBJECT_MAX || !tg_guard_subject_valid(subject, n) ||
        entry >= cur->n_approvers || !entry_admits(cur->approvers[entry], subject)) {
        return TG_ERR_INVALID_ARG;
    }
    if (sodium_memcmp(request_hash, cur->request_hash, 32) != 0) {
        return TG_ERR_REQUEST_HASH_MISMATCH;
    }
    for (uint32_t i = 0; i < cur->n_reviews; i++) {
        if (strcmp(cur->reviews[i].subject, subject) == 0) {
            return TG_ERR_ALREADY_REVIEWED;
        }
    }
    if (tg_approval_status_at(cur, now_ms) != TG_APPROVAL_PENDING ||
        cur->n_reviews >= TG_APPROVAL_MAX_REVIEWS) {
        return TG_ERR_APPROVAL_CLOSED;
    }
    tg_approval_t t = *cur;
    int64_t at = now_ms < step_floor(cur) ? step_floor(cur) : now_ms;
    tg_approval_review_t *r = &t.reviews[t.n_reviews++];
    memset(r, 0, sizeof *r);
    memcpy(r->subject, subject, n + 1);
    r->entry = entry;
    r->approve = approve;
    r->at_ms = at;
    t.version++;
    uint32_t approvals = 0;
    for (uint32_t i = 0; i < t.n_reviews; i++) {
        approvals += t.reviews[i].approve;
    }
    if (!approve) {
        t.status = TG_APPROVAL_DENIED;
        t.resolved_ms = at;
    } else if (approvals == t.required) {
        t.status = TG_APPROVAL_APPROVED;
        t.resolved_ms = at;
    }
    if (!state_ok(&t)) {
        return TG_ERR_INVALID_ARG; /* cur itself was not a valid state */
    }
    *next = t;
    return TG_OK;
}

tg_err_t tg_approval_consume(tg_approval_t *next, const tg_approval_t *cur, const char *exec_id,
                             int64_t now_ms) {
    if (next == NULL || cur == NULL || exec_id == NULL ||
        !prefixed_id(exec_id, strnlen(exec_id, EXEC_ID_LEN + 1), "exec_")) {
        return TG_ERR_INVALID_ARG;
    }
    if (cur->status == TG_APPROVAL_CONSUMED) {
        return TG_ERR_APPROVAL_CONSUMED;
    }
    if (tg_approval_status_at(cur, now_ms) != TG_APPROVAL_APPROVED) {
        return TG_ERR_APPROVAL_CLOSED;
    }
    tg_approval_t t = *cur;
    t.status = TG_APPROVAL_CONSUMED;
    t.consumed_ms = now_ms < step_floor(cur) ? step_floor(cur) : now_ms;
    memcpy(t.consumed_by, exec_id, EXEC_ID_LEN + 1);
    t.version++;
    if (!state_ok(&t)) {
        return TG_ERR_INVALID_ARG;
    }
    *next = t;
    return TG_OK;
}

tg_err_t tg_approval_expire(tg_approval_t *next, const tg_approval_t *cur, int64_t now_ms) {
    if (next == NULL || cur == NULL) {
        return TG_ERR_INVALID_ARG;
    }
    if (tg_approval_status_at(cur, now_ms) != TG_APPROVAL_EXPIRED ||
        (cur->status != TG_APPROVAL_PENDING && cur->status != TG_APPROVAL_APPROVED)) {
        return TG_ERR_NOT_FOUND;
    }
    tg_approval_t t = *cur;
    t.resolved_ms = cur->status == TG_APPROVAL_PENDING ? cur->expires_ms
                                                       : cur->resolved_ms + cur->consume_within_ms;
    t.status = TG_APPROVAL_EXPIRED;
    t.version++;
    if (!state_ok(&t)) {
        return TG_ERR_INVALID_ARG;
    }
    *next = t;
    return TG_OK;
}

/* ---- the document ---------------------------------------------------------------------- */

/* Appends ,"name": (or {"name": for the first) then the value through the helpers below; each
 * stops at the first error (rc carries it). */
static tg_err_t put_name(tg_buf_t *b, const char *name, bool first) {
    tg_err_t rc = tg_buf_puts(b, first ? "{\"" : ",\"");
    if (rc == TG_OK) {
        rc = tg_buf_puts(b, name);
    }
    return rc == TG_OK ? tg_buf_puts(b, "\":") : rc;
}

static tg_err_t put_str(tg_buf_t *b, const char *name, const char *v, bool first) {
    tg_err_t rc = put_name(b, name, first);
    return rc == TG_OK ? tg_canon_string(b, v, strlen(v)) : rc;
}

static tg_err_t put_int(tg_buf_t *b, const char *name, int64_t v) {
    tg_err_t rc = put_name(b, name, false);
    return rc == TG_OK ? tg_buf_put_i64(b, v) : rc;
}

static tg_err_t put_time(tg_buf_t *b, const char *name, int64_t ms, bool first) {
    char t[TG_TIME_ISO_LEN + 1];
    tg_err_t rc = tg_time_format_ms(t, ms);
    if (rc == TG_OK) {
        rc = put_str(b, name, t, first);
    }
    return rc;
}

static tg_err_t put_hash(tg_buf_t *b, const char *name, const uint8_t h[32]) {
    tg_err_t rc = put_name(b, name, false);
    if (rc == TG_OK) {
        rc = tg_buf_putc(b, '"');
    }
    if (rc == TG_OK) {
        rc = tg_buf_hex(b, h, 32);
    }
    return rc == TG_OK ? tg_buf_putc(b, '"') : rc;
}

static tg_err_t put_approvers(tg_buf_t *b, const char *name, const tg_approval_t *a, bool first) {
    tg_err_t rc = put_name(b, name, first);
    for (uint32_t i = 0; rc == TG_OK && i < a->n_approvers; i++) {
        rc = tg_buf_putc(b, i ? ',' : '[');
        if (rc == TG_OK) {
            rc = tg_canon_string(b, a->approvers[i], strlen(a->approvers[i]));
        }
    }
    return rc == TG_OK ? tg_buf_putc(b, ']') : rc;
}

tg_err_t tg_approval_write(tg_buf_t *out, const tg_approval_t *a) {
    if (out == NULL || a == NULL || !state_ok(a)) {
        return TG_ERR_INVALID_ARG;
    }
    const size_t mark = out->len;
    const bool consumed = a->status == TG_APPROVAL_CONSUMED;
    /* Members in RFC 8785 order (all names are ASCII, so byte order is UTF-16 order). */
    tg_err_t rc = put_approvers(out, "approvers", a, true);
    if (rc == TG_OK) {
        rc = put_int(out, "consumeWithinMs", a->consume_within_ms);
    }
    if (rc == TG_OK && consumed) {
        rc = put_int(out, "consumedAt", a->consumed_ms);
        if (rc == TG_OK) {
            rc = put_str(out, "consumedBy", a->consumed_by, false);
        }
    }
    if (rc == TG_OK) {
        rc = put_int(out, "createdAt", a->created_ms);
    }
    if (rc == TG_OK) {
        rc = put_str(out, "escalationId", a->escalation_id, false);
    }
    if (rc == TG_OK) {
        rc = put_int(out, "expiresAt", a->expires_ms);
    }
    if (rc == TG_OK) {
        rc = put_str(out, "id", a->id, false);
    }
    if (rc == TG_OK) {
        rc = put_str(out, "reason", a->reason, false);
    }
    if (rc == TG_OK) {
        rc = put_hash(out, "requestHash", a->request_hash);
    }
    if (rc == TG_OK) {
        rc = put_int(out, "required", a->required);
    }
    if (rc == TG_OK && a->status != TG_APPROVAL_PENDING) {
        rc = put_int(out, "resolvedAt", a->resolved_ms);
    }
    if (rc == TG_OK) {
        rc = put_name(out, "reviews", false);
    }
    for (uint32_t i = 0; rc == TG_OK && i < a->n_reviews; i++) {
        const tg_approval_review_t *r = &a->reviews[i];
        rc = tg_buf_puts(out, i ? ",{\"at\":" : "[{\"at\":");
        if (rc == TG_OK) {
            rc = tg_buf_put_i64(out, r->at_ms);
        }
        if (rc == TG_OK) {
            rc = tg_buf_puts(out,
                             r->approve ? ",\"decision\":\"approve\"" : ",\"decision\":\"deny\"");
        }
        if (rc == TG_OK) {
            rc = put_int(out, "entry", r->entry);
        }
        if (rc == TG_OK) {
            rc = put_str(out, "subject", r->subject, false);
        }
        if (rc == TG_OK) {
            rc = tg_buf_putc(out, '}');
        }
    }
    if (rc == TG_OK) {
        rc = tg_buf_puts(out, a->n_reviews ? "]" : "[]");
    }
    if (rc == TG_OK) {
        rc = put_str(out, "rule", a->rule, false);
    }
    if (rc == TG_OK) {
        rc = put_str(out, "status", tg_approval_status_name(a->status), false);
    }
    if (rc == TG_OK) {
        rc = put_str(out, "surface", a->surface, false);
    }
    if (rc == TG_OK) {
        rc = put_str(out, "tenant", a->tenant, false);
    }
    if (rc == TG_OK) {
        rc = put_int(out, "v", a->version);
    }
    if (rc == TG_OK) {
        rc = tg_buf_putc(out, '}');
    }
    if (rc == TG_OK && out->len - mark > TG_APPROVAL_DOC_MAX) {
        rc = TG_ERR_LIMIT; /* unreachable within the field bounds (test_approval checks) */
    }
    if (rc != TG_OK) {
        out->len = mark;
        if (out->data != NULL) {
            out->data[mark] = '\0';
        }
    }
    return rc;
}

/* A string member of o copied into dst[cap]; false when absent, not a string or too long. */
static bool get_str(char *dst, size_t cap, const json_t *o, const char *k) {
    const json_t *v = json_object_get(o, k);
    if (!json_is_string(v) || json_string_length(v) >= cap ||
        strlen(json_string_value(v)) != json_string_length(v)) {
        return false;
    }
    memcpy(dst, json_string_value(v), json_string_length(v) + 1);
    return true;
}

/* An integer member of o in [0, max]; numbers are parsed as doubles (canon.h). */
static bool get_int(int64_t *out, const json_t *o, const char *k, int64_t max) {
    const json_t *v = json_object_get(o, k);
    if (!json_is_number(v)) {
        return false;
    }
    double d = json_number_value(v);
    if (!(d >= 0 && d <= (double)max) || d != (double)(int64_t)d) {
        return false;
    }
    *out = (int64_t)d;
    return true;
}

static bool parse_reviews(tg_approval_t *a, const json_t *rv) {
    if (!json_is_array(rv) || json_array_size(rv) > TG_APPROVAL_MAX_REVIEWS) {
        return false;
    }
    a->n_reviews = (uint32_t)json_array_size(rv);
    for (size_t i = 0; i < a->n_reviews; i++) {
        const json_t *e = json_array_get(rv, i);
        tg_approval_review_t *r = &a->reviews[i];
        char decision[8];
        int64_t entry;
        if (!json_is_object(e) || json_object_size(e) != 4 ||
            !get_int(&r->at_ms, e, "at", TG_TIME_MAX_MS) ||
            !get_int(&entry, e, "entry", TG_APPROVAL_MAX_APPROVERS) ||
            !get_str(r->subject, sizeof r->subject, e, "subject") ||
            !get_str(decision, sizeof decision, e, "decision")) {
            return false;
        }
        r->entry = (uint32_t)entry;
        if (strcmp(decision, "approve") == 0) {
            r->approve = true;
        } else if (strcmp(decision, "deny") != 0) {
            return false;
        }
    }
    return true;
}

static bool parse_fields(tg_approval_t *a, const json_t *o) {
    char status[16], hash[65];
    int64_t v, required;
    const json_t *ap = json_object_get(o, "approvers");
    if (!json_is_object(o) || !json_is_array(ap) || json_array_size(ap) < 1 ||
        json_array_size(ap) > TG_APPROVAL_MAX_APPROVERS) {
        return false;
    }
    a->n_approvers = (uint32_t)json_array_size(ap);
    for (size_t i = 0; i < a->n_approvers; i++) {
        const json_t *e = json_array_get(ap, i);
        if (!json_is_string(e) || json_string_length(e) >= sizeof a->approvers[i]) {
            return false;
        }
        memcpy(a->approvers[i], json_string_value(e), json_string_length(e) + 1);
    }
    if (!get_str(status, sizeof status, o, "status") ||
        !tg_approval_status_parse(&a->status, status, strlen(status)) ||
        !get_int(&a->consume_within_ms, o, "consumeWithinMs", TTL_MAX_MS) ||
        !get_int(&a->created_ms, o, "createdAt", TG_TIME_MAX_MS) ||
        !get_str(a->escalation_id, sizeof a->escalation_id, o, "escalationId") ||
        !get_int(&a->expires_ms, o, "expiresAt", TG_TIME_MAX_MS) ||
        !get_str(a->id, sizeof a->id, o, "id") ||
        !get_str(a->reason, sizeof a->reason, o, "reason") ||
        !get_str(hash, sizeof hash, o, "requestHash") || strlen(hash) != 64 ||
        !lower_hex(hash, 64) || tg_unhex(a->request_hash, 32, hash, 64) != TG_OK ||
        !get_int(&required, o, "required", TG_APPROVAL_MAX_REQUIRED) ||
        !parse_reviews(a, json_object_get(o, "reviews")) ||
        !get_str(a->rule, sizeof a->rule, o, "rule") ||
        !get_str(a->surface, sizeof a->surface, o, "surface") ||
        !get_str(a->tenant, sizeof a->tenant, o, "tenant") || !get_int(&v, o, "v", UINT32_MAX)) {
        return false;
    }
    a->required = (uint32_t)required;
    a->version = (uint32_t)v;
    size_t members = 15; /* those every document has */
    if (a->status != TG_APPROVAL_PENDING) {
        members++;
        if (!get_int(&a->resolved_ms, o, "resolvedAt", TG_TIME_MAX_MS)) {
            return false;
        }
    }
    if (a->status == TG_APPROVAL_CONSUMED) {
        members += 2;
        if (!get_int(&a->consumed_ms, o, "consumedAt", TG_TIME_MAX_MS) ||
            !get_str(a->consumed_by, sizeof a->consumed_by, o, "consumedBy")) {
            return false;
        }
    }
    return json_object_size(o) == members; /* nothing unknown */
}

tg_err_t tg_approval_parse(tg_approval_t *a, const void *doc, size_t len) {
    if (a == NULL) {
        return TG_ERR_INVALID_ARG;
    }
    memset(a, 0, sizeof *a);
    if (doc == NULL || len == 0 || len > TG_APPROVAL_DOC_MAX) {
        return TG_ERR_LEDGER_CORRUPT;
    }
    /* Depth 3: document, reviews array, a review. Strings: the longest field is an entry. */
    const tg_json_limits_t lim = {TG_APPROVAL_DOC_MAX, 3, TG_APPROVAL_ENTRY_MAX + 1, 32};
    json_t *o = NULL;
    tg_err_t rc = tg_json_parse(&o, doc, len, &lim, NULL);
    bool ok = rc == TG_OK && parse_fields(a, o) && state_ok(a);
    json_decref(o);
    /* The one spelling: what write makes of the parsed state must be the input, byte for
     * byte (member order, number forms, escapes, whitespace). */
    if (ok) {
        tg_buf_t b;
        tg_buf_init(&b, TG_APPROVAL_DOC_MAX);
        ok = tg_approval_write(&b, a) == TG_OK && b.len == len && memcmp(b.data, doc, len) == 0;
        tg_buf_free(&b);
    }
    if (!ok) {
        memset(a, 0, sizeof *a);
        return rc == TG_ERR_NOMEM ? TG_ERR_NOMEM : TG_ERR_LEDGER_CORRUPT;
    }
    return TG_OK;
}

/* ---- what the API and the receipt show --------------------------------------------------- */

static tg_err_t put_review_list(tg_buf_t *out, const tg_approval_t *a, bool approving_only,
                                bool canonical) {
    tg_err_t rc = TG_OK;
    bool first = true;
    rc = tg_buf_putc(out, '[');
    for (uint32_t i = 0; rc == TG_OK && i < a->n_reviews; i++) {
        const tg_approval_review_t *r = &a->reviews[i];
        if (approving_only && !r->approve) {
            continue;
        }
        if (!first) {
            rc = tg_buf_putc(out, ',');
        }
        first = false;
        const char *d = r->approve ? "approve" : "deny";
        if (canonical) { /* the receipt's member: RFC 8785 order at, decision, subject */
            if (rc == TG_OK) {
                rc = put_time(out, "at", r->at_ms, true);
            }
            if (rc == TG_OK) {
                rc = put_str(out, "decision", d, false);
            }
            if (rc == TG_OK) {
                rc = put_str(out, "subject", r->subject, false);
            }
        } else { /* the API's order (SPEC §11.2): subject, decision, at */
            if (rc == TG_OK) {
                rc = put_str(out, "subject", r->subject, true);
            }
            if (rc == TG_OK) {
                rc = put_str(out, "decision", d, false);
            }
            if (rc == TG_OK) {
                rc = put_time(out, "at", r->at_ms, false);
            }
        }
        if (rc == TG_OK) {
            rc = tg_buf_putc(out, '}');
        }
    }
    return rc == TG_OK ? tg_buf_putc(out, ']') : rc;
}

static tg_err_t undo(tg_buf_t *out, size_t mark, tg_err_t rc) {
    if (rc != TG_OK) {
        out->len = mark;
        if (out->data != NULL) {
            out->data[mark] = '\0';
        }
    }
    return rc;
}

tg_err_t tg_approval_api_json(tg_buf_t *out, const tg_approval_t *a, int64_t now_ms) {
    if (out == NULL || a == NULL || !state_ok(a)) {
        return TG_ERR_INVALID_ARG;
    }
    const size_t mark = out->len;
    tg_err_t rc = put_str(out, "approval_id", a->id, true);
    if (rc == TG_OK) {
        rc = put_str(out, "status", tg_approval_status_name(tg_approval_status_at(a, now_ms)),
                     false);
    }
    if (rc == TG_OK) {
        rc = put_int(out, "required", a->required);
    }
    if (rc == TG_OK) {
        rc = put_name(out, "approvals", false);
    }
    if (rc == TG_OK) {
        rc = put_review_list(out, a, false, false);
    }
    if (rc == TG_OK) {
        rc = put_time(out, "expires_at", a->expires_ms, false);
    }
    if (rc == TG_OK) {
        rc = put_time(out, "created_at", a->created_ms, false);
    }
    if (rc == TG_OK) {
        rc = put_hash(out, "request_hash", a->request_hash);
    }
    if (rc == TG_OK) {
        rc = put_str(out, "surface", a->surface, false);
    }
    if (rc == TG_OK) {
        rc = put_str(out, "rule", a->rule, false);
    }
    if (rc == TG_OK) {
        rc = put_str(out, "reason_code", a->reason, false);
    }
    if (rc == TG_OK) {
        rc = put_str(out, "escalation_execution_id", a->escalation_id, false);
    }
    if (rc == TG_OK) {
        rc = put_approvers(out, "approvers", a, false);
    }
    if (rc == TG_OK && a->status != TG_APPROVAL_PENDING) {
        rc = put_time(out, "resolved_at", a->resolved_ms, false);
    }
    if (rc == TG_OK && a->status == TG_APPROVAL_CONSUMED) {
        rc = put_time(out, "consumed_at", a->consumed_ms, false);
        if (rc == TG_OK) {
            rc = put_str(out, "consumed_by", a->consumed_by, false);
        }
    }
    if (rc == TG_OK) {
        rc = tg_buf_putc(out, '}');
    }
    return undo(out, mark, rc == TG_ERR_INVALID_ARG ? TG_ERR_INVALID_ARG : rc);
}

tg_err_t tg_approval_receipt_approvals(tg_buf_t *out, const tg_approval_t *a) {
    if (out == NULL || a == NULL || !state_ok(a)) {
        return TG_ERR_INVALID_ARG;
    }
    const size_t mark = out->len;
    return undo(out, mark, put_review_list(out, a, true, true));
}
