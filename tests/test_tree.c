/*
 * tests/test_tree.c — tree blobs byte-identical to restic's: a directory with every kind of
 * entry (files, an empty file, odd and invalid-UTF-8 names, a long name, a subdirectory,
 * a symlink, a FIFO, a hard link, a setuid file, an xattr where the file system takes one) is backed up by the real restic; rix encodes the same metadata, read with
 * lstat, the way restic reads it, and the bytes must equal restic's tree blobs, the subtree's
 * ID included. Also: the encoder's refusals and its escapes on fixed inputs; times in the local
 * zone (rix_time_local, rix_time_now) as `date` shows them in several zones.
 */
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include <jansson.h>

#include "rix/rix.h"
#include "testutil.h"

#define PW "tree-test"

static void test_escapes(void **state)
{
	(void)state;
	rix_tree_enc *e;
	MUST(rix_tree_enc_new(&e));
	rix_node n = { .name = "a\"b\\c<d>&\t\x01\xff\xc3\xa9", .type = RIX_NODE_FILE, .mode = 0644,
		       .mtime = { 1700000000, 120000000, 0 }, .atime = { 1700000000, 0, 3600 },
		       .ctime = { 1700000000, 5, -7200 }, .uid = 1, .gid = 2, .user = "u<", .size = 3, .links = 1 };
	n.name_len = strlen(n.name);
	MUST(rix_tree_enc_add(e, &n));
	const uint8_t *d;
	size_t len;
	MUST(rix_tree_enc_finish(&d, &len, e));
	const char *want = "{\"nodes\":[{\"name\":\"a\\\\\\\"b\\\\\\\\c\\u003cd\\u003e\\u0026\\\\t\\\\x01\\\\xff\xc3\xa9\",\"type\":\"file\",\"mode\":420,\"mtime\":\"2023-11-14T22:13:20.12Z\",\"atime\":\"2023-11-14T23:13:20+01:00\",\"ctime\":\"2023-11-14T20:13:20.000000005-02:00\",\"uid\":1,\"gid\":2,\"user\":\"u\\u003c\",\"size\":3,\"links\":1,\"content\":[]}]}\n";
	if (len != strlen(want) || memcmp(d, want, len) != 0)
		fail_msg("got  %.*s\nwant %s", (int)len, (const char *)d, want);
	/* Decoded: the raw name back, and the same bytes once encoded again. */
	rix_tree *t;
	MUST(rix_tree_decode(&t, d, len));
	assert_int_equal(rix_tree_count(t), 1);
	assert_int_equal(rix_tree_node(t, 0)->name_len, n.name_len);
	assert_memory_equal(rix_tree_node(t, 0)->name, n.name, n.name_len);
	assert_int_equal(rix_tree_node(t, 0)->ctime.nsec, 5);
	assert_int_equal(rix_tree_node(t, 0)->ctime.utc_offset, -7200);
	assert_int_equal(rix_tree_node(t, 0)->ctime.sec, 1700000000);
	rix_tree_free(t);
	static const char *const bad[] = { "{}", "{\"nodes\":[{\"type\":\"file\"}]}", "[1]",
					   "{\"nodes\":[{\"name\":\"a\\\\q\",\"type\":\"file\",\"mtime\":\"x\"}]}" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(rix_tree_decode(&t, (const uint8_t *)bad[i], strlen(bad[i])), RIX_ECORRUPT);
	/* Names no directory entry has (the encoder refuses them; a restore must never see "../x"),
	 * raw or Go-escaped: refused, where "..." and ".a" are names like any other. */
	static const char *const badnames[] = { ".", "..", "a/b", "..\\\\x2fetc", "\\\\x00", "a\\\\000b", "\\\\x2e\\\\x2e" };
	for (size_t i = 0; i < sizeof(badnames) / sizeof(badnames[0]); i++) {
		char js[128];
		snprintf(js, sizeof(js), "{\"nodes\":[{\"name\":\"%s\",\"type\":\"file\",\"content\":[]}]}\n", badnames[i]);
		t = (rix_tree *)1;
		if (rix_tree_decode(&t, (const uint8_t *)js, strlen(js)) != RIX_ECORRUPT)
			fail_msg("accepted %s", js);
		assert_null(t);
	}
	static const char *const goodnames[] = { "...", ".a", "a..", "\\\\x2ea" };
	for (size_t i = 0; i < sizeof(goodnames) / sizeof(goodnames[0]); i++) {
		char js[128];
		snprintf(js, sizeof(js), "{\"nodes\":[{\"name\":\"%s\",\"type\":\"file\",\"content\":[]}]}\n", goodnames[i]);
		MUST(rix_tree_decode(&t, (const uint8_t *)js, strlen(js)));
		rix_tree_free(t);
	}
	/* Order and names. */
	rix_node m = n;
	assert_int_equal(rix_tree_enc_add(e, &m), RIX_EINVAL); /* the same name again */
	m.name = "..";
	m.name_len = 2;
	assert_int_equal(rix_tree_enc_add(e, &m), RIX_EINVAL);
	m.name = "z/y";
	m.name_len = 3;
	assert_int_equal(rix_tree_enc_add(e, &m), RIX_EINVAL);
	m.name = "zz";
	m.name_len = 2;
	m.type = (rix_node_type)99;
	assert_int_equal(rix_tree_enc_add(e, &m), RIX_EINVAL);
	/* A symlink whose target is not UTF-8: U+FFFD in linktarget, the raw bytes in
	 * linktarget_raw (restic 0.17 and later; 0.14 writes linktarget alone). */
	rix_tree_enc_reset(e);
	rix_node l = { .name = "l", .name_len = 1, .type = RIX_NODE_SYMLINK, .mode = RIX_GOMODE_SYMLINK | 0777,
		       .linktarget = "target\xff", .linktarget_len = 7 };
	MUST(rix_tree_enc_add(e, &l));
	MUST(rix_tree_enc_finish(&d, &len, e));
	const char *lt = "\"linktarget\":\"target\\ufffd\",\"linktarget_raw\":\"dGFyZ2V0/w==\",\"content\":null}";
	assert_non_null(memmem(d, len, lt, strlen(lt)));
	rix_tree_enc_reset(e);
	MUST(rix_tree_enc_finish(&d, &len, e));
	assert_int_equal(len, strlen("{\"nodes\":[]}\n"));
	assert_memory_equal(d, "{\"nodes\":[]}\n", len);
	rix_tree_enc_free(e);
	assert_int_equal(rix_gomode_from_st_mode(040755), 2147484141u);
	/* Times compare by their instants, whatever zone they were written in. */
	rix_time a, b, c;
	MUST(rix_time_parse(&a, "2023-11-14T23:13:20+01:00"));
	MUST(rix_time_parse(&b, "2023-11-14T22:13:20Z"));
	MUST(rix_time_parse(&c, "2023-11-14T18:13:20.5-04:00"));
	assert_int_equal(rix_time_cmp(&a, &b), 0);
	assert_true(rix_time_cmp(&c, &b) > 0 && strcmp("2023-11-14T18", "2023-11-14T22") < 0); /* later, though it sorts first */
	assert_int_equal(c.nsec, 500000000);
	assert_int_equal(rix_time_parse(&a, "2023-11-14T22:13:20"), -1);
	assert_int_equal(rix_time_parse(&a, "2023-11-14T22:13:20Zx"), -1);
}

/*
 * rix_time_local and rix_time_now in several zones (one with half-hour offsets, one with summer
 * time, one 30 minutes apart in summer): the offset and wall time `date` prints for that instant.
 */
static void test_time_local(void **state)
{
	(void)state;
	static const char *const zones[] = { "UTC", "Asia/Kolkata", "America/New_York", "Australia/Lord_Howe" };
	static const int64_t at[] = { 0, 1690000000, 1700000000, -86400 * 365 };
	const char *old = getenv("TZ");
	char *saved = old != NULL ? strdup(old) : NULL;
	for (size_t z = 0; z < sizeof(zones) / sizeof(zones[0]); z++) {
		setenv("TZ", zones[z], 1);
		tzset();
		for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
			rix_time t = rix_time_local(at[i], 7);
			char got[RIX_TIME_MAX], *want;
			size_t n;
			rix_time_format(got, &t);
			assert_int_equal(rix_test_run(&want, &n, "TZ=%s date -d @%lld '+%%Y-%%m-%%dT%%H:%%M:%%S.000000007%%:z'",
						     zones[z], (long long)at[i]),
					 0);
			want[strcspn(want, "\n")] = '\0';
			if (strcmp(want + strlen(want) - 6, "+00:00") == 0) /* Go writes UTC as Z */
				strcpy(want + strlen(want) - 6, "Z");
			assert_string_equal(got, want);
			assert_int_equal(t.sec, at[i]);
			free(want);
		}
		/* CLOCK_REALTIME on both sides: time(3) reads the coarse clock, which can still be in
		 * the second before the one rix_time_now read (a failure seen under ASan) */
		struct timespec before, after;
		clock_gettime(CLOCK_REALTIME, &before);
		rix_time now = rix_time_now();
		clock_gettime(CLOCK_REALTIME, &after);
		assert_true(now.sec >= before.tv_sec && now.sec <= after.tv_sec);
		assert_int_equal(now.utc_offset, rix_time_local(now.sec, 0).utc_offset);
	}
	if (saved != NULL)
		setenv("TZ", saved, 1);
	else
		unsetenv("TZ");
	tzset();
	free(saved);
}

/* A tree of one node: {"nodes":[{"name":"n","type":"file",<members>}]} decoded; its return code. */
static int decode_one(rix_tree **t, const char *members)
{
	char js[1024];
	snprintf(js, sizeof(js), "{\"nodes\":[{\"name\":\"n\",\"type\":\"file\"%s%s}]}\n", members[0] ? "," : "", members);
	*t = (rix_tree *)1;
	int rc = rix_tree_decode(t, (const uint8_t *)js, strlen(js));
	if (rc != 0)
		assert_null(*t);
	return rc;
}

/*
 * The decoder reads what Go's encoding/json reads into restic's Node, and what rix writes it
 * reads back: numbers past 2^63 (inode numbers of some file systems), Go's string unescaping,
 * unknown keys skipped; refused: what Go refuses for the field (a sign, a fraction, a value
 * too wide, another JSON type), times Go would not parse, keys restic reads by folding their
 * case, duplicated keys, trailing bytes.
 */
static void test_decode_like_go(void **state)
{
	(void)state;
	rix_tree *t;
	/* Every number at its widest, and back out byte for byte. */
	const char *wide = "{\"nodes\":[{\"name\":\"w\",\"type\":\"chardev\",\"mode\":4294967295,\"mtime\":\"2024-02-29T23:59:59.999999999-12:45\","
			   "\"atime\":\"0000-01-01T00:00:00Z\",\"ctime\":\"9999-12-31T23:59:59+14:00\",\"uid\":4294967295,\"gid\":4294967295,"
			   "\"inode\":18446744073709551615,\"device_id\":18446744073709551614,\"size\":9223372036854775808,"
			   "\"links\":18446744073709551615,\"device\":18446744073709551615,\"content\":null}]}\n";
	MUST(rix_tree_decode(&t, (const uint8_t *)wide, strlen(wide)));
	const rix_node *n = rix_tree_node(t, 0);
	assert_int_equal(n->mode, UINT32_MAX);
	assert_int_equal(n->uid, UINT32_MAX);
	assert_true(n->inode == UINT64_MAX && n->device_id == UINT64_MAX - 1 && n->size == (UINT64_C(1) << 63) &&
		    n->links == UINT64_MAX && n->device == UINT64_MAX);
	assert_int_equal(n->mtime.utc_offset, -(12 * 3600 + 45 * 60));
	assert_int_equal(n->mtime.nsec, 999999999);
	rix_tree_enc *e;
	MUST(rix_tree_enc_new(&e));
	MUST(rix_tree_enc_add(e, n));
	const uint8_t *d;
	size_t len;
	MUST(rix_tree_enc_finish(&d, &len, e));
	if (len != strlen(wide) || memcmp(d, wide, len) != 0)
		fail_msg("got  %.*s\nwant %s", (int)len, (const char *)d, wide);
	rix_tree_enc_free(e);
	rix_tree_free(t);

	/* Strings as Go unescapes them: \u0000 kept (a C string ends there), a pair joined, a lone
	 * surrogate and a raw invalid byte are U+FFFD, \/ is '/'. */
	MUST(decode_one(&t, "\"user\":\"a\\u00e9\\ud83d\\ude00\\ud800x\\udc00\\/\xff\"," "\"linktarget\":\"t\\u0000u\",\"content\":[]"));
	n = rix_tree_node(t, 0);
	assert_string_equal(n->user, "a\xc3\xa9\xf0\x9f\x98\x80\xef\xbf\xbdx\xef\xbf\xbd/\xef\xbf\xbd");
	assert_int_equal(n->linktarget_len, 3);
	assert_memory_equal(n->linktarget, "t\0u", 3);
	assert_non_null(n->content);
	assert_int_equal(n->content_len, 0);
	rix_tree_free(t);
	/* null is Go's "leave it": zero, empty, absent. */
	MUST(decode_one(&t, "\"mode\":null,\"mtime\":null,\"uid\":null,\"user\":null,\"inode\":null,\"linktarget\":null,"
			    "\"linktarget_raw\":null,\"extended_attributes\":null,\"content\":null,\"subtree\":null,\"error\":null"));
	n = rix_tree_node(t, 0);
	assert_true(n->mode == 0 && n->mtime.sec == 0 && n->user == NULL && n->linktarget == NULL && n->content == NULL &&
		    n->subtree == NULL && n->nxattrs == 0 && n->error == NULL);
	rix_tree_free(t);
	/* Unknown keys are skipped, whatever they hold (restic 0.17's generic_attributes). */
	MUST(decode_one(&t, "\"generic_attributes\":{\"windows.attrs\":\"AAAA\",\"x\":[1,{\"y\":null}]},\"zz\":-1.5e3"));
	rix_tree_free(t);
	const char *unknown_top = "{\"future\":[{}],\"nodes\":[]}";
	MUST(rix_tree_decode(&t, (const uint8_t *)unknown_top, strlen(unknown_top)));
	assert_int_equal(rix_tree_count(t), 0);
	rix_tree_free(t);
	/* xattrs: a null value, an empty one, a null element (Go: a nameless, valueless one). */
	MUST(decode_one(&t, "\"extended_attributes\":[{\"name\":\"user.a\",\"value\":null},{\"name\":\"user.b\",\"value\":\"\"},"
			    "{\"value\":\"AAE=\",\"name\":\"user.c\"},null]"));
	n = rix_tree_node(t, 0);
	assert_int_equal(n->nxattrs, 4);
	assert_null(n->xattrs[0].value);
	assert_non_null(n->xattrs[1].value);
	assert_int_equal(n->xattrs[1].len, 0);
	assert_int_equal(n->xattrs[2].len, 2);
	assert_memory_equal(n->xattrs[2].value, "\0\1", 2);
	assert_string_equal(n->xattrs[3].name, "");
	rix_tree_free(t);

	static const char *const refused[] = {
		"\"size\":-1", "\"size\":-0", "\"size\":1.0", "\"size\":1e3", "\"size\":18446744073709551616",
		"\"size\":\"1\"", "\"size\":true", "\"size\":01", "\"mode\":4294967296", "\"uid\":4294967296",
		"\"gid\":-5", "\"inode\":99999999999999999999", "\"user\":5", "\"user\":[]",
		"\"mtime\":\"2023-02-29T00:00:00Z\"", "\"mtime\":\"2024-13-01T00:00:00Z\"", "\"mtime\":\"2024-01-01T24:00:00Z\"",
		"\"mtime\":\"2024-01-01T00:60:00Z\"", "\"mtime\":\"2024-01-01T00:00:60Z\"", "\"mtime\":\"2024-01-01T00:00:00+24:00\"",
		"\"mtime\":\"2024-01-01T00:00:00+01:60\"", "\"mtime\":\"2024-01-01T00:00:00.Z\"", "\"mtime\":\"2024-01-01T00:00:00\"",
		"\"mtime\":\" 2024-01-01T00:00:00Z\"", "\"mtime\":\"+024-01-01T00:00:00Z\"", "\"mtime\":\"2024-1-01T00:00:00Z\"",
		"\"mtime\":\"2024-01-01T00:00:00Z \"", "\"mtime\":\"2024-01-01t00:00:00Z\"", "\"mtime\":5",
		"\"mtime\":\"2024-01-01T00:00:00\\u005a\"", "\"content\":[null]", "\"content\":[\"00\"]", "\"content\":{}",
		"\"content\":\"\"", "\"subtree\":\"zz00000000000000000000000000000000000000000000000000000000000000\"",
		"\"subtree\":5", "\"linktarget_raw\":\"AA\"", "\"linktarget_raw\":\"!!!!\"", "\"extended_attributes\":{}",
		"\"extended_attributes\":[5]", "\"extended_attributes\":[{\"name\":5}]", "\"Size\":1", "\"siZe\":1",
		"\"\\u0073ize\":1,\"size\":2", "\"size\":1,\"size\":2", "\"name\":\"m\"", "\"type\":\"dir\"",
	};
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		int rc = decode_one(&t, refused[i]);
		if (rc != RIX_ECORRUPT)
			fail_msg("%s: %d, want RIX_ECORRUPT", refused[i], rc);
		assert_true(strncmp(rix_error_last(), "tree: ", 6) == 0);
	}
	static const char *const bad_trees[] = {
		"", " ", "{", "{\"nodes\":[]", "{\"nodes\":[]}x", "{\"nodes\":[]}{}", "[]", "null", "{\"nodes\":null}",
		"{\"nodes\":{}}", "{\"nodes\":[null]}", "{\"nodes\":[],\"nodes\":[]}", "{\"Nodes\":[]}", "{}",
		"{\"nodes\":[{\"type\":\"file\"}]}", "{\"nodes\":[{\"name\":\"a\"}]}", "{\"nodes\":[{\"name\":\"a\",\"type\":\"door\"}]}",
		"{\"nodes\":[{\"name\":\"a\\n\",\"type\":\"file\"}]}", /* Go's Unquote refuses a raw newline */
		"{\"nodes\":[{\"name\":\"b\",\"type\":\"file\"},{\"name\":\"a\",\"type\":\"file\"}]}",
		"{\"nodes\":[{\"name\":\"a\",\"type\":\"file\"},{\"name\":\"a\",\"type\":\"file\"}]}",
		"{\"nodes\":[{\"name\":\"\\\\UFFFFFFFF\",\"type\":\"file\"}]}",
	};
	for (size_t i = 0; i < sizeof(bad_trees) / sizeof(bad_trees[0]); i++) {
		t = (rix_tree *)1;
		int rc = rix_tree_decode(&t, (const uint8_t *)bad_trees[i], strlen(bad_trees[i]));
		if (rc != RIX_ECORRUPT)
			fail_msg("%s: %d, want RIX_ECORRUPT", bad_trees[i], rc);
		assert_null(t);
	}
	/* Nesting past the scanner's limit inside an unknown key is refused, not recursed into. */
	char deep[4096];
	size_t k = (size_t)snprintf(deep, sizeof(deep), "{\"nodes\":[],\"x\":");
	for (int i = 0; i < 1000; i++)
		deep[k++] = '[';
	for (int i = 0; i < 1000; i++)
		deep[k++] = ']';
	deep[k++] = '}';
	assert_int_equal(rix_tree_decode(&t, (const uint8_t *)deep, k), RIX_ECORRUPT);
}

/* Everything one node needs, kept alive while the tree is encoded. */
struct held {
	rix_node n;
	char name[512];
	char user[64], group[64];
	char target[512];
	rix_xattr xa[8];
	char xname[8][64];
	uint8_t xval[8][64];
	rix_id content;
	rix_id subtree;
};

static int by_bytes(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name); /* strcmp compares as unsigned bytes */
}

static rix_time ts(struct timespec t)
{
	return (rix_time){ t.tv_sec, (uint32_t)t.tv_nsec, 0 }; /* restic runs with TZ=UTC here */
}

/* The tree of dir, as restic 0.14 fills nodes (fillExtra); its ID into *id, its bytes too. */
static void encode_dir(const char *dir, rix_id *id, uint8_t **bytes, size_t *blen)
{
	struct dirent **ents;
	int ne = scandir(dir, &ents, NULL, by_bytes);
	assert_true(ne >= 0);
	struct held *h = calloc((size_t)ne, sizeof(*h));
	rix_tree_enc *e;
	MUST(rix_tree_enc_new(&e));
	int k = 0;
	for (int i = 0; i < ne; i++) {
		const char *nm = ents[i]->d_name;
		if (strcmp(nm, ".") == 0 || strcmp(nm, "..") == 0)
			continue;
		char path[8192];
		snprintf(path, sizeof(path), "%s/%s", dir, nm);
		struct stat st;
		assert_int_equal(lstat(path, &st), 0);
		struct held *x = &h[k++];
		rix_node *n = &x->n;
		snprintf(x->name, sizeof(x->name), "%s", nm);
		n->name = x->name;
		n->name_len = strlen(nm);
		n->mode = rix_gomode_from_st_mode(st.st_mode);
		n->mtime = ts(st.st_mtim);
		n->atime = n->mtime; /* restic stores atime only with --with-atime */
		n->ctime = ts(st.st_ctim);
		n->uid = st.st_uid;
		n->gid = st.st_gid;
		struct passwd *pw = getpwuid(st.st_uid);
		struct group *gr = getgrgid(st.st_gid);
		snprintf(x->user, sizeof(x->user), "%s", pw ? pw->pw_name : "");
		snprintf(x->group, sizeof(x->group), "%s", gr ? gr->gr_name : "");
		n->user = x->user;
		n->group = x->group;
		n->inode = st.st_ino;
		n->device_id = st.st_dev;
		switch (st.st_mode & S_IFMT) {
		case S_IFREG: {
			n->type = RIX_NODE_FILE;
			n->size = (uint64_t)st.st_size;
			n->links = st.st_nlink;
			size_t fl;
			uint8_t *data = rix_test_read_file(path, &fl);
			assert_non_null(data);
			assert_true(fl < RIX_CHUNK_MIN); /* one chunk: its SHA-256 */
			if (fl > 0) {
				rix_sha256(&x->content, data, fl);
				n->content = &x->content;
				n->content_len = 1;
			}
			free(data);
			break;
		}
		case S_IFDIR: {
			n->type = RIX_NODE_DIR;
			uint8_t *sb;
			size_t sl;
			encode_dir(path, &x->subtree, &sb, &sl);
			free(sb);
			n->subtree = &x->subtree;
			break;
		}
		case S_IFLNK: {
			n->type = RIX_NODE_SYMLINK;
			n->links = st.st_nlink;
			ssize_t tl = readlink(path, x->target, sizeof(x->target));
			assert_true(tl > 0);
			n->linktarget = x->target;
			n->linktarget_len = (size_t)tl;
			break;
		}
		case S_IFIFO:
			n->type = RIX_NODE_FIFO;
			break;
		default:
			fail_msg("unexpected entry %s", path);
		}
		if (n->type != RIX_NODE_SYMLINK) { /* xattrs, in the kernel's order, as restic lists them */
			char list[1024];
			ssize_t ll = llistxattr(path, list, sizeof(list));
			for (ssize_t p = 0; ll > 0 && p < ll; p += (ssize_t)strlen(list + p) + 1) {
				size_t j = n->nxattrs;
				assert_true(j < 8); /* held's arrays: a host with more xattrs a file needs more */
				snprintf(x->xname[j], sizeof(x->xname[j]), "%s", list + p);
				ssize_t vl = lgetxattr(path, x->xname[j], x->xval[j], sizeof(x->xval[j]));
				assert_true(vl >= 0);
				x->xa[j] = (rix_xattr){ x->xname[j], x->xval[j], (size_t)vl };
				n->nxattrs++;
			}
			n->xattrs = x->xa;
		}
		MUST(rix_tree_enc_add(e, n));
	}
	const uint8_t *d;
	size_t len;
	MUST(rix_tree_enc_finish(&d, &len, e));
	*bytes = malloc(len);
	memcpy(*bytes, d, len);
	*blen = len;
	rix_sha256(id, d, len);
	rix_tree_enc_free(e);
	for (int i = 0; i < ne; i++)
		free(ents[i]);
	free(ents);
	free(h);
}

static char *restic_out(const char *repo, const char *args, size_t *len)
{
	char *out;
	int rc = rix_test_run(&out, len, "TZ=UTC RESTIC_PASSWORD=%s restic --no-cache -q -r '%s' %s", PW, repo, args);
	if (rc != 0)
		fail_msg("restic %s: exit %d", args, rc);
	return out;
}

/* The subtree ID of the node named name in tree id (restic's bytes), or "" if none. */
static void child_tree(const char *repo, const char *id, const char *name, char out[65])
{
	char args[200];
	snprintf(args, sizeof(args), "cat blob %s", id);
	size_t len;
	char *t = restic_out(repo, args, &len);
	json_t *j = json_loadb(t, len, 0, NULL);
	free(t);
	out[0] = '\0';
	size_t i;
	json_t *node;
	json_array_foreach(json_object_get(j, "nodes"), i, node)
	{
		if (strcmp(json_string_value(json_object_get(node, "name")), name) == 0 &&
		    json_object_get(node, "subtree") != NULL)
			snprintf(out, 65, "%s", json_string_value(json_object_get(node, "subtree")));
	}
	json_decref(j);
}

static void set_times(const char *path)
{
	/* mtime in the past, atime in the future: reading the file (restic does) cannot move it. */
	struct timespec t[2] = { { time(NULL) + 86400, 123456789 }, { 1600000000, 987654321 } };
	assert_int_equal(utimensat(AT_FDCWD, path, t, AT_SYMLINK_NOFOLLOW), 0);
}

/* t's nodes encoded again give exactly want[0..len). */
static void assert_reencodes(const rix_tree *t, const uint8_t *want, size_t len)
{
	rix_tree_enc *e;
	MUST(rix_tree_enc_new(&e));
	for (size_t i = 0; i < rix_tree_count(t); i++)
		MUST(rix_tree_enc_add(e, rix_tree_node(t, i)));
	const uint8_t *again;
	size_t alen;
	MUST(rix_tree_enc_finish(&again, &alen, e));
	assert_int_equal(alen, len);
	assert_memory_equal(again, want, len);
	rix_tree_enc_free(e);
}

/* A tree of 600 nodes (names, users, link targets, xattrs, a content list of 20000 IDs: pieces
 * of every size the decoder's arena hands out, across many of its blocks), then decoded again and
 * encoded byte for byte; and decoded with each allocation failing in turn. */
struct big_tree {
	const uint8_t *json;
	size_t len;
};

static int decode_big(void *arg)
{
	struct big_tree *b = arg;
	rix_tree *t;
	int rc = rix_tree_decode(&t, b->json, b->len);
	if (rc == 0)
		rix_tree_free(t);
	return rc;
}

static void test_decode_arena(void **state)
{
	(void)state;
	enum { NODES = 600, IDS = 20000 };
	rix_id *ids = calloc(IDS, sizeof(*ids));
	assert_non_null(ids);
	for (size_t i = 0; i < IDS; i++)
		for (size_t k = 0; k < RIX_ID_SIZE; k++)
			ids[i].b[k] = (uint8_t)(i * 131 + k * 7 + (i >> 8));
	uint8_t value[300];
	for (size_t k = 0; k < sizeof(value); k++)
		value[k] = (uint8_t)(k * 37);
	rix_tree_enc *e;
	MUST(rix_tree_enc_new(&e));
	for (int i = 0; i < NODES; i++) {
		char name[80], user[40], target[200];
		snprintf(name, sizeof(name), "n%05d-%.*s", i, i % 60, "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefgh");
		snprintf(user, sizeof(user), "user%d", i % 17);
		rix_xattr xa[2] = { { "user.a", value, (size_t)(i % 300) }, { "user.b", value, 3 } };
		rix_node n = { 0 };
		n.name = name;
		n.name_len = strlen(name);
		n.user = user;
		n.group = "g";
		if (i % 3 == 0) {
			n.type = RIX_NODE_SYMLINK;
			n.mode = 0777;
			memset(target, 'x', sizeof(target));
			n.linktarget = target;
			n.linktarget_len = (size_t)(i % 200);
		} else {
			n.type = RIX_NODE_FILE;
			n.mode = 0644;
			n.content = ids + (i == 1 ? 0 : i);
			n.content_len = i == 1 ? IDS : (size_t)(i % 40);
		}
		n.xattrs = xa;
		n.nxattrs = i % 4 == 0 ? 0 : (size_t)(i % 2 + 1);
		MUST(rix_tree_enc_add(e, &n));
	}
	const uint8_t *json;
	size_t len;
	MUST(rix_tree_enc_finish(&json, &len, e));
	rix_tree *t;
	MUST(rix_tree_decode(&t, json, len));
	assert_int_equal(rix_tree_count(t), NODES);
	assert_int_equal(rix_tree_node(t, 1)->content_len, IDS);
	assert_memory_equal(rix_tree_node(t, 1)->content, ids, IDS * sizeof(*ids));
	assert_reencodes(t, json, len);
	rix_tree_free(t);
	struct big_tree b = { json, len };
	rix_test_oom_loop("rix_tree_decode (600 nodes)", decode_big, &b, 100000);
	rix_tree_enc_free(e);
	free(ids);
}

/* rix_json_quote: encoding/json's escapes (what the tree encoder writes), snprintf's contract. */
static void test_json_quote(void **state)
{
	(void)state;
	const char in[] = "a\"b\\<>&\n\x01\xff\xc3\xa9\xe2\x80\xa8\xc0\xaf\xed\xa0\x80z";
	const char *want = "\"a\\\"b\\\\\\u003c\\u003e\\u0026\\n\\u0001\\ufffd\xc3\xa9\\u2028\\ufffd\\ufffd"
			   "\\ufffd\\ufffd\\ufffdz\"";
	char out[128];
	size_t n = rix_json_quote(out, sizeof(out), in, sizeof(in) - 1);
	assert_string_equal(out, want);
	assert_int_equal(n, strlen(want));
	assert_true(n <= RIX_JSON_QUOTE_MAX(sizeof(in) - 1));
	/* Too small: truncated, NUL-terminated, the whole length returned. */
	char small[8];
	assert_int_equal(rix_json_quote(small, sizeof(small), in, sizeof(in) - 1), n);
	assert_string_equal(small, "\"a\\\"b\\\\");
	assert_int_equal(rix_json_quote(NULL, 0, in, sizeof(in) - 1), n);
	/* What jansson reads back: U+FFFD for each invalid byte, the rest as it was. */
	json_t *j = json_loads(out, JSON_DECODE_ANY, NULL);
	assert_non_null(j);
	assert_string_equal(json_string_value(j), "a\"b\\<>&\n\x01\xef\xbf\xbd\xc3\xa9\xe2\x80\xa8\xef\xbf\xbd\xef\xbf\xbd"
						  "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdz");
	json_decref(j);
}

static void test_against_restic(void **state)
{
	(void)state;
	rix_test_need_restic();
	char *work = rix_test_new_dir("rix-tree");
	char src[4200], sub[4300], repo[4200], p[4400];
	snprintf(src, sizeof(src), "%s/src", work);
	snprintf(sub, sizeof(sub), "%s/sub", src);
	snprintf(repo, sizeof(repo), "%s/repo", work);
	assert_int_equal(mkdir(src, 0755), 0);
	assert_int_equal(mkdir(sub, 0750), 0);
	rix_test_put_file(src, "a", "hello", 5);
	rix_test_put_file(src, "empty", "", 0);
	rix_test_put_file(src, "odd <>&\"\\ name", "x", 1);
	rix_test_put_file(src, "tab\tnl\nname", "y", 1);
	rix_test_put_file(src, "caf\xc3\xa9", "z", 1);
	rix_test_put_file(src, "bad\xff\xfe", "w", 1);
	/* Bytes F5..FF never start UTF-8, whatever follows (Go: one \x escape each). */
	rix_test_put_file(src, "hi\xff\x96\x96", "v", 1);
	rix_test_put_file(src, "hi\xf5\x80\x80\x80", "u", 1);
	char longname[201];
	memset(longname, 'L', 200);
	longname[200] = '\0';
	rix_test_put_file(src, longname, "l", 1);
	rix_test_put_file(sub, "inner", "inner file", 10);
	snprintf(p, sizeof(p), "%s/link", src);
	assert_int_equal(symlink("a", p), 0);
	snprintf(p, sizeof(p), "%s/fifo", src);
	assert_int_equal(mkfifo(p, 0640), 0);
	char a[4400];
	snprintf(a, sizeof(a), "%s/a", src);
	snprintf(p, sizeof(p), "%s/a-hard", src);
	assert_int_equal(link(a, p), 0);
	int xattr = lsetxattr(a, "user.rix", "value\x01", 6, 0) == 0; /* where the file system takes them */
	snprintf(p, sizeof(p), "%s/setuid", src);
	rix_test_put_file(src, "setuid", "s", 1);
	assert_int_equal(chmod(p, 04755), 0);
	/* Times last, children before their directories. */
	const char *names[] = { "a", "empty", "odd <>&\"\\ name", "tab\tnl\nname", "caf\xc3\xa9", "bad\xff\xfe", longname,
				"hi\xff\x96\x96", "hi\xf5\x80\x80\x80", "sub/inner", "link", "fifo", "setuid", "sub" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", src, names[i]);
		set_times(p);
	}
	set_times(src);
	assert_int_equal(rix_test_run(NULL, NULL, "TZ=UTC RESTIC_PASSWORD=%s restic --no-cache -q -r '%s' init >/dev/null", PW, repo),
			 0);
	assert_int_equal(rix_test_run(NULL, NULL, "cd '%s' && TZ=UTC RESTIC_PASSWORD=%s restic --no-cache -q -r '%s' backup . >/dev/null",
				      src, PW, repo),
			 0);
	/* restic's tree for src: `backup .` makes it the snapshot's root. */
	size_t len;
	char *s = restic_out(repo, "snapshots --json", &len);
	json_t *snaps = json_loadb(s, len, 0, NULL);
	free(s);
	char id[65];
	snprintf(id, sizeof(id), "%s", json_string_value(json_object_get(json_array_get(snaps, 0), "tree")));
	json_decref(snaps);
	char subid[65];
	child_tree(repo, id, "sub", subid);
	assert_true(subid[0] != '\0');
	/* rix's encoding of the same directory: the same bytes, so the same ID. */
	rix_id mine;
	uint8_t *bytes;
	size_t blen;
	encode_dir(src, &mine, &bytes, &blen);
	char args[100];
	snprintf(args, sizeof(args), "cat blob %s", id);
	char *theirs = restic_out(repo, args, &len);
	if (len != blen || memcmp(theirs, bytes, len) != 0) {
		rix_test_put_file(work, "restic.json", theirs, len); /* both kept for a look, then removed */
		rix_test_put_file(work, "rix.json", bytes, blen);
		rix_test_run(NULL, NULL, "cp '%s/restic.json' '%s/rix.json' \"${TMPDIR:-/tmp}\"/ 2>/dev/null", work, work);
		fail_msg("the tree of src differs from restic's (xattr %d): see restic.json and rix.json in $TMPDIR", xattr);
	}
	char hex[65];
	rix_id_to_hex(hex, &mine);
	assert_string_equal(hex, id);
	/* Decoded and encoded again: the same bytes (raw names, times with their zones, xattrs). */
	rix_tree *dt;
	MUST(rix_tree_decode(&dt, (const uint8_t *)theirs, len));
	assert_reencodes(dt, (const uint8_t *)theirs, len);
	assert_non_null(rix_tree_find(dt, "bad\xff\xfe", 5));
	assert_non_null(rix_tree_find(dt, "tab\tnl\nname", 11));
	assert_null(rix_tree_find(dt, "nope", 4));
	rix_tree_free(dt);
	free(theirs);
	free(bytes);
	/* The subtree's ID in restic's tree is the one rix computes for sub. */
	rix_id mysub;
	encode_dir(sub, &mysub, &bytes, &blen);
	free(bytes);
	rix_id_to_hex(hex, &mysub);
	assert_string_equal(hex, subid);
	rix_test_free_dir(work);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_escapes),
		cmocka_unit_test(test_time_local),
		cmocka_unit_test(test_decode_like_go),
		cmocka_unit_test(test_json_quote),
		cmocka_unit_test(test_decode_arena),
		cmocka_unit_test(test_against_restic),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
