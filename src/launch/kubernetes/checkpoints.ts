import { BerthError } from '../../base/errors.js';
import type { KubernetesSettings } from '../../config/kubernetes.js';
import type { VolumeCheckpoints } from '../volume-checkpoints.js';
import type { KubeApis } from './calls.js';
import { checkpointClaims, claimName } from './checkpoint-claims.js';
import { COPY_MOUNTS, copySteps, parseMeasure, parseTaken, type CopyVolume } from './checkpoint-plan.js';
import { copyPods } from './checkpoint-pod.js';
import { ensureClaim } from './run-objects.js';
import { snapshotCheckpoints } from './snapshot-checkpoints.js';
import { checkpointWay } from './snapshot-plan.js';
import { volumeSnapshots } from './volume-snapshots.js';

/**
 * Checkpoints of a session's claims (launch/volume-checkpoints.ts; docs/checkpoints.md,
 * "Kubernetes"): VolumeSnapshots where the cluster has a snapshot class for the volumes' driver
 * (snapshot-checkpoints.ts), else a copy pod onto the tenant's checkpoint claim. Which claims,
 * objects and scripts is decided in claims.ts, checkpoint-plan.ts and snapshot-plan.ts (pure).
 */
export function clusterCheckpoints(apis: KubeApis, settings: KubernetesSettings): VolumeCheckpoints {
  const claims = checkpointClaims(apis, settings);
  const calls = volumeSnapshots(apis, settings);
  const snapshots = snapshotCheckpoints(apis, settings, claims, calls);
  const pod = copyPods(apis, settings);
  /** A source volume not made yet is an empty directory to the copy pod. */
  const source = (mountPath: string, claim: Parameters<typeof claimName>[0] | undefined): CopyVolume => ({
    mountPath,
    readOnly: true,
    ...(claim ? { claim: claimName(claim) } : {}),
  });

  return {
    async take(v, o, id, keep) {
      const c = claims.of(v, o);
      const [workspace, home] = await Promise.all([claims.read(c.workspace), claims.read(c.home)]);
      // Before the session's first pod: nothing to copy, and going back to it empties the session.
      if (!workspace && !home) {
        keep(undefined);
        return { way: 'copy', bytes: 0, files: 0, empty: true };
      }
      const chosen = checkpointWay(settings.checkpoints.way, await calls.offer((workspace ?? home)!));
      if (chosen.way === 'snapshot') {
        const kept = new Set(keep(undefined));
        await snapshots.take(v, o, id, chosen.className, { workspace, home }, kept);
        return { way: 'snapshot', bytes: 0, files: 0, empty: false };
      }
      const store = claims.store(o, v.project);
      await ensureClaim(apis, store);
      const volumes = [
        source(COPY_MOUNTS.srcWorkspace, workspace),
        source(COPY_MOUNTS.srcHome, home),
        { mountPath: COPY_MOUNTS.store, readOnly: false, claim: claimName(store) },
      ];
      return pod('take', v, o, volumes, async (p) => {
        const size = parseMeasure(await p.step(copySteps.measure(), 'measuring the session'));
        const kept = keep(size); // throws when none is to be kept: nothing is copied
        const bytes = parseTaken(await p.step(copySteps.take(id, kept), 'the copy'), id);
        return { way: 'copy' as const, bytes, files: size.files, empty: false };
      });
    },

    async restore(v, o, checkpoint, drop) {
      if (checkpoint.way === 'snapshot' && !checkpoint.empty) return snapshots.restore(v, o, checkpoint.id, drop);
      const c = claims.of(v, o);
      for (const claim of [c.workspace, c.home]) await ensureClaim(apis, claim);
      const targets: CopyVolume[] = [
        { mountPath: COPY_MOUNTS.dstWorkspace, readOnly: false, claim: claimName(c.workspace) },
        { mountPath: COPY_MOUNTS.dstHome, readOnly: false, claim: claimName(c.home) },
      ];
      if (checkpoint.empty) {
        await pod('clear', v, o, targets, (p) => p.step(copySteps.clear(), 'emptying the session'));
        return { retired: [] };
      }
      const store = claims.store(o, v.project);
      if (!(await claims.read(store)))
        throw new BerthError('CHECKPOINT_NOT_FOUND', `checkpoint ${checkpoint.id} is gone from the cluster (its checkpoint volume is)`);
      const volumes = [...targets, { mountPath: COPY_MOUNTS.store, readOnly: false, claim: claimName(store) }];
      await pod('restore', v, o, volumes, (p) => p.step(copySteps.restore(checkpoint.id, drop), 'putting the checkpoint back'));
      return { retired: [] };
    },

    async fork(from, to, o) {
      const src = claims.of(from, o);
      const dst = claims.of(to, o);
      const [workspace, home] = await Promise.all([claims.read(src.workspace), claims.read(src.home)]);
      for (const claim of [dst.workspace, dst.home]) await ensureClaim(apis, claim);
      const volumes: CopyVolume[] = [
        source(COPY_MOUNTS.srcWorkspace, workspace),
        source(COPY_MOUNTS.srcHome, home),
        { mountPath: COPY_MOUNTS.dstWorkspace, readOnly: false, claim: claimName(dst.workspace) },
        { mountPath: COPY_MOUNTS.dstHome, readOnly: false, claim: claimName(dst.home) },
      ];
      await pod('fork', from, o, volumes, (p) => p.step(copySteps.fork(), 'the fork'));
    },

    async sweep(o, keep) {
      const kept = new Set(keep);
      await snapshots.sweep(o, o.project, (cp) => !kept.has(cp));
    },
  };
}
