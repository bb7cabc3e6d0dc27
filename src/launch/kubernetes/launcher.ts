import { Writable } from 'node:stream';
import {
  CoreV1Api,
  CustomObjectsApi,
  Exec,
  KubeConfig,
  NetworkingV1Api,
  NodeV1Api,
  VersionApi,
  type V1PersistentVolumeClaim,
  type V1Pod,
  type V1Status,
} from '@kubernetes/client-node';
import type { KubernetesSettings } from '../../config/kubernetes.js';
import { BerthError } from '../../base/errors.js';
import { LABELS, type ContainerQuery } from '../../plan/labels.js';
import { AGENT_HOME, RUN_DIR_MOUNT, SHARED_MOUNT, WORKSPACE_MOUNT, type RunPlan } from '../../plan/run-plan.js';
import { KUBE_GATEWAY_PORT } from '../../config/kubernetes.js';
import {
  AGENT_CONTAINER,
  berthLabelsOf,
  BERTH_POD_LABELS,
  kubeSelector,
  renderKubeRun,
  renderNetworkPolicy,
  SANDBOX_API,
  type SnapshotFile,
} from './objects.js';
import { VOLUME_LABEL, volumeIdOf } from './volumes.js';
import { assertAgentSandbox, clusterError, statusCode, unlessGone } from './calls.js';
import { readSnapshot } from './snapshot.js';
import type { RelayTokens } from './relay.js';
import { podObserver } from './reports.js';
import {
  managedContainer,
  type ContainerGone,
  type EngineInfo,
  type ExecResult,
  type IdleContainer,
  type Launcher,
  type LauncherCapabilities,
  type LeftoverObserver,
  type ManagedContainer,
  type RunOptions,
  type RunResult,
} from '../launcher.js';
import { workspaceMountTargets } from '../mount-check.js';
import { commandNotFound, CONTAINER_LOST, notInImage, runBounds, SENTRY_RUNTIMES, sentryExec, STOPPED_EXIT } from '../lifecycle.js';

/**
 * The Kubernetes launcher (docs/kubernetes.md): each container berth would start on Docker is an
 * agent-sandbox Sandbox whose pod runs the plan's keep-alive; a command is a pods/exec into it,
 * through the API server. Volumes that outlive a run (a tenant's workspace, a session's home) are
 * PVCs; berth's read-only files go in a ConfigMap per run. A warm session's pod takes its next
 * message once its keep-alive's report (kubernetes/reports.ts) says the last one left nothing behind.
 * Only this file, kubernetes/reports.ts and kubernetes/retire.ts (deleting retired volumes) talk to the cluster.
 */

export interface KubeLauncherOptions {
  kubeConfig: KubeConfig;
  settings: KubernetesSettings;
  /** The gateway listener's tokens and the address pods reach it at (an IP:port: pods get no DNS). */
  relay?: { address: string; tokens: RelayTokens };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Why a pod that is not running will not run (a status the kubelet reported), or undefined while it may still. */
function podTrouble(pod: V1Pod): string | undefined {
  // A container's own words first: they say more than the pod's phase.
  const statuses = [
    ...(pod.status?.initContainerStatuses ?? []).map((cs) => ({ cs, init: true })),
    ...(pod.status?.containerStatuses ?? []).map((cs) => ({ cs, init: false })),
  ];
  for (const { cs, init } of statuses) {
    const waiting = cs.state?.waiting;
    if (waiting && /ErrImage|ImagePull|InvalidImageName|CreateContainerConfigError|CreateContainerError/.test(waiting.reason ?? ''))
      return `${waiting.reason}: ${waiting.message ?? ''}`.trim();
    const ended = cs.state?.terminated;
    // An init container is done when it ends 0 (the workspace's prepare step).
    if (ended && !(init && ended.exitCode === 0))
      return `${init ? `its ${cs.name} step` : 'its container'} ended (${ended.reason ?? 'exit'} ${ended.exitCode}${ended.message ? `: ${ended.message.trim().slice(0, 300)}` : ''})`;
  }
  const phase = pod.status?.phase;
  if (phase === 'Failed' || phase === 'Succeeded')
    return `its pod ended (${phase}${pod.status?.reason ? `: ${pod.status.reason}` : ''}${pod.status?.message ? `, ${pod.status.message}` : ''})`;
  return undefined;
}

export function createKubernetesLauncher(opts: KubeLauncherOptions): Launcher {
  const { kubeConfig, settings } = opts;
  const ns = settings.namespace;
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const custom = kubeConfig.makeApiClient(CustomObjectsApi);
  const exec = new Exec(kubeConfig);
  const tokens = new Map<string, string>(); // relay tokens of the pods this process made
  /** How each warm pod is watched (startIdle's pods; a one-off run's pod is never asked). */
  const observers = new Map<string, LeftoverObserver>();
  let relayAddress: Promise<string> | undefined;
  /** Pods get no DNS (a way out of its own): a Service name in kubernetes.gateway.address becomes its cluster IP. */
  const resolveRelay = (address: string) =>
    (relayAddress ??= (async () => {
      const colon = address.lastIndexOf(':');
      const host = address.slice(0, colon);
      if (/^\d{1,3}(\.\d{1,3}){3}$/.test(host)) return address;
      const svc = await clusterCall(`Service ${host}`, () => core.readNamespacedService({ name: host, namespace: ns }));
      const ip = svc.spec?.clusterIP;
      if (!ip || !/^\d{1,3}(\.\d{1,3}){3}$/.test(ip))
        throw new BerthError('RUN_FAILED', `Service ${host} has no IPv4 cluster IP (${ip ?? 'none'})`, {
          hint: "kubernetes.gateway.address names berth's gateway Service (deploy/) or an IP:port",
        });
      return `${ip}:${address.slice(colon + 1)}`;
    })().catch((err: unknown) => {
      relayAddress = undefined;
      throw err;
    }));

  const clusterCall = async <T>(what: string, call: () => Promise<T>): Promise<T> => {
    try {
      return await call();
    } catch (err) {
      throw clusterError(what, err);
    }
  };

  async function createIfAbsent(create: () => Promise<unknown>, what: string): Promise<void> {
    try {
      await create();
    } catch (err) {
      if (statusCode(err) !== 409) throw clusterError(what, err);
    }
  }

  /**
   * A run's claim, made if absent. One already there is mounted only if it is this very volume
   * (its volume id, installation and project labels) and not on its way out (a retired claim
   * being deleted: the run fails rather than wait for it or mount it).
   */
  async function ensureClaim(claim: V1PersistentVolumeClaim): Promise<void> {
    const name = claim.metadata?.name ?? '';
    try {
      await core.createNamespacedPersistentVolumeClaim({ namespace: ns, body: claim });
      return;
    } catch (err) {
      if (statusCode(err) !== 409) throw clusterError(`volume ${name}`, err);
    }
    const found = await clusterCall(`volume ${name}`, () => core.readNamespacedPersistentVolumeClaim({ name, namespace: ns }));
    const want = claim.metadata?.labels ?? {};
    const differs = [VOLUME_LABEL, LABELS.installation, LABELS.project].filter((k) => found.metadata?.labels?.[k] !== want[k]);
    if (differs.length)
      throw new BerthError(
        'RUN_FAILED',
        `volume ${name} on the cluster is not this run's (its ${differs.join(', ')} differ): berth does not mount it`,
      );
    if (found.metadata?.deletionTimestamp)
      throw new BerthError('RUN_FAILED', `volume ${name} is being deleted (its session or project was deleted meanwhile)`);
  }

  const policies = new Map<string, Promise<void>>();
  /** The installation's NetworkPolicy, made once before its first pod: no pod of berth's runs without it. */
  const ensurePolicy = (installation: string, relayAddress: string | undefined) => {
    let made = policies.get(installation);
    if (!made) {
      const port = relayAddress ? Number(relayAddress.slice(relayAddress.lastIndexOf(':') + 1)) : KUBE_GATEWAY_PORT;
      const body = renderNetworkPolicy({ namespace: ns, installation, gatewayPort: port, berthPodLabels: BERTH_POD_LABELS });
      const net = kubeConfig.makeApiClient(NetworkingV1Api);
      made = createIfAbsent(() => net.createNamespacedNetworkPolicy({ namespace: ns, body }), "the tenants' NetworkPolicy");
      made.catch(() => policies.delete(installation));
      policies.set(installation, made);
    }
    return made;
  };

  async function removeOne(name: string): Promise<void> {
    const token = tokens.get(name);
    if (token) opts.relay?.tokens.revoke(token);
    tokens.delete(name);
    observers.get(name)?.close();
    observers.delete(name);
    await clusterCall(`removing ${name}`, () =>
      Promise.all([
        unlessGone(
          custom.deleteNamespacedCustomObject({
            group: SANDBOX_API.group,
            version: SANDBOX_API.version,
            namespace: ns,
            plural: SANDBOX_API.plural,
            name,
            gracePeriodSeconds: 0,
          }),
        ),
        unlessGone(core.deleteNamespacedConfigMap({ name: `${name}-files`, namespace: ns })),
        // The pod too: the Sandbox's controller would, but a removed run must not wait on it.
        unlessGone(core.deleteNamespacedPod({ name, namespace: ns, gracePeriodSeconds: 0 })),
      ]),
    );
  }

  /** Until the pod runs; a string when it was removed meanwhile (its Sandbox gone, or the pod once seen is). */
  async function waitRunning(name: string): Promise<string | undefined> {
    const end = Date.now() + settings.start_timeout_seconds * 1000;
    let seen = false;
    for (let delay = 50; ; delay = Math.min(delay * 2, 500)) {
      const pod = await unlessGone(core.readNamespacedPod({ name, namespace: ns }));
      if (pod?.status?.phase === 'Running' && pod.status.containerStatuses?.every((c) => c.state?.running)) return undefined;
      if (pod?.metadata?.deletionTimestamp || (seen && !pod)) return 'it was removed';
      seen ||= pod !== undefined;
      if (!pod) {
        const sandbox = await unlessGone(
          custom.getNamespacedCustomObject({
            group: SANDBOX_API.group,
            version: SANDBOX_API.version,
            namespace: ns,
            plural: SANDBOX_API.plural,
            name,
          }),
        );
        if (!sandbox) return 'it was removed';
      }
      const trouble = pod && podTrouble(pod);
      if (trouble) throw new BerthError('RUN_FAILED', `the agent's pod did not start: ${trouble}`);
      if (Date.now() > end) {
        throw new BerthError(
          'RUN_FAILED',
          `the agent's pod did not run within ${settings.start_timeout_seconds} s (${pod ? `phase ${pod.status?.phase ?? 'unknown'}` : "no pod: is agent-sandbox's controller running?"})`,
          {
            hint: "kubectl describe sandbox/pod in berth's namespace says why (scheduling, image, volumes)",
          },
        );
      }
      await sleep(delay);
    }
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

  /** A runtime other than runc is a RuntimeClass the cluster must have: refused before anything is made. */
  async function assertRuntime(runtime: string): Promise<void> {
    if (runtime === 'runc') return;
    try {
      await kubeConfig.makeApiClient(NodeV1Api).readRuntimeClass({ name: runtime });
    } catch (err) {
      if (statusCode(err) !== 404) throw clusterError(`RuntimeClass ${runtime}`, err);
      throw new BerthError('RUNTIME_MISSING', `the cluster has no RuntimeClass "${runtime}"`, {
        hint: 'create it (its handler is the runtime on the nodes, e.g. runsc), or choose another runtime for the project',
      });
    }
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
    await assertRuntime(plan.runtime);
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
    const address = runDir && opts.relay ? await resolveRelay(opts.relay.address) : undefined;
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
        ...(token && address ? { relay: { address, token } } : {}),
      });
      await ensurePolicy(plan.labels[LABELS.installation] ?? '', address);
      for (const claim of objects.claims) await ensureClaim(claim);
      if (token) tokens.set(name, token);
      token = undefined;
      let tCreated = 0;
      try {
        const configMap = objects.configMap;
        if (configMap) await clusterCall('a ConfigMap', () => core.createNamespacedConfigMap({ namespace: ns, body: configMap }));
        await clusterCall('a Sandbox', () =>
          custom.createNamespacedCustomObject({
            group: SANDBOX_API.group,
            version: SANDBOX_API.version,
            namespace: ns,
            plural: SANDBOX_API.plural,
            body: objects.sandbox,
          }),
        );
        o.onCreated?.(name);
        tCreated = performance.now();
        const gone = await waitRunning(name);
        if (gone) {
          await removeOne(name).catch(() => undefined);
          return { gone, containerId: name };
        }
      } catch (err) {
        // Nothing half-made stays: the ConfigMap, the Sandbox and its pod go (and the token with them).
        await removeOne(name).catch(() => undefined);
        throw err;
      }
      return { containerId: name, timings: { createMs: tCreated - t0, startMs: performance.now() - tCreated } };
    } finally {
      if (token) opts.relay?.tokens.revoke(token);
    }
  }

  /** The exec's own environment: the plan's, plus the pod's relay settings (exec has no env of its own). */
  async function envArgv(name: string, plan: RunPlan, argv: string[]): Promise<string[]> {
    const env = { ...plan.env };
    const pod = await core.readNamespacedPod({ name, namespace: ns });
    for (const e of pod.spec?.containers.find((c) => c.name === AGENT_CONTAINER)?.env ?? []) {
      if (e.name.startsWith('BERTH_RELAY_') && e.value !== undefined) env[e.name] = e.value;
    }
    // `env -i` with argv entries: values are never parsed by a shell. In a sentry, under berth-bridge's filter.
    return ['env', '-i', ...Object.entries(env).map(([k, v]) => `${k}=${v}`), ...sentryExec(plan.runtime, argv)];
  }

  async function execIn(containerId: string, plan: RunPlan, argv: string[], o: RunOptions = {}): Promise<ExecResult | ContainerGone> {
    const t0 = performance.now();
    let command: string[];
    try {
      command = await envArgv(containerId, plan, argv);
    } catch (err) {
      if (statusCode(err) === 404) return { gone: true, reason: 'its pod is gone' };
      throw clusterError('reading the pod', err);
    }
    o.onCreated?.(containerId);
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
      // A kubelet refuses an exec into a container that is not running before the upgrade.
      const why = await notRunning(containerId, (phase) => `its pod is ${phase}`, 'its pod is gone');
      if (why) return { gone: true, reason: why };
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

  async function listManaged(query: ContainerQuery): Promise<ManagedContainer[]> {
    const labelSelector = kubeSelector({
      [LABELS.managed]: 'true',
      [LABELS.installation]: query.installation,
      [LABELS.project]: query.project,
      [LABELS.run]: query.run,
    });
    const list = (await clusterCall('listing sandboxes', () =>
      custom.listNamespacedCustomObject({
        group: SANDBOX_API.group,
        version: SANDBOX_API.version,
        namespace: ns,
        plural: SANDBOX_API.plural,
        labelSelector,
      }),
    )) as {
      items: Array<{
        metadata: { name: string; annotations?: Record<string, string>; deletionTimestamp?: string };
        status?: { conditions?: Array<{ type: string; status: string }> };
      }>;
    };
    return list.items.map((s) => {
      const ready = s.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');
      return managedContainer(
        s.metadata.name,
        s.metadata.deletionTimestamp ? 'removing' : ready ? 'running' : 'created',
        berthLabelsOf(s.metadata.annotations),
      );
    });
  }

  async function removeContainers(ids: string[]): Promise<number> {
    await Promise.all(ids.map((id) => removeOne(id)));
    return ids.length;
  }

  async function info(): Promise<EngineInfo> {
    const version = await clusterCall('its version', () => kubeConfig.makeApiClient(VersionApi).getCode());
    const classes = await clusterCall('its RuntimeClasses', () => kubeConfig.makeApiClient(NodeV1Api).listRuntimeClass());
    await assertAgentSandbox(custom, ns); // without it berth can run nothing: /healthz fails, saying so
    return {
      name: `Kubernetes ${version.gitVersion}`,
      version: version.gitVersion,
      apiVersion: `${version.major}.${version.minor}`,
      securityOptions: ['seccomp=RuntimeDefault'],
      rootDir: '',
      runtimes: [{ name: 'runc' }, ...classes.items.map((c) => ({ name: c.metadata?.name ?? '', path: c.handler }))],
      defaultRuntime: 'runc',
    };
  }

  async function capabilities(): Promise<LauncherCapabilities> {
    const e = await info();
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

  return {
    info,
    capabilities,
    run,
    startIdle,
    execIn,
    attachMounts: () =>
      Promise.reject(new BerthError('LAUNCHER_UNSUPPORTED', 'the Kubernetes launcher cannot attach mounts to a started pod')),
    removeContainers,
    listManaged,
    async removeManaged(query) {
      const found = await listManaged(query);
      return removeContainers(found.map((c) => c.id));
    },
  };
}
