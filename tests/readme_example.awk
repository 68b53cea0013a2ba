# tests/readme_example.awk — cuts README.md's C example under "## The repository, from C" out
# for test_readme_example: its #include and static lines (file scope) into the file `top`, its
# statements into the file `body` (with #line directives, so a compile error names README.md's
# line), the example's repository path "/srv/backup" replaced by the test's `path`.
/^## The repository, from C/ { want = 1; next }
want && !inside && /^```c/ { inside = 1; at = 0; next }
inside && /^```/ { done = 1; exit }
inside {
	gsub(/"\/srv\/backup"/, "path")
	if ($0 ~ /^(#include|static )/) {
		print > top
		at = 0
		next
	}
	if (!at)
		printf "#line %d \"%s\"\n", NR, FILENAME > body
	at = 1
	print > body
}
END {
	if (!done) {
		print "readme_example.awk: no C example under \"## The repository, from C\" in " FILENAME > "/dev/stderr"
		exit 1
	}
}
