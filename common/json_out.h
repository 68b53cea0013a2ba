/*
 * common/json_out.h — writing JSON strings as Go's encoding/json writes them (restic's tree
 * blobs, snapshots and --json messages all come out of it), and the UTF-8 decoding rule Go
 * applies. One implementation: the tree encoder (backup/tree.c) and rix_json_quote (rix/tree.h,
 * the rix command's JSON output) both call it.
 */
#ifndef RIX_COMMON_JSON_OUT_H
#define RIX_COMMON_JSON_OUT_H

#include <stddef.h>
#include <stdint.h>

/*
 * One UTF-8 sequence at s[0..n), n >= 1: its rune, *w its length. An invalid byte (a bad lead,
 * a missing or bad continuation, an overlong form, a surrogate, past U+10FFFF) is rune -1 with
 * *w = 1, as Go's utf8.DecodeRune reads it (RuneError, width 1).
 */
int32_t rix__utf8_rune(const uint8_t *s, size_t n, size_t *w);

/* The most bytes rix__json_quote writes for n input bytes: quotes, and 6 per byte (\u00XX). */
#define RIX__JSON_QUOTE_BOUND(n) (6 * (size_t)(n) + 2)

/*
 * s[0..n) as a JSON string, quotes included, with encoding/json's escapes (HTML-safe, its
 * default): \" \\ \n \r \t; other bytes below 0x20 and < > & as \u00XX; U+2028 and U+2029 as
 * \u2028 / \u2029; every byte that is not part of valid UTF-8 as \ufffd (Go's replacement).
 * Writes the first min(length, cap) bytes of it into out (no NUL) and returns its whole length.
 */
size_t rix__json_quote(char *out, size_t cap, const uint8_t *s, size_t n);

#endif
