/* test_pg_schema.c — what pg_schema.h promises without a server: URLs are checked before
 * anything is contacted, an unreachable server is TG_ERR_IO with libpq's reason and never a
 * crash, and the error and version constants hold. tests/integration/db_migrate.sh runs the
 * migrations themselves against a real PostgreSQL. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "trigguard/pg_schema.h"

static void test_check_url(void **state) {
    (void)state;
    tg_diag_t d = {{0}};
    static const char *const good[] = {
        "postgresql:///trigguard?host=/tmp&port=5432&user=trigguard",
        "postgres://u@db1:5432,db2:5432/tg?target_session_attrs=read-write",
        "host=/tmp dbname=trigguard user=trigguard",
        "dbname=trigguard",
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        assert_int_equal(tg_pg_check_url(good[i], &d), TG_OK);
    }
    static const char *const bad[] = {
        "postgresql://%zz",         /* bad percent-encoding */
        "nonsense",                 /* conninfo without "=" */
        "host=/tmp frobnicate=1",   /* unknown conninfo keyword */
        "postgresql:///x?nosuch=1", /* unknown URI parameter */
        "dbname='unterminated",     /* unterminated quote */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&d, 0, sizeof d);
        assert_int_equal(tg_pg_check_url(bad[i], &d), TG_ERR_CONFIG);
        assert_non_null(strstr(d.msg, "the database URL does not parse: "));
        /* one line: libpq's trailing newline is not copied */
        assert_null(strchr(d.msg, '\n'));
    }
    assert_int_equal(tg_pg_check_url("", &d), TG_ERR_CONFIG);
    assert_string_equal(d.msg, "no database URL given");
    assert_int_equal(tg_pg_check_url(NULL, NULL), TG_ERR_CONFIG);
}

/* A bad URL never reaches the network: the functions stop at the parse. */
static void test_bad_url_stops_early(void **state) {
    (void)state;
    tg_diag_t d = {{0}};
    tg_pg_migration_result_t res = {-1, -1};
    int version = -1;
    assert_int_equal(tg_pg_migrate("postgresql://%zz", &res, &d), TG_ERR_CONFIG);
    assert_int_equal(res.from, -1);
    assert_int_equal(tg_pg_schema_version("nonsense", &version, &d), TG_ERR_CONFIG);
    assert_int_equal(version, -1);
}

/* No server behind a socket directory that does not exist: TG_ERR_IO, libpq's reason. */
static void test_unreachable(void **state) {
    (void)state;
    tg_diag_t d = {{0}};
    int version = -1;
    const char *url = "postgresql:///trigguard?host=/nonexistent-tg-test&connect_timeout=2";
    assert_int_equal(tg_pg_schema_version(url, &version, &d), TG_ERR_IO);
    assert_non_null(strstr(d.msg, "cannot connect to the database: "));
    assert_non_null(strstr(d.msg, "/nonexistent-tg-test"));
    assert_null(strchr(d.msg, '\n'));
    assert_int_equal(version, -1);
    memset(&d, 0, sizeof d);
    assert_int_equal(tg_pg_migrate(url, NULL, &d), TG_ERR_IO);
    assert_non_null(strstr(d.msg, "cannot connect to the database: "));
}

static void test_constants(void **state) {
    (void)state;
    assert_true(TG_PG_SCHEMA_VERSION >= 1);
    assert_string_equal(tg_err_name(TG_ERR_SCHEMA_VERSION), "TG_ERR_SCHEMA_VERSION");
    assert_string_equal(tg_strerror(TG_ERR_SCHEMA_VERSION),
                        "database schema is newer than this binary knows");
    /* the lock key is "tgschema" in ASCII, as pg_schema.h says */
    char key[9] = {0};
    for (int i = 0; i < 8; i++) {
        key[i] = (char)(((unsigned long long)TG_PG_SCHEMA_LOCK >> (56 - 8 * i)) & 0xffU);
    }
    assert_string_equal(key, "tgschema");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check_url),
        cmocka_unit_test(test_bad_url_stops_early),
        cmocka_unit_test(test_unreachable),
        cmocka_unit_test(test_constants),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
