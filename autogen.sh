#!/bin/sh
# Regenerate the build system: ./autogen.sh && ./configure && make
set -e
cd "$(dirname "$0")"
mkdir -p m4 build-aux
autoreconf --force --install --warnings=all,no-obsolete
# automake ships the TAP driver but does not install it on its own.
cp -f "$(automake --print-libdir)/tap-driver.sh" build-aux/tap-driver.sh
