import fs from 'node:fs';
import { join } from 'node:path';
import { runtimeFor } from '../config/runtimes.js';
import type { SessionRecord } from '../config/session.js';
import { BerthError, isBerthError } from '../base/errors.js';
import type { RunOptions, RunResult } from '../launch/launcher.js';
import { assertLaunchable } from '../launch/requirements.js';
import { noMetrics } from '../base/metrics.js';
import type { RunPlan } from '../plan/run-plan.js';
import { warmIdentity } from '../plan/warm.js';
import { ensureAgentHome } from '../store/agent-homes.js';
import { appendJournal, noteStarted, type JournalEntry } from '../store/journal.js';
import type { Project } from '../store/projects.js';
import { planOf, plantDecoys } from './run-plan-of.js';
import type { RunnerDeps } from './runner-deps.js';
import type { Runner } from './runner-api.js';
import { appendRunRecord } from '../store/run-log.js';
import { copySeedsForRun } from '../store/workspaces.js';
import { prepareWorkspace, type PreparedWorkspace } from './prepare-workspace.js';
import type { Ticket } from './admission.js';
import { watchDisk } from './disk-watch.js';
import { createFleet } from './fleet.js';
import { createKeyedLock } from '../base/keyed-lock.js';
import { drainRuns, type Flight } from './drain.js';
import { prepareMounts } from './prepare-mounts.js';
import { contextOf, identityOf, type LaunchSpec, type RunContext, type RunIdentityContext } from './run-context.js';
import { toRunRecord, type RunFiles, type RunOutcome } from './run-record.js';
import { openRunSockets, type OpenSockets } from './run-sockets.js';
import { progressTap } from './progress-tap.js';
import { LOST_WARNING, runHalt, STOPPED_WARNING, type RunHalt } from './run-halt.js';
import { createWarmSessions, warmKeyOf, warmWorkspaceOf, type WarmLease } from './warm-session.js';
import { receiptDigest } from '../plan/receipt.js';
import { policyOf } from './receipt-policy.js';
import { noteReceipt, watchReceipt } from './run-receipt.js';
import { landMessageFiles, withRunFiles } from './run-files.js';
import { cachedCapabilities } from './launcher-capabilities.js';
import { checkpointBefore, checkpointsOf } from './checkpoint-before.js';
import { countWhileRunning } from './session-count.js';

export type { RunOutcome } from './run-record.js';
export { newRunId, toRunRecord } from './run-record.js';

export type { RunRequest, Runner } from './runner-api.js';

export function createRunner(deps: RunnerDeps): Runner {
  const { store, sessions, launcher, config, installation } = deps;
  const metrics = deps.metrics ?? noMetrics();
  const fleet = createFleet({
    launcher,
    store,
    config,
    installation,
    ownerProcess: deps.ownerProcess,
    warm: deps.warm,
    prestarted: deps.prestarted,
    socketsDir: deps.sockets?.dir,
    logger: deps.logger,
  });
  const warmSessions = deps.warm ? createWarmSessions(launcher, deps.warm, deps.prestarted) : undefined;
  /** Runs of this process past admission: a drain that runs out of time interrupts them. */
  const inFlight = new Set<Flight>();
  // One run at a time per workspace: a tenant's messages queue instead of racing each other's mounts.
  const withWorkspaceLock = createKeyedLock();
  /** Runs holding their workspace, by id: what stop() reaches. */
  const halts = new Map<string, (reason: string) => void>();
  const capabilities = cachedCapabilities(launcher);
  const checkpoints = checkpointsOf(deps);

  /** The flow of one run: admission → journal → (its turn) → locked → journal; metrics throughout. */
  async function launch(project: Project, session: SessionRecord, spec: LaunchSpec): Promise<RunOutcome> {
    const base = identityOf(project, session, spec, deps.secret, deps.logger);
    const labels = { project: project.metadata.name, level: base.level, kind: spec.kind };
    let ticket: Ticket | undefined;
    try {
      ticket = deps.admission?.enter({ project: project.metadata.name, tenant: session.tenant_key });
    } catch (err) {
      metrics.runFinished({ ...labels, outcome: isBerthError(err, 'BUSY') ? 'busy' : 'failed', warm: false });
      throw err; // BUSY or SHUTTING_DOWN: never accepted, so never journaled
    }
    const { sessionsDir } = project.paths;
    const journal = (entry: Omit<JournalEntry, 'at' | 'run'>) => appendJournal(sessionsDir, { run: base.runId, ...entry });
    const flight: Flight = { interrupted: false, abort: new AbortController() };
    try {
      // Written now; its sync overlaps the wait for a turn and the preparation, and ends before anything starts (locked).
      const accepted = journal({ phase: 'accepted', owner: deps.ownerProcess, kind: spec.kind, session: session.id });
      accepted.catch(() => undefined); // awaited in locked; a run that fails before then is journaled as failed
      await ticket?.ready;
      if (ticket) metrics.observeQueueWait(ticket.waitedMs() / 1000);
      inFlight.add(flight);
      const onCreated = (containerId: string) => noteStarted(sessionsDir, { run: base.runId, container: containerId });
      const outcome = await locked(base, spec, onCreated, flight.abort.signal, accepted);
      if (flight.interrupted) await journal({ phase: 'interrupted', reason: DRAIN_REASON });
      else await journal({ phase: 'finished', exit_code: outcome.exitCode });
      const t = outcome.timings;
      metrics.observeContainerStart((t.createMs + t.startMs) / 1000, outcome.warm);
      metrics.observeRun(t.runMs / 1000);
      metrics.runFinished({
        ...labels,
        outcome: flight.interrupted ? 'interrupted' : outcome.timedOut ? 'timeout' : outcome.exitCode === 0 ? 'ok' : 'error',
        warm: outcome.warm,
      });
      return outcome;
    } catch (err) {
      if (flight.interrupted) await journal({ phase: 'interrupted', reason: DRAIN_REASON });
      else await journal({ phase: 'failed', reason: err instanceof BerthError ? err.code : 'INTERNAL' });
      metrics.runFinished({ ...labels, outcome: flight.interrupted ? 'interrupted' : 'failed', warm: false });
      if (isBerthError(err, 'E_SANDBOX_VIOLATION')) metrics.sandboxViolation(project.metadata.name);
      throw err;
    } finally {
      inFlight.delete(flight);
      ticket?.release();
    }
  }

  /** Its turn in the workspace: workspace → home → plan → sockets → mounts → (accepted on disk) → execute. */
  async function locked(
    base: RunIdentityContext,
    spec: LaunchSpec,
    onCreated: (containerId: string) => void,
    stop: AbortSignal,
    accepted: Promise<void>,
  ): Promise<RunOutcome> {
    const name = base.project.metadata.name;
    let prepared: PreparedWorkspace | undefined;
    // A new workspace's adopt lock is let go at the pool's claim, else here (the run failed before it, or started cold).
    return withWorkspaceLock(`${name}/${base.workspaceId}`, async () => {
      if (spec.kind === 'message') await spec.whenReady?.();
      // Read now, not when the run was accepted: a grant revoked while it waited is not mounted, and
      // isolation switched on meanwhile holds for it (no whole-project container after the switch).
      deps.honeytokens?.assertNotFrozen(name, base.session.tenant_key);
      const ctx = contextOf(base, store.get(name), config(), spec);
      const launcherCaps = await capabilities();
      const runtime = runtimeFor(ctx.project.metadata, ctx.level);
      // A message may go to the session's warm container, where the launcher keeps them for its runtime.
      const warmOk = spec.kind === 'message' && launcherCaps.warm(runtime);
      const mayAdopt = warmOk && !!deps.prestarted && ctx.workspace.isolated && launcherCaps.adoptBinds?.(runtime) === true;
      if (spec.kind !== 'workflow_step') prepared = await prepareWorkspace(ctx, { tmpDir: store.home.tmpDir, fleet, ...deps }, mayAdopt);
      if (spec.kind === 'message') await checkpointBefore(ctx, spec.message, checkpoints); // what /undo puts back: before the message's files land
      const landed = await landMessageFiles(ctx, spec, deps.transcriber, stop); // a message's files in inbox/ (and the words telling the agent) before it is planned
      fs.mkdirSync(ctx.project.paths.memoryDir, { recursive: true, mode: 0o755 });
      const seeds = spec.kind === 'workflow_step' ? copySeedsForRun(ctx.project, join(store.home.tmpDir, `seed-${ctx.runId}`)) : undefined;
      const home = ensureAgentHome(ctx.project, ctx.session.id, ctx.owner); // the conversation an agent continues at the next message
      const decoys = deps.honeytokens?.decoysFor(name, ctx.session.tenant_key);
      const decoyEnv = decoys ? plantDecoys(home, decoys, ctx.owner) : undefined;
      const lease = warmOk ? warmSessions?.lease(name, ctx.session.id, warmWorkspaceOf(name, ctx.workspace.id), prepared) : undefined;
      let sockets: OpenSockets | undefined;
      const halt = runHalt(stop);
      const stopRun = (reason: string) => {
        if (!halt.signal.aborted) ctx.log.warn({ reason }, 'run stopped');
        halt.stop(reason);
      };
      halts.set(ctx.runId, stopRun);
      // The agent said its answer: its sockets stop asking anyone for it (egress-proxy.ts).
      const answered = new AbortController();
      try {
        const planFor = (runDir: string | undefined) => planOf(ctx, landed.spec, { home, seeds, runDir, decoyEnv }, deps);
        // This run's sockets: a directory only its container sees (a warm container's, if it has one).
        const freshDir = deps.sockets ? join(deps.sockets.dir, ctx.runId) : undefined;
        let plan = planFor(lease?.reuse?.runDir ?? freshDir);
        // Anything in the plan changed (level, grants, protection, limits, image, runtime, env): a new container.
        if (lease?.reuse && lease.reuse.identity !== warmIdentity(plan)) {
          await warmSessions?.recycle(lease, ctx.log);
          plan = planFor(freshDir);
        }
        const runDir = lease?.reuse?.runDir ?? freshDir;
        if (lease) lease.runDir = runDir;
        assertLaunchable(launcherCaps, plan, { loopQuota: ctx.workspace.ownFilesystem === true });
        for (const w of plan.warnings) ctx.log.warn(w);
        // A container that outlives the run keeps its run directory: only the sockets go.
        if (runDir && deps.sockets)
          sockets = await openRunSockets(deps.sockets, ctx, runDir, plan.sockets, {
            keepDir: lease !== undefined,
            stopRun,
            ask: spec.kind === 'message' ? spec.onApproval : undefined,
            answered: answered.signal,
          });
        prepareMounts(plan, ctx.project.paths.dir, ctx.owner);
        await accepted;
        // A drain that ran out of time while this run waited or prepared: no container for it.
        if (stop.aborted) throw new BerthError('SHUTTING_DOWN', 'berth stopped before this run could start');
        return withRunFiles(
          ctx,
          spec,
          await execute(ctx, spec, plan, home, onCreated, { halt, stopRun, answered, filesIn: landed.in }, lease),
          { ...landed, tripwire: deps.honeytokens },
        );
      } catch (err) {
        if (lease) await warmSessions?.release(lease); // never used (a plan or mount check failed, berth is stopping): not kept
        throw err;
      } finally {
        halts.delete(ctx.runId);
        halt.release();
        await sockets?.close();
        if (seeds) fs.rmSync(seeds.dir, { recursive: true, force: true });
      }
    }).finally(() => prepared?.adoptLock?.release());
  }

  /** Run the plan (bounded by its limits, the disk watch and its sockets' verdicts), then record it. */
  async function execute(
    ctx: RunContext,
    spec: LaunchSpec,
    plan: RunPlan,
    home: string,
    onCreated: (containerId: string) => void,
    stopping: { halt: RunHalt; stopRun: (reason: string) => void; answered: AbortController; filesIn?: RunFiles['in'] },
    lease?: WarmLease,
  ): Promise<RunOutcome> {
    const { halt, stopRun } = stopping;
    // A workspace with its own filesystem is bounded by the kernel; the check keeps the rest.
    const own = ctx.workspace.ownFilesystem === true;
    const disk = watchDisk(own ? [home] : [plan.prepare.rwRoot, home], plan.limits, stopRun, undefined, own ? [plan.prepare.rwRoot] : []);
    const tap = progressTap(plan, { ...(spec.kind === 'message' ? spec : {}), onAnswered: () => stopping.answered.abort() }, !lease?.reuse);
    const watch = watchReceipt(launcher, plan, (err) =>
      ctx.log.warn({ err: String(err) }, 'the container could not be observed for its receipt'),
    );
    const tool = spec.kind === 'shell_tool';
    const counting = countWhileRunning(() => {
      if (!tool) sessions.countRun(ctx.project, ctx.session.id, spec.kind === 'message' ? spec.message : undefined); // a first message names the session
    });
    const started = (id: string) => {
      onCreated(id);
      counting.started();
    };
    const opts: RunOptions = { signal: halt.signal, onCreated: started, onStarted: tap.started(watch.onStarted), onOutput: tap.onOutput };
    const running: Promise<RunResult & { warm: boolean; pooled?: boolean }> =
      lease && warmSessions ? warmSessions.run(lease, plan, opts, ctx.log) : launcher.run(plan, opts).then((r) => ({ ...r, warm: false }));
    const { pooled, ...launched } = await running.finally(() => disk.stop());
    const result = { ...launched, ...tap.finish(launched) };
    const policy = policyOf(ctx, plan, launched.warm ? 'warm' : pooled ? 'pool' : 'cold');
    const uses = deps.credentialUses?.take(ctx.runId);
    const receipt = await watch.receipt(policy, policy.secrets.length || uses?.kept.length ? uses : undefined);
    const stoppedFor = halt.reason();
    ctx.log.info(
      { exitCode: result.exitCode, timedOut: result.timedOut, truncated: result.truncated, ms: Math.round(result.timings.totalMs), tool },
      tool ? 'shell tool finished' : 'run finished',
    );
    const done = {
      ...result,
      runId: ctx.runId,
      project: ctx.project.metadata.name,
      workspaceId: ctx.workspace.id,
      sessionId: ctx.session.id,
      permissionLevel: ctx.level,
      runtime: plan.runtime,
      workspaceRoot: ctx.workspace.dir,
      ...(spec.kind === 'message' && spec.schedule ? { schedule: spec.schedule } : {}),
      ...(stopping.filesIn ? { files: { in: stopping.filesIn } } : {}),
      warnings: [
        ...plan.warnings,
        ...(stoppedFor ? [`${STOPPED_WARNING}${stoppedFor}`] : []),
        ...(result.lost ? [`${LOST_WARNING}${result.lost}`] : []),
      ],
    };
    const record = { ...toRunRecord(done, spec, ctx.session.tenant_key), receipt, receipt_digest: receiptDigest(receipt) };
    appendRunRecord(ctx.project.paths.sessionsDir, record);
    const audited = noteReceipt({ audit: deps.audit, metrics, log: ctx.log }, done.project, record);
    await Promise.all([counting.done(), audited]); // the receipt's audit line synced off the event loop: on disk before the answer
    return { ...done, record };
  }

  return {
    async run(request) {
      const project = store.get(request.project);
      let session = sessions.open(project, { sessionId: request.sessionId, tenantKey: request.tenantKey, chosen: true });
      if (request.level && request.level !== session.settings.permission_level)
        session = sessions.setLevel(project, session, request.level);
      return launch(project, session, {
        kind: 'message',
        message: request.message,
        onOutput: request.onOutput,
        onProgress: request.onProgress,
        onApproval: request.onApproval,
        whenReady: request.whenReady,
        schedule: request.schedule,
        files: request.files,
      });
    },
    async runPrivate(projectName, sessionId, tenantKey, level, message, target) {
      const project = store.get(projectName);
      let session = sessions.open(project, { sessionId, tenantKey });
      if (level !== session.settings.permission_level) session = sessions.setLevel(project, session, level);
      return launch(project, session, { kind: 'workflow_step', message, target });
    },
    async exec(ref, argv) {
      const { project, session } = sessions.get(ref.project, ref.session);
      return launch(project, session, { kind: 'shell_tool', argv });
    },
    drain: (deadlineMs) => drainRuns(deps, { inFlight, removeMine: () => fleet.removeMine() }, deadlineMs),
    stop(runId, reason) {
      const stopRun = halts.get(runId);
      stopRun?.(reason);
      return stopRun !== undefined;
    },
    releaseWarm: async () => (deps.warm ? deps.warm.close() : 0),
    forgetSession: async (project, session) => deps.warm?.forget(warmKeyOf(project, session)),
    reapLeftovers: () => fleet.reapAll(),
    recover: () => fleet.recover(),
    listContainers: (project) => fleet.list(project),
    removeContainers: (project) => fleet.removeProject(project),
    retireSharedContainers: (project) => fleet.retireShared(project),
    withWorkspace: (project, workspaceId, fn) => withWorkspaceLock(`${project}/${workspaceId}`, fn),
    checkpoints,
  };
}

const DRAIN_REASON = 'berth stopped: the drain deadline passed';
