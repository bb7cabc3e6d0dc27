import { secretsGrantedTo } from '../config/secrets.js';
import type { Owner } from '../fs/tree.js';
import { decoyPlacement, type Decoys } from '../plan/honeytokens.js';
import { planRun, type RunPlan } from '../plan/run-plan.js';
import { plantInHome } from '../store/agent-homes.js';
import { snapshotForPlan } from '../store/protected-snapshot.js';
import type { copySeedsForRun } from '../store/workspaces.js';
import { withBootstrap, type LaunchSpec, type RunContext } from './run-context.js';

// The runner's step from a run's context to its plan (pure: plan/run-plan.ts), and the decoys it plants first.
/** The run's plan (pure: plan/run-plan.ts) from its context, what it runs and where its home, seeds and sockets are. */
export function planOf(
  ctx: RunContext,
  spec: LaunchSpec,
  at: { home: string; seeds?: ReturnType<typeof copySeedsForRun>; runDir?: string; decoyEnv?: Record<string, string> },
  deps: { installation: string; ownerProcess?: string; egressTrust?: () => { ca: string; bundle: string } },
): RunPlan {
  const { project } = ctx;
  return planRun({
    config: ctx.config,
    project: { dir: project.paths.dir, metadataFile: project.paths.metadataFile, metadata: project.metadata },
    workspace: ctx.workspace,
    protectedSnapshot: snapshotForPlan(project.paths.protectedDir, project.snapshot),
    run: {
      id: ctx.runId,
      level: ctx.level,
      message: spec.kind === 'shell_tool' ? '' : withBootstrap(ctx, spec.message),
      argv: spec.kind === 'shell_tool' ? spec.argv : undefined,
      session: ctx.session.id,
      env: spec.kind === 'workflow_step' ? spec.target.env : at.decoyEnv,
      live: spec.kind === 'message' && spec.onProgress !== undefined,
    },
    memory: { dir: project.paths.memoryDir },
    shared: ctx.grants,
    egressTrust: secretsGrantedTo(ctx.config.secrets, project.metadata.name).length ? deps.egressTrust?.() : undefined,
    privateWorkspace:
      spec.kind === 'workflow_step' && at.seeds
        ? { cwdRel: spec.target.cwdRel, seeds: at.seeds, ensureDir: spec.target.ensureDir }
        : undefined,
    runDir: at.runDir,
    home: { dir: at.home },
    installation: deps.installation,
    ownerProcess: deps.ownerProcess,
  });
}

/** A tenant's decoys in its agent home; their environment variables for the plan. */
export function plantDecoys(home: string, decoys: Decoys, owner: Owner | undefined): Record<string, string> {
  const placed = decoyPlacement(decoys);
  plantInHome(home, placed.files, owner);
  return placed.env;
}
