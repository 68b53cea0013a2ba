/*
 * repo/local.c — the local backend: a repository in a directory, in restic's layout.
 *
 *   <root>/config
 *   <root>/{keys,locks,snapshots,index}/<id>
 *   <root>/data/<id[0..2)>/<id>            256 folders, made by create (and by a write that
 *                                           misses one, as restic does: a repository copied
 *                                           through object storage has lost its empty folders)
 *   <root>/.rix-tmp/                        rix's temporary pack files (same file system, so a
 *                                           finished pack is renamed into data/, not copied)
 *
 * Every write: a temporary file next to the final one (".<id>-tmp-XXXXXX", a name no lister
 * reports), write, fchmod read-only (as restic leaves its files), fsync, rename over the final
 * name, fsync of the folder. Listing skips names that are not 64 hex digits, so temporary files
 * of an interrupted write are never seen as repository files.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rix/alloc.h"
#include "rix/backend.h"
#include "rix/error.h"
#include "repo_internal.h"

#define TMP_DIR ".rix-tmp"

typedef struct local {
	char *root;
	char *tmp; /* root/.rix-tmp */
} local;


static int io_error(const char *what, const char *path, int err)
{
	int code = RIX_EIO;
	if (err == ENOENT)
		code = RIX_ENOTFOUND;
	else if (err == ENOSPC || err == EDQUOT || err == EFBIG)
		code = RIX_ENOSPC;
	else if (err == ENOMEM)
		code = RIX_ENOMEM;
	return rix_error_set(code, "local: %s %s: %s", what, path, strerror(err));
}

/* The path of a file (name ignored for the config), or of type t's folder when name is NULL. */
static void path_of(const local *l, rix_file_type t, const char *name, char *buf, size_t cap)
{
	if (t == RIX_FILE_CONFIG)
		snprintf(buf, cap, "%s/config", l->root);
	else if (name == NULL)
		snprintf(buf, cap, "%s/%s", l->root, rix__folder[t]);
	else if (t == RIX_FILE_PACK)
		snprintf(buf, cap, "%s/data/%.2s/%s", l->root, name, name);
	else
		snprintf(buf, cap, "%s/%s/%s", l->root, rix__folder[t], name);
}

static int list_dir(const char *dir, rix_backend_list_fn fn, void *arg)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : io_error("cannot list", dir, errno);
	DIR *d = fdopendir(fd);
	if (d == NULL) {
		close(fd);
		return io_error("cannot list", dir, errno);
	}
	int rc = 0;
	struct dirent *e;
	for (;;) {
		errno = 0; /* readdir signals an error only through errno */
		if (rc != 0 || (e = readdir(d)) == NULL)
			break;
		if (!rix__is_file_name(e->d_name)) /* temporary files, junk: skipped before the stat */
			continue;
		struct stat st;
		if (fstatat(fd, e->d_name, &st, 0) != 0) {
			if (errno == ENOENT) /* removed since readdir */
				continue;
			rc = io_error("cannot stat in", dir, errno);
			break;
		}
		if (!S_ISREG(st.st_mode))
			continue;
		rc = fn(arg, e->d_name, (uint64_t)st.st_size);
	}
	if (rc == 0 && errno != 0)
		rc = io_error("cannot list", dir, errno);
	closedir(d);
	return rc;
}

static int local_list(void *self, rix_file_type t, rix_backend_list_fn fn, void *arg)
{
	local *l = self;
	char dir[4096];
	path_of(l, t, NULL, dir, sizeof(dir));
	if (t != RIX_FILE_PACK)
		return list_dir(dir, fn, arg);
	for (int i = 0; i < 256; i++) {
		char sub[4200];
		snprintf(sub, sizeof(sub), "%s/%02x", dir, i);
		int rc = list_dir(sub, fn, arg);
		if (rc != 0)
			return rc;
	}
	return 0;
}

static int local_stat(void *self, rix_file_type t, const char *name, uint64_t *size)
{
	char path[4096];
	path_of(self, t, name, path, sizeof(path));
	struct stat st;
	if (stat(path, &st) != 0)
		return io_error("cannot stat", path, errno);
	*size = (uint64_t)st.st_size;
	return 0;
}

static int local_read(void *self, rix_file_type t, const char *name, uint64_t off, void *buf, size_t len)
{
	char path[4096];
	path_of(self, t, name, path, sizeof(path));
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return io_error("cannot open", path, errno);
	size_t done = 0;
	int rc = 0;
	while (done < len) {
		ssize_t r = pread(fd, (uint8_t *)buf + done, len - done, (off_t)(off + done));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = io_error("cannot read", path, errno);
			break;
		}
		if (r == 0) {
			rc = rix_error_set(RIX_ECORRUPT, "local: %s ends before byte %llu (read of %zu bytes at %llu)", path,
					   (unsigned long long)(off + len), len, (unsigned long long)off);
			break;
		}
		done += (size_t)r;
	}
	close(fd);
	return rc;
}

static int sync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return io_error("cannot open folder", dir, errno);
	int rc = fsync(fd) != 0 ? io_error("cannot sync folder", dir, errno) : 0;
	close(fd);
	return rc;
}

static void dir_of(const char *path, char *dir, size_t cap)
{
	snprintf(dir, cap, "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash != NULL)
		*slash = '\0';
}

/* fchmod read-only, fsync, rename tmp to path, fsync the folder. */
static int commit(int fd, const char *tmp, const char *path)
{
	if (fchmod(fd, 0400) != 0)
		return io_error("cannot chmod", tmp, errno);
	if (fsync(fd) != 0)
		return io_error("cannot sync", tmp, errno);
	if (rename(tmp, path) != 0)
		return io_error("cannot rename to", path, errno);
	char dir[4096];
	dir_of(path, dir, sizeof(dir));
	return sync_dir(dir);
}

static int write_all(int fd, const void *data, size_t n, const char *path)
{
	size_t done = 0;
	while (done < n) {
		ssize_t r = write(fd, (const uint8_t *)data + done, n - done);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return io_error("cannot write", path, r < 0 ? errno : ENOSPC);
		done += (size_t)r;
	}
	return 0;
}

/*
 * The folder of path made, with its parent (data/ of data/xx/): a repository copied through
 * object storage has lost its empty folders, and restic makes them again when it writes too.
 */
static int make_folder_of(const char *path)
{
	char dir[4096], parent[4096];
	dir_of(path, dir, sizeof(dir));
	if (mkdir(dir, 0700) == 0 || errno == EEXIST)
		return 0;
	if (errno != ENOENT)
		return io_error("cannot create folder", dir, errno);
	dir_of(dir, parent, sizeof(parent));
	if (mkdir(parent, 0700) != 0 && errno != EEXIST)
		return io_error("cannot create folder", parent, errno);
	if (mkdir(dir, 0700) != 0 && errno != EEXIST)
		return io_error("cannot create folder", dir, errno);
	return 0;
}

/* A temporary file next to path (its folder made if missing): fd and its name in tmp. */
static int temp_next_to(const char *path, char *tmp, size_t cap, int *fd)
{
	char dir[4096];
	dir_of(path, dir, sizeof(dir));
	const char *base = strrchr(path, '/');
	snprintf(tmp, cap, "%s/.%s-tmp-XXXXXX", dir, base != NULL ? base + 1 : path);
	*fd = mkostemp(tmp, O_CLOEXEC);
	if (*fd < 0 && errno == ENOENT) {
		int rc = make_folder_of(path);
		if (rc != 0)
			return rc;
		snprintf(tmp, cap, "%s/.%s-tmp-XXXXXX", dir, base != NULL ? base + 1 : path);
		*fd = mkostemp(tmp, O_CLOEXEC);
	}
	if (*fd < 0)
		return io_error("cannot create a temporary file in", dir, errno);
	return 0;
}

static int local_write(void *self, rix_file_type t, const char *name, const void *data, size_t n)
{
	char path[4096], tmp[4200];
	path_of(self, t, name, path, sizeof(path));
	int fd;
	int rc = temp_next_to(path, tmp, sizeof(tmp), &fd);
	if (rc != 0)
		return rc;
	rc = write_all(fd, data, n, tmp);
	if (rc == 0)
		rc = commit(fd, tmp, path);
	close(fd);
	if (rc != 0)
		unlink(tmp);
	return rc;
}

static int local_write_file(void *self, rix_file_type t, const char *name, int fd, const char *src, uint64_t size,
			    bool *taken)
{
	char path[4096];
	path_of(self, t, name, path, sizeof(path));
	struct stat st;
	if (fstat(fd, &st) != 0)
		return io_error("cannot stat", src != NULL ? src : "(file)", errno);
	if ((uint64_t)st.st_size != size)
		return rix_error_set(RIX_EINVAL, "local: file of %llu bytes, %llu expected", (unsigned long long)st.st_size,
				     (unsigned long long)size);
	if (src != NULL) { /* the file itself, when it is on this file system */
		if (fchmod(fd, 0400) != 0)
			return io_error("cannot chmod", src, errno);
		if (fsync(fd) != 0)
			return io_error("cannot sync", src, errno);
		int moved = rename(src, path) == 0;
		if (!moved && errno == ENOENT && access(src, F_OK) == 0) { /* the folder is missing */
			int rc = make_folder_of(path);
			if (rc != 0)
				return rc;
			moved = rename(src, path) == 0;
		}
		if (moved) {
			*taken = 1;
			char dir[4096];
			dir_of(path, dir, sizeof(dir));
			return sync_dir(dir);
		}
		if (errno != EXDEV)
			return io_error("cannot rename to", path, errno);
	}
	/* A copy. */
	char tmp[4200];
	int out;
	int rc = temp_next_to(path, tmp, sizeof(tmp), &out);
	if (rc != 0)
		return rc;
	uint8_t *buf = rix_malloc(1 << 20);
	if (buf == NULL)
		rc = rix_error_set(RIX_ENOMEM, "local: out of memory");
	for (uint64_t off = 0; rc == 0 && off < size;) {
		size_t step = size - off > (1 << 20) ? (1 << 20) : (size_t)(size - off);
		ssize_t r = pread(fd, buf, step, (off_t)off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			rc = r < 0 ? io_error("cannot read", src != NULL ? src : "(file)", errno)
				   : rix_error_set(RIX_EIO, "local: the file ended early");
		else
			rc = write_all(out, buf, (size_t)r, tmp);
		off += r > 0 ? (uint64_t)r : 0;
	}
	rix_free(buf);
	if (rc == 0)
		rc = commit(out, tmp, path);
	close(out);
	if (rc != 0)
		unlink(tmp);
	return rc;
}

static int local_remove(void *self, rix_file_type t, const char *name)
{
	char path[4096];
	path_of(self, t, name, path, sizeof(path));
	if (unlink(path) != 0)
		return io_error("cannot remove", path, errno);
	return 0;
}

static const char *local_temp_dir(void *self)
{
	return ((local *)self)->tmp;
}

static void local_close(void *self)
{
	local *l = self;
	rix_free(l->root);
	rix_free(l->tmp);
	rix_free(l);
}

static const rix_backend_ops local_ops = {
	.kind = "local",
	.list = local_list,
	.stat = local_stat,
	.read = local_read,
	.write = local_write,
	.write_file = local_write_file,
	.remove = local_remove,
	.temp_dir = local_temp_dir,
	.close = local_close,
};

static int make_dir(const char *path)
{
	if (mkdir(path, 0700) != 0 && errno != EEXIST)
		return io_error("cannot create folder", path, errno);
	return 0;
}

static char *dup_str(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);
	char *p = rix_malloc(a + b + 1);
	if (p != NULL) {
		memcpy(p, s, a);
		memcpy(p + a, suffix, b + 1);
	}
	return p;
}

int rix_backend_local_open(rix_backend **out, const char *path, bool create)
{
	*out = NULL;
	size_t plen = strlen(path);
	if (plen == 0 || plen > 3000)
		return rix_error_set(RIX_EINVAL, "local: repository path of %zu characters", plen);
	char p[4096];
	struct stat st;
	snprintf(p, sizeof(p), "%s/config", path);
	int has_config = stat(p, &st) == 0;
	if (!has_config && errno != ENOENT && errno != ENOTDIR)
		return io_error("cannot open", p, errno); /* permission denied, ...: said as such */
	if (create && has_config)
		return rix_error_set(RIX_EEXISTS, "local: %s already holds a repository (config file)", path);
	if (!create && !has_config) {
		if (stat(path, &st) != 0)
			return rix_error_set(RIX_ENOTFOUND, "local: %s does not exist", path);
		return rix_error_set(RIX_ENOTFOUND, "local: %s is not a repository (no config file)", path);
	}
	int rc = 0;
	if (create) {
		rc = make_dir(path);
		for (int t = RIX_FILE_KEY; rc == 0 && t < RIX_FILE_TYPES; t++) {
			snprintf(p, sizeof(p), "%s/%s", path, rix__folder[t]);
			rc = make_dir(p);
		}
		for (int i = 0; rc == 0 && i < 256; i++) {
			snprintf(p, sizeof(p), "%s/data/%02x", path, i);
			rc = make_dir(p);
		}
		if (rc != 0)
			return rc;
	}
	snprintf(p, sizeof(p), "%s/" TMP_DIR, path);
	/* A read-only repository has no temporary folder: writes will fail, reads work. */
	(void)make_dir(p);
	local *l = rix_calloc(1, sizeof(*l));
	if (l == NULL || (l->root = dup_str(path, "")) == NULL || (l->tmp = dup_str(path, "/" TMP_DIR)) == NULL) {
		if (l != NULL)
			local_close(l);
		return rix_error_set(RIX_ENOMEM, "local: out of memory");
	}
	rc = rix_backend_new(out, &local_ops, l);
	if (rc != 0)
		local_close(l);
	return rc;
}
