/*
 * tests/test_backup_bad.c — `rix backup` (the command, as a user runs it) on bad input, the real
 * restic 0.14 beside it as the oracle:
 *   test_vanish_and_swap     files that vanish or change type between the directory listing and
 *                            their open (a FIFO, a symlink, a directory in their place), a file
 *                            and a directory gone before their lstat: warned by name, left out,
 *                            exit 3; the rest restores
 *   test_grow_and_shrink     files that grow or shrink while they are read: warned by name, the
 *                            snapshot holds exactly the bytes read (restic check --read-data,
 *                            restore), exit 0; the next backup reads them again
 *   test_unreadable          a file and directories the user may not read (as uid 65534 when
 *                            run as root): warned, left out, exit 3, the same root tree as
 *                            restic's for the same tree; an unreadable "." fails (exit 1)
 *   test_missing_path        a path that does not exist: exit 1, one line, as restic 0.14; with
 *                            others beside it: warned and left out of the snapshot's paths
 *   test_wrong_password_and_locked  a wrong password, a repository restic holds locked
 *                            exclusively: restic's messages, rix's exit codes (12, 11); nothing
 *                            written; the backup runs once restic lets go
 *   test_disk_full           the repository on a 20 MiB tmpfs the backup fills: exit 1, "No space
 *                            left", nothing committed lost, no lock or temporary file left; with
 *                            room again the backup completes
 *   test_disk_full_every_write  the library with RIX_ENOSPC at each write of a backup in turn
 *                            (the fault backend): no snapshot, a clean check, the next one works
 *   test_special_files       device nodes, a sparse file, xattrs, hard links, symlinks, a FIFO,
 *                            set-id bits, owners: restic's tree, restored by restic as they were
 *
 * Making an entry vanish at the right moment: fanotify permission events (root, as the tests run
 * in CI). The backup is run with one reading thread: the open of a first file is held, so the
 * files queued after it are listed (lstat) but not opened; the walker's open of the directory
 * that sorts after them says they have all been listed; then they are removed or replaced, and
 * both opens let go. Growing and shrinking happen at a file's second read(2), held the same
 * way. Without fanotify (not root, a kernel without permission events) these tests are skipped,
 * saying so; so are the tmpfs, the device nodes and the xattrs where this machine cannot make
 * them.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ftw.h>
#include <sys/fanotify.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include <jansson.h>

#include "rix/rix.h"
#include "faultbackend.h"
#include "repo_fixture.h"
#include "testutil.h"

/* ---- running the tools ---------------------------------------------------------------------- */

/* `rix <args>` run from dir (PW; at most a minute: a hang fails as 124), stdout+stderr into *out. */
#define rix_in(out, dir, ...)                                                                              \
	rix_test_tool(out, NULL, dir, "RIX_PASSWORD='" PW "' RESTIC_PASSWORD= timeout 60 '" RIX_CLI_PATH "'", NULL, " 2>&1", __VA_ARGS__)

/* `restic <args>` (PW), stdout+stderr into *out (NULL: printed on failure). */
#define restic(out, ...) rix_test_tool(out, NULL, NULL, "RESTIC_PASSWORD='" PW "' restic --no-cache", NULL, " 2>&1", __VA_ARGS__)

/* The latest snapshot's JSON (restic snapshots --json), a new reference. */
static json_t *latest_snapshot(const char *repo)
{
	char *s;
	assert_int_equal(restic(&s, "-q -r '%s' snapshots --json --latest 1", repo), 0);
	json_t *j = json_loads(s, 0, NULL);
	free(s);
	assert_true(json_is_array(j));
	json_t *last = json_array_size(j) > 0 ? json_incref(json_array_get(j, json_array_size(j) - 1)) : NULL;
	json_decref(j);
	return last;
}

static size_t count_snapshots(const char *repo)
{
	char dir[8192], ids[64][65];
	snprintf(dir, sizeof(dir), "%s/snapshots", repo);
	return rix_test_list_ids(dir, ids, 64);
}

/* Whether out names path with a message holding what (a line "warning: ...path...what..." or
 * restic's "error: ...path...what..."). */
static int warned(const char *out, const char *path, const char *what)
{
	for (const char *l = out; l != NULL && *l != '\0';) {
		const char *e = strchr(l, '\n');
		size_t n = e != NULL ? (size_t)(e - l) : strlen(l);
		char line[4096];
		snprintf(line, sizeof(line), "%.*s", (int)(n < sizeof(line) ? n : sizeof(line) - 1), l);
		if ((strncmp(line, "warning", 7) == 0 || strncmp(line, "error: ", 7) == 0) && strstr(line, path) != NULL &&
		    strstr(line, what) != NULL)
			return 1;
		l = e != NULL ? e + 1 : NULL;
	}
	return 0;
}

static uint8_t *random_bytes(size_t n, uint64_t seed)
{
	uint8_t *b = malloc(n ? n : 1);
	assert_non_null(b);
	rix_test_fill_random(b, n, &seed);
	return b;
}

/* path's bytes equal want[0..n). */
static void same_bytes(const char *path, const uint8_t *want, size_t n)
{
	size_t got_n;
	uint8_t *got = rix_test_read_file(path, &got_n);
	if (got == NULL)
		fail_msg("%s: not restored", path);
	if (got_n != n || memcmp(got, want, n) != 0)
		fail_msg("%s: %zu bytes restored, want %zu (or other bytes)", path, got_n, n);
	free(got);
}

static int exists(const char *dir, const char *name)
{
	char p[8192];
	struct stat st;
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return lstat(p, &st) == 0;
}

/* ---- fanotify: holding opens and reads --------------------------------------------------------- */

#define MAX_HELD 16

struct fan {
	int fd;
	int stop[2]; /* a pipe: the listener ends when it becomes readable */
	pthread_t th;
	/* what the events are about (inodes) */
	ino_t hold, sync, grow, shrink;
	void (*at_sync)(struct fan *f); /* called once, at the sync open, before the held ones go */
	const char *dir;
	int held[MAX_HELD], nheld;
	int synced; /* at_sync has run */
	int grow_reads, shrink_reads;
	size_t grow_add, shrink_to; /* what the second read of grow / shrink does */
	int failed; /* something the listener could not do (a message on stderr) */
};

static void allow(struct fan *f, int efd)
{
	struct fanotify_response r = { .fd = efd, .response = FAN_ALLOW };
	if (write(f->fd, &r, sizeof(r)) != (ssize_t)sizeof(r)) {
		fprintf(stderr, "fanotify response: %s\n", strerror(errno));
		f->failed = 1;
	}
	close(efd);
}

static void release_held(struct fan *f)
{
	for (int i = 0; i < f->nheld; i++)
		allow(f, f->held[i]);
	f->nheld = 0;
}

/* Appends add bytes to path, or truncates it to to (add 0). */
static void change_file(struct fan *f, const char *name, size_t add, size_t to)
{
	char p[4300];
	snprintf(p, sizeof(p), "%s/%s", f->dir, name);
	int fd = open(p, O_WRONLY | O_APPEND);
	int ok = fd >= 0;
	if (ok && add > 0) {
		uint8_t *b = random_bytes(add, 4242);
		ok = write(fd, b, add) == (ssize_t)add;
		free(b);
	} else if (ok) {
		ok = ftruncate(fd, (off_t)to) == 0;
	}
	if (fd >= 0)
		close(fd);
	if (!ok) {
		fprintf(stderr, "changing %s: %s\n", p, strerror(errno));
		f->failed = 1;
	}
}

static void *listener(void *arg)
{
	struct fan *f = arg;
	char buf[8192] __attribute__((aligned(__alignof__(struct fanotify_event_metadata))));
	time_t started = time(NULL);
	for (;;) {
		struct pollfd p[2] = { { f->fd, POLLIN, 0 }, { f->stop[0], POLLIN, 0 } };
		int n = poll(p, 2, 200);
		if (n < 0 && errno == EINTR)
			continue;
		if (p[1].revents != 0)
			break;
		/* A held open that no sync came to release (a walker that changed its order): let it go
		 * after 20 s rather than hang the backup; the test then fails (synced is 0). */
		if (f->nheld > 0 && !f->synced && time(NULL) - started > 20) {
			fprintf(stderr, "fanotify: the sync open never came; releasing the held ones\n");
			release_held(f);
			f->failed = 1;
		}
		if (n <= 0 || !(p[0].revents & POLLIN))
			continue;
		ssize_t len = read(f->fd, buf, sizeof(buf));
		if (len <= 0)
			continue;
		const struct fanotify_event_metadata *m = (const struct fanotify_event_metadata *)buf;
		for (; FAN_EVENT_OK(m, len); m = FAN_EVENT_NEXT(m, len)) {
			if (m->fd < 0)
				continue;
			struct stat st;
			ino_t ino = fstat(m->fd, &st) == 0 ? st.st_ino : 0;
			if (ino == f->hold && (m->mask & FAN_OPEN_PERM) && !f->synced && f->nheld < MAX_HELD) {
				f->held[f->nheld++] = m->fd; /* answered at the sync */
				continue;
			}
			if (ino == f->sync && (m->mask & FAN_OPEN_PERM) && !f->synced) {
				if (f->at_sync != NULL)
					f->at_sync(f);
				f->synced = 1;
				allow(f, m->fd);
				release_held(f);
				continue;
			}
			if (ino == f->grow && (m->mask & FAN_ACCESS_PERM) && ++f->grow_reads == 2)
				change_file(f, "grow", f->grow_add, 0);
			if (ino == f->shrink && (m->mask & FAN_ACCESS_PERM) && ++f->shrink_reads == 2)
				change_file(f, "shrink", 0, f->shrink_to);
			allow(f, m->fd);
		}
	}
	release_held(f);
	return NULL;
}

static ino_t inode_of(const char *dir, const char *name)
{
	char p[4300];
	struct stat st;
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	assert_int_equal(lstat(p, &st), 0);
	return st.st_ino;
}

/* fanotify for f (dir: the source); 0, or -1 when this machine has none (then skip). */
static int fan_start(struct fan *f, const char *dir)
{
	f->dir = dir;
	f->fd = fanotify_init(FAN_CLASS_CONTENT | FAN_CLOEXEC, O_RDONLY);
	if (f->fd < 0) {
		fprintf(stderr, "(fanotify_init: %s: the vanishing and changing files are not tested here)\n", strerror(errno));
		return -1;
	}
	struct {
		ino_t ino;
		uint64_t mask;
		const char *name;
	} marks[] = { { f->hold, FAN_OPEN_PERM, "0block" },
		      { f->sync, FAN_OPEN_PERM | FAN_ONDIR, "b_dir" },
		      { f->grow, FAN_ACCESS_PERM, "grow" },
		      { f->shrink, FAN_ACCESS_PERM, "shrink" } };
	for (size_t i = 0; i < sizeof(marks) / sizeof(marks[0]); i++) {
		if (marks[i].ino == 0)
			continue;
		char p[4300];
		snprintf(p, sizeof(p), "%s/%s", dir, marks[i].name);
		if (fanotify_mark(f->fd, FAN_MARK_ADD, marks[i].mask, AT_FDCWD, p) != 0) {
			fprintf(stderr, "(fanotify_mark: %s: the vanishing and changing files are not tested here)\n",
				strerror(errno));
			close(f->fd);
			return -1;
		}
	}
	assert_int_equal(pipe(f->stop), 0);
	assert_int_equal(pthread_create(&f->th, NULL, listener, f), 0);
	return 0;
}

static void fan_stop(struct fan *f)
{
	assert_int_equal(write(f->stop[1], "x", 1), 1);
	pthread_join(f->th, NULL);
	close(f->stop[0]);
	close(f->stop[1]);
	close(f->fd);
}

/* ---- the tests ------------------------------------------------------------------------------ */

/* A work folder with src/ and a repository (PW) in repo/. */
struct fixture {
	char *work;
	char src[4200], repo[4200], out[4200];
};

static void fixture_new(struct fixture *x, const char *prefix)
{
	x->work = rix_test_new_dir(prefix);
	snprintf(x->src, sizeof(x->src), "%s/src", x->work);
	snprintf(x->repo, sizeof(x->repo), "%s/repo", x->work);
	snprintf(x->out, sizeof(x->out), "%s/out", x->work);
	assert_int_equal(mkdir(x->src, 0755), 0);
	assert_int_equal(mkdir(x->repo, 0700), 0);
	rix_repo_free(init_repo(x->repo, 2));
}

/*
 * At the sync: a1_gone removed; a2_fifo a FIFO, a3_link a symlink, a4_dir a directory now (all
 * listed and lstat'ed, not opened); c_gone and c_dir_gone, listed but not lstat'ed yet, removed.
 */
static void swap_files(struct fan *f)
{
	char p[4300];
	snprintf(p, sizeof(p), "%s/c_gone", f->dir);
	if (unlink(p) != 0)
		f->failed = 1;
	snprintf(p, sizeof(p), "%s/c_dir_gone/f", f->dir);
	if (unlink(p) != 0)
		f->failed = 1;
	snprintf(p, sizeof(p), "%s/c_dir_gone", f->dir);
	if (rmdir(p) != 0)
		f->failed = 1;
	const char *names[] = { "a1_gone", "a2_fifo", "a3_link", "a4_dir" };
	for (int i = 0; i < 4; i++) {
		snprintf(p, sizeof(p), "%s/%s", f->dir, names[i]);
		if (unlink(p) != 0)
			f->failed = 1;
		int rc = i == 1 ? mkfifo(p, 0644) : i == 2 ? symlink("z_ok", p) : i == 3 ? mkdir(p, 0755) : 0;
		if (rc != 0)
			f->failed = 1;
	}
}

static void test_vanish_and_swap(void **state)
{
	(void)state;
	rix_test_need_restic();
	struct fixture x;
	fixture_new(&x, "rix-vanish");
	rix_test_put_file(x.src, "0block", "held", 4);
	const char *names[] = { "a1_gone", "a2_fifo", "a3_link", "a4_dir" };
	for (int i = 0; i < 4; i++)
		rix_test_put_file(x.src, names[i], names[i], strlen(names[i]));
	char p[4300];
	snprintf(p, sizeof(p), "%s/b_dir", x.src);
	assert_int_equal(mkdir(p, 0755), 0); /* no files in it: the walker reads none there */
	rix_test_put_file(x.src, "c_gone", "c", 1);
	snprintf(p, sizeof(p), "%s/c_dir_gone", x.src);
	assert_int_equal(mkdir(p, 0755), 0);
	rix_test_put_file(p, "f", "f", 1);
	uint8_t *z = random_bytes(100000, 1);
	rix_test_put_file(x.src, "z_ok", z, 100000);
	struct fan f = { .hold = inode_of(x.src, "0block"), .sync = inode_of(x.src, "b_dir"), .at_sync = swap_files };
	if (fan_start(&f, x.src) != 0) {
		free(z);
		rix_test_free_dir(x.work);
		skip();
	}
	char *out;
	int rc = rix_in(&out, x.src, "-r '%s' backup --read-concurrency 1 .", x.repo);
	fan_stop(&f);
	if (!f.synced || f.failed)
		fail_msg("the files were not swapped at the right moment (synced %d, failed %d):\n%s", f.synced, f.failed, out);
	/* Left out, each named (the FIFO did not block the open: the backup ended), exit 3. */
	if (rc != 3 || !warned(out, "a1_gone", "No such file") || !warned(out, "a2_fifo", "not a regular file") ||
	    !warned(out, "a3_link", "open") || !warned(out, "a4_dir", "not a regular file") ||
	    !warned(out, "c_gone", "No such file") || !warned(out, "c_dir_gone", "No such file"))
		fail_msg("exit %d, want 3 and a warning for each of a1..a4, c_gone, c_dir_gone:\n%s", rc, out);
	assert_non_null(strstr(out, "snapshot "));
	free(out);
	assert_int_equal(restic(NULL, "-q -r '%s' check --read-data", x.repo), 0);
	assert_int_equal(restic(NULL, "-q -r '%s' restore latest --target '%s'", x.repo, x.out), 0);
	same_bytes(strcat(strcpy(p, x.out), "/z_ok"), z, 100000);
	same_bytes(strcat(strcpy(p, x.out), "/0block"), (const uint8_t *)"held", 4);
	assert_true(exists(x.out, "b_dir"));
	for (int i = 0; i < 4; i++)
		if (exists(x.out, names[i]))
			fail_msg("%s was restored: it was not backed up", names[i]);
	assert_false(exists(x.out, "c_gone") || exists(x.out, "c_dir_gone"));
	free(z);
	rix_test_free_dir(x.work);
}

static void test_grow_and_shrink(void **state)
{
	(void)state;
	rix_test_need_restic();
	struct fixture x;
	fixture_new(&x, "rix-grow");
	/* grow: 3 MiB, 300 KiB more at its second read; shrink: 20 MiB, cut to 9 MiB at its second
	 * read (the archiver reads far less than 9 MiB at once). */
	const size_t g = 3u << 20, gadd = 300u << 10, s = 20u << 20, sto = 9u << 20;
	uint8_t *gb = random_bytes(g, 11), *sb = random_bytes(s, 12), *added = random_bytes(gadd, 4242);
	rix_test_put_file(x.src, "grow", gb, g);
	rix_test_put_file(x.src, "shrink", sb, s);
	rix_test_put_file(x.src, "steady", sb, 1000);
	/* An atime at the mtime: relatime would move it on a read; rix reads with O_NOATIME. */
	char p[4300];
	snprintf(p, sizeof(p), "%s/steady", x.src);
	struct timespec old[2] = { { 1500000000, 5 }, { 1500000000, 5 } };
	assert_int_equal(utimensat(AT_FDCWD, p, old, 0), 0);
	struct fan f = { .grow = inode_of(x.src, "grow"), .shrink = inode_of(x.src, "shrink"), .grow_add = gadd, .shrink_to = sto };
	if (fan_start(&f, x.src) != 0) {
		free(gb);
		free(sb);
		free(added);
		rix_test_free_dir(x.work);
		skip();
	}
	char *out;
	int rc = rix_in(&out, x.src, "-r '%s' backup .", x.repo);
	fan_stop(&f);
	if (f.grow_reads < 2 || f.shrink_reads < 2 || f.failed)
		fail_msg("the files were not changed while read (%d, %d reads):\n%s", f.grow_reads, f.shrink_reads, out);
	/* Read to their end, as they were then; each named; nothing left out: exit 0. */
	if (rc != 0 || !warned(out, "grow", "changed while") || !warned(out, "shrink", "changed while") ||
	    warned(out, "steady", ""))
		fail_msg("exit %d, want 0 and a warning for grow and shrink alone:\n%s", rc, out);
	free(out);
	struct stat st;
	assert_int_equal(stat(p, &st), 0);
	if (geteuid() == 0 || st.st_uid == geteuid()) /* O_NOATIME is the owner's (or root's) */
		assert_true(st.st_atim.tv_sec == 1500000000 && st.st_atim.tv_nsec == 5);
	assert_int_equal(restic(NULL, "-q -r '%s' check --read-data", x.repo), 0);
	assert_int_equal(restic(NULL, "-q -r '%s' restore latest --target '%s'", x.repo, x.out), 0);
	uint8_t *grown = malloc(g + gadd);
	memcpy(grown, gb, g);
	memcpy(grown + g, added, gadd);
	same_bytes(strcat(strcpy(p, x.out), "/grow"), grown, g + gadd);
	same_bytes(strcat(strcpy(p, x.out), "/shrink"), sb, sto);
	/* The recorded sizes are those of the bytes read (restic ls -l). */
	char *ls;
	assert_int_equal(restic(&ls, "-q -r '%s' ls -l latest", x.repo), 0);
	char want[64];
	snprintf(want, sizeof(want), " %zu ", g + gadd);
	assert_non_null(strstr(ls, want));
	snprintf(want, sizeof(want), " %zu ", sto);
	assert_non_null(strstr(ls, want));
	free(ls);
	/* The next backup reads them again (their times moved since the first one looked). */
	assert_int_equal(rix_in(&out, x.src, "--json -r '%s' backup .", x.repo), 0);
	if (strstr(out, "\"files_changed\":2,\"files_unmodified\":1") == NULL)
		fail_msg("second backup: %s", out);
	free(out);
	free(grown);
	free(gb);
	free(sb);
	free(added);
	rix_test_free_dir(x.work);
}

/* The tree of the latest snapshot. */
static void latest_tree(const char *repo, char out[65])
{
	json_t *s = latest_snapshot(repo);
	assert_non_null(s);
	snprintf(out, 65, "%s", json_string_value(json_object_get(s, "tree")));
	json_decref(s);
}

/*
 * Entries the user may not read: a file and a directory of mode 000, a directory it may enter but
 * not list (0311). As root, both tools run as uid 65534 (setpriv), where the modes bite. restic
 * 0.14 leaves all three out (a warning each, exit 3); rix must write the same root tree. An
 * unreadable "." is an error for both (exit 1, no snapshot).
 */
static void test_unreadable(void **state)
{
	(void)state;
	rix_test_need_restic();
	struct fixture x;
	fixture_new(&x, "rix-unreadable");
	char as[256] = "", p[4400];
	if (geteuid() == 0) {
		if (system("command -v setpriv >/dev/null 2>&1") != 0) {
			fprintf(stderr, "(root without setpriv: a mode does not keep root out, skipped)\n");
			rix_test_free_dir(x.work);
			skip();
		}
		snprintf(as, sizeof(as), "setpriv --reuid=65534 --regid=65534 --clear-groups env HOME='%s'", x.work);
	}
	rix_test_put_file(x.src, "ok", "fine", 4);
	rix_test_put_file(x.src, "noread", "secret", 6);
	snprintf(p, sizeof(p), "%s/sub", x.src);
	assert_int_equal(mkdir(p, 0755), 0);
	rix_test_put_file(p, "ok2", "fine too", 8);
	const char *dirs[] = { "nodir", "xonly" };
	for (int i = 0; i < 2; i++) {
		snprintf(p, sizeof(p), "%s/%s", x.src, dirs[i]);
		assert_int_equal(mkdir(p, 0755), 0);
		rix_test_put_file(p, "inside", "hidden", 6);
	}
	if (geteuid() == 0)
		assert_int_equal(rix_test_run(NULL, NULL, "chmod 755 '%s' && chown -R 65534:65534 '%s'", x.work, x.work), 0);
	snprintf(p, sizeof(p), "%s/noread", x.src);
	assert_int_equal(chmod(p, 0), 0);
	snprintf(p, sizeof(p), "%s/nodir", x.src);
	assert_int_equal(chmod(p, 0), 0);
	snprintf(p, sizeof(p), "%s/xonly", x.src);
	assert_int_equal(chmod(p, 0311), 0);
	char *out;
	size_t n;
	assert_int_equal(rix_test_run(&out, &n, "cd '%s' && RESTIC_PASSWORD='%s' %s restic --no-cache -r '%s' backup . 2>&1", x.src, PW, as,
				      x.repo),
			 3);
	free(out);
	char theirs[65], mine[65];
	latest_tree(x.repo, theirs);
	/* rix, reading everything (--force), then on restic's snapshot as its parent. */
	for (int force = 1; force >= 0; force--) {
		int rc = rix_test_run(&out, &n, "cd '%s' && RIX_PASSWORD='%s' %s timeout 60 '%s' -r '%s' backup %s . 2>&1", x.src, PW, as,
				      RIX_CLI_PATH, x.repo, force ? "--force" : "");
		if (rc != 3 || !warned(out, "noread", "Permission denied") || !warned(out, "nodir", "Permission denied") ||
		    !warned(out, "xonly", "Permission denied"))
			fail_msg("exit %d, want 3 and a warning for noread, nodir and xonly:\n%s", rc, out);
		free(out);
		latest_tree(x.repo, mine);
		if (strcmp(mine, theirs) != 0) {
			char *a, *b;
			assert_int_equal(restic(&a, "-r '%s' cat blob %s", x.repo, theirs), 0);
			assert_int_equal(restic(&b, "-r '%s' cat blob %s", x.repo, mine), 0);
			fail_msg("the root tree is not restic's:\nrestic %s\nrix    %s", a, b);
		}
	}
	assert_int_equal(restic(NULL, "-q -r '%s' check --read-data", x.repo), 0);
	/* "." unreadable: an error, nothing written (restic: "unable to save snapshot", exit 1). */
	size_t before = count_snapshots(x.repo);
	assert_int_equal(rix_test_run(&out, &n, "cd '%s/xonly' && RESTIC_PASSWORD='%s' %s restic --no-cache -r '%s' backup . 2>&1", x.src,
				      PW, as, x.repo),
			 1);
	free(out);
	int rc = rix_test_run(&out, &n, "cd '%s/xonly' && RIX_PASSWORD='%s' %s timeout 60 '%s' -r '%s' backup . 2>&1", x.src, PW, as,
			      RIX_CLI_PATH, x.repo);
	if (rc != 1 || strstr(out, "Permission denied") == NULL)
		fail_msg("exit %d, want 1 and \"Permission denied\":\n%s", rc, out);
	free(out);
	assert_int_equal(count_snapshots(x.repo), before);
	snprintf(p, sizeof(p), "%s/xonly", x.src);
	assert_int_equal(chmod(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/nodir", x.src);
	assert_int_equal(chmod(p, 0755), 0);
	rix_test_free_dir(x.work);
}

/* The number of lines of s. */
static int lines(const char *s)
{
	int n = 0;
	for (; *s != '\0'; s++)
		n += *s == '\n';
	return n;
}

/*
 * A path that does not exist (restic 0.14: "... does not exist, skipping" and "Fatal: all
 * target directories/files do not exist", exit 1, before the repository is opened): exit 1 and
 * one line. Beside paths that exist: skipped with a warning, left out of the snapshot's paths,
 * exit 0, as restic.
 */
static void test_missing_path(void **state)
{
	(void)state;
	rix_test_need_restic();
	struct fixture x;
	fixture_new(&x, "rix-missing");
	rix_test_put_file(x.src, "f", "data", 4);
	char *out;
	assert_int_equal(restic(&out, "-r '%s' backup '%s/nope'", x.repo, x.work), 1);
	free(out);
	int rc = rix_in(&out, x.work, "-r '%s' backup '%s/nope'", x.repo, x.work);
	if (rc != 1 || lines(out) != 1 || strstr(out, "nope does not exist") == NULL)
		fail_msg("exit %d, want 1 and one line naming the path:\n%s", rc, out);
	free(out);
	/* Not even the password is asked for: no repository is opened. */
	rc = rix_test_run(&out, &(size_t){ 0 }, "cd '%s' && RIX_PASSWORD=wrong '%s' -r '%s' backup nope nope2 </dev/null 2>&1", x.work,
			  RIX_CLI_PATH, x.repo);
	if (rc != 1 || strstr(out, "nothing to back up") == NULL || strstr(out, "password") != NULL)
		fail_msg("exit %d, want 1 and \"nothing to back up\":\n%s", rc, out);
	free(out);
	assert_int_equal(count_snapshots(x.repo), 0);
	/* Beside one that exists: restic's snapshot paths, rix's. */
	assert_int_equal(rix_test_run(&out, &(size_t){ 0 }, "cd '%s' && RESTIC_PASSWORD='%s' restic --no-cache -r '%s' backup nope src 2>&1",
				      x.work, PW, x.repo),
			 0);
	assert_non_null(strstr(out, "nope does not exist, skipping"));
	free(out);
	json_t *theirs = latest_snapshot(x.repo);
	rc = rix_in(&out, x.work, "-r '%s' backup nope src", x.repo);
	if (rc != 0 || !warned(out, "nope", "does not exist") || strstr(out, "snapshot ") == NULL)
		fail_msg("exit %d, want 0, a warning and a snapshot:\n%s", rc, out);
	free(out);
	json_t *mine = latest_snapshot(x.repo);
	assert_true(json_equal(json_object_get(mine, "paths"), json_object_get(theirs, "paths")));
	assert_int_equal(json_array_size(json_object_get(mine, "paths")), 1);
	json_decref(mine);
	json_decref(theirs);
	assert_int_equal(restic(NULL, "-q -r '%s' check", x.repo), 0);
	rix_test_free_dir(x.work);
}

/* Files under repo/sub (data/ counts its subfolders' files). */
static int files_in(const char *repo, const char *sub)
{
	char *out;
	size_t n;
	assert_int_equal(rix_test_run(&out, &n, "find '%s/%s' -type f | wc -l", repo, sub), 0);
	int c = atoi(out);
	free(out);
	return c;
}

/*
 * A wrong password: restic 0.14 says "wrong password or no key found" (exit 1); rix says
 * "wrong password" with the exit code restic gives it since 0.17 (12), the code the rest of
 * rix's commands use. A repository restic holds locked exclusively (`restic key passwd` waiting
 * for the new password on its standard input): restic's "locked exclusively by PID ..." (restic
 * 0.14 exits 1, rix and restic since 0.17 11). Neither writes anything; once restic lets go, the
 * backup runs.
 */
static void test_wrong_password_and_locked(void **state)
{
	(void)state;
	rix_test_need_restic();
	struct fixture x;
	fixture_new(&x, "rix-locked");
	rix_test_put_file(x.src, "f", "data", 4);
	char *out;
	size_t n;
	assert_int_equal(rix_test_run(&out, &n, "RESTIC_PASSWORD=wrong restic --no-cache -r '%s' backup '%s' 2>&1", x.repo, x.src), 1);
	assert_non_null(strstr(out, "wrong password"));
	free(out);
	int rc = rix_test_run(&out, &n, "RIX_PASSWORD=wrong '%s' -r '%s' backup '%s' 2>&1", RIX_CLI_PATH, x.repo, x.src);
	if (rc != 12 || strstr(out, "wrong password") == NULL || lines(out) != 1)
		fail_msg("exit %d, want 12 and one line saying \"wrong password\":\n%s", rc, out);
	free(out);
	assert_int_equal(files_in(x.repo, "locks") + files_in(x.repo, "data") + files_in(x.repo, "index") +
				 files_in(x.repo, "snapshots"),
			 0);

	/* restic holds an exclusive lock while it waits for a new password on its stdin. */
	int in[2];
	assert_int_equal(pipe(in), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(in[0], 0);
		close(in[1]);
		int null = open("/dev/null", O_WRONLY);
		dup2(null, 1);
		dup2(null, 2);
		setenv("RESTIC_PASSWORD", PW, 1);
		execlp("restic", "restic", "--no-cache", "-r", x.repo, "key", "passwd", (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	for (int i = 0; i < 3000 && files_in(x.repo, "locks") == 0; i++)
		usleep(10000);
	assert_int_equal(files_in(x.repo, "locks"), 1);
	rc = rix_in(&out, x.work, "-r '%s' backup '%s'", x.repo, x.src);
	char who[64];
	snprintf(who, sizeof(who), "PID %d ", (int)pid);
	if (rc != 11 || strstr(out, "locked exclusively") == NULL || strstr(out, who) == NULL)
		fail_msg("exit %d, want 11 and \"locked exclusively by %s...\":\n%s", rc, who, out);
	free(out);
	assert_int_equal(files_in(x.repo, "data") + files_in(x.repo, "index") + files_in(x.repo, "snapshots"), 0);
	assert_int_equal(files_in(x.repo, "locks"), 1); /* restic's, still */
	/* End of input: restic gives up and removes its lock. */
	close(in[1]);
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_int_equal(files_in(x.repo, "locks"), 0);
	rc = rix_in(&out, x.work, "-r '%s' backup '%s'", x.repo, x.src);
	if (rc != 0)
		fail_msg("exit %d once restic let go:\n%s", rc, out);
	free(out);
	assert_int_equal(files_in(x.repo, "locks"), 0);
	assert_int_equal(count_snapshots(x.repo), 1);
	assert_int_equal(restic(NULL, "-q -r '%s' check --read-data", x.repo), 0);
	rix_test_free_dir(x.work);
}

/* The tmpfs test_disk_full mounts ("" when none), unmounted by the teardown whatever happens. */
static char mounted[4300];

static int unmount(void **state)
{
	(void)state;
	if (mounted[0] != '\0' && rix_test_run(NULL, NULL, "umount '%s'", mounted) == 0)
		mounted[0] = '\0';
	return 0;
}

/* Every file under dir whose name starts with '.' (temporary files left behind), listed. */
static char *dot_files(const char *dir)
{
	char *out;
	size_t n;
	assert_int_equal(rix_test_run(&out, &n, "find '%s' -name '.*' -type f", dir), 0);
	return out;
}

/*
 * A repository on a 20 MiB tmpfs, filled by the second backup (40 MiB of new data): a clear
 * error (exit 1, "No space left"), no snapshot, no lock and no temporary file left; the first
 * snapshot still checks (restic check --read-data) and restores with restic; once the tmpfs
 * is grown, the backup completes. Where this machine cannot mount a tmpfs, skipped (the fault
 * backend's test below fails every write of a backup in turn instead).
 */
static void test_disk_full(void **state)
{
	(void)state;
	rix_test_need_restic();
	char *work = rix_test_new_dir("rix-full");
	char mnt[4300], repo[4400], src[4300], out_dir[4300], p[9000];
	snprintf(mnt, sizeof(mnt), "%s/mnt", work);
	snprintf(repo, sizeof(repo), "%s/repo", mnt);
	snprintf(src, sizeof(src), "%s/src", work);
	snprintf(out_dir, sizeof(out_dir), "%s/out", work);
	assert_int_equal(mkdir(mnt, 0700), 0);
	char *out;
	size_t n;
	if (rix_test_run(&out, &n, "mount -t tmpfs -o size=20m tmpfs '%s' 2>&1", mnt) != 0) {
		fprintf(stderr, "(no tmpfs here: %s; the disk-full test is skipped)\n", out);
		free(out);
		rix_test_free_dir(work);
		skip();
	}
	free(out);
	snprintf(mounted, sizeof(mounted), "%s", mnt);
	assert_int_equal(mkdir(repo, 0700), 0);
	rix_repo_free(init_repo(repo, 2));
	assert_int_equal(mkdir(src, 0755), 0);
	uint8_t *first = random_bytes(2u << 20, 31);
	rix_test_put_file(src, "first", first, 2u << 20);
	assert_int_equal(rix_in(&out, work, "-r '%s' backup src", repo), 0);
	free(out);
	json_t *s1 = latest_snapshot(repo);
	const size_t big = 40u << 20;
	uint8_t *b = random_bytes(big, 32);
	rix_test_put_file(src, "big", b, big);
	int rc = rix_in(&out, work, "-r '%s' backup src", repo);
	if (rc != 1 || strstr(out, "No space left") == NULL || lines(out) > 3)
		fail_msg("exit %d, want 1 and a short \"No space left\" error:\n%s", rc, out);
	free(out);
	assert_int_equal(count_snapshots(repo), 1);
	assert_int_equal(files_in(repo, "locks"), 0);
	char *dots = dot_files(repo);
	if (dots[0] != '\0')
		fail_msg("temporary files left in the repository:\n%s", dots);
	free(dots);
	/* What was committed before is whole. */
	assert_int_equal(restic(NULL, "-q -r '%s' check --read-data", repo), 0);
	assert_int_equal(restic(NULL, "-q -r '%s' restore %s --target '%s'", repo,
				json_string_value(json_object_get(s1, "id")), out_dir),
			 0);
	snprintf(p, sizeof(p), "%s/src/first", out_dir); /* "backup src": /src in the tree */
	same_bytes(p, first, 2u << 20);
	assert_int_equal(rix_in(&out, work, "-r '%s' check", repo), 0);
	free(out);
	/* Room again: the next backup completes (the packs the failed one wrote are not indexed:
	 * stored again, as restic does; restic prune would drop them). */
	assert_int_equal(rix_test_run(NULL, NULL, "mount -o remount,size=200m '%s'", mnt), 0);
	rc = rix_in(&out, work, "-r '%s' backup src", repo);
	if (rc != 0)
		fail_msg("exit %d with room again:\n%s", rc, out);
	free(out);
	assert_int_equal(count_snapshots(repo), 2);
	assert_int_equal(restic(NULL, "-q -r '%s' check --read-data", repo), 0);
	snprintf(p, sizeof(p), "%s/latest", work);
	assert_int_equal(restic(NULL, "-q -r '%s' restore latest --target '%s'", repo, p), 0);
	snprintf(p, sizeof(p), "%s/latest/src/big", work);
	same_bytes(p, b, big);
	json_decref(s1);
	free(first);
	free(b);
	unmount(NULL);
	assert_true(mounted[0] == '\0');
	rix_test_free_dir(work);
}

static void warn_fail(void *payload, const char *path, const char *msg)
{
	(void)payload;
	fail_msg("warning for %s: %s", path, msg);
}

/* rix_backup of src into the repository in dir, through a fault backend armed with plan. */
static int backup_with_fault(const char *dir, const char *src, const rix_test_fault_plan *plan, long *injected)
{
	rix_test_fault f;
	rix_test_fault_init(&f);
	rix_backend *local, *b;
	MUST(rix_backend_local_open(&local, dir, 0));
	MUST(rix_test_fault_backend(&b, local, &f));
	rix_repo *r;
	MUST(rix_repo_open(&r, b, PW, strlen(PW), &fast));
	MUST(rix_repo_load_index(NULL, r, NULL, NULL));
	rix_test_fault_arm(&f, plan);
	rix_backup_options bo = RIX_BACKUP_OPTIONS_INIT;
	bo.warn = warn_fail;
	bo.hostname = "h";
	const char *paths[] = { src };
	rix_id snap;
	rix_backup_summary sum;
	rix_error_clear();
	int rc = rix_backup(&snap, &sum, r, paths, 1, &bo);
	*injected = rix_test_fault_injected(&f);
	rix_repo_free(r);
	rix_test_fault_destroy(&f);
	return rc;
}

/*
 * The library under a disk that fills at each write of a backup in turn (the n-th write and every
 * later one refused with RIX_ENOSPC, or the n-th alone): rix_backup returns RIX_ENOSPC with a
 * message, writes no snapshot, and leaves a repository that checks clean (--read-data) with
 * the earlier snapshot whole; the next backup, with room, completes and checks clean. (A pack
 * refused once is written again at the flush: that backup completes, whole.)
 */
static void test_disk_full_every_write(void **state)
{
	(void)state;
	char *work = rix_test_new_dir("rix-enospc");
	char src[4300], base[4300], dir[4300], p[4400];
	snprintf(src, sizeof(src), "%s/src", work);
	snprintf(base, sizeof(base), "%s/base", work);
	snprintf(dir, sizeof(dir), "%s/repo", work);
	assert_int_equal(mkdir(src, 0755), 0);
	assert_int_equal(mkdir(base, 0700), 0);
	uint8_t *d = random_bytes(6u << 20, 41);
	rix_test_put_file(src, "one", d, 1u << 20);
	rix_repo_free(init_repo(base, 2));
	long injected;
	assert_int_equal(backup_with_fault(base, src, NULL, &injected), 0);
	/* The second backup has new data: packs (4 MiB each), an index file, a snapshot. */
	rix_test_put_file(src, "two", d + (1u << 20), 5u << 20);
	snprintf(p, sizeof(p), "%s/sub", src);
	assert_int_equal(mkdir(p, 0755), 0);
	rix_test_put_file(p, "three", d + 7, 1000);
	int rounds = 0, recovered = 0;
	for (int mode = 0; mode < 2; mode++) {
		for (long n = 1;; n++) {
			assert_int_equal(rix_test_run(NULL, NULL, "rm -rf '%s' && cp -a '%s' '%s'", dir, base, dir), 0);
			rix_test_fault_plan plan = { RIX_TEST_FAULT_WRITE, n, mode ? RIX_TEST_FAULT_ONCE : RIX_TEST_FAULT_FROM,
						     RIX_TEST_FAULT_ENOSPC };
			int rc = backup_with_fault(dir, src, &plan, &injected);
			snprintf(p, sizeof(p), "%s/snapshots", dir);
			char ids[8][65];
			size_t snaps = rix_test_list_ids(p, ids, 8);
			if (injected == 0) { /* past the last write: the backup was whole */
				assert_int_equal(rc, 0);
				assert_int_equal(snaps, 2);
				break;
			}
			rounds++;
			if (rc == 0 && mode == 1) { /* a pack the backend refused once is written again at the flush */
				assert_int_equal(snaps, 2);
				struct lines l;
				rix_check_report rep = run_check(dir, 1, 0, &l);
				assert_int_equal(rep.errors, 0);
				recovered++;
				continue;
			}
			if (rc != RIX_ENOSPC || rix_error_last()[0] == '\0')
				fail_msg("write %ld (%s): %d (%s), want RIX_ENOSPC", n, mode ? "once" : "from then on", rc,
					 rix_error_last());
			assert_int_equal(snaps, 1);
			struct lines l;
			rix_check_report rep = run_check(dir, 1, 0, &l);
			assert_int_equal(rep.errors, 0);
			assert_int_equal(rep.snapshots, 1);
			/* Room again. */
			assert_int_equal(backup_with_fault(dir, src, NULL, &injected), 0);
			rep = run_check(dir, 1, 0, &l);
			assert_int_equal(rep.snapshots, 2);
		}
	}
	assert_true(rounds >= 6); /* at least packs, index and snapshot, in both modes */
	assert_true(recovered < rounds / 2);
	free(d);
	rix_test_free_dir(work);
}

/* ---- special files -------------------------------------------------------------------------- */

/* One line per entry under a root: what a restore must bring back, atime and ctime aside. */
struct listing {
	char **v;
	size_t n, cap;
	size_t root_len;
};
static struct listing *listing_now;

static int list_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)flag;
	struct listing *l = listing_now;
	if (ftw->level == 0)
		return 0;
	char line[16384];
	int k = snprintf(line, sizeof(line), "%s mode=%o uid=%u gid=%u", path + l->root_len, (unsigned)st->st_mode,
			 (unsigned)st->st_uid, (unsigned)st->st_gid);
	if (!S_ISDIR(st->st_mode)) /* a directory's mtime moves as the restore fills it; restic sets it last */
		k += snprintf(line + k, sizeof(line) - (size_t)k, " nlink=%lu", (unsigned long)st->st_nlink);
	k += snprintf(line + k, sizeof(line) - (size_t)k, " mtime=%lld.%09ld", (long long)st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
	if (S_ISREG(st->st_mode))
		k += snprintf(line + k, sizeof(line) - (size_t)k, " size=%lld", (long long)st->st_size);
	if (S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode))
		k += snprintf(line + k, sizeof(line) - (size_t)k, " rdev=%u:%u", major(st->st_rdev), minor(st->st_rdev));
	if (S_ISLNK(st->st_mode)) {
		char t[4096];
		ssize_t tl = readlink(path, t, sizeof(t) - 1);
		k += snprintf(line + k, sizeof(line) - (size_t)k, " target=%.*s", (int)(tl > 0 ? tl : 0), t);
	}
	char names[4096];
	/* A symlink's xattrs: restic (0.14) neither records nor restores them, nor does rix. */
	ssize_t nl = S_ISLNK(st->st_mode) ? 0 : llistxattr(path, names, sizeof(names));
	/* xattrs sorted by name (the kernel's order is the file system's) */
	const char *sorted[64];
	size_t ns = 0;
	for (ssize_t i = 0; i < nl && ns < 64; i += (ssize_t)strlen(names + i) + 1)
		sorted[ns++] = names + i;
	for (size_t i = 1; i < ns; i++)
		for (size_t j = i; j > 0 && strcmp(sorted[j - 1], sorted[j]) > 0; j--) {
			const char *x = sorted[j];
			sorted[j] = sorted[j - 1];
			sorted[j - 1] = x;
		}
	for (size_t i = 0; i < ns; i++) {
		uint8_t v[4096];
		ssize_t vl = lgetxattr(path, sorted[i], v, sizeof(v));
		k += snprintf(line + k, sizeof(line) - (size_t)k, " %s=", sorted[i]);
		for (ssize_t j = 0; j < vl && k < (int)sizeof(line) - 3; j++)
			k += snprintf(line + k, sizeof(line) - (size_t)k, "%02x", v[j]);
	}
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 64;
		l->v = realloc(l->v, l->cap * sizeof(*l->v));
		assert_non_null(l->v);
	}
	l->v[l->n++] = strdup(line);
	return 0;
}

static int cmp_line(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every entry under root (not root itself), one line each, sorted and joined (malloc'd). */
static char *list_tree(const char *root)
{
	struct listing l = { .root_len = strlen(root) };
	listing_now = &l;
	assert_int_equal(nftw(root, list_one, 16, FTW_PHYS), 0);
	qsort(l.v, l.n, sizeof(*l.v), cmp_line);
	size_t total = 1;
	for (size_t i = 0; i < l.n; i++)
		total += strlen(l.v[i]) + 1;
	char *all = malloc(total), *p = all;
	for (size_t i = 0; i < l.n; i++) {
		p += sprintf(p, "%s\n", l.v[i]);
		free(l.v[i]);
	}
	*p = '\0';
	free(l.v);
	return all;
}

static void set_mtime(const char *dir, const char *name, long long sec, long nsec)
{
	char p[4400];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	struct timespec t[2] = { { sec, nsec }, { sec, nsec } };
	assert_int_equal(utimensat(AT_FDCWD, p, t, AT_SYMLINK_NOFOLLOW), 0);
}

/*
 * Device nodes (mknod: root only), a sparse file, xattrs (where the file system takes user.*),
 * hard links, symlinks (a dangling one), a FIFO, set-id and sticky bits, another owner: rix's
 * tree for them is restic's, byte for byte (restic 0.14 backs up the same tree first), and
 * restic restores rix's snapshot with the same content and metadata (mode, owner, mtime, link
 * counts, link targets, device numbers, xattrs). What this machine cannot make is left out,
 * saying so.
 */
static void test_special_files(void **state)
{
	(void)state;
	rix_test_need_restic();
	struct fixture x;
	fixture_new(&x, "rix-special");
	char p[4400];
	int devices = 1, xattrs = 1;
	snprintf(p, sizeof(p), "%s/chr", x.src);
	if (mknod(p, S_IFCHR | 0620, makedev(1, 3)) != 0) {
		fprintf(stderr, "(mknod: %s: no device nodes in this test)\n", strerror(errno));
		devices = 0;
	} else {
		snprintf(p, sizeof(p), "%s/blk", x.src);
		assert_int_equal(mknod(p, S_IFBLK | 0640, makedev(7, 200)), 0);
		snprintf(p, sizeof(p), "%s/bigdev", x.src);
		assert_int_equal(mknod(p, S_IFCHR | 0600, makedev(4095, 1048575)), 0); /* the widest numbers */
	}
	/* A sparse file: 64 MiB, three short runs of data, holes between. */
	snprintf(p, sizeof(p), "%s/sparse", x.src);
	int fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0644);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 64 << 20), 0);
	assert_int_equal(pwrite(fd, "head", 4, 0), 4);
	assert_int_equal(pwrite(fd, "middle", 6, 32 << 20), 6);
	assert_int_equal(pwrite(fd, "tail", 4, (64 << 20) - 4), 4);
	close(fd);
	struct stat sst;
	assert_int_equal(stat(p, &sst), 0);
	assert_true(sst.st_blocks * 512 < (8 << 20)); /* holes indeed */
	rix_test_put_file(x.src, "xfile", "x content", 9);
	snprintf(p, sizeof(p), "%s/xdir", x.src);
	assert_int_equal(mkdir(p, 0750), 0);
	rix_test_put_file(p, "inner", "in", 2);
	snprintf(p, sizeof(p), "%s/xfile", x.src);
	if (lsetxattr(p, "user.bin", "v\0\1\xff", 4, 0) != 0) {
		fprintf(stderr, "(setxattr user.*: %s: no xattrs in this test)\n", strerror(errno));
		xattrs = 0;
	} else {
		uint8_t *big = random_bytes(1500, 51);
		assert_int_equal(lsetxattr(p, "user.big", big, 1500, 0), 0);
		free(big);
		assert_int_equal(lsetxattr(p, "user.empty", "", 0, 0), 0);
		snprintf(p, sizeof(p), "%s/xdir", x.src);
		assert_int_equal(lsetxattr(p, "user.dir", "dir value", 9, 0), 0);
	}
	rix_test_put_file(x.src, "h1", "linked thrice", 13);
	char a[4400];
	snprintf(a, sizeof(a), "%s/h1", x.src);
	snprintf(p, sizeof(p), "%s/h2", x.src);
	assert_int_equal(link(a, p), 0);
	snprintf(p, sizeof(p), "%s/xdir/h3", x.src);
	assert_int_equal(link(a, p), 0);
	snprintf(p, sizeof(p), "%s/link", x.src);
	assert_int_equal(symlink("xfile", p), 0);
	snprintf(p, sizeof(p), "%s/dangling", x.src);
	assert_int_equal(symlink("no/such/target \"q\" <&>", p), 0);
	snprintf(p, sizeof(p), "%s/fifo", x.src);
	assert_int_equal(mkfifo(p, 0604), 0);
	rix_test_put_file(x.src, "setuid", "s", 1);
	snprintf(p, sizeof(p), "%s/setuid", x.src);
	assert_int_equal(chmod(p, 06755), 0);
	snprintf(p, sizeof(p), "%s/sticky", x.src);
	assert_int_equal(mkdir(p, 0755), 0);
	assert_int_equal(chmod(p, 01777), 0);
	rix_test_put_file(x.src, "owned", "o", 1);
	if (geteuid() == 0) {
		snprintf(p, sizeof(p), "%s/owned", x.src);
		assert_int_equal(lchown(p, 1234, 5678), 0);
		snprintf(p, sizeof(p), "%s/link", x.src);
		assert_int_equal(lchown(p, 4321, 8765), 0);
		if (lsetxattr(p, "trusted.rix", "on a link", 9, 0) != 0) /* not in restic's tree: nor in rix's */
			fprintf(stderr, "(no trusted.* xattr on a symlink here: %s)\n", strerror(errno));
	}
	/* Times last (children first), with nanoseconds; one before 1970. */
	const char *all[] = { "chr", "blk", "bigdev", "sparse", "xfile", "xdir/inner", "h1", "link", "dangling", "fifo",
			      "setuid", "owned", "sticky", "xdir" };
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (devices || (strcmp(all[i], "chr") != 0 && strcmp(all[i], "blk") != 0 && strcmp(all[i], "bigdev") != 0))
			set_mtime(x.src, all[i], i == 3 ? -86400 * 365LL : 1600000000 + (long long)i, 123456789 + (long)i);
	char *before = list_tree(x.src);

	/* restic first, then rix reading everything: the same root tree. */
	char *out;
	size_t n;
	assert_int_equal(rix_test_run(&out, &n, "cd '%s' && RESTIC_PASSWORD='%s' restic --no-cache -q -r '%s' backup . 2>&1", x.src, PW,
				      x.repo),
			 0);
	free(out);
	json_t *theirs = latest_snapshot(x.repo);
	assert_int_equal(rix_in(&out, x.src, "-r '%s' backup --force .", x.repo), 0);
	free(out);
	json_t *mine = latest_snapshot(x.repo);
	const char *rt = json_string_value(json_object_get(theirs, "tree")), *mt = json_string_value(json_object_get(mine, "tree"));
	if (strcmp(rt, mt) != 0) {
		char *ta, *tb;
		assert_int_equal(restic(&ta, "-r '%s' cat blob %s", x.repo, rt), 0);
		assert_int_equal(restic(&tb, "-r '%s' cat blob %s", x.repo, mt), 0);
		fail_msg("rix's tree is not restic's:\nrestic %s\nrix    %s", ta, tb);
	}
	assert_int_equal(restic(NULL, "-q -r '%s' check --read-data", x.repo), 0);
	/* The sparse file's 64 MiB are mostly zeros: a few small packs. */
	char *du;
	assert_int_equal(rix_test_run(&du, &n, "du -sk '%s/data' | cut -f1", x.repo), 0);
	assert_true(atoi(du) < 4096);
	free(du);
	/* restic restores rix's snapshot as it was. */
	assert_int_equal(restic(NULL, "-q -r '%s' restore %s --target '%s'", x.repo, json_string_value(json_object_get(mine, "id")),
				x.out),
			 0);
	char *after = list_tree(x.out);
	if (strcmp(before, after) != 0)
		fail_msg("restored differently:\nsource:\n%s\nrestored:\n%s", before, after);
	assert_int_equal(rix_test_run(NULL, NULL, "cmp '%s/sparse' '%s/sparse' && cmp '%s/xfile' '%s/xfile' && cmp '%s/h1' '%s/xdir/h3'",
				      x.src, x.out, x.src, x.out, x.src, x.out),
			 0);
	if (!xattrs || !devices)
		fprintf(stderr, "(this run had%s device nodes and%s xattrs)\n", devices ? "" : " no", xattrs ? "" : " no");
	free(before);
	free(after);
	json_decref(theirs);
	json_decref(mine);
	rix_test_free_dir(x.work);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_vanish_and_swap),
		cmocka_unit_test(test_grow_and_shrink),
		cmocka_unit_test(test_unreadable),
		cmocka_unit_test(test_missing_path),
		cmocka_unit_test(test_wrong_password_and_locked),
		cmocka_unit_test_teardown(test_disk_full, unmount),
		cmocka_unit_test(test_disk_full_every_write),
		cmocka_unit_test(test_special_files),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
