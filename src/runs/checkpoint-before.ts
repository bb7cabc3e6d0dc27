import { isBerthError } from '../base/errors.js';
import { checkpointBounds } from '../plan/checkpoints.js';
import { ensureAgentHome } from '../store/agent-homes.js';
import type { CheckpointThread } from '../store/checkpoint-thread.js';
import type { RunContext } from './run-context.js';

/**
 * Before a message's run (and before its files land in inbox/): a checkpoint of its session's
 * workspace and agent home, so /undo can put both back. Not on Kubernetes (the workspace is a cluster volume berth does not copy:
 * docs/kubernetes.md), nor for a workspace shared by the whole project (not the tenant's alone).
 * A checkpoint that cannot be kept (over the bounds) never stops the run: the log says why. The
 * copy runs on the checkpoint thread: the event loop goes on serving other tenants meanwhile.
 */
export async function checkpointBefore(ctx: RunContext, message: string, thread: CheckpointThread): Promise<void> {
  const { checkpoints, launcher } = ctx.config;
  if (checkpoints.keep === 0 || launcher === 'kubernetes' || !ctx.workspace.isolated) return;
  try {
    const home = ensureAgentHome(ctx.project, ctx.session.id, ctx.owner);
    const kept = await thread.take(
      { project: ctx.project, tenantKey: ctx.session.tenant_key, session: ctx.session.id, workspace: ctx.workspace, home },
      checkpointBounds(checkpoints, ctx.project.metadata.limits.disk_mb),
      { run: ctx.runId, message },
    );
    ctx.log.info({ checkpoint: kept.id, ms: Math.round(kept.ms), bytes: kept.owned_bytes, files: kept.files }, 'checkpoint kept');
  } catch (err) {
    ctx.log.warn({ err: isBerthError(err) ? `${err.code}: ${err.message}` : String(err) }, 'no checkpoint before this message');
  }
}
