/* tzif.h — the TZif time zone format (RFC 8536), read into the kernel's zone (tg_zone_t).
 *
 * Owner: the policy module (src/policy/tzif.c). The compiler reads the zone a bundle names
 * (`"timezone": "Europe/Berlin"`, docs/POLICY.md "Time") from the host's tz database at
 * policy load and compiles it with tg_tzif_parse; the kernel only searches the result.
 *
 * What is read: version 1 files from their 32-bit block, version 2+ files from their 64-bit
 * block and footer. The transitions become (instant, UT offset) pairs; the offset before the
 * first transition is local time type 0's; the footer's POSIX TZ string (RFC 8536 §3.3)
 * rules every instant after the last transition. Footer forms accepted: a standard zone
 * ("UTC0", "<+03>-3", "JST-9") or one with daylight time and both dates in the `Mm.w.d[/time]`
 * form (time -167..167 hours), the form every zone in use has. Refused (an error, never a
 * guess): leap second records ("right/" zones), the `Jn` and `n` date forms, a daylight name
 * without dates, offsets beyond +-25 hours, transitions not strictly ascending, a type index
 * out of range, counts beyond the limits below or the data's size.
 *
 * Bounds: at most TG_TZIF_MAX_FILE bytes, TG_TZIF_MAX_TRANSITIONS transitions, 256 local
 * time types (RFC 8536), footer TG_TZIF_MAX_FOOTER bytes. Every count is checked against the
 * bytes left before anything is read.
 */
#ifndef TRIGGUARD_TZIF_H
#define TRIGGUARD_TZIF_H

#include <stddef.h>
#include <stdint.h>

#include "trigguard/err.h"
#include "trigguard/kernel_tables.h"

#define TG_TZIF_MAX_FILE ((size_t)256 * 1024)
#define TG_TZIF_MAX_TRANSITIONS 4096u
#define TG_TZIF_MAX_FOOTER 128u

/* A parsed zone: the kernel's tg_zone_t (name left empty) with its two arrays on the heap. */
typedef struct tg_tzif {
    tg_zone_t zone; /* zone.at / zone.off point at at / off below */
    int64_t *at;
    int32_t *off;
} tg_tzif_t;

/* Parses len bytes of TZif data into *out (tg_tzif_free). Errors: TG_ERR_POLICY_INVALID
 * (malformed or unsupported; diag says what, without a path: the caller names the file),
 * TG_ERR_LIMIT (larger than a bound above), TG_ERR_NOMEM, TG_ERR_INVALID_ARG (NULL). On
 * error *out is zeroed. Pure apart from the allocation; reentrant. */
tg_err_t tg_tzif_parse(tg_tzif_t *out, const uint8_t *data, size_t len,
                       tg_diag_t *diag) TG_MUST_USE;

/* Parses a POSIX TZ string of the forms above (without the newlines) into z's rule members
 * (has_rule, has_dst, std_off, dst_off, start, end). Errors: TG_ERR_POLICY_INVALID. */
tg_err_t tg_tzif_parse_rule(tg_zone_t *z, const char *s, size_t len, tg_diag_t *diag) TG_MUST_USE;

/* Frees what tg_tzif_parse allocated and zeroes *t. NULL-safe. */
void tg_tzif_free(tg_tzif_t *t);

#endif /* TRIGGUARD_TZIF_H */
