import { describe, expect, it } from 'vitest';
import { checkpointClaim, homeClaim, workspaceClaim } from '../../src/launch/kubernetes/claims.js';
import {
  COPY_MOUNTS,
  copySteps,
  parseMeasure,
  parseTaken,
  renderCopyPod,
  UNWRITABLE_EXIT,
} from '../../src/launch/kubernetes/checkpoint-plan.js';
import {
  checkpointWay,
  claimFromSnapshot,
  pickSnapshotClass,
  renderSnapshot,
  snapshotSelector,
  snapshotState,
  snapshotsToDelete,
} from '../../src/launch/kubernetes/snapshot-plan.js';
import { LABELS } from '../../src/plan/labels.js';
import { restrictedViolations } from '../helpers/pod-security.js';

/**
 * The Kubernetes way of checkpoints as plans (docs/checkpoints.md, "Kubernetes"): the copy pod, its
 * steps, the checkpoint claim, and the VolumeSnapshot path (no CSI snapshotter runs in berth's test
 * clusters: this file is all that checks it).
 */

const ID = '20250101T120000000Z-abc123';
const OLDER = '20250101T110000000Z-def456';
const owner = { installation: 'inst', project: 'p1', volumeId: 'a'.repeat(32), namespace: 'berth', sizeBytes: 1024 ** 3 };

describe('the copy pod', () => {
  const input = {
    name: 'berth-ckpt-take-0123456789',
    namespace: 'berth',
    image: 'berth/shell:latest',
    pullPolicy: 'IfNotPresent',
    user: { uid: 10001, gid: 10001 },
    labels: { [LABELS.managed]: 'true', [LABELS.installation]: 'inst', [LABELS.workspace]: 'w1', [LABELS.run]: 'checkpoint-take' },
    volumes: [
      { mountPath: COPY_MOUNTS.srcWorkspace, readOnly: true, claim: 'berth-ws-1' },
      { mountPath: COPY_MOUNTS.srcHome, readOnly: true },
      { mountPath: COPY_MOUNTS.store, readOnly: false, claim: 'berth-ckpt-1' },
    ],
    node: 'node-a',
    requests: { cpuMillis: 50, memoryBytes: 64 * 1024 ** 2 },
    lifetimeSeconds: 1500,
  };

  it('is a Sandbox like a tenant pod: the agent user, nothing added, read-only root, no token, bounded, on the node holding the volumes', () => {
    const sandbox = renderCopyPod(input);
    const resources = { limits: { cpu: '1', memory: String(256 * 1024 ** 2) }, requests: { cpu: '50m', memory: String(64 * 1024 ** 2) } };
    const securityContext = {
      allowPrivilegeEscalation: false,
      privileged: false,
      capabilities: { drop: ['ALL'] },
      readOnlyRootFilesystem: true,
      runAsNonRoot: true,
    };
    expect(sandbox.spec.podTemplate.spec).toEqual({
      restartPolicy: 'Never',
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      terminationGracePeriodSeconds: 1,
      securityContext: {
        runAsUser: 10001,
        runAsGroup: 10001,
        runAsNonRoot: true,
        fsGroup: 10001,
        fsGroupChangePolicy: 'OnRootMismatch',
        seccompProfile: { type: 'RuntimeDefault' },
      },
      affinity: {
        nodeAffinity: {
          requiredDuringSchedulingIgnoredDuringExecution: {
            nodeSelectorTerms: [{ matchFields: [{ key: 'metadata.name', operator: 'In', values: ['node-a'] }] }],
          },
        },
      },
      containers: [
        {
          name: 'copy',
          image: 'berth/shell:latest',
          imagePullPolicy: 'IfNotPresent',
          command: ['sleep', '1500'],
          workingDir: '/',
          resources,
          securityContext,
          volumeMounts: [
            { name: 'c0', mountPath: '/src/ws', readOnly: true },
            { name: 'c1', mountPath: '/src/home', readOnly: true },
            { name: 'c2', mountPath: '/ckpt' },
          ],
        },
      ],
      volumes: [
        { name: 'c0', persistentVolumeClaim: { claimName: 'berth-ws-1', readOnly: true } },
        // A session's volume not made yet: an empty directory stands in (nothing to copy).
        { name: 'c1', emptyDir: { sizeLimit: '4Ki' } },
        { name: 'c2', persistentVolumeClaim: { claimName: 'berth-ckpt-1' } },
      ],
    });
    expect(restrictedViolations(sandbox.spec.podTemplate.spec)).toEqual([]);
    expect(sandbox.metadata.labels[LABELS.workspace]).toBe('w1');
    expect(sandbox.metadata.annotations['berth.dev/berth.run']).toBe('checkpoint-take');
  });

  it('without a node it is the scheduler’s to place, and asks no more than its limits', () => {
    const spec = renderCopyPod({ ...input, node: undefined, requests: { cpuMillis: 4000, memoryBytes: 8 * 1024 ** 3 } }).spec.podTemplate
      .spec;
    expect(spec.affinity).toBeUndefined();
    expect(spec.containers[0]?.resources?.requests).toEqual({ cpu: '1', memory: String(256 * 1024 ** 2) });
  });
});

describe('its steps', () => {
  it('are fixed scripts; their only arguments are checkpoint ids, after the script', () => {
    const take = copySteps.take(ID, [OLDER]);
    expect(take.slice(0, 2)).toEqual(['sh', '-c']);
    expect(take.slice(3)).toEqual(['berth-checkpoint', ID, OLDER]);
    expect(take[2]).not.toContain(ID);
    expect(copySteps.restore(OLDER, [ID, OLDER]).slice(3)).toEqual(['berth-checkpoint', OLDER, ID, OLDER]);
    expect(copySteps.fork().slice(3)).toEqual(['berth-checkpoint']);
    // A name is never passed where an id goes (the scripts take ids as names under /ckpt).
    for (const bad of ['../x', '*', '', `${ID};rm -rf /`, '-rf']) expect(() => copySteps.take(bad, [])).toThrow(/not a checkpoint id/);
    expect(() => copySteps.restore(ID, ['..'])).toThrow(/not a checkpoint id/);
  });

  it('check first that the agent can write each volume they write (storage ignoring fsGroup names the volume, not a file)', () => {
    const check = (argv: string[]) =>
      /for w in ([^;]*); do \[ -w "\$w" \] \|\| \{ echo "\$w" >&2; exit (\d+); \}; done/.exec(argv[2] ?? '');
    expect(check(copySteps.take(ID, []))?.slice(1)).toEqual(['/ckpt', String(UNWRITABLE_EXIT)]);
    expect(check(copySteps.restore(ID, []))?.[1]).toBe('/dst/ws /dst/home /ckpt');
    expect(check(copySteps.fork())?.[1]).toBe('/dst/ws /dst/home');
    expect(check(copySteps.clear())?.[1]).toBe('/dst/ws /dst/home');
    expect(check(copySteps.measure())).toBeNull(); // it only reads
  });

  it('copy links as links (cp -a, never -L), and never touch a root-owned lost+found', () => {
    for (const argv of [copySteps.take(ID, []), copySteps.restore(ID, []), copySteps.fork(), copySteps.clear(), copySteps.measure()]) {
      const text = argv[2] ?? '';
      expect(text).not.toMatch(/cp -[a-zA-Z]*L|cp -[a-zA-Z]*H|--dereference|chmod -[a-zA-Z]*L|find -L/);
      expect(text).toContain('lost+found');
    }
    expect(copySteps.fork()[2]).toContain('cp -a --');
  });

  it('their output is read as numbers', () => {
    expect(parseMeasure('36\ttotal\napparent 20000\nfiles 13\n')).toEqual({ bytes: 36 * 1024, files: 13 });
    // A sparse file: few blocks, but its copy (busybox cp keeps no holes) takes its whole length.
    expect(parseMeasure('4\ttotal\napparent 52428883\nfiles 2\n')).toEqual({ bytes: 52428883, files: 2 });
    expect(parseMeasure('0\ttotal\napparent 0\nfiles 0\n')).toEqual({ bytes: 0, files: 0 });
    expect(() => parseMeasure('du: oops\n')).toThrow(/nothing readable/);
    expect(parseTaken(`48\t${ID}\n`, ID)).toBe(48 * 1024);
    expect(() => parseTaken(`48\t${OLDER}\n`, ID)).toThrow(/size/);
  });
});

describe('claims', () => {
  it("a tenant's checkpoint volume: named by installation, project, tenant and its directory's volume id, sized as asked", () => {
    const c = checkpointClaim({ ...owner, tenant: 'f'.repeat(32), storageClass: 'local' });
    expect(c).toEqual({
      apiVersion: 'v1',
      kind: 'PersistentVolumeClaim',
      metadata: {
        name: expect.stringMatching(/^berth-ckpt-[0-9a-f]{20}$/),
        namespace: 'berth',
        labels: {
          'berth.managed': 'true',
          'berth.installation': 'inst',
          'berth.project': 'p1',
          'berth.volume': 'a'.repeat(32),
          'berth.tenant': 'f'.repeat(32),
        },
        annotations: {
          'berth.dev/berth.managed': 'true',
          'berth.dev/berth.installation': 'inst',
          'berth.dev/berth.project': 'p1',
          'berth.dev/berth.volume': 'a'.repeat(32),
          'berth.dev/berth.tenant': 'f'.repeat(32),
        },
      },
      spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: String(1024 ** 3) } }, storageClassName: 'local' },
    });
    expect(checkpointClaim({ ...owner, tenant: 'e'.repeat(32) }).metadata?.name).not.toBe(c.metadata?.name);
    expect(checkpointClaim({ ...owner, volumeId: 'b'.repeat(32), tenant: 'f'.repeat(32) }).metadata?.name).not.toBe(c.metadata?.name);
  });

  it('home and workspace claims keep their names (a run and a copy pod find the same volume)', () => {
    expect(homeClaim({ ...owner, session: 's1' }).metadata?.name).toMatch(/^berth-home-[0-9a-f]{20}$/);
    expect(workspaceClaim({ ...owner, workspace: 'w1' }).metadata?.labels?.[LABELS.workspace]).toBe('w1');
  });
});

describe('VolumeSnapshots', () => {
  const classes = [
    { metadata: { name: 'ebs-a' }, driver: 'ebs.csi.aws.com' },
    { metadata: { name: 'ebs-b', annotations: { 'snapshot.storage.kubernetes.io/is-default-class': 'true' } }, driver: 'ebs.csi.aws.com' },
    { metadata: { name: 'rbd' }, driver: 'rbd.csi.ceph.com' },
  ];

  it('the class: the named one of the driver, else its default, else its only one', () => {
    expect(pickSnapshotClass(classes, 'ebs.csi.aws.com')).toBe('ebs-b');
    expect(pickSnapshotClass(classes, 'ebs.csi.aws.com', 'ebs-a')).toBe('ebs-a');
    expect(pickSnapshotClass(classes, 'ebs.csi.aws.com', 'rbd')).toBeUndefined(); // not for this driver
    expect(pickSnapshotClass(classes, 'rbd.csi.ceph.com')).toBe('rbd');
    expect(
      pickSnapshotClass(classes.slice(0, 1).concat({ metadata: { name: 'ebs-c' }, driver: 'ebs.csi.aws.com' }), 'ebs.csi.aws.com'),
    ).toBeUndefined();
    expect(pickSnapshotClass(classes, 'kubernetes.io/host-path')).toBeUndefined();
    expect(pickSnapshotClass(classes, undefined)).toBeUndefined();
  });

  it('the way: snapshots where the cluster serves the API with a class for the driver; a copy pod otherwise, unless snapshot is demanded', () => {
    const offered = { served: true, driver: 'd', className: 'c' };
    expect(checkpointWay('auto', offered)).toEqual({ way: 'snapshot', className: 'c' });
    expect(checkpointWay('auto', { served: false })).toEqual({ way: 'copy' });
    expect(checkpointWay('auto', { served: true, driver: 'd' })).toEqual({ way: 'copy' });
    expect(checkpointWay('copy', offered)).toEqual({ way: 'copy' });
    expect(checkpointWay('snapshot', offered)).toEqual({ way: 'snapshot', className: 'c' });
    expect(() => checkpointWay('snapshot', { served: false })).toThrow(/does not serve snapshot.storage.k8s.io\/v1/);
    expect(() => checkpointWay('snapshot', { served: true, driver: 'd' })).toThrow(
      expect.objectContaining({ code: 'LAUNCHER_UNSUPPORTED' }),
    );
  });

  const so = { installation: 'inst', project: 'p1', tenant: 'f'.repeat(32), namespace: 'berth' };

  it('a checkpoint is one snapshot per volume, labelled with the tenant and the checkpoint', () => {
    const s = renderSnapshot(so, ID, 'home', 'berth-home-1', 'ebs-b');
    expect(s).toEqual({
      apiVersion: 'snapshot.storage.k8s.io/v1',
      kind: 'VolumeSnapshot',
      metadata: {
        name: expect.stringMatching(/^berth-snap-[0-9a-f]{20}$/),
        namespace: 'berth',
        labels: {
          'berth.managed': 'true',
          'berth.installation': 'inst',
          'berth.project': 'p1',
          'berth.tenant': 'f'.repeat(32),
          'berth.checkpoint': ID,
          'berth.side': 'home',
        },
        annotations: expect.objectContaining({ 'berth.dev/berth.checkpoint': ID }),
      },
      spec: { volumeSnapshotClassName: 'ebs-b', source: { persistentVolumeClaimName: 'berth-home-1' } },
    });
    expect(renderSnapshot(so, ID, 'workspace', 'berth-ws-1', 'ebs-b').metadata.name).not.toBe(s.metadata.name);
    expect(snapshotSelector(so, ID)).toBe(
      `berth.managed=true,berth.installation=inst,berth.tenant=${'f'.repeat(32)},berth.checkpoint=${ID}`,
    );
  });

  it('a restore is a new claim from the snapshot, at least the size the snapshot needs', () => {
    const base = homeClaim({ ...owner, session: 's1' });
    const restored = claimFromSnapshot(base, 'berth-snap-1', 2 * 1024 ** 3);
    expect(restored.metadata).toEqual(base.metadata);
    expect(restored.spec).toEqual({
      accessModes: ['ReadWriteOnce'],
      resources: { requests: { storage: String(2 * 1024 ** 3) } },
      dataSource: { apiGroup: 'snapshot.storage.k8s.io', kind: 'VolumeSnapshot', name: 'berth-snap-1' },
    });
    expect(claimFromSnapshot(base, 'x', 1).spec?.resources?.requests?.storage).toBe(String(1024 ** 3));
  });

  it('a snapshot is cut once it has a creation time (or is ready); its error is the driver’s words', () => {
    expect(snapshotState(undefined)).toBe('pending');
    expect(snapshotState({ readyToUse: false })).toBe('pending');
    expect(snapshotState({ creationTime: '2025-01-01T00:00:00Z', readyToUse: false })).toBe('cut');
    expect(snapshotState({ readyToUse: true })).toBe('cut');
    expect(snapshotState({ error: { message: 'quota exceeded' } })).toEqual({ failed: 'quota exceeded' });
  });

  it('snapshots no longer kept go, except one a claim is still being made from', () => {
    const snaps = [
      { name: 's-old', checkpoint: OLDER },
      { name: 's-new', checkpoint: ID },
      { name: 's-restoring', checkpoint: 'gone' },
    ];
    const claims = [
      { dataSource: { kind: 'VolumeSnapshot', name: 's-restoring' }, phase: 'Pending' },
      { dataSource: { kind: 'VolumeSnapshot', name: 's-old' }, phase: 'Bound' },
    ];
    expect(snapshotsToDelete(snaps, new Set([ID]), claims)).toEqual(['s-old']);
    expect(snapshotsToDelete(snaps, new Set([ID, OLDER]), [])).toEqual(['s-restoring']);
  });
});
