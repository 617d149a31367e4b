# Helpers for the benchmark scripts that time whole commands by CPU
# (bench-encode-peers.sh, bench-first-sightings.sh); sourced, with $OUT set to a folder
# for the commands' standard error (log.txt).

# cpu CMD...: CPU seconds (user + system) of one run, stdout to /dev/null. The shell's
# `times` in a subshell gives its child's in milliseconds (GNU time's %U %S: 10 ms
# steps, 2-3% of our runs).
cpu() {
  local t
  t=$( ("$@" >/dev/null 2>>"$OUT/log.txt" || exit 1; times) ) || { echo nan; return; }
  echo "$t" | awk 'function s(x, a) { split(x, a, "m"); sub("s", "", a[2]); return 60 * a[1] + a[2] }
    NR == 2 { printf "%.3f", s($1) + s($2) }'
}
# work CMD...: CPU seconds of a peer's process less its start-up ($START).
work() { awk -v c="$(cpu "$@")" -v s="$START" 'BEGIN { printf "%.3f", c - s }'; }
# range VALUES...: "min-max".
range() { printf '%s\n' "$@" | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%s-%s", lo, hi }'; }
# lo VALUES...: the least.
lo() { printf '%s\n' "$@" | sort -g | head -1; }
# ratio A B: A / B to two places.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else printf "n/a" }'; }
