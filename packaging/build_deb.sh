#!/usr/bin/env bash
# Builds gpuwhy_<version>_<arch>.deb with dpkg-deb from a built tree (`make deb` calls it).
#   build_deb.sh [BUILD_DIR [OUT_DIR]]    prints the path of the package it wrote
# The version is the one the binary reports (`gpuwhy version`, from CMake's project version);
# Depends is computed from the binary's dynamic section (glibc only, by design: DESIGN.md).
set -euo pipefail
BUILD=${1:-build}
OUT=${2:-$BUILD}
here=$(cd "$(dirname "$0")" && pwd)
bin=$BUILD/gpuwhy
[ -x "$bin" ] || { echo "deb: $bin is missing — hint: run \`make\` first" >&2; exit 1; }

version=$("$bin" version | awk '{print $2}')
[[ "$version" =~ ^[0-9][0-9A-Za-z.+~-]*$ ]] || { echo "deb: odd version '$version'" >&2; exit 1; }
arch=$(dpkg --print-architecture)

# Shared libraries the binary needs: only glibc's may appear (the rest is linked in).
needed=$(objdump -p "$bin" | awk '$1 == "NEEDED" {print $2}')
for lib in $needed; do
  case "$lib" in
    libc.so.6 | libm.so.6 | libpthread.so.0 | libdl.so.2 | librt.so.1 | ld-linux-*.so.*) ;;
    *) echo "deb: $bin needs $lib, which is not part of glibc — link it statically" >&2; exit 1 ;;
  esac
done
# The newest glibc symbol version it uses is the oldest libc6 it runs on.
glibc=$(objdump -T "$bin" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -1)
depends="libc6 (>= ${glibc:-2.17})"

# Staged next to the package (the test stages in its scratch directory, not the build tree).
mkdir -p "$OUT"
stage=$(mktemp -d "$OUT/.gpuwhy-deb.XXXXXX")
trap 'rm -rf "$stage"' EXIT
chmod 0755 "$stage"
mkdir -p "$stage/DEBIAN"
DESTDIR=$stage PREFIX=/usr UNITDIR=/lib/systemd/system \
  ZSHCOMPDIR=/usr/share/zsh/vendor-completions SYSCONFDIR=/etc GZIP_MAN=1 \
  "$here/install.sh" "$BUILD" > /dev/null
# The package ships the binary without debug sections (the build tree keeps them).
strip --strip-debug "$stage/usr/bin/gpuwhy"
install -d "$stage/usr/share/doc/gpuwhy"
when=$(date -u -R -d "@${SOURCE_DATE_EPOCH:-$(date +%s)}")
printf 'gpuwhy (%s) unstable; urgency=medium\n\n  * Built from the gpuwhy tree by packaging/build_deb.sh.\n\n -- %s  %s\n' \
  "$version" "gpuwhy developers <gpuwhy@localhost>" "$when" |
  gzip -9n > "$stage/usr/share/doc/gpuwhy/changelog.Debian.gz"
install -m 0644 "$here/debian/copyright" "$stage/usr/share/doc/gpuwhy/copyright"

size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
sed -e "s|@VERSION@|$version|" -e "s|@ARCH@|$arch|" -e "s|@DEPENDS@|$depends|" \
    -e "s|@SIZE@|$size|" "$here/debian/control.in" > "$stage/DEBIAN/control"
echo /etc/default/gpuwhy > "$stage/DEBIAN/conffiles"
for script in postinst prerm postrm; do
  install -m 0755 "$here/debian/$script" "$stage/DEBIAN/$script"
done
(cd "$stage" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z |
   xargs -0 md5sum) > "$stage/DEBIAN/md5sums"

deb=$OUT/gpuwhy_${version}_${arch}.deb
dpkg-deb --root-owner-group -Zxz --build "$stage" "$deb" > /dev/null
echo "$deb"
