/*
 * common/error.c — per-thread last error.
 *
 * The message lives in a fixed thread-local buffer, so recording an error (out-of-memory
 * included) never allocates.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "rix/error.h"

static _Thread_local int last_code;
static _Thread_local char last_msg[512];

const char *rix_strerror(int code)
{
	switch (code) {
	case RIX_OK: return "success";
	case RIX_ENOMEM: return "out of memory";
	case RIX_EINVAL: return "invalid argument";
	case RIX_ENOTFOUND: return "not found";
	case RIX_ECORRUPT: return "corrupt data";
	case RIX_EAUTH: return "authentication failed";
	case RIX_EIO: return "input/output error";
	case RIX_EEXISTS: return "already exists";
	case RIX_ELIMIT: return "size limit reached";
	case RIX_ENOSPC: return "no space left";
	case RIX_ELOCKED: return "repository locked";
	default:
		if (code < 0 && code > -1000)
			return strerror(-code);
		return "unknown error";
	}
}

int rix_error_set(int code, const char *fmt, ...)
{
	last_code = code;
	if (fmt == NULL) {
		snprintf(last_msg, sizeof(last_msg), "%s", rix_strerror(code));
		return code;
	}
	/* Formatted aside, then copied: a message made from rix_error_last() itself (its "%s")
	 * would otherwise be read while it is overwritten. */
	char m[sizeof(last_msg)];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(m, sizeof(m), fmt, ap);
	va_end(ap);
	memcpy(last_msg, m, strlen(m) + 1);
	return code;
}

const char *rix_error_last(void)
{
	return last_msg;
}

int rix_error_last_code(void)
{
	return last_code;
}

void rix_error_clear(void)
{
	last_code = 0;
	last_msg[0] = '\0';
}
