# Sourced by the fetch scripts: a private apt for one Debian suite.
#
#   private_apt SUITE TMPDIR   sets the array apt_opts for apt-get/apt-cache
#
# The sources name the suite on the mirrors the host's own sources name; the
# lists, cache and status live in TMPDIR/apt, so the host's sources, lists
# and installed packages stay as they are. It runs `apt-get update` once.
private_apt() {
  local suite=$1 tmp=$2 f sources=() mirrors main security state
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    if [ -f "$f" ]; then sources+=("$f"); fi
  done
  mirrors=$(awk '/^deb / { for (i = 2; i <= NF; i++) if ($i ~ /:\/\//) print $i }
    /^URIs:/ { for (i = 2; i <= NF; i++) print $i }' "${sources[@]}" /dev/null)
  main=$(grep -m1 -E '/debian/?$' <<<"$mirrors" || true)
  security=$(grep -m1 -E '/debian-security/?$' <<<"$mirrors" || true)
  if [ -z "$main" ] || [ -z "$security" ]; then
    echo "private_apt: the host's apt sources name no .../debian and .../debian-security mirror" >&2
    return 1
  fi
  local keyring=/usr/share/keyrings/debian-archive-keyring.gpg
  state="$tmp/apt"
  mkdir -p "$state/lists/partial" "$state/cache/archives/partial"
  touch "$state/status"
  cat >"$state/sources.list" <<EOF
deb [signed-by=$keyring] $main $suite main
deb [signed-by=$keyring] $main $suite-updates main
deb [signed-by=$keyring] $security $suite-security main
EOF
  apt_opts=(-o Dir::Etc::SourceList="$state/sources.list" -o Dir::Etc::SourceParts=/nonexistent
    -o Dir::State::Lists="$state/lists" -o Dir::State::status="$state/status"
    -o Dir::Cache="$state/cache" -o Debug::NoLocking=1 -o APT::Sandbox::User=root)
  apt-get -q "${apt_opts[@]}" update >/dev/null
}
