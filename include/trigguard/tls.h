/* tls.h — the daemon's TLS certificate chain and private key: loaded from the --tls-cert and
 * --tls-key files, handed to GnuTLS at every handshake, and replaced whole by a reload.
 *
 * Why per handshake. libmicrohttpd 0.9.75 reads MHD_OPTION_HTTPS_MEM_CERT/KEY once, when it
 * starts, and has no way to replace them in a running daemon. What it offers instead is
 * MHD_OPTION_HTTPS_CERT_CALLBACK: a GnuTLS gnutls_certificate_retrieve_function2 called at
 * each handshake, which returns the chain and key to present. The listener's callback
 * (src/http/server.c) asks this module for the current pair (tg_tls_select).
 *
 * A pair is a "generation": the chain (as gnutls_pcert_st) and the key (gnutls_privkey_t)
 * loaded from one version of the files. The current generation lives in a tg_swap_t
 * (swap.h), so a reload loads and checks a new one aside and exchanges it in atomically: a
 * handshake gets the old pair or the new one, never half of each.
 *
 * Lifetime. GnuTLS does not copy or free what the retrieve callback returns
 * (gnutls_certificate_set_retrieve_function2: the values "will not be released or modified
 * by gnutls"), and it keeps the pointers in the session as its selected certificate until
 * gnutls_deinit: the key signs during the handshake, and the chain stays the session's
 * "own certificate" (gnutls_certificate_get_ours) for the session's life. So a generation
 * must outlive every session that selected it, not just the handshake. Each generation is
 * reference counted: the swap holds one reference while it is current, and every
 * connection that selected it holds one (taken in the callback, under a swap reference so
 * it cannot be taken on freed memory) until libmicrohttpd reports the connection closed.
 * A retired generation is freed by whoever drops its last reference: the reload if no
 * connection uses it, else the close of the last connection that does. Connections that
 * were open at a reload finish on the pair they started with; new handshakes get the new
 * one. Nothing is kept beyond that, and nothing is freed while a session can use it.
 *
 * Thread safety: tg_tls_select and tg_tls_unhold from any thread (event threads);
 * tg_tls_reload from one control thread at a time (serialised inside by the swap);
 * tg_tls_create and tg_tls_destroy as noted.
 */
#ifndef TRIGGUARD_TLS_H
#define TRIGGUARD_TLS_H

#include <stddef.h>

#include <gnutls/abstract.h>

#include "trigguard/err.h"

/* The largest certificate or key file read: a chain of a few certificates is a few KiB. */
#define TG_TLS_FILE_MAX ((size_t)1024 * 1024)
/* The most certificates in one chain file (the server's and its intermediates). */
#define TG_TLS_CHAIN_MAX 16

typedef struct tg_tls tg_tls_t;
typedef struct tg_tls_gen tg_tls_gen_t; /* one loaded pair (opaque) */

/* Loads the chain at cert_path (PEM, the server certificate first, then its intermediates in
 * any order, at most TG_TLS_CHAIN_MAX in all) and the private key at key_path (PEM:
 * PKCS#8 or the traditional RSA/EC forms, unencrypted) and checks that the key is the one
 * the first certificate certifies. The key file's bytes are wiped once GnuTLS has them.
 * Errors: TG_ERR_NOT_FOUND (a file is missing), TG_ERR_IO (cannot read, not a regular
 * file), TG_ERR_LIMIT (a file over TG_TLS_FILE_MAX, a chain over TG_TLS_CHAIN_MAX),
 * TG_ERR_CONFIG (no certificate could be parsed; the key does not match the first
 * certificate; a path is empty), TG_ERR_KEY_FORMAT (no private key could be parsed),
 * TG_ERR_NOMEM, TG_ERR_INTERNAL; diag names the file, never its content. */
tg_err_t tg_tls_create(tg_tls_t **out, const char *cert_path, const char *key_path,
                       tg_diag_t *diag) TG_MUST_USE;

/* Loads and checks a new pair as tg_tls_create does and makes it current: handshakes from
 * now on present it; connections already open keep the one they have. On any error the
 * current pair stays and keeps serving. Blocks only for the nanoseconds a handshake holds
 * the swap. Errors: as tg_tls_create. */
tg_err_t tg_tls_reload(tg_tls_t *t, const char *cert_path, const char *key_path,
                       tg_diag_t *diag) TG_MUST_USE;

/* Drops the current pair and frees the store. A generation still held by a connection
 * (tg_tls_select without tg_tls_unhold) stays allocated until that tg_tls_unhold; call it
 * once no handshake can start any more (the listeners are stopped). NULL-safe. */
void tg_tls_destroy(tg_tls_t *t);

/* For the retrieve callback: references the current generation, fills in the chain, its
 * length and the key for GnuTLS, and stores the generation in *held, unholding the one
 * *held had (a second handshake on one connection). Returns 0, or -1 (no handshake) when t
 * or held is NULL. Never blocks. */
int tg_tls_select(tg_tls_t *t, tg_tls_gen_t **held, gnutls_pcert_st **pcert,
                  unsigned int *pcert_length, gnutls_privkey_t *key);

/* Drops the reference *held holds (from tg_tls_select) and sets *held to NULL; the
 * generation is freed if it was retired and this was its last user. NULL-safe. */
void tg_tls_unhold(tg_tls_gen_t **held);

/* For tests: how many generations are allocated in this process right now (current ones
 * and retired ones still held by a connection). */
unsigned tg_tls_live_generations(void);

#endif /* TRIGGUARD_TLS_H */
