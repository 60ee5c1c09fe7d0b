#!/usr/bin/env bash
# The Debian package, installed for real (scripts/test.sh runs it after the profile-guided
# build): builds it from target/pgo as it is (scripts/package-deb.sh --no-build --pgo, the
# package users get), checks its file list and Depends, installs it with dpkg -i, checks that
# man finds the page, that bash completes `pronghorn`, that the installed doctor runs and that
# an installed `pronghorn run` finds its library, and removes the package again (dpkg -r),
# pass or fail.
# Root only (it installs into the machine); a machine that already has a pronghorn package
# installed is left alone. Either way it says "skipped".
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
  echo "test-package: not root: skipped (it installs the package with dpkg -i)" >&2
  exit 0
fi
if dpkg-query -W -f='${Status}' pronghorn 2>/dev/null | grep -q "ok installed"; then
  echo "test-package: a pronghorn package is installed here already: skipped (it would replace, then remove it)" >&2
  exit 0
fi

multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
deb=$(bash scripts/package-deb.sh --no-build --pgo | tail -1)
work=$(mktemp -d)
installed=0
cleanup() {
  [ "$installed" = 1 ] && dpkg --purge pronghorn >/dev/null
  rm -rf "$work" "$deb"
}
trap cleanup EXIT
fail() { echo "test-package: $*" >&2; exit 1; }

dpkg-deb -c "$deb" | awk '{ print $6 }' | sed 's|^\./|/|' > "$work/files"
for f in /usr/bin/pronghorn "/usr/lib/$multiarch/pronghorn/libpronghorn.so" /etc/pronghorn/pronghorn.toml \
  /usr/share/man/man1/pronghorn.1.gz /usr/share/man/man1/pronghorn-run.1.gz /usr/share/man/man1/pronghorn-doctor.1.gz \
  /usr/share/bash-completion/completions/pronghorn /usr/share/zsh/vendor-completions/_pronghorn \
  /usr/share/fish/vendor_completions.d/pronghorn.fish /usr/share/doc/pronghorn/config.md.gz \
  /usr/share/doc/pronghorn/examples/systemd/redis-server.conf /usr/share/doc/pronghorn/examples/systemd/mariadb.conf \
  /usr/share/doc/pronghorn/examples/systemd/nginx.conf; do
  grep -qx "$f" "$work/files" || fail "the package lacks $f"
done
grep -q pronghorn-reap "$work/files" && fail "a man page of the hidden reap helper"
[ "$(dpkg-deb -I "$deb" conffiles)" = /etc/pronghorn/pronghorn.toml ] || fail "the example config is not a conffile"
depends=$(dpkg-deb -f "$deb" Depends)
# DPDK is linked in statically: its own dependencies (libxdp and libbpf for af_xdp, libnuma for
# the EAL), no librte package.
for pkg in libc6 libxdp1 libbpf1 libnuma1 iproute2; do
  grep -q "\b$pkg\b" <<<"$depends" || fail "Depends lacks $pkg: $depends"
done
grep -q librte <<<"$depends" && fail "Depends names a DPDK runtime package: $depends"

dpkg -i "$deb" >/dev/null
installed=1
[ "$(man -w pronghorn)" = /usr/share/man/man1/pronghorn.1.gz ] || fail "man -w pronghorn: $(man -w pronghorn 2>&1)"
bash -c 'source /usr/share/bash-completion/completions/pronghorn && complete -p pronghorn' | grep -q _pronghorn \
  || fail "the bash completion does not complete pronghorn"

# doctor runs (a check may fail on this host: exit 1 is a result, not a crash).
/usr/bin/pronghorn doctor > "$work/doctor" || [ $? -eq 1 ] || fail "pronghorn doctor crashed: $(cat "$work/doctor")"
grep -q '^ok    privileges' "$work/doctor" || fail "doctor: $(cat "$work/doctor")"

# The installed run finds the library in the multiarch directory, and a program runs under it.
printf '[nic]\npmd = "af_xdp"\niface = "lo"\n[ipv4]\naddress = "10.99.77.1/24"\n' > "$work/lo.toml"
preload=$(/usr/bin/pronghorn run --config "$work/lo.toml" -- sh -c 'echo "$LD_PRELOAD"')
[ "$preload" = "/usr/lib/$multiarch/pronghorn/libpronghorn.so" ] || fail "LD_PRELOAD of an installed run: $preload"
/usr/bin/pronghorn run --config "$work/lo.toml" -- true || fail "pronghorn run -- true"

dpkg -r pronghorn >/dev/null
installed=0
[ ! -e /usr/bin/pronghorn ] || fail "dpkg -r left /usr/bin/pronghorn"
dpkg --purge pronghorn >/dev/null
echo "test-package: $(basename "$deb"): $(wc -l < "$work/files") entries, installed, man, bash completion, doctor, run: ok"
