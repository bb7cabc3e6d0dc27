import type net from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import type { KubernetesSettings } from '../config/kubernetes.js';
import { BerthError } from '../errors.js';
import { createKubernetesLauncher } from './kubernetes.js';
import { createRelayServer, createRelayTokens } from './kube-relay.js';
import type { Launcher } from './launcher.js';

/** What berth.yaml `launcher: kubernetes` makes: the launcher, and the relay listener serve opens (kubernetes.gateway.listen). */
export interface KubeSetup {
  launcher: Launcher;
  relay: { server: net.Server; host: string; port: number };
}

export function createKubeSetup(settings: KubernetesSettings, onRefused?: (why: string) => void): KubeSetup {
  const kubeConfig = new KubeConfig();
  try {
    if (settings.kubeconfig) kubeConfig.loadFromFile(settings.kubeconfig);
    else kubeConfig.loadFromCluster();
  } catch (err) {
    throw new BerthError('CONFIG_INVALID', `kubernetes.kubeconfig: ${(err as Error).message}`, { issues: [{ field: 'kubernetes.kubeconfig', reason: (err as Error).message }], hint: 'name a kubeconfig file, or run berth in the cluster (deploy/)' });
  }
  const tokens = createRelayTokens();
  const colon = settings.gateway.listen.lastIndexOf(':');
  return {
    launcher: createKubernetesLauncher({ kubeConfig, settings, relay: { address: settings.gateway.address, tokens } }),
    relay: { server: createRelayServer(tokens, onRefused), host: settings.gateway.listen.slice(0, colon), port: Number(settings.gateway.listen.slice(colon + 1)) },
  };
}
