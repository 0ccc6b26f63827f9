#!/usr/bin/env bash
# scripts/gpu-check.sh where there is no GPU: one clear "no GPU" line naming why, nothing
# run, status 0 (so CI can call it anywhere). On a GPU host this skips (status 77): there
# the script itself is the check, and it runs for minutes.
set -uo pipefail
script=$1
if probe=$("$script" --probe 2>&1) && [[ $probe == *"GPU present"* ]]; then
    echo "a usable GPU is here: run $script itself"
    exit 77
fi
out=$("$script" 2>&1)
rc=$?
echo "$out"
fail() { echo "FAIL: $*"; exit 1; }
[[ $rc -eq 0 ]] || fail "status $rc, expected 0 without a GPU"
grep -qE '^gpu-check: no GPU: .+' <<<"$out" || fail "no \"gpu-check: no GPU: <why>\" line"
grep -q '^== ' <<<"$out" && fail "something was run without a GPU"
[[ $(grep -c . <<<"$out") -le 2 ]] || fail "more than the two lines expected"
"$script" --bogus >/dev/null 2>&1
[[ $? -eq 2 ]] || fail "a bad argument must give status 2"
echo "PASS"
