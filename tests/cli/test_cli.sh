#!/bin/sh
# test_cli.sh VERSION ORBITCTL ORBIT-REAPER [ORBIT-RELAY [ORBIT-BENCH]] — the tools'
# command lines (suite cli). An empty ORBIT-RELAY: not built.
# A bad argument: exit status 2, exactly one line on stderr that names the argument,
# nothing on stdout, and no segment or lock file of the fleet it named left behind.
# --help and --version: exit 0; --version prints "TOOL VERSION".
set -u
version=$1 orbitctl=$2 reaper=$3 relay=${4:-} bench=${5:-}
fleet="t-cli-$$-$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')"
failures=0
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

leftovers() {   # segments or lock files of $fleet in /dev/shm or any hugetlbfs mount
    for d in /dev/shm $(awk '$3 == "hugetlbfs" { print $2 }' /proc/mounts); do
        ls -d "$d"/orbit."$fleet".* 2>/dev/null
    done
}

# bad TOOL EXPECTED-TEXT ARGS...: exit 2, one stderr line containing EXPECTED-TEXT.
bad() {
    tool=$1 want=$2; shift 2
    "$tool" "$@" >"$out" 2>"$err"
    rc=$?
    name=$(basename "$tool")
    [ "$rc" -eq 2 ] || fail "$name $*: exit $rc, expected 2"
    [ "$(wc -l < "$err")" -eq 1 ] || { fail "$name $*: stderr is not one line:"; cat "$err"; }
    grep -qF -- "$want" "$err" || fail "$name $*: stderr lacks '$want': $(cat "$err")"
    grep -q "^$name: " "$err" || fail "$name $*: stderr does not start with '$name: '"
    [ ! -s "$out" ] || fail "$name $*: wrote to stdout"
    [ -z "$(leftovers)" ] || fail "$name $*: left $(leftovers)"
}

good() {   # good TOOL EXPECTED-STDOUT-TEXT ARGS...: exit 0
    tool=$1 want=$2; shift 2
    "$tool" "$@" >"$out" 2>"$err"
    rc=$?
    [ "$rc" -eq 0 ] || fail "$(basename "$tool") $*: exit $rc, expected 0"
    grep -qF -- "$want" "$out" || fail "$(basename "$tool") $*: stdout lacks '$want'"
}

# orbitctl
bad "$orbitctl" "no command"
bad "$orbitctl" "'frobnicate'" frobnicate "$fleet"
bad "$orbitctl" "'--frob'" --frob ls
bad "$orbitctl" "'-x'" -x ls
bad "$orbitctl" "show takes FLEET" show
bad "$orbitctl" "ls takes no argument" ls "$fleet"
bad "$orbitctl" "bad FLEET 'a/b'" show a/b
bad "$orbitctl" "bad FLEET" reap ""
bad "$orbitctl" "bad NODE '65536'" node-dead "$fleet" 65536 1
bad "$orbitctl" "bad NODE '-1'" node-dead "$fleet" -1 1
bad "$orbitctl" "bad NODE '3x'" node-dead "$fleet" 3x 1
bad "$orbitctl" "bad INCARNATION '18446744073709551616'" node-dead "$fleet" 1 18446744073709551616
bad "$orbitctl" "bad INCARNATION '0x'" node-dead "$fleet" 1 0x
bad "$orbitctl" "bad FLEET 'a/b'" metrics "$fleet" a/b
bad "$orbitctl" "metrics has no --json" --json metrics
good "$orbitctl" "usage: orbitctl" --help
good "$orbitctl" "orbitctl $version" --version
"$orbitctl" --help > "$out"
for cmd in ls show node-dead reap reset unlink metrics; do   # an example per command
    grep -q "^ *orbitctl .*$cmd" "$out" || fail "orbitctl --help: no example of $cmd"
done

# orbit-reaper (each bad argument is refused before any backend is opened)
bad "$reaper" "give --fleet NAME"
bad "$reaper" "bad --interval '0'" --fleet "$fleet" --interval 0
bad "$reaper" "bad --interval '60001'" --fleet "$fleet" --interval 60001
bad "$reaper" "bad --interval '1e3'" --fleet "$fleet" --interval 1e3
bad "$reaper" "--interval needs a value" --fleet "$fleet" --interval
bad "$reaper" "bad --backend 'ebpf'" --fleet "$fleet" --backend ebpf
bad "$reaper" "bad --fleet 'no/slash'" --fleet no/slash
bad "$reaper" "'--frob'" --fleet "$fleet" --frob
bad "$reaper" "bad argument 'extra'" --fleet "$fleet" extra
bad "$reaper" "bad --metrics '9464'" --fleet "$fleet" --metrics 9464
bad "$reaper" "bad --metrics '127.0.0.1:65536'" --fleet "$fleet" --metrics 127.0.0.1:65536
bad "$reaper" "--metrics needs a value" --fleet "$fleet" --metrics
good "$reaper" "usage: orbit-reaper" --help
good "$reaper" "orbit-reaper $version" --version

# orbit-relay (when built)
if [ -n "$relay" ]; then
    bad "$relay" "no mode"
    bad "$relay" "bad --workers '-3'" --fleet "$fleet" --listen 127.0.0.1:1 --upstream 127.0.0.1:2 --workers -3
    bad "$relay" "bad --workers '2x'" --fleet "$fleet" --listen 127.0.0.1:1 --upstream 127.0.0.1:2 --workers 2x
    bad "$relay" "bad --upstreams '0'" --fleet "$fleet" --listen 127.0.0.1:1 --upstream 127.0.0.1:2 --upstreams 0
    bad "$relay" "bad --listen 'nowhere'" --fleet "$fleet" --listen nowhere --upstream 127.0.0.1:2
    bad "$relay" "bad --listen '127.0.0.1:0x50'" --fleet "$fleet" --listen 127.0.0.1:0x50 --upstream 127.0.0.1:2
    bad "$relay" "bad --upstream ':2'" --fleet "$fleet" --listen 127.0.0.1:1 --upstream :2
    bad "$relay" "--fleet needs --upstream" --fleet "$fleet" --listen 127.0.0.1:1
    bad "$relay" "'--frob'" --frob
    bad "$relay" "it picks its own paths" --load http://127.0.0.1:1/size/100 --requests 1
    bad "$relay" "bad --load URL" --load http://:1/ --requests 1
    good "$relay" "orbit-relay --fleet NAME" --help
    good "$relay" "orbit-relay $version" --version
fi

# orbit-bench (when given; refused before any fleet is made; the subcommands this build has)
if [ -n "$bench" ]; then
    bad "$bench" "no subcommand"
    bad "$bench" "bad subcommand 'frob'" frob
    bad "$bench" "'--frob'" --frob
    bad "$bench" "bad --rtt '0'" wake --rtt 0
    bad "$bench" "bad --oneway '1x'" wake --oneway 1x
    bad "$bench" "bad --oneway '-3'" wake --oneway -3
    bad "$bench" "--rtt needs a value" wake --rtt
    bad "$bench" "'--frob'" wake --frob
    bad "$bench" "bad argument 'extra'" wake extra
    has() { "$bench" --help | grep -q "^  $1 "; }
    if has stream; then
        bad "$bench" "bad --rounds '1x'" stream --rounds 1x
        bad "$bench" "bad --mode 'sideways'" stream --mode sideways
        bad "$bench" "bad --cpus '1'" stream --cpus 1
        bad "$bench" "bad --cpus '1,1024'" stream --cpus 1,1024
        bad "$bench" "not both" stream --procs 2 --scale
    fi
    if has pool; then
        bad "$bench" "bad --ops '-5'" pool --ops -5
        bad "$bench" "bad --ops '1e9'" pool --ops 1e9
        bad "$bench" "bad --capacity '4294967296'" pool --capacity 4294967296
    fi
    if has admission; then
        bad "$bench" "bad --seconds '-1'" admission --seconds -1
        bad "$bench" "bad --seconds 'nan'" admission --seconds nan
        bad "$bench" "bad --seconds '0.5s'" admission --seconds 0.5s
    fi
    if has exchange; then
        bad "$bench" "bad --bytes '-4M'" exchange --bytes -4M
        bad "$bench" "bad --bytes '4Q'" exchange --bytes 4Q
        bad "$bench" "bad --bytes '2048G'" exchange --bytes 2048G
        bad "$bench" "bad --only 'carrier-pigeon'" exchange --only carrier-pigeon
    fi
    good "$bench" "usage: orbit-bench" --help
    good "$bench" "usage: orbit-bench wake" wake --help
    good "$bench" "orbit-bench $version" --version
fi

[ -z "$(leftovers)" ] || fail "segments left behind: $(leftovers)"
if [ "$failures" -ne 0 ]; then
    echo "$failures failure(s)"
    exit 1
fi
echo "every bad argument: exit 2, one line naming it, nothing left behind"
