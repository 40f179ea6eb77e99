/* cmd_policy.c — `trigguard policy check FILE`: validate and compile a policy bundle. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "trigguard/policy.h"

static void policy_usage(FILE *out) {
    fprintf(
        out,
        "usage: trigguard policy check FILE\n"
        "       trigguard policy test [--policy FILE] [--coverage] [--json] TESTS...\n"
        "                 (trigguard policy test --help describes it)\n"
        "\n"
        "Validates and compiles a policy bundle (docs/POLICY.md). FILE may be - for stdin.\n"
        "On success prints one line: version, authority, policyHash, surfaces, rules, signals,\n"
        "tools.\n"
        "exit status: 0 valid, 2 invalid (the error names the JSON path) or unreadable\n");
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
    if (argc >= 2 && strcmp(argv[1], "check") != 0) {
        fprintf(stderr, "trigguard policy: unknown subcommand '%s'\n\n", argv[1]);
        policy_usage(stderr);
        return TG_EXIT_USAGE;
    }
    if (argc == 3 && argv[2][0] == '-' && argv[2][1] != '\0') {
        fprintf(stderr, "trigguard policy check: unknown option '%s'\n\n", argv[2]);
        policy_usage(stderr);
        return TG_EXIT_USAGE;
    }
    if (argc != 3) {
        policy_usage(stderr);
        return TG_EXIT_USAGE;
    }
    const char *path = argv[2];
    size_t len = 0;
    char *text = tg_cli_read_file(path, TG_POLICY_MAX_FILE, &len);
    if (text == NULL) {
        return TG_EXIT_USAGE;
    }
    tg_policy_t *p = NULL;
    tg_diag_t diag = {{0}};
    /* From a file, data set files resolve against its directory (tg_policy_load_file); a
     * bundle on standard input has none, so it cannot use file data sets. */
    tg_err_t rc = strcmp(path, "-") == 0 ? tg_policy_load_text(&p, text, len, &diag)
                                         : tg_policy_load_file(&p, path, &diag);
    free(text);
    if (rc) {
        fprintf(stderr, "trigguard policy check: %s: %s\n", path,
                diag.msg[0] ? diag.msg : tg_strerror(rc));
        return TG_EXIT_USAGE;
    }
    printf("policy ok: version %s, authority %s, hash %s, %zu surfaces, %zu rules, %zu signals, "
           "%zu tools\n",
           tg_policy_version(p), tg_policy_authority(p), tg_policy_hash_hex(p),
           tg_policy_surface_count(p), tg_policy_rule_count(p), tg_policy_signal_count(p),
           tg_policy_tool_count(p));
    tg_policy_destroy(p);
    return TG_EXIT_OK;
}
