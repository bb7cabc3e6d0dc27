import type Docker from 'dockerode';
import { claimedName } from '../../plan/pool.js';
import type { RunPlan } from '../../plan/run-plan.js';
import type { ContainerGone } from '../launcher.js';
import { translateEngineError } from './errors.js';

/**
 * A pre-started container becomes the plan's: the claim written where every process sees it (its
 * engine name: docker ps, another berth's list; labels are fixed at creation), and the container
 * still running as the very one it started as (its first process and start time as startIdle
 * saw them). Both at once: one round trip to the engine.
 */
export async function claimContainer(
  docker: Docker,
  containerId: string,
  plan: RunPlan,
  started: { pid: number; startedAt: string },
): Promise<ContainerGone | undefined> {
  const container = docker.getContainer(containerId);
  const orGone = (err: unknown) =>
    (err as { statusCode?: number }).statusCode === 404 ? undefined : Promise.reject(translateEngineError(err));
  const [state, renamed] = await Promise.all([
    container.inspect().then(({ State }) => State, orGone),
    container.rename({ name: claimedName(plan) }).then(() => true, orGone),
  ]);
  if (!state || !renamed) return { gone: true, reason: 'it was removed' };
  if (!state.Running || state.Pid !== started.pid || state.StartedAt !== started.startedAt)
    return { gone: true, reason: 'it is not the container it was when it started' };
  return undefined;
}
