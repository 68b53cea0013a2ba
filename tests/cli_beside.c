/*
 * tests/cli_beside.c — see cli_beside.h.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "cli_beside.h"
#include "testutil.h"

char work[256], repo[400], src[400];

void beside_setup(const char *prefix)
{
	rix_test_mkdtemp(work, sizeof(work), prefix);
	snprintf(repo, sizeof(repo), "%s/repo", work);
	snprintf(src, sizeof(src), "%s/src", work);
}

int beside_teardown(void **state)
{
	(void)state;
	rix_test_rmtree(work);
	return 0;
}

static int vrix(const char *env, char **out, char **err, const char *fmt, va_list ap)
{
	char args[4096], cmd[4500], errfile[500], redir[520];
	vsnprintf(args, sizeof(args), fmt, ap);
	snprintf(errfile, sizeof(errfile), "%s/stderr", work);
	snprintf(cmd, sizeof(cmd), "%s '%s'", env, RIX_CLI_PATH);
	snprintf(redir, sizeof(redir), " 2>'%s'", errfile);
	int rc = rix_test_tool(out, NULL, NULL, cmd, repo, redir, "%s", args);
	if (err != NULL) {
		size_t n;
		*err = rix_test_read_file(errfile, &n);
		if (*err == NULL)
			*err = strdup("");
	}
	return rc;
}

int beside_rix(const char *env, char **out, char **err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int rc = vrix(env, out, err, fmt, ap);
	va_end(ap);
	return rc;
}

void beside_rix_says(const char *env, int code, const char *want, const char *fmt, ...)
{
	char *err;
	va_list ap;
	va_start(ap, fmt);
	int rc = vrix(env, NULL, &err, fmt, ap);
	va_end(ap);
	if (rc != code || (want != NULL && strstr(err, want) == NULL))
		fail_msg("rix %s: exit %d (want %d), said \"%s\" (want \"%s\")", fmt, rc, code, err, want != NULL ? want : "");
	free(err);
}
