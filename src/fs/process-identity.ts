import fs from 'node:fs';

/**
 * Which berth process owns something (a run, a lock, a bridge): "<pid>.<start time>.<boot>" (the
 * start time, from /proc, tells a live owner from a new process that reuses the pid; the boot id
 * tells it from a process of a later boot with the same pid and start time, as a service started
 * at boot may get). Containers carry it as a label, the journals record it and owner locks hold
 * it, so a starting berth takes over only what dead processes left. An identity of an older berth
 * ("<pid>.<start time>") is judged without the boot.
 */
export function processIdentity(pid: number = process.pid): string | undefined {
  return statOf(pid)?.identity;
}

/** This process's identity, for what it holds (without /proc: the pid alone, never taken for alive). */
export function selfIdentity(): string {
  return processIdentity() ?? `${process.pid}.unknown`;
}

/** Whether the process an identity names is still running (the same process, not a reused pid; a zombie runs nothing). */
export function ownerAlive(owner: string | undefined): boolean {
  if (!owner) return false;
  const pid = Number(owner.split('.')[0]);
  if (!Number.isInteger(pid) || pid <= 0) return false;
  const stat = statOf(pid);
  const same = owner.split('.').length === 2 ? stat?.identity.startsWith(`${owner}.`) : stat?.identity === owner;
  return stat !== undefined && same === true && stat.state !== 'Z' && stat.state !== 'X';
}

/** This boot's id (8 hex characters of the kernel's boot_id), read once; "noboot" where there is none. */
let bootTag: string | undefined;
function thisBoot(): string {
  if (bootTag === undefined) {
    try {
      bootTag =
        fs
          .readFileSync('/proc/sys/kernel/random/boot_id', 'utf8')
          .replace(/[^0-9a-f]/g, '')
          .slice(0, 8) || 'noboot';
    } catch {
      bootTag = 'noboot';
    }
  }
  return bootTag;
}

/**
 * A process's (or thread's) /proc/<pid>/stat (or <pid> a /proc directory's path): command name, state (field 3), parent (field 4) and
 * start time (field 22, clock ticks after boot); undefined when there is no such process. The
 * name may hold spaces and parentheses: the fields are counted after its last ")".
 */
export function procStat(pid: number | string): { comm: string; state: string; ppid: number; start: string } | undefined {
  let text: string;
  try {
    // A number is looked up now; a path is a /proc directory already held (proc-handle.ts).
    text = fs.readFileSync(`${typeof pid === 'number' ? `/proc/${pid}` : pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  const close = text.lastIndexOf(')');
  const fields = text.slice(close + 2).split(' '); // fields[0] is the 3rd field
  return { comm: text.slice(text.indexOf('(') + 1, close), state: fields[0] ?? '', ppid: Number(fields[1]), start: fields[19] ?? '' };
}

function statOf(pid: number): { identity: string; state: string } | undefined {
  const stat = procStat(pid);
  return stat?.start ? { identity: `${pid}.${stat.start}.${thisBoot()}`, state: stat.state } : undefined;
}
