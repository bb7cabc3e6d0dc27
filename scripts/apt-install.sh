# Sourced by the setup scripts: install Debian packages as root, or say what to install.
apt_install() {
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "berth: installing $* from Debian ..."
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" >/dev/null
  else
    echo "berth: please install $* (needs root on Debian)" >&2
    return 1
  fi
}
