#!/usr/bin/env bash
# orbitctl top against a real member (top_load: RATE reservations, 100-byte
# writes and admission claims per second) in an 80x24 tmux pane:
#   - plain output (not a terminal): --count 2 gives two blocks, no escape
#     bytes, no line over 80 columns, the pool's rate near RATE;
#   - in tmux: the view fits 80x24, shows the fleet and a non-zero pool rate;
#     after kill -9 the node shows DEAD, after orbitctl reap the death and what
#     came back; a resize to 60x20 is followed (SIGWINCH); q exits 0 with the
#     alternate screen left and the tty modes as they were; so does Ctrl-C.
# Usage: test_top.sh ORBITCTL TOP_LOAD. Exit 77 only when tmux cannot run.
set -u
ctl=$1 load=$2
RATE=200
tmp=$(mktemp -d)
fleet="top-test-$$"
sock="orbit-top-test-$$"
member=""

T() { tmux -L "$sock" -f "$tmp/tmux.conf" "$@"; }
cleanup() {
    [ -n "$member" ] && kill -9 "$member" 2>/dev/null
    T kill-server 2>/dev/null
    "$ctl" unlink "$fleet" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
    echo "FAIL: $*"
    for f in "$tmp/screen" "$tmp/plain"; do [ -s "$f" ] && { echo "--- $f"; cat "$f"; }; done
    exit 1
}
# wait_for SECONDS COMMAND...: COMMAND until it succeeds, at most SECONDS.
wait_for() {
    local end=$((SECONDS + $1)); shift
    until "$@"; do
        [ "$SECONDS" -ge "$end" ] && return 1
        sleep 0.2
    done
}
screen() { T capture-pane -p -t "$1" > "$tmp/screen"; }
shows() { screen "$1" && grep -Eq -- "$2" "$tmp/screen"; }

printf 'set -g status off\nset -g remain-on-exit on\n' > "$tmp/tmux.conf"
if ! command -v tmux >/dev/null; then echo "SKIP: tmux is not installed"; exit 77; fi
if ! T new-session -d -s probe -x 80 -y 24 "sleep 30"; then echo "SKIP: tmux cannot start here"; exit 77; fi
T kill-session -t probe

"$load" "$fleet" "$RATE" > "$tmp/load.out" 2> "$tmp/load.err" &
member=$!
wait_for 20 grep -q '^ready' "$tmp/load.out" || fail "the member did not start: $(cat "$tmp/load.err")"

# ---- not a terminal: plain blocks ----
"$ctl" top "$fleet" --count 2 | cat > "$tmp/plain"
rc=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] || fail "orbitctl top | cat exited $rc"
n=$(grep -c '^orbit top ' "$tmp/plain")
[ "$n" -eq 2 ] || fail "plain output has $n blocks, want 2"
LC_ALL=C grep -q $'\033' "$tmp/plain" && fail "plain output has escape bytes"
LC_ALL=C tr -d '\n' < "$tmp/plain" | LC_ALL=C grep -q '[[:cntrl:]]' && fail "plain output has control bytes"
long=$(awk 'length($0) > 80' "$tmp/plain" | wc -l)
[ "$long" -eq 0 ] || fail "plain output has $long lines over 80 columns"
grep -q "^orbit top $fleet .*nodes 1/64: 1 live" "$tmp/plain" || fail "plain output does not show the fleet's member"
for r in $(sed -n 's/^pool .* reservations \([0-9]*\) .*/\1/p' "$tmp/plain"); do
    [ "$r" -ge $((RATE / 2)) ] && [ "$r" -le $((RATE * 3 / 2)) ] || fail "pool reservations $r/s, want about $RATE"
done
[ "$(grep -c '^pool .* reservations ' "$tmp/plain")" -eq 2 ] || fail "no pool rate in each block"
grep -q '^1 .* 30%' "$tmp/plain" || fail "domain 1 is not shown 30% used"
grep -Eq '^246:[0-9]+:[0-9]+ .* 1000 ' "$tmp/plain" || fail "the stream with 1000 bytes queued is not shown"

# ---- a terminal: tmux, 80x24 ----
T new-session -d -s top -x 80 -y 24 \
    "stty -g > $tmp/stty.before; $ctl top $fleet --interval 0.5; echo \$? > $tmp/rc; stty -g > $tmp/stty.after; sleep 60"
[ "$(T display -p -t top '#{pane_width}x#{pane_height}')" = 80x24 ] || fail "the pane is not 80x24"
wait_for 15 shows top '^pool +247 +reservations [1-9]' || fail "no pool rate on the screen"
screen top
head -1 "$tmp/screen" | grep -q "^orbit top $fleet " || fail "the title is not the first line (the view scrolled)"
[ "$(wc -l < "$tmp/screen")" -eq 24 ] || fail "the capture is not 24 lines"
[ "$(awk 'length($0) > 80' "$tmp/screen" | wc -l)" -eq 0 ] || fail "a line over 80 columns"
grep -Eq '^ +[0-9]+ +'"$member"' +live ' "$tmp/screen" || fail "the member's node is not shown live"
grep -q '^DEATHS ' "$tmp/screen" || fail "no DEATHS section in 80x24"
[ "$(T display -p -t top '#{alternate_on}')" = 1 ] || fail "top is not on the alternate screen"

kill -9 "$member"
wait "$member" 2>/dev/null
wait_for 15 shows top "pid $member DEAD" || fail "the killed member is not shown DEAD"
grep -q '^  holds .*lease' "$tmp/screen" || fail "what the dead node holds is not shown"
"$ctl" reap "$fleet" > /dev/null || fail "orbitctl reap failed"
member=""
wait_for 15 shows top 'DEATHS +1 reported' || fail "the death report is not counted"
wait_for 15 shows top 'reclaimed: .*lease' || fail "the reclaim is not shown"
shows top '1 death reported' || fail "the report event is not shown"
head -1 "$tmp/screen" | grep -q "^orbit top $fleet " || fail "the title is not the first line after the death"

T resize-window -t top -x 60 -y 20
wait_for 10 shows top '^orbit top ' || fail "no view after the resize"
[ "$(T display -p -t top '#{pane_width}x#{pane_height}')" = 60x20 ] || fail "the pane did not become 60x20"
sleep 1
screen top
head -1 "$tmp/screen" | grep -q "^orbit top $fleet " || fail "the view did not fit 60x20 (the title scrolled away)"
grep -q '^DEATHS ' "$tmp/screen" || fail "no DEATHS section in 60x20"

T send-keys -t top q
wait_for 10 test -s "$tmp/rc" || fail "orbitctl top did not exit on q"
[ "$(cat "$tmp/rc")" = 0 ] || fail "orbitctl top exited $(cat "$tmp/rc") on q"
wait_for 5 test -s "$tmp/stty.after" || fail "no stty after"
cmp -s "$tmp/stty.before" "$tmp/stty.after" || fail "the tty modes were not restored"
[ "$(T display -p -t top '#{alternate_on}')" = 0 ] || fail "the alternate screen was not left"
[ "$(T display -p -t top '#{cursor_flag}')" = 1 ] || fail "the cursor was left hidden"

# ---- Ctrl-C restores the terminal too ----
rm -f "$tmp/rc" "$tmp/stty.before" "$tmp/stty.after"
T new-session -d -s intr -x 80 -y 24 \
    "stty -g > $tmp/stty.before; $ctl top $fleet --interval 0.5; echo \$? > $tmp/rc; stty -g > $tmp/stty.after; sleep 60"
wait_for 15 shows intr '^orbit top ' || fail "the second view did not start"
[ "$(T display -p -t intr '#{alternate_on}')" = 1 ] || fail "the second view is not on the alternate screen"
T send-keys -t intr C-c
wait_for 10 test -s "$tmp/rc" || fail "orbitctl top did not exit on Ctrl-C"
[ "$(cat "$tmp/rc")" = 0 ] || fail "orbitctl top exited $(cat "$tmp/rc") on Ctrl-C"
wait_for 5 test -s "$tmp/stty.after" || fail "no stty after Ctrl-C"
cmp -s "$tmp/stty.before" "$tmp/stty.after" || fail "the tty modes were not restored after Ctrl-C"
[ "$(T display -p -t intr '#{alternate_on}')" = 0 ] || fail "the alternate screen was not left after Ctrl-C"

# ---- bad arguments: one line, exit 2 ----
"$ctl" top > /dev/null 2>&1; [ $? -eq 2 ] || fail "top without FLEET did not exit 2"
"$ctl" top "$fleet" --interval 0 > /dev/null 2>&1; [ $? -eq 2 ] || fail "--interval 0 did not exit 2"
"$ctl" top "$fleet" --sort size > /dev/null 2>&1; [ $? -eq 2 ] || fail "--sort size did not exit 2"
"$ctl" top "no-such-fleet-$$" --count 1 > /dev/null 2>&1; [ $? -eq 1 ] || fail "a missing fleet did not exit 1"
echo "ok: orbitctl top in tmux and as plain text"
