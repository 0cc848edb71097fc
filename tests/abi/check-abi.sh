#!/usr/bin/env bash
# The installed ABI: every function and extern object an installed header
# declares is exported by its library, under a version node; nothing else is
# exported; the sonames are the ABI's, not the release's; the Debian symbols
# file lists exactly the exports (dh_makeshlibs -c4 fails the build otherwise).
#   check-abi.sh BUILD_DIR SOURCE_DIR      check the built libraries
#   check-abi.sh --selftest                show the checks fail on a bad library
set -uo pipefail

die() { echo "check-abi: $*" >&2; exit 1; }
command -v ctags-universal >/dev/null || die "ctags-universal missing (package universal-ctags)"

# Names of functions and extern objects the headers declare.
declared() { ctags-universal -x --c-kinds=px --language-force=C "$@" | awk '{print $1}' | sort -u; }

# "name version" per defined dynamic symbol; version "-" when it has none.
exports() {
    nm -D --defined-only --with-symbol-versions "$1" | awk '
        $2 == "A" { next }                                  # the version node itself
        { n = $3; v = "-"; i = index(n, "@"); if (i) { v = substr(n, i); sub(/^@+/, "", v); n = substr(n, 1, i - 1) }
          print n, v }' | sort -u
}

# check LIB SONAME NODE_PREFIX HEADER...
check() {
    local lib=$1 soname=$2 prefix=$3; shift 3
    local bad=0 got
    got=$(objdump -p "$lib" | awk '$1 == "SONAME" { print $2 }')
    [ "$got" = "$soname" ] || { echo "$lib: soname '$got', want '$soname'"; bad=1; }
    local exp; exp=$(exports "$lib")
    local missing; missing=$(comm -23 <(declared "$@") <(printf '%s\n' "$exp" | awk '{print $1}' | sort -u))
    [ -z "$missing" ] || { echo "$lib: declared in a header but not exported:" $missing; bad=1; }
    local extra; extra=$(comm -13 <(declared "$@") <(printf '%s\n' "$exp" | awk '{print $1}' | sort -u))
    [ -z "$extra" ] || { echo "$lib: exported but declared in no installed header:" $extra; bad=1; }
    local unversioned; unversioned=$(printf '%s\n' "$exp" | awk -v p="$prefix" '$2 !~ "^" p "_[0-9]+\\.[0-9]+$" {print $1 "(" $2 ")"}')
    [ -z "$unversioned" ] || { echo "$lib: exported without a $prefix version node:" $unversioned; bad=1; }
    [ "$bad" -eq 0 ] && echo "$lib: $(printf '%s\n' "$exp" | wc -l) symbols, all declared and versioned, soname $soname"
    return "$bad"
}

# "name@node" per export, the nodes themselves as "NODE@NODE", as dpkg's symbols files name them.
debian_names() {
    nm -D --defined-only --with-symbol-versions "$1" | awk '
        $2 == "A" { print $3 "@" $3; next }
        { n = $3; sub(/@@/, "@", n); print n }' | sort -u
}

# symbols_match LIB SONAME FILE: FILE's section for SONAME names exactly LIB's exports.
symbols_match() {
    local lib=$1 soname=$2 file=$3
    local listed; listed=$(awk -v s="$soname" '/^[^ *#]/ { on = ($1 == s); next } on && /^ / { print $1 }' "$file" | sort -u)
    local exp; exp=$(debian_names "$lib")
    local diffs; diffs=$(diff <(printf '%s\n' "$listed") <(printf '%s\n' "$exp") | grep '^[<>]')
    [ -z "$diffs" ] && { echo "$file: $soname lists its $(printf '%s\n' "$exp" | wc -l) exports"; return 0; }
    echo "$file: $soname section differs from $lib's exports (< listed only, > exported only):" $diffs
    return 1
}

selftest() {
    d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
    mkdir -p "$d/orbit"
    printf 'int orbit_a(void);\nextern const unsigned ORBIT_B;\n' > "$d/orbit/x.h"
    printf 'int orbit_a(void) { return 0; }\nconst unsigned ORBIT_B = 1;\n' > "$d/x.c"
    printf 'ORBIT_0.1 { global: orbit_a; ORBIT_B; local: *; };\n' > "$d/x.map"
    cc -shared -fPIC -o "$d/good.so" -Wl,-soname,libx.so.0 -Wl,--version-script="$d/x.map" "$d/x.c" || die "selftest: cc failed"
    check "$d/good.so" libx.so.0 ORBIT "$d/orbit/x.h" >/dev/null || die "selftest: a good library failed the check"
    cc -shared -fPIC -o "$d/unversioned.so" -Wl,-soname,libx.so.0 "$d/x.c"
    check "$d/unversioned.so" libx.so.0 ORBIT "$d/orbit/x.h" >/dev/null && die "selftest: an unversioned export passed"
    printf 'int orbit_a(void);\nextern const unsigned ORBIT_B;\nint orbit_c(int);\n' > "$d/orbit/y.h"
    check "$d/good.so" libx.so.0 ORBIT "$d/orbit/y.h" >/dev/null && die "selftest: a declared, unexported name passed"
    printf 'ORBIT_0.1 { global: orbit_a; local: *; };\n' > "$d/lower.map"
    cc -shared -fPIC -o "$d/lower.so" -Wl,-soname,libx.so.0 -Wl,--version-script="$d/lower.map" "$d/x.c"
    check "$d/lower.so" libx.so.0 ORBIT "$d/orbit/x.h" >/dev/null && die "selftest: an unexported extern object passed"
    check "$d/good.so" libx.so.1 ORBIT "$d/orbit/x.h" >/dev/null && die "selftest: a wrong soname passed"
    printf 'libx.so.0 libx0 #MINVER#\n ORBIT_0.1@ORBIT_0.1 0.1\n ORBIT_B@ORBIT_0.1 0.1\n orbit_a@ORBIT_0.1 0.1\n' > "$d/good.symbols"
    symbols_match "$d/good.so" libx.so.0 "$d/good.symbols" >/dev/null || die "selftest: a complete symbols file failed"
    grep -v orbit_a "$d/good.symbols" > "$d/short.symbols"
    symbols_match "$d/good.so" libx.so.0 "$d/short.symbols" >/dev/null && die "selftest: a symbols file missing an export passed"
    symbols_match "$d/lower.so" libx.so.0 "$d/good.symbols" >/dev/null && die "selftest: a symbols file listing a lost export passed"
    echo "selftest: unversioned, unexported and wrong-soname libraries and incomplete symbols files all fail the check"
}

if [ "${1:-}" = "--selftest" ]; then selftest; exit 0; fi
[ $# -eq 2 ] || die "usage: check-abi.sh BUILD_DIR SOURCE_DIR | --selftest"
build=$1 src=$2
rc=0
# One include root: every header is liborbit's but reaper.h, liborbit-reaper's.
headers=()
for h in "$src"/lib/include/orbit/*.h; do
    [ "$(basename "$h")" = reaper.h ] || headers+=("$h")
done
check "$build/liborbit.so" liborbit.so.0 ORBIT "${headers[@]}" "$build"/lib/include/orbit/version.h || rc=1
symbols_match "$build/liborbit.so" liborbit.so.0 "$src/debian/liborbit0.symbols" || rc=1
if [ -e "$build/bpf/liborbit-reaper.so" ]; then
    check "$build/bpf/liborbit-reaper.so" liborbit-reaper.so.0 ORBIT_REAPER "$src"/lib/include/orbit/reaper.h || rc=1
    symbols_match "$build/bpf/liborbit-reaper.so" liborbit-reaper.so.0 "$src/debian/liborbit0.symbols" || rc=1
fi
exit "$rc"
