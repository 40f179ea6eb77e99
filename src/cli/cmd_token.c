/* cmd_token.c — `trigguard token create|list|revoke`: bearer tokens in a tokens file. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <sodium.h>

#include "cli.h"
#include "trigguard/canon.h"
#include "trigguard/guard.h"
#include "trigguard/io.h"

#define TOKEN_PREFIX "tgt_"
#define TOKEN_RANDOM_BYTES 32 /* 256 bits from randombytes_buf */
#define DIGEST_SHOWN 6        /* bytes of the digest `list` and messages show: 12 hex */
#define PREFIX_MIN 4          /* hex digits a --digest prefix needs at least */

static void token_usage(FILE *out) {
    fprintf(out,
            "usage: trigguard token create --tokens FILE --tenant T [--subject S] [--actor A]...\n"
            "                              [--surface X]... [--role R]\n"
            "       trigguard token list --tokens FILE\n"
            "       trigguard token revoke --tokens FILE (--subject S | --digest PREFIX)\n"
            "\n"
            "Manages the tokens file that `serve --tokens FILE` reads (docs/OPERATIONS.md,\n"
            "\"Tenants and tokens\"). The file holds only SHA-256 digests of tokens.\n"
            "\n"
            "create   makes a new random token (" TOKEN_PREFIX " + 43 base64url chars, 256 bits\n"
            "         from libsodium), adds its entry to FILE and prints the token on stdout,\n"
            "         once: it is not kept anywhere. --actor and --surface may be repeated\n"
            "         (the token may then act only as those actors, on those surfaces);\n"
            "         --role is caller (default), approver, executor or admin. Without\n"
            "         --subject the subject is \"<tenant>:<first 8 hex of the digest>\".\n"
            "         FILE is created (mode 0600) when it does not exist.\n"
            "list     prints subject, tenant, role, the first 12 hex digits of the digest,\n"
            "         actors and surfaces (\"*\" = unbound) of every entry; never a token.\n"
            "revoke   removes the entry with that subject, or the one whose digest starts\n"
            "         with PREFIX (at least %d hex digits; a prefix that matches several\n"
            "         entries is refused).\n"
            "\n"
            "FILE must be a regular file that group and others cannot access (chmod 600),\n"
            "and every change must leave a file `serve` loads. Changes are atomic: a new file\n"
            "is written beside FILE, synced and renamed over it, so a reader sees the old file\n"
            "or the new one, never a part. A running daemon reads FILE when it starts.\n"
            "\n"
            "exit status: 0 done, 1 revoke found no such entry, 2 usage error, an unusable\n"
            "FILE, or a change after which FILE would not load\n",
            PREFIX_MIN);
}

/* The options of all three subcommands; which ones each takes is checked after parsing. */
typedef struct opts {
    const char *tokens;
    const char *tenant;
    const char *subject;
    const char *role;
    const char *digest;
    const char *actors[TG_GUARD_MAX_BINDINGS + 1];
    size_t n_actors;
    const char *surfaces[TG_GUARD_MAX_BINDINGS + 1];
    size_t n_surfaces;
} opts_t;

/* The tokens file as read: its text, parsed, and the table it loads into. */
typedef struct tokfile {
    tg_file_t f;
    json_t *root; /* the array */
    tg_tenants_t *table;
} tokfile_t;

static void tokfile_free(tokfile_t *tf) {
    tg_file_free(&tf->f);
    json_decref(tf->root);
    tg_tenants_destroy(tf->table);
    memset(tf, 0, sizeof *tf);
}

/* Reads path into tf (missing_ok: a missing file is an empty array). The file must be a
 * regular file, not a symbolic link (the rename would replace the link, not its target),
 * without group or other permissions, and load as a tokens file. False after printing why. */
static bool tokfile_read(tokfile_t *tf, const char *path, bool missing_ok) {
    tg_diag_t d = {{0}};
    struct stat st;
    memset(tf, 0, sizeof *tf);
    if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) {
        fprintf(stderr, "trigguard token: %s is a symbolic link; name the file itself\n", path);
        return false;
    }
    tg_err_t rc = tg_read_file(&tf->f, path, TG_GUARD_TOKENS_FILE_MAX, path, TG_READ_SECRET, &d);
    if (rc == TG_ERR_NOT_FOUND && missing_ok) {
        tf->root = json_array();
    } else if (rc != TG_OK) {
        fprintf(stderr, "trigguard token: %s\n", d.msg);
        return false;
    } else if ((tf->f.mode & 077) != 0) {
        fprintf(stderr,
                "trigguard token: refusing tokens file %s: mode %04o lets group or others "
                "access it; run: chmod 600 %s\n",
                path, tf->f.mode & 07777, path);
        tokfile_free(tf);
        return false;
    } else {
        const tg_json_limits_t lim = {TG_GUARD_TOKENS_FILE_MAX, 4, 4096, 16};
        if (tg_json_parse(&tf->root, tf->f.data, tf->f.len, &lim, &d) != TG_OK ||
            !json_is_array(tf->root)) {
            json_decref(tf->root);
            tf->root = NULL;
        }
    }
    if (tg_tenants_create(&tf->table) != TG_OK) {
        fprintf(stderr, "trigguard token: out of memory\n");
        tokfile_free(tf);
        return false;
    }
    if (tf->f.data != NULL) {
        rc = tg_tenants_load_json(tf->table, tf->f.data, tf->f.len, path, &d);
        if (rc != TG_OK || tf->root == NULL) {
            fprintf(stderr, "trigguard token: %s (fix the file before changing it)\n",
                    rc != TG_OK ? d.msg : "not a JSON array");
            tokfile_free(tf);
            return false;
        }
    }
    return true;
}

/* A new content of a tokens file, written and synced beside it but not yet in place. */
typedef struct staged {
    char tmp[4096 + 32];
    char dir[4096];
} staged_t;

/* Writes text to a temporary file in path's directory (mode 0600) and syncs it. False after
 * printing why (nothing is left behind). */
static bool stage(staged_t *st, const char *path, const char *text, size_t len) {
    if (tg_path_parent(st->dir, sizeof st->dir, path) != TG_OK ||
        snprintf(st->tmp, sizeof st->tmp, "%s.tmp.XXXXXX", path) >= (int)sizeof st->tmp) {
        fprintf(stderr, "trigguard token: %s: path too long\n", path);
        return false;
    }
    int fd = mkstemp(st->tmp);
    if (fd < 0) {
        fprintf(stderr, "trigguard token: cannot create a file beside %s: %s\n", path,
                strerror(errno));
        return false;
    }
    bool ok = fchmod(fd, 0600) == 0 && tg_write_all(fd, text, len) == TG_OK && fsync(fd) == 0;
    int err = errno;
    if (close(fd) != 0 && ok) {
        err = errno;
        ok = false;
    }
    if (!ok) {
        fprintf(stderr, "trigguard token: cannot write %s: %s (the file is unchanged)\n", st->tmp,
                strerror(err));
        (void)unlink(st->tmp);
    }
    return ok;
}

/* Drops a staged content: path stays as it was. */
static void unstage(const staged_t *st) { (void)unlink(st->tmp); }

/* Renames the staged content over path and syncs the directory: a reader sees the old file
 * or the new one, never a part of either. False after printing why. */
static bool commit_staged(const staged_t *st, const char *path) {
    if (rename(st->tmp, path) != 0) {
        fprintf(stderr, "trigguard token: cannot replace %s: %s (the file is unchanged)\n", path,
                strerror(errno));
        unstage(st);
        return false;
    }
    int dfd = open(st->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || fsync(dfd) != 0) {
        fprintf(stderr, "trigguard token: %s: replaced, but syncing directory %s failed: %s\n",
                path, st->dir, strerror(errno));
        if (dfd >= 0) {
            (void)close(dfd);
        }
        return false;
    }
    (void)close(dfd);
    return true;
}

/* Serializes root, checks that the result loads as a tokens file (so no edit leaves a file
 * the daemon refuses), and stages it. */
static bool save(staged_t *st, const char *path, json_t *root) {
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (text == NULL) {
        fprintf(stderr, "trigguard token: out of memory\n");
        return false;
    }
    size_t len = strlen(text);
    tg_tenants_t *check = NULL;
    tg_diag_t d = {{0}};
    bool ok = tg_tenants_create(&check) == TG_OK &&
              tg_tenants_load_json(check, text, len, path, &d) == TG_OK;
    if (!ok) {
        fprintf(stderr, "trigguard token: refused, %s would not load: %s\n", path,
                d.msg[0] ? d.msg : "out of memory");
    }
    tg_tenants_destroy(check);
    if (ok) {
        char *full = malloc(len + 2);
        ok = full != NULL;
        if (ok) {
            memcpy(full, text, len);
            full[len] = '\n';
            full[len + 1] = '\0';
            ok = stage(st, path, full, len + 1);
            sodium_memzero(full, len + 1);
            free(full);
        }
    }
    sodium_memzero(text, len);
    free(text);
    return ok;
}

/* An exclusive lock on the directory of path for the whole read-change-write, so that two
 * `token` commands on one file do not lose each other's change. -1 after printing why. */
static int lock_dir(const char *path) {
    char dir[4096];
    if (tg_path_parent(dir, sizeof dir, path) != TG_OK) {
        fprintf(stderr, "trigguard token: %s: path too long\n", path);
        return -1;
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || flock(fd, LOCK_EX) != 0) {
        fprintf(stderr, "trigguard token: cannot lock directory %s: %s\n", dir, strerror(errno));
        if (fd >= 0) {
            (void)close(fd);
        }
        return -1;
    }
    return fd;
}

static json_t *string_list(const char *const *v, size_t n) {
    json_t *a = json_array();
    for (size_t i = 0; a != NULL && i < n; i++) {
        if (json_array_append_new(a, json_string(v[i])) != 0) {
            json_decref(a);
            a = NULL;
        }
    }
    return a;
}

static int cmd_create(const opts_t *o) {
    tg_role_t role = TG_ROLE_CALLER;
    if (o->tenant == NULL) {
        fprintf(stderr, "trigguard token create: --tenant T is required\n");
        return TG_EXIT_USAGE;
    }
    if (o->role != NULL && !tg_role_parse(&role, o->role, strlen(o->role))) {
        fprintf(stderr, "trigguard token create: --role must be caller, approver, executor or "
                        "admin\n");
        return TG_EXIT_USAGE;
    }
    if (o->digest != NULL) {
        fprintf(stderr, "trigguard token create: --digest belongs to revoke\n");
        return TG_EXIT_USAGE;
    }
    uint8_t raw[TOKEN_RANDOM_BYTES];
    char token[sizeof TOKEN_PREFIX + 64];
    uint8_t digest[32];
    char hex[65];
    randombytes_buf(raw, sizeof raw);
    memcpy(token, TOKEN_PREFIX, sizeof TOKEN_PREFIX - 1);
    sodium_bin2base64(token + sizeof TOKEN_PREFIX - 1, sizeof token - (sizeof TOKEN_PREFIX - 1),
                      raw, sizeof raw, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
    sodium_memzero(raw, sizeof raw);
    tg_sha256(digest, token, strlen(token));
    tg_hex(hex, digest, 32);

    int status = TG_EXIT_USAGE;
    tokfile_t tf;
    int lock = lock_dir(o->tokens);
    if (lock < 0) {
        goto wipe;
    }
    if (!tokfile_read(&tf, o->tokens, true)) {
        goto unlock;
    }
    json_t *e = json_object();
    bool ok = e != NULL && json_object_set_new(e, "tenant", json_string(o->tenant)) == 0 &&
              json_object_set_new(e, "token_sha256", json_string(hex)) == 0;
    if (ok && o->subject != NULL) {
        ok = json_object_set_new(e, "subject", json_string(o->subject)) == 0;
    }
    if (ok && o->n_actors > 0) {
        ok = json_object_set_new(e, "actors", string_list(o->actors, o->n_actors)) == 0;
    }
    if (ok && o->n_surfaces > 0) {
        ok = json_object_set_new(e, "surfaces", string_list(o->surfaces, o->n_surfaces)) == 0;
    }
    if (ok && o->role != NULL) {
        ok = json_object_set_new(e, "role", json_string(tg_role_name(role))) == 0;
    }
    /* json_string is NULL for text that is not UTF-8, and setting NULL fails: one check */
    if (!ok || json_array_append_new(tf.root, e) != 0) {
        fprintf(stderr, "trigguard token create: an argument is not UTF-8 text, or out of "
                        "memory\n");
        if (!ok) {
            json_decref(e);
        }
        goto done;
    }
    staged_t st;
    if (!save(&st, o->tokens, tf.root)) {
        goto done;
    }
    char subject[TG_GUARD_SUBJECT_MAX + 1];
    if (o->subject != NULL) {
        (void)snprintf(subject, sizeof subject, "%s", o->subject);
    } else {
        (void)snprintf(subject, sizeof subject, "%s:%.8s", o->tenant, hex); /* guard.h */
    }
    fprintf(stderr,
            "trigguard token: a new token of tenant %s (role %s, subject %s, digest %.12s) for %s; "
            "reload the daemon (SIGHUP or POST /v1/admin/reload) to use it. The token is printed "
            "once, below\n",
            o->tenant, tg_role_name(role), subject, hex, o->tokens);
    /* The token goes out before the entry goes in: if it cannot be shown, the file keeps
     * no entry for a token nobody has. */
    errno = 0;
    if (printf("%s\n", token) < 0 || fflush(stdout) != 0) {
        fprintf(stderr,
                "trigguard token create: error writing standard output%s%s (the token); "
                "%s is unchanged\n",
                errno ? ": " : "", errno ? strerror(errno) : "", o->tokens);
        unstage(&st);
        clearerr(stdout);
        goto done;
    }
    if (!commit_staged(&st, o->tokens)) {
        fprintf(stderr, "trigguard token create: the token above is not in %s: discard it\n",
                o->tokens);
        goto done;
    }
    status = TG_EXIT_OK;
done:
    tokfile_free(&tf);
unlock:
    (void)close(lock);
wipe:
    sodium_memzero(token, sizeof token);
    return status;
}

static void print_list(const tg_guard_str_t *l, size_t n) {
    if (n == 0) {
        fputs("*", stdout);
    }
    for (size_t i = 0; i < n; i++) {
        printf("%s%s", i ? "," : "", l[i].ptr);
    }
}

static int cmd_list(const opts_t *o) {
    if (o->tenant || o->subject || o->role || o->digest || o->n_actors || o->n_surfaces) {
        fprintf(stderr, "trigguard token list: takes --tokens FILE only\n");
        return TG_EXIT_USAGE;
    }
    tokfile_t tf;
    if (!tokfile_read(&tf, o->tokens, false)) {
        return TG_EXIT_USAGE;
    }
    printf("subject\ttenant\trole\tdigest\tactors\tsurfaces\n");
    for (size_t i = 0; i < tg_tenants_token_count(tf.table); i++) {
        const tg_principal_t *p = tg_tenants_principal(tf.table, i);
        char px[2 * DIGEST_SHOWN + 1];
        (void)tg_tenants_digest_hex(tf.table, i, px, DIGEST_SHOWN);
        printf("%s\t%s\t%s\t%s\t", p->subject.ptr, tg_tenants_name(tf.table, p->tenant, NULL),
               tg_role_name(p->role), px);
        print_list(p->actors, p->actors_count);
        putchar('\t');
        print_list(p->surfaces, p->surfaces_count);
        putchar('\n');
    }
    tokfile_free(&tf);
    return TG_EXIT_OK;
}

static bool hex_prefix_ok(const char *s) {
    size_t n = strlen(s);
    if (n < PREFIX_MIN || n > 64) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) {
            return false;
        }
    }
    return true;
}

/* Whether principal i is the one revoke names (--subject exactly, or a --digest prefix in
 * either case). */
static bool revoke_matches(const tg_tenants_t *t, size_t i, const opts_t *o) {
    if (o->subject != NULL) {
        return strcmp(tg_tenants_principal(t, i)->subject.ptr, o->subject) == 0;
    }
    char full[65];
    return tg_tenants_digest_hex(t, i, full, 32) &&
           strncasecmp(full, o->digest, strlen(o->digest)) == 0;
}

static int cmd_revoke(const opts_t *o) {
    if ((o->subject == NULL) == (o->digest == NULL)) {
        fprintf(stderr, "trigguard token revoke: give one of --subject S or --digest PREFIX\n");
        return TG_EXIT_USAGE;
    }
    if (o->tenant || o->role || o->n_actors || o->n_surfaces) {
        fprintf(stderr, "trigguard token revoke: takes --tokens and --subject or --digest\n");
        return TG_EXIT_USAGE;
    }
    if (o->digest != NULL && !hex_prefix_ok(o->digest)) {
        fprintf(stderr, "trigguard token revoke: --digest takes %d..64 hex digits\n", PREFIX_MIN);
        return TG_EXIT_USAGE;
    }
    int status = TG_EXIT_USAGE;
    int lock = lock_dir(o->tokens);
    if (lock < 0) {
        return status;
    }
    tokfile_t tf;
    if (!tokfile_read(&tf, o->tokens, false)) {
        (void)close(lock);
        return status;
    }
    size_t n = tg_tenants_token_count(tf.table);
    size_t hit = n;
    size_t hits = 0;
    for (size_t pass = 0; pass < 2; pass++) {
        /* pass 0 counts the matches; pass 1, only for an ambiguous prefix, names them */
        for (size_t i = 0; i < n; i++) {
            if (!revoke_matches(tf.table, i, o)) {
                continue;
            }
            if (pass == 0) {
                hit = hits == 0 ? i : hit;
                hits++;
            } else {
                fprintf(stderr, "  %s\n", tg_tenants_principal(tf.table, i)->subject.ptr);
            }
        }
        if (pass == 0 && hits > 1) {
            fprintf(stderr,
                    "trigguard token revoke: digest prefix %s matches %zu entries; give more "
                    "digits or --subject. They are:\n",
                    o->digest, hits);
        } else {
            break;
        }
    }
    if (hits > 1) {
        goto done;
    }
    if (hits == 0) {
        fprintf(stderr, "trigguard token revoke: no entry in %s with %s %s\n", o->tokens,
                o->subject != NULL ? "subject" : "a digest starting with",
                o->subject != NULL ? o->subject : o->digest);
        status = TG_EXIT_FAIL;
        goto done;
    }
    const tg_principal_t *p = tg_tenants_principal(tf.table, hit);
    char px[2 * DIGEST_SHOWN + 1];
    (void)tg_tenants_digest_hex(tf.table, hit, px, DIGEST_SHOWN);
    char subject[TG_GUARD_SUBJECT_MAX + 1];
    char tenant[TG_GUARD_TENANT_NAME_MAX + 1];
    (void)snprintf(subject, sizeof subject, "%s", p->subject.ptr);
    (void)snprintf(tenant, sizeof tenant, "%s", tg_tenants_name(tf.table, p->tenant, NULL));
    /* Entry i of the array is principal i: the file is the table's only source. */
    staged_t st;
    if (json_array_remove(tf.root, hit) != 0 || !save(&st, o->tokens, tf.root) ||
        !commit_staged(&st, o->tokens)) {
        goto done;
    }
    printf("revoked %s (tenant %s, digest %s) from %s; reload the daemon (SIGHUP or POST "
           "/v1/admin/reload) to apply it\n",
           subject, tenant, px, o->tokens);
    status = TG_EXIT_OK;
done:
    tokfile_free(&tf);
    (void)close(lock);
    return status;
}

int tg_cmd_token(int argc, char **argv) {
    opts_t o;
    memset(&o, 0, sizeof o);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            token_usage(stdout);
            return TG_EXIT_OK;
        }
    }
    if (argc < 2) {
        token_usage(stderr);
        return TG_EXIT_USAGE;
    }
    const char *sub = argv[1];
    if (strcmp(sub, "create") != 0 && strcmp(sub, "list") != 0 && strcmp(sub, "revoke") != 0) {
        fprintf(stderr, "trigguard token: unknown subcommand '%s'\n\n", sub);
        token_usage(stderr);
        return TG_EXIT_USAGE;
    }
    for (int i = 2; i < argc; i += 2) { /* every option takes a value */
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        const char **one = strcmp(a, "--tokens") == 0    ? &o.tokens
                           : strcmp(a, "--tenant") == 0  ? &o.tenant
                           : strcmp(a, "--subject") == 0 ? &o.subject
                           : strcmp(a, "--role") == 0    ? &o.role
                           : strcmp(a, "--digest") == 0  ? &o.digest
                                                         : NULL;
        bool is_actor = strcmp(a, "--actor") == 0;
        bool is_surface = strcmp(a, "--surface") == 0;
        if ((one == NULL && !is_actor && !is_surface) || v == NULL) {
            fprintf(stderr, "trigguard token %s: unexpected argument '%s'%s\n\n", sub, a,
                    v == NULL && (one != NULL || is_actor || is_surface) ? " (needs a value)" : "");
            token_usage(stderr);
            return TG_EXIT_USAGE;
        }
        if (one != NULL && *one != NULL) {
            fprintf(stderr, "trigguard token %s: %s given twice\n", sub, a);
            return TG_EXIT_USAGE;
        }
        if ((is_actor && o.n_actors == TG_GUARD_MAX_BINDINGS) ||
            (is_surface && o.n_surfaces == TG_GUARD_MAX_BINDINGS)) {
            fprintf(stderr, "trigguard token %s: at most %d %s\n", sub, TG_GUARD_MAX_BINDINGS, a);
            return TG_EXIT_USAGE;
        }
        if (one != NULL) {
            *one = v;
        } else if (is_actor) {
            o.actors[o.n_actors++] = v;
        } else {
            o.surfaces[o.n_surfaces++] = v;
        }
    }
    if (o.tokens == NULL) {
        fprintf(stderr, "trigguard token %s: --tokens FILE is required\n", sub);
        return TG_EXIT_USAGE;
    }
    if (sodium_init() < 0) {
        fprintf(stderr, "trigguard token: libsodium cannot initialize\n");
        return TG_EXIT_USAGE;
    }
    return strcmp(sub, "create") == 0 ? cmd_create(&o)
           : strcmp(sub, "list") == 0 ? cmd_list(&o)
                                      : cmd_revoke(&o);
}
