/*
 * tests/test_walker.c — rix_tree_load and rix_walk (rix/walker.h) on trees stored in a real
 * repository:
 *   test_order_skip_stop   depth first, by name, directories before what they hold; a prefix;
 *                          SKIP leaves a subtree unloaded; STOP ends the walk with 0; a callback's
 *                          error comes back as it was
 *   test_deep_chain        3000 directories nested: every one visited, the deepest path whole
 *   test_errors            a subtree missing from the index, a directory without a subtree
 *                          (not visited): the error names the path
 *   test_oom               every allocation of a walk failed in turn: RIX_ENOMEM, nothing leaked
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "rix/rix.h"
#include "repo_fixture.h"
#include "testutil.h"

struct ent {
	const char *name;
	rix_node_type type;
	const rix_id *subtree; /* directories */
};

/* A tree of the entries (in name order) stored in r: its ID. */
static void save_tree(rix_id *id, rix_repo *r, const struct ent *e, size_t n)
{
	rix_node nd[8];
	assert_true(n <= 8);
	for (size_t i = 0; i < n; i++) {
		nd[i] = (rix_node){ .name = e[i].name, .name_len = strlen(e[i].name), .type = e[i].type };
		nd[i].mode = e[i].type == RIX_NODE_DIR ? (RIX_GOMODE_DIR | 0755) : 0644;
		nd[i].subtree = e[i].subtree;
		if (e[i].type == RIX_NODE_FILE)
			nd[i].size = 3;
	}
	store_tree(id, r, nd, n);
}

struct seen {
	char paths[64][64];
	size_t n;
	const char *skip, *stop, *fail;
	size_t count, max_len;
	char last[16];
};

static int record(void *arg, const char *path, size_t len, const rix_node *node)
{
	struct seen *s = arg;
	assert_int_equal(strlen(path), len);
	assert_true(len > node->name_len && memcmp(path + len - node->name_len, node->name, node->name_len) == 0);
	if (s->n < 64)
		snprintf(s->paths[s->n++], sizeof(s->paths[0]), "%s", path);
	if (s->fail && strcmp(path, s->fail) == 0)
		return rix_error_set(RIX_EIO, "told to fail at %s", path);
	if (s->skip && strcmp(path, s->skip) == 0)
		return RIX_WALK_SKIP;
	if (s->stop && strcmp(path, s->stop) == 0)
		return RIX_WALK_STOP;
	return RIX_WALK_CONTINUE;
}

/*
 * /a/x/deep, /a/y, /b (a file), /c/ (an empty directory), /d/z, and /gone (a directory whose
 * tree the repository lacks: only a SKIP gets past it).
 */
struct fixture {
	char *dir;
	rix_repo *r;
	rix_id root, gone_root;
};

static void make_fixture(struct fixture *fx)
{
	fx->dir = rix_test_new_dir("walker");
	char repo[4200];
	snprintf(repo, sizeof(repo), "%s/repo", fx->dir);
	assert_int_equal(mkdir(repo, 0700), 0);
	fx->r = init_repo(repo, 2);
	MUST(rix_repo_load_index(NULL, fx->r, NULL, NULL));
	rix_id x, a, c, d, missing;
	struct ent ex[] = { { "deep", RIX_NODE_FILE, NULL } };
	save_tree(&x, fx->r, ex, 1);
	struct ent ea[] = { { "x", RIX_NODE_DIR, &x }, { "y", RIX_NODE_SYMLINK, NULL } };
	save_tree(&a, fx->r, ea, 2);
	save_tree(&c, fx->r, NULL, 0);
	struct ent ed[] = { { "z", RIX_NODE_FIFO, NULL } };
	save_tree(&d, fx->r, ed, 1);
	struct ent er[] = { { "a", RIX_NODE_DIR, &a }, { "b", RIX_NODE_FILE, NULL }, { "c", RIX_NODE_DIR, &c },
			    { "d", RIX_NODE_DIR, &d } };
	save_tree(&fx->root, fx->r, er, 4);
	memset(&missing, 0x5a, sizeof(missing));
	struct ent eg[] = { { "a", RIX_NODE_DIR, &a }, { "gone", RIX_NODE_DIR, &missing }, { "z", RIX_NODE_FILE, NULL } };
	save_tree(&fx->gone_root, fx->r, eg, 3);
	MUST(rix_repo_flush(fx->r));
}

static void free_fixture(struct fixture *fx)
{
	rix_repo_free(fx->r);
	rix_test_free_dir(fx->dir);
}

static void expect(const struct seen *s, const char *const *want, size_t n)
{
	for (size_t i = 0; i < n && i < s->n; i++)
		assert_string_equal(s->paths[i], want[i]);
	assert_int_equal(s->n, n);
}

static void test_order_skip_stop(void **state)
{
	(void)state;
	struct fixture fx;
	make_fixture(&fx);
	struct seen s = { 0 };
	MUST(rix_walk(fx.r, &fx.root, NULL, record, &s));
	const char *all[] = { "/a", "/a/x", "/a/x/deep", "/a/y", "/b", "/c", "/d", "/d/z" };
	expect(&s, all, 8);

	memset(&s, 0, sizeof(s));
	MUST(rix_walk(fx.r, &fx.root, "/snap/root/", record, &s));
	assert_string_equal(s.paths[0], "/snap/root/a");
	assert_string_equal(s.paths[7], "/snap/root/d/z");

	memset(&s, 0, sizeof(s));
	s.skip = "/a";
	MUST(rix_walk(fx.r, &fx.root, "", record, &s));
	const char *skipped[] = { "/a", "/b", "/c", "/d", "/d/z" };
	expect(&s, skipped, 5);

	memset(&s, 0, sizeof(s));
	s.stop = "/a/x/deep";
	MUST(rix_walk(fx.r, &fx.root, NULL, record, &s));
	const char *stopped[] = { "/a", "/a/x", "/a/x/deep" };
	expect(&s, stopped, 3);

	memset(&s, 0, sizeof(s));
	s.fail = "/a/y";
	assert_int_equal(rix_walk(fx.r, &fx.root, NULL, record, &s), RIX_EIO);
	assert_string_equal(rix_error_last(), "told to fail at /a/y");
	assert_int_equal(s.n, 4);

	/* rix_tree_load: the root's four nodes, by name */
	rix_tree *t;
	MUST(rix_tree_load(&t, fx.r, &fx.root));
	assert_int_equal(rix_tree_count(t), 4);
	assert_memory_equal(rix_tree_node(t, 3)->name, "d", 1);
	rix_tree_free(t);
	free_fixture(&fx);
}

static void test_errors(void **state)
{
	(void)state;
	struct fixture fx;
	make_fixture(&fx);
	struct seen s = { 0 };
	int rc = rix_walk(fx.r, &fx.gone_root, NULL, record, &s);
	assert_int_equal(rc, RIX_ENOTFOUND);
	assert_non_null(strstr(rix_error_last(), "/gone: tree 5a5a5a5a5a"));
	const char *upto[] = { "/a", "/a/x", "/a/x/deep", "/a/y", "/gone" };
	expect(&s, upto, 5);
	/* skipped, it is never loaded */
	memset(&s, 0, sizeof(s));
	s.skip = "/gone";
	MUST(rix_walk(fx.r, &fx.gone_root, NULL, record, &s));
	assert_int_equal(s.n, 6);
	/* the root itself missing */
	rix_id none;
	memset(&none, 0x11, sizeof(none));
	assert_int_equal(rix_walk(fx.r, &none, NULL, record, &s), RIX_ENOTFOUND);
	rix_tree *t = (rix_tree *)&s;
	assert_int_equal(rix_tree_load(&t, fx.r, &none), RIX_ENOTFOUND);
	assert_null(t);
	/* a directory without a subtree (hand-made JSON: the encoder would write none either) */
	const char *json = "{\"nodes\":[{\"name\":\"nosub\",\"type\":\"dir\",\"mtime\":\"2020-01-01T00:00:00Z\","
			   "\"atime\":\"2020-01-01T00:00:00Z\",\"ctime\":\"2020-01-01T00:00:00Z\",\"uid\":0,\"gid\":0,"
			   "\"content\":null}]}\n";
	rix_id bad;
	MUST(rix_repo_save_blob(&bad, NULL, fx.r, RIX_BLOB_TREE, json, strlen(json)));
	MUST(rix_repo_flush(fx.r));
	memset(&s, 0, sizeof(s));
	assert_int_equal(rix_walk(fx.r, &bad, NULL, record, &s), RIX_ECORRUPT);
	assert_string_equal(rix_error_last(), "/nosub: a directory without a subtree");
	assert_int_equal(s.n, 0); /* not visited: restic's walker fails before its callback */
	free_fixture(&fx);
}

static int count_deep(void *arg, const char *path, size_t len, const rix_node *node)
{
	(void)path;
	(void)node;
	struct seen *s = arg;
	s->count++;
	if (len > s->max_len) {
		s->max_len = len;
		snprintf(s->last, sizeof(s->last), "%s", path + (len > 6 ? len - 6 : 0));
	}
	return RIX_WALK_CONTINUE;
}

static void test_deep_chain(void **state)
{
	(void)state;
	struct fixture fx;
	make_fixture(&fx);
	enum { DEPTH = 3000 };
	rix_id id;
	struct ent leaf[] = { { "bottom", RIX_NODE_FILE, NULL } };
	save_tree(&id, fx.r, leaf, 1);
	for (int i = 0; i < DEPTH; i++) {
		rix_id sub = id;
		struct ent e[] = { { "d", RIX_NODE_DIR, &sub } };
		save_tree(&id, fx.r, e, 1);
	}
	MUST(rix_repo_flush(fx.r));
	struct seen s = { 0 };
	MUST(rix_walk(fx.r, &id, NULL, count_deep, &s));
	assert_int_equal(s.count, DEPTH + 1);
	assert_int_equal(s.max_len, 2 * DEPTH + strlen("/bottom"));
	assert_string_equal(s.last, "bottom");
	free_fixture(&fx);
}

struct oom_arg {
	struct fixture *fx;
	size_t visited;
};

static int count_all(void *arg, const char *path, size_t len, const rix_node *node)
{
	(void)path;
	(void)len;
	(void)node;
	++*(size_t *)arg;
	return RIX_WALK_CONTINUE;
}

static int run_walk(void *p)
{
	struct oom_arg *a = p;
	a->visited = 0;
	return rix_walk(a->fx->r, &a->fx->root, "/p", count_all, &a->visited);
}

static void test_oom(void **state)
{
	(void)state;
	struct fixture fx;
	make_fixture(&fx);
	struct oom_arg a = { .fx = &fx };
	/* one walk first: what the repository sets up on its first read (and keeps) is not the walk's */
	MUST(run_walk(&a));
	/* the index is loaded: a walk allocates only its own memory, blobs and trees */
	long rounds = rix_test_oom_loop("rix_walk", run_walk, &a, 10000);
	assert_true(rounds > 5);
	assert_int_equal(a.visited, 8);
	free_fixture(&fx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_order_skip_stop),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_deep_chain),
		cmocka_unit_test(test_oom),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
