import fs from 'node:fs';

/**
 * Which berth process owns a run: "<pid>.<start time>" (the start time, from /proc, tells a
 * live owner from a new process that reuses the pid). Containers carry it as a label and the
 * journal records it, so a starting berth closes and reaps only what dead processes left.
 */
export function processIdentity(pid: number = process.pid): string | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Field 22 (starttime), counted after the command name, which may hold spaces and parentheses.
    const start = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
    return start ? `${pid}.${start}` : undefined;
  } catch {
    return undefined;
  }
}

/** Whether the process an identity names is still running (the same process, not a reused pid). */
export function ownerAlive(owner: string | undefined): boolean {
  if (!owner) return false;
  const pid = Number(owner.split('.')[0]);
  return Number.isInteger(pid) && pid > 0 && processIdentity(pid) === owner;
}
