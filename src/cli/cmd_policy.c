/* cmd_policy.c — `trigguard policy check [--strict] FILE`: validate and compile a policy
 * bundle; `trigguard policy lint [--previous OLD] [--json] FILE`: what compiles but is
 * probably wrong (tg_policy_lint). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "trigguard/policy.h"

static void policy_usage(FILE *out) {
    fprintf(out,
            "usage: trigguard policy check FILE [--strict]\n"
            "       trigguard policy lint [--previous OLD.json] [--json] FILE\n"
            "       trigguard policy test [--policy FILE] [--coverage] [--json] TESTS...\n"
            "                 (trigguard policy test --help describes it)\n"
            "\n"
            "check validates and compiles a policy bundle (docs/POLICY.md). FILE may be - for\n"
            "stdin. On success prints one line: version, authority, policyHash, surfaces,\n"
            "rules, signals, tools. --strict also lints it (as serve and check do by default):\n"
            "a lint error refuses the bundle, warnings are printed to stderr.\n"
            "\n"
            "lint prints every finding, \"error|warning CODE PATH: MESSAGE\" (--json: one JSON\n"
            "document), then a summary line. --previous names the bundle this one replaces:\n"
            "its version reused with different content is an error. The codes are listed in\n"
            "docs/POLICY.md (\"policy lint\").\n"
            "\n"
            "exit status: 0 valid (lint: no errors), 2 invalid (the error names the JSON path),\n"
            "lint errors, or unreadable\n");
}

/* Reads and compiles path ("-" = stdin) into *p and its lint report, without refusing
 * anything: the caller decides what a lint error means. Prints the reason on failure. */
static int load_and_lint(const char *cmd, const char *path, const tg_policy_t *previous,
                         tg_policy_t **p, tg_lint_report_t *report) {
    tg_diag_t diag = {{0}};
    tg_err_t rc;
    if (strcmp(path, "-") == 0) { /* standard input has no directory: no file data sets */
        size_t len = 0;
        char *text = tg_cli_read_file(path, TG_POLICY_MAX_FILE, &len);
        if (text == NULL) {
            return TG_EXIT_USAGE;
        }
        rc = tg_policy_load_text_checked(p, text, len, false, previous, report, &diag);
        free(text);
    } else { /* data set files resolve against the bundle's directory */
        rc = tg_policy_load_file_checked(p, path, false, previous, report, &diag);
    }
    if (rc) {
        fprintf(stderr, "trigguard policy %s: %s: %s\n", cmd, path,
                diag.msg[0] ? diag.msg : tg_strerror(rc));
        return TG_EXIT_USAGE;
    }
    return TG_EXIT_OK;
}

static void print_findings(FILE *out, const tg_lint_report_t *r) {
    for (size_t i = 0; i < r->n; i++) {
        const tg_lint_finding_t *f = &r->findings[i];
        fprintf(out, "%s %s %s: %s\n", tg_lint_severity_name(f->severity),
                tg_lint_code_name(f->code), f->path, f->message);
    }
    if (r->dropped > 0) {
        fprintf(out, "(%zu more findings not shown)\n", r->dropped);
    }
}

static int cmd_check(int argc, char **argv) {
    bool strict = false;
    const char *path = NULL;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--strict") == 0) {
            strict = true;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            fprintf(stderr, "trigguard policy check: unknown option '%s'\n\n", argv[i]);
            policy_usage(stderr);
            return TG_EXIT_USAGE;
        } else if (path == NULL) {
            path = argv[i];
        } else {
            policy_usage(stderr);
            return TG_EXIT_USAGE;
        }
    }
    if (path == NULL) {
        policy_usage(stderr);
        return TG_EXIT_USAGE;
    }
    tg_lint_report_t *r = strict ? malloc(sizeof *r) : NULL;
    if (strict && r == NULL) {
        fprintf(stderr, "trigguard policy check: out of memory\n");
        return TG_EXIT_USAGE;
    }
    tg_policy_t *p = NULL;
    int ex = load_and_lint("check", path, NULL, &p, r);
    if (ex == TG_EXIT_OK && strict) {
        print_findings(stderr, r);
        if (r->errors > 0) {
            fprintf(stderr, "trigguard policy check: %s: refused by --strict: %zu lint errors\n",
                    path, r->errors);
            ex = TG_EXIT_USAGE;
        }
    }
    if (ex == TG_EXIT_OK) {
        printf("policy ok: version %s, authority %s, hash %s, %zu surfaces, %zu rules, "
               "%zu signals, %zu tools\n",
               tg_policy_version(p), tg_policy_authority(p), tg_policy_hash_hex(p),
               tg_policy_surface_count(p), tg_policy_rule_count(p), tg_policy_signal_count(p),
               tg_policy_tool_count(p));
    }
    tg_policy_destroy(p);
    free(r);
    return ex;
}

static int cmd_lint(int argc, char **argv) {
    bool json = false;
    const char *path = NULL, *prev_path = NULL;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            json = true;
        } else if (strcmp(argv[i], "--previous") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "trigguard policy lint: --previous needs a file\n");
                return TG_EXIT_USAGE;
            }
            prev_path = argv[++i];
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            fprintf(stderr, "trigguard policy lint: unknown option '%s'\n\n", argv[i]);
            policy_usage(stderr);
            return TG_EXIT_USAGE;
        } else if (path == NULL) {
            path = argv[i];
        } else {
            policy_usage(stderr);
            return TG_EXIT_USAGE;
        }
    }
    if (path == NULL) {
        policy_usage(stderr);
        return TG_EXIT_USAGE;
    }
    tg_policy_t *prev = NULL;
    if (prev_path != NULL) {
        tg_diag_t diag = {{0}};
        tg_err_t rc = tg_policy_load_file(&prev, prev_path, &diag);
        if (rc) {
            fprintf(stderr, "trigguard policy lint: --previous %s: %s\n", prev_path,
                    diag.msg[0] ? diag.msg : tg_strerror(rc));
            return TG_EXIT_USAGE;
        }
    }
    tg_lint_report_t *r = malloc(sizeof *r);
    tg_policy_t *p = NULL;
    int ex = r == NULL ? TG_EXIT_USAGE : load_and_lint("lint", path, prev, &p, r);
    if (ex == TG_EXIT_OK && json) {
        tg_buf_t out;
        tg_buf_init(&out, 0);
        tg_err_t rc = tg_lint_report_json(&out, r);
        if (rc == TG_OK) {
            rc = tg_buf_putc(&out, '\n');
        }
        if (rc == TG_OK) {
            fwrite(out.data, 1, out.len, stdout);
        } else {
            fprintf(stderr, "trigguard policy lint: %s\n", tg_strerror(rc));
            ex = TG_EXIT_USAGE;
        }
        tg_buf_free(&out);
    } else if (ex == TG_EXIT_OK) {
        print_findings(stdout, r);
        printf("%s: %zu errors, %zu warnings (version %s, hash %s)\n", path, r->errors, r->warnings,
               tg_policy_version(p), tg_policy_hash_hex(p));
    }
    if (ex == TG_EXIT_OK && r->errors > 0) {
        ex = TG_EXIT_USAGE;
    }
    tg_policy_destroy(p);
    tg_policy_destroy(prev);
    free(r);
    return ex;
}

int tg_cmd_policy(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "test") == 0) {
        return tg_cmd_policy_test(argc - 1, argv + 1); /* its own usage and --help */
    }
    /* --help anywhere, as every other command takes it (not read as a file name) */
    bool help = argc >= 2 && strcmp(argv[1], "help") == 0;
    for (int i = 1; i < argc; i++) {
        help = help || strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0;
    }
    if (help) {
        policy_usage(stdout);
        return TG_EXIT_OK;
    }
    if (argc >= 2 && strcmp(argv[1], "check") == 0) {
        return cmd_check(argc, argv);
    }
    if (argc >= 2 && strcmp(argv[1], "lint") == 0) {
        return cmd_lint(argc, argv);
    }
    if (argc >= 2) {
        fprintf(stderr, "trigguard policy: unknown subcommand '%s'\n\n", argv[1]);
    }
    policy_usage(stderr);
    return TG_EXIT_USAGE;
}
