import { plannedBoundary, type Boundary } from '../../plan/receipt.js';
import { RUN_DIR_MOUNT, type RunPlan } from '../../plan/run-plan.js';

/**
 * What a pod holds for a plan, for its receipt: the plan's boundary but for the run directory,
 * whose sockets berth-bridge relays over TCP with the run's token (objects.ts): nothing is mounted
 * there. Its own file, so setup.ts gives it without loading the client library.
 */
export function plannedPod(plan: RunPlan): Boundary {
  const b = plannedBoundary(plan);
  return { ...b, mounts: b.mounts.filter((m) => m.target !== RUN_DIR_MOUNT) };
}
