/* fuzz_config.c — the daemon's option parser on an argv made of the input's lines: errors
 * name the problem, accepted configurations obey the cross-field rules, and what
 * --print-config writes parses back to the same configuration (secrets redacted there are
 * passed through), so the printout is a faithful, re-usable description of what runs.
 *
 * Input: arguments separated by '\n' or NUL bytes (at most TG_FUZZ_MAX_ARGS), after an
 * implicit argv[0] "serve". The environment is whatever the fuzzer runs with; both parses
 * see the same environment.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trigguard/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define TG_FUZZ_MAX_ARGS 128

/* Splits text (modified in place) at '\n' and NUL into argv[1..]; returns argc. */
static int split_args(char **argv, char *text, size_t len) {
    int argc = 1;
    char *start = text;
    argv[0] = "serve";
    for (size_t i = 0; i <= len && argc < TG_FUZZ_MAX_ARGS; i++) {
        if (i == len || text[i] == '\n' || text[i] == '\0') {
            text[i] = '\0';
            argv[argc++] = start;
            start = text + i + 1;
        }
    }
    return argc;
}

/* Rebuilds an argv from tg_config_print's "name = value" lines. Redacted secrets are
 * taken from cfg itself (the printout must not carry them). Returns argc, -1 if a line
 * does not have the documented shape. The secret options (key, api-keys) are named here:
 * a new secret option in config.c needs its case below. */
static int args_from_print(char **argv, char *printed, const tg_config_t *cfg, char *key_arg,
                           char *api_arg, size_t cap) {
    int argc = 1;
    argv[0] = "serve";
    for (char *line = printed; *line != '\0' && argc < TG_FUZZ_MAX_ARGS;) {
        char *nl = strchr(line, '\n');
        if (nl == NULL) {
            return -1;
        }
        *nl = '\0';
        if (line[0] == '#') { /* a comment: the --config file's, e.g. "# oidc: none" */
            line = nl + 1;
            continue;
        }
        char *eq = strstr(line, " = ");
        if (eq == NULL || eq == line) {
            return -1;
        }
        *eq = '\0';
        const char *name = line, *value = eq + 3;
        if (strcmp(name, "key") == 0) {
            /* PEM text given inline is a secret, and so is anything that may be key text
             * (tg_config_path_showable); a key file path is not */
            const char *want =
                strstr(cfg->signing_key, "-----BEGIN") != NULL ? "(PEM text, redacted)"
                : cfg->signing_key[0] != '\0' && !tg_config_path_showable(cfg->signing_key)
                    ? "(redacted)"
                    : cfg->signing_key;
            if (strcmp(value, want) != 0) {
                abort();
            }
            (void)snprintf(key_arg, cap, "--key=%s", cfg->signing_key);
            argv[argc++] = key_arg;
        } else if (strcmp(name, "api-keys") == 0) {
            if (cfg->api_keys[0] != '\0' && strcmp(value, "(redacted)") != 0 &&
                strcmp(value, "(PEM text, redacted)") != 0) {
                abort(); /* the API keys secret was printed */
            }
            (void)snprintf(api_arg, cap, "--api-keys=%s", cfg->api_keys);
            argv[argc++] = api_arg;
        } else {
            /* name and value are NUL-terminated: move them into one "--name=value" string */
            size_t nlen = strlen(name), vlen = strlen(value);
            char *arg = malloc(nlen + vlen + 4);
            if (arg == NULL) {
                abort();
            }
            memcpy(arg, "--", 2);
            memcpy(arg + 2, name, nlen);
            arg[2 + nlen] = '=';
            memcpy(arg + 3 + nlen, value, vlen + 1);
            argv[argc++] = arg;
        }
        line = nl + 1;
    }
    return argc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    char *argv[TG_FUZZ_MAX_ARGS], *argv2[TG_FUZZ_MAX_ARGS];
    static tg_config_t cfg, cfg2; /* ~14 KiB each: keep them off the stack */
    tg_config_action_t action, action2;
    tg_diag_t diag;
    if (text == NULL) {
        return 0;
    }
    memcpy(text, data, size);
    text[size] = '\0';
    int argc = split_args(argv, text, size);
    memset(&diag, 0, sizeof diag);
    tg_err_t rc = tg_config_parse(&cfg, &action, argc, argv, &diag);
    if (rc != TG_OK) {
        if (rc != TG_ERR_CONFIG || diag.msg[0] == '\0') {
            abort();
        }
        free(text);
        return 0;
    }
    if (action > TG_CONFIG_CHECK) {
        abort();
    }
    if (action == TG_CONFIG_HELP) {
        free(text); /* --help stops parsing: the rest is not validated */
        return 0;
    }
    /* the cross-field rules hold for every accepted configuration */
    if ((cfg.tls_cert[0] != '\0') != (cfg.tls_key[0] != '\0') ||
        (cfg.decide_port != 0 && cfg.decide_port == cfg.port) || cfg.port < 0 || cfg.port > 65535 ||
        cfg.max_body < 256 ||
        strcmp(tg_config_durability_name(cfg.durability), cfg.durability_name) != 0) {
        abort();
    }

    char *printed = NULL;
    size_t plen = 0;
    FILE *mem = open_memstream(&printed, &plen);
    if (mem == NULL) {
        abort();
    }
    tg_config_print(mem, &cfg);
    if (fclose(mem) != 0 || printed == NULL) {
        abort();
    }
    /* print → parse gives the same configuration. Compared through the printout (every
     * option of the table) plus the secrets and the derived field: a string option given
     * twice leaves stale bytes after the NUL, so the structs need not be memcmp-equal. */
    char *copy = strdup(printed);
    if (copy == NULL) {
        abort();
    }
    static char key_arg[TG_CONFIG_STR_MAX + 16], api_arg[TG_CONFIG_STR_MAX + 16];
    int argc2 = args_from_print(argv2, printed, &cfg, key_arg, api_arg, sizeof key_arg);
    if (argc2 < 0) {
        abort();
    }
    rc = tg_config_parse(&cfg2, &action2, argc2, argv2, &diag);
    char *printed2 = NULL;
    size_t plen2 = 0;
    mem = open_memstream(&printed2, &plen2);
    if (mem == NULL) {
        abort();
    }
    if (rc == TG_OK) {
        tg_config_print(mem, &cfg2);
    }
    if (fclose(mem) != 0 || printed2 == NULL) {
        abort();
    }
    if (rc != TG_OK || action2 != TG_CONFIG_RUN || strcmp(copy, printed2) != 0 ||
        cfg.durability != cfg2.durability || strcmp(cfg.signing_key, cfg2.signing_key) != 0 ||
        strcmp(cfg.api_keys, cfg2.api_keys) != 0) {
        fprintf(stderr, "fuzz_config: the printed configuration parses differently: %s\n%s",
                rc ? diag.msg : "(parsed)", copy);
        abort();
    }
    free(copy);
    free(printed2);
    for (int i = 1; i < argc2; i++) {
        if (argv2[i] != key_arg && argv2[i] != api_arg) {
            free(argv2[i]);
        }
    }
    free(printed);
    free(text);
    return 0;
}
