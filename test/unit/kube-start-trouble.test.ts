import type { CoreV1Event, V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { cpuMillis, KubernetesSchema, memoryBytes } from '../../src/config/kubernetes.js';
import { execArgv } from '../../src/launch/kubernetes/exec-env.js';
import {
  nodeSilence,
  NODE_SILENT_MS,
  podRefusal,
  sandboxRefusal,
  volumesUnwritable,
  waitingReason,
} from '../../src/launch/kubernetes/start-trouble.js';
import type { RunPlan } from '../../src/plan/run-plan.js';

/** How berth reads a pod that does not start (kubernetes/start-trouble.ts), with Kubernetes' own reasons and message shapes. */

const pod = (status: V1Pod['status'], uid = 'u1'): V1Pod => ({
  metadata: { name: 'berth-r1', uid },
  spec: { containers: [{ name: 'agent', volumeMounts: [{ name: 'm3', mountPath: '/tmp' }] }] },
  status,
});
const event = (reason: string, message: string, at: string, uid = 'u1', component = 'kubelet'): CoreV1Event => ({
  metadata: {},
  involvedObject: { kind: 'Pod', name: 'berth-r1', uid },
  reason,
  message,
  type: 'Warning',
  source: { component },
  lastTimestamp: new Date(at),
});

describe('podRefusal', () => {
  it("refuses for lack of room in the scheduler's words, and passes what it only waits on (a claim binding, a node not ready)", () => {
    const unschedulable = (message: string) =>
      pod({ phase: 'Pending', conditions: [{ type: 'PodScheduled', status: 'False', reason: 'Unschedulable', message }] });
    expect(podRefusal(unschedulable('0/1 nodes are available: 1 Insufficient cpu.'), [])).toEqual({
      code: 'POD_REFUSED',
      message: 'no node has room for it (Unschedulable: 0/1 nodes are available: 1 Insufficient cpu.)',
    });
    expect(podRefusal(unschedulable('0/1 nodes are available: 1 pod has unbound immediate PersistentVolumeClaims.'), [])).toBeUndefined();
    const notReady = event(
      'FailedScheduling',
      '0/1 nodes are available: 1 node(s) had taint {node.kubernetes.io/not-ready: }',
      '2026-01-01T00:00:01Z',
      'u1',
      'default-scheduler',
    );
    expect(podRefusal(pod({ phase: 'Pending' }), [notReady])).toBeUndefined();
  });

  it("refuses on the kubelet's warnings (sandbox, mount, attach), newest first, naming the mount path of berth's volume names", () => {
    const p = pod({ phase: 'Pending' });
    const events = [
      { ...event('FailedMount', 'MountVolume.SetUp failed for volume "m3" : no space', '2026-01-01T00:00:01Z'), count: 4 },
      event(
        'FailedCreatePodSandBox',
        'Failed to create pod sandbox: rpc error: code = Unknown desc = RuntimeHandler "runsc" not supported',
        '2026-01-01T00:00:02Z',
      ),
    ];
    expect(podRefusal(p, events)?.message).toBe(
      'FailedCreatePodSandBox (kubelet): Failed to create pod sandbox: rpc error: code = Unknown desc = RuntimeHandler "runsc" not supported',
    );
    expect(podRefusal(p, [events[0]!])?.message).toBe('FailedMount (kubelet): MountVolume.SetUp failed for volume "m3" (/tmp) : no space');
    // A mount the kubelet got past on its next try is no refusal: only one it keeps failing (4 times, or for 10 s).
    const once = event('FailedMount', 'MountVolume.SetUp failed for volume "m1" : failed to sync configmap cache', '2026-01-01T00:00:09Z');
    expect(podRefusal(p, [once])).toBeUndefined();
    expect(podRefusal(p, [{ ...once, count: 3 }])).toBeUndefined();
    expect(podRefusal(p, [{ ...once, count: 3, firstTimestamp: new Date('2025-12-31T23:59:59Z') }])?.message).toMatch(/^FailedMount/);
    // Another pod's events of the same name (an earlier uid), and Normal events, say nothing of this one.
    expect(podRefusal(p, [event('FailedMount', 'x', '2026-01-01T00:00:03Z', 'u0')])).toBeUndefined();
    expect(podRefusal(p, [{ ...events[0]!, type: 'Normal' }])).toBeUndefined();
  });

  it("refuses a pod the kubelet's admission failed (OutOfcpu), in its words", () => {
    const p = pod({
      phase: 'Failed',
      reason: 'OutOfcpu',
      message: "Pod Node didn't have enough resource: cpu, requested: 1000, used: 2000, capacity: 2000",
    });
    expect(podRefusal(p, [])).toMatchObject({
      code: 'POD_REFUSED',
      message: expect.stringContaining("OutOfcpu, Pod Node didn't have enough resource: cpu"),
    });
    // An image the node cannot pull is the run's (RUN_FAILED, podTrouble), not a refusal.
    expect(podRefusal(pod({ phase: 'Failed', reason: 'Error' }), [])).toBeUndefined();
  });
});

describe('waitingReason (what a start timeout says)', () => {
  it("gives the scheduler's words while it waits (a node unreachable, a volume held on another node), else the newest warning", () => {
    const message =
      "0/2 nodes are available: 1 node(s) had taint {node.kubernetes.io/unreachable: }, that the pod didn't tolerate, 1 node(s) had volume node affinity conflict.";
    const waiting = pod({ phase: 'Pending', conditions: [{ type: 'PodScheduled', status: 'False', reason: 'Unschedulable', message }] });
    expect(waitingReason(waiting, [])).toBe(`Unschedulable: ${message}`);
    const older = event('BackOff', 'Back-off pulling image', '2026-01-01T00:00:01Z');
    const newer = event('FailedMount', 'MountVolume.SetUp failed for volume "m3"', '2026-01-01T00:00:05Z');
    expect(waitingReason(pod({ phase: 'Pending' }), [older, newer])).toBe('FailedMount: MountVolume.SetUp failed for volume "m3"');
    expect(waitingReason(pod({ phase: 'Pending' }), [])).toBeUndefined();
    const placed = { ...pod({ phase: 'Pending' }), spec: { nodeName: 'node-b', containers: [] } };
    expect(waitingReason(placed, [])).toBe('placed on node node-b, whose kubelet has not started it (is the node down?)');
    expect(waitingReason(undefined, [])).toBeUndefined();
  });
});

describe('nodeSilence (a pod placed on a node that is gone)', () => {
  const placed = (status: V1Pod['status']): V1Pod => ({ ...pod(status), spec: { nodeName: 'node-b', containers: [] } });
  it("refuses a pod its node's kubelet has not taken up for the grace period, counted on berth's clock from when it first saw it", () => {
    const silent = placed({ phase: 'Pending' });
    const first = nodeSilence(silent, undefined, 1000);
    expect(first).toEqual({ since: 1000 });
    expect(nodeSilence(silent, first.since, 1000 + NODE_SILENT_MS - 1)).toEqual({ since: 1000 });
    expect(nodeSilence(silent, first.since, 1000 + NODE_SILENT_MS)).toEqual({
      since: 1000,
      trouble: { code: 'POD_REFUSED', message: 'placed on node node-b, whose kubelet has not taken it up in 30 s (is the node down?)' },
    });
  });
  it('leaves alone a pod its kubelet answered for (startTime: pulling, mounting), one not yet placed, and one not Pending', () => {
    const late = 1000 + 10 * NODE_SILENT_MS;
    expect(nodeSilence(placed({ phase: 'Pending', startTime: new Date() }), 1000, late)).toEqual({});
    expect(nodeSilence(pod({ phase: 'Pending' }), 1000, late)).toEqual({});
    expect(nodeSilence(placed({ phase: 'Running' }), 1000, late)).toEqual({});
    expect(nodeSilence(undefined, 1000, late)).toEqual({});
  });
});

describe('sandboxRefusal', () => {
  it("refuses once the controller's ReconcilerError has stood its settling time; a cleared one is forgotten", () => {
    const failing = {
      status: {
        conditions: [
          { type: 'Ready', status: 'False', reason: 'ReconcilerError', message: 'Error seen: pods "x" is forbidden: violates PodSecurity' },
        ],
      },
    };
    expect(sandboxRefusal(failing, undefined, 1000)).toEqual({ since: 1000 });
    expect(sandboxRefusal(failing, 1000, 2500)).toEqual({ since: 1000 });
    expect(sandboxRefusal(failing, 1000, 3000).trouble).toEqual({
      code: 'POD_REFUSED',
      message: `agent-sandbox's controller could not make it (Error seen: pods "x" is forbidden: violates PodSecurity)`,
    });
    expect(
      sandboxRefusal({ status: { conditions: [{ type: 'Ready', status: 'False', reason: 'DependenciesNotReady' }] } }, 1000, 9000),
    ).toEqual({});
  });
});

describe('volumesUnwritable', () => {
  it('is the writable check ending non-zero, nothing else', () => {
    const check = (exitCode: number) =>
      pod({
        initContainerStatuses: [
          { name: 'writable', image: '', imageID: '', ready: false, restartCount: 0, state: { terminated: { exitCode } } },
        ],
      });
    expect(volumesUnwritable(check(1))).toBe(true);
    expect(volumesUnwritable(check(0))).toBe(false);
    expect(volumesUnwritable(pod({ phase: 'Pending' }))).toBe(false);
  });
});

describe('execArgv', () => {
  it("sets the plan's environment over the container's, unsets what the pod's first plan set and this one does not, and keeps the relay settings (the token from the Secret)", () => {
    const p: V1Pod = {
      spec: {
        containers: [
          {
            name: 'agent',
            env: [
              { name: 'OLD', value: 'x' },
              { name: 'KEEP', value: 'y' },
              { name: 'BERTH_RELAY_TCP', value: '10.0.0.1:41500' },
              { name: 'BERTH_RELAY_TOKEN', valueFrom: { secretKeyRef: { name: 'berth-r1-relay', key: 'token' } } },
            ],
          },
        ],
      },
    };
    const plan = { env: { KEEP: 'z', NEW: '$(HOME) a b' }, runtime: 'runc' } as unknown as RunPlan;
    expect(execArgv(p, plan, ['sh', '-c', 'true'])).toEqual(['env', '-u', 'OLD', 'KEEP=z', 'NEW=$(HOME) a b', 'sh', '-c', 'true']);
  });
});

describe('kubernetes.cpu_request and memory_request', () => {
  it("take Kubernetes quantities (an idle agent's by default) and refuse anything else, naming the field", () => {
    const d = KubernetesSchema.parse({});
    expect([cpuMillis(d.cpu_request), memoryBytes(d.memory_request)]).toEqual([50, 64 * 1024 ** 2]);
    const s = KubernetesSchema.parse({ cpu_request: 0.25, memory_request: '1Gi' });
    expect([cpuMillis(s.cpu_request), memoryBytes(s.memory_request)]).toEqual([250, 1024 ** 3]);
    expect(cpuMillis('1500m')).toBe(1500);
    expect(memoryBytes('100M')).toBe(100e6);
    for (const bad of [{ cpu_request: '1 cpu' }, { cpu_request: '0m' }, { memory_request: '64MB' }, { memory_request: '1Ki' }]) {
      const r = KubernetesSchema.safeParse(bad);
      expect(r.success).toBe(false);
      expect(r.error?.issues[0]?.path).toEqual([Object.keys(bad)[0]]);
    }
  });
});
