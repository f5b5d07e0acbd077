# shellcheck shell=bash
# test/bench/args.sh: sourced first by the benchmarks, once they set PROG
# (their name, for messages), so that they check their settings before
# lib.sh installs anything: die MESSAGE, and positive NAME VALUE (refuses a
# VALUE that is not a whole number from 1).
die() { echo "$PROG: $*" >&2; exit 1; }
positive() { [[ $2 =~ ^[1-9][0-9]*$ ]] || die "$1 must be a positive integer, got '$2'"; }
