/*
 * cli/cmd_dump.c — rix dump SNAPSHOT PATH: a file's content on stdout, or a directory (PATH "/":
 * the whole snapshot) as a tar archive, as restic 0.14's dump writes them.
 *
 * The tar is Go's archive/tar as restic 0.14 drives it, header for header: USTAR (a name over
 * 100 bytes split into prefix and name), or PAX when USTAR cannot hold an entry (a non-ASCII or
 * unsplittable name, a long or non-ASCII link target, user or group name, numbers too wide, and
 * extended attributes as SCHILY.xattr.NAME records; POSIX ACLs are left out); mode: permissions
 * with setuid, setgid, sticky; mtime rounded to the second, no atime or ctime (Go drops them
 * when the format is not asked for); entries: the directories, files and symlinks (and the
 * other kinds at the top level only, as regular files: restic's quirk); two zero blocks at the
 * end, no padding to a record.
 *
 * --archive zip: Go's archive/zip as restic 0.14 drives it: every entry stored (no compression),
 * a data descriptor after each file (CRC-32 and sizes), the UTF-8 flag for names that need it,
 * the MS-DOS time in the mtime's zone and an extended timestamp, the Unix mode in the external
 * attributes, symlinks as files holding their target; zip64 records past 4 GiB.
 *
 * A shared lock, as restic's. Exit status as restic 0.14's: 1 a usage error, a snapshot not
 * found or ambiguous; 2 a snapshot or tree that cannot be loaded, a path not found or of the
 * wrong type, an archive asked for on a terminal; 11 the lock.
 */
#include "cli.h"

#define BLOCK 512

struct zip_entry; /* the central directory's record of an entry (below) */

struct dump {
	rix_repo *r;
	bool zip;     /* --archive zip, else tar */
	uint8_t *buf; /* a blob */
	size_t cap;
	int err;      /* the first error writing (reported), as an exit status */
	uint32_t crc; /* CRC-32 of the content written (zip) */
	uint64_t offset; /* bytes written so far (zip) */
	struct zip_entry *dir;
	size_t ndir, capdir;
};

/* CRC-32 (IEEE, zip's), table-driven. */
static uint32_t crc32_update(uint32_t crc, const uint8_t *p, size_t n)
{
	static uint32_t table[256];
	static bool ready;
	if (!ready) {
		for (uint32_t i = 0; i < 256; i++) {
			uint32_t c = i;
			for (int k = 0; k < 8; k++)
				c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
			table[i] = c;
		}
		ready = true;
	}
	crc = ~crc;
	for (size_t i = 0; i < n; i++)
		crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
	return ~crc;
}

/* Node n's content on stdout, blob by blob; *written counts the bytes. 0, or 2 (reported). */
static int write_content(struct dump *d, const rix_node *n, uint64_t *written)
{
	*written = 0;
	for (size_t i = 0; i < n->content_len; i++) {
		size_t len;
		int rc;
		while ((rc = rix_repo_load_blob_into(&len, d->r, RIX_BLOB_DATA, &n->content[i], d->buf, d->cap)) == RIX_ELIMIT) {
			uint8_t *b = realloc(d->buf, len);
			if (b == NULL)
				return die("dump: out of memory");
			d->buf = b;
			d->cap = len;
		}
		if (rc != 0) {
			die("cannot dump file: %s", rix_error_last());
			return 2;
		}
		if (fwrite(d->buf, 1, len, stdout) != len) {
			die("cannot dump file: Write: %s", strerror(errno));
			return 2;
		}
		d->crc = crc32_update(d->crc, d->buf, len);
		d->offset += len;
		*written += len;
	}
	return 0;
}

/* ---- tar (Go's archive/tar writer) ------------------------------------------------------------ */

/* Go's formatOctal: zero-padded to the field less one, NUL-terminated; 0 when x does not fit. */
static void octal(uint8_t *b, size_t size, long long x)
{
	char s[32];
	bool fits = x >= 0 && (size >= 12 || x < (1ll << (3 * (size - 1))));
	snprintf(s, sizeof(s), "%0*llo", (int)(size - 1), fits ? x : 0);
	memcpy(b, s, size - 1);
	b[size - 1] = '\0';
}

static bool fits_octal(size_t size, long long x)
{
	return x >= 0 && (size >= 12 ? x < (1ll << 33) : x < (1ll << (3 * (size - 1))));
}

static bool is_ascii(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s >= 0x80)
			return false;
	return true;
}

/* Go's toASCII: the bytes below 0x80 kept (every byte of a multi-byte character dropped). */
static void to_ascii(char *o, const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x80)
			*o++ = *s;
	*o = '\0';
}

/* Go's formatString into b[size]: cut to size, NUL-terminated when shorter. */
static void put_str(uint8_t *b, size_t size, const char *s)
{
	size_t n = strlen(s);
	memcpy(b, s, n < size ? n : size);
	if (n < size)
		b[n] = '\0';
	if (n > size && b[size - 1] == '/') { /* Go: no trailing slash left in a cut V7 name */
		size_t k = size - 1;
		while (k > 0 && s[k - 1] == '/')
			k--;
		b[k] = '\0';
	}
}

/* Go's splitUSTARPath: the '/' that splits name into prefix (<= 155) and name (<= 100), or -1. */
static long split_ustar(const char *name)
{
	size_t length = strlen(name), len = length;
	if (length <= 100 || !is_ascii(name))
		return -1;
	if (len > 156)
		len = 156;
	else if (name[len - 1] == '/')
		len--;
	long i = (long)len - 1;
	while (i >= 0 && name[i] != '/')
		i--;
	size_t nlen = length - (size_t)i - 1;
	if (i <= 0 || nlen > 100 || nlen == 0 || (size_t)i > 155)
		return -1;
	return i;
}

struct pax {
	char *buf;
	size_t len, cap;
	bool fail;
};

/* One PAX record, "%d %s=%s\n" with its own length first (Go's formatPAXRecord). */
static void pax_add(struct pax *p, const char *k, const char *v, size_t vlen)
{
	size_t size = strlen(k) + vlen + 3;
	char num[32];
	size += (size_t)snprintf(num, sizeof(num), "%zu", size);
	size_t rec = (size_t)snprintf(num, sizeof(num), "%zu", size) + 1 + strlen(k) + 1 + vlen + 1;
	if (rec != size)
		size = rec;
	snprintf(num, sizeof(num), "%zu", size);
	if (p->len + size > p->cap) {
		size_t c = (p->len + size) * 2 + 256;
		char *b = realloc(p->buf, c);
		if (b == NULL) {
			p->fail = true;
			return;
		}
		p->buf = b;
		p->cap = c;
	}
	p->len += (size_t)sprintf(p->buf + p->len, "%s %s=", num, k);
	memcpy(p->buf + p->len, v, vlen);
	p->len += vlen;
	p->buf[p->len++] = '\n';
}

static void checksum(uint8_t *b)
{
	memset(b + 148, ' ', 8);
	unsigned sum = 0;
	for (int i = 0; i < BLOCK; i++)
		sum += b[i];
	octal(b + 148, 7, sum);
	b[155] = ' ';
}

static void magic(uint8_t *b)
{
	memcpy(b + 257, "ustar\0" "00", 8);
}

static int put_block(const uint8_t *b, size_t n)
{
	if (fwrite(b, 1, n, stdout) != n) {
		die("cannot dump file: Write: %s", strerror(errno));
		return 2;
	}
	return 0;
}

/* Zeros to the end of the block after n bytes. */
static int pad(uint64_t n)
{
	static const uint8_t zero[BLOCK];
	return n % BLOCK ? put_block(zero, BLOCK - n % BLOCK) : 0;
}

static int xattr_key_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* One entry: its header(s) and content. path is "/dir/name". 0, or the exit status (reported). */
static int tar_entry(struct dump *d, const char *path, const rix_node *n)
{
	size_t plen = strlen(path);
	/* ascii: toASCII of the name, the extended header's name (16 more) or the link target */
	size_t alen = (plen > n->linktarget_len ? plen : n->linktarget_len) + 32;
	char *name = malloc(plen + 2), *ascii = malloc(alen);
	char *link = NULL;
	struct pax p = { 0 };
	if (name == NULL || ascii == NULL) {
		free(name);
		free(ascii);
		return die("dump: out of memory");
	}
	snprintf(name, plen + 2, "%s%s", path + 1, n->type == RIX_NODE_DIR ? "/" : "");
	char flag = n->type == RIX_NODE_DIR ? '5' : n->type == RIX_NODE_SYMLINK ? '2' : '0';
	if (n->type == RIX_NODE_SYMLINK && (link = strndup(n->linktarget, n->linktarget_len)) == NULL) {
		free(name);
		free(ascii);
		return die("dump: out of memory");
	}
	const char *uname = n->user ? n->user : "", *gname = n->group ? n->group : "";
	long long mode = (n->mode & 0777) | (n->mode & RIX_GOMODE_SETUID ? 04000 : 0) |
			 (n->mode & RIX_GOMODE_SETGID ? 02000 : 0) | (n->mode & RIX_GOMODE_STICKY ? 01000 : 0);
	long long mtime = n->mtime.sec + (n->mtime.nsec >= 500000000u);
	uint64_t size = n->type == RIX_NODE_FILE || flag == '0' ? n->size : 0;
	/* what USTAR cannot hold, as PAX records in the order of their keys (sorted below) */
	struct rec {
		const char *k;
		char v[32];
		const char *s;
		size_t len;
	} rec[8];
	int nrec = 0;
	long split = -1;
	if (strlen(name) > 100 || !is_ascii(name)) {
		split = split_ustar(name);
		if (split < 0)
			rec[nrec++] = (struct rec){ .k = "path", .s = name, .len = strlen(name) };
	}
	if (link != NULL && (strlen(link) > 100 || !is_ascii(link)))
		rec[nrec++] = (struct rec){ .k = "linkpath", .s = link, .len = strlen(link) };
	if (strlen(uname) > 32 || !is_ascii(uname))
		rec[nrec++] = (struct rec){ .k = "uname", .s = uname, .len = strlen(uname) };
	if (strlen(gname) > 32 || !is_ascii(gname))
		rec[nrec++] = (struct rec){ .k = "gname", .s = gname, .len = strlen(gname) };
	const struct {
		const char *k;
		long long v;
		size_t field;
	} nums[] = { { "uid", n->uid, 8 }, { "gid", n->gid, 8 }, { "size", (long long)size, 12 }, { "mtime", mtime, 12 } };
	for (size_t i = 0; i < 4; i++)
		if (!fits_octal(nums[i].field, nums[i].v)) {
			rec[nrec].k = nums[i].k;
			snprintf(rec[nrec].v, sizeof(rec[nrec].v), "%lld", nums[i].v);
			rec[nrec].s = rec[nrec].v;
			rec[nrec].len = strlen(rec[nrec].v);
			nrec++;
		}
	/* extended attributes: SCHILY.xattr.NAME (ACLs left out) */
	char **xkeys = NULL;
	size_t nx = 0;
	if (n->nxattrs > 0 && (xkeys = calloc(n->nxattrs, sizeof(*xkeys))) == NULL)
		p.fail = true;
	for (size_t i = 0; !p.fail && i < n->nxattrs; i++) {
		if (strncmp(n->xattrs[i].name, "system.posix_acl_", 17) == 0)
			continue;
		size_t kl = strlen(n->xattrs[i].name) + 14 + sizeof(size_t);
		if ((xkeys[nx] = malloc(kl)) == NULL) {
			p.fail = true;
			break;
		}
		int kn = snprintf(xkeys[nx], kl, "SCHILY.xattr.%s", n->xattrs[i].name);
		memcpy(xkeys[nx] + kn + 1, &i, sizeof(i)); /* the attribute's index after the key */
		nx++;
	}
	if (nx > 0)
		qsort(xkeys, nx, sizeof(*xkeys), xattr_key_cmp);
	int rc = 0;
	uint8_t b[BLOCK];
	if (nrec > 0 || nx > 0) {
		/* Go sorts the keys: "SCHILY.*" (upper case) before gid, linkpath, mtime, path, size, uid, uname */
		for (size_t i = 0; i < nx; i++) {
			size_t idx;
			memcpy(&idx, xkeys[i] + strlen(xkeys[i]) + 1, sizeof(idx));
			pax_add(&p, xkeys[i], (const char *)n->xattrs[idx].value, n->xattrs[idx].len);
		}
		for (int i = 0; i < nrec; i++)
			for (int j = i + 1; j < nrec; j++)
				if (strcmp(rec[j].k, rec[i].k) < 0) {
					struct rec t = rec[i];
					rec[i] = rec[j];
					rec[j] = t;
				}
		for (int i = 0; i < nrec; i++)
			pax_add(&p, rec[i].k, rec[i].s, rec[i].len);
		if (p.fail) {
			rc = die("dump: out of memory");
			goto done;
		}
		/* the extended header: path.Join(dir, "PaxHeaders.0", file) */
		size_t nl = strlen(name);
		const char *slash = NULL;
		for (size_t k = 0; k < nl; k++)
			if (name[k] == '/')
				slash = name + k;
		size_t dl = slash ? (size_t)(slash - name) + 1 : 0;
		char *pn = malloc(nl + 16);
		if (pn == NULL) {
			rc = die("dump: out of memory");
			goto done;
		}
		snprintf(pn, nl + 16, "%.*sPaxHeaders.0%s%s", (int)dl, name, name[dl] ? "/" : "", name + dl);
		to_ascii(ascii, pn);
		free(pn);
		ascii[strlen(ascii) > 100 ? 100 : strlen(ascii)] = '\0';
		for (size_t k = strlen(ascii); k > 0 && ascii[k - 1] == '/'; k--)
			ascii[k - 1] = '\0';
		memset(b, 0, sizeof(b));
		put_str(b, 100, ascii);
		octal(b + 100, 8, 0);
		octal(b + 108, 8, 0);
		octal(b + 116, 8, 0);
		octal(b + 124, 12, (long long)p.len);
		octal(b + 136, 12, 0);
		b[156] = 'x';
		magic(b);
		checksum(b);
		if ((rc = put_block(b, BLOCK)) != 0 || (rc = put_block((uint8_t *)p.buf, p.len)) != 0 || (rc = pad(p.len)) != 0)
			goto done;
	}
	memset(b, 0, sizeof(b));
	bool pax = nrec > 0 || nx > 0;
	if (pax) {
		to_ascii(ascii, name);
		put_str(b, 100, ascii);
	} else if (split >= 0) {
		put_str(b, 100, name + split + 1);
		char pre[160];
		snprintf(pre, sizeof(pre), "%.*s", (int)split, name);
		put_str(b + 345, 155, pre);
	} else {
		put_str(b, 100, name);
	}
	if (link != NULL) {
		to_ascii(ascii, link);
		put_str(b + 157, 100, pax ? ascii : link);
	}
	octal(b + 100, 8, mode);
	octal(b + 108, 8, n->uid);
	octal(b + 116, 8, n->gid);
	octal(b + 124, 12, (long long)size);
	octal(b + 136, 12, mtime);
	b[156] = (uint8_t)flag;
	magic(b);
	char s[64];
	to_ascii(s, strlen(uname) < 64 ? uname : "");
	put_str(b + 265, 32, pax ? s : uname);
	to_ascii(s, strlen(gname) < 64 ? gname : "");
	put_str(b + 297, 32, pax ? s : gname);
	octal(b + 329, 8, 0);
	octal(b + 337, 8, 0);
	checksum(b);
	if ((rc = put_block(b, BLOCK)) != 0)
		goto done;
	if (n->type == RIX_NODE_FILE) {
		uint64_t written;
		if ((rc = write_content(d, n, &written)) != 0)
			goto done;
		if (written != size) {
			rc = 2;
			die("cannot dump file: %s: archive/tar: %s", path, written > size ? "write too long" : "missed writing bytes");
			goto done;
		}
		rc = pad(written);
	}
done:
	for (size_t i = 0; i < nx; i++)
		free(xkeys[i]);
	free(xkeys);
	free(p.buf);
	free(name);
	free(ascii);
	free(link);
	return rc;
}

/* ---- zip (Go's archive/zip writer, entries stored) -------------------------------------------- */

struct zip_entry {
	char *name;
	uint16_t flags, time, date, version;
	uint32_t crc, attrs;
	uint64_t size, offset;
	int32_t mtime; /* the extended timestamp (Unix seconds, as uint32) */
};

static void le16(uint8_t *b, uint16_t v)
{
	b[0] = (uint8_t)v;
	b[1] = (uint8_t)(v >> 8);
}

static void le32(uint8_t *b, uint32_t v)
{
	le16(b, (uint16_t)v);
	le16(b + 2, (uint16_t)(v >> 16));
}

static void le64(uint8_t *b, uint64_t v)
{
	le32(b, (uint32_t)v);
	le32(b + 4, (uint32_t)(v >> 32));
}

static int zput(struct dump *d, const void *p, size_t n)
{
	d->offset += n;
	return put_block(p, n);
}

/* Go's detectUTF8: whether name needs the UTF-8 flag (a byte outside 0x20..0x7d or '\\', and valid UTF-8). */
static bool needs_utf8_flag(const char *s)
{
	bool require = false;
	const unsigned char *p = (const unsigned char *)s;
	while (*p) {
		if (*p < 0x80) {
			require |= *p < 0x20 || *p > 0x7d || *p == 0x5c;
			p++;
			continue;
		}
		int len = (*p & 0xe0) == 0xc0 ? 2 : (*p & 0xf0) == 0xe0 ? 3 : (*p & 0xf8) == 0xf0 ? 4 : 0;
		uint32_t c = len == 2 ? *p & 0x1f : len == 3 ? *p & 0x0f : *p & 0x07;
		for (int i = 1; i < len; i++) {
			if ((p[i] & 0xc0) != 0x80)
				return false;
			c = c << 6 | (p[i] & 0x3f);
		}
		if (len == 0 || (len == 2 && c < 0x80) || (len == 3 && (c < 0x800 || (c >= 0xd800 && c <= 0xdfff))) ||
		    (len == 4 && (c < 0x10000 || c > 0x10ffff)))
			return false;
		require = true;
		p += len;
	}
	return require;
}

/* One entry as restic 0.14's dumpNodeZip writes it: stored, the Unix mode, the mtime. */
static int zip_entry(struct dump *d, const char *path, const rix_node *n)
{
	if (d->ndir == d->capdir) {
		size_t c = d->capdir ? 2 * d->capdir : 64;
		struct zip_entry *v = realloc(d->dir, c * sizeof(*v));
		if (v == NULL)
			return die("dump: out of memory");
		d->dir = v;
		d->capdir = c;
	}
	struct zip_entry *e = &d->dir[d->ndir];
	memset(e, 0, sizeof(*e));
	size_t plen = strlen(path);
	if ((e->name = malloc(plen + 2)) == NULL)
		return die("dump: out of memory");
	d->ndir++;
	bool dir = n->type == RIX_NODE_DIR;
	snprintf(e->name, plen + 2, "%s%s", path + 1, dir ? "/" : "");
	/* SetMode: the Unix mode in the high half, MS-DOS's directory and read-only bits */
	uint32_t m = n->mode, unix_mode;
	if (m & RIX_GOMODE_DIR)
		unix_mode = 0040000;
	else if (m & RIX_GOMODE_SYMLINK)
		unix_mode = 0120000;
	else if (m & RIX_GOMODE_NAMED_PIPE)
		unix_mode = 0010000;
	else if (m & RIX_GOMODE_SOCKET)
		unix_mode = 0140000;
	else if (m & RIX_GOMODE_DEVICE)
		unix_mode = m & RIX_GOMODE_CHAR_DEVICE ? 0020000 : 0060000;
	else
		unix_mode = 0100000;
	unix_mode |= (m & RIX_GOMODE_SETUID ? 04000 : 0) | (m & RIX_GOMODE_SETGID ? 02000 : 0) |
		     (m & RIX_GOMODE_STICKY ? 01000 : 0) | (m & 0777);
	e->attrs = unix_mode << 16 | (m & RIX_GOMODE_DIR ? 0x10 : 0) | (m & 0200 ? 0 : 0x01);
	e->flags = (uint16_t)((needs_utf8_flag(e->name) ? 0x800 : 0) | (dir ? 0 : 0x8));
	/* the MS-DOS time in the mtime's own zone; the extended timestamp in Unix seconds */
	time_t wall = (time_t)(n->mtime.sec + n->mtime.utc_offset);
	struct tm tm;
	gmtime_r(&wall, &tm);
	e->date = (uint16_t)(tm.tm_mday + ((tm.tm_mon + 1) << 5) + ((tm.tm_year + 1900 - 1980) << 9));
	e->time = (uint16_t)(tm.tm_sec / 2 + (tm.tm_min << 5) + (tm.tm_hour << 11));
	e->mtime = (int32_t)(uint32_t)n->mtime.sec;
	e->version = 20;
	e->offset = d->offset;
	size_t nl = strlen(e->name);
	uint8_t h[30 + 9];
	memset(h, 0, sizeof(h));
	le32(h, 0x04034b50);
	le16(h + 4, 20);
	le16(h + 6, e->flags);
	le16(h + 8, 0);
	le16(h + 10, e->time);
	le16(h + 12, e->date);
	le16(h + 26, (uint16_t)nl);
	le16(h + 28, 9);
	uint8_t *x = h + 30;
	le16(x, 0x5455);
	le16(x + 2, 5);
	x[4] = 1;
	le32(x + 5, (uint32_t)e->mtime);
	int rc = zput(d, h, 30);
	if (rc == 0)
		rc = zput(d, e->name, nl);
	if (rc == 0)
		rc = zput(d, x, 9);
	if (rc != 0 || dir)
		return rc;
	d->crc = 0;
	uint64_t written = 0;
	if (n->type == RIX_NODE_SYMLINK) {
		rc = zput(d, n->linktarget, n->linktarget_len);
		d->crc = crc32_update(0, (const uint8_t *)n->linktarget, n->linktarget_len);
		written = n->linktarget_len;
	} else if (n->type == RIX_NODE_FILE) {
		rc = write_content(d, n, &written);
	}
	if (rc != 0)
		return rc;
	e->crc = d->crc;
	e->size = written;
	bool z64 = written >= 0xffffffffu;
	if (z64)
		e->version = 45;
	uint8_t dd[24];
	le32(dd, 0x08074b50);
	le32(dd + 4, e->crc);
	if (z64) {
		le64(dd + 8, written);
		le64(dd + 16, written);
	} else {
		le32(dd + 8, (uint32_t)written);
		le32(dd + 12, (uint32_t)written);
	}
	return zput(d, dd, z64 ? 24 : 16);
}

/* The central directory and its end records (zip64 ones when needed), as Go's Writer.Close. */
static int zip_finish(struct dump *d)
{
	uint64_t start = d->offset;
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < d->ndir; i++) {
		struct zip_entry *e = &d->dir[i];
		bool z64 = e->size >= 0xffffffffu || e->offset >= 0xffffffffu;
		size_t nl = strlen(e->name);
		uint8_t h[46], x[9 + 28];
		memset(h, 0, sizeof(h));
		le32(h, 0x02014b50);
		le16(h + 4, 3 << 8 | 20);
		le16(h + 6, e->version);
		le16(h + 8, e->flags);
		le16(h + 12, e->time);
		le16(h + 14, e->date);
		le32(h + 16, e->crc);
		le32(h + 20, z64 ? 0xffffffffu : (uint32_t)e->size);
		le32(h + 24, z64 ? 0xffffffffu : (uint32_t)e->size);
		le16(h + 28, (uint16_t)nl);
		le16(h + 30, (uint16_t)(z64 ? 9 + 28 : 9));
		le32(h + 38, e->attrs);
		le32(h + 42, e->offset > 0xffffffffu ? 0xffffffffu : (uint32_t)e->offset);
		le16(x, 0x5455);
		le16(x + 2, 5);
		x[4] = 1;
		le32(x + 5, (uint32_t)e->mtime);
		if (z64) {
			le16(x + 9, 0x0001);
			le16(x + 11, 24);
			le64(x + 13, e->size);
			le64(x + 21, e->size);
			le64(x + 29, e->offset);
		}
		rc = zput(d, h, 46);
		if (rc == 0)
			rc = zput(d, e->name, nl);
		if (rc == 0)
			rc = zput(d, x, z64 ? 9 + 28 : 9);
	}
	for (size_t i = 0; i < d->ndir; i++)
		free(d->dir[i].name);
	if (rc != 0)
		return rc;
	uint64_t end = d->offset, records = d->ndir, size = end - start, offset = start;
	if (records >= 0xffff || size >= 0xffffffffu || offset >= 0xffffffffu) {
		uint8_t b[56 + 20];
		memset(b, 0, sizeof(b));
		le32(b, 0x06064b50);
		le64(b + 4, 56 - 12);
		le16(b + 12, 45);
		le16(b + 14, 45);
		le64(b + 24, records);
		le64(b + 32, records);
		le64(b + 40, size);
		le64(b + 48, offset);
		le32(b + 56, 0x07064b50);
		le64(b + 64, end);
		le32(b + 72, 1);
		if ((rc = zput(d, b, sizeof(b))) != 0)
			return rc;
		records = 0xffff;
		size = offset = 0xffffffffu;
	}
	uint8_t b[22];
	memset(b, 0, sizeof(b));
	le32(b, 0x06054b50);
	le16(b + 8, (uint16_t)records);
	le16(b + 10, (uint16_t)records);
	le32(b + 12, (uint32_t)size);
	le32(b + 16, (uint32_t)offset);
	return zput(d, b, sizeof(b));
}

static int archive_walk(void *arg, const char *path, size_t len, const rix_node *n)
{
	(void)len;
	struct dump *d = arg;
	if (n->type != RIX_NODE_FILE && n->type != RIX_NODE_DIR && n->type != RIX_NODE_SYMLINK)
		return RIX_WALK_CONTINUE;
	if ((d->err = d->zip ? zip_entry(d, path, n) : tar_entry(d, path, n)) != 0)
		return RIX_EIO;
	return RIX_WALK_CONTINUE;
}

/* restic's DumpTree: every node of tree t at root (its path), each directory walked. */
static int dump_tree(struct dump *d, const rix_tree *t, const char *root)
{
	if (isatty(1)) {
		die("cannot dump file: stdout is the terminal, please redirect output");
		return 2;
	}
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < rix_tree_count(t); i++) {
		const rix_node *n = rix_tree_node(t, i);
		size_t rl = strlen(root);
		char *path = malloc(rl + n->name_len + 2);
		if (path == NULL)
			return die("dump: out of memory");
		snprintf(path, rl + n->name_len + 2, "%s%s%.*s", strcmp(root, "/") == 0 ? "" : root, "/", (int)n->name_len,
			 n->name);
		rc = d->zip ? zip_entry(d, path, n) : tar_entry(d, path, n);
		if (rc == 0 && n->type == RIX_NODE_DIR && n->subtree != NULL) {
			int wrc = rix_walk(d->r, n->subtree, path, archive_walk, d);
			if (wrc != 0 && d->err == 0) {
				die("cannot dump file: %s", rix_error_last());
				d->err = 2;
			}
			rc = d->err;
		}
		free(path);
	}
	if (rc == 0 && d->zip) {
		rc = zip_finish(d);
	} else if (rc == 0) {
		static const uint8_t zero[2 * BLOCK];
		rc = put_block(zero, sizeof(zero));
	}
	return rc;
}

/* Go's %q of s (strconv.Quote, for the names in messages): printable ASCII kept, \" \\ escaped. */
static void go_quote(char *o, size_t cap, const char *s)
{
	size_t w = 0;
	o[w++] = '"';
	for (; *s && w + 6 < cap; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			w += (size_t)snprintf(o + w, cap - w, "\\%c", c);
		else if (c == '\n')
			w += (size_t)snprintf(o + w, cap - w, "\\n");
		else if (c == '\t')
			w += (size_t)snprintf(o + w, cap - w, "\\t");
		else if (c < 0x20 || c == 0x7f)
			w += (size_t)snprintf(o + w, cap - w, "\\x%02x", c);
		else
			o[w++] = (char)c;
	}
	o[w++] = '"';
	o[w] = '\0';
}

static int dump_error(const char *fmt, const char *item, const char *type)
{
	char q[4200], t[64];
	go_quote(q, sizeof(q), item);
	char msg[4400];
	if (type != NULL) {
		go_quote(t, sizeof(t), type);
		snprintf(msg, sizeof(msg), fmt, q, t);
	} else {
		snprintf(msg, sizeof(msg), fmt, q);
	}
	die("cannot dump file: %s", msg);
	return 2;
}

/* restic's printFromTree, iteratively: PATH found component by component, then dumped. */
static int dump_path(struct dump *d, rix_tree *root, const char *arg)
{
	char *p = malloc(strlen(arg) + 2);
	if (p == NULL)
		return die("dump: out of memory");
	snprintf(p, strlen(arg) + 2, "/%s", arg); /* path.Clean, then split as if absolute */
	path_clean(p);
	rix_tree *t = root, *owned = NULL;
	char *item = malloc(strlen(p) + 2);
	int rc = 0;
	if (item == NULL) {
		free(p);
		return die("dump: out of memory");
	}
	if (strcmp(p, "/") == 0) {
		rc = dump_tree(d, t, "/");
		goto done;
	}
	item[0] = '\0';
	for (const char *c = p + 1;;) {
		size_t n = strcspn(c, "/");
		bool last = c[n] == '\0';
		size_t il = strlen(item);
		snprintf(item + il, strlen(p) + 2 - il, "/%.*s", (int)n, c);
		const rix_node *nd = rix_tree_find(t, c, n);
		if (nd == NULL) {
			rc = dump_error("path %s not found in snapshot", item, NULL);
			break;
		}
		if (last && nd->type == RIX_NODE_FILE) {
			uint64_t written;
			rc = write_content(d, nd, &written);
			break;
		}
		if (nd->type != RIX_NODE_DIR) {
			rc = dump_error(last ? "%s should be a file, but is a %s" : "%s should be a dir, but is a %s", item,
					node_type_name(nd->type));
			break;
		}
		if (last && isatty(1)) {
			die("cannot dump file: stdout is the terminal, please redirect output");
			rc = 2;
			break;
		}
		rix_tree *sub;
		int lrc = nd->subtree ? rix_tree_load(&sub, d->r, nd->subtree) : rix_error_set(RIX_ECORRUPT, "no subtree");
		if (lrc != 0) {
			die("cannot dump file: cannot load subtree for %s: %s", item, rix_error_last());
			rc = 2;
			break;
		}
		rix_tree_free(owned);
		t = owned = sub;
		if (last) {
			rc = dump_tree(d, t, item);
			break;
		}
		c += n + 1;
	}
done:
	rix_tree_free(owned);
	free(item);
	free(p);
	return rc;
}

int cmd_dump(int argc, char **argv)
{
	struct filter_flags ff = { 0 };
	const char *args[2], *archive = "tar", *v;
	int nargs = 0, rc = 0;
	for (int i = 0; i < argc && rc == 0; i++) {
		int f = filter_flag(&ff, argc, argv, &i);
		if (f < 0)
			rc = 1;
		else if (f > 0)
			continue;
		else if (flag_value(&v, argc, argv, &i, "--archive") || flag_value(&v, argc, argv, &i, "-a"))
			archive = v;
		else if (argv[i][0] == '-' && argv[i][1] != '\0')
			rc = die("dump: unknown flag %s", argv[i]);
		else if (nargs < 2)
			args[nargs++] = argv[i];
		else
			nargs++;
	}
	filter_flags_done(&ff);
	if (rc == 0 && nargs != 2)
		rc = die("no file and no snapshot ID specified");
	if (rc == 0 && strcmp(archive, "tar") != 0 && strcmp(archive, "zip") != 0)
		rc = die("unknown archive format \"%s\"", archive);
	rix_repo *r = NULL;
	rix_lock *lock = NULL;
	rix_snapshot_list *l = NULL;
	rix_snapshot *sn = NULL, *owned = NULL;
	rix_tree *root = NULL;
	struct dump d = { 0 };
	if (rc == 0)
		rc = open_repo_locked(&r, &lock, false);
	if (rc != 0)
		goto done;
	int lrc;
	if (strcmp(args[0], "latest") == 0) {
		if ((lrc = rix_snapshot_list_load(&l, r, NULL, NULL)) == 0)
			lrc = rix_snapshot_find(&sn, l, "latest", &ff.f);
		if (lrc != 0) {
			rc = die("latest snapshot for criteria not found: %s", rix_error_last());
			goto done;
		}
	} else {
		rix_id id;
		if ((lrc = rix_snapshot_find_id(&id, r, args[0])) != 0) {
			rc = die("invalid id \"%s\": %s", args[0], rix_error_last());
			goto done;
		}
		if ((lrc = rix_snapshot_load(&owned, r, &id)) != 0) {
			die("loading snapshot \"%s\" failed: %s", args[0], rix_error_last());
			rc = 2;
			goto done;
		}
		sn = owned;
	}
	if ((rc = load_index(r, NULL, NULL)) != 0)
		goto done;
	if ((lrc = rix_tree_load(&root, r, &sn->tree)) != 0) {
		die("loading tree for snapshot \"%s\" failed: %s", args[0], rix_error_last());
		rc = 2;
		goto done;
	}
	d.r = r;
	d.zip = strcmp(archive, "zip") == 0;
	rc = dump_path(&d, root, args[1]);
done:
	free(d.buf);
	free(d.dir);
	rix_tree_free(root);
	rix_snapshot_free(owned);
	rix_snapshot_list_free(l);
	if (r != NULL)
		close_repo(r, lock);
	filter_flags_free(&ff);
	return rc;
}
