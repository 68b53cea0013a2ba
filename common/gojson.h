/*
 * common/gojson.h — JSON strings as Go's encoding/json writes and reads them (private to librix).
 *
 * restic's files are written by Go, and rix writes the same bytes for the same content (tree
 * blobs, snapshots), so the escapes must be Go's and not a general JSON library's:
 *
 *   writing  \" \\ \n \r \t; other control characters \u00XX; < > & as \u003c \u003e \u0026
 *            (HTML-safe, Go's default); U+2028 U+2029 as \u2028 \u2029; each byte that is not
 *            part of valid UTF-8 as \ufffd; everything else as itself
 *   reading  every JSON escape; a \u surrogate pair is one rune, a lone or broken surrogate
 *            U+FFFD; each byte that is not part of valid UTF-8 U+FFFD: what Go's decoder gives,
 *            so that text read and written again is what restic would write
 *
 * Depends on libc and rix/alloc.h, rix/error.h only.
 */
#ifndef RIX_GOJSON_H
#define RIX_GOJSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * One UTF-8 sequence at s[0..n) (n >= 1): its rune and *w its length; -1 (with *w = 1) when the
 * byte at s starts no valid sequence (overlong forms, surrogates and runes past U+10FFFF are not
 * valid), as Go's utf8.DecodeRune.
 */
int32_t rix__utf8_rune(const uint8_t *s, size_t n, size_t *w);

/* Bytes rix__gojson_string may write for n input bytes (each at most 6, and the quotes). */
#define RIX_GOJSON_STRING_MAX(n) (6 * (n) + 2)

/*
 * s[0..n) as a quoted JSON string with Go's escapes (above): its first min(length, cap) bytes
 * into out (no NUL; room for RIX_GOJSON_STRING_MAX(n) is always enough). @return its whole
 * length (snprintf's contract, without the NUL).
 */
size_t rix__gojson_string(uint8_t *out, size_t cap, const uint8_t *s, size_t n);

/*
 * The text between the quotes of a JSON string, s[0..n) (validated by the scanner), unescaped as
 * Go reads it (above) into out, which has room for 3 * n + 1 bytes (each input byte gives at most
 * three), NUL-terminated. @return its length; *nul: it holds U+0000 (written as a 0 byte).
 */
size_t rix__gojson_unescape(char *out, const char *s, size_t n, bool *nul);

/*
 * The text between the quotes of a JSON string, s[0..n) (already validated by the scanner,
 * common/json_scan.h: escapes well-formed, no raw control characters), unescaped as Go reads it
 * (above) into *out: NUL-terminated, the caller's (rix_free), *len bytes without the NUL.
 * @return 0; 1 when the string holds U+0000 (nothing allocated: C strings cannot hold it, the
 * caller refuses it); RIX_ENOMEM (message set).
 */
int rix__gojson_unquote(char **out, size_t *len, const char *s, size_t n);

#endif
