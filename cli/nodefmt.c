/*
 * cli/nodefmt.c — nodes and snapshots printed as restic 0.14 prints them (ls, find, diff, dump):
 * Go's FileMode and Time strings, restic's long listing, ls's JSON lines, and restic's path
 * helpers (path.Clean, fs.HasPathPrefix) for the directory arguments (cli.h).
 */
#include "cli.h"

const char *node_type_name(rix_node_type t)
{
	static const char *const names[] = { "file", "dir", "symlink", "dev", "chardev", "fifo", "socket" };
	return (unsigned)t < sizeof(names) / sizeof(names[0]) ? names[t] : "";
}

/* Go's os.FileMode.String(): "dalTLDpSugct?" for bits 31..19 (or '-'), then rwxrwxrwx. */
void go_filemode(char out[GO_FILEMODE_MAX], uint32_t m)
{
	static const char letters[] = "dalTLDpSugct?";
	size_t w = 0;
	for (int i = 0; letters[i] != '\0'; i++)
		if (m & (1u << (31 - i)))
			out[w++] = letters[i];
	if (w == 0)
		out[w++] = '-';
	for (int i = 0; i < 9; i++)
		out[w++] = (m & (1u << (8 - i))) ? "rwxrwxrwx"[i] : '-';
	out[w] = '\0';
}

/* Go's Time.Format("2006-01-02 15:04:05") of t in the local zone (Time.Local). */
void local_time(char out[64], const rix_time *t)
{
	time_t s = (time_t)t->sec;
	struct tm tm;
	if (localtime_r(&s, &tm) == NULL)
		memset(&tm, 0, sizeof(tm));
	snprintf(out, 64, "%04d-%02d-%02d %02d:%02d:%02d", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
		 tm.tm_min, tm.tm_sec);
}

/*
 * Go's Time.String() of a time read from JSON: "2006-01-02 15:04:05.999999999 -0700 MST" in the
 * zone it was written in. The zone's name as Go's time.Parse gives it: UTC for offset 0, the local
 * zone's abbreviation when the offset is the local one at that instant, else the offset again.
 */
void go_time_string(char *out, size_t cap, const rix_time *t)
{
	time_t s = (time_t)(t->sec + t->utc_offset);
	struct tm tm;
	gmtime_r(&s, &tm);
	char frac[16] = "";
	if (t->nsec != 0) {
		snprintf(frac, sizeof(frac), ".%09u", t->nsec);
		for (size_t k = strlen(frac); k > 1 && frac[k - 1] == '0'; k--)
			frac[k - 1] = '\0';
	}
	int off = t->utc_offset / 60, a = off < 0 ? -off : off;
	char num[32], name[64];
	snprintf(num, sizeof(num), "%c%02d%02d", off < 0 ? '-' : '+', a / 60, a % 60);
	snprintf(name, sizeof(name), "%s", num);
	time_t at = (time_t)t->sec;
	struct tm lt;
	if (t->utc_offset == 0)
		snprintf(name, sizeof(name), "UTC");
	else if (localtime_r(&at, &lt) != NULL && lt.tm_gmtoff == t->utc_offset && lt.tm_zone != NULL)
		snprintf(name, sizeof(name), "%s", lt.tm_zone);
	snprintf(out, cap, "%04d-%02d-%02d %02d:%02d:%02d%s %s %s", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
		 tm.tm_hour, tm.tm_min, tm.tm_sec, frac, num, name);
}

void put_time_json(const rix_time *t)
{
	char s[RIX_TIME_MAX];
	rix_time_format(s, t);
	printf("\"%s\"", s);
}

/* restic's formatNode: the path, or with long "mode uid gid size mtime path[ -> target]". */
void print_node(const char *path, const rix_node *n, bool long_format)
{
	if (!long_format) {
		fputs(path, stdout);
		putchar('\n');
		return;
	}
	static const uint32_t type_bits[] = { 0, RIX_GOMODE_DIR, RIX_GOMODE_SYMLINK, RIX_GOMODE_DEVICE,
					      RIX_GOMODE_DEVICE | RIX_GOMODE_CHAR_DEVICE, RIX_GOMODE_NAMED_PIPE,
					      RIX_GOMODE_SOCKET };
	char mode[GO_FILEMODE_MAX], when[64];
	go_filemode(mode, n->mode | ((unsigned)n->type < 7 ? type_bits[n->type] : 0));
	local_time(when, &n->mtime);
	printf("%s %5u %5u %6llu %s %s", mode, n->uid, n->gid, (unsigned long long)n->size, when, path);
	if (n->type == RIX_NODE_SYMLINK) {
		fputs(" -> ", stdout);
		fwrite(n->linktarget, 1, n->linktarget_len, stdout);
	}
	putchar('\n');
}

/* restic 0.14's ls --json node line (lsNodeJSON). */
void print_node_json(const char *path, const rix_node *n)
{
	char mode[GO_FILEMODE_MAX];
	fputs("{\"name\":", stdout);
	fput_json_bytes(stdout, n->name, n->name_len);
	printf(",\"type\":\"%s\",\"path\":", node_type_name(n->type));
	put_json_string(path);
	printf(",\"uid\":%u,\"gid\":%u", n->uid, n->gid);
	if (n->type == RIX_NODE_FILE)
		printf(",\"size\":%llu", (unsigned long long)n->size);
	if (n->mode != 0)
		printf(",\"mode\":%u", n->mode);
	go_filemode(mode, n->mode);
	printf(",\"permissions\":\"%s\",\"mtime\":", mode);
	put_time_json(&n->mtime);
	fputs(",\"atime\":", stdout);
	put_time_json(&n->atime);
	fputs(",\"ctime\":", stdout);
	put_time_json(&n->ctime);
	fputs(",\"struct_type\":\"node\"}\n", stdout);
}

/*
 * restic 0.14's Snapshot JSON: rix_snapshot_encode's, without what 0.14 does not know
 * (program_version, summary, unknown members), then the ID.
 */
int print_snapshot_json(const rix_snapshot *sn, const char *extra)
{
	rix_snapshot v = *sn;
	v.program_version = NULL;
	v.extra = NULL;
	char *json, hex[65];
	size_t n;
	int rc = rix_snapshot_encode(&json, &n, &v);
	if (rc != 0)
		return fail(rc);
	rix_id_to_hex(hex, &sn->id);
	printf("%.*s,\"id\":\"%s\",\"short_id\":\"%.8s\"%s}\n", (int)(n - 1), json, hex, hex, extra ? extra : "");
	rix_free(json);
	return 0;
}

/* Go's path.Clean of an absolute path, in place: no "//", ".", "..", nor a trailing '/'. */
void path_clean(char *p)
{
	char *w = p;
	const char *r = p;
	*w++ = '/';
	while (*r != '\0') {
		while (*r == '/')
			r++;
		size_t n = strcspn(r, "/");
		if (n == 0)
			break;
		if (n == 1 && r[0] == '.') {
		} else if (n == 2 && r[0] == '.' && r[1] == '.') {
			while (w > p + 1 && w[-1] != '/')
				w--;
			if (w > p + 1)
				w--;
		} else {
			if (w > p + 1)
				*w++ = '/';
			memmove(w, r, n);
			w += n;
		}
		r += n;
	}
	*w = '\0';
}

/* restic's fs.HasPathPrefix(base, p) for cleaned absolute paths: p is base or beneath it. */
bool has_path_prefix(const char *base, const char *p)
{
	size_t n = strlen(base);
	if (strcmp(base, "/") == 0)
		return true;
	return strncmp(base, p, n) == 0 && (p[n] == '\0' || p[n] == '/');
}

int grow_buf(char **buf, size_t *cap, size_t need)
{
	if (need <= *cap)
		return 0;
	size_t c = *cap ? *cap : 256;
	while (c < need)
		c *= 2;
	char *p = realloc(*buf, c);
	if (p == NULL)
		return die("out of memory");
	*buf = p;
	*cap = c;
	return 0;
}
