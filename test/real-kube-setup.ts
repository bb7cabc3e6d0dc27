import type { TestProject } from 'vitest/node';
import { startRealKubeCluster, type RealKubeInfo } from './helpers/real-kube-cluster.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** The real-node cluster of this run (project kube-real): test/helpers/kube-rig.ts switches to it. */
    realKube?: RealKubeInfo;
  }
}

/**
 * The real tier's one cluster per vitest run (about 25 s to start): every file of the kube-real
 * project gets a namespace of its own on it (test/helpers/real-kube-rig.ts). Torn down after the
 * last file, with the host state it changed.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const t0 = Date.now();
  const cluster = await startRealKubeCluster();
  console.info(`real-node cluster up in ${((Date.now() - t0) / 1000).toFixed(1)} s (${cluster.info.runDir})`);
  project.provide('realKube', cluster.info);
  return () => cluster.stop();
}
