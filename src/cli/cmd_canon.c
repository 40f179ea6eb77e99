/* cmd_canon.c — `trigguard canon`: RFC 8785 canonical form (or its SHA-256) of one JSON text. */
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "trigguard/canon.h"

/* General-purpose limits: bigger than a request's (SPEC §3.1), bounded by the input cap; the
 * depth is the canonical writer's own ceiling so anything parsed can be written. */
#define TG_CANON_CLI_MAX_BYTES ((size_t)16 * 1024 * 1024)

static void canon_usage(FILE *out) {
    fprintf(out,
            "usage: trigguard canon [--sha256] [FILE]\n"
            "\n"
            "Reads one JSON text from FILE (default: standard input, also \"-\") and writes its\n"
            "RFC 8785 (JCS) canonical form to standard output, with no trailing newline.\n"
            "\n"
            "  --sha256   write the lowercase hex SHA-256 of the canonical bytes instead,\n"
            "             followed by one newline (the hashed bytes never include it)\n"
            "  -h, --help this text\n"
            "\n"
            "Numbers follow ECMAScript: integers beyond 2^53 are rounded to the nearest double\n"
            "(9007199254740993 -> 9007199254740992), -0 -> 0, 1e21 -> 1e+21.\n"
            "Limits: input at most 16 MiB; nesting at most %d levels; strings and member\n"
            "counts bounded only by the input size. (The server applies SPEC limits: 64 KiB,\n"
            "depth 32, 4 KiB strings, 256 members.)\n"
            "Rejected (exit 2, message on stderr, nothing on stdout): invalid JSON, duplicate\n"
            "member names, invalid UTF-8, lone surrogates, NaN/Infinity, numbers overflowing\n"
            "to infinity, \\u0000 in strings.\n"
            "Exit status: 0 success, 1 write error, 2 bad input or usage.\n",
            TG_CANON_MAX_DEPTH);
}

int tg_cmd_canon(int argc, char **argv) {
    int want_hash = 0;
    const char *path = "-";
    int have_path = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--sha256") == 0) {
            want_hash = 1;
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            canon_usage(stdout);
            return TG_EXIT_OK;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            fprintf(stderr, "trigguard canon: unknown option '%s'\n\n", argv[i]);
            canon_usage(stderr);
            return TG_EXIT_USAGE;
        } else if (!have_path) {
            path = argv[i];
            have_path = 1;
        } else {
            fprintf(stderr, "trigguard canon: more than one input file\n\n");
            canon_usage(stderr);
            return TG_EXIT_USAGE;
        }
    }
    if (sodium_init() < 0) {
        fprintf(stderr, "trigguard canon: libsodium failed to initialise\n");
        return TG_EXIT_FAIL;
    }

    int status = TG_EXIT_USAGE;
    json_t *root = NULL;
    tg_buf_t out;
    tg_buf_init(&out, 0);
    size_t len = 0;
    tg_json_limits_t lim = {TG_CANON_CLI_MAX_BYTES, TG_CANON_MAX_DEPTH, TG_CANON_CLI_MAX_BYTES,
                            TG_CANON_CLI_MAX_BYTES};
    tg_diag_t diag = {{0}};
    tg_err_t rc;
    char *text = tg_cli_read_file(path, TG_CANON_CLI_MAX_BYTES, &len);
    if (text == NULL) {
        goto done;
    }
    rc = tg_json_parse(&root, text, len, &lim, &diag);
    if (rc == TG_OK) {
        rc = tg_canon_write(&out, root, &diag);
    }
    if (rc) {
        fprintf(stderr, "trigguard canon: %s: %s\n", strcmp(path, "-") ? path : "stdin",
                diag.msg[0] ? diag.msg : tg_strerror(rc));
        goto done;
    }
    /* A write that fails here is reported, with the exit status, by main (finish). */
    if (want_hash) {
        uint8_t h[32];
        char hex[2 * sizeof h + 1];
        tg_sha256(h, out.data, out.len);
        tg_hex(hex, h, sizeof h);
        printf("%s\n", hex);
    } else if (out.len > 0) {
        (void)fwrite(out.data, 1, out.len, stdout);
    }
    status = TG_EXIT_OK;
done:
    json_decref(root);
    tg_buf_free(&out);
    free(text);
    return status;
}
