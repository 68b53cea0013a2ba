/*
 * rix/error.h — error codes and the per-thread last-error message.
 *
 * Every rix function that can fail returns int: 0 on success or a negative RIX_E* code.
 * The codes sit in a reserved range below -1000 so that a negated errno value (-EIO, -ENOSPC,
 * ...) can pass through unchanged and still be told apart.
 *
 * After a failure, rix_error_last() returns a message for this thread's last error. Recording
 * an out-of-memory error allocates nothing.
 */
#ifndef RIX_ERROR_H
#define RIX_ERROR_H

#include "rix/common.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
	RIX_OK = 0,
	RIX_ENOMEM = -1001,    /* an allocation failed; the object is unchanged and usable */
	RIX_EINVAL = -1002,    /* an argument is out of range (caller's data, not a bug) */
	RIX_ENOTFOUND = -1003, /* the asked-for thing is not there */
	RIX_ECORRUPT = -1004,  /* input data is malformed or fails a check */
	RIX_EAUTH = -1005,     /* authentication failed (MAC mismatch, wrong password) */
	RIX_EIO = -1006,       /* an I/O error without a more precise errno */
	RIX_EEXISTS = -1007,   /* the thing already exists */
	RIX_ELIMIT = -1008,    /* a size limit was reached (e.g. more than 2^32-2 entries) */
	RIX_ENOSPC = -1009,    /* no space left: the disk, a quota or the file size limit is full */
	RIX_ELOCKED = -1010,   /* the repository is locked by another process */
};

/*
 * The message for this thread's last error, or "" if none was recorded. Borrowed: valid until
 * the next rix call on this thread.
 */
RIX_EXPORT const char *rix_error_last(void);

/* The last error code recorded on this thread (0 if none). */
RIX_EXPORT int rix_error_last_code(void);

/* A static description of a code, e.g. "corrupt data" for RIX_ECORRUPT. Never NULL. */
RIX_EXPORT const char *rix_strerror(int code);

/*
 * Records code and a printf-style message for this thread and returns code, so that error
 * paths read `return rix_error_set(RIX_ECORRUPT, "bad hex at %zu", pos);`.
 */
RIX_EXPORT int rix_error_set(int code, const char *fmt, ...)
#if defined(__GNUC__)
	__attribute__((format(printf, 2, 3)))
#endif
	;

/* Clears this thread's last error. */
RIX_EXPORT void rix_error_clear(void);

#ifdef __cplusplus
}
#endif
#endif
