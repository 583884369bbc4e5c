# Sourced by the scripts/install-*.sh that pip-install pinned wheels into a
# private directory. The caller sets DEST, PY, LIMIT, PINS (an array),
# STAMP_TEXT and say(), checks what its own packages need, then calls
# pip_install_pins, which exits the script with 0 in every case: a pip
# bounded by LIMIT seconds, wheels only, into a temporary directory moved
# into place whole with a stamp listing the pins; where pip or timeout(1)
# is missing, or pip fails, it says why and installs nothing.

pip_install_pins() {
  if ! "$PY" -m pip --version >/dev/null 2>&1; then
    say "not installed: $PY has no pip (apt-get install python3-pip)"
    exit 0
  fi
  if ! command -v timeout >/dev/null 2>&1; then
    say "not installed: no timeout(1) to bound pip"
    exit 0
  fi

  mkdir -p "$(dirname "$DEST")" || { say "not installed: cannot create $(dirname "$DEST")"; exit 0; }
  TMP=$(mktemp -d "$DEST.tmp.XXXXXX") || { say "not installed: mktemp failed"; exit 0; }
  LOG="$TMP.log"
  trap 'rm -rf "$TMP" "$LOG"' EXIT

  say "installing ${PINS[*]} into $DEST (at most ${LIMIT}s)"
  PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1 \
    timeout --kill-after=10 "$LIMIT" "$PY" -m pip install --target "$TMP" \
    --no-deps --only-binary=:all: --no-input --no-warn-script-location \
    --no-compile --quiet "${PINS[@]}" >"$LOG" 2>&1
  local rc=$?
  if [ $rc -ne 0 ]; then
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
      say "not installed: pip ran past ${LIMIT}s"
    else
      say "not installed: pip exited $rc:"
    fi
    tail -n 5 "$LOG" | sed 's/^/  /'
    exit 0
  fi
  printf '%s\n' "$STAMP_TEXT" >"$TMP/.dsc-pins"
  # Replace an old or partial install; if another run finished first, keep
  # its.
  if [ -f "$DEST/.dsc-pins" ] && [ "$(cat "$DEST/.dsc-pins")" = "$STAMP_TEXT" ]; then
    say "already installed in $DEST (by a concurrent run)"
    exit 0
  fi
  rm -rf "$DEST"
  if mv -T "$TMP" "$DEST" 2>/dev/null; then
    say "installed in $DEST"
  else
    say "not installed: could not move the install into $DEST"
  fi
  exit 0
}
