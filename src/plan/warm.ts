import { createHash } from 'node:crypto';
import { LABELS } from './labels.js';
import type { RunPlan } from './run-plan.js';

const sorted = (o: Record<string, string>) => Object.entries(o).sort(([a], [b]) => a.localeCompare(b));

/**
 * A hash of what every container of a plan is made with (image, runtime, keep-alive, cwd, user,
 * network, read-only root, sysctls, limits), and of `more`: what else tells two plans apart for
 * the caller (a warm container's identity, a pool shape).
 */
export function creationHash(
  plan: RunPlan,
  more: { mounts: unknown; labels: Record<string, string>; env?: Record<string, string>; sockets?: unknown },
): string {
  const kept = {
    image: plan.image,
    runtime: plan.runtime,
    keepAlive: plan.keepAlive,
    cwd: plan.cwd,
    user: plan.user,
    network: plan.network,
    readOnlyRootfs: plan.readOnlyRootfs,
    sysctls: sorted(plan.sysctls),
    limits: plan.limits,
    mounts: more.mounts,
    labels: sorted(more.labels),
    ...(more.env ? { env: sorted(more.env) } : {}),
    ...(more.sockets ? { sockets: more.sockets } : {}),
  };
  return createHash('sha256').update(JSON.stringify(kept)).digest('hex');
}

/**
 * What a warm container was made with: everything of its plan except what changes per message
 * (the argv, the run id). Two plans with the same identity can share a container; any other
 * change (level, isolation, protected paths or their snapshot, grants, image, limits, env,
 * sockets) gives another identity, and the old container is recycled.
 */
export function warmIdentity(plan: RunPlan): string {
  const { [LABELS.run]: _run, ...labels } = plan.labels;
  const { BERTH_RUN: _id, ...env } = plan.env;
  return creationHash(plan, { mounts: plan.mounts, labels, env, sockets: plan.sockets });
}
