import { createObserver } from '../observer.js';
import { observePod } from './observe.js';
import { plannedPod } from './planned.js';
import { Writable } from 'node:stream';
import { Exec, KubeConfig, type V1Pod, type V1Status } from '@kubernetes/client-node';
import { cpuMillis, memoryBytes, type KubernetesSettings } from '../../config/kubernetes.js';
import { BerthError } from '../../base/errors.js';
import { LABELS, type ContainerQuery } from '../../plan/labels.js';
import { AGENT_HOME, RUN_DIR_MOUNT, SHARED_MOUNT, WORKSPACE_MOUNT, type RunPlan } from '../../plan/run-plan.js';
import { AGENT_CONTAINER, renderKubeRun, SANDBOX_API, type SnapshotFile } from './objects.js';
import { volumeIdOf } from './volumes.js';
import { clusterError, kubeApis, lostExec, unlessGone } from './calls.js';
import { createRun, deleteRun, ensureClaim } from './run-objects.js';
import { podTrouble } from './start-trouble.js';
import { assertRuntime, clusterInfo, listRuns } from './cluster-info.js';
import { gatewayOf } from './gateway.js';
import { waitRunning } from './wait-running.js';
import { execArgv } from './exec-env.js';
import { readSnapshot } from './snapshot.js';
import { clusterCheckpoints } from './checkpoints.js';
import type { RelayTokens } from './relay.js';
import { podObserver } from './reports.js';
import {
  type ContainerGone,
  type ExecResult,
  type IdleContainer,
  type Launcher,
  type LauncherCapabilities,
  type LeftoverObserver,
  type RunOptions,
  type RunResult,
} from '../launcher.js';
import { workspaceMountTargets } from '../mount-check.js';
import { commandNotFound, CONTAINER_LOST, notInImage, runBounds, SENTRY_RUNTIMES, STOPPED_EXIT } from '../lifecycle.js';

/**
 * The Kubernetes launcher (docs/kubernetes.md): each container berth would start on Docker is an
 * agent-sandbox Sandbox whose pod runs the plan's keep-alive; a command is a pods/exec into it,
 * through the API server. Volumes that outlive a run (a tenant's workspace, a session's home) are
 * PVCs; berth's read-only files go in a ConfigMap per run. A warm session's pod takes its next
 * message once its keep-alive's report (kubernetes/reports.ts) says the last one left nothing behind.
 * What talks to the cluster: this file (execs, reading pods), kubernetes/run-objects.ts (a run's
 * objects made and deleted), wait-running.ts (a pod until it runs), cluster-info.ts, gateway.ts
 * (the relay's address, the NetworkPolicy), reports.ts and retire.ts.
 */

export interface KubeLauncherOptions {
  kubeConfig: KubeConfig;
  settings: KubernetesSettings;
  /** The gateway listener's tokens and the address pods reach it at (an IP:port: pods get no DNS). */
  relay?: { address: string; tokens: RelayTokens };
}

/** No volume can be added to a running pod (capability lateMounts). */
const noLateMounts = () =>
  Promise.reject(new BerthError('LAUNCHER_UNSUPPORTED', 'the Kubernetes launcher cannot attach mounts to a started pod'));

export function createKubernetesLauncher(opts: KubeLauncherOptions): Launcher {
  const { kubeConfig, settings } = opts;
  const ns = settings.namespace;
  const apis = kubeApis(kubeConfig, ns);
  const { core, custom } = apis;
  const requests = { cpuMillis: cpuMillis(settings.cpu_request), memoryBytes: memoryBytes(settings.memory_request) };
  const exec = new Exec(kubeConfig);
  const gateway = gatewayOf(apis);
  const tokens = new Map<string, string>(); // relay tokens of the pods this process made
  // How each warm pod is watched (startIdle's pods; a one-off run's pod is never asked), and each pod's receipt, read once.
  const observers = new Map<string, LeftoverObserver>();
  const receipts = createObserver((name) => observePod(core, exec, ns, name));

  async function removeOne(name: string): Promise<void> {
    const token = tokens.get(name);
    if (token) opts.relay?.tokens.revoke(token);
    tokens.delete(name);
    observers.get(name)?.close();
    observers.delete(name);
    receipts.forget(name);
    await deleteRun(apis, name);
  }

  /**
   * Why the pod no longer runs (gone, being deleted, ended), in the kubelet's words where it gave
   * some, else `other(phase)` or `gone`; undefined while it runs (or cannot be read).
   */
  async function notRunning(name: string, other: (phase: string) => string, gone: string): Promise<string | undefined> {
    let pod: V1Pod | undefined;
    try {
      pod = await unlessGone(core.readNamespacedPod({ name, namespace: ns }));
    } catch {
      return gone; // unreadable: taken for gone
    }
    if (!pod) return gone;
    if (!pod.metadata?.deletionTimestamp && pod.status?.phase === 'Running') return undefined;
    return podTrouble(pod) ?? other(pod.status?.phase ?? 'not running');
  }

  async function startIdle(plan: RunPlan, keepAliveArgv: string[], o: { onCreated?(id: string): void } = {}): Promise<IdleContainer> {
    const started = await startPod(plan, keepAliveArgv, o);
    if ('gone' in started) throw new BerthError('RUN_FAILED', `the agent's pod went before it ran: ${started.gone}`);
    // Its baseline is taken now, before anything of a tenant's ran in it.
    observers.set(started.containerId, await podObserver(kubeConfig, ns, started.containerId, AGENT_CONTAINER));
    return started;
  }

  /** Make the run's objects and wait for its pod; `gone` when it was removed meanwhile (by berth's reaping, or by hand). */
  async function startPod(
    plan: RunPlan,
    keepAliveArgv: string[],
    o: { onCreated?(id: string): void },
  ): Promise<IdleContainer | { gone: string; containerId: string }> {
    const t0 = performance.now();
    await assertRuntime(apis, plan.runtime);
    const name = `berth-${plan.labels[LABELS.run] ?? 'run'}`.toLowerCase().slice(0, 52);
    const files = new Map<string, SnapshotFile[]>();
    let token: string | undefined;
    for (const m of plan.mounts) {
      if (m.type !== 'bind' || !m.readOnly || m.target === RUN_DIR_MOUNT) continue;
      if (m.target === SHARED_MOUNT || m.target.startsWith(`${SHARED_MOUNT}/`)) continue; // refused by the renderer, in words
      files.set(m.target, readSnapshot(m.source));
    }
    // Each volume is bound to the host directory Docker would mount (kubernetes/volumes.ts): its id names the claim.
    const volumes = new Map<string, string>();
    for (const m of plan.mounts) {
      if (m.type === 'bind' && !m.readOnly && (m.target === WORKSPACE_MOUNT || m.target === AGENT_HOME))
        volumes.set(m.target, volumeIdOf(m.source));
    }
    const runDir = plan.mounts.find((m) => m.type === 'bind' && m.target === RUN_DIR_MOUNT);
    const address = runDir && opts.relay ? await gateway.resolve(opts.relay.address) : undefined;
    if (runDir?.type === 'bind' && opts.relay) token = opts.relay.tokens.issue(runDir.source);
    try {
      const objects = renderKubeRun({
        plan: { ...plan, keepAlive: keepAliveArgv, sysctls: settings.ipc_sysctls ? plan.sysctls : {} },
        name,
        namespace: ns,
        files,
        storageClass: settings.storage_class,
        pullPolicy: settings.pull_policy,
        volumes,
        requests,
        ...(token && address ? { relay: { address, token } } : {}),
      });
      await gateway.policy(plan.labels[LABELS.installation] ?? '', address);
      for (const claim of objects.claims) await ensureClaim(apis, claim);
      if (token) tokens.set(name, token);
      token = undefined;
      let tCreated = 0;
      try {
        await createRun(apis, objects);
        o.onCreated?.(name);
        tCreated = performance.now();
        const gone = await waitRunning(apis, settings, name);
        if (gone) {
          await removeOne(name).catch(() => undefined);
          return { gone, containerId: name };
        }
      } catch (err) {
        // Nothing half-made stays: the ConfigMap, the Secret, the Sandbox and so its pod go (and the token with them).
        await removeOne(name).catch(() => undefined);
        throw err;
      }
      return { containerId: name, timings: { createMs: tCreated - t0, startMs: performance.now() - tCreated } };
    } finally {
      if (token) opts.relay?.tokens.revoke(token);
    }
  }

  /**
   * The exec's argv (kubernetes/exec-env.ts), from the pod as it was made; or why the run is gone.
   * Gone is its Sandbox gone or going, or its pod being deleted: a removed run's pod stays in the
   * API until its kubelet stopped it (removal leaves it to the garbage collector), and takes no exec.
   */
  async function envArgv(name: string, plan: RunPlan, argv: string[]): Promise<string[] | ContainerGone> {
    const [pod, sandbox] = await Promise.all([
      unlessGone(core.readNamespacedPod({ name, namespace: ns })),
      unlessGone(custom.getNamespacedCustomObject({ ...SANDBOX_API, namespace: ns, name })) as Promise<
        { metadata?: { deletionTimestamp?: string } } | undefined
      >,
    ]);
    if (!pod) return { gone: true, reason: 'its pod is gone' };
    if (!sandbox || sandbox.metadata?.deletionTimestamp || pod.metadata?.deletionTimestamp)
      return { gone: true, reason: 'its pod is being removed' };
    return execArgv(pod, plan, argv);
  }

  async function execIn(containerId: string, plan: RunPlan, argv: string[], o: RunOptions = {}): Promise<ExecResult | ContainerGone> {
    const t0 = performance.now();
    let command: string[] | ContainerGone;
    try {
      command = await envArgv(containerId, plan, argv);
    } catch (err) {
      throw clusterError('reading the pod', err);
    }
    if (!Array.isArray(command)) return command;
    o.onCreated?.(containerId);
    await o.onStarted?.(containerId); // every message is an exec: the pod's receipt is read first (once: observer.ts)
    const tCreated = performance.now();
    let removed: Promise<void> | undefined;
    let onStopped!: () => void;
    const stoppedWait = new Promise<void>((r) => (onStopped = r));
    // Stopping an exec means removing its pod (as Docker removes the container).
    const bounds = runBounds(plan, o, () => {
      removed ??= removeOne(containerId).catch(() => undefined);
      onStopped();
    });
    let status: V1Status | undefined;
    let socketClosed!: () => void;
    const closed = new Promise<void>((r) => (socketClosed = r));
    const sink = (which: 'stdout' | 'stderr') =>
      new Writable({ write: (chunk: Buffer, _e, done) => (bounds.output.push(which, chunk), done()) });
    let ws: Awaited<ReturnType<Exec['exec']>>;
    try {
      ws = await exec.exec(
        ns,
        containerId,
        AGENT_CONTAINER,
        command,
        sink('stdout'),
        sink('stderr'),
        null,
        false,
        (s) => void (status = s),
      );
    } catch (err) {
      // A kubelet refuses an exec into a container that is not running (calls.ts lostExec).
      const lost = lostExec(err, await notRunning(containerId, (phase) => `its pod is ${phase}`, 'its pod is gone'));
      if (lost) return lost;
      throw clusterError('an exec', err);
    }
    ws.on('close', () => socketClosed());
    const tStarted = performance.now();
    bounds.arm();
    await Promise.race([closed, stoppedWait]);
    bounds.disarm();
    if (bounds.stopped) {
      ws.close();
      await removed;
    }
    let exitCode: number | undefined;
    if (status?.status === 'Success') exitCode = 0;
    else if (status?.reason === 'NonZeroExitCode') exitCode = Number(status.details?.causes?.find((c) => c.reason === 'ExitCode')?.message);
    let lost: string | undefined;
    let stopped = bounds.why();
    if (!stopped && (exitCode === undefined || Number.isNaN(exitCode))) {
      stopped = CONTAINER_LOST;
      lost = status?.message ?? 'the exec ended without an exit status';
      await removeOne(containerId).catch(() => undefined);
    } else if (!stopped && exitCode !== 0) {
      // A pod removed under the exec (reaped, by hand) fails it with the runtime's status (126,
      // 137, ...), not the command's: as on Docker, its container went away.
      const why = await notRunning(containerId, () => 'it was removed', 'it was removed');
      if (why) {
        stopped = CONTAINER_LOST;
        lost = why;
      }
    }
    let stdout = bounds.output.text('stdout');
    let stderr = bounds.output.text('stderr');
    // `env` (or, in a sentry, berth-bridge's filter) answers 127 for a command it cannot find, as a shell would.
    const missing = SENTRY_RUNTIMES.has(plan.runtime)
      ? stderr === notInImage(argv)
      : /env: .*(No such file|can't execute|not found)/.test(stderr);
    if (exitCode === 127 && stdout === '' && missing) ({ exitCode, stdout, stderr } = commandNotFound(argv, plan.image));
    const tDone = performance.now();
    return {
      containerId,
      exitCode: stopped ? STOPPED_EXIT : (exitCode ?? STOPPED_EXIT),
      stdout,
      stderr,
      truncated: bounds.output.truncated,
      timedOut: bounds.timedOut,
      ...(stopped ? { stopped } : {}),
      ...(lost ? { lost } : {}),
      // A stopped exec's pod is gone; one berth cannot ask is never "clean" (lifecycle.warmVerdict).
      leftovers: stopped ? {} : ((await observers.get(containerId)?.observe(workspaceMountTargets(plan))) ?? {}),
      timings: { createMs: tCreated - t0, startMs: tStarted - tCreated, runMs: tDone - tStarted, totalMs: tDone - t0 },
    };
  }

  async function run(plan: RunPlan, o: RunOptions = {}): Promise<RunResult> {
    const t0 = performance.now();
    // Its pod removed before the command ran (reaped, removed by hand): ended as a stopped run is.
    const lostRun = (containerId: string, lost: string, started = { createMs: 0, startMs: 0 }): RunResult => ({
      containerId,
      exitCode: STOPPED_EXIT,
      stdout: '',
      stderr: '',
      truncated: false,
      timedOut: false,
      lost,
      timings: { ...started, runMs: 0, totalMs: performance.now() - t0 },
    });
    const started = await startPod(plan, plan.keepAlive, { onCreated: o.onCreated });
    if ('gone' in started) return lostRun(started.containerId, started.gone);
    const idle = started;
    try {
      const r = await execIn(idle.containerId, plan, plan.exec, { ...o, onCreated: undefined });
      if ('gone' in r) return lostRun(idle.containerId, r.reason, idle.timings);
      const { stopped: _s, leftovers: _l, ...result } = r;
      return {
        ...result,
        timings: {
          createMs: idle.timings.createMs,
          startMs: idle.timings.startMs,
          runMs: r.timings.runMs,
          totalMs: performance.now() - t0,
        },
      };
    } finally {
      await removeOne(idle.containerId).catch(() => undefined);
    }
  }

  async function removeContainers(ids: string[]): Promise<number> {
    await Promise.all(ids.map((id) => removeOne(id)));
    return ids.length;
  }

  async function capabilities(): Promise<LauncherCapabilities> {
    const e = await clusterInfo(apis);
    return {
      runtimes: e.runtimes.map((r) => r.name),
      defaultRuntime: 'runc',
      hostPaths: false,
      clusterVolumes: true,
      unixSockets: opts.relay !== undefined,
      loopQuotas: false,
      // In a sentry the pod has no cgroup filesystem (gVisor mounts none: measured), so the
      // keep-alive's report has no memory figure and an exec would never be judged clean.
      warm: (runtime) => !SENTRY_RUNTIMES.has(runtime),
      lateMounts: () => false,
    };
  }

  const listManaged = (query: ContainerQuery) => listRuns(apis, query);
  const removeManaged = async (query: ContainerQuery) => removeContainers((await listManaged(query)).map((c) => c.id));

  return {
    info: () => clusterInfo(apis),
    capabilities,
    run,
    startIdle,
    execIn,
    attachMounts: noLateMounts,
    removeContainers,
    listManaged,
    observe: receipts.observe,
    planned: plannedPod,
    checkpoints: clusterCheckpoints(apis, settings),
    removeManaged,
  };
}
