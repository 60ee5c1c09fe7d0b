#!/usr/bin/env bash
# Builds the Debian package: `bash scripts/package-deb.sh` -> target/deb/pronghorn_VERSION_ARCH.deb
# (its path is the last line printed). It holds /usr/bin/pronghorn, the preload library in
# /usr/lib/<multiarch>/pronghorn/ (where `pronghorn run` looks beside ../lib of its binary; the
# XDP program is inside the binary), man pages generated from the clap definitions
# (`pronghorn man`), bash, zsh and fish completions (`pronghorn completions`), an example
# /etc/pronghorn/pronghorn.toml (a conffile), the docs and the systemd drop-in examples.
#
# Depends are derived, not listed by hand: the packages owning the shared libraries the binary
# and the library link (ldd, then dpkg -S), each at least the upstream version built against.
# DPDK itself is linked in statically with its drivers (crates/dpdk-sys/src/drivers.rs), so no
# librte package is among them: what remains are DPDK's own dependencies (libxdp, libbpf,
# libnuma, libbsd...). Only dpkg-deb: no packaging tool to install.
# `--pgo` packages the profile-guided build (target/pgo, scripts/build-pgo.sh: root, about five
# minutes), the one users should get; without it the plain release build (target/release).
# `--no-build` packages the build as it is (scripts/test.sh has just made it).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

build=1
dir=target/release
for arg in "$@"; do
  case "$arg" in
    --no-build) build=0 ;;
    --pgo) dir=target/pgo ;;
    *) echo "package-deb: unknown argument $arg (--pgo, --no-build)" >&2; exit 2 ;;
  esac
done
if [ "$build" = 1 ]; then
  if [ "$dir" = target/pgo ]; then
    bash scripts/build-pgo.sh >/dev/null
  else
    cargo build --release --workspace
  fi
fi
bin=$dir/pronghorn
lib=$dir/libpronghorn.so
for f in "$bin" "$lib"; do
  [ -f "$f" ] || { echo "package-deb: $f is missing: build it (scripts/build-pgo.sh for target/pgo, cargo build --release --workspace for target/release)" >&2; exit 1; }
done

version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
arch=$(dpkg --print-architecture)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
name="pronghorn_${version}_${arch}"
stage="target/deb/$name"
rm -rf "$stage"
mkdir -p "$stage/DEBIAN" "$stage/usr/bin" "$stage/usr/lib/$multiarch/pronghorn" "$stage/etc/pronghorn" \
  "$stage/usr/share/man/man1" "$stage/usr/share/bash-completion/completions" \
  "$stage/usr/share/zsh/vendor-completions" "$stage/usr/share/fish/vendor_completions.d" \
  "$stage/usr/share/doc/pronghorn/examples/systemd"

# The release profile keeps debug info (for perf); the package does not need it.
strip --strip-debug -o "$stage/usr/bin/pronghorn" "$bin"
strip --strip-debug -o "$stage/usr/lib/$multiarch/pronghorn/libpronghorn.so" "$lib"
chmod 0755 "$stage/usr/bin/pronghorn"
chmod 0644 "$stage/usr/lib/$multiarch/pronghorn/libpronghorn.so"

"$bin" man "$stage/usr/share/man/man1"
gzip -9n "$stage"/usr/share/man/man1/*.1
"$bin" completions bash > "$stage/usr/share/bash-completion/completions/pronghorn"
"$bin" completions zsh > "$stage/usr/share/zsh/vendor-completions/_pronghorn"
"$bin" completions fish > "$stage/usr/share/fish/vendor_completions.d/pronghorn.fish"

install -m 0644 packaging/pronghorn.toml "$stage/etc/pronghorn/pronghorn.toml"
echo /etc/pronghorn/pronghorn.toml > "$stage/DEBIAN/conffiles"
install -m 0644 packaging/systemd/* "$stage/usr/share/doc/pronghorn/examples/systemd/"
install -m 0644 README.md docs/*.md "$stage/usr/share/doc/pronghorn/"
gzip -9n "$stage"/usr/share/doc/pronghorn/*.md

# Depends: the owners of what the dynamic linker loads (ldd), each `>= the upstream version`
# installed here.
linked=$(ldd "$bin" "$lib" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }')
if grep -q '/librte_' <<<"$linked"; then
  echo "package-deb: $bin or $lib links DPDK dynamically; it is meant to be linked in statically" >&2
  exit 1
fi
depends=$(for f in $linked; do
    real=$(readlink -f "$f")
    # dpkg -S knows the path the package ships: the file or the link to it (/lib or /usr/lib).
    dpkg -S "$f" 2>/dev/null || dpkg -S "$real" 2>/dev/null || dpkg -S "${real#/usr}" 2>/dev/null \
      || { echo "package-deb: no package owns $f" >&2; exit 1; }
  done | cut -d: -f1 | sort -u | while read -r pkg; do
    v=$(dpkg-query -W -f='${Version}' "$pkg")
    upstream=${v%-*}
    echo "$pkg (>= $upstream)"
  done | paste -sd, | sed 's/,/, /g')
# `ip` (iproute2): the reap helper detaches XDP programs and doctor reads the interface with it.
depends="$depends, iproute2"

installed_kib=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
cat > "$stage/DEBIAN/control" <<EOF
Package: pronghorn
Version: $version
Architecture: $arch
Maintainer: pronghorn developers <pronghorn@localhost>
Installed-Size: $installed_kib
Depends: $depends
Section: net
Priority: optional
Description: user-space TCP/IP stack over DPDK for unmodified servers
 pronghorn runs an unmodified server (redis-server, mariadbd, nginx) with its sockets on a
 TCP/IP stack inside the process, over DPDK (AF_XDP on any Linux interface), through
 LD_PRELOAD: pronghorn run -- CMD. pronghorn doctor checks a host before first use.
EOF
dpkg-deb --root-owner-group -Zxz --build "$stage" "target/deb/$name.deb" >/dev/null
rm -rf "$stage"
echo "target/deb/$name.deb"
