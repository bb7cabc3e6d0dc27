import { isBerthError } from '../base/errors.js';
import { checkpointBounds } from '../plan/checkpoints.js';
import { ensureAgentHome } from '../store/agent-homes.js';
import { checkpointThread, type CheckpointThread } from '../store/checkpoint-thread.js';
import { clusterCheckpointStore } from '../store/cluster-checkpoints.js';
import type { RunnerDeps } from './runner-deps.js';
import type { RunContext } from './run-context.js';

/**
 * Before a message's run (and before its files land in inbox/): a checkpoint of its session's
 * workspace and agent home, so /undo can put both back (on Kubernetes, of its claims: a copy pod
 * or VolumeSnapshots, docs/checkpoints.md). Not for a workspace shared by the whole project (not
 * the tenant's alone).
 * A checkpoint that cannot be kept (over the bounds) never stops the run: the log says why. The
 * copy runs on the checkpoint thread (or on the cluster): the event loop goes on serving other tenants meanwhile.
 */
export async function checkpointBefore(ctx: RunContext, message: string, thread: CheckpointThread): Promise<void> {
  const { checkpoints } = ctx.config;
  if (checkpoints.keep === 0 || !ctx.workspace.isolated) return;
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

/** A launcher whose workspaces are its own volumes keeps their checkpoints there; else berth's thread copies its directories. */
export function checkpointsOf(deps: RunnerDeps): CheckpointThread {
  const { launcher, installation, config, store } = deps;
  if (!launcher.checkpoints) return checkpointThread();
  return clusterCheckpointStore({
    volumes: launcher.checkpoints,
    installation,
    owner: deps.ownerProcess,
    config,
    stateDir: store.home.stateDir,
  });
}
