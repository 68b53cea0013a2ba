/*
 * cli/cmd_init.c — rix init: a new repository.
 */
#include "cli.h"

int cmd_init(int argc, char **argv)
{
	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--repository-version") == 0 && i + 1 < argc)
			g.version = atoi(argv[++i]);
		else if (strncmp(argv[i], "--repository-version=", 21) == 0)
			g.version = atoi(argv[i] + 21);
		else
			return usage();
	}
	if (g.version != 1 && g.version != 2)
		return die("repository version %d: 1 or 2", g.version);
	const char *path = repo_location();
	if (path == NULL || *path == '\0')
		return die("no repository: use -r or set RIX_REPOSITORY");
	const char *shown = repo_path();
	char pw[1024];
	if (get_password(pw, sizeof(pw), 1))
		return 1;
	if (pw[0] == '\0')
		return die("an empty password is not a password");
	rix_backend *b;
	int rc = open_backend(path, 1, &b);
	if (rc != 0) {
		sodium_memzero(pw, sizeof(pw));
		return fail(rc);
	}
	rix_repo_options o = RIX_REPO_OPTIONS_INIT;
	o.repo_version = g.version;
	rix_repo *r;
	rc = rix_repo_init(&r, b, pw, strlen(pw), &o);
	sodium_memzero(pw, sizeof(pw));
	if (rc != 0) {
		rix_backend_free(b);
		return fail(rc);
	}
	char hex[65];
	rix_id_to_hex(hex, &rix_repo_config(r)->id);
	if (g.json) {
		printf("{\"message_type\":\"initialized\",\"id\":\"%s\",\"repository\":", hex);
		put_json_string(shown);
		printf(",\"version\":%d}\n", g.version);
	}
	else if (!g.quiet)
		printf("created rix repository %.10s at %s (version %d)\n", hex, shown, g.version);
	rix_repo_free(r);
	return 0;
}
