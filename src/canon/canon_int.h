/* canon_int.h — helpers shared by the canon module's files (not a public contract). */
#ifndef TRIGGUARD_CANON_INT_H
#define TRIGGUARD_CANON_INT_H

#include <stddef.h>

#include "trigguard/err.h"

/* Length (1-4) of the well-formed UTF-8 sequence (RFC 3629) starting at p[0], p holding n >= 1
 * bytes; 0 if malformed (*err = TG_ERR_JSON_UTF8, or TG_ERR_JSON_SURROGATE when the bytes
 * encode U+D800..U+DFFF). */
size_t tg_canon_utf8_seq(const unsigned char *p, size_t n, tg_err_t *err);

/* A step of a JSON path, linked towards the root on the C stack: free to build while walking
 * a tree, formatted only when a diagnostic needs it. key NULL means an array index. */
typedef struct tg_jpath {
    const struct tg_jpath *up;
    const char *key;
    size_t klen;
    size_t index;
} tg_jpath_t;

/* Writes "$.a[3].b" (keys sanitised and shortened for a log line) into dst (cap > 0). */
void tg_canon_path_format(char *dst, size_t cap, const tg_jpath_t *p);

#endif /* TRIGGUARD_CANON_INT_H */
