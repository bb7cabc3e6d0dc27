import type { V1PersistentVolumeClaim } from '@kubernetes/client-node';
import type { KubernetesSettings } from '../../config/kubernetes.js';
import { LABELS } from '../../plan/labels.js';
import type { CheckpointOwner, SessionVolumes } from '../volume-checkpoints.js';
import { clusterError, type KubeApis } from './calls.js';
import { claimName, type CheckpointClaims } from './checkpoint-claims.js';
import { deleteVolumeClaims } from './retire.js';
import { ensureClaim } from './run-objects.js';
import {
  claimFromSnapshot,
  renderSnapshot,
  snapshotName,
  snapshotSelector,
  snapshotsToDelete,
  type SnapshotOwner,
  type SnapshotSide,
} from './snapshot-plan.js';
import type { VolumeSnapshotCalls } from './volume-snapshots.js';
import { renewVolumeId } from './volumes.js';

/**
 * Checkpoints as VolumeSnapshots (snapshot-plan.ts decides, volume-snapshots.ts calls): one per
 * claim the session has, a restore as new claims made from them. Untested against a real CSI
 * driver: none runs in berth's test clusters.
 */
export function snapshotCheckpoints(
  apis: KubeApis,
  settings: KubernetesSettings,
  claims: CheckpointClaims,
  snapshots: VolumeSnapshotCalls,
) {
  const { core, ns } = apis;
  const ownerOf = (o: CheckpointOwner, project: string): SnapshotOwner => ({
    installation: o.installation,
    project,
    tenant: o.tenant,
    namespace: ns,
  });

  /** Delete the tenant's snapshots of checkpoints that are `gone`, but none a claim is still being made from. */
  async function sweep(o: SnapshotOwner, gone: (checkpoint: string) => boolean): Promise<void> {
    const mine = await snapshots.list(snapshotSelector(o));
    if (!mine.length) return;
    const list = await core
      .listNamespacedPersistentVolumeClaim({ namespace: ns, labelSelector: `${LABELS.managed}=true` })
      .catch((err: unknown) => Promise.reject(clusterError('listing volumes', err)));
    const keep = new Set(mine.filter((s) => !gone(s.checkpoint)).map((s) => s.checkpoint));
    const sources = list.items.map((c) => ({ dataSource: c.spec?.dataSource, phase: c.status?.phase }));
    for (const name of snapshotsToDelete(mine, keep, sources)) await snapshots.delete(name);
  }

  return {
    sweep: (o: CheckpointOwner, project: string, gone: (checkpoint: string) => boolean) => sweep(ownerOf(o, project), gone),

    /** Snapshots of the claims there are, each waited for until cut; then the ones no longer kept go. */
    async take(
      v: SessionVolumes,
      o: CheckpointOwner,
      id: string,
      className: string,
      have: { workspace?: V1PersistentVolumeClaim; home?: V1PersistentVolumeClaim },
      kept: ReadonlySet<string>,
    ): Promise<void> {
      const so = ownerOf(o, v.project);
      const sides = (['workspace', 'home'] as const).filter((side) => have[side]);
      for (const side of sides) await snapshots.create(renderSnapshot(so, id, side, claimName(have[side]!), className));
      for (const side of sides) await snapshots.waitCut(snapshotName(so, id, side));
      await sweep(so, (cp) => cp !== id && !kept.has(cp));
    },

    /**
     * Each directory is bound to a new volume id and its claim made from the checkpoint's snapshot
     * (a side it has none of starts empty), so the session's next pod mounts the restored claims;
     * the old claims are deleted, or returned to be listed for deletion.
     */
    async restore(v: SessionVolumes, o: CheckpointOwner, id: string, drop: readonly string[]): Promise<{ retired: string[] }> {
      const so = ownerOf(o, v.project);
      const taken = await snapshots.list(snapshotSelector(so, id));
      const old: string[] = [];
      const dirs: Array<[SnapshotSide, string]> = [
        ['workspace', v.workspaceDir],
        ['home', v.homeDir],
      ];
      for (const [side, dir] of dirs) {
        const renewed = renewVolumeId(dir);
        if (renewed.old) old.push(renewed.old);
        const snap = taken.find((s) => s.side === side);
        if (snap) await ensureClaim(apis, claimFromSnapshot(claims.of(v, o)[side], snap.name, snap.restoreBytes));
      }
      const dropped = new Set(drop);
      await sweep(so, (cp) => dropped.has(cp));
      const { gone } = await deleteVolumeClaims(apis.kubeConfig, ns, old);
      return { retired: old.filter((x) => !gone.includes(x)) };
    },
  };
}
