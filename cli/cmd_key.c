/*
 * cli/cmd_key.c — rix key: list, add, remove, passwd.
 */
#include "cli.h"

int cmd_key(int argc, char **argv)
{
	const char *new_pw_file = NULL;
	int n = 0;
	for (int i = 0; i < argc; i++) { /* --new-password-file FILE, anywhere; the rest in order */
		if (strcmp(argv[i], "--new-password-file") == 0) {
			if (i + 1 >= argc)
				return die("key: --new-password-file needs a file");
			new_pw_file = argv[++i];
		} else if (strncmp(argv[i], "--new-password-file=", 20) == 0) {
			new_pw_file = argv[i] + 20;
		} else {
			argv[n++] = argv[i];
		}
	}
	argc = n;
	if (argc < 1)
		return usage();
	const char *sub = argv[0];
	if (strcmp(sub, "list") && strcmp(sub, "add") && strcmp(sub, "remove") && strcmp(sub, "passwd"))
		return die("key: unknown command %s (list, add, remove, passwd)", sub);
	if ((strcmp(sub, "remove") == 0) != (argc == 2) || argc > 2)
		return usage();
	g.no_lock = 0; /* restic's key commands lock whatever --no-lock says: they write */
	rix_repo *r;
	rix_lock *lock;
	int lrc = open_repo_locked(&r, &lock, strcmp(sub, "remove") == 0 || strcmp(sub, "passwd") == 0);
	if (lrc != 0)
		return lrc;
	int rc = 0;
	if (strcmp(sub, "list") == 0) {
		struct lister l = { 0 };
		if (g.json)
			putchar('[');
		rc = rix_repo_key_list(r, print_name, &l);
		if (g.json)
			puts("]");
		if (!g.json && !g.quiet)
			fprintf(stderr, "(in use: %s)\n", rix_repo_key_name(r));
	} else if (strcmp(sub, "remove") == 0) {
		rc = rix_repo_key_remove(r, argv[1]);
		if (rc == 0 && !g.quiet)
			printf("removed key %s\n", argv[1]);
	} else { /* add, passwd */
		char pw[1024], name[65];
		if (get_new_password(pw, sizeof(pw), new_pw_file)) {
			sodium_memzero(pw, sizeof(pw));
			close_repo(r, lock);
			return 1;
		}
		rc = rix_repo_key_add(name, r, pw, strlen(pw));
		sodium_memzero(pw, sizeof(pw));
		if (rc == 0 && strcmp(sub, "passwd") == 0) {
			char old[65];
			memcpy(old, rix_repo_key_name(r), 65);
			/* The old key goes once the new one is stored; the repository is open with the old. */
			rix_backend *b = rix_repo_backend(r);
			rc = rix_backend_remove(b, RIX_FILE_KEY, old);
		}
		if (rc == 0 && !g.quiet)
			printf("%s key %s\n", strcmp(sub, "add") == 0 ? "saved new" : "changed password: new", name);
	}
	if (rc != 0)
		rc = fail(rc);
	close_repo(r, lock);
	return rc;
}
