import { LABELS } from './labels.js';
import { AGENT_HOME, RUN_DIR_MOUNT, WORKSPACE_MOUNT, type BindMount, type PlannedMount, type RunPlan } from './run-plan.js';
import { creationHash } from './warm.js';

/**
 * The pre-started pool, as data (runs/prestart-pool.ts carries it out). A pool container is
 * started before its tenant is known: made like the tenant's warm container in everything but
 * its bind sources. Two ways to hand it its tenant's directories (poolWayOf decides):
 * - attach (runc, crun): its binds are berth's blank stand-ins until a claim attaches the plan's
 *   own (launcher.attachMounts);
 * - adopt (gVisor, whose sandbox never sees a mount made over a bind after its start): its
 *   person binds (PERSON_TARGETS) are fresh, empty directories of berth's, made for it alone;
 *   a claim moves a new person's first contents into them and renames them to the person's
 *   paths (runs/pool-adopt.ts). Its project-wide binds (memory, trust files, protected paths,
 *   shared areas) are the plan's own sources from its start, so they are part of its shape.
 * Pure.
 */

/** Labels that name one tenant's run: a pool container carries POOLED in them until claimed (and after: labels never change). */
const PER_TENANT_LABELS: readonly string[] = [LABELS.workspace, LABELS.session, LABELS.run];
export const POOLED = 'pool';

/** Bind mounts one claim attaches at most (native/berth-mount.c MAX_SPECS). */
export const MAX_POOLED_BINDS = 64;

/**
 * Only an isolated tenant's plan comes from the pool: its container reaches its own workspace
 * alone. A shared-mode container sees the whole project tree (its label says so, and while one
 * lives no workspace filesystem changes); a workflow step's is private. Those start as today.
 */
export function poolable(plan: RunPlan): boolean {
  return plan.labels[LABELS.reach] === 'workspace' && plan.mounts.filter((m) => m.type === 'bind').length <= MAX_POOLED_BINDS;
}

/** How a pool container takes its tenant's directories (see above). */
export type PoolWay = 'attach' | 'adopt';

/** The binds that are one person's own: the workspace, the session's agent home, the run directory. */
export const PERSON_TARGETS: readonly string[] = [WORKSPACE_MOUNT, AGENT_HOME, RUN_DIR_MOUNT];
const isPersonBind = (m: PlannedMount): m is BindMount => m.type === 'bind' && PERSON_TARGETS.includes(m.target);

/** The plan's person binds, in PERSON_TARGETS order. */
export function personBindsOf(plan: RunPlan): BindMount[] {
  const binds = plan.mounts.filter(isPersonBind);
  return PERSON_TARGETS.flatMap((t) => binds.filter((m) => m.target === t));
}

/** What the way a plan is pooled depends on besides the plan: the launcher and the host. */
export interface PoolFacts {
  /** The launcher attaches bind mounts to a started container of the plan's runtime. */
  lateMounts: boolean;
  /** A started container of the plan's runtime goes on serving a bind's directory after berth renames it (on berth's host). */
  adoptBinds: boolean;
  /** The run's workspace is a filesystem of its own (disk_quotas: loop): a mount point, never renamed. */
  ownFilesystem: boolean;
  /** Person bind targets whose source's directory is on another filesystem than the pool's fresh directories (a rename cannot cross it). */
  otherFilesystem: readonly string[];
}

/**
 * The one place that decides whether, and how, the pool serves a plan: attach where the launcher
 * mounts late; else adopt, where it can and nothing stands in adopt's way; else no pool (the run
 * starts its container, as without one).
 */
export function poolWayOf(plan: RunPlan, facts: PoolFacts): { way: PoolWay } | { way?: undefined; why: string } {
  if (!poolable(plan)) return { why: "only an isolated tenant's run is pooled" };
  if (facts.lateMounts) return { way: 'attach' };
  if (!facts.adoptBinds) return { why: `runtime ${plan.runtime}: no late mounts, and no started container that keeps a renamed directory` };
  if (facts.ownFilesystem) return { why: 'the workspace is a filesystem of its own (disk_quotas: loop): it is mounted, not renamed' };
  if (facts.otherFilesystem.length) return { why: `not on the pool's filesystem: ${facts.otherFilesystem.join(', ')}` };
  const workspace = personBindsOf(plan).find((m) => m.target === WORKSPACE_MOUNT);
  if (!workspace || workspace.readOnly || workspace.source !== plan.prepare.rwRoot)
    return { why: "the workspace bind is not the plan's writable workspace" };
  // Mounts below the home or the run directory would need mount points made in them, as in the workspace.
  const below = plan.mounts.filter((m) => PERSON_TARGETS.some((t) => t !== WORKSPACE_MOUNT && m.target.startsWith(`${t}/`)));
  if (below.length) return { why: `a mount below a person's directory: ${below.map((m) => m.target).join(', ')}` };
  if (plan.prepare.dirs.length || plan.prepare.files.length) return { why: 'the plan prepares more than mount points in the workspace' };
  return { way: 'adopt' };
}

/**
 * May a run take a waiting container of this way? Attach: any new session. Adopt: only a new
 * person's, whose workspace and agent home this run made (`isNew`): the claim renames them, and a
 * directory another container held would be left to it empty and unlinked.
 */
export const mayClaim = (way: PoolWay, person: { isNew: boolean } | undefined): boolean => way === 'attach' || person?.isNew === true;

/** The plan's bind mounts in the order they are attached: a mount before any mount below it. */
export function bindsInOrder(plan: RunPlan): Array<BindMount> {
  const depth = (target: string) => target.split('/').filter(Boolean).length;
  return plan.mounts.filter((m): m is BindMount => m.type === 'bind').sort((a, b) => depth(a.target) - depth(b.target));
}

/**
 * What a pool container is made with, as a key: two plans with the same shape are served by the
 * same pool containers. Everything fixed at container creation is in it (image, runtime, its
 * keep-alive and relays, user, limits, network, where each mount goes and whether it is
 * read-only, the project's labels); the per-tenant labels and the environment (every exec
 * carries the plan's) are not. Attach: no bind source is (each is attached at the claim). Adopt:
 * the project-wide sources are, and the mount points its fresh workspace holds; the person
 * binds' sources are not.
 */
export function poolShape(plan: RunPlan, way: PoolWay = 'attach'): string {
  const labels = Object.fromEntries(Object.entries(plan.labels).filter(([k]) => !PER_TENANT_LABELS.includes(k)));
  const mounts = plan.mounts.map((m) =>
    m.type !== 'bind'
      ? m
      : way === 'adopt' && !PERSON_TARGETS.includes(m.target)
        ? { type: m.type, source: m.source, target: m.target, readOnly: m.readOnly }
        : { type: m.type, target: m.target, readOnly: m.readOnly },
  );
  const shaped = way === 'adopt' ? { way, mounts, mountpoints: plan.prepare.mountpoints } : mounts;
  return creationHash(plan, { mounts: shaped, labels }).slice(0, 24);
}

/**
 * The plan a pool container is started from: each bind source replaced by its blank stand-in
 * (`blankOf(index of the bind in plan.mounts)`, berth's own empty directory or file), no
 * environment, nothing to prepare, the per-tenant labels POOLED. Its keep-alive runs; nothing of
 * a tenant does.
 */
export function blankPlanOf(plan: RunPlan, blankOf: (bindIndex: number, mount: PlannedMount) => string): RunPlan {
  let bind = 0;
  const mounts = plan.mounts.map((m) => (m.type === 'bind' ? { ...m, source: blankOf(bind++, m) } : m));
  const labels = { ...plan.labels };
  for (const key of PER_TENANT_LABELS) if (Object.hasOwn(labels, key)) labels[key] = POOLED;
  labels[LABELS.workspace] = POOLED;
  const prepare = { rwRoot: '', rwRootPath: [], files: [], dirs: [], mountpoints: [] };
  return { ...plan, mounts, env: {}, labels, argv: plan.keepAlive, exec: plan.keepAlive, sockets: [], prepare, warnings: [] };
}

/** Adopt: one fresh directory of a pool container's, where a person bind goes (`name` below its own directory). */
export interface FreshDir {
  target: string;
  name: string;
  mode: number;
  /** Owned by the agent user, as the person's own is (the run directory is root's). */
  tenantOwned: boolean;
}

const FRESH: Readonly<Record<string, Omit<FreshDir, 'target'>>> = {
  // As ensureWorkspace, ensureAgentHome and openRunSockets make the person's own (the claim copies theirs over anyway).
  [WORKSPACE_MOUNT]: { name: 'workspace', mode: 0o755, tenantOwned: true },
  [AGENT_HOME]: { name: 'home', mode: 0o700, tenantOwned: true },
  [RUN_DIR_MOUNT]: { name: 'run', mode: 0o755, tenantOwned: false },
};

/**
 * Adopt: the fresh directories a pool container of this plan's shape is started with, and the
 * mount points (the protected paths) its fresh workspace must hold before the start, as a cold
 * start's workspace does (prepareMounts).
 */
export interface FreshLayout {
  dirs: FreshDir[];
  mountpoints: RunPlan['prepare']['mountpoints'];
}

export function freshLayoutOf(plan: RunPlan): FreshLayout {
  const dirs = personBindsOf(plan).map((m) => ({ target: m.target, ...(FRESH[m.target] as Omit<FreshDir, 'target'>) }));
  return { dirs, mountpoints: plan.prepare.mountpoints };
}

/** Adopt: the plan one pool container starts from, its person binds on its own fresh directories (by target). */
export function adoptPlanOf(blank: RunPlan, fresh: Readonly<Record<string, string>>): RunPlan {
  return {
    ...blank,
    mounts: blank.mounts.map((m) => {
      if (!isPersonBind(m)) return m;
      const source = fresh[m.target];
      if (!source) throw new Error(`no fresh directory for ${m.target}`);
      return { ...m, source };
    }),
  };
}

/**
 * A claimed pool container's engine name: labels are fixed at creation, a name is not, so the
 * claim is written there for every process that lists containers (another berth, the CLI, an
 * operator's `docker ps`). It carries the claimer's workspace and run, which are berth's own
 * ids (hex and base36), never a tenant's words.
 */
const CLAIMED = /^\/?berth-claimed\.([A-Za-z0-9_-]{1,64})\.([A-Za-z0-9_-]{1,64})$/;

export function claimedName(plan: RunPlan): string {
  const name = `berth-claimed.${plan.labels[LABELS.workspace]}.${plan.labels[LABELS.run]}`;
  if (!CLAIMED.test(name)) throw new Error(`a pooled plan's workspace and run are berth's own ids: ${name}`);
  return name;
}

/** The workspace and run labels a claimed container's name gives (nothing for any other name). */
export function claimOfName(name: string | undefined): Record<string, string> {
  const m = name ? CLAIMED.exec(name) : null;
  return m ? { [LABELS.workspace]: m[1] as string, [LABELS.run]: m[2] as string } : {};
}
