/* clock.h — wall clock and monotonic time, and the one timestamp format of receipts.
 *
 * Receipt timestamps are UTC, millisecond precision, exactly 24 characters:
 *   "YYYY-MM-DDTHH:MM:SS.mmmZ"   e.g. "2026-11-30T05:40:10.123Z"
 * Formatting and parsing use proleptic Gregorian arithmetic of their own: no locale, no
 * TZ, no gmtime. Range: 1970-01-01T00:00:00.000Z .. 9999-12-31T23:59:59.999Z. No leap
 * seconds (":60" is rejected), as in Unix time.
 * Thread safety: every function is reentrant and thread-safe.
 */
#ifndef TRIGGUARD_CLOCK_H
#define TRIGGUARD_CLOCK_H

#include <stddef.h>
#include <stdint.h>

#include "trigguard/err.h"

#define TG_TIME_ISO_LEN 24
/* Largest representable instant: 9999-12-31T23:59:59.999Z in Unix milliseconds. */
#define TG_TIME_MAX_MS INT64_C(253402300799999)

/* Wall clock (CLOCK_REALTIME) in Unix milliseconds. */
int64_t tg_clock_now_ms(void);

/* Monotonic clock (CLOCK_MONOTONIC) in nanoseconds, for durations only. */
int64_t tg_clock_mono_ns(void);

/* Writes the 24-character form of unix_ms plus NUL into out.
 * Errors: TG_ERR_INVALID_ARG when unix_ms is outside [0, TG_TIME_MAX_MS] (out is then
 * the empty string). */
tg_err_t tg_time_format_ms(char out[TG_TIME_ISO_LEN + 1], int64_t unix_ms) TG_MUST_USE;

/* Strictly parses exactly that form (n must be 24; valid calendar date and time of day).
 * Receipts use only this one: a timestamp is hashed as text, so it has one spelling.
 * Errors: TG_ERR_INVALID_ARG for anything else (*out untouched). */
tg_err_t tg_time_parse_ms(int64_t *out, const char *s, size_t n) TG_MUST_USE;

/* Parses any RFC 3339 section 5.6 date-time, for times a person types (`verify --now`):
 *   YYYY-MM-DD "T" HH:MM:SS [ "." 1*DIGIT ] ( "Z" | ("+" / "-") HH:MM )
 * "T" and "Z" may be lower case; the fraction may have any number of digits and is
 * truncated to the millisecond (exact for comparisons with millisecond instants: the
 * truncated time is >= t exactly when the full one is); a numeric offset is subtracted
 * ("-00:00" = UTC). Not accepted: a space instead of "T" (RFC 3339 only notes it), a
 * missing offset, ":60" (a leap second has no Unix time), and instants outside
 * [0, TG_TIME_MAX_MS] once in UTC. Errors: TG_ERR_INVALID_ARG (*out untouched). */
tg_err_t tg_time_parse_rfc3339_ms(int64_t *out, const char *s, size_t n) TG_MUST_USE;

#endif /* TRIGGUARD_CLOCK_H */
