import fs from 'node:fs';

/**
 * Which berth process owns something (a run, a lock, a bridge): "<pid>.<start time>" (the start
 * time, from /proc, tells a live owner from a new process that reuses the pid). Containers carry
 * it as a label, the journals record it and owner locks hold it, so a starting berth takes over
 * only what dead processes left.
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
  return stat !== undefined && stat.identity === owner && stat.state !== 'Z' && stat.state !== 'X';
}

function statOf(pid: number): { identity: string; state: string } | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name, which may hold spaces and parentheses: state is field 3, starttime field 22.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const start = fields[19];
    return start ? { identity: `${pid}.${start}`, state: fields[0] ?? '' } : undefined;
  } catch {
    return undefined;
  }
}
