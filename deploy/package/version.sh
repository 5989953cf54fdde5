#!/bin/sh
# Prints this checkout's version, the one the binaries' -ldflags and the packages carry
# (Makefile VERSION): `git describe --tags --always --dirty`, made a Debian version.
#   tag v1.2.3                 -> 1.2.3
#   4 commits after v1.2.3     -> 1.2.3+4.gabc1234
#   no tag (commit count 812)  -> 0.0.0+812.gabc1234
#   uncommitted changes        -> the above + ".dirty"
# Each form sorts after the ones before it (dpkg --compare-versions), so a later commit
# upgrades an earlier one.
set -eu
cd "$(dirname "$0")/../.."
d=$(git describe --tags --always --dirty --match 'v[0-9]*' 2>/dev/null) || { echo 0.0.0+unknown; exit 0; }
dirty=
case $d in *-dirty) dirty=.dirty; d=${d%-dirty} ;; esac
case $d in
v[0-9]*-[0-9]*-g*) # v1.2.3-4-gabc1234
	base=${d%-*-g*}; rest=${d#"$base"-}; n=${rest%%-*}; h=${rest#*-}
	echo "${base#v}+$n.$h$dirty" ;;
v[0-9]*) echo "${d#v}${dirty:++0$dirty}" ;;
*) echo "0.0.0+$(git rev-list --count HEAD).g$d$dirty" ;;
esac
