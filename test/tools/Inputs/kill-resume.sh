#!/usr/bin/env bash
# Kills a run with --checkpoint-every at a random moment (kill -9), resumes
# from the newest periodic checkpoint, and compares the final weights with an
# uninterrupted run's: they must be bit-identical, and at most K periodic
# checkpoints may remain, K+1 when the kill fell between writing the newest
# and pruning the oldest.
#   kill-resume.sh DSC_RUN MODEL CONFIG DATA WORKDIR
set -euo pipefail
run=$1 model=$2 config=$3 data=$4 work=$5
steps=60 every=5 keep=2
train() { "$run" train --model "$model" --config "$config" --data "$data" "$@" > /dev/null; }

train --steps $steps --save "$work/reference.safetensors"
for trial in 1 2 3 4; do
  dir=$work/trial$trial
  mkdir -p "$dir"
  # Not through train(): $! must be dsc-run itself, not a subshell.
  "$run" train --model "$model" --config "$config" --data "$data" --steps $steps \
    --checkpoint "$dir/ck.safetensors" --checkpoint-every $every \
    --checkpoint-keep $keep > /dev/null &
  pid=$!
  sleep "0.$((RANDOM % 9 + 1))"
  kill -9 $pid 2> /dev/null || true
  wait $pid 2> /dev/null || true
  kept=$(ls "$dir" | sed -n 's/^ck-step\([0-9]*\)\.safetensors$/\1/p' | sort -n)
  if (($(echo "$kept" | grep -c .) > keep + 1)); then
    echo "FAIL: trial $trial kept more than $keep (+1 being pruned) checkpoints: $kept"
    exit 1
  fi
  latest=$(echo "$kept" | tail -1)
  if [ -z "$latest" ]; then
    train --steps $steps --save "$dir/w.safetensors"
  else
    train --steps $((steps - latest)) --resume "$dir/ck-step$latest.safetensors" \
      --save "$dir/w.safetensors"
  fi
  cmp "$dir/w.safetensors" "$work/reference.safetensors" ||
    { echo "FAIL: trial $trial (killed after step ${latest:-0}): weights differ"; exit 1; }
  echo "trial $trial: killed after step ${latest:-0} was saved; resumed to identical weights"
done
echo "PASS: 4 runs killed at random moments resumed to identical weights"
