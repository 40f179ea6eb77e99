/* facts.c — binds the verified facts of an authenticated caller into a kernel frame.
 *
 * The policy module knows no principal and the guard module knows no policy (DESIGN.md's
 * arrows); the pipeline knows both, so the binding of tenant, principal.subject,
 * principal.issuer and principal.claims.<name> into the frame lives here, once, for the
 * daemon's routes and for `trigguard check`. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "trigguard/guard.h"
#include "trigguard/kernel.h"
#include "trigguard/pipeline.h"
#include "trigguard/policy.h"

static tg_sv_t sv_of_str(const tg_guard_str_t *s) {
    tg_sv_t v = {NULL, 0};
    if (s->ptr != NULL && s->len <= UINT32_MAX) {
        v.ptr = s->ptr;
        v.len = (uint32_t)s->len;
    }
    return v;
}

/* A claim value the kernel can compare: the scalar types guard.h promises, nothing else. */
static int claim_scalar(const tg_value_t *v) {
    return v->type == TG_VT_STRING || v->type == TG_VT_NUMBER || v->type == TG_VT_BOOL;
}

void tg_pipeline_bind_facts(tg_frame_t *f, const tg_policy_t *pol, const char *tenant,
                            size_t tenant_len, const tg_principal_t *pr) {
    f->tenant = (tg_sv_t){NULL, 0};
    f->principal_subject = (tg_sv_t){NULL, 0};
    f->principal_issuer = (tg_sv_t){NULL, 0};
    f->n_claims = 0;
    if (tenant != NULL && tenant_len <= UINT32_MAX) {
        f->tenant = (tg_sv_t){tenant, (uint32_t)tenant_len};
    }
    if (pr == NULL) {
        return;
    }
    f->principal_subject = sv_of_str(&pr->subject);
    f->principal_issuer = sv_of_str(&pr->issuer);
    /* Claim ids ascend in this loop, so the slots come out sorted by id as the kernel wants.
     * Both sides are short (TG_POLICY_MAX_CLAIMS names; a token's handful of claims). */
    size_t n = pol != NULL ? tg_policy_claim_count(pol) : 0;
    for (uint32_t id = 0; id < n && f->n_claims < TG_FRAME_MAX_CLAIMS; id++) {
        tg_sv_t name = tg_policy_claim_name(pol, id);
        for (size_t i = 0; i < pr->claims_count; i++) {
            const tg_claim_t *c = &pr->claims[i];
            if (c->name.len == name.len && c->name.ptr != NULL &&
                memcmp(c->name.ptr, name.ptr, name.len) == 0 && claim_scalar(&c->value)) {
                f->claims[f->n_claims].id = id;
                f->claims[f->n_claims].v = c->value;
                f->n_claims++;
                break; /* names are unique (guard.h) */
            }
        }
    }
}
