/*
 * tests/test_fuzz_keyfile_replay.c — runs the fuzz_keyfile target over its committed corpus
 * (tests/fuzz/corpus/fuzz_keyfile), so every input the fuzzer kept is checked in the ordinary
 * test run, plain and under the sanitizers. Built with the fuzz build's scrypt memory cap.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(void)
{
	const char *dir = RIX_KEYFILE_CORPUS;
	DIR *d = opendir(dir);
	if (d == NULL) {
		fprintf(stderr, "cannot open %s\n", dir);
		return 1;
	}
	struct dirent *e;
	int n = 0;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		char path[4096];
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		FILE *f = fopen(path, "rb");
		if (f == NULL)
			return 1;
		uint8_t buf[65536];
		size_t len = fread(buf, 1, sizeof(buf), f);
		fclose(f);
		LLVMFuzzerTestOneInput(buf, len); /* aborts on a broken property */
		n++;
	}
	closedir(d);
	if (n < 4) {
		fprintf(stderr, "only %d corpus files in %s\n", n, dir);
		return 1;
	}
	printf("%d passed, 0 failed\n", n);
	return 0;
}
