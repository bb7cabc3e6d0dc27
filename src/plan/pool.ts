import { LABELS } from './labels.js';
import type { BindMount, PlannedMount, RunPlan } from './run-plan.js';
import { creationHash } from './warm.js';

/**
 * The pre-started pool, as data (runs/prestart-pool.ts carries it out). A pool container is
 * started before its tenant is known: made like the tenant's warm container in everything but
 * its bind sources, which are berth's blank stand-ins until a claim attaches the plan's own
 * (launcher.attachMounts). Pure.
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

/** The plan's bind mounts in the order they are attached: a mount before any mount below it. */
export function bindsInOrder(plan: RunPlan): Array<BindMount> {
  const depth = (target: string) => target.split('/').filter(Boolean).length;
  return plan.mounts.filter((m): m is BindMount => m.type === 'bind').sort((a, b) => depth(a.target) - depth(b.target));
}

/**
 * What a pool container is made with, as a key: two plans with the same shape are served by the
 * same pool containers. Everything fixed at container creation is in it (image, runtime, its
 * keep-alive and relays, user, limits, network, where each mount goes and whether it is
 * read-only, the project's labels); the bind sources, the per-tenant labels and the environment
 * (every exec carries the plan's) are not.
 */
export function poolShape(plan: RunPlan): string {
  const labels = Object.fromEntries(Object.entries(plan.labels).filter(([k]) => !PER_TENANT_LABELS.includes(k)));
  const mounts = plan.mounts.map((m) => (m.type === 'bind' ? { type: m.type, target: m.target, readOnly: m.readOnly } : m));
  return creationHash(plan, { mounts, labels }).slice(0, 24);
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
