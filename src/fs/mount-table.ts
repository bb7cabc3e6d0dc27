import fs from 'node:fs';

// This process's mount table, read from /proc/self/mountinfo: what is mounted where.

/** Decode mountinfo's octal escapes (\040 is a space). */
const unescapeMount = (s: string) => s.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));

/** This process's mounts, in mount order: where each is, and what it mounts (a device, for a loop mount). */
export function mountTable(): Array<{ point: string; source: string }> {
  return fs
    .readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const fields = line.split(' ');
      const tail = line.split(' - ')[1]?.split(' ') ?? [];
      return { point: unescapeMount(fields[4] ?? ''), source: unescapeMount(tail[1] ?? '') };
    });
}

/** Mount points of this process's namespace, in mount order. */
export const mountPoints = (): string[] => mountTable().map((m) => m.point);

export const isMounted = (path: string): boolean => mountPoints().includes(path);

/** Mount points at or below dir, deepest first (the order they can be unmounted in). */
export function mountsUnder(dir: string): string[] {
  const prefix = dir.endsWith('/') ? dir : `${dir}/`;
  return mountPoints()
    .filter((p) => p === dir || p.startsWith(prefix))
    .sort((a, b) => b.length - a.length);
}

/**
 * Is dir the root of a filesystem of its own (a loop-mounted workspace)? Two stats instead of
 * reading the mount table: under a busy container engine a read of mountinfo waits on its lock
 * for tens of milliseconds, and a checkpoint asks this of each tree before each message.
 */
export function isOwnFilesystem(dir: string): boolean {
  const parent = dir.replace(/\/[^/]+\/?$/, '') || '/';
  return fs.statSync(dir).dev !== fs.statSync(parent).dev;
}
