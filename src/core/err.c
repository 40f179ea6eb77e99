/* err.c — text for tg_err_t and the diagnostic helper. */
#include "trigguard/err.h"

#include <stdarg.h>
#include <stdio.h>

static const char *const tg_err_texts[] = {
#define TG_ERR_TEXT_(name, text) text,
    TG_ERR_LIST(TG_ERR_TEXT_)
#undef TG_ERR_TEXT_
};

static const char *const tg_err_names[] = {
#define TG_ERR_NAME_(name, text) #name,
    TG_ERR_LIST(TG_ERR_NAME_)
#undef TG_ERR_NAME_
};

const char *tg_strerror(tg_err_t e) {
    if ((unsigned)e >= (unsigned)TG_ERR__COUNT) {
        return "unknown error";
    }
    return tg_err_texts[e];
}

const char *tg_err_name(tg_err_t e) {
    if ((unsigned)e >= (unsigned)TG_ERR__COUNT) {
        return "TG_ERR_UNKNOWN";
    }
    return tg_err_names[e];
}

tg_err_t tg_diag_set(tg_diag_t *d, tg_err_t e, const char *fmt, ...) {
    if (d != NULL) {
        va_list ap;
        va_start(ap, fmt);
        (void)vsnprintf(d->msg, sizeof d->msg, fmt, ap);
        va_end(ap);
    }
    return e;
}
