import { describe, expect, it } from 'vitest';
import { BerthConfigSchema } from '../../src/config/berth-config.js';
import { ProjectMetadataSchema } from '../../src/config/metadata.js';
import { capabilityNames, mountinfoMounts, netDevInterfaces, PROC_TEXT_MAX, statusFacts } from '../../src/launch/proc-facts.js';
import {
  plannedBoundary,
  receiptDigest,
  receiptOf,
  ReceiptSchema,
  tenantMounts,
  type Boundary,
  type Observed,
  type Policy,
} from '../../src/plan/receipt.js';
import { planRun } from '../../src/plan/run-plan.js';
import { policyOf } from '../../src/runs/receipt-policy.js';

const plan = planRun({
  config: BerthConfigSchema.parse({}),
  project: {
    dir: '/h/p/bot',
    metadataFile: '/h/p/bot/metadata.json',
    metadata: ProjectMetadataSchema.parse({ name: 'bot', workspace_isolation: true }),
  },
  workspace: { id: 'w1', dir: '/h/p/bot/workspaces/w1', isolated: true },
  protectedSnapshot: { dir: '/h/s', entries: [] },
  memory: { dir: '/h/p/bot/memory' },
  run: { id: 'r1', level: 'medium', message: 'hi' },
  installation: 'i1',
});
const policy: Policy = { start: 'cold', folder: 'own', egress: true, allow: ['github.com'], secrets: ['GITHUB_TOKEN'] };
const planned = plannedBoundary(plan);
/** Seen exactly as planned, every fact from where the Docker launcher reads it under runc. */
const asPlanned = (): Observed => ({
  ...structuredClone(planned),
  seen_from: {
    runtime: 'engine',
    limits: 'engine',
    seccomp: 'host-proc',
    capabilities: 'host-proc',
    no_new_privs: 'host-proc',
    namespaces: 'host-proc',
    read_only_root: 'host-proc',
    mounts: 'host-proc',
    interfaces: 'host-proc',
  },
});

describe('the planned boundary', () => {
  it('is what berth asks of every container, with the plan runtime, mounts and limits', () => {
    expect(planned).toEqual({
      runtime: 'runc',
      seccomp: 'filter',
      capabilities: { effective: [], bounding: [] },
      no_new_privs: true,
      namespaces: { pid: 'own', ipc: 'own', net: 'own', mnt: 'own', uts: 'own' },
      read_only_root: true,
      mounts: [
        { target: '/memory', read_only: true },
        { target: '/tmp', read_only: false },
        { target: '/workspace', read_only: false },
      ],
      interfaces: ['lo'],
      limits: { memory_bytes: plan.limits.memoryBytes, nano_cpus: plan.limits.nanoCpus, pids: plan.limits.pids },
    });
  });
});

describe('receiptOf', () => {
  it('a container as planned: no violation, nothing unobserved', () => {
    const observed = asPlanned();
    expect(receiptOf(planned, observed, policy)).toEqual({ version: 1, planned, observed, policy, violations: [], unobserved: [] });
  });

  it('a launcher that drops the read-only flag of a mount fails loudly', () => {
    const observed = asPlanned();
    observed.mounts = observed.mounts!.map((m) => (m.target === '/memory' ? { ...m, read_only: false } : m));
    expect(receiptOf(planned, observed, policy).violations).toEqual(['mount /memory is writable (planned read-only) [host-proc]']);
  });

  it('an extra capability, as the kernel reports it, is a violation', () => {
    const observed = {
      ...asPlanned(),
      ...statusFacts('CapEff:\t0000000000200000\nCapBnd:\t00000000a80425fb\nSeccomp:\t2\nNoNewPrivs:\t1\n'),
    };
    expect(receiptOf(planned, observed, policy).violations).toEqual([
      'effective capabilities sys_admin (planned none) [host-proc]',
      'bounding capabilities chown, dac_override, fowner, fsetid, kill, setgid, setuid, setpcap, net_bind_service, net_raw, sys_chroot, mknod, audit_write, setfcap (planned none) [host-proc]',
    ]);
  });

  it('every other difference is named: runtime, seccomp, no-new-privs, namespaces, root, mounts, interfaces, limits', () => {
    const observed: Observed = {
      ...asPlanned(),
      runtime: 'runc',
      seccomp: 'off',
      no_new_privs: false,
      namespaces: { pid: 'host', ipc: 'own', net: 'host', mnt: 'own', uts: 'own' },
      read_only_root: false,
      mounts: [
        { target: '/tmp', read_only: false },
        { target: '/workspace', read_only: false },
        { target: '/var/run/docker.sock', read_only: false },
      ],
      interfaces: ['eth0', 'lo'],
      limits: { ...planned.limits, pids: 0 },
    };
    const other: Boundary = { ...planned, runtime: 'runsc' };
    expect(receiptOf(other, observed, policy).violations).toEqual([
      'runtime "runc" (planned "runsc") [engine]',
      'seccomp "off" (planned "filter") [host-proc]',
      'no_new_privs false (planned true) [host-proc]',
      "pid namespace is the host's (planned its own) [host-proc]",
      "net namespace is the host's (planned its own) [host-proc]",
      'read_only_root false (planned true) [host-proc]',
      'mount /memory missing (planned read-only) [host-proc]',
      'mount /var/run/docker.sock not planned (writable) [host-proc]',
      'network interfaces eth0 (planned lo alone) [host-proc]',
      `limit pids 0 (planned ${planned.limits.pids}) [engine]`,
    ]);
  });

  it('what nothing could read is unobserved, never held', () => {
    const { seen_from, runtime, limits } = asPlanned();
    const r = receiptOf(planned, { seen_from: { runtime: seen_from.runtime, limits: seen_from.limits }, runtime, limits }, policy);
    expect(r.violations).toEqual([]);
    expect(r.unobserved).toEqual(['seccomp', 'capabilities', 'no_new_privs', 'namespaces', 'read_only_root', 'mounts', 'interfaces']);
  });

  it('the digest is over the content, not the order of keys', () => {
    const a = receiptOf(planned, asPlanned(), policy);
    const reversed = (v: unknown): unknown =>
      Array.isArray(v)
        ? v.map(reversed)
        : v && typeof v === 'object'
          ? Object.fromEntries(
              Object.entries(v)
                .reverse()
                .map(([k, x]) => [k, reversed(x)]),
            )
          : v;
    const b = reversed(a) as typeof a;
    expect(Object.keys(b)[0]).toBe('unobserved');
    expect(receiptDigest(b)).toBe(receiptDigest(a));
    expect(receiptDigest(a)).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(receiptDigest({ ...a, violations: ['x'] })).not.toBe(receiptDigest(a));
  });
});

describe('reading /proc (bounded; the tenant may shape what comes from inside)', () => {
  it('status: seccomp, capabilities, no-new-privs; gVisor has no NoNewPrivs line', () => {
    expect(statusFacts('Name:\tsh\nCapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nNoNewPrivs:\t1\nSeccomp:\t2\n')).toEqual({
      seccomp: 'filter',
      capabilities: { effective: [], bounding: [] },
      no_new_privs: true,
    });
    expect(statusFacts('CapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nSeccomp:\t2\n')).toEqual({
      seccomp: 'filter',
      capabilities: { effective: [], bounding: [] },
    });
    expect(statusFacts('CapEff:\tnot-hex\nSeccomp:\t9\n')).toEqual({});
    expect(capabilityNames('8000000000000001')).toEqual(['chown', 'cap_63']);
  });

  it("mountinfo: each point with its own ro/rw flag, escapes undone; the engine's own left out, the last at a point winning", () => {
    const text = [
      '239 123 0:84 / / ro,relatime - overlay overlay rw',
      '240 239 0:87 / /proc rw,nosuid - proc proc rw',
      '256 239 254:0 /x /workspace rw,relatime - ext4 /dev/vda rw',
      '257 239 254:0 /y /my\\040dir ro,relatime - ext4 /dev/vda rw',
      '258 256 254:0 /z /workspace ro,relatime - ext4 /dev/vda rw',
      '270 239 254:0 /h /etc/hostname ro,relatime - ext4 /dev/vda rw',
      'garbage line',
    ].join('\n');
    const all = mountinfoMounts(text);
    expect(all).toHaveLength(6);
    expect(tenantMounts(all)).toEqual([
      { target: '/my dir', read_only: true },
      { target: '/workspace', read_only: true },
    ]);
    expect(mountinfoMounts(`${'x'.repeat(PROC_TEXT_MAX)}\n1 1 0:1 / /late rw - t t rw`)).toEqual([]);
  });

  it("a hostile container's tables still make a receipt its run record can hold (bounded, and it parses)", () => {
    const mountinfo = Array.from({ length: 500 }, (_, i) => `${i} 1 0:1 / /${'d'.repeat(i % 2 ? 900 : 100)}${i} rw - t t rw`).join('\n');
    const netDev = Array.from({ length: 100 }, (_, i) => `  if${i}: 0 0`).join('\n');
    const observed: Observed = { ...asPlanned(), mounts: tenantMounts(mountinfoMounts(mountinfo)), interfaces: netDevInterfaces(netDev) };
    const receipt = receiptOf(planned, observed, policy);
    expect(ReceiptSchema.parse(receipt)).toEqual(receipt);
    expect(receipt.violations).toHaveLength(64);
  });

  it('net/dev: interface names', () => {
    const text = 'Inter-|   Receive |  Transmit\n face |bytes packets\n    lo:       0       0\n  eth0: 1 2\n';
    expect(netDevInterfaces(text)).toEqual(['eth0', 'lo']);
  });
});

describe("berth's own side of the boundary (policyOf)", () => {
  const ctx = (level: 'low' | 'medium') => {
    const config = BerthConfigSchema.parse({
      secrets: {
        GH_TOKEN: {
          file: '/h/gh',
          grants: [
            { project: 'bot', host: 'api.github.com' },
            { project: 'other', host: 'x.example' },
          ],
        },
      },
    });
    const metadata = ProjectMetadataSchema.parse({ name: 'bot', egress: { allow: ['github.com'] } });
    const p = planRun({
      config,
      project: { dir: '/h/p/bot', metadataFile: '/h/p/bot/metadata.json', metadata },
      workspace: { id: 'w1', dir: '/h/p/bot/workspaces/w1', isolated: false },
      protectedSnapshot: { dir: '/h/s', entries: [] },
      run: { id: 'r1', level, message: 'hi' },
      runDir: '/h/run/r1',
      installation: 'i1',
    });
    return {
      policy: policyOf({ project: { metadata } as never, config, workspace: { id: 'w1', dir: '/h/p/bot', isolated: false } }, p, 'pool'),
      sockets: p.sockets,
    };
  };

  it('with egress: the allowlist and the granted hosts, and the secret names granted to this project alone', () => {
    expect(ctx('medium').policy).toEqual({
      start: 'pool',
      folder: 'project',
      egress: true,
      allow: ['github.com', 'api.github.com'],
      secrets: ['GH_TOKEN'],
    });
  });

  it('without egress (low): nothing is reachable and no secret is added', () => {
    expect(ctx('low').policy).toEqual({ start: 'pool', folder: 'project', egress: false, allow: [], secrets: [] });
  });
});
