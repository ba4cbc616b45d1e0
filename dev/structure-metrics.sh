#!/usr/bin/env bash
# Structure metrics of the workspace (issue: one composition root, one
# process listing, a CLI that parses and prints). Usage:
#   dev/structure-metrics.sh [TREE]     (default: the repository this script is in)
# Counts non-test code only: crates/*/src, each file up to its first
# `#[cfg(test)]` line; crates/fuzz, tests/, examples/ and benches/ are left
# out, and so are the files of modules compiled only for tests (a `mod X;`
# under `#[cfg(test)]` or `#[cfg(any(test, feature = "fake"))]`: the tests.rs
# files and the shield's fake machines). Comment lines are not counted.
#
# Path literals: a string literal that starts with /proc or /sys names a
# kernel file. Each has one home, crates/kernel (`paths`, and the typed
# readers over crates/parse); one outside kernel, parse and test code needs a
# reason in a `//` comment, on its own line or on the line(s) directly above
# (walking up through the lines of the same expression). The report counts
# those literals (N, M distinct) and the ones without such a comment (K).
# The older measure, "/proc and /sys path literals outside kernel and parse",
# counted the same literals with the test-only module files included and no
# regard for comments; VERBOSE=1 prints it as well.
set -euo pipefail
tree=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$tree"

# Every non-test, non-comment source line as FILE:LINE:TEXT.
code_lines() {
    find crates -path crates/fuzz -prune -o -path '*/src/*' -name '*.rs' -print | sort |
        while read -r f; do
            awk -v f="$f" '/^#\[cfg\(test\)\]/ { exit }
                /^[[:space:]]*\/\// { next }
                { print f ":" FNR ":" $0 }' "$f"
        done
}
# The files of modules compiled only for tests or for the fake machines.
test_module_files() {
    find crates -path crates/fuzz -prune -o -path '*/src/*' -name '*.rs' -print | sort |
        while read -r f; do
            awk '/^[[:space:]]*#\[cfg\((test|any\(test, feature = "fake"\))\)\]/ { t = 1; next }
                t && /^[[:space:]]*(pub(\([a-z]+\))? )?mod [A-Za-z0-9_]+;/ {
                    sub(/.*mod /, ""); sub(/;.*/, ""); print }
                { t = 0 }' "$f" |
                while read -r m; do
                    dir=$(dirname "$f")
                    case $(basename "$f" .rs) in
                    lib | main | mod) ;;
                    *) dir="$dir/$(basename "$f" .rs)" ;;
                    esac
                    for c in "$dir/$m.rs" "$dir/$m/mod.rs"; do
                        if [ -f "$c" ]; then echo "$c"; fi
                    done
                done
        done
}
code=$(mktemp)
all_code=$(mktemp)
trap 'rm -f "$code" "$all_code"' EXIT
code_lines >"$all_code"
tests=$(test_module_files)
tests_re="^($(printf '%s\n' "$tests" | sed 's/[.]/\\./g' | paste -sd'|' -)):"
grep -Ev "$tests_re" "$all_code" >"$code" || true

# Each /proc or /sys string literal of non-test code outside kernel and
# parse, as FILE:LINE:REASON:LITERAL (REASON 1 when a `//` comment of at
# least three words stands on its line, or directly above it: the walk up
# passes at most four lines of the same expression, and stops at a blank
# line, an attribute or doc comment, or a line that ends a statement, a block
# or an argument: `;`, `{`, `}` or `,`).
path_literals() {
    grep -Ev '^crates/(kernel|parse)/' "$code" | cut -d: -f1 | sort -u |
        while read -r f; do
            awk -v f="$f" '
                /^#\[cfg\(test\)\]/ { exit }
                { line[FNR] = $0 }
                /^[[:space:]]*\/\// { next }
                function wordy(c) { sub(/^[^\/]*\/\/+[!]?/, "", c); return split(c, w, /[[:space:]]+/) >= 4 }
                {
                    rest = $0; n = 0
                    while (match(rest, /"\/(proc|sys)[^"]*"/)) {
                        lit[++n] = substr(rest, RSTART, RLENGTH); rest = substr(rest, RSTART + RLENGTH)
                    }
                    if (n == 0) next
                    reason = 0
                    bare = $0; gsub(/"([^"\\]|\\.)*"/, "\"\"", bare)
                    if (bare ~ /\/\// && wordy(substr(bare, index(bare, "//")))) reason = 1
                    for (i = FNR - 1; !reason && i >= 1 && i >= FNR - 4; i--) {
                        l = line[i]
                        if (l ~ /^[[:space:]]*\/\/[^\/!]/) { reason = wordy(l); break }
                        if (l ~ /^[[:space:]]*$/ || l ~ /[;{},][[:space:]]*$/ || l ~ /^[[:space:]]*(\/\/\/|\/\/!|#)/) break
                    }
                    for (j = 1; j <= n; j++) print f ":" FNR ":" reason ":" lit[j]
                }' "$f"
        done
}
literals=$(path_literals)

# Where a command starts: the CLI's one constructor of the machine, and the
# rt library's for programs that call it directly. The kernel crate defines
# RealKernel and FileStore.
entry='^(crates/cli/src/host\.rs|crates/rt/src/program\.rs):'
defs='^(crates/kernel/src/(real|lib|store)\.rs):'

# grep that is not an error when nothing matches (a count of 0).
g() { grep "$@" || true; }
real_lib=$(g -E 'RealKernel' "$code" | g -Ev "$defs|$entry|^crates/cli/" | wc -l)
real_cli=$(g -E 'RealKernel' "$code" | g -E '^crates/cli/' | g -Ev "$entry" | wc -l)
env_lib=$(g -E 'from_env\(\)' "$code" | g -Ev "$defs|$entry|^crates/cli/" | g -v 'fn from_env' | wc -l)
env_cli=$(g -E 'from_env\(\)' "$code" | g -E '^crates/cli/' | g -Ev "$entry" | wc -l)
store_env_lib=$(g -E 'FileStore::from_env\(\)' "$code" | g -Ev "$defs|$entry|^crates/cli/" | wc -l)
paths=$(printf '%s\n' "$literals" | grep -c . || true)
paths_distinct=$(printf '%s\n' "$literals" | g . | cut -d: -f4- | sort -u | wc -l)
paths_bare=$(printf '%s\n' "$literals" | g -E '^[^:]+:[0-9]+:0:' | wc -l)
old_paths=$(g -Ev '^crates/(kernel|parse)/' "$all_code" | g -oE '"/(proc|sys)[^"]*"' | wc -l)
old_paths_distinct=$(g -Ev '^crates/(kernel|parse)/' "$all_code" | g -oE '"/(proc|sys)[^"]*"' | sort -u | wc -l)
# A process/thread listing: a directory read of /proc or of a task directory
# (the kernel door's Procfs reads the /proc root it is given: `self.root`).
listings=$(g -E 'read_dir' "$code" | g -E '"/proc"|/task"|/task\b|PROC\b|self\.root' | cut -d: -f1 | sort -u)
listing_n=$(printf '%s\n' "$listings" | grep -c . || true)
# A twin: `pub fn X_in` beside a `pub fn X` (one makes its own store, one takes it).
shield_fns=$(g -E '^crates/shield/src/' "$code" | g -oE 'pub fn [a-z_]+\(' | sed 's/pub fn //; s/($//' | sort -u)
twins=$(printf '%s\n' "$shield_fns" | g -E '_in$' | while read -r f; do
    if printf "%s\n" "$shield_fns" | grep -qx "${f%_in}"; then echo "$f"; fi; done | wc -l)
cli_lines=$(find crates/cli/src -name '*.rs' -print0 | xargs -0 cat | wc -l)
# Functions over 100 lines: from a `fn` line to the brace that closes it.
long_fns=$(find crates -path crates/fuzz -prune -o -path '*/src/*' -name '*.rs' -print | sort |
    xargs awk '
        FNR == 1 { depth = 0; open = 0; stop = 0 }
        /^#\[cfg\(test\)\]/ { stop = 1 }
        stop { next }
        {
            line = $0
            gsub(/"([^"\\]|\\.)*"/, "", line); gsub(/'"'"'.'"'"'/, "", line); sub(/\/\/.*/, "", line)
            if (!open && line ~ /(^|[[:space:]])fn [A-Za-z_][A-Za-z0-9_]*/ && line !~ /;[[:space:]]*$/) {
                open = 1; start = FNR; base = depth; name = line
                sub(/.*fn /, "", name); sub(/[(<].*/, "", name); seen = 0
            }
            n = gsub(/\{/, "{", line); c = gsub(/\}/, "}", line)
            depth += n - c
            if (open && n > 0) seen = 1
            if (open && seen && depth <= base) {
                if (FNR - start + 1 > 100) printf "%s:%d %s %d\n", FILENAME, start, name, FNR - start + 1
                open = 0
            }
        }')
long_n=$(printf '%s\n' "$long_fns" | grep -c . || true)

printf 'RealKernel lines in library code (not the entry points, not tests): %s\n' "$real_lib"
printf 'RealKernel lines in the CLI outside src/host.rs:                   %s\n' "$real_cli"
printf 'from_env() calls in library code:                                  %s\n' "$env_lib"
printf '  of them FileStore::from_env():                                   %s\n' "$store_env_lib"
printf 'from_env() calls in the CLI outside src/host.rs:                   %s\n' "$env_cli"
printf 'shield *_in twin functions:                                        %s\n' "$twins"
printf 'path literals outside kernel, parse and tests:                     %s (%s distinct), without a reason: %s\n' "$paths" "$paths_distinct" "$paths_bare"
printf 'process/thread listing implementations (files):                    %s\n' "$listing_n"
printf 'CLI lines (crates/cli/src):                                        %s\n' "$cli_lines"
printf 'functions over 100 lines:                                          %s\n' "$long_n"
if [ "${VERBOSE:-}" ]; then
    echo '--- listings'; printf '%s\n' "$listings"
    echo '--- long functions'; printf '%s\n' "$long_fns"
    echo '--- path literals outside kernel, parse and tests (FILE:LINE:REASON:LITERAL)'
    printf '%s\n' "$literals"
    echo '--- test-only module files'; printf '%s\n' "$tests"
    printf '/proc and /sys path literals outside kernel and parse, test modules included: %s (%s distinct)\n' "$old_paths" "$old_paths_distinct"
    echo '--- RealKernel / from_env in library code'
    g -E 'RealKernel|from_env\(\)' "$code" | g -Ev "$defs|$entry|^crates/cli/" | g -v 'fn from_env'
fi
