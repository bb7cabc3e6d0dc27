import fs from 'node:fs';
import { dirname, join } from 'node:path';
import { BerthError } from '../base/errors.js';
import { liveHolderOf, tryOwnerLock, type OwnerLock } from '../fs/lock.js';
import { selfIdentity } from '../fs/process-identity.js';
import type { ManagedContainer } from '../launch/launcher.js';
import { POOLED } from '../plan/pool.js';
import { agentHomeDir } from '../store/agent-homes.js';
import { ensureWorkspace, quotaChangePending } from '../store/workspaces.js';
import { seesAllWorkspaces, type Fleet } from './fleet.js';
import type { PoolPerson } from './pool-ways.js';
import type { PrestartPool } from './prestart-pool.js';
import { quotaOf, type RunContext } from './run-context.js';
import type { WarmPool } from './warm-pool.js';
import { warmWorkspaceOf } from './warm-session.js';

/** What a run's workspace step tells the rest of the run. */
export interface PreparedWorkspace {
  /** For the pre-started pool: whether this is a new person's first contact (pool-ways.ts). */
  person: PoolPerson;
  /** Held while a pool claim may still adopt the new workspace: let go once it is done (or with the run). */
  adoptLock?: OwnerLock;
}

/** How long a run waits for another berth process to finish setting up a new workspace (its claim). */
const ADOPT_WAIT_MS = 60_000;
const ADOPT_POLL_MS = 20;

/**
 * The tenant's workspace, made or mounted as the config says. A workspace filesystem about to be
 * made, mounted or resized: no container may hold the workspace meanwhile. Our warm ones let go;
 * another berth's running one defers the change.
 *
 * `mayAdopt` (a message the pool could serve by adopt): a workspace this run makes is this berth
 * process's alone until its claim is done, across processes too. An adopt claim empties the new
 * workspace directory and renames its fresh twin over it; a container another process (the CLI
 * beside serve) started on it meanwhile would keep the emptied, unlinked one. So an owner lock
 * (`<project state>/adopting/<workspace>`) is taken before the workspace is made and let go after
 * the claim, and every run first waits while another live process holds it.
 */
export async function prepareWorkspace(
  ctx: RunContext,
  deps: { tmpDir: string; fleet: Fleet; warm?: WarmPool; prestarted?: PrestartPool },
  mayAdopt: boolean,
): Promise<PreparedWorkspace> {
  const { project, session } = ctx;
  const lockPath = join(project.paths.stateDir, 'adopting', ctx.workspace.id);
  let adoptLock = mayAdopt && !fs.existsSync(ctx.workspace.dir) ? await takeAdoptLock(lockPath) : undefined;
  if (!adoptLock) await untilLetGo(lockPath);
  try {
    const quota = quotaOf(project, ctx.config, deps.tmpDir, ctx.log);
    if (quotaChangePending(project, ctx.workspace, quota)) {
      const workspace = warmWorkspaceOf(project.metadata.name, ctx.workspace.id);
      await deps.warm?.discardWhere((_, w) => w?.workspace === workspace);
      const alive = await deps.fleet.list(project.metadata.name);
      // One that sees every workspace could move this one under berth: no image is made or resized meanwhile.
      // A claimed pool container's labels say "pool", not whose workspace it took: any but this
      // process's own waiting ones may hold this one.
      const holds = (c: ManagedContainer) =>
        c.workspace === ctx.workspace.id || (c.workspace === POOLED && !deps.prestarted?.isWaiting(c.id));
      quota.holds = { inUse: alive.some(holds), seesAll: alive.some(seesAllWorkspaces) };
    }
    const ws = session.settings.workspace;
    const made = ensureWorkspace({
      project,
      workspace: ctx.workspace,
      tenantKey: session.tenant_key,
      session: ws.mode === 'session' ? session.id : undefined,
      owner: ctx.owner,
      quota,
    });
    ctx.workspace.ownFilesystem = made.ownFilesystem;
    if (made.created) ctx.log.info({ skipped: made.skipped }, 'workspace created');
    for (const skipped of made.skipped) ctx.log.warn(skipped, 'seed entry not copied');
    // New: this run made the workspace, and the session has no agent home yet (checkpointBefore makes it next).
    const isNew = made.created && !fs.existsSync(agentHomeDir(project, session.id));
    if (adoptLock && (!isNew || made.ownFilesystem)) {
      adoptLock.release();
      adoptLock = undefined;
    }
    return { person: { isNew: isNew && adoptLock !== undefined, ownFilesystem: made.ownFilesystem }, ...(adoptLock ? { adoptLock } : {}) };
  } catch (err) {
    adoptLock?.release();
    throw err;
  }
}

/** Take the lock to make the workspace; undefined when another live process had it (waited for until it let go). */
async function takeAdoptLock(path: string): Promise<OwnerLock | undefined> {
  fs.mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const lock = tryOwnerLock(path);
  return 'release' in lock ? lock : undefined;
}

/** Wait while another live berth process holds the lock (this process's runs of a workspace are one at a time already). */
async function untilLetGo(path: string): Promise<void> {
  const self = selfIdentity();
  const end = Date.now() + ADOPT_WAIT_MS;
  for (let holder = liveHolderOf(path); holder !== undefined && holder !== self; holder = liveHolderOf(path)) {
    if (Date.now() > end)
      throw new BerthError('BUSY', `another berth process (${holder}) is still setting up this workspace`, {
        hint: 'try again',
        retry_after: 1,
      });
    await new Promise((r) => setTimeout(r, ADOPT_POLL_MS));
  }
}
