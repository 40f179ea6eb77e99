/* canon.h — strict JSON parsing and RFC 8785 (JCS) canonical JSON, plus SHA-256 helpers.
 *
 * Canonical form (RFC 8785): object members sorted by the UTF-16 code units of their names
 * (not by UTF-8 bytes: a name starting with U+10000..U+10FFFF, encoded as a surrogate pair
 * 0xD800.., sorts *before* one starting with U+E000..U+FFFF), no insignificant whitespace,
 * strings with the minimal escapes (\b \f \n \r \t \" \\ and \u00xx for other controls,
 * everything else as raw UTF-8), numbers as ECMAScript Number.prototype.toString prints them.
 *
 * Number precision (ECMAScript semantics, on purpose): every JSON number is an IEEE-754
 * double. A JSON integer with magnitude above 2^53 = 9007199254740992 cannot always be
 * represented and is rounded to the nearest double (ties to even) exactly as JSON.parse does:
 * 9007199254740993 canonicalizes to 9007199254740992, and 12345678901234567890 to
 * 12345678901234567000. From 1e21 up the exponent form is used ("1e+21"). Fractions keep at
 * most 17 significant digits (the shortest that round-trip). Clients that need exact large
 * integers (amounts in minor units beyond 2^53, 64-bit ids) must send them as strings; two
 * requests differing only beyond double precision have the same request hash.
 * -0 prints as "0"; NaN and ±Infinity are not JSON and are rejected.
 *
 * Thread safety: every function here is reentrant and thread-safe (no global state; libsodium
 * must have been initialised with sodium_init() before use, which is idempotent).
 */
#ifndef TRIGGUARD_CANON_H
#define TRIGGUARD_CANON_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "trigguard/buf.h"
#include "trigguard/err.h"
/* tg_sha256, declared here before sha256.h owned it: its callers still find it through canon.h. */
#include "trigguard/sha256.h"

typedef struct tg_json_limits {
    size_t max_bytes;  /* whole JSON text */
    size_t max_depth;  /* nesting of arrays/objects; a scalar document has depth 0 */
    size_t max_string; /* bytes of UTF-8 in one string value or member name */
    size_t max_keys;   /* members of one object */
} tg_json_limits_t;

#define TG_JSON_LIMITS_DEFAULT ((tg_json_limits_t){65536, 32, 4096, 256}) /* SPEC §3.1 */

/* Deepest nesting tg_canon_write accepts for trees built by code (parsed trees obey their
 * limits). */
#define TG_CANON_MAX_DEPTH 64

/* Strict parse of one JSON text into a jansson tree (caller json_decref's *out). Rejects:
   syntax errors (TG_ERR_JSON_SYNTAX, also NaN/Infinity tokens, trailing data, raw NUL bytes
   and \u0000 in strings or names), duplicate member names (TG_ERR_JSON_DUPLICATE_KEY),
   invalid UTF-8 (TG_ERR_JSON_UTF8: malformed, overlong, truncated, above U+10FFFF), lone
   surrogates (TG_ERR_JSON_SURROGATE: an unpaired \uD800-\uDFFF escape, or raw bytes
   encoding one), numbers that overflow to infinity (TG_ERR_JSON_NONFINITE), depth >
   max_depth (TG_ERR_JSON_DEPTH; jansson itself stops at 2048), text > max_bytes, a string or
   member name longer than max_string bytes, an object with more than max_keys members
   (TG_ERR_LIMIT). TG_ERR_NOMEM on allocation failure (jansson 2.14 reports some allocation
   failures as syntax errors, so TG_ERR_JSON_SYNTAX is also possible then: either way the
   text is rejected), TG_ERR_INVALID_ARG for NULL out, or NULL text with len > 0.
   diag says what and where (line/column/byte offset or JSON path).
   lim NULL = defaults. Top-level scalars are accepted (callers check the type they need).
   All numbers are parsed as doubles (ECMAScript semantics: integers beyond 2^53 round to
   the nearest double exactly as JSON.parse does), so every number node is a json_real.
   text need not be NUL-terminated; the caller keeps ownership of it. On error *out is NULL.
   Thread-safe. */
tg_err_t tg_json_parse(json_t **out, const char *text, size_t len, const tg_json_limits_t *lim,
                       tg_diag_t *diag) TG_MUST_USE;

/* Request-scoped allocation for jansson. A request's JSON values (the parsed body, the
   objects built to hash it) are created and freed within the request, yet jansson takes one
   malloc per value: ~40 per request, the largest share of /decide's parse. Between
   tg_json_scope_begin and tg_json_scope_end, jansson allocations on the calling thread come
   from that thread's fixed arena (TG_JSON_ARENA_BYTES, bump allocation; past its end they
   fall back to malloc), freeing arena memory is a no-op, and scope_end makes the whole
   arena reusable. So every jansson value created inside a scope must be released inside it
   and never handed to another thread. Outside a scope, and on threads that never open one,
   jansson uses malloc/free as usual, and memory from either source may be freed in or out
   of a scope. tg_json_alloc_install sets the allocator functions once, before threads start
   (values already allocated with malloc stay valid). Under AddressSanitizer the unused and
   released arena is poisoned, so overflows and uses after scope_end are still caught.
   Scopes do not nest. */
#define TG_JSON_ARENA_BYTES (64 * 1024)
void tg_json_alloc_install(void);
void tg_json_scope_begin(void);
void tg_json_scope_end(void);

/* Appends the RFC 8785 canonical form of v to out. TG_ERR_JSON_NONFINITE for NaN/Inf,
   TG_ERR_JSON_UTF8 / TG_ERR_JSON_SURROGATE for bad strings built by code (jansson only lets
   valid UTF-8 in, so these mostly come from json_stringn_nocheck), TG_ERR_JSON_DEPTH past
   TG_CANON_MAX_DEPTH, TG_ERR_INVALID_ARG for NULL v, tg_buf errors (TG_ERR_LIMIT,
   TG_ERR_NOMEM). Integers stored as json_integer are formatted as the double they convert to.
   On error out->len is restored to its value on entry (out's allocation is the caller's).
   Allocation-light: member pointers are sorted in a 512-entry stack area shared by all
   nesting levels; only an object that does not fit there takes one block from jansson's
   allocator (json_set_alloc_funcs), freed before returning. v is only read. Thread-safe as
   long as no other thread mutates v (jansson reference counts are not touched). */
tg_err_t tg_canon_write(tg_buf_t *out, const json_t *v, tg_diag_t *diag) TG_MUST_USE;

/* SHA-256 of the canonical form, streamed through a small internal buffer (so the canonical
   bytes are never held whole). Errors as tg_canon_write; out is zeroed on error. */
tg_err_t tg_canon_sha256(uint8_t out[32], const json_t *v, tg_diag_t *diag) TG_MUST_USE;

/* ECMAScript Number.prototype.toString of d into out (NUL-terminated), *len_out = length
   (len_out may be NULL). TG_CANON_NUMBER_MAX = 32 is enough (the longest form has 25 bytes).
   TG_ERR_JSON_NONFINITE for NaN/Inf (out = ""). -0 -> "0". Shortest round-trip digits, the
   closest to d when several are as short (ties to even). Cost: integers below 2^53 and
   decimals of at most 15 significant digits take a few multiplications; other non-integers
   in [2^-12, 2^53) use exact 128-bit integer arithmetic; the rest (huge, tiny, subnormal)
   fall back to snprintf/strtod round-trips (correct, about 10x slower). Thread-safe. */
#define TG_CANON_NUMBER_MAX 32
tg_err_t tg_canon_number(char out[TG_CANON_NUMBER_MAX], size_t *len_out, double d) TG_MUST_USE;

/* Appends s (n bytes of UTF-8) as a JCS string literal with quotes and the minimal escapes
   (\b \f \n \r \t \" \\, other controls as \u00xx lowercase hex; everything else raw).
   Validates UTF-8 (TG_ERR_JSON_UTF8: bad, overlong or truncated sequences, code points above
   U+10FFFF; TG_ERR_JSON_SURROGATE: encoded U+D800..U+DFFF), TG_ERR_INVALID_ARG for NULL s
   with n > 0, tg_buf errors. A NUL byte inside s is written as \u0000. Used by receipt and
   response writers on the hot path (plain ASCII is copied eight bytes at a time). On error
   out->len is restored. Thread-safe for distinct buffers. */
tg_err_t tg_canon_string(tg_buf_t *out, const char *s, size_t n) TG_MUST_USE;

/* Lowercase hex; out must hold 2*n+1 bytes (NUL-terminated). */
void tg_hex(char *out, const uint8_t *in, size_t n);

/* Decodes exactly 2*n lowercase-or-uppercase hex chars into n bytes; TG_ERR_INVALID_ARG otherwise
   (wrong length or a non-hex character; out may then be partly written). */
tg_err_t tg_unhex(uint8_t *out, size_t n, const char *hex, size_t hex_len) TG_MUST_USE;

#endif /* TRIGGUARD_CANON_H */
