#!/bin/sh
# check-man.sh MANDIR LIB... — the 'man' test suite.
# 1. Every page lints clean: mandoc -T lint -W warning prints nothing.
#    A page that is only a ".so manN/x.N" link must point at a page that exists.
# 2. Every page is listed in man/meson.build (so meson install installs it).
# 3. Every symbol a library exports (nm -D --defined-only) has a section 3 page.
# Exit 77 (meson: SKIP) when mandoc or nm is missing; 1 on any finding.
set -u
mandir=$1; shift
for tool in mandoc nm; do
    command -v "$tool" >/dev/null || { echo "SKIP: $tool not installed"; exit 77; }
done
bad=0
pages=0
for page in "$mandir"/man[1-8]/*.[1-8]; do
    pages=$((pages + 1))
    rel=${page#"$mandir"/}
    grep -qF "'$rel'" "$mandir/meson.build" || { echo "$rel: not listed in man/meson.build (not installed)"; bad=1; }
    first=$(head -n 1 "$page")
    case $first in
    .so\ *)
        target=${first#.so }
        if [ ! -f "$mandir/$target" ]; then
            echo "$page: .so target $target does not exist"; bad=1
        fi
        if [ "$(wc -l < "$page")" -ne 1 ]; then
            echo "$page: a .so link must be one line"; bad=1
        fi
        ;;
    *)
        out=$(mandoc -T lint -W warning "$page" 2>&1)
        if [ -n "$out" ]; then
            printf '%s\n' "$out"; bad=1
        fi
        ;;
    esac
done
[ "$pages" -gt 0 ] || { echo "no pages found under $mandir"; exit 1; }
symbols=0
for lib in "$@"; do
    [ -f "$lib" ] || { echo "$lib: not built"; bad=1; continue; }
    # Defined functions and objects; version nodes (type A) are not symbols to document.
    for sym in $(nm -D --defined-only "$lib" | awk '$2 ~ /^[TtDdRrBbWVi]$/ { sub(/@.*/, "", $3); print $3 }' | sort -u); do
        symbols=$((symbols + 1))
        if [ ! -f "$mandir/man3/$sym.3" ]; then
            echo "$lib: exported symbol $sym has no page (add man/man3/$sym.3)"; bad=1
        fi
    done
done
[ "$symbols" -gt 0 ] || { echo "no exported symbols found in $*"; exit 1; }
echo "$pages pages linted, $symbols exported symbols checked"
[ "$bad" -eq 0 ]
