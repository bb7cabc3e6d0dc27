import { WORKSPACE_MOUNT, type RunPlan } from '../plan/run-plan.js';

/**
 * Whether a warm container's mounts in its workspace are still where the plan put them. A tenant
 * cannot remove a mountpoint, but under runc it can rename a directory holding one (`mv .cfg
 * .moved`: the mount moves with it) and write its own file at the protected path, which the
 * session's next message in the same container would read. Pure: the mount table is read by the
 * launcher (the host's /proc/<pid>/mountinfo, or the keep-alive's report).
 */

/** The plan's mount targets in the workspace (protected paths, seeds, hidden project paths), and the workspace itself. */
export function workspaceMountTargets(plan: RunPlan): string[] {
  return plan.mounts.map((m) => m.target).filter((t) => t === WORKSPACE_MOUNT || t.startsWith(`${WORKSPACE_MOUNT}/`));
}

/** The kernel writes a space, tab, newline or backslash in a mount point as \ooo. */
export const unescapeMountPoint = (s: string) => s.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));

/** Mount points of a mountinfo table (field 5), as paths. */
export function mountPointsOf(mountinfo: string): string[] {
  return mountinfo.split('\n').flatMap((line) => {
    const point = line.split(' ')[4];
    return point ? [unescapeMountPoint(point)] : [];
  });
}

/** The targets no mount is at any more (moved away with a renamed directory, or unmounted). */
export function missingMounts(targets: readonly string[], points: readonly string[]): string[] {
  const at = new Set(points);
  return targets.filter((t) => !at.has(t));
}
