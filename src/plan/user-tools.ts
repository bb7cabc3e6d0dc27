/**
 * Where an agent's user-level installs go when its session has a persistent home: everything the
 * usual tools install lands under that home (counted against the run's disk limit, with the
 * home), and their programs in one directory on PATH, so what an agent installed for a person is
 * there at the next message and in the next container of that session. The image's system
 * directories stay read-only; nothing here makes them writable.
 */

/** The one directory installed programs go to (pip's scripts, npm -g, cargo and go installs). */
export const userBinOf = (home: string) => `${home}/.local/bin`;

/**
 * The environment for a home at `home` (inside the container). `path`: the system PATH; the
 * user's directory comes after it, so a program the tenant left there never stands in for one of
 * the image's (berth-bridge, sh) in a later run.
 */
export function userToolsEnv(home: string, path: string): Record<string, string> {
  const local = `${home}/.local`;
  return {
    PATH: `${path}:${userBinOf(home)}`,
    // pip: --user by default, into ~/.local. A Debian python refuses any pip install (PEP 668)
    // unless told otherwise; its system packages are read-only here, so none can break.
    PIP_USER: '1',
    PIP_BREAK_SYSTEM_PACKAGES: '1',
    PYTHONUSERBASE: local,
    // npm i -g: its prefix (the image's /usr/local is read-only): ~/.local/lib/node_modules, ~/.local/bin.
    NPM_CONFIG_PREFIX: local,
    // cargo install: the registry and build caches in the home, the programs in ~/.local/bin.
    CARGO_HOME: `${home}/.cargo`,
    CARGO_INSTALL_ROOT: local,
    // go install: modules under ~/go, programs in ~/.local/bin.
    GOPATH: `${home}/go`,
    GOBIN: userBinOf(home),
  };
}
