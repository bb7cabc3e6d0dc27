import { createHash } from 'node:crypto';
import { LABELS } from './labels.js';
import type { RunPlan } from './run-plan.js';

/**
 * What a warm container was made with: everything of its plan except what changes per message
 * (the argv, the run id). Two plans with the same identity can share a container; any other
 * change (level, isolation, protected paths or their snapshot, grants, image, limits, env,
 * sockets) gives another identity, and the old container is recycled.
 */
export function warmIdentity(plan: RunPlan): string {
  const { [LABELS.run]: _run, ...labels } = plan.labels;
  const { BERTH_RUN: _id, ...env } = plan.env;
  const kept = {
    image: plan.image,
    runtime: plan.runtime,
    keepAlive: plan.keepAlive,
    cwd: plan.cwd,
    user: plan.user,
    mounts: plan.mounts,
    env: Object.entries(env).sort(([a], [b]) => a.localeCompare(b)),
    network: plan.network,
    sockets: plan.sockets,
    readOnlyRootfs: plan.readOnlyRootfs,
    sysctls: Object.entries(plan.sysctls).sort(([a], [b]) => a.localeCompare(b)),
    limits: plan.limits,
    labels: Object.entries(labels).sort(([a], [b]) => a.localeCompare(b)),
  };
  return createHash('sha256').update(JSON.stringify(kept)).digest('hex');
}
