/* cmd_db.c — `trigguard db migrate|status`: the PostgreSQL schema (docs/POSTGRES.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "trigguard/pg_schema.h"

static void db_usage(FILE *out) {
    fprintf(out,
            "usage: trigguard db migrate [--database-url URL] [--target-version N]\n"
            "       trigguard db status [--database-url URL]\n"
            "       trigguard db import DIR [--database-url URL] [--retention SECONDS]\n"
            "\n"
            "migrate  creates or upgrades the PostgreSQL schema to the version this binary\n"
            "         knows (%d). Safe to run again (nothing to do) and from several\n"
            "         processes at once (they take turns under an advisory lock).\n"
            "status   prints the database's schema version.\n"
            "import   copies the file ledger in DIR into the database (once: running it\n"
            "         again writes nothing); `trigguard db import --help` says more.\n"
            "\n"
            "URL is a libpq connection URI (postgresql://...) or key=value conninfo;\n"
            "default: the environment variable TRIGGUARD_DATABASE_URL.\n"
            "\n"
            "exit status: 0 done, 1 the database cannot be reached or a statement failed,\n"
            "2 usage error, a URL that does not parse, or a schema newer than this binary\n",
            TG_PG_SCHEMA_VERSION);
}

/* Exit status for an error of the schema functions (the usage text above). */
static int db_exit(tg_err_t rc) {
    return rc == TG_ERR_CONFIG || rc == TG_ERR_SCHEMA_VERSION ? TG_EXIT_USAGE : TG_EXIT_FAIL;
}

int tg_cmd_db(int argc, char **argv) {
    const char *url = getenv("TRIGGUARD_DATABASE_URL");
    const char *sub = NULL;
    int target = TG_PG_SCHEMA_VERSION;
    tg_diag_t diag = {{0}};
    /* import has its own arguments (a directory, --retention): it parses them itself */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "import") == 0) {
            return tg_cmd_db_import(argc - i, argv + i, url);
        }
        if (strcmp(argv[i], "--database-url") == 0 && i + 1 < argc) {
            url = argv[++i];
        } else if (argv[i][0] != '-') {
            break;
        }
    }
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            db_usage(stdout);
            return TG_EXIT_OK;
        }
        if (strcmp(argv[i], "--database-url") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "trigguard db: --database-url needs a value\n");
                return TG_EXIT_USAGE;
            }
            url = argv[++i];
            continue;
        }
        if (strncmp(argv[i], "--database-url=", 15) == 0) {
            url = argv[i] + 15;
            continue;
        }
        if (strcmp(argv[i], "--target-version") == 0) {
            char *end = NULL;
            long v = i + 1 < argc ? strtol(argv[i + 1], &end, 10) : 0;
            if (end == NULL || *end != '\0' || v < 1 || v > TG_PG_SCHEMA_VERSION) {
                fprintf(stderr, "trigguard db: --target-version needs a version 1..%d\n",
                        TG_PG_SCHEMA_VERSION);
                return TG_EXIT_USAGE;
            }
            target = (int)v;
            i++;
            continue;
        }
        if (argv[i][0] == '-' || sub != NULL) {
            fprintf(stderr, "trigguard db: unexpected argument '%s'\n\n", argv[i]);
            db_usage(stderr);
            return TG_EXIT_USAGE;
        }
        sub = argv[i];
    }
    if (sub == NULL) {
        fprintf(stderr, "trigguard db: no subcommand given\n\n");
        db_usage(stderr);
        return TG_EXIT_USAGE;
    }
    if (strcmp(sub, "migrate") != 0 && strcmp(sub, "status") != 0) {
        fprintf(stderr, "trigguard db: unknown subcommand '%s'\n\n", sub);
        db_usage(stderr);
        return TG_EXIT_USAGE;
    }
    if (url == NULL || url[0] == '\0') {
        fprintf(stderr,
                "trigguard db %s: no database: give --database-url URL or set "
                "TRIGGUARD_DATABASE_URL\n",
                sub);
        return TG_EXIT_USAGE;
    }
    if (strcmp(sub, "status") == 0) {
        int version = 0;
        tg_err_t rc = tg_pg_schema_version(url, &version, &diag);
        if (rc) {
            fprintf(stderr, "trigguard db status: %s\n", diag.msg);
            return db_exit(rc);
        }
        printf("schema version %d (this binary knows up to %d)%s\n", version, TG_PG_SCHEMA_VERSION,
               version == 0                     ? ": no schema yet, run `trigguard db migrate`"
               : version < TG_PG_SCHEMA_VERSION ? ": `trigguard db migrate` will upgrade it"
               : version > TG_PG_SCHEMA_VERSION ? ": newer than this binary, which refuses it"
                                                : ": up to date");
        return TG_EXIT_OK;
    }
    tg_pg_migration_result_t res = {0, 0};
    tg_err_t rc = tg_pg_migrate_to(url, target, &res, &diag);
    if (rc) {
        fprintf(stderr, "trigguard db migrate: %s\n", diag.msg);
        return db_exit(rc);
    }
    if (res.from == res.to) {
        printf("schema version %d: up to date, nothing to do\n", res.to);
    } else {
        printf("schema version %d -> %d: migrated\n", res.from, res.to);
    }
    return TG_EXIT_OK;
}
