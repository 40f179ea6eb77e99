/* read.c — tg_test_read (see read.h). */
#include "read.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "trigguard/io.h"

char *tg_test_read(const char *path, size_t *len) {
    tg_diag_t d = {{0}};
    tg_file_t f;
    /* the largest cap: a test reads what it wrote or what the repository holds */
    tg_err_t rc = tg_read_file(&f, path, TG_READ_CAP_MAX, path, 0, &d);
    if (rc != TG_OK) {
        fail_msg("%s (%s)", d.msg, tg_err_name(rc));
    }
    if (len != NULL) {
        *len = f.len;
    }
    return f.data;
}
