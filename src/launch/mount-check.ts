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

/** A bind mount of the plan: what is at `target` must be `source` (and nothing else). */
export interface PlannedBind {
  target: string;
  source: string;
}

export const plannedBinds = (plan: RunPlan): PlannedBind[] =>
  plan.mounts.flatMap((m) => (m.type === 'bind' ? [{ target: m.target, source: m.source }] : []));

/** One line of a mountinfo table: the device, the path within it that is mounted, and where. */
interface MountLine {
  device: string;
  root: string;
  point: string;
}

function mountLines(mountinfo: string): MountLine[] {
  return mountinfo.split('\n').flatMap((line) => {
    const [, , device, root, point] = line.split(' ');
    return device && root && point ? [{ device, root: unescapeMountPoint(root), point: unescapeMountPoint(point) }] : [];
  });
}

/**
 * The plan's bind targets that show something other than their planned source: a container whose
 * /workspace (or home, or run directory) is another tenant's must never be kept for this one.
 * A source is known by its device ("major:minor", `deviceOf`) and its path within that device,
 * which the host's own mount table gives (its deepest mount holding the source); the
 * container's table says the same of what is at each target (its top mount there). A source
 * whose device or host mount cannot be read is not judged here (the targets check still is).
 */
export function wrongSources(
  binds: readonly PlannedBind[],
  container: string,
  host: string,
  deviceOf: (source: string) => string | undefined,
): string[] {
  const inContainer = new Map(mountLines(container).map((l) => [l.point, l] as const));
  const onHost = mountLines(host);
  return binds.flatMap(({ target, source }) => {
    const device = deviceOf(source);
    // The deepest mount holding the source; of two at one point, the later (on top).
    const holder = onHost
      .filter((l) => l.device === device && (source === l.point || source.startsWith(l.point === '/' ? '/' : `${l.point}/`)))
      .reduce<MountLine | undefined>((best, l) => (!best || l.point.length >= best.point.length ? l : best), undefined);
    if (!device || !holder) return [];
    const rest = source.slice(holder.point === '/' ? 0 : holder.point.length);
    const root = holder.root === '/' ? rest || '/' : `${holder.root}${rest}`;
    const seen = inContainer.get(target);
    return seen && seen.device === device && seen.root === root ? [] : [target];
  });
}
