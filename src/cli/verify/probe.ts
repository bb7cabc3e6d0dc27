/**
 * What every verify container reports about itself before its check's command runs: read from
 * inside, where the kernel (not the engine's word) decides. One `@verify <key> <value>` line per
 * fact, on stderr, so each check's own stdout is as before. busybox sh and coreutils both run it.
 */
export const PROBE_KEYS = [
  'Seccomp',
  'NoNewPrivs',
  'CapEff',
  'pidns',
  'ipcns',
  'init',
  'label',
  'apparmor',
  'pids.max',
  'memory.max',
  'kernel',
  'sentry',
] as const;
export type ProbeKey = (typeof PROBE_KEYS)[number];
/** A fact that could not be read is "". */
export type ProbeFacts = Record<ProbeKey, string>;

const MARK = '@verify';
/** What gVisor's sentry answers in /proc/version (any release so far). */
export const GVISOR_PROC_VERSION = 'Linux version 4.4.0 #1 SMP Sun Jan 10 15:06:54 PST 2016';

const status = (key: string) => `echo "${MARK} ${key} $(sed -n "s/^${key}:[[:space:]]*//p" /proc/self/status)"`;
const fact = (key: ProbeKey, command: string) => `echo "${MARK} ${key} $(${command})"`;

/** Shell text run before each verify command: facts to stderr, the probe's own errors to nowhere. */
export const PROBE_SCRIPT = `{ ${[
  status('Seccomp'),
  status('NoNewPrivs'),
  status('CapEff'),
  fact('pidns', 'readlink /proc/self/ns/pid'),
  fact('ipcns', 'readlink /proc/self/ns/ipc'),
  fact('init', 'cat /proc/1/comm'),
  fact('label', "tr -d '\\000' < /proc/self/attr/current"),
  fact('apparmor', 'cat /sys/module/apparmor/parameters/enabled'),
  // cgroup v1 (its own hierarchy per controller), else v2 (one unified file per limit).
  fact('pids.max', 'cat /sys/fs/cgroup/pids/pids.max || cat /sys/fs/cgroup/pids.max'),
  fact('memory.max', 'cat /sys/fs/cgroup/memory/memory.limit_in_bytes || cat /sys/fs/cgroup/memory.max'),
  fact('kernel', 'uname -r'),
  // gVisor's sentry: its log names it (where seccomp lets dmesg run), and its /proc/version is its own fixed line.
  fact('sentry', `{ dmesg | grep -o -m 1 "Starting gVisor"; grep -q "^${GVISOR_PROC_VERSION}" /proc/version && echo gVisor; } | head -n 1`),
].join('; ')}; } 3>&2 2>/dev/null >&3; `;

/** The probe's facts from a run's stderr; undefined when it printed none (it never ran). */
export function parseProbe(stderr: string): ProbeFacts | undefined {
  const facts = Object.fromEntries(PROBE_KEYS.map((k) => [k, ''])) as ProbeFacts;
  let found = false;
  for (const line of stderr.split('\n')) {
    const m = /^@verify (\S+) ?(.*)$/.exec(line);
    if (!m || !(PROBE_KEYS as readonly string[]).includes(m[1]!)) continue;
    found = true;
    facts[m[1] as ProbeKey] ||= m[2]!.trim();
  }
  return found ? facts : undefined;
}
