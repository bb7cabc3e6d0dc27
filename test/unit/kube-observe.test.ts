import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { podFacts, podLimits, quantity } from '../../src/launch/kubernetes/observe.js';
import { plannedPod } from '../../src/launch/kubernetes/planned.js';
import { plannedBoundary, receiptOf, type Policy } from '../../src/plan/receipt.js';
import type { RunPlan } from '../../src/plan/run-plan.js';

/** A pod's receipt, the engine's side: the pod as the API server keeps it, read without guessing. */
const pod = (agent: Record<string, unknown> = {}, spec: Record<string, unknown> = {}): V1Pod =>
  ({
    spec: {
      containers: [
        { name: 'sidecar', securityContext: { allowPrivilegeEscalation: true } },
        {
          name: 'agent',
          securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } },
          resources: { limits: { cpu: '500m', memory: '512Mi' } },
          ...agent,
        },
      ],
      ...spec,
    },
  }) as V1Pod;

describe("a pod's facts for its receipt", () => {
  it('reads quantities as the API server writes them', () => {
    expect([quantity('1'), quantity('500m'), quantity('512Mi'), quantity('536870912'), quantity('1.5'), quantity('2Gi')]).toEqual([
      1,
      0.5,
      512 * 2 ** 20,
      536870912,
      1.5,
      2 * 2 ** 30,
    ]);
    expect([quantity(undefined), quantity(''), quantity('1e3'), quantity('-1'), quantity('12Xi')]).toEqual([
      undefined,
      undefined,
      undefined,
      undefined,
      undefined,
    ]);
  });

  it("takes the agent container's settings, never another's", () => {
    expect(podFacts(pod())).toEqual({
      runtime: 'runc',
      no_new_privs: true,
      read_only_root: true,
      namespaces: { pid: 'own', ipc: 'own', net: 'own', mnt: 'own', uts: 'own' },
    });
    expect(podLimits(pod())).toEqual({ memory_bytes: 512 * 2 ** 20, nano_cpus: 5e8 });
  });

  it('a pod that shares the host, escalates or runs elsewhere says so; a missing setting is not read', () => {
    const shared = pod(
      { securityContext: { allowPrivilegeEscalation: true }, resources: {} },
      { hostNetwork: true, hostIPC: true, shareProcessNamespace: true, runtimeClassName: 'runsc' },
    );
    expect(podFacts(shared)).toEqual({
      runtime: 'runsc',
      no_new_privs: false,
      namespaces: { pid: 'host', ipc: 'host', net: 'host', mnt: 'own', uts: 'host' },
    });
    expect(podLimits(shared)).toBeUndefined();
    expect(podFacts({ spec: { containers: [{ name: 'other' }] } } as V1Pod)).toEqual({});
  });

  it('limits read in part are compared in part: a pod never shows a pids limit, and that is no violation', () => {
    const plan = {
      runtime: 'runc',
      readOnlyRootfs: true,
      mounts: [],
      limits: { memoryBytes: 512 * 2 ** 20, nanoCpus: 1e9, pids: 256 },
    } as unknown as RunPlan;
    const policy: Policy = { start: 'cold', folder: 'own', egress: false, allow: [], secrets: [] };
    const observed = { limits: podLimits(pod()), seen_from: { limits: 'engine' as const } };
    expect(receiptOf(plannedBoundary(plan), observed, policy).violations).toEqual([
      'limit nano_cpus 500000000 (planned 1000000000) [engine]',
    ]);
  });

  it('plans a pod without the run directory (relayed over TCP, never mounted), and with every other mount the plan has', () => {
    const plan = {
      runtime: 'runc',
      readOnlyRootfs: true,
      mounts: [
        { type: 'bind', source: '/h/ws', target: '/workspace', readOnly: false },
        { type: 'bind', source: '/h/run', target: '/run/berth', readOnly: true },
        { type: 'tmpfs', target: '/tmp', readOnly: false, sizeBytes: 1 },
      ],
      limits: { memoryBytes: 1, nanoCpus: 1, pids: 1 },
    } as unknown as RunPlan;
    expect(plannedBoundary(plan).mounts.map((m) => m.target)).toContain('/run/berth');
    expect(plannedPod(plan)).toEqual({
      ...plannedBoundary(plan),
      mounts: [
        { target: '/tmp', read_only: false },
        { target: '/workspace', read_only: false },
      ],
    });
    const policy: Policy = { start: 'cold', folder: 'own', egress: true, allow: [], secrets: [] };
    const observed = { mounts: plannedPod(plan).mounts, seen_from: { mounts: 'inside' as const } };
    expect(receiptOf(plannedPod(plan), observed, policy).violations).toEqual([]);
    expect(receiptOf(plannedBoundary(plan), observed, policy).violations).toEqual([
      'mount /run/berth missing (planned read-only) [inside]',
    ]);
  });
});
