/*
 * cli/term.c — what the commands with progress (backup, restore) share: restic's byte and
 * time formats, JSON floats, and the status lines drawn over themselves on a terminal.
 */
#include <sys/ioctl.h>

#include "cli.h"

void human(char *o, size_t cap, uint64_t b)
{
	/* restic's ui.FormatBytes */
	const char *u[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)b;
	int i = 0;
	while (v >= 1024 && i < 4) {
		v /= 1024;
		i++;
	}
	snprintf(o, cap, i == 0 ? "%.0f %s" : "%.3f %s", v, u[i]);
}

/* restic's ui.FormatSeconds: M:SS, or H:MM:SS from an hour. */
void clock_str(char *o, size_t cap, uint64_t sec)
{
	if (sec >= 3600)
		snprintf(o, cap, "%llu:%02llu:%02llu", (unsigned long long)(sec / 3600), (unsigned long long)(sec / 60 % 60),
			 (unsigned long long)(sec % 60));
	else
		snprintf(o, cap, "%llu:%02llu", (unsigned long long)(sec / 60), (unsigned long long)(sec % 60));
}

/* v as JSON writes a float64: the shortest form that reads back the same. */
void put_float(double v)
{
	char buf[40];
	for (int p = 1; p <= 17; p++) {
		snprintf(buf, sizeof(buf), "%.*g", p, v);
		if (strtod(buf, NULL) == v)
			break;
	}
	fputs(buf, stdout);
}

/* Columns of the terminal (stdout), 80 when it does not say. */
size_t term_width(void)
{
	struct winsize ws;
	return ioctl(1, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 ? ws.ws_col : 80;
}

/*
 * Draws lines[0..k) as the status (k = 0: clears it), over what was there (out.mu held). Each
 * line is cut to the terminal's width (no wrapping, or the cursor arithmetic breaks) and shows
 * control bytes as '?'; afterwards the cursor is back at the first status line.
 */
int term_draw(int shown, char *const *lines, int k)
{
	int n = k > shown ? k : shown;
	size_t width = term_width() - 1;
	for (int i = 0; i < n; i++) {
		fputs("\r\033[2K", stdout);
		size_t cols = 0;
		for (const unsigned char *c = i < k ? (const unsigned char *)lines[i] : (const unsigned char *)""; *c; c++) {
			if ((*c & 0xC0) != 0x80 && ++cols > width) /* a character starts: one column */
				break;
			putchar(*c < 0x20 || *c == 0x7F ? '?' : *c);
		}
		if (i < n - 1)
			putchar('\n');
	}
	if (n > 1)
		printf("\033[%dA", n - 1);
	putchar('\r');
	fflush(stdout);
	return k;
}


/* Progress calls a second: RIX_ or RESTIC_PROGRESS_FPS (at most 60), else 10 on a terminal and
 * 4 for --json. */
unsigned progress_interval_ms(void)
{
	const char *e = getenv("RIX_PROGRESS_FPS");
	if (e == NULL || *e == '\0')
		e = getenv("RESTIC_PROGRESS_FPS");
	double fps = e != NULL ? strtod(e, NULL) : 0;
	if (fps > 60)
		fps = 60;
	if (fps > 0)
		return (unsigned)(1000.0 / fps) > 0 ? (unsigned)(1000.0 / fps) : 1;
	return g.json ? 250 : 100;
}
