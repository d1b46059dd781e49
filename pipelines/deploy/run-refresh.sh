#!/bin/sh
# Run one bookft refresh pipeline and turn its exit code into something a scheduler can alert on.
#   usage: run-refresh.sh PROJECT_DIR PIPELINE_YAML [extra `bookft pipeline run` options]
# Prints nothing on success or "locked" (another refresh of the same corpus is running), so cron only
# mails real problems; always exits with bookft's code (0 ok/no change, 1 failed, 2 config error,
# 3 locked, 4 partial: failed/missing sources, 5 published but a post-step (eval) failed).
set -u
cd "$1" || { echo "bookft refresh: cannot cd to $1" >&2; exit 2; }
shift
pipeline="$1"
out=$(bookft pipeline run "$@" --json 2>&1)
code=$?
case $code in
  0) ;;
  3) ;;  # locked: the running refresh will publish; not an alert
  4) echo "bookft refresh $pipeline: PARTIAL (some sources failed or are missing); see its run log" >&2 ;;
  5) echo "bookft refresh $pipeline: published, but the eval post-step FAILED" >&2 ;;
  2) echo "bookft refresh $pipeline: CONFIG ERROR" >&2 ;;
  *) echo "bookft refresh $pipeline: FAILED (exit $code); current version unchanged" >&2 ;;
esac
[ $code -eq 0 ] || [ $code -eq 3 ] || printf '%s\n' "$out" | tail -n 40 >&2
exit $code
