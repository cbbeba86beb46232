#!/usr/bin/env bash
# Installs (or with --uninstall removes) gpuwhy: the binary, the generated man pages and
# completions, the recorder's systemd unit and its settings file. `make install` and `make deb`
# call it; every directory is a variable so both layouts come from one list.
#   install.sh BUILD_DIR   (environment: DESTDIR PREFIX BINDIR MANDIR BASHCOMPDIR ZSHCOMPDIR
#                           UNITDIR SYSCONFDIR; GZIP_MAN=1 compresses the man pages)
#   install.sh --uninstall
set -euo pipefail

uninstall=0
if [ "${1:-}" = "--uninstall" ]; then uninstall=1; shift; fi
BUILD=${1:-build}
DESTDIR=${DESTDIR:-}
PREFIX=${PREFIX:-/usr/local}
BINDIR=${BINDIR:-$PREFIX/bin}
MANDIR=${MANDIR:-$PREFIX/share/man}
BASHCOMPDIR=${BASHCOMPDIR:-$PREFIX/share/bash-completion/completions}
ZSHCOMPDIR=${ZSHCOMPDIR:-$PREFIX/share/zsh/site-functions}
UNITDIR=${UNITDIR:-$PREFIX/lib/systemd/system}
SYSCONFDIR=${SYSCONFDIR:-/etc}
GZIP_MAN=${GZIP_MAN:-0}
here=$(cd "$(dirname "$0")" && pwd)

if [ "$uninstall" = 1 ]; then
  rm -f "$DESTDIR$BINDIR/gpuwhy" "$DESTDIR$BASHCOMPDIR/gpuwhy" "$DESTDIR$ZSHCOMPDIR/_gpuwhy" \
        "$DESTDIR$UNITDIR/gpuwhy-recorder.service"
  rm -f "$DESTDIR$MANDIR"/man1/gpuwhy.1 "$DESTDIR$MANDIR"/man1/gpuwhy.1.gz \
        "$DESTDIR$MANDIR"/man1/gpuwhy-*.1 "$DESTDIR$MANDIR"/man1/gpuwhy-*.1.gz
  # $SYSCONFDIR/default/gpuwhy holds the administrator's settings: left in place.
  echo "gpuwhy: removed from $DESTDIR$PREFIX (kept $DESTDIR$SYSCONFDIR/default/gpuwhy)"
  exit 0
fi

docs=$BUILD/packaging
if [ ! -x "$BUILD/gpuwhy" ] || [ ! -f "$docs/docs.stamp" ]; then
  echo "install: $BUILD/gpuwhy or its generated docs are missing — hint: run \`make\` first" >&2
  exit 1
fi
install -d "$DESTDIR$BINDIR" "$DESTDIR$MANDIR/man1" "$DESTDIR$BASHCOMPDIR" \
           "$DESTDIR$ZSHCOMPDIR" "$DESTDIR$UNITDIR" "$DESTDIR$SYSCONFDIR/default"
install -m 0755 "$BUILD/gpuwhy" "$DESTDIR$BINDIR/gpuwhy"
for page in "$docs"/man/*.1; do
  name=$(basename "$page")
  if [ "$GZIP_MAN" = 1 ]; then
    gzip -9n < "$page" > "$DESTDIR$MANDIR/man1/$name.gz"
    chmod 0644 "$DESTDIR$MANDIR/man1/$name.gz"
  else
    install -m 0644 "$page" "$DESTDIR$MANDIR/man1/$name"
  fi
done
install -m 0644 "$docs/completion/gpuwhy.bash" "$DESTDIR$BASHCOMPDIR/gpuwhy"
install -m 0644 "$docs/completion/_gpuwhy" "$DESTDIR$ZSHCOMPDIR/_gpuwhy"
sed -e "s|@BINDIR@|$BINDIR|g" -e "s|@SYSCONFDIR@|$SYSCONFDIR|g" \
  "$here/systemd/gpuwhy-recorder.service.in" > "$DESTDIR$UNITDIR/gpuwhy-recorder.service"
chmod 0644 "$DESTDIR$UNITDIR/gpuwhy-recorder.service"
# An existing settings file is the administrator's: never overwritten.
if [ ! -e "$DESTDIR$SYSCONFDIR/default/gpuwhy" ]; then
  install -m 0644 "$here/systemd/gpuwhy.default" "$DESTDIR$SYSCONFDIR/default/gpuwhy"
fi
echo "gpuwhy: installed into $DESTDIR$PREFIX"
