# Sourced by the shell tests that time the same configs twice (on one device
# and on several, in one process and across MPI ranks).
#   rank_agreement A.db B.db    prints Spearman's rho of the two databases'
# rankings of the configs both hold by median time, or "none" under two.
# Which single config is fastest is a poor check on this shared two-core
# machine: one slow sample of the best turns it over, while the ranking of
# configs whose times span some 80x stands. A record timed under another
# config's name scrambles the ranking.
rank_agreement() {
  local ranks='{ print $1 "|" NR }'
  LC_ALL=C join -t '|' \
    <(sqlite3 -cmd ".timeout 5000" "$1" "SELECT config, median_ms FROM records" 2>/dev/null | sort -t '|' -k2,2g | awk -F'|' "$ranks" | LC_ALL=C sort) \
    <(sqlite3 -cmd ".timeout 5000" "$2" "SELECT config, median_ms FROM records" 2>/dev/null | sort -t '|' -k2,2g | awk -F'|' "$ranks" | LC_ALL=C sort) |
    awk -F'|' '{ d = $(NF - 1) - $NF; s += d * d; n++ }
               END { if (n > 1) printf "%.3f\n", 1 - 6 * s / (n * (n * n - 1)); else print "none" }'
}
# rank_agreement_at_least RHO MIN: exit 0 where RHO is a number of at least MIN.
rank_agreement_at_least() { awk -v r="$1" -v m="$2" 'BEGIN { exit !(r != "none" && r + 0 >= m) }'; }
