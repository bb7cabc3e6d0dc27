import fs from 'node:fs';
import type net from 'node:net';
import type { KubernetesSettings } from '../../config/kubernetes.js';
import { BerthError } from '../../base/errors.js';
import { plannedPod } from './planned.js';
import { createRelayServer, createRelayTokens } from './relay.js';
import type { Launcher } from '../launcher.js';

/** What berth.yaml `launcher: kubernetes` makes: the launcher, and the relay listener serve opens (kubernetes.gateway.listen). */
export interface KubeSetup {
  launcher: Launcher;
  relay: { server: net.Server; host: string; port: number };
}

/**
 * The Kubernetes launcher, loaded on first use: @kubernetes/client-node adds about 80 MiB to a
 * process (measured), which a berth on Docker must not carry.
 */
const kubeconfigError = (err: unknown, reason: string) =>
  new BerthError('CONFIG_INVALID', `kubernetes.kubeconfig: ${(err as Error).message}`, {
    issues: [{ field: 'kubernetes.kubeconfig', reason }],
    hint: 'name a kubeconfig file, or run berth in the cluster (deploy/)',
  });

/** The cluster berth.yaml names (its kubeconfig, or the pod's own service account), with the client loaded on first use. */
async function loadKubeConfig(settings: KubernetesSettings) {
  const kubeconfig = settings.kubeconfig;
  try {
    if (kubeconfig) fs.accessSync(kubeconfig, fs.constants.R_OK);
  } catch (err) {
    throw kubeconfigError(err, 'cannot be read');
  }
  const { KubeConfig } = await import('@kubernetes/client-node');
  const kubeConfig = new KubeConfig();
  try {
    if (kubeconfig) kubeConfig.loadFromFile(kubeconfig);
    else kubeConfig.loadFromCluster();
  } catch (err) {
    throw kubeconfigError(err, (err as Error).message);
  }
  return kubeConfig;
}

/**
 * Delete the claims of retired volumes (kubernetes/volumes.ts) on the cluster berth.yaml names: the
 * ids whose claims are gone, and why the others are not (yet).
 */
export async function deleteRetiredClaims(
  settings: KubernetesSettings,
  ids: readonly string[],
): Promise<{ gone: string[]; error?: BerthError }> {
  const [kubeConfig, { deleteVolumeClaims }] = await Promise.all([loadKubeConfig(settings), import('./retire.js')]);
  return deleteVolumeClaims(kubeConfig, settings.namespace, ids);
}

export function createKubeSetup(settings: KubernetesSettings, onRefused?: (why: string) => void): KubeSetup {
  const kubeconfig = settings.kubeconfig;
  try {
    if (kubeconfig) fs.accessSync(kubeconfig, fs.constants.R_OK);
  } catch (err) {
    throw kubeconfigError(err, 'cannot be read');
  }
  const tokens = createRelayTokens();
  let loaded: Promise<Launcher> | undefined;
  const load = () =>
    (loaded ??= (async () => {
      const [kubeConfig, { createKubernetesLauncher }] = await Promise.all([loadKubeConfig(settings), import('./launcher.js')]);
      return createKubernetesLauncher({ kubeConfig, settings, relay: { address: settings.gateway.address, tokens } });
    })().catch((err: unknown) => {
      loaded = undefined;
      throw err;
    }));
  const launcher: Launcher = {
    info: () => load().then((l) => l.info()),
    capabilities: () => load().then((l) => l.capabilities()),
    run: (plan, o) => load().then((l) => l.run(plan, o)),
    startIdle: (plan, argv, o) => load().then((l) => l.startIdle(plan, argv, o)),
    execIn: (id, plan, argv, o) => load().then((l) => l.execIn(id, plan, argv, o)),
    attachMounts: (id, plan) => load().then((l) => l.attachMounts(id, plan)),
    removeContainers: (ids) => load().then((l) => l.removeContainers(ids)),
    listManaged: (q) => load().then((l) => l.listManaged(q)),
    removeManaged: (q) => load().then((l) => l.removeManaged(q)),
    observe: (id) => load().then((l) => l.observe!(id)),
    planned: plannedPod,
    checkpoints: {
      take: (v, o, id, keep) => load().then((l) => l.checkpoints!.take(v, o, id, keep)),
      restore: (v, o, c, drop) => load().then((l) => l.checkpoints!.restore(v, o, c, drop)),
      fork: (from, to, o) => load().then((l) => l.checkpoints!.fork(from, to, o)),
      sweep: (o, keep) => load().then((l) => l.checkpoints!.sweep(o, keep)),
    },
  };
  const colon = settings.gateway.listen.lastIndexOf(':');
  return {
    launcher,
    relay: {
      server: createRelayServer(tokens, onRefused),
      host: settings.gateway.listen.slice(0, colon),
      port: Number(settings.gateway.listen.slice(colon + 1)),
    },
  };
}
