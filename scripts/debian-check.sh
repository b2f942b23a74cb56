#!/usr/bin/env bash
# Check the README's promise on a bare Debian: build a minimal bookworm chroot (python3, venv,
# git and certificates only), clone this repository's current branch into it and run both
# README commands there: scripts/test.sh, then scripts/run.sh offscreen for 10 s.
# Usage (as root, on Debian): scripts/debian-check.sh [CHROOT_DIR [PYTEST_ARGS...]]
#   CHROOT_DIR defaults to /work/chroot; PYTEST_ARGS (e.g. -rs) go to scripts/test.sh.
# Env: XENGINE_SKIP_TORCH=1 passes through to setup.sh; PIP_FIND_LINKS (a folder of wheels,
# e.g. a local torch wheel) is bind-mounted and passed through; the host's pip cache is shared.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
root="${1:-/work/chroot}"
shift || true
branch="$(git -C "$repo" rev-parse --abbrev-ref HEAD)"

[ -x "$root/usr/bin/python3" ] || {
  command -v debootstrap >/dev/null || apt-get install -y debootstrap
  debootstrap --variant=minbase --include=python3,python3-venv,git,ca-certificates \
    bookworm "$root" http://deb.debian.org/debian
}
cp /etc/resolv.conf "$root/etc/resolv.conf"
# this host's own certificate authorities (a network behind a TLS proxy needs them for pip)
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
  chroot "$root" update-ca-certificates >/dev/null
fi

mounts=()
bind() {  # bind $1 at the same path inside the chroot, unmounted on exit
  mkdir -p "$root$1"
  mount --bind "$1" "$root$1"
  mounts=("$root$1" "${mounts[@]}")
}
cleanup() { for m in "${mounts[@]}"; do umount "$m" || umount -l "$m"; done; }
trap cleanup EXIT
bind /proc; bind /sys; bind /dev; bind /dev/pts; bind /dev/shm
mkdir -p /root/.cache/pip && bind /root/.cache/pip
pass=(HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8)
[ -n "${XENGINE_SKIP_TORCH:-}" ] && pass+=("XENGINE_SKIP_TORCH=$XENGINE_SKIP_TORCH")
if [ -n "${PIP_FIND_LINKS:-}" ] && [ -d "$PIP_FIND_LINKS" ]; then
  bind "$PIP_FIND_LINKS"
  pass+=("PIP_FIND_LINKS=$PIP_FIND_LINKS")
fi

rm -rf "$root/root/xengine"
git clone -q -b "$branch" "$repo" "$root/root/xengine"
in_chroot() { chroot "$root" /usr/bin/env -i "${pass[@]}" nice -n 10 bash -c "cd /root/xengine && $1"; }

status=0
in_chroot "scripts/test.sh $*" || status=$?
echo "scripts/test.sh: exit $status"
# run.sh: set up, then open the window offscreen; once main.py has run for 10 s, end it.
run_status=0
in_chroot 'export QT_QPA_PLATFORM=offscreen; scripts/run.sh & pid=$!
  until grep -qs main.py /proc/$pid/cmdline || ! kill -0 $pid 2>/dev/null; do sleep 1; done
  sleep 10; kill -0 $pid 2>/dev/null || { wait $pid; exit 1; }  # it must still be up
  kill $pid; wait $pid; [ $? -eq 143 ]' || run_status=$?
echo "scripts/run.sh: exit $run_status (0: the window ran 10 s and ended on SIGTERM)"
[ "$status" -eq 0 ] && [ "$run_status" -eq 0 ]
